"""The scoring kernel side by side: the dense method, qkgeometry and TransformerLens's FactoredMatrix on the same
weights, the float64 GEMM peak measured in the same run, and the end-to-end figures that the kernel is for.

Sections (each prints its own table; every timing is a median of round-robin rounds, with the 1-minute load
average, because this machine is shared):

1. **Kernel, in process**, on the first layers of ``syn16`` (16 layers, d = 2048, 16/4 heads, head_dim 128), all
   three methods on the same float64 weights, one round = one call of each, then the GEMM:

   * *dense*: for every head, form ``M = W_Q^h W_K^{g(h)ᵀ}`` (d × d) and compute both scores from it;
   * *qkgeometry*: :func:`qkgeometry.layer_scores` (numpy by default; ``--device cuda``: torch on the GPU);
   * *TransformerLens*: ``FactoredMatrix(W_Q, W_Kᵀ)`` per head, batched over heads, as its users would compute the
     two scores: symmetry ``tr((BA)²) / ‖M‖²`` from ``.BA`` and ``.norm()``, directionality from the dense
     ``.AB`` (it has no row or column norms);
   * *GEMM*: a square 2048³ float64 product, the machine's peak in this run; the kernel's FLOPs
     (``(4·n_heads + n_kv_heads) · 2·d·r²`` per layer, every product priced as a full GEMM) over its time, as a
     fraction of it (the roofline), and the same with the Grams priced at the half product that BLAS performs.

2. **End to end** (fresh processes under GNU time, median of ``--repeats`` round-robin rounds): ``qkgeometry score
   DIR --per head`` against the dense method from a transformers model (the figures of the issue), wall time and
   peak RSS, with their ratios; the scores of the two are compared to 1e-10.
3. **Cold start**: ``qkgeometry score offline:minilm-l6`` from a fresh process, and where its time goes
   (``python -X importtime``: numpy, pandas, safetensors, qkgeometry; torch and transformers must not appear).
4. **7B-shaped per head** (``--seven-b``; 32 layers, d = 4096, 32/8 heads, head_dim 128, bf16 Q/K only, 1.3 GB on
   disk): wall time and peak RSS of ``qkgeometry score --per head`` next to its FLOP floor (its FLOPs at the GEMM
   peak of section 1).

    python benchmarks/bench_kernel.py [--repeats 3] [--layers 2] [--skip-e2e] [--seven-b] [--device cuda]

Needs the ``bench`` extra (``pip install -e .[bench]``: TransformerLens). It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parent / "src")
sys.path.insert(0, str(HERE))

from bench_scores import DENSE, SHAPES, load, timed, write_checkpoint  # noqa: E402

SEVEN_B = {"layers": 32, "d": 4096, "heads": 32, "kv_heads": 8}


def env() -> dict:
    return {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def median_iqr(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f}"
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.3f} [{q[0]:.3f}-{q[2]:.3f}]"


# ---------------------------------------------------------------------------------------------- 1. kernel
def random_layers(shape: dict, n_layers: int, seed: int = 0):
    """``n_layers`` layers of bf16-rounded float64 weights in QKLayer's layout (n, d, r) views of (n, r, d)."""
    import numpy as np

    d, h, kv = shape["d"], shape["heads"], shape["kv_heads"]
    r = d // h
    rng = np.random.default_rng(seed)

    def bf16(*s):  # round to bfloat16 (what the checkpoint holds), then widen: the same numbers for every method
        x = (rng.standard_normal(s, dtype=np.float32) * 0.02).view(np.uint32)
        return ((x + 0x8000) & 0xFFFF0000).view(np.float32).astype(np.float64)

    return [(bf16(h, r, d).swapaxes(1, 2), bf16(kv, r, d).swapaxes(1, 2)) for _ in range(n_layers)]


