"""Models and helpers for the Hub reader's tests (the loopback emulator is in ``hub_emulator``): tiny folders of
several architectures, a sharded Llama-shaped checkpoint, and score comparisons."""

from __future__ import annotations

import json

import pandas as pd
import torch
from safetensors.torch import save_file

import qkgeometry as qg
from qkgeometry import cli
from tiny_models import tiny_folder as tiny_factory_folder

TIME_LIMIT_S = 120  # per test: a request that hangs fails the test instead of the run

TINY = {
    "bert": dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=99,
                 max_position_embeddings=32),
    "llama": dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2,
                  intermediate_size=64, vocab_size=99, max_position_embeddings=32),
    "gpt2": dict(n_embd=48, n_layer=2, n_head=4, vocab_size=99, n_positions=32),
    "qwen3": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  intermediate_size=64, vocab_size=99, max_position_embeddings=32),
    # row-fused QKV weights: per-head interleaved (GPT-NeoX), blocked with grouped K/V (Phi-3), blocked (ModernBERT)
    "gpt_neox": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=99,
                     max_position_embeddings=32),
    "phi3": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=64, vocab_size=99, max_position_embeddings=32, pad_token_id=0),
    "modernbert": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                       vocab_size=99, max_position_embeddings=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                       cls_token_id=1, sep_token_id=2),
}


def tiny_folder(model_type: str, folder, **save):
    # norms are ones at init: give the gains something to fold
    return tiny_factory_folder(model_type, folder, save=save, norm_jitter=True, **TINY[model_type])


def llama_shards(folder, layers=4, d=256, heads=8, kv=2, inter=512, vocab=512, shard_bytes=600_000):
    """A Llama-shaped bf16 checkpoint split over shards with an index (every tensor a real Llama keeps)."""
    hd = d // heads
    gen = torch.Generator().manual_seed(1)

    def r(*shape):
        return torch.randn(*shape, generator=gen).to(torch.bfloat16)

    tensors = {"model.embed_tokens.weight": r(vocab, d), "model.norm.weight": r(d), "lm_head.weight": r(vocab, d)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update({p + "input_layernorm.weight": r(d), p + "post_attention_layernorm.weight": r(d),
                        p + "self_attn.q_proj.weight": r(heads * hd, d), p + "self_attn.k_proj.weight": r(kv * hd, d),
                        p + "self_attn.v_proj.weight": r(kv * hd, d), p + "self_attn.o_proj.weight": r(d, d),
                        p + "mlp.gate_proj.weight": r(inter, d), p + "mlp.up_proj.weight": r(inter, d),
                        p + "mlp.down_proj.weight": r(d, inter)})
    folder.mkdir(parents=True, exist_ok=True)
    shards, current, size = [], {}, 0
    for name in sorted(tensors):
        current[name] = tensors[name]
        size += tensors[name].numel() * 2
        if size >= shard_bytes:
            shards.append(current)
            current, size = {}, 0
    if current:
        shards.append(current)
    weight_map = {}
    for k, shard in enumerate(shards):
        file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(folder / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, file))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv, "intermediate_size": inter, "vocab_size": vocab, "rms_norm_eps": 1e-5}))
    return folder, tensors


def same_scores(a, b):
    for per in ("layer", "head"):
        fa, fb = qg.score_model(a, per=per), qg.score_model(b, per=per)
        cols = ["component", "layer", "head", "symmetry", "directionality"]
        pd.testing.assert_frame_equal(fa[cols].reset_index(drop=True), fb[cols].reset_index(drop=True),
                                      check_exact=True)




def one_line(capsys, argv):
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err, err
    return err


def hub_cache_root():
    from qkgeometry.catalogue import cache_dir

    return cache_dir() / "hub"


