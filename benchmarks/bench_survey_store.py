"""The survey store and the survey's executors, side by side in one run.

    python benchmarks/bench_survey_store.py [--sizes 10 100 1000] [--repeats 3] [--models 16] [--workers 1 2 4]
                                            [--no-cluster] [--d-model 256]

Part 1, **adding the N-th model** (N = 10, 100, 1,000): a store already holding N − 1 synthetic models of
32 layers × 32 heads (per-head rows: 1,024 rows a model) gets ``--repeats`` more models, one at a time, and the
median time of one addition is reported for the CSV store (re-read when changed, whole file rewritten through a
temporary file and a rename, under the lock: what every finished model cost before) and for the SQLite store (one
transaction with the model's rows). The ratio N = 1,000 / N = 10 says whether an addition's cost grows with the
store: flat means within 2×.

Part 2, **a 16-model survey** (``--models``) of synthetic Llama-shaped checkpoints (32 layers, 32 heads, d_model
``--d-model``, per head, into a fresh SQLite store) serially, with a process pool of 1, 2 and 4 workers
(:func:`qkgeometry.surveying.workers.worker_pool`) and on a 2-worker ``dask.distributed.LocalCluster``. Pools are started
and warmed (each worker imports the package) before the clock starts; the start-up is printed apart. Every run's
frame is checked equal to the serial one. Speed-up = serial time / time; per worker = speed-up / workers.

Timings on a shared machine vary by tens of percent: compare the ratios printed in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the command line sets it: idle threads sleep

LAYERS, HEADS = 32, 32


# ------------------------------------------------------------------------------------------------ part 1
def synthetic_rows(k: int) -> pd.DataFrame:
    """The per-head rows of synthetic model ``k``, with the columns of a survey frame."""
    from qkgeometry.surveying.store import SURVEY_COLUMNS

    rng = np.random.default_rng(k)
    n = LAYERS * HEADS
    frame = pd.DataFrame({
        "model": f"synthetic-{k:05d}", "family": "decoder", "component": "self",
        "layer": np.repeat(np.arange(LAYERS), HEADS), "head": np.tile(np.arange(HEADS), LAYERS),
        "symmetry": rng.uniform(-1, 1, n), "directionality": rng.uniform(-1, 1, n), "d_model": 1024,
        "head_dim": 32, "n_heads": HEADS, "n_kv_heads": HEADS, "init": "pretrained", "modality": "language",
        "source": f"/models/synthetic-{k:05d}", "revision": f"{k:024x}", "qkgeometry_version": "bench",
        "per": "head", "num_std": 2.0, "qk_norm": "", "input_norm": "raw"})
    frame["head"] = frame["head"].astype("Int64")
    return frame[SURVEY_COLUMNS]


def append_times(kind: str, n: int, repeats: int, folder: Path) -> list[float]:
    """Seconds for each of ``repeats`` additions to a ``kind`` store that holds ``n - 1`` models."""
    from qkgeometry.surveying.store import SurveyStore

    path = folder / f"store-{n}.{'csv' if kind == 'csv' else 'sqlite'}"
    before = pd.concat([synthetic_rows(k) for k in range(n - 1)], ignore_index=True) if n > 1 else None
    if kind == "csv":
        if before is not None:
            before.to_csv(path, index=False)  # what n - 1 earlier additions left (no formula cells to quote)
        store = SurveyStore(path)  # the rows in memory, the CSV as import and export
        store.read()  # a running survey has the file in memory already: the addition pays no first parse
    else:
        store = SurveyStore(path)
        if before is not None:
            store.put_many(before)
    times = []
    for r in range(repeats):
        rows = synthetic_rows(n - 1 + r)
        t0 = time.perf_counter()
        store.put(rows)
        times.append(time.perf_counter() - t0)
    store.close()
    for p in folder.glob(f"store-{n}.*"):
        p.unlink()
    return times


# ------------------------------------------------------------------------------------------------ part 2
def write_models(root: Path, count: int, d_model: int) -> list[str]:
    import torch
    from safetensors.torch import save_file

    head_dim = d_model // HEADS
    out = []
    for k in range(count):
        folder = root / f"model-{k:02d}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(
            {"model_type": "llama", "hidden_size": d_model, "num_hidden_layers": LAYERS,
             "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "head_dim": head_dim,
             "intermediate_size": 4 * d_model, "vocab_size": 100}))
        gen = torch.Generator().manual_seed(k)
        tensors = {}
        for i in range(LAYERS):
            for name in ("q_proj", "k_proj"):
                tensors[f"model.layers.{i}.self_attn.{name}.weight"] = \
                    torch.randn(HEADS * head_dim, d_model, generator=gen) * 0.02
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
        out.append(str(folder))
    return out


def _warm(_: object = None) -> int:
    import qkgeometry.surveying.scoring  # noqa: F401  (the import a survey task pays once per worker)

    time.sleep(1.0)  # long enough that each worker takes one of the warm-up tasks
    return os.getpid()


def timed_survey(models: list[str], executor, folder: Path, tag: str) -> tuple[float, pd.DataFrame]:
    import qkgeometry as qg

    store = folder / f"survey-{tag}.sqlite"
    t0 = time.perf_counter()
    frame = qg.survey(models, per="head", cache=store, progress=False, executor=executor)
    wall = time.perf_counter() - t0
    assert frame.attrs["failures"].empty, frame.attrs["failures"]
    assert frame.attrs["computed"] == [Path(m).name for m in models]
    return wall, frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", type=int, default=16)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--no-cluster", action="store_true", help="skip the dask LocalCluster run")
    parser.add_argument("--skip-append", action="store_true")
    parser.add_argument("--skip-survey", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="qkgeometry-bench-store-"))
    try:
        if not args.skip_append:
            print(f"Adding one model of {LAYERS} layers x {HEADS} heads ({LAYERS * HEADS} per-head rows) to a "
                  f"store holding N - 1 models; median of {args.repeats} additions")
            rows = []
            for n in args.sizes:
                for kind in ("csv", "sqlite"):  # side by side at each N
                    # one CSV addition at N = 1,000 rewrites a million rows: once is enough to see it
                    t = append_times(kind, n, 1 if kind == "csv" and n >= 1000 else args.repeats, folder)
                    rows.append({"N": n, "store": kind, "median_s": statistics.median(t), "max_s": max(t)})
                    print(f"  N={n:5d}  {kind:6s}  median {statistics.median(t) * 1e3:10.1f} ms", flush=True)
            table = pd.DataFrame(rows).pivot(index="N", columns="store", values="median_s")
            table = table.rename(columns={"csv": "CSV store (s)", "sqlite": "SQLite store (s)"})
            table["CSV / SQLite"] = table["CSV store (s)"] / table["SQLite store (s)"]
            print(table.to_string(float_format=lambda v: f"{v:.4f}"))
            lo, hi = min(args.sizes), max(args.sizes)
            for col in ("CSV store (s)", "SQLite store (s)"):
                print(f"  {col[:-4]}: N={hi} / N={lo} = {table.loc[hi, col] / table.loc[lo, col]:.2f}x")
        if not args.skip_survey:
            survey_part(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def survey_part(args: argparse.Namespace, folder: Path) -> None:
    from qkgeometry.surveying.workers import worker_pool

    models = write_models(folder / "models", args.models, args.d_model)
    print(f"\nSurvey of {args.models} models ({LAYERS} layers x {HEADS} heads, d_model {args.d_model}, per head), "
          f"{os.cpu_count()} cores")
    results = []
    _warm()  # this process imports the survey's modules before its clock starts too, as the workers do
    serial, reference = timed_survey(models, None, folder, "serial")
    results.append({"run": "serial (this process)", "workers": 1, "start_s": 0.0, "wall_s": serial})
    print(f"  serial: {serial:.1f} s", flush=True)
    for n in args.workers:
        t0 = time.perf_counter()
        with worker_pool(n) as pool:
            list(pool.map(_warm, range(n)))
            start = time.perf_counter() - t0
            wall, frame = timed_survey(models, pool, folder, f"pool{n}")
        pd.testing.assert_frame_equal(frame, reference, check_exact=True)
        results.append({"run": f"process pool, {n} worker(s)", "workers": n, "start_s": start, "wall_s": wall})
        print(f"  pool {n}: {wall:.1f} s (+{start:.1f} s start-up)", flush=True)
    if not args.no_cluster:
        try:
            import distributed
        except ImportError:
            print("  dask.distributed is not installed (pip install qkgeometry[cluster]): LocalCluster skipped")
        else:
            t0 = time.perf_counter()
            with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                          dashboard_address=None) as cluster, distributed.Client(cluster) as client:
                client.run(_warm)
                start = time.perf_counter() - t0
                wall, frame = timed_survey(models, client.get_executor(), folder, "dask")
            pd.testing.assert_frame_equal(frame, reference, check_exact=True)
            results.append({"run": "dask LocalCluster, 2 workers", "workers": 2, "start_s": start, "wall_s": wall})
            print(f"  dask 2: {wall:.1f} s (+{start:.1f} s start-up)", flush=True)
    table = pd.DataFrame(results)
    table["speed-up"] = serial / table["wall_s"]
    table["per worker"] = table["speed-up"] / table["workers"]
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print("every parallel frame equals the serial one exactly")


if __name__ == "__main__":
    main()
