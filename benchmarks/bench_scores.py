"""Per-head scoring: qkgeometry's streaming, factored path vs the naive path, side by side.

Writes a random Llama-shaped checkpoint (default: 16 layers, d=2048, 16 heads / 4 KV heads, FFN 5632,
vocab 32000, bf16 safetensors, about 1.6 GB) into a temporary folder, then times two commands, each in its own
process under GNU ``/usr/bin/time -v`` so that peak RSS is measured by the kernel:

* **qkgeometry**: ``qkgeometry score DIR --per head`` (streams the Q/K tensors layer by layer, factored scores);
* **naive**: ``AutoModel.from_pretrained(DIR, dtype=float32)``, then for every head materialise the d × d matrix
  ``W_Q^h W_K^{g(h)ᵀ}`` and compute both scores densely.

The two run round-robin ``--repeats`` times (timings on shared machines drift) and the script prints wall time
and peak RSS of each, and the naive/qkgeometry ratios. It is a benchmark, not a test.

    .venv/bin/python benchmarks/bench_scores.py [--repeats 2] [--small]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAIVE = r"""
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
    for n, (name, tensors) in enumerate(shards):
        file = f"model-{n + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, str(folder / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, file))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    config = dict(model_type="llama", architectures=["LlamaModel"], hidden_size=d, num_hidden_layers=layers,
                  num_attention_heads=heads, num_key_value_heads=kv_heads, intermediate_size=ffn, vocab_size=vocab,
                  max_position_embeddings=2048, torch_dtype="bfloat16", rms_norm_eps=1e-5)
    (folder / "config.json").write_text(json.dumps(config))


def timed(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd`` under GNU time; return (wall seconds, peak RSS in MiB)."""
    start = time.perf_counter()
    res = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if res.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{res.stdout}\n{res.stderr[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", res.stderr).group(1))
    return wall, rss_kb / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--small", action="store_true", help="4 layers, d=1024, for a quick look")
    args = ap.parse_args()
    shape = dict(layers=4, d=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000) if args.small else \
        dict(layers=16, d=2048, heads=16, kv_heads=4, ffn=5632, vocab=32000)
    cli = str(Path(sys.executable).with_name("qkgeometry"))
    tmp = Path(tempfile.mkdtemp(prefix="qkg-bench-"))
    try:
        print(f"writing random Llama-shaped checkpoint {shape} (bf16) to {tmp} ...", flush=True)
        write_checkpoint(tmp, **shape)
        size = sum(f.stat().st_size for f in tmp.glob("*.safetensors")) / 2**30
        print(f"checkpoint: {size:.2f} GiB on disk")
        runs = {"qkgeometry": [], "naive": []}
        commands = {"qkgeometry": [cli, "score", str(tmp), "--per", "head"],
                    "naive": [sys.executable, "-c", NAIVE, str(tmp)]}
        for r in range(args.repeats):
            for name, cmd in commands.items():  # round-robin
                wall, rss = timed(cmd)
                runs[name].append((wall, rss))
                print(f"  run {r + 1} {name:<10} wall {wall:7.1f} s   peak RSS {rss:7.0f} MiB", flush=True)
        med = {k: (statistics.median(w for w, _ in v), max(m for _, m in v)) for k, v in runs.items()}
        print("\n               wall (median)   peak RSS (max)")
        for k, (w, m) in med.items():
            print(f"  {k:<12} {w:10.1f} s   {m:10.0f} MiB")
        print(f"  ratio naive/qkgeometry: wall {med['naive'][0] / med['qkgeometry'][0]:.1f}x, "
              f"peak RSS {med['naive'][1] / med['qkgeometry'][1]:.1f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
