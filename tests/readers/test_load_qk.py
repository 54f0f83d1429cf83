"""Loading: every source kind gives the same W_qk; damaged or unsupported sources give clear errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
import transformers

import qkgeometry as qg
from qkgeometry.catalogue import offline_path
from qkgeometry.errors import SourceError
from qkgeometry.readers.hf_config import ConfigView
from tiny_models import tiny_model

TINY_LLAMA = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2,
                  intermediate_size=64, vocab_size=99, max_position_embeddings=32)
TINY_BERT = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=99,
                 max_position_embeddings=32)


def tiny(model_type: str, cls=transformers.AutoModel, **config):
    return tiny_model(model_type, cls, **config)


def assert_same_layers(a: qg.QKModel, b: qg.QKModel, atol: float = 1e-12):
    assert len(a) == len(b)
    for la, lb in zip(a, b):
        assert (la.index, la.component) == (lb.index, lb.component)
        torch.testing.assert_close(la.matrix(), lb.matrix(), atol=atol, rtol=0)
        for h in range(la.n_heads):
            torch.testing.assert_close(la.matrix(h), lb.matrix(h), atol=atol, rtol=0)


# -------------------------------------------------------------------------------------------- sources
def test_folder_in_memory_and_sharded_agree(tmp_path):
    model = tiny("llama", **TINY_LLAMA)
    model.save_pretrained(tmp_path / "one")
    model.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert len(list((tmp_path / "sharded").glob("*.safetensors"))) > 1
    from_memory = qg.load_qk(model)
    assert_same_layers(qg.load_qk(tmp_path / "one"), from_memory)
    assert_same_layers(qg.load_qk(str(tmp_path / "sharded")), from_memory)
    m = qg.load_qk(tmp_path / "one")
    assert (m.architecture, m.family, m.n_layers, m.d_model, m.n_heads, m.n_kv_heads, m.head_dim) == \
        ("llama", "decoder", 3, 64, 8, 2, 8)
    layer = m.layer(1)
    assert layer.wq.shape == layer.wk.shape == (8, 64, 8) and layer.wk_kv.shape == (2, 64, 8)
    assert layer.wq.dtype == torch.float64
    torch.testing.assert_close(layer.wk[3], layer.wk_kv[0]), torch.testing.assert_close(layer.wk[4], layer.wk_kv[1])


def test_task_head_prefix_and_bf16(tmp_path):
    model = tiny("bert", transformers.BertForMaskedLM, **TINY_BERT)  # tensors are stored under "bert."
    model.to(torch.bfloat16).save_pretrained(tmp_path)
    qk = qg.load_qk(tmp_path)
    ref = model.bert.encoder.layer[1].attention.self
    wq = ref.query.weight.double().reshape(4, 12, 48).transpose(1, 2)
    torch.testing.assert_close(qk.layer(1).wq, wq, atol=0, rtol=0)


def test_layer_matrix_is_sum_of_head_matrices():
    layer = qg.load_qk(tiny("llama", **TINY_LLAMA)).layer(0)
    torch.testing.assert_close(layer.matrix(), sum(layer.matrix(h) for h in range(layer.n_heads)), atol=1e-12,
                               rtol=0)
    with pytest.raises(IndexError, match=r"`head` must be an int in \[0, 8\)"):
        layer.matrix(8)


# ------------------------------------------------------------------------------------------------ GGUF
def llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """What llama.cpp's converter does to HF q_proj/k_proj rows (rotate-half -> interleaved pairs)."""
    rows, cols = w.shape
    return w.reshape(n_heads, 2, rows // n_heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def write_tiny_gguf(model, path, quantize_first: bool = True):
    import gguf

    cfg = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    for i, layer in enumerate(model.layers):
        q = llama_cpp_permute(layer.self_attn.q_proj.weight.detach().float().numpy(), cfg.num_attention_heads)
        k = llama_cpp_permute(layer.self_attn.k_proj.weight.detach().float().numpy(), cfg.num_key_value_heads)
        if quantize_first and i == 0:
            qtype = gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(f"blk.{i}.attn_q.weight", gguf.quants.quantize(q, qtype),
                              raw_dtype=qtype)
        else:
            writer.add_tensor(f"blk.{i}.attn_q.weight", q)
        writer.add_tensor(f"blk.{i}.attn_k.weight", k)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_gguf_matches_hf_and_undoes_rope_permutation(tmp_path):
    model = tiny("llama", **TINY_LLAMA)
    write_tiny_gguf(model, tmp_path / "tiny.gguf")
    from_gguf, from_hf = qg.load_qk(tmp_path / "tiny.gguf"), qg.load_qk(model)
    assert (from_gguf.n_layers, from_gguf.n_heads, from_gguf.n_kv_heads, from_gguf.head_dim) == (3, 8, 2, 8)
    for lg, lh in zip(from_gguf, from_hf):
        tol = 0.05 if lg.index == 0 else 1e-6  # layer 0's Q went through Q8_0
        torch.testing.assert_close(lg.wk_kv, lh.wk_kv, atol=tol, rtol=0)  # per-head factors, un-permuted
        torch.testing.assert_close(lg.wq, lh.wq, atol=tol, rtol=0)
        for h in range(8):
            assert qg.symmetry_score(lg.matrix(h)) == pytest.approx(qg.symmetry_score(lh.matrix(h)), abs=0.02 if
                                                                     lg.index == 0 else 1e-6)


def test_rope_permutation_alone_leaves_w_qk_unchanged():
    """Applying the same per-head row permutation to Q and K permutes the head_dim axis of both factors."""
    model = tiny("llama", **TINY_LLAMA)
    attn = model.layers[0].self_attn
    q, k = attn.q_proj.weight.detach().double().numpy(), attn.k_proj.weight.detach().double().numpy()
    qp, kp = llama_cpp_permute(q, 8), llama_cpp_permute(k, 2)
    wq, wk = q.reshape(8, 8, 64), k.reshape(2, 8, 64)
    wqp, wkp = qp.reshape(8, 8, 64), kp.reshape(2, 8, 64)
    for h in range(8):
        np.testing.assert_allclose(wqp[h].T @ wkp[h // 4], wq[h].T @ wk[h // 4], atol=1e-12)
        if h % 2 != h // 4:  # tiling pairs this head with the wrong KV head, and that is visible
            assert not np.allclose(wqp[h].T @ wkp[h % 2], wq[h].T @ wk[h // 4])


def test_real_smollm2_gguf_layer_is_sum_of_heads():
    qk = qg.load_qk("offline:smollm2-135m")
    assert (qk.architecture, qk.n_layers, qk.d_model, qk.n_heads, qk.n_kv_heads, qk.head_dim) == \
        ("llama", 30, 576, 9, 3, 64)
    layer = qk.layer(5)
    dense = sum(layer.matrix(h) for h in range(9))
    assert qg.symmetry_score_factored(*layer.factors()) == pytest.approx(qg.symmetry_score(dense), abs=1e-10)


# --------------------------------------------------------------------------------------------- errors
def test_truncated_safetensors_is_a_clear_error(tmp_path):
    tiny("bert", **TINY_BERT).save_pretrained(tmp_path)
    f = tmp_path / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(SourceError, match=r"truncated or corrupt"):
        for _ in qg.load_qk(tmp_path):
            pass
    f.write_bytes(b"\x10")
    with pytest.raises(SourceError, match=r"could not read safetensors file .*truncated"):
        qg.load_qk(tmp_path)


def test_truncated_gguf_is_a_clear_error(tmp_path):
    src = offline_path("smollm2-135m")
    with open(src, "rb") as f:
        head = f.read(5_000_000)
    for size in (5_000_000, 2_000, 3):  # tensor data cut, header cut, nothing left
        (tmp_path / "cut.gguf").write_bytes(head[:size])
        with pytest.raises(SourceError, match=r"could not read GGUF file .*truncated"):
            qg.load_qk(tmp_path / "cut.gguf")


def test_folder_errors(tmp_path):
    with pytest.raises(SourceError, match=r"has no config\.json"):
        qg.load_qk(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"not really")
    with pytest.raises(SourceError, match=r"no \*\.safetensors files.*never unpickles"):
        qg.load_qk(tmp_path)
    (tmp_path / "config.json").write_text("{ truncated")
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(SourceError, match="not valid JSON"):
        qg.load_qk(tmp_path)


def test_unknown_model_type_lists_supported(tmp_path):
    folder = tmp_path / "m"
    tiny("bert", **TINY_BERT).save_pretrained(folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["model_type"] = "no-such-arch"
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SourceError, match=r"no-such-arch.*Supported: .*bert.*gpt2.*llama"):
        qg.load_qk(folder)


def test_unsupported_architectures_are_source_errors():
    from qkgeometry.architectures import architecture_for_gguf, get_architecture

    with pytest.raises(SourceError, match="model_type 'nope' is not supported"):
        get_architecture("nope")
    with pytest.raises(SourceError, match="GGUF architecture 'nope' is not supported"):
        architecture_for_gguf("nope")


def test_a_hub_error_with_an_empty_message_is_still_one_clear_line(monkeypatch):
    import huggingface_hub

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)

    def fail(*args, **kwargs):
        raise ConnectionError("")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", fail)
    with pytest.raises(SourceError, match=r"could not reach the Hugging Face Hub for 'someone/model' "
                                          r"\(ConnectionError: ConnectionError\)"):
        qg.load_qk("someone/model")


def test_architecture_mismatch_names_missing_tensor(tmp_path):
    tiny("bert", **TINY_BERT).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    shutil.copy(tmp_path / "config.json", tmp_path / "orig.json")
    cfg["model_type"] = "gpt2"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SourceError, match=r"no tensor named like 'h.0.attn.c_attn.weight'"):
        qg.load_qk(tmp_path)


def test_bad_source_kinds(tmp_path, monkeypatch):
    with pytest.raises(SourceError, match=r"does not exist.*offline:<name>"):
        qg.load_qk("./missing-folder")
    with pytest.raises(TypeError, match=r"`source` must be a path.*got int"):
        qg.load_qk(3)
    (tmp_path / "weights.npz").write_bytes(b"")
    with pytest.raises(SourceError, match=r"neither a model folder nor a \.gguf file"):
        qg.load_qk(tmp_path / "weights.npz")
    with pytest.raises(ValueError, match=r"unknown offline model 'nope'.*offline:minilm-l6"):
        qg.load_qk("offline:nope")


def test_hub_id_offline_suggests_local_alternatives(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    with pytest.raises(SourceError, match=r"HF_HUB_OFFLINE is set and 'some-org/some-model'.*offline:minilm-l6"):
        qg.load_qk("some-org/some-model")


@pytest.mark.parametrize("model_type", sorted(ConfigView.HEAD_DIM_IS_WIDTH_OVER_HEADS))
def test_head_dim_fast_path_agrees_with_transformers(model_type):
    """Without head_dim in config.json, the sizes come without importing transformers, and equal what it gives."""
    from qkgeometry.architectures import get_architecture

    raw = {"model_type": model_type, "hidden_size": 96, "num_attention_heads": 8, "num_key_value_heads": 2,
           "num_hidden_layers": 3}
    view = ConfigView(raw, lambda: pytest.fail("transformers was consulted"))
    real = transformers.AutoConfig.for_model(model_type, **{k: v for k, v in raw.items() if k != "model_type"})
    block = get_architecture(model_type).blocks[0]
    assert block.dims(view) == block.dims(real) and block.dims(view).head_dim == 12


# ------------------------------------------------------------------------------------------ input norm (GGUF)
@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_gguf_input_norm_and_query_bias_match_transformers(tmp_path, arch):
    """A tiny model written as llama.cpp's converter writes it (Llama: Q/K rows and the Q bias permuted; Gemma-3:
    every norm weight stored as 1 + w) reads back with the same folded factors and query bias as the
    transformers model, whose folded form is checked against its own logits in the architectures tests."""
    import gguf
    import transformers

    torch.manual_seed(0)
    common = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                  intermediate_size=96, vocab_size=99)
    if arch == "gemma3":
        config = transformers.Gemma3TextConfig(**common, head_dim=16, query_pre_attn_scalar=16)
    elif arch == "qwen2":
        config = transformers.Qwen2Config(**common)
    else:
        config = transformers.LlamaConfig(**common, attention_bias=True)
    model = transformers.AutoModel.from_config(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(-0.5, 1.5)
            elif name.endswith("bias"):
                p.normal_(0, 0.5)
    hf_folder = tmp_path / "hf"
    model.save_pretrained(hf_folder, safe_serialization=True)
    offset = 1.0 if arch == "gemma3" else 0.0
    path = tmp_path / f"tiny-{arch}.gguf"
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(2)
    writer.add_embedding_length(64)
    writer.add_head_count(8)
    writer.add_head_count_kv(2)
    if arch == "gemma3":
        writer.add_key_length(16)
    for i, layer in enumerate(model.layers):
        a = layer.self_attn
        for short, linear, heads in (("q", a.q_proj, 8), ("k", a.k_proj, 2)):
            w = linear.weight.detach().numpy()
            b = None if linear.bias is None else linear.bias.detach().numpy()
            if arch == "llama":
                w = llama_cpp_permute(w, heads)
                b = None if b is None else llama_cpp_permute(b[:, None], heads)[:, 0]
            writer.add_tensor(f"blk.{i}.attn_{short}.weight", w)
            if b is not None:
                writer.add_tensor(f"blk.{i}.attn_{short}.bias", b)
        writer.add_tensor(f"blk.{i}.attn_norm.weight", layer.input_layernorm.weight.detach().numpy() + offset)
        if arch == "gemma3":
            writer.add_tensor(f"blk.{i}.attn_q_norm.weight", a.q_norm.weight.detach().numpy() + 1)
            writer.add_tensor(f"blk.{i}.attn_k_norm.weight", a.k_norm.weight.detach().numpy() + 1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for mode in ("raw", "folded"):
        from_gguf, from_hf = qg.load_qk(path, input_norm=mode), qg.load_qk(hf_folder, input_norm=mode)
        assert from_gguf.input_norm == mode
        for lg, lh in zip(from_gguf, from_hf, strict=True):
            torch.testing.assert_close(lg.wq, lh.wq, atol=1e-6, rtol=0)  # float32 storage + (1 + w) in float32
            torch.testing.assert_close(lg.wk_kv, lh.wk_kv, atol=1e-6, rtol=0)
            if arch == "gemma3":
                assert lg.bq is None and lh.bq is None
            else:
                torch.testing.assert_close(lg.bq, lh.bq, atol=1e-6, rtol=0)
    raw, folded = qg.load_qk(path).layer(1), qg.load_qk(path, input_norm="folded").layer(1)
    gamma = offset + model.layers[1].input_layernorm.weight.detach().double()
    torch.testing.assert_close(folded.wq, raw.wq * gamma[None, :, None], atol=1e-6, rtol=0)


@pytest.mark.parametrize("locked", ["model.safetensors", "config.json", "model.gguf"])
def test_a_file_of_another_user_is_reported_as_permission_denied(tmp_path, locked):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from bounded import unprivileged

    prefix = unprivileged()
    folder = tmp_path / "m"
    tiny("llama", **TINY_LLAMA).save_pretrained(folder)
    target = folder / locked
    if locked == "model.gguf":
        target.write_bytes(b"GGUF" + bytes(200))
        source = target
    else:
        source = folder
    if prefix:  # root: a file of another user, readable by its owner only
        os.chown(target, 12345, 12345)
    target.chmod(0o600 if prefix else 0o000)
    src = str(Path(qg.__file__).resolve().parents[1])
    tests = str(Path(__file__).resolve().parents[1])
    res = subprocess.run([*prefix, sys.executable, "-m", "qkgeometry.cli", "score", str(source)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join([src, tests])})
    target.chmod(0o644)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert "permission denied" in lines[0] and locked in lines[0] and "FileNotFoundError" not in lines[0], lines[0]


def test_a_check_that_fails_leaves_no_file_open(tmp_path, monkeypatch):
    """The folder reader closes the safetensors files it opened when a check of the model raises (here a
    quantisation it cannot dequantise)."""
    from tiny_models import quantised_folder, spy_on_closing

    folder = quantised_folder(tmp_path / "m")
    cleared = spy_on_closing(monkeypatch)
    with pytest.raises(SourceError, match="quant_method"):
        qg.load_qk(folder)
    assert cleared and cleared[-1] > 0
