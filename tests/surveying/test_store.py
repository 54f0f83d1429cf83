"""qkgeometry.surveying.store and survey(executor=...): the SQLite store (appends, one version per model, kill -9 of
the writer mid-write), duplicates counted once, CSV caches migrated and exported, and workers (a process pool, a
dask LocalCluster, a worker killed mid-model) giving the serial frame exactly."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

import qkgeometry as qg
from bounded import import_distributed, no_hang, one_line_error, unprivileged
from qkgeometry.cli import main
from qkgeometry.surveying.store import SURVEY_COLUMNS, SurveyStore, is_store_file, open_store, read_store
from qkgeometry.surveying.workers import worker_pool

D, HEADS, KV, LAYERS = 16, 4, 2, 3
SRC = str(Path(__file__).resolve().parents[2] / "src")
TESTS = str(Path(__file__).resolve().parents[1])


def make_model(folder: Path, seed: int = 0, layers: int = LAYERS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": D, "num_hidden_layers": layers, "num_attention_heads": HEADS,
         "num_key_value_heads": KV, "intermediate_size": 32, "vocab_size": 50}))
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for i in range(layers):
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = torch.randn(D, D, generator=gen)
        tensors[f"model.layers.{i}.self_attn.k_proj.weight"] = torch.randn(KV * D // HEADS, D, generator=gen)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("models")
    return [str(make_model(root / f"m{k}", seed=k)) for k in range(4)]


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["model", "component", "layer", "head"], kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------------------------------------ the store
def test_store_holds_what_the_survey_returned_and_is_reused(models, tmp_path):
    store = tmp_path / "r.sqlite"
    frame = qg.survey(models[:2], per="head", cache=store, progress=False)
    assert frame.attrs["computed"] == ["m0", "m1"] and is_store_file(store)
    pd.testing.assert_frame_equal(read_store(store), frame, check_exact=True)
    with SurveyStore(store) as s:
        assert s.counts() == (2, 2 * LAYERS * HEADS)
    # the same frame as a CSV cache gives, and a second call computes nothing
    csv = qg.survey(models[:2], per="head", cache=tmp_path / "r.csv", progress=False)
    pd.testing.assert_frame_equal(csv, frame, check_dtype=False, check_exact=True)
    again = qg.survey(models[:2], per="head", cache=store, progress=False)
    assert again.attrs["computed"] == []
    pd.testing.assert_frame_equal(again, frame, check_exact=True)
    # a per-layer survey is another model entry: both stay
    layer = qg.survey(models[:1], per="layer", cache=store, progress=False)
    assert layer.attrs["computed"] == ["m0"] and len(read_store(store)) == len(frame) + LAYERS
    assert list(read_store(store).columns) == SURVEY_COLUMNS


def test_a_resurveyed_model_leaves_exactly_one_version(tmp_path):
    folder = make_model(tmp_path / "m", seed=0)
    for cache in (tmp_path / "r.sqlite", tmp_path / "r.csv"):
        first = qg.survey([str(folder)], per="head", cache=cache, progress=False)
        assert first.attrs["computed"] == ["m"]
    make_model(folder, seed=5)  # new weights: a new fingerprint
    for cache in (tmp_path / "r.sqlite", tmp_path / "r.csv"):
        new = qg.survey([str(folder)], per="head", cache=cache, progress=False)
        assert new.attrs["computed"] == ["m"] and new["revision"].iloc[0] != first["revision"].iloc[0]
        stored = read_store(cache)
        assert len(stored) == LAYERS * HEADS, f"{cache.name}: {len(stored)} rows where {LAYERS * HEADS} belong"
        assert stored["revision"].unique().tolist() == [new["revision"].iloc[0]]
        pd.testing.assert_frame_equal(stored, new, check_dtype=False, check_exact=True)
    # a config with fewer layers: the old version's extra rows go too
    make_model(folder, seed=6, layers=1)
    qg.survey([str(folder)], per="head", cache=tmp_path / "r.sqlite", progress=False)
    with SurveyStore(tmp_path / "r.sqlite") as s:
        assert s.counts() == (1, HEADS)


def test_duplicate_sources_are_surveyed_and_counted_once(models, tmp_path, capsys, monkeypatch):
    import qkgeometry.surveying.scoring as s

    scored = []
    real = s.score_layers
    monkeypatch.setattr(s, "score_layers", lambda model, *a, **k: scored.append(model.name) or real(model, *a, **k))
    here = os.path.relpath(models[0])
    sources = [models[0]] * 30 + [here, models[1], models[0] + "/"]
    frame = qg.survey(sources, cache=tmp_path / "r.sqlite", progress=False)
    assert scored == ["m0", "m1"] and frame.attrs["computed"] == ["m0", "m1"]
    assert len(frame) == 2 * LAYERS and frame["model"].tolist() == ["m0"] * LAYERS + ["m1"] * LAYERS
    assert len(frame.attrs["repeated"]) == 31
    capsys.readouterr()
    assert main(["survey", *[models[2]] * 30, "--out", str(tmp_path / "c.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "29 repeated source(s) surveyed once" in out
    assert f"this run: {LAYERS} rows for 1 model(s); {tmp_path / 'c.sqlite'} holds {LAYERS} rows for 1 model(s)" in out


def test_csv_caches_migrate_into_the_store_and_the_store_exports_and_plots(models, tmp_path, capsys):
    csv = tmp_path / "old.csv"
    frame = qg.survey(models[:2], per="head", cache=csv, progress=False)
    store = tmp_path / "new.sqlite"
    assert main(["export", str(csv), "--store", str(store)]) == 0
    assert "copied 2 model(s)" in capsys.readouterr().out
    pd.testing.assert_frame_equal(read_store(store), read_store(csv), check_dtype=False, check_exact=True)
    assert qg.survey(models[:2], per="head", cache=store, progress=False).attrs["computed"] == []
    out = tmp_path / "export.csv"
    assert main(["export", str(store), "--csv", str(out)]) == 0
    pd.testing.assert_frame_equal(read_store(out), frame, check_dtype=False, check_exact=True)
    pd.testing.assert_frame_equal(qg.summarize(read_store(store)), qg.summarize(frame), check_exact=True)
    assert main(["plot", str(store), "--out-dir", str(tmp_path / "figs")]) == 0
    assert {p.name for p in (tmp_path / "figs").glob("*.png")} >= {"layer_curves.png", "scatter.png",
                                                                   "head_heatmaps_symmetry.png"}


def test_files_that_are_not_survey_stores_are_refused_with_one_line(models, tmp_path, capsys):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    before = other.read_bytes()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all, just text\n" * 40)
    for path, needle in ((other, "not a qkgeometry survey store"), (garbage, "not a qkgeometry survey store")):
        one_line_error(capsys, main(["plot", str(path)]), str(path), needle)
        one_line_error(capsys, main(["survey", models[0], "--out", str(path)]), str(path), needle)
        with pytest.raises(ValueError, match="not a qkgeometry survey store"):
            read_store(path)
    assert other.read_bytes() == before
    with pytest.raises(ValueError, match=r"`cache` must be a \.sqlite store or a \.csv"):
        qg.survey(models[:1], cache=tmp_path / "r.json")
    with pytest.raises(ValueError, match="`cache` must be"):
        open_store(tmp_path / "r.parquet", "`cache`")
    with pytest.raises(TypeError, match="`executor`"):
        qg.survey(models[:1], executor=4)
    with pytest.raises(ValueError, match="`workers`"), worker_pool(0):
        pass
    one_line_error(capsys, main(["survey", models[0], "--workers", "0", "--out", str(tmp_path / "w.sqlite")]),
                   "--workers")


_KILL_MID_WRITE = textwrap.dedent("""
    import sqlite3, sys, time
    marker = sys.argv[1]
    real = sqlite3.connect
    inserts = []
    class Slow(sqlite3.Connection):
        def executemany(self, sql, rows):
            cursor = super().executemany(sql, rows)
            if sql.startswith("INSERT INTO rows"):
                inserts.append(sql)
                if len(inserts) == 2:  # the second model's rows are written, not yet committed: hang here
                    open(marker, "w").close()
                    time.sleep(300)
            return cursor
    sqlite3.connect = lambda *a, **k: real(*a, factory=Slow, **k)
    from qkgeometry.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def test_kill_9_of_the_writer_mid_transaction_keeps_every_finished_model(models, tmp_path):
    store = tmp_path / "r.sqlite"
    marker = tmp_path / "in-transaction"
    args = ["survey", *models[:3], "--per", "head", "--out", str(store)]
    proc = subprocess.Popen([sys.executable, "-c", _KILL_MID_WRITE, str(marker), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": SRC}, start_new_session=True)
    try:
        deadline = time.time() + 240
        while not marker.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), f"the survey never reached the second write: {proc.communicate()[0][-2000:]!r}"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    with no_hang(60):
        stored = read_store(store)  # reopens; the half-written model is rolled back
    assert stored["model"].unique().tolist() == ["m0"] and len(stored) == LAYERS * HEADS
    frame = qg.survey(models[:3], per="head", cache=store, progress=False)
    assert frame.attrs["computed"] == ["m1", "m2"]
    with SurveyStore(store) as s:
        assert s.counts() == (3, 3 * LAYERS * HEADS)
    pd.testing.assert_frame_equal(_sorted(read_store(store)), _sorted(frame), check_exact=True)


# ------------------------------------------------------------------------------------------------ executors
def test_workers_give_the_serial_frame_exactly(models, tmp_path, capsys):
    serial = qg.survey([*models, f"random:{models[0]}"], per="head", progress=False)
    with no_hang(300), worker_pool(2) as pool:
        parallel = qg.survey([*models, f"random:{models[0]}"], per="head", progress=False, executor=pool)
    pd.testing.assert_frame_equal(parallel, serial, check_exact=True)
    assert parallel.attrs["computed"] == serial.attrs["computed"]
    store = tmp_path / "w.sqlite"
    with no_hang(300):
        assert main(["survey", *models, "--per", "head", "--workers", "2", "--out", str(store)]) == 0
    assert "computed 4 model(s)" in capsys.readouterr().out
    pd.testing.assert_frame_equal(_sorted(read_store(store)), _sorted(serial[serial.init == "pretrained"]),
                                  check_exact=True)


@pytest.mark.slow  # a two-process LocalCluster: about a minute on two busy cores
def test_a_dask_local_cluster_gives_the_serial_frame_exactly(models, tmp_path):
    distributed = import_distributed()
    serial = qg.survey(models, per="head", progress=False)
    with no_hang(300), distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        frame = qg.survey(models, per="head", cache=tmp_path / "d.sqlite", progress=False,
                          executor=client.get_executor())
        # the one command a cluster user runs: this process writes the store, the cluster's workers score
        assert main(["survey", *models, "--per", "head", "--dask-scheduler", cluster.scheduler_address,
                     "--out", str(tmp_path / "cli.sqlite")]) == 0
    pd.testing.assert_frame_equal(frame, serial, check_exact=True)
    pd.testing.assert_frame_equal(_sorted(read_store(tmp_path / "d.sqlite")), _sorted(serial), check_exact=True)
    pd.testing.assert_frame_equal(_sorted(read_store(tmp_path / "cli.sqlite")), _sorted(serial), check_exact=True)


def test_kill_9_of_a_worker_loses_only_its_model(models, tmp_path):
    import survey_workers

    store = tmp_path / "r.sqlite"
    markers = tmp_path / "markers"
    markers.mkdir()
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                               initializer=survey_workers.hang_on, initargs=("m1", str(markers)))

    def kill_the_hanging_worker():  # each time m1 runs: a task is blamed after it breaks two pools
        deadline, killed = time.time() + 240, set()
        while time.time() < deadline and len(killed) < 2:  # once the other worker has stored every other model
            pids = [p.name for p in markers.iterdir() if p.name not in killed]
            if pids and store.exists() and len(read_store(store)["model"].unique()) == 3:
                os.kill(int(pids[0]), signal.SIGKILL)
                killed.add(pids[0])
            time.sleep(0.1)

    killer = threading.Thread(target=kill_the_hanging_worker, daemon=True)
    killer.start()
    try:
        with no_hang(300), pytest.warns(UserWarning, match=r"skipped '.*m1': BrokenProcessPool"):
            frame = qg.survey(models, per="head", cache=store, progress=False, executor=pool)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        killer.join(timeout=10)
    assert frame.attrs["computed"] == ["m0", "m2", "m3"]
    failures = frame.attrs["failures"]
    assert failures["source"].tolist() == [models[1]] and failures["error"].tolist() == ["BrokenProcessPool"]
    with no_hang(60):
        stored = read_store(store)  # the store reopens with every model that finished
    assert sorted(stored["model"].unique()) == ["m0", "m2", "m3"] and len(stored) == 3 * LAYERS * HEADS
    again = qg.survey(models, per="head", cache=store, progress=False)
    assert again.attrs["computed"] == ["m1"]
    pd.testing.assert_frame_equal(again, qg.survey(models, per="head", progress=False), check_exact=True)


