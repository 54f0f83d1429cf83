"""Per-head scoring against the dense way, with a float64 roofline measured in the same run.

Writes a random Llama-shaped checkpoint (default: 16 layers, d=2048, 16 heads / 4 KV heads, FFN 5632, vocab 32000,
bf16 safetensors, about 1.6 GB) into a temporary folder, then measures three things, interleaved or round-robin
(timings on shared machines drift, so every figure is a median and the 1-minute load average is printed next to
every timing):

1. **Roofline** (in this process): the float64 GEMM throughput of this machine, from a square 2048³ product and from
   the batched product shapes the kernel uses, next to the achieved GFLOP/s of
   :func:`qkgeometry.scores.layer_scores` on one layer (its FLOPs counted analytically: ``2·d·r²`` per product,
   ``4·n_heads + n_kv_heads`` products per layer, and checked against ``torch.profiler``'s count). The cases are
   interleaved call by call, and the kernel's rate is reported as a fraction of the square GEMM's rate in the same
   iteration and of the time its own products take when run alone.
2. **End to end** (fresh processes under GNU ``/usr/bin/time -v``, peak RSS from the kernel):

   * **qkgeometry**: ``qkgeometry score DIR --per head`` (streams the Q/K tensors layer by layer, factored scores);
   * **dense**: ``AutoModel.from_pretrained(DIR, dtype=float32)``, then for every head materialise the d × d matrix
     ``W_Q^h W_K^{g(h)ᵀ}`` and compute both scores densely;
   * optionally **baseline**: the same ``qkgeometry score`` command run from another source tree
     (``--baseline-src OLD/src``), to compare two versions of the package.

   Wall and RSS ratios are given as the ratio of medians and as the median of the per-round ratios (the two runs
   of a round are adjacent in time, so their ratio is less exposed to the machine's drifting load).
3. **Start-up** (``--startup``): ``qkgeometry --help``, ``import qkgeometry`` and the start-up of ``qkgeometry
   score`` (everything it imports before reading a tensor: run on a missing path, it stops at the first read).

It is a benchmark, not a test.

    python benchmarks/bench_scores.py [--repeats 3] [--small] [--startup] [--baseline-src DIR] [--skip-dense]
                                      [--threads N] [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DENSE = r"""
import sys, torch, transformers, qkgeometry as qg
folder = sys.argv[1]
model = transformers.AutoModel.from_pretrained(folder, dtype=torch.float32)
cfg = model.config
h, kv = cfg.num_attention_heads, cfg.num_key_value_heads
hd = cfg.hidden_size // h
out = []
for layer in model.layers:
    q = layer.self_attn.q_proj.weight.detach().reshape(h, hd, -1)
    k = layer.self_attn.k_proj.weight.detach().reshape(kv, hd, -1)
    for i in range(h):
        M = q[i].T @ k[i // (h // kv)]                     # (d, d), materialised
        out.append((qg.symmetry_score(M), qg.directionality_score(M)))
print(len(out), "heads")
"""

SHAPES = {
    "bench": {"layers": 16, "d": 2048, "heads": 16, "kv_heads": 4, "ffn": 5632, "vocab": 32000},
    "small": {"layers": 4, "d": 1024, "heads": 16, "kv_heads": 4, "ffn": 2816, "vocab": 32000},
}


def load() -> float:
    """1-minute load average (the machine is shared: print it next to every timing)."""
    return os.getloadavg()[0]


def write_checkpoint(folder: Path, layers: int, d: int, heads: int, kv_heads: int, ffn: int, vocab: int) -> None:
    """Random bf16 weights under LlamaModel's tensor names, one shard per layer (never all in memory)."""
    import json

    import torch
    from safetensors.torch import save_file

    hd = d // heads
    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    weight_map = {}
    shards = [("embed", {"embed_tokens.weight": rand(vocab, d), "norm.weight": torch.ones(d, dtype=torch.bfloat16)})]
    for i in range(layers):
        p = f"layers.{i}."
        shards.append((f"layer{i}", {
            p + "self_attn.q_proj.weight": rand(heads * hd, d), p + "self_attn.k_proj.weight": rand(kv_heads * hd, d),
            p + "self_attn.v_proj.weight": rand(kv_heads * hd, d), p + "self_attn.o_proj.weight": rand(d, heads * hd),
            p + "mlp.gate_proj.weight": rand(ffn, d), p + "mlp.up_proj.weight": rand(ffn, d),
            p + "mlp.down_proj.weight": rand(d, ffn),
            p + "input_layernorm.weight": torch.ones(d, dtype=torch.bfloat16),
            p + "post_attention_layernorm.weight": torch.ones(d, dtype=torch.bfloat16)}))
    for n, (_, tensors) in enumerate(shards):
        file = f"model-{n + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, str(folder / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, file))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    config = {"model_type": "llama", "architectures": ["LlamaModel"], "hidden_size": d, "num_hidden_layers": layers,
                  "num_attention_heads": heads, "num_key_value_heads": kv_heads, "intermediate_size": ffn, "vocab_size": vocab,
                  "max_position_embeddings": 2048, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5}
    (folder / "config.json").write_text(json.dumps(config))


