"""What a training trajectory costs before anything is fetched: ``qkgeometry trajectory REPO --plan`` for Pythia-shaped
repos whose branches are the suite's checkpoints, served by the loopback Hub emulator of the test suite.

Each revision is a synthetic checkpoint with the real safetensors header of its model (GPT-NeoX, row-fused
``query_key_value`` in fp16; zero data, generated as it is served) and its own commit, on the branch names of the
Pythia suite: ``step0``, ``step1``, ``step2``, ``step4`` … ``step512`` and ``step1000`` … ``step143000`` every 1,000
(154 branches). The plan reads one header per revision and fetches no tensor data; its table gives, per revision and
in total, the checkpoint's bytes, the Q/K bytes (only the Q and K rows of the fused tensor), and the HTTP requests a
cold fetch sends. Run from the repository root:

    python benchmarks/bench_trajectory_plan.py [--model 160m|1.4b] [--log-spaced K]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

#: name -> (d_model, heads, layers); vocabulary 50,304 and MLP 4·d for every Pythia size
SIZES = {"160m": (768, 12, 12), "1.4b": (2048, 16, 24)}
STEPS = [0, *[2 ** k for k in range(10)], *range(1000, 143001, 1000)]


def pythia(size: str) -> tuple[dict, dict]:
    d, heads, layers = SIZES[size]
    vocab, inter = 50304, 4 * d
    tensors = {"gpt_neox.embed_in.weight": (vocab, d), "gpt_neox.final_layer_norm.weight": (d,),
               "gpt_neox.final_layer_norm.bias": (d,), "embed_out.weight": (vocab, d)}
    for i in range(layers):
        p = f"gpt_neox.layers.{i}."
        tensors.update({p + "input_layernorm.weight": (d,), p + "input_layernorm.bias": (d,),
                        p + "post_attention_layernorm.weight": (d,), p + "post_attention_layernorm.bias": (d,),
                        p + "attention.query_key_value.weight": (3 * d, d),
                        p + "attention.query_key_value.bias": (3 * d,),
                        p + "attention.dense.weight": (d, d), p + "attention.dense.bias": (d,),
                        p + "mlp.dense_h_to_4h.weight": (inter, d), p + "mlp.dense_h_to_4h.bias": (inter,),
                        p + "mlp.dense_4h_to_h.weight": (d, inter), p + "mlp.dense_4h_to_h.bias": (d,)})
    config = {"model_type": "gpt_neox", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": inter, "vocab_size": vocab, "rotary_pct": 0.25, "layer_norm_eps": 1e-5,
              "use_parallel_residual": True}
    return {"model.safetensors": {n: ("F16", tensors[n]) for n in sorted(tensors)}}, config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(SIZES), default="160m")
    parser.add_argument("--log-spaced", type=int, help="plan K log-spaced revisions instead of all 154")
    args = parser.parse_args()
    from hub_emulator import HubEmulator

    shards, config = pythia(args.model)
    repo = f"bench/pythia-{args.model}-shaped"
    with HubEmulator() as hub, tempfile.TemporaryDirectory() as home:
        for step in STEPS:  # one commit per branch: config.json says which step it is
            files = {"config.json": json.dumps({**config, "_step": step}).encode()}
            hub.add_synthetic(repo, shards, files, branch=f"step{step}")
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": f"{home}/hf", "QKGEOMETRY_CACHE": f"{home}/qk",
               "PYTHONPATH": str(ROOT / "src"), "HF_HUB_DISABLE_PROGRESS_BARS": "1", "OMP_NUM_THREADS": "1"}
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
            env.pop(var, None)
        argv = [sys.executable, "-m", "qkgeometry", "trajectory", repo, "--out", f"{home}/t.sqlite", "--plan"]
        if args.log_spaced:
            argv += ["--log-spaced", str(args.log_spaced)]
        t = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-2000:])
        lines = proc.stdout.rstrip().splitlines()
        print("\n".join([*lines[:4], "...", *lines[-3:]]))
        data = sum(1 for r in hub.log if r.is_data and r.range and not r.range.startswith("bytes=0-"))
        print(f"planned in {wall:.1f} s with {len(hub.log)} HTTP requests to the emulator "
              f"({len(hub.resolves())} /resolve); tensor data fetched by the plan: {hub.bytes_served() / 1e6:.1f} MB "
              f"({data} ranges beyond a header)")


if __name__ == "__main__":
    main()