def dense_scores(layers):
    import numpy as np

    import qkgeometry as qg

    sym, dirn = [], []
    for wq, wk in layers:
        g = wq.shape[0] // wk.shape[0]
        for h in range(wq.shape[0]):
            M = wq[h] @ wk[h // g].T  # d × d, materialised
            sym.append(qg.symmetry_score(M))
            dirn.append(qg.directionality_score(M))
    return np.array(sym), np.array(dirn)


def qkgeometry_scores(layers, device=None):
    import numpy as np

    import qkgeometry as qg

    out = [qg.layer_scores(wq, wk, heads=True, layer=False, device=device).heads for wq, wk in layers]
    return np.concatenate([s.symmetry for s in out]), np.concatenate([s.directionality for s in out])


def transformer_lens_scores(layers, device="cpu"):
    """Per-head scores through TransformerLens's FactoredMatrix, batched over heads, float64."""
    import numpy as np
    import torch
    from transformer_lens import FactoredMatrix

    import qkgeometry as qg

    sym, dirn = [], []
    for wq, wk in layers:
        g = wq.shape[0] // wk.shape[0]
        a = torch.as_tensor(wq, device=device)  # (h, d, r)
        b = torch.as_tensor(wk, device=device).repeat_interleave(g, dim=0).mT  # (h, r, d)
        fm = FactoredMatrix(a, b)  # M_h = A_h B_h
        ba = fm.BA
        trace = torch.diagonal(ba @ ba, dim1=-2, dim2=-1).sum(-1)
        sym.append((trace / fm.norm() ** 2).cpu().numpy())
        dirn.append(np.atleast_1d(qg.directionality_score(fm.AB)))
    return np.concatenate(sym), np.concatenate(dirn)


def kernel_section(shape: dict, n_layers: int, repeats: int, device: str | None) -> float:
    import numpy as np

    layers = random_layers(shape, n_layers)
    d, h, kv = shape["d"], shape["heads"], shape["kv_heads"]
    r = d // h
    flops = n_layers * (4 * h + kv) * 2 * d * r * r
    square = np.random.default_rng(1).standard_normal((2048, 2048))
    sync = lambda: None  # noqa: E731
    dev_layers = layers
    if device is not None:
        import torch

        sync = torch.cuda.synchronize if device.startswith("cuda") else sync
        dev_layers = [(torch.as_tensor(wq, device=device), torch.as_tensor(wk, device=device))
                      for wq, wk in layers]
        square = torch.as_tensor(square, device=device)
    methods = {
        "dense (form every d×d W_qk)": lambda: dense_scores(layers),
        "qkgeometry layer_scores": lambda: qkgeometry_scores(dev_layers),
        "TransformerLens FactoredMatrix": lambda: transformer_lens_scores(layers, device or "cpu"),
        "GEMM 2048³ float64": lambda: square @ square,
    }
    if device is None:  # the peak is the better of the BLAS default and one thread (the kernel may use either)
        from threadpoolctl import threadpool_limits

        def one_thread_gemm():
            with threadpool_limits(1, user_api="blas"):
                return square @ square

        methods["GEMM 2048³ float64, 1 thread"] = one_thread_gemm
    results, times, loads = {}, {k: [] for k in methods}, []
    for name, fn in methods.items():  # warm-up (imports, first-call setup), and the values
        results[name] = fn()
        sync()
    for _ in range(repeats):
        for name, fn in methods.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - t0)
        loads.append(load())
    med = {k: statistics.median(v) for k, v in times.items()}
    peak = 2 * 2048 ** 3 / min(v for k, v in med.items() if k.startswith("GEMM")) / 1e9
    rate = flops / med["qkgeometry layer_scores"] / 1e9
    where = device or "CPU, numpy"
    print(f"\n1. kernel, {n_layers} layers x {h} heads (d={d}, {h}/{kv} heads, r={r}), float64, {where}; median of "
          f"{repeats} round-robin rounds; load {min(loads):.1f}-{max(loads):.1f}")
    print(f"   {'method':<34} {'time (s) [IQR]':>26} {'vs qkgeometry':>14}")
    for name in methods:
        if name.startswith("GEMM"):
            continue
        ratio = med[name] / med["qkgeometry layer_scores"]
        print(f"   {name:<34} {median_iqr(times[name]):>26} {ratio:13.1f}x")
    sym_ref, dir_ref = results["dense (form every d×d W_qk)"]
    for name in ("qkgeometry layer_scores", "TransformerLens FactoredMatrix"):
        s, dd = results[name]
        print(f"   max |{name} - dense|: symmetry {np.max(np.abs(s - sym_ref)):.1e}, directionality "
              f"{np.max(np.abs(dd - dir_ref)):.1e}")
    print(f"   GEMM peak in this run: {peak:.1f} GFLOP/s; qkgeometry kernel: {flops / 1e9:.2f} GFLOP at {rate:.1f} "
          f"GFLOP/s = {rate / peak:.0%} of the peak (roofline)")
    # The Grams AᵀA and BᵀB are symmetric: BLAS forms them as rank-k updates (syrk) at half a product's work, so
    # the kernel performs fewer FLOPs than the count above, which prices every product as a full GEMM.
    performed = n_layers * (3.5 * h + 0.5 * kv) * 2 * d * r * r
    print(f"   counting the Grams at half a product (syrk): {performed / 1e9:.2f} GFLOP performed, "
          f"{performed / med['qkgeometry layer_scores'] / 1e9 / peak:.0%} of the peak")
    return peak


