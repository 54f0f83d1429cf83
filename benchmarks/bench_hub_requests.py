"""HTTP requests per model when the Q/K of a Hub checkpoint are fetched: ``/resolve`` requests (the ones the Hub
rate-limits: 3,000 per 5 minutes per IP anonymously) and all requests, for two versions of the reader side by side.

Synthetic checkpoints with the headers of real ones and zero data generated as it is served (no disk, no memory):
a Llama-2-7B-shaped bf16 checkpoint (2 shards and an index), a Pythia-1.4B-shaped (GPT-NeoX, row-fused
``query_key_value``, interleaved per head) fp16 checkpoint and a Phi-3-mini-shaped (row-fused ``qkv_proj``, blocked)
bf16 checkpoint. Each run is a fresh child process with empty caches that opens the model and
reads every layer (``iter_layers``), against the loopback Hub emulator of the test suite. Run from the repository
root:

    python benchmarks/bench_hub_requests.py [--before SRC_DIR]

``--before``: the ``src`` folder of another version (for instance ``git archive <commit> src | tar -x -C /tmp/x``);
without it only this checkout is measured.
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

CHILD = r"""
import sys, warnings
warnings.simplefilter("ignore")
import qkgeometry as qg
model = qg.load_qk(sys.argv[1])
for layer in model.iter_layers(convert=False):
    pass
"""


def llama_7b() -> tuple[dict, dict]:
    d, heads, inter, vocab, layers = 4096, 32, 11008, 32000, 32
    tensors = {"model.embed_tokens.weight": (vocab, d), "model.norm.weight": (d,), "lm_head.weight": (vocab, d)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update({p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,),
                        p + "self_attn.q_proj.weight": (d, d), p + "self_attn.k_proj.weight": (d, d),
                        p + "self_attn.v_proj.weight": (d, d), p + "self_attn.o_proj.weight": (d, d),
                        p + "mlp.gate_proj.weight": (inter, d), p + "mlp.up_proj.weight": (inter, d),
                        p + "mlp.down_proj.weight": (d, inter)})
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[: 2 * len(names) // 3],
              "model-00002-of-00002.safetensors": names[2 * len(names) // 3:]}
    shards = {f: {n: ("BF16", tensors[n]) for n in part} for f, part in halves.items()}
    index = {"metadata": {}, "weight_map": {n: f for f, part in halves.items() for n in part}}
    config = {"model_type": "llama", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": heads, "intermediate_size": inter, "vocab_size": vocab, "rms_norm_eps": 1e-5}
    return shards, {"config.json": json.dumps(config).encode(),
                    "model.safetensors.index.json": json.dumps(index).encode()}


def pythia(d: int = 2048, heads: int = 16, layers: int = 24) -> tuple[dict, dict]:
    """A Pythia checkpoint's shards and files (GPT-NeoX, fp16, vocabulary 50,304, MLP 4·d); default Pythia-1.4B."""
    inter, vocab = 4 * d, 50304
    tensors = {"gpt_neox.embed_in.weight": (vocab, d), "gpt_neox.final_layer_norm.weight": (d,),
               "gpt_neox.final_layer_norm.bias": (d,), "embed_out.weight": (vocab, d)}
    for i in range(layers):
        p = f"gpt_neox.layers.{i}."
        tensors.update({p + "input_layernorm.weight": (d,), p + "input_layernorm.bias": (d,),
                        p + "post_attention_layernorm.weight": (d,), p + "post_attention_layernorm.bias": (d,),
                        p + "attention.query_key_value.weight": (3 * d, d), p + "attention.query_key_value.bias": (3 * d,),
                        p + "attention.dense.weight": (d, d), p + "attention.dense.bias": (d,),
                        p + "mlp.dense_h_to_4h.weight": (inter, d), p + "mlp.dense_h_to_4h.bias": (inter,),
                        p + "mlp.dense_4h_to_h.weight": (d, inter), p + "mlp.dense_4h_to_h.bias": (d,)})
    shards = {"model.safetensors": {n: ("F16", tensors[n]) for n in sorted(tensors)}}
    config = {"model_type": "gpt_neox", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": inter, "vocab_size": vocab, "rotary_pct": 0.25, "layer_norm_eps": 1e-5,
              "use_parallel_residual": True}
    return shards, {"config.json": json.dumps(config).encode()}


def phi3_mini() -> tuple[dict, dict]:
    d, heads, inter, vocab, layers = 3072, 32, 8192, 32064, 32
    tensors = {"model.embed_tokens.weight": (vocab, d), "model.norm.weight": (d,), "lm_head.weight": (vocab, d)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update({p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,),
                        p + "self_attn.qkv_proj.weight": (3 * d, d), p + "self_attn.o_proj.weight": (d, d),
                        p + "mlp.gate_up_proj.weight": (2 * inter, d), p + "mlp.down_proj.weight": (d, inter)})
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[: 2 * len(names) // 3],
              "model-00002-of-00002.safetensors": names[2 * len(names) // 3:]}
    shards = {f: {n: ("BF16", tensors[n]) for n in part} for f, part in halves.items()}
    index = {"metadata": {}, "weight_map": {n: f for f, part in halves.items() for n in part}}
    config = {"model_type": "phi3", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": heads, "intermediate_size": inter, "vocab_size": vocab, "rms_norm_eps": 1e-5}
    return shards, {"config.json": json.dumps(config).encode(),
                    "model.safetensors.index.json": json.dumps(index).encode()}


def run_child(repo: str, src: Path, hub, home: Path) -> dict:
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(home / "hf"), "QKGEOMETRY_CACHE": str(home / "qk"),
           "PYTHONPATH": str(src), "HF_HUB_DISABLE_PROGRESS_BARS": "1", "OMP_NUM_THREADS": "1"}
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        env.pop(var, None)
    hub.reset_log()
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, repo], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"the child for {repo} ({src}) failed:\n{proc.stderr[-2000:]}")
    return {"resolve": len(hub.resolves()), "requests": len(hub.log), "MB": hub.bytes_served(data_only=False) / 1e6,
            "wall s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="the src folder of the version to compare with")
    parser.add_argument("--models", nargs="*", default=["llama", "pythia", "phi3"],
                        help="which checkpoints (llama, pythia, phi3; default all)")
    args = parser.parse_args()
    from hub_emulator import HubEmulator

    versions = ([("before", args.before)] if args.before else []) + [("this", ROOT / "src")]
    work = Path(tempfile.mkdtemp(prefix="bench-hub-requests-"))
    try:
        with HubEmulator() as hub:
            makers = {"llama": ("bench/llama-2-7b-shaped", llama_7b), "pythia": ("bench/pythia-1.4b-shaped", pythia),
                      "phi3": ("bench/phi-3-mini-shaped", phi3_mini)}
            repos = {makers[m][0]: makers[m][1]() for m in args.models}
            for repo, (shards, files) in repos.items():
                hub.add_synthetic(repo, shards, files)
            print(f"{'model':<26}{'version':<8}{'shards':>7}{'/resolve':>10}{'requests':>10}{'MB served':>11}"
                  f"{'wall s':>8}")
            for repo, (shards, _) in repos.items():
                for label, src in versions:
                    r = run_child(repo, src, hub, work / label / repo.replace("/", "--"))
                    shutil.rmtree(work / label, ignore_errors=True)
                    print(f"{repo:<26}{label:<8}{len(shards):>7}{r['resolve']:>10}{r['requests']:>10}"
                          f"{r['MB']:>11.1f}{r['wall s']:>8.1f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