# ---------------------------------------------------------------------------------------------- roofline
def roofline(shape: dict, repeats: int, inner: int = 7, device: str = "cpu") -> None:
    """GEMM throughput at the square and at the kernel's shapes vs the kernel's achieved rate, interleaved."""
    import torch

    from qkgeometry.model import to_float64_heads as _to_float64
    from qkgeometry.scores import layer_scores

    d, heads, kv = shape["d"], shape["heads"], shape["kv_heads"]
    r, group = d // heads, heads // kv
    gen = torch.Generator().manual_seed(0)
    # one layer exactly as load_qk hands it over: float64, (n, d, r) views of (n, r, d) buffers
    dev = torch.device(device)
    wq = _to_float64(torch.randn(heads, r, d, generator=gen).bfloat16().mT, dev)
    wk = _to_float64(torch.randn(kv, r, d, generator=gen).bfloat16().mT, dev)
    at, bt = wq.mT.reshape(kv, group, r, d), wk.mT
    gram_a, gram_b = at @ at.mT, bt @ bt.mT
    square = torch.randn(2048, 2048, generator=gen, dtype=torch.float64).to(dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    unit = 2 * d * r * r  # FLOPs of one (d × r)ᵀ(d × r)-sized product
    cases = {
        "GEMM 2048x2048x2048 (square)": (lambda: square @ square, 2 * 2048 ** 3),
        "kernel shape: A^T A per head": (lambda: at @ at.mT, heads * unit),
        "kernel shape: B^T [A_1..A_G] per KV": (lambda: bt @ at.reshape(kv, group * r, d).mT, heads * unit),
        "kernel shape: G_B A^T per head": (lambda: gram_b.unsqueeze(1) @ at, heads * unit),
        "kernel shape: [G_A..] B^T per KV": (lambda: gram_a.reshape(kv, group * r, r) @ bt, heads * unit),
        "layer_scores (per head, whole kernel)": (lambda: layer_scores(wq, wk, heads=True, layer=False),
                                                  (4 * heads + kv) * unit),
    }
    counted = count_flops(lambda: layer_scores(wq, wk, heads=True, layer=False))
    for fn, _ in cases.values():
        fn()  # warm-up (allocations, MKL's first-call setup)
    # Interleaved at the level of single calls: the load of a shared machine changes within seconds, so each
    # iteration times every case once, back to back, and the kernel is compared with the square GEMM of its own
    # iteration (median of those per-iteration fractions).
    times: dict[str, list[float]] = {k: [] for k in cases}
    loads = []
    for _ in range(repeats * inner):
        for name, (fn, _) in cases.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - t0)
        loads.append(load())
    rates = {k: [cases[k][1] / t / 1e9 for t in v] for k, v in times.items()}
    square, kernel_name = "GEMM 2048x2048x2048 (square)", "layer_scores (per head, whole kernel)"
    shapes = [k for k in cases if k.startswith("kernel shape")]
    frac_square = [k / p for k, p in zip(rates[kernel_name], rates[square], strict=True)]
    # the products' own roofline: the time the kernel's products take when run alone, in the same iteration
    frac_shapes = [sum(times[k][i] for k in shapes) * (4 * heads + kv) / (4 * heads) / times[kernel_name][i]
                   for i in range(len(loads))]
    kernel = statistics.median(rates[kernel_name])
    where = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"\n1. roofline, float64, torch {torch.__version__}, {where}, one layer "
          f"(d={d}, {heads}/{kv} heads, r={r}); medians of {len(loads)} interleaved iterations; "
          f"load {min(loads):.1f}-{max(loads):.1f}")
    for name, values in rates.items():
        q1, q3 = statistics.quantiles(values, n=4)[0], statistics.quantiles(values, n=4)[2]
        print(f"   {name:<40} {statistics.median(values):7.1f} GFLOP/s  [IQR {q1:.1f}-{q3:.1f}]")
    print(f"   FLOPs of one layer_scores call counted by torch.profiler: {counted / 1e9:.4f} GFLOP; analytic count "
          f"{(4 * heads + kv) * unit / 1e9:.4f} GFLOP")
    print(f"   kernel: {(4 * heads + kv) * unit / 1e9:.2f} GFLOP per layer (4 + 1/{group} products of 2dr² per head) "
          f"at {kernel:.1f} GFLOP/s; per iteration {statistics.median(frac_square):.0%} of the square-GEMM rate "
          f"[IQR {statistics.quantiles(frac_square, n=4)[0]:.0%}-{statistics.quantiles(frac_square, n=4)[2]:.0%}] "
          f"and {statistics.median(frac_shapes):.0%} of the rate of its own products run alone")
    print(f"   dense way per head: 2d²r = {2 * d * d * r / 1e9:.2f} GFLOP to form W_qk (+ O(d²) passes); factored: "
          f"{(4 + 1 / group) * unit / 1e9:.3f} GFLOP -> {2 * d * d * r / ((4 + 1 / group) * unit):.1f}x fewer FLOPs")


