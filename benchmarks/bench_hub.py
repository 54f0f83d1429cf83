"""Scoring a 7B-shaped Hub checkpoint: remote range reads of the Q/K bytes vs a whole snapshot, side by side.

A Llama-2-7B-shaped bf16 checkpoint (d = 4096, 32 layers, 32 heads, MLP 11008, vocab 32000; 13.5 GB in 2 shards
with an index) is written with shape-faithful safetensors headers and sparse zero data (it takes no disk until
read), and served by the loopback Hub emulator of the test suite. Each path runs in a fresh child process that finds
the Hub through ``HF_ENDPOINT``, with empty caches; the table gives the bytes the emulator sent, the wall time and
the child's peak RSS. Run from the repository root:

    python benchmarks/bench_hub.py [--layers 32] [--keep DIR]

``--layers 8`` keeps the snapshot side to about 4 GB of disk. Zero weights score as 0/0: the child scores them
anyway (the numbers are NaN, the reads are real).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

D, HEADS, KV, INTER, VOCAB = 4096, 32, 32, 11008, 32000

CHILD = r"""
import sys, time, warnings
warnings.simplefilter("ignore")
import qkgeometry as qg
t = time.perf_counter()
model = qg.load_qk("bench/llama-7b-shaped", fetch=sys.argv[1])
for layer in model.iter_layers(convert=False):
    pass
print(time.perf_counter() - t)
"""


def write_sparse_checkpoint(folder: Path, layers: int) -> tuple[int, int]:
    """Shards whose headers are those of a real 7B bf16 checkpoint and whose data is a hole; returns (checkpoint
    bytes, Q/K bytes)."""
    tensors = {"model.embed_tokens.weight": (VOCAB, D), "model.norm.weight": (D,), "lm_head.weight": (VOCAB, D)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update({p + "input_layernorm.weight": (D,), p + "post_attention_layernorm.weight": (D,),
                        p + "self_attn.q_proj.weight": (D, D), p + "self_attn.k_proj.weight": (KV * D // HEADS, D),
                        p + "self_attn.v_proj.weight": (KV * D // HEADS, D), p + "self_attn.o_proj.weight": (D, D),
                        p + "mlp.gate_proj.weight": (INTER, D), p + "mlp.up_proj.weight": (INTER, D),
                        p + "mlp.down_proj.weight": (D, INTER)})
    names = sorted(tensors)
    halves = [names[: len(names) // 2], names[len(names) // 2:]]
    folder.mkdir(parents=True, exist_ok=True)
    weight_map, total, qk = {}, 0, 0
    for k, part in enumerate(halves):
        file = f"model-{k + 1:05d}-of-00002.safetensors"
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for n in part:
            size = 2
            for s in tensors[n]:
                size *= s
            header[n] = {"dtype": "BF16", "shape": list(tensors[n]), "data_offsets": [offset, offset + size]}
            offset += size
            if "q_proj" in n or "k_proj" in n or "input_layernorm" in n:
                qk += size
            weight_map[n] = file
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        with open(folder / file, "wb") as fh:
            fh.write(len(raw).to_bytes(8, "little") + raw)
            fh.truncate(8 + len(raw) + offset)
        total += 8 + len(raw) + offset
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                      "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": D, "num_hidden_layers": layers, "num_attention_heads": HEADS,
        "num_key_value_heads": KV, "intermediate_size": INTER, "vocab_size": VOCAB, "rms_norm_eps": 1e-5}))
    return total, qk


def run_child(mode: str, hub, home: Path) -> dict:
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(home / "hf"), "QKGEOMETRY_CACHE": str(home / "qk"),
           "PYTHONPATH": str(ROOT / "src"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        env.pop(var, None)
    hub.reset_log()
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    out, err = proc.stdout.read(), proc.stderr.read()
    if status != 0:
        raise SystemExit(f"the {mode} child failed:\n{err[-2000:]}")
    return {"path": mode, "bytes served": hub.bytes_served(data_only=False),
            "requests": len(hub.log), "wall s": wall, "read s": float(out.split()[-1]),
            "peak RSS MB": usage.ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=32, help="layers of the 7B-shaped checkpoint (default 32)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    from hub_emulator import HubEmulator

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-hub-"))
    try:
        total, qk = write_sparse_checkpoint(work / "repo", args.layers)
        with HubEmulator() as hub:
            hub.add_repo("bench/llama-7b-shaped", work / "repo", on_disk=True)
            rows = []
            for mode in ("remote", "snapshot"):
                rows.append(run_child(mode, hub, work / mode))
                shutil.rmtree(work / mode, ignore_errors=True)
        print(f"Llama-7B-shaped bf16 checkpoint, {args.layers} layers: {total / 1e9:.2f} GB in 2 shards, Q/K + input "
              f"norm gains {qk / 1e9:.3f} GB")
        print(f"{'path':<10}{'served GB':>11}{'x Q/K':>8}{'requests':>10}{'wall s':>9}{'read s':>9}{'peak RSS MB':>13}")
        for r in rows:
            print(f"{r['path']:<10}{r['bytes served'] / 1e9:>11.3f}{r['bytes served'] / qk:>8.2f}{r['requests']:>10}"
                  f"{r['wall s']:>9.1f}{r['read s']:>9.1f}{r['peak RSS MB']:>13.0f}")
        a, b = rows
        print(f"snapshot / remote: bytes {b['bytes served'] / a['bytes served']:.1f}x, wall "
              f"{b['wall s'] / a['wall s']:.1f}x, peak RSS {b['peak RSS MB'] / a['peak RSS MB']:.2f}x")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