_HANGING_WORKERS = textwrap.dedent("""
    import signal; signal.signal(signal.SIGINT, signal.default_int_handler)
    import concurrent.futures as cf, sys
    import survey_workers
    class Hanging(cf.ProcessPoolExecutor):  # every pool's workers hang on the model named in argv[1]
        def __init__(self, *args, initializer=None, initargs=(), **kwargs):
            super().__init__(*args, initializer=survey_workers.hang_on_after,
                             initargs=(sys.argv[1], sys.argv[2], initializer, initargs), **kwargs)
    cf.ProcessPoolExecutor = Hanging
    from qkgeometry.cli import main
    sys.exit(main(sys.argv[3:]))
""")


def hanging_survey(models, tmp_path, *, new_session: bool = False) -> tuple[subprocess.Popen, Path, Path]:
    """`qkgeometry survey` of three models on 2 workers that hang on m1, started and waited for until a worker sits
    in m1 and the other two models are stored: (the process, its store, the folder of the hanging worker's pid)."""
    store, markers = tmp_path / "r.sqlite", tmp_path / "markers"
    markers.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _HANGING_WORKERS, "m1", str(markers), "survey", *models[:3],
                             "--workers", "2", "--out", str(store)],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC, TESTS])},
                            start_new_session=new_session, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if list(markers.iterdir()) and store.exists() and len(read_store(store)["model"].unique()) == 2:
            break
        time.sleep(0.1)
    if not list(markers.iterdir()):
        proc.kill()
        pytest.fail(f"no worker reached m1: {proc.communicate(timeout=30)}")
    return proc, store, markers