def count_flops(fn) -> float:
    """FLOPs that torch.profiler attributes to the operators run by ``fn`` (matrix products; elementwise ops are
    counted too where torch knows their cost)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        fn()
    return float(sum(e.flops for e in prof.key_averages() if e.flops))


# ---------------------------------------------------------------------------------------------- end to end
def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, float]:
    """Run ``cmd`` under GNU time; return (wall seconds, peak RSS in MiB, 1-min load before the run)."""
    before = load()
    start = time.perf_counter()
    res = subprocess.run(["/usr/bin/time", "-v", *cmd], check=False, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if res.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{res.stdout}\n{res.stderr[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", res.stderr).group(1))
    return wall, rss_kb / 1024, before


def with_src(src: str | None) -> dict:
    env = dict(os.environ)  # carries OMP_NUM_THREADS / MKL_NUM_THREADS set by --threads
    if src is not None:
        env["PYTHONPATH"] = src
    return env


def end_to_end(folder: Path, repeats: int, cli: str, baseline_src: str | None, skip_dense: bool,
               device: str = "cpu") -> None:
    here = str(Path(__file__).resolve().parents[1] / "src")
    commands = {"qkgeometry": ([cli, "score", str(folder), "--per", "head", "--device", device], with_src(here))}
    if baseline_src:
        commands["baseline"] = ([cli, "score", str(folder), "--per", "head"], with_src(baseline_src))
    if not skip_dense:
        commands["dense"] = ([sys.executable, "-c", DENSE, str(folder)], with_src(here))
    runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in commands}
    print(f"\n2. end to end, {repeats} rounds, round-robin (load = 1-min load average just before the run)")
    for rnd in range(repeats):
        for name, (cmd, env) in commands.items():
            wall, rss, before = timed(cmd, env)
            runs[name].append((wall, rss, before))
            print(f"   round {rnd + 1} {name:<11} wall {wall:7.2f} s   peak RSS {rss:7.0f} MiB   load {before:4.1f}",
                  flush=True)
    med = {k: (statistics.median(w for w, _, _ in v), statistics.median(m for _, m, _ in v)) for k, v in runs.items()}
    print("\n                 wall (median)   peak RSS (median)")
    for k, (w, m) in med.items():
        print(f"   {k:<12} {w:10.2f} s   {m:10.0f} MiB")
    for other in [k for k in commands if k != "qkgeometry"]:
        per_round_wall = [o[0] / q[0] for o, q in zip(runs[other], runs["qkgeometry"], strict=True)]
        per_round_rss = [o[1] / q[1] for o, q in zip(runs[other], runs["qkgeometry"], strict=True)]
        print(f"   ratio {other}/qkgeometry: wall {med[other][0] / med['qkgeometry'][0]:.1f}x (median of per-round "
              f"ratios {statistics.median(per_round_wall):.1f}x, range {min(per_round_wall):.1f}-"
              f"{max(per_round_wall):.1f}), peak RSS {med[other][1] / med['qkgeometry'][1]:.1f}x "
              f"(per round {statistics.median(per_round_rss):.1f}x)")


# ---------------------------------------------------------------------------------------------- start-up
def startup(repeats: int, cli: str, baseline_src: str | None) -> None:
    here = str(Path(__file__).resolve().parents[1] / "src")
    missing = str(Path(tempfile.gettempdir()) / "qkgeometry-no-such-model")
    cases = {"qkgeometry --help": [cli, "--help"],
             "python -c 'import qkgeometry'": [sys.executable, "-c", "import qkgeometry"],
             "qkgeometry score (start-up)": [cli, "score", missing]}
    trees = {"this tree": here, **({"baseline": baseline_src} if baseline_src else {})}
    times: dict[tuple[str, str], list[float]] = {(c, t): [] for c in cases for t in trees}
    loads = []
    for _ in range(repeats):
        for case, cmd in cases.items():
            for tree, src in trees.items():  # round-robin: the two trees alternate
                t0 = time.perf_counter()
                subprocess.run(cmd, check=False, capture_output=True, env=with_src(src))
                times[(case, tree)].append(time.perf_counter() - t0)
        loads.append(load())
    print(f"\n3. start-up, median of {repeats} runs, load {min(loads):.1f}-{max(loads):.1f}")
    for case in cases:
        cells = "   ".join(f"{tree} {statistics.median(times[(case, tree)]):5.2f} s" for tree in trees)
        print(f"   {case:<32} {cells}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="round-robin rounds (default 3)")
    ap.add_argument("--small", action="store_true", help="4 layers, d=1024, for a quick look")
    ap.add_argument("--baseline-src", help="another qkgeometry source tree (its src/ folder) to time as 'baseline'")
    ap.add_argument("--skip-dense", action="store_true", help="do not run the dense way")
    ap.add_argument("--skip-e2e", action="store_true", help="roofline (and start-up) only")
    ap.add_argument("--startup", action="store_true", help="also time start-up (--help, import, score)")
    ap.add_argument("--threads", type=int, help="BLAS/OpenMP threads for everything measured (default: torch's "
                    "choice, one per core). On a machine loaded beyond its cores, 1 avoids threads waiting on each "
                    "other at every parallel region")
    ap.add_argument("--device", default="cpu", help="where qkgeometry computes (cpu, cuda): the roofline and the "
                    "qkgeometry runs; the dense way and the baseline stay on the CPU")
    args = ap.parse_args()
    # Every measured process (dense too) gets the OpenMP wait policy that the qkgeometry command line sets for itself.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if args.threads is not None:
        if args.threads < 1:
            ap.error(f"--threads must be >= 1; got {args.threads}")
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # before torch is imported, inherited by every child
            os.environ[var] = str(args.threads)
    from qkgeometry.devices import resolve_device

    try:
        resolve_device(args.device)  # a clear message now rather than a traceback later
    except ValueError as e:
        ap.error(str(e))
    shape = SHAPES["small" if args.small else "bench"]
    cli = str(Path(sys.executable).with_name("qkgeometry"))
    print(f"shape {shape}; load at start {load():.1f}; {os.cpu_count()} CPUs; threads "
          f"{args.threads or 'default'}; OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    roofline(shape, args.repeats, device=args.device)
    if args.startup:
        startup(max(args.repeats, 5), cli, args.baseline_src)
    if args.skip_e2e:
        return
    tmp = Path(tempfile.mkdtemp(prefix="qkg-bench-"))
    try:
        print(f"\nwriting random Llama-shaped checkpoint (bf16) to {tmp} ...", flush=True)
        write_checkpoint(tmp, **shape)
        size = sum(f.stat().st_size for f in tmp.glob("*.safetensors")) / 2**30
        print(f"checkpoint: {size:.2f} GiB on disk")
        end_to_end(tmp, args.repeats, cli, args.baseline_src, args.skip_dense, args.device)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
