"""GGUF: a Qwen2 file reads back in HF's row order (no rope un-permutation), biases beside the weights."""

from __future__ import annotations

import torch

import qkgeometry as qg


def test_qwen2_gguf_is_read_without_rope_unpermutation(tmp_path):
    """llama.cpp stores Qwen2's Q/K rows in HF order (its NEOX rope pairs j and j + head_dim/2, like HF), with
    their biases beside them. A tiny Qwen2 written that way reads back with HF's per-head factors and KV mapping."""
    import gguf
    import transformers

    torch.manual_seed(0)
    config = transformers.Qwen2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=8,
                                      num_key_value_heads=2, intermediate_size=96, vocab_size=99)
    model = transformers.Qwen2Model(config).eval()
    path = tmp_path / "tiny-qwen2.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_block_count(2)
    writer.add_embedding_length(64)
    writer.add_head_count(8)
    writer.add_head_count_kv(2)
    for i, layer in enumerate(model.layers):
        a = layer.self_attn
        for short, linear in (("q", a.q_proj), ("k", a.k_proj)):
            writer.add_tensor(f"blk.{i}.attn_{short}.weight", linear.weight.detach().numpy())
            writer.add_tensor(f"blk.{i}.attn_{short}.bias", linear.bias.detach().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    from_gguf, from_hf = qg.load_qk(path), qg.load_qk(model)
    assert (from_gguf.architecture, from_gguf.n_heads, from_gguf.n_kv_heads) == ("qwen2", 8, 2)
    for lg, lh in zip(from_gguf, from_hf, strict=True):
        torch.testing.assert_close(lg.wq, lh.wq, atol=1e-7, rtol=0)  # per-head factors in HF's row order
        torch.testing.assert_close(lg.wk_kv, lh.wk_kv, atol=1e-7, rtol=0)
        torch.testing.assert_close(lg.matrix(5), lh.wq[5] @ lh.wk_kv[5 // 4].T, atol=1e-7, rtol=0)  # repeating