# ---------------------------------------------------------------------------------------------- 2. end to end
def end_to_end(folder: Path, repeats: int, device: str | None, tmp: Path) -> None:
    import numpy as np
    import pandas as pd

    cli = str(Path(sys.executable).with_name("qkgeometry"))
    out = tmp / "scores.csv"
    score = [cli, "score", str(folder), "--per", "head", "--out", str(out)] + (["--device", device] if device
                                                                              else [])
    dense = [sys.executable, "-c", DENSE.replace('print(len(out), "heads")',
                                                 'import json; print(json.dumps(out))'), str(folder)]
    runs = {"qkgeometry score --per head": [], "dense (transformers + d×d)": []}
    print(f"\n2. end to end, syn16 per head, {repeats} round-robin rounds (GNU time; load before each run)")
    for rnd in range(repeats):
        for name, cmd in (("qkgeometry score --per head", score), ("dense (transformers + d×d)", dense)):
            wall, rss, before = timed(cmd, env())
            runs[name].append((wall, rss))
            print(f"   round {rnd + 1} {name:<28} wall {wall:7.2f} s  peak RSS {rss:7.0f} MiB  load {before:4.1f}",
                  flush=True)
    med = {k: (statistics.median(w for w, _ in v), statistics.median(m for _, m in v)) for k, v in runs.items()}
    q, dn = med["qkgeometry score --per head"], med["dense (transformers + d×d)"]
    print(f"   median: qkgeometry {q[0]:.2f} s / {q[1]:.0f} MiB; dense {dn[0]:.2f} s / {dn[1]:.0f} MiB -> "
          f"{dn[0] / q[0]:.1f}x faster, {dn[1] / q[1]:.1f}x less peak RSS")
    # The timed dense method loads the model in float32 and forms each M in float32, as its users would; the
    # scores are compared with the same method in float64 (the bf16 weights are exact in both), not timed.
    assert "dtype=torch.float32" in DENSE
    dense64 = [dense[0], "-c", dense[2].replace("dtype=torch.float32", "dtype=torch.float64"), str(folder)]
    ours = pd.read_csv(out).sort_values(["layer", "head"])
    for label, cmd in (("float64", dense64), ("float32, as timed", dense)):
        res = subprocess.run(cmd, capture_output=True, text=True, env=env(), check=True)
        ref = np.array(json.loads(res.stdout.strip().splitlines()[-1]))
        print(f"   scores vs the dense method in {label}: max |symmetry diff| "
              f"{np.max(np.abs(ours['symmetry'].to_numpy() - ref[:, 0])):.1e}, max |directionality diff| "
              f"{np.max(np.abs(ours['directionality'].to_numpy() - ref[:, 1])):.1e}")