def test_ctrl_c_with_workers_saves_what_finished_and_stops_the_workers(models, tmp_path):
    proc, store, markers = hanging_survey(models, tmp_path)
    try:
        hanging = int(next(markers.iterdir()).name)
        proc.send_signal(signal.SIGINT)  # to the writer only, as `kill -INT` does: it must stop its workers
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "interrupted" in lines[0] and "m0" in lines[0] and "m2" in lines[0], stderr
    assert sorted(read_store(store)["model"].unique()) == ["m0", "m2"]
    for _ in range(100):  # the worker stuck in m1 was stopped, not left running
        try:
            os.kill(hanging, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(hanging, signal.SIGKILL)
        pytest.fail("the worker stuck in a model was left running after Ctrl-C")


# ------------------------------------------------------------------------------------------------ issue: spreadsheets
def _bare_breaks_outside_quotes(text: str) -> list[int]:
    """Offsets of what a spreadsheet would misread: a carriage return outside a quoted field (a row ends there), and
    a row (or a cell) that begins, outside quotes, with a formula character."""
    found, quoted = [], False
    for i, c in enumerate(text):
        if c == '"':
            quoted = not quoted
        elif not quoted and (c == "\r" or (c in "\n," and text[i + 1:i + 2] in ("=", "+", "@", "\t"))):
            found.append(i)
    return found


def test_a_carriage_return_in_a_name_stays_inside_its_cell_in_every_csv_written(tmp_path, capsys):
    names = ["\r=1+1", "x\r=1+1", "y\r\n@SUM(1)"]
    sources = [str(make_model(tmp_path / name, seed=k)) for k, name in enumerate(names)]
    csv_store = tmp_path / "r.csv"
    frame = qg.survey(sources, cache=csv_store, progress=False)
    sqlite_store = tmp_path / "r.sqlite"
    qg.survey(sources, cache=sqlite_store, progress=False)
    assert main(["export", str(sqlite_store), "--csv", str(tmp_path / "e.csv")]) == 0
    assert main(["score", sources[1], "--out", str(tmp_path / "s.csv")]) == 0
    capsys.readouterr()
    for path in (csv_store, tmp_path / "e.csv", tmp_path / "s.csv"):
        text = path.read_bytes().decode()
        assert "\r" in text and not _bare_breaks_outside_quotes(text), f"{path.name}: {text[:300]!r}"
    back = read_store(csv_store)
    assert list(dict.fromkeys(back["model"])) == names and list(dict.fromkeys(back["source"])) == sources
    pd.testing.assert_frame_equal(back, frame, check_dtype=False, check_exact=True)
    assert qg.survey(sources, cache=csv_store, progress=False).attrs["computed"] == []


_KILL_MID_CSV_WRITE = textwrap.dedent("""
    import sys, time
    import pandas as pd
    marker = sys.argv[1]
    real = pd.DataFrame.to_csv
    def slow(self, path, *args, **kwargs):
        real(self, path, *args, **kwargs)
        if str(path).endswith(".tmp"):  # the temporary is written, not yet renamed: hang here
            open(marker, "w").close()
            time.sleep(300)
    pd.DataFrame.to_csv = slow
    from qkgeometry.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def test_kill_9_of_a_csv_survey_leaves_no_temporary_file_for_good(models, tmp_path):
    csv = tmp_path / "k.csv"
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", _KILL_MID_CSV_WRITE, str(marker), "survey", models[0], "--out",
                             str(csv)], env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC, TESTS])},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and not marker.exists():
            time.sleep(0.1)
        assert marker.exists(), "the survey never reached its CSV write"
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    temps = [p.name for p in tmp_path.iterdir() if p.name.startswith(".k.csv.") and p.name.endswith(".tmp")]
    assert len(temps) == 1 and temps[0].startswith(f".k.csv.{proc.pid}."), temps  # what the kill left
    read_store(csv)  # reading alone changes nothing
    assert qg.survey(models[1:2], cache=csv, progress=False).attrs["computed"] == ["m1"]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # a survey that only reuses what is stored cleans up too
    (tmp_path / temps[0]).write_text("left by a dead writer")
    assert qg.survey(models[1:2], cache=csv, progress=False).attrs["computed"] == []
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# ------------------------------------------------------------------------------------------------ issue: store access
def test_a_read_only_store_is_exported_and_plotted(models, tmp_path):
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    store = shelf / "r.sqlite"
    frame = qg.survey(models[:2], per="head", cache=store, progress=False)
    before = sorted(p.name for p in shelf.iterdir())
    content = store.read_bytes()
    store.chmod(0o444)
    shelf.chmod(0o555)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, TESTS]), "MPLCONFIGDIR": str(out / "mpl")}
    try:
        probe = subprocess.run([*unprivileged(), sys.executable, "-c", f"open({str(store)!r}, 'ab')"],
                               capture_output=True, text=True, env=env)
        assert probe.returncode != 0 and "Permission denied" in probe.stderr, "the store is still writable"
        for args in (["export", str(store), "--csv", str(out / "e.csv")],
                     ["plot", str(store), "--out-dir", str(out / "figs")]):
            res = subprocess.run([*unprivileged(), sys.executable, "-m", "qkgeometry.cli", *args],
                                 capture_output=True, text=True, env=env, timeout=300)
            assert res.returncode == 0, res.stderr
        assert sorted(p.name for p in shelf.iterdir()) == before and store.read_bytes() == content
    finally:
        shelf.chmod(0o755)
        store.chmod(0o644)
    pd.testing.assert_frame_equal(read_store(out / "e.csv"), frame, check_dtype=False, check_exact=True)
    assert (out / "figs" / "head_heatmaps_symmetry.png").exists()


_OPEN_AT_ONCE = textwrap.dedent("""
    import sys, time
    from qkgeometry.surveying.store import SurveyStore
    start, root, n = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    refused = 0
    for j in range(n):
        while time.time() < start + 0.25 * j:
            pass
        try:
            with SurveyStore(f"{root}/s{j}.sqlite") as s:
                assert s.counts() == (0, 0)
        except Exception as e:
            refused += 1
            print(type(e).__name__, e, file=sys.stderr)
    print(refused)
""")


def test_six_processes_opening_one_new_store_in_the_same_instant_all_succeed(tmp_path):
    n = 12
    start = time.time() + 4
    procs = [subprocess.Popen([sys.executable, "-c", _OPEN_AT_ONCE, str(start), str(tmp_path), str(n)],
                              env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = [p.communicate(timeout=240) for p in procs]
    refused = sum(int(out.strip() or n) for out, _ in results)
    assert refused == 0, f"{refused} of {6 * n} opens refused: " + " | ".join(err for _, err in results if err)
    for j in range(n):
        with SurveyStore(tmp_path / f"s{j}.sqlite") as s:
            assert s.counts() == (0, 0)


def test_no_message_advises_deleting_a_store(models, tmp_path, capsys):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all, just text\n" * 40)
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("a,b\n1,2\n")
    for path in (other, garbage, bad_csv):
        for args in (["plot", str(path)], ["survey", models[0], "--out", str(path)],
                     ["export", str(path), "--csv", str(tmp_path / "e.csv")]):
            line = one_line_error(capsys, main(args), str(path))
            assert "delete" not in line.lower() and "remove" not in line.lower(), line
    assert other.exists() and garbage.exists() and bad_csv.read_text() == "a,b\n1,2\n"


@pytest.mark.parametrize("column, value", [("symmetry", float("nan")), ("directionality", float("inf")),
                                           ("model", None), ("layer", None), ("d_model", None),
                                           ("n_kv_heads", float("nan")), ("head_dim", 2.5),
                                           ("revision", float("nan"))])
def test_putting_rows_the_store_cannot_hold_is_refused_clearly(models, tmp_path, column, value):
    frame = qg.survey(models[:1], per="head", progress=False)
    store = tmp_path / "r.sqlite"
    bad = frame.copy()
    bad[column] = bad[column].astype(object)
    bad.loc[2, column] = value
    with SurveyStore(store) as s:
        with pytest.raises(ValueError, match=rf"`frame`: {column} .*row 2"):
            s.put(bad)
        with pytest.raises(ValueError, match=rf"`frame`: {column} .*row 2"):
            s.put_many(bad)
        assert s.counts() == (0, 0)
        s.put(frame)
        assert s.counts() == (1, len(frame))


def test_put_of_several_models_is_refused_and_put_many_stores_each(models, tmp_path):
    """put() of a frame that holds two models used to store every row under the first one's identity."""
    frame = qg.survey(models[:2], progress=False)
    with SurveyStore(tmp_path / "r.sqlite") as s:
        with pytest.raises(ValueError, match=r"holds the rows of 2 models .*call put_many\(frame\)"):
            s.put(frame)
        assert s.counts() == (0, 0)
        assert s.put_many(frame) == 2
        pd.testing.assert_frame_equal(s.read(), frame, check_exact=True)


def test_put_many_with_a_missing_revision_names_the_column(models, tmp_path, capsys):
    frame = qg.survey(models[:2], progress=False)
    frame.loc[frame["model"] == "m1", "revision"] = float("nan")
    with SurveyStore(tmp_path / "r.sqlite") as s:
        with pytest.raises(ValueError, match=r"`frame`: revision is missing in row 3 \(model 'm1'\)"):
            s.put_many(frame)
        assert s.counts() == (0, 0)


_V1_SCHEMA = """
CREATE TABLE models (id INTEGER PRIMARY KEY, source TEXT NOT NULL, per TEXT NOT NULL, num_std REAL NOT NULL,
    qk_norm TEXT NOT NULL, input_norm TEXT NOT NULL, revision TEXT NOT NULL, qkgeometry_version TEXT NOT NULL,
    model TEXT NOT NULL, n_rows INTEGER NOT NULL, UNIQUE (source, per, num_std, qk_norm, input_norm));
CREATE TABLE rows (model_id INTEGER NOT NULL REFERENCES models(id), model TEXT NOT NULL, family TEXT,
    component TEXT NOT NULL, layer INTEGER NOT NULL, head INTEGER, symmetry REAL NOT NULL, directionality REAL NOT NULL,
    d_model INTEGER, head_dim INTEGER, n_heads INTEGER, n_kv_heads INTEGER, init TEXT, modality TEXT);
CREATE INDEX rows_by_model ON rows (model_id);
CREATE INDEX models_by_source ON models (source);
PRAGMA application_id = 1902864177;
PRAGMA user_version = 1;
"""


def _v1_store(path: Path, frame: pd.DataFrame) -> None:
    """A store as format 1 wrote it (no trajectory columns), holding ``frame``'s models."""
    conn = sqlite3.connect(str(path))
    conn.executescript(_V1_SCHEMA)
    row_cols = ["model", "family", "component", "layer", "head", "symmetry", "directionality", "d_model", "head_dim",
                "n_heads", "n_kv_heads", "init", "modality"]
    for source, part in frame.groupby("source", sort=False):
        first = part.iloc[0]
        model_id = conn.execute(
            "INSERT INTO models (source, per, num_std, qk_norm, input_norm, revision, qkgeometry_version, model, "
            "n_rows) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (source, first["per"], float(first["num_std"]), first["qk_norm"], first["input_norm"], first["revision"],
             first["qkgeometry_version"], first["model"], len(part))).lastrowid
        conn.executemany(f"INSERT INTO rows VALUES ({', '.join('?' * 14)})",
                         [(model_id, *(None if pd.isna(v) else v.item() if hasattr(v, "item") else v
                                       for v in r)) for r in part[row_cols].itertuples(index=False)])
    conn.commit()
    conn.close()


def test_a_format_1_store_is_migrated_in_place_with_its_steps(tmp_path):
    """Format 1 kept steps only in the checkpoints' names; opening it for writing adds the trajectory columns, fills
    them from those names once, and marks the store with the current format. Read-only, it is read as the current
    format and left as is."""
    from qkgeometry.surveying.store import STORE_FORMAT, read_store
    from qkgeometry.surveying.trajectories import read_trajectory

    run = tmp_path / "run"
    sources = [make_model(run / f"checkpoint-{s}", seed=s) for s in (0, 10)] + [make_model(tmp_path / "plain")]
    frame = qg.survey([str(s) for s in sources], progress=False)
    old = tmp_path / "old.sqlite"
    _v1_store(old, frame)
    before = old.read_bytes()
    ro = read_store(old, trajectory=True)  # read-only: as the migration would fill it, the file untouched
    assert old.read_bytes() == before
    assert STORE_FORMAT == 3
    with SurveyStore(old) as s:
        assert s._conn.execute("PRAGMA user_version").fetchone()[0] == 3
        migrated = s.read(trajectory=True)
    pd.testing.assert_frame_equal(ro, migrated)
    pd.testing.assert_frame_equal(migrated[SURVEY_COLUMNS], frame, check_exact=True)
    places = migrated.drop_duplicates("source").set_index("source")
    assert list(places["step"].astype(object).where(places["step"].notna(), None)) == [0, 10, None]
    assert list(places["run"].iloc[:2]) == [str(run.resolve())] * 2 and places["run"].iloc[2] is None
    assert list(read_trajectory(old)["checkpoint"].unique()) == ["checkpoint-0", "checkpoint-10"]
    again = qg.survey([str(s) for s in sources], cache=old, progress=False)  # the migrated store is reused
    assert again.attrs["computed"] == []


def test_trajectory_columns_survive_a_csv_store_and_an_export(models, tmp_path):
    from qkgeometry.surveying.store import export_csv, read_store
    from qkgeometry.surveying.trajectories import trajectory

    pairs = [(models[0], 5), (models[1], 7)]
    csv = tmp_path / "t.csv"
    frame = trajectory(pairs, cache=csv)
    back = read_store(csv, trajectory=True)
    assert sorted(back.drop_duplicates("source")["step"]) == [5, 7]
    assert trajectory(pairs, cache=csv).attrs["computed"] == []
    export_csv(csv, tmp_path / "e.csv")
    store = tmp_path / "m.sqlite"
    qg.surveying.migrate_csv(tmp_path / "e.csv", store)
    assert sorted(read_store(store, trajectory=True).drop_duplicates("source")["step"]) == [5, 7]
    assert list(read_store(store).columns) == SURVEY_COLUMNS and len(frame) == len(back)


def test_a_training_step_is_appended_without_a_frame_check_and_may_hold_nan(models, tmp_path):
    """append() is the path of a model scored while it trains: one step's rows, the same columns put() writes,
    a score that is NaN (weights that diverged) kept as missing; a format-2 store (scores NOT NULL) is migrated
    to hold one, with every row it had."""
    from qkgeometry.surveying.scoring import score_layers
    from qkgeometry.surveying.store import read_store

    with qg.load_qk(str(models[0])) as m:
        rows = score_layers(m)
    old = tmp_path / "v2.sqlite"
    with SurveyStore(old) as s:
        s.put(qg.survey([str(models[1])], progress=False))
    conn = sqlite3.connect(old)  # lay it out as format 2 did: scores NOT NULL
    conn.executescript("ALTER TABLE rows RENAME TO r2; CREATE TABLE rows (model_id INTEGER NOT NULL, model TEXT NOT "
                       "NULL, family TEXT, component TEXT NOT NULL, layer INTEGER NOT NULL, head INTEGER, symmetry "
                       "REAL NOT NULL, directionality REAL NOT NULL, d_model INTEGER, head_dim INTEGER, n_heads "
                       "INTEGER, n_kv_heads INTEGER, init TEXT, modality TEXT); INSERT INTO rows SELECT * FROM r2; "
                       "DROP TABLE r2; PRAGMA user_version = 2;")
    conn.close()
    before = read_store(old)
    key = {"source": "live:r/checkpoint-3", "per": "layer", "num_std": 2.0, "qk_norm": "", "input_norm": "raw",
           "revision": "live", "qkgeometry_version": "x", "init": "pretrained", "modality": "language",
           "run": "r", "checkpoint": "checkpoint-3", "stage": None, "step": 3, "tokens": None}
    rows.loc[1, "symmetry"] = float("nan")
    with SurveyStore(old) as s:
        s.append(rows, key)
        assert s._conn.execute("PRAGMA user_version").fetchone()[0] == 3
        s.append(rows, key)  # the same step again replaces it
    back = read_store(old, trajectory=True)
    live = back[back["source"] == key["source"]].reset_index(drop=True)
    assert len(live) == len(rows) and live["step"].tolist() == [3] * len(rows)
    assert pd.isna(live.loc[1, "symmetry"]) and live["symmetry"].drop(1).tolist() == rows["symmetry"].drop(1).tolist()
    pd.testing.assert_frame_equal(back[back["source"] != key["source"]][SURVEY_COLUMNS].reset_index(drop=True),
                                  before)
