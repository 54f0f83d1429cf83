"""Memory and time of a per-head survey of a Llama-7B-shaped checkpoint, next to just reading its bytes.

    python benchmarks/bench_survey_memory.py [--dir DIR] [--keep] [--repeats 2]

Writes a synthetic checkpoint with the attention shapes of a Llama-2-7B-sized model with grouped-query attention
(32 layers, d_model = 4096, 32 query heads, 8 KV heads, head_dim 128), holding **only** the ``q_proj`` / ``k_proj``
tensors (bf16 safetensors, 4 shards, 1.34 GB, N(0, 0.02²) entries) plus a Llama ``config.json``. Then, round-robin
``--repeats`` times, in fresh subprocesses:

* ``read``: read every byte of the shards (64 MiB chunks) — the floor for any survey of these files;
* ``survey``: ``qg.survey([folder], per="head")`` — 32 layers × 32 heads of scores, streamed layer by layer;
* ``import``: ``import qkgeometry`` alone, the RSS every survey pays before reading anything.

Each child reports its own peak RSS (``VmHWM`` in ``/proc/self/status``) and wall time. The shards are in
the page cache after writing, so ``read`` measures memory bandwidth and parsing overhead, not the disk — and so
does the survey. The target is a peak RSS below 1.5 GB. The checkpoint is deleted at the end
unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N_LAYERS, D_MODEL, N_HEADS, N_KV, HEAD_DIM = 32, 4096, 32, 8, 128
N_SHARDS = 4
LIMIT_BYTES = 1.5e9

CHILD = {
    "import": "import qkgeometry",
    "read": """
import pathlib, sys
total = 0
for f in sorted(pathlib.Path(sys.argv[1]).glob('*.safetensors')):
    with open(f, 'rb', buffering=0) as fh:
        while chunk := fh.read(1 << 26):
            total += len(chunk)
print('bytes', total)
""",
    "survey": """
import sys
import qkgeometry as qg
frame = qg.survey([sys.argv[1]], per='head', progress=False)
assert len(frame) == 32 * 32 and frame.attrs['failures'].empty, frame.attrs['failures']
print('rows', len(frame), 'median symmetry', round(float(frame.symmetry.median()), 4))
""",
}
# Peak RSS from /proc/self/status VmHWM (the high-water mark of this process's own address space). getrusage's
# ru_maxrss is not used: on Linux it survives fork + exec, so a child would report the parent's peak if larger.
WRAPPER = """
import re, sys, time
t0 = time.perf_counter()
exec(compile({code!r}, '<bench>', 'exec'))
wall = time.perf_counter() - t0
hwm_kb = int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1))
print('RESULT', wall, hwm_kb * 1024)
"""


def write_checkpoint(folder: Path) -> int:
    """Write the synthetic checkpoint; return its size in bytes (weights only)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": D_MODEL,
              "num_hidden_layers": N_LAYERS, "num_attention_heads": N_HEADS, "num_key_value_heads": N_KV,
              "head_dim": HEAD_DIM, "intermediate_size": 11008, "vocab_size": 32000, "torch_dtype": "bfloat16"}
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    gen = torch.Generator().manual_seed(0)
    per_shard = N_LAYERS // N_SHARDS
    weight_map = {}
    for s in range(N_SHARDS):
        tensors = {}
        for i in range(s * per_shard, (s + 1) * per_shard):
            for name, rows in (("q_proj", N_HEADS * HEAD_DIM), ("k_proj", N_KV * HEAD_DIM)):
                key = f"model.layers.{i}.self_attn.{name}.weight"
                tensors[key] = (torch.randn(rows, D_MODEL, generator=gen) * 0.02).to(torch.bfloat16)
        shard = f"model-{s + 1:05d}-of-{N_SHARDS:05d}.safetensors"
        save_file(tensors, str(folder / shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, shard))
        del tensors
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def run_child(kind: str, folder: Path) -> tuple[float, int, str]:
    """Run one measurement in a fresh interpreter; return (wall seconds, peak RSS bytes, its output)."""
    out = subprocess.run([sys.executable, "-c", WRAPPER.format(code=CHILD[kind]), str(folder)], check=True,
                         capture_output=True, text=True).stdout
    result = next(line for line in out.splitlines() if line.startswith("RESULT")).split()
    return float(result[1]), int(result[2]), out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to write the checkpoint (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoint afterwards")
    parser.add_argument("--repeats", type=int, default=2, help="round-robin repetitions (default 2)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="qkgeometry-bench-")) if args.dir is None else args.dir
    folder = root / "llama7b-shaped-qk"
    try:
        t0 = time.perf_counter()
        size = write_checkpoint(folder)
        print(f"wrote {size / 1e9:.2f} GB ({N_LAYERS} layers, d={D_MODEL}, {N_HEADS} heads / {N_KV} KV heads, bf16, "
              f"q_proj/k_proj only) in {time.perf_counter() - t0:.1f} s to {folder}")
        runs: dict[str, list[tuple[float, int]]] = {k: [] for k in ("import", "read", "survey")}
        for rep in range(args.repeats):
            for kind in runs:  # round-robin: timings on shared machines drift
                wall, rss, out = run_child(kind, folder)
                runs[kind].append((wall, rss))
                extra = " ".join(line for line in out.splitlines() if not line.startswith("RESULT"))
                print(f"  [{rep + 1}/{args.repeats}] {kind:<7} {wall:7.2f} s  peak RSS {rss / 1e9:5.2f} GB  {extra}")
        best = {k: (min(w for w, _ in v), max(r for _, r in v)) for k, v in runs.items()}
        print()
        print(f"{'':<28}{'read bytes':>12}{'survey/head':>14}{'ratio':>9}")
        print(f"{'wall time (best of runs), s':<28}{best['read'][0]:>12.2f}{best['survey'][0]:>14.2f}"
              f"{best['survey'][0] / best['read'][0]:>9.1f}")
        print(f"{'peak RSS (max of runs), GB':<28}{best['read'][1] / 1e9:>12.2f}{best['survey'][1] / 1e9:>14.2f}"
              f"{best['survey'][1] / best['read'][1]:>9.1f}")
        print(f"{'survey throughput':<28}{size / 1e9 / best['survey'][0]:>12.2f} GB/s of checkpoint")
        print(f"import qkgeometry alone: peak RSS {best['import'][1] / 1e9:.2f} GB, {best['import'][0]:.2f} s")
        ok = best["survey"][1] < LIMIT_BYTES
        print(f"peak RSS of the survey {'<' if ok else '>='} {LIMIT_BYTES / 1e9:.1f} GB: {'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
            if args.dir is None:
                shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