# ---------------------------------------------------------------------------------------------- 3. cold start
def cold_start(repeats: int) -> None:
    cli = str(Path(sys.executable).with_name("qkgeometry"))
    cmd = [cli, "score", "offline:minilm-l6", "--per", "head"]
    subprocess.run(cmd, capture_output=True, env=env(), check=True)  # the offline alias unpacks once
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env(), check=True)
        walls.append(time.perf_counter() - t0)
    code = ("import sys; from qkgeometry.cli import main; sys.exit(main(['score', 'offline:minilm-l6', "
            "'--per', 'head']))")
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         env=env(), check=True)
    top = {}
    for line in res.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\S.*)$", line)
        if m and not m.group(3).startswith(" "):  # top-level imports only (cumulative)
            top[m.group(3)] = int(m.group(2)) / 1e6
    groups: dict[str, float] = {}
    for name, secs in top.items():
        root = name.split(".")[0]
        groups[root] = groups.get(root, 0.0) + secs
    print(f"\n3. cold start: qkgeometry score offline:minilm-l6 --per head, fresh process: median "
          f"{statistics.median(walls):.2f} s of {repeats} (min {min(walls):.2f} s); load {load():.1f}")
    print("   imports (cumulative, top-level): " + ", ".join(
        f"{k} {v:.2f} s" for k, v in sorted(groups.items(), key=lambda kv: -kv[1])[:8]))
    heavy = [k for k in ("torch", "transformers") if k in groups]
    print(f"   torch / transformers imported: {heavy or 'neither'}")


def gemm_peak(repeats: int) -> float:
    """The better of the BLAS default and one thread on a square 2048³ float64 product, GFLOP/s (median)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    square = np.random.default_rng(1).standard_normal((2048, 2048))
    best = []
    for threads in (None, 1):
        times = []
        with threadpool_limits(threads, user_api="blas"):
            for _ in range(repeats + 1):
                t0 = time.perf_counter()
                square @ square
                times.append(time.perf_counter() - t0)
        best.append(statistics.median(times[1:]))
    peak = 2 * 2048 ** 3 / min(best) / 1e9
    print(f"GEMM peak (2048³ float64, better of default and 1 thread): {peak:.1f} GFLOP/s; load {load():.1f}")
    return peak


# ---------------------------------------------------------------------------------------------- 4. 7B-shaped
def write_qk_only(folder: Path, layers: int, d: int, heads: int, kv_heads: int) -> None:
    """Q and K projections of a Llama-shaped checkpoint in bf16, one shard per layer (scoring reads only these)."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    hd = d // heads
    rng = np.random.default_rng(0)
    weight_map = {}

    def bf16_bits(*shape):  # bfloat16 bit patterns (uint16) of N(0, 0.02²), saved under the BF16 tag below
        return ((rng.standard_normal(shape, dtype=np.float32) * 0.02).view(np.uint32) >> 16).astype(np.uint16)

    for i in range(layers):
        p = f"layers.{i}.self_attn."
        file = f"model-{i + 1:05d}-of-{layers:05d}.safetensors"
        save_file({p + "q_proj.weight": bf16_bits(heads * hd, d), p + "k_proj.weight": bf16_bits(kv_heads * hd, d)},
                  str(folder / file))
        _retag_bf16(folder / file)
        weight_map.update({p + "q_proj.weight": file, p + "k_proj.weight": file})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "intermediate_size": 4 * d, "vocab_size": 32000}))


def _retag_bf16(file: Path) -> None:
    """Rewrite a safetensors header's U16 tags as BF16 (same width; numpy cannot write bfloat16 itself)."""
    data = file.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = data[8:8 + n].decode().strip().replace('"U16"', '"BF16"').encode()
    header = header.ljust(-(-len(header) // 8) * 8)  # data offsets are relative to the data: only the length moves
    file.write_bytes(len(header).to_bytes(8, "little") + header + data[8 + n:])


def seven_b(peak: float, device: str | None, tmp: Path, n_layers: int = 32) -> None:
    """``n_layers`` < 32 writes and scores only the first layers: the peak RSS does not depend on the number of
    layers (they are streamed one at a time), and the time scales with it."""
    folder = tmp / "seven-b"
    print(f"\n4. 7B-shaped per head ({n_layers} of 32 layers, d=4096, 32/8 heads, r=128, bf16 Q/K): writing ...",
          flush=True)
    write_qk_only(folder, **{**SEVEN_B, "layers": n_layers})
    size = sum(f.stat().st_size for f in folder.glob("*.safetensors")) / 2 ** 30
    cli = str(Path(sys.executable).with_name("qkgeometry"))
    cmd = [cli, "score", str(folder), "--per", "head"] + (["--device", device] if device else [])
    wall, rss, before = timed(cmd, env())
    s = SEVEN_B
    r = s["d"] // s["heads"]
    flops = n_layers * (4 * s["heads"] + s["kv_heads"]) * 2 * s["d"] * r * r
    print(f"   {size:.2f} GiB on disk; wall {wall:.1f} s, peak RSS {rss:.0f} MiB (load {before:.1f}); FLOPs "
          f"{flops / 1e9:.0f} GFLOP -> floor {flops / 1e9 / peak:.1f} s at this run's GEMM peak {peak:.1f} GFLOP/s "
          f"({flops / 1e9 / peak / wall:.0%} of it end to end)")
    if n_layers < 32:
        print(f"   all 32 layers, scaled: about {wall * 32 / n_layers:.0f} s against a floor of "
              f"{flops * 32 / n_layers / 1e9 / peak:.0f} s; peak RSS as measured (layers are streamed)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="round-robin rounds (default 3)")
    ap.add_argument("--layers", type=int, default=2, help="layers of syn16 in the in-process kernel comparison")
    ap.add_argument("--skip-e2e", action="store_true", help="section 1 (and 3, 4 when asked) only")
    ap.add_argument("--skip-cold", action="store_true", help="no cold-start section")
    ap.add_argument("--seven-b", action="store_true", help="also the 7B-shaped per-head run (1.3 GB written)")
    ap.add_argument("--device", help="a torch device for qkgeometry (cuda): the kernel and the end-to-end runs")
    ap.add_argument("--only-seven-b", action="store_true", help="the GEMM peak, then section 4 alone")
    ap.add_argument("--seven-b-layers", type=int, default=32, help="layers of the 7B shape to write and score "
                    "(fewer: the same peak RSS, the time scaled)")
    args = ap.parse_args()
    if args.only_seven_b:
        tmp = Path(tempfile.mkdtemp(prefix="qkg-bench-kernel-"))
        try:
            seven_b(gemm_peak(args.repeats), args.device, tmp, args.seven_b_layers)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    shape = SHAPES["bench"]
    print(f"syn16 {shape}; {os.cpu_count()} CPUs; load {load():.1f}; {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    peak = kernel_section(shape, args.layers, args.repeats, args.device)
    if not args.skip_cold:
        cold_start(max(args.repeats, 5))
    tmp = Path(tempfile.mkdtemp(prefix="qkg-bench-kernel-"))
    try:
        if not args.skip_e2e:
            print(f"\nwriting syn16 (bf16) to {tmp} ...", flush=True)
            (tmp / "syn16").mkdir()
            write_checkpoint(tmp / "syn16", **shape)
            end_to_end(tmp / "syn16", args.repeats, args.device, tmp)
            shutil.rmtree(tmp / "syn16", ignore_errors=True)
        if args.seven_b:
            seven_b(peak, args.device, tmp, args.seven_b_layers)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
