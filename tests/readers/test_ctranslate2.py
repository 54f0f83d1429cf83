"""CTranslate2 reader (on files the tests write) and the Whisper adapter against transformers' own logits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import qkgeometry as qg
from ct2_writer import write_ctranslate2
from logit_harness import capture_softmax_inputs
from qkgeometry.errors import SourceError
from qkgeometry.readers.ctranslate2 import CT2FormatError, CT2Index, is_ctranslate2


def test_reader_round_trip_of_every_written_dtype(tmp_path):
    rng = np.random.default_rng(0)
    w32 = rng.normal(size=(6, 4)).astype(np.float32)
    w16 = rng.normal(size=(3, 5)).astype(np.float16)
    w_float = rng.normal(size=(4, 8)).astype(np.float32)
    scale = (127 / np.abs(w_float).max(axis=1)).astype(np.float32)  # CTranslate2's per-row int8 scale
    w8 = np.round(w_float * scale[:, None]).astype(np.int8)
    path = write_ctranslate2(tmp_path / "model.bin", "TinySpec", {
        "a/weight": w32, "b/weight": w16, "c/weight": w8, "c/weight_scale": scale,
        "num_heads": np.array(8, dtype=np.int16), "ids": np.arange(3, dtype=np.int32)},
        revision=3, aliases={"tied/weight": "a/weight"})
    assert is_ctranslate2(path)
    index = CT2Index(path)
    assert (index.version, index.spec, index.revision) == (6, "TinySpec", 3)
    assert index.names() == ["a/weight", "b/weight", "c/weight", "c/weight_scale", "num_heads", "ids"]
    assert index.variables["b/weight"].shape == (3, 5) and index.variables["c/weight"].dtype_id == 1
    np.testing.assert_array_equal(index.tensor("a/weight"), w32)
    np.testing.assert_array_equal(index.tensor("tied/weight"), w32)  # alias resolved
    np.testing.assert_array_equal(index.tensor("b/weight"), w16.astype(np.float32))
    np.testing.assert_array_equal(index.raw("c/weight"), w8)
    np.testing.assert_allclose(index.tensor("c/weight"), w_float, atol=0.5 / scale.min())  # half an int8 step
    assert index.scalar("num_heads") == 8 and index.tensor("ids").tolist() == [0, 1, 2]


def test_int16_weights_are_divided_by_their_scale_and_bad_scales_are_refused(tmp_path):
    rng = np.random.default_rng(1)
    w_float = rng.normal(size=(4, 6)).astype(np.float32)
    scale = np.array(1000.0, np.float32)  # one scale for the tensor
    w16 = np.round(w_float * scale).astype(np.int16)
    path = write_ctranslate2(tmp_path / "model.bin", "TinySpec", {"w": w16, "w_scale": scale,
                                                                  "v": w16, "v_scale": np.ones(3, np.float32),
                                                                  "u": w16})
    index = CT2Index(path)
    np.testing.assert_allclose(index.tensor("w"), w_float, atol=0.5 / 1000)
    with pytest.raises(CT2FormatError, match=r"'v_scale' has 3 entries; .* needs 1 or 4"):
        index.tensor("v")
    with pytest.raises(CT2FormatError, match=r"int16 variable 'u' has no 'u_scale'"):
        index.tensor("u")


def test_bfloat16_is_widened(tmp_path):
    values = np.array([1.0, -2.5, 0.15625], dtype=np.float32)
    path = write_ctranslate2(tmp_path / "model.bin", "TinySpec", {"x": (values.view(np.uint32) >> 16).astype(
        np.int16)})
    data = bytearray(path.read_bytes())
    data[data.index(b"x\0") + 2 + 1 + 4] = 5  # after name, rank 1, one uint32 dim: the dtype id -> bfloat16
    path.write_bytes(bytes(data))
    np.testing.assert_array_equal(CT2Index(path).tensor("x"), values)


def test_truncated_and_foreign_files_are_refused(tmp_path):
    path = write_ctranslate2(tmp_path / "model.bin", "TinySpec", {"w": np.ones((64, 64), np.float32)})
    data = path.read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[:-100])
    with pytest.raises(CT2FormatError, match=r"'w' \(64, 64\) claims 16384 bytes .* truncated or corrupt"):
        CT2Index(tmp_path / "cut.bin")
    (tmp_path / "head.bin").write_bytes(data[:9])
    with pytest.raises(CT2FormatError, match="truncated or malformed"):
        CT2Index(tmp_path / "head.bin")
    (tmp_path / "v9.bin").write_bytes(b"\x09\0\0\0" + data[4:])
    with pytest.raises(CT2FormatError, match="binary version 9 is not supported"):
        CT2Index(tmp_path / "v9.bin")
    # a PyTorch checkpoint (zip or pickle) is never taken for a CTranslate2 file, and never unpickled
    torch.save({"w": torch.ones(2)}, tmp_path / "pytorch_model.bin")
    assert not is_ctranslate2(tmp_path / "pytorch_model.bin")
    with pytest.raises(SourceError, match=r"neither a model folder nor a \.gguf file"):
        qg.load_qk(tmp_path / "pytorch_model.bin")
    # another CTranslate2 spec is refused by name
    with pytest.raises(SourceError, match="'TinySpec' model; only WhisperSpec"):
        qg.load_qk(path)


# ------------------------------------------------------------------------------------------------ Whisper
TINY_WHISPER = dict(d_model=48, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
                    decoder_attention_heads=6, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=99,
                    num_mel_bins=8, max_source_positions=16, max_target_positions=16, pad_token_id=1,
                    bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)


def _tiny_whisper():
    import transformers

    torch.manual_seed(0)
    config = transformers.WhisperConfig(**TINY_WHISPER)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()  # eager: softmax is seen
    assert type(model).__name__ == "WhisperModel"
    return model.to(torch.float64)  # float32 values held in float64: the float32 file below is exact


def _to_ctranslate2(model, path, int8_layer: int | None = None) -> None:
    """Write ``model``'s attention weights in CTranslate2's Whisper layout (what its converter produces), with
    the decoder's self-attention of ``int8_layer`` stored as int8 + per-row scale."""
    def w(linear):
        return linear.weight.detach().numpy().astype(np.float32)

    variables = {"encoder/num_heads": np.array(model.config.encoder_attention_heads, np.int16),
                 "decoder/num_heads": np.array(model.config.decoder_attention_heads, np.int16)}
    for i, layer in enumerate(model.encoder.layers):
        a = layer.self_attn
        variables[f"encoder/layer_{i}/self_attention/linear_0/weight"] = np.concatenate(
            [w(a.q_proj), w(a.k_proj), w(a.v_proj)])
    for i, layer in enumerate(model.decoder.layers):
        a, c = layer.self_attn, layer.encoder_attn
        fused = np.concatenate([w(a.q_proj), w(a.k_proj), w(a.v_proj)])
        name = f"decoder/layer_{i}/self_attention/linear_0/weight"
        if i == int8_layer:
            scale = (127 / np.abs(fused).max(axis=1)).astype(np.float32)
            variables[name], variables[name + "_scale"] = np.round(fused * scale[:, None]).astype(np.int8), scale
        else:
            variables[name] = fused
        variables[f"decoder/layer_{i}/attention/linear_0/weight"] = w(c.q_proj)
        variables[f"decoder/layer_{i}/attention/linear_1/weight"] = np.concatenate([w(c.k_proj), w(c.v_proj)])
    write_ctranslate2(path, "WhisperSpec", variables, revision=3)


def test_a_missing_layer_or_a_fractional_head_count_is_refused(tmp_path):
    model = _tiny_whisper()
    _to_ctranslate2(model, tmp_path / "model.bin")
    index = CT2Index(tmp_path / "model.bin")
    variables = {name: index.raw(name).copy() for name in index.names()}
    gap = {k: v for k, v in variables.items() if not k.startswith("decoder/layer_1/")}
    write_ctranslate2(tmp_path / "gap.bin", "WhisperSpec", gap, revision=3)
    with pytest.raises(SourceError, match=r"'decoder/layer_1/self_attention/linear_0/weight' is missing but layer 2"):
        qg.load_qk(tmp_path / "gap.bin")
    write_ctranslate2(tmp_path / "half.bin", "WhisperSpec",
                      {**variables, "encoder/num_heads": np.array(2.5, np.float32)}, revision=3)
    with pytest.raises(SourceError, match=r"'encoder/num_heads' is stored as float32 \(2.5\); an integer"):
        qg.load_qk(tmp_path / "half.bin")


@pytest.mark.parametrize("component", ["encoder", "decoder", "cross"])
def test_whisper_ctranslate2_reproduces_transformers_logits(tmp_path, component):
    model = _tiny_whisper()
    _to_ctranslate2(model, tmp_path / "model.bin")
    qk = qg.load_qk(tmp_path / "model.bin")
    assert qk.architecture == "whisper" and qk.components == ["encoder", "decoder", "cross"]
    dims = qk.dims(component)
    side = model.encoder if component == "encoder" else model.decoder
    assert dims.n_layers == len(side.layers) and dims.n_heads == (4 if component == "encoder" else 6)
    gen = torch.Generator().manual_seed(1)
    for layer in (lyr for lyr in qk if lyr.component == component):
        x = torch.randn(2, 7, dims.d_model, generator=gen, dtype=torch.float64)
        block = side.layers[layer.index]
        with torch.no_grad(), capture_softmax_inputs() as captured:
            if component == "cross":
                block.encoder_attn(x, key_value_states=x)
            else:
                block.self_attn(x)
        assert len(captured) == 1
        w = torch.stack([layer.matrix(h) for h in range(dims.n_heads)])
        predicted = torch.einsum("bid,hde,bje->bhij", x, w, x) / math.sqrt(dims.head_dim)
        assert (captured[0] - predicted).abs().max().item() < 1e-10, (component, layer.index)
    # the fused layout matters: reading [Q; K; V] as [K; Q; V] would transpose every W_qk
    if component != "cross":
        layer = qk.layer(0, component)
        assert not torch.allclose(layer.matrix(0), layer.matrix(0).T, atol=1e-3)


def test_whisper_int8_layer_is_close_and_other_layers_exact(tmp_path):
    model = _tiny_whisper()
    _to_ctranslate2(model, tmp_path / "f32.bin")
    _to_ctranslate2(model, tmp_path / "i8.bin", int8_layer=1)
    exact, quant = qg.load_qk(tmp_path / "f32.bin"), qg.load_qk(tmp_path / "i8.bin")
    for i in (0, 2):
        assert torch.equal(exact.layer(i, "decoder").wq, quant.layer(i, "decoder").wq)
    a, b = exact.layer(1, "decoder"), quant.layer(1, "decoder")
    assert not torch.equal(a.wq, b.wq)
    torch.testing.assert_close(a.wq, b.wq, atol=0.5 / 127 * a.wq.abs().max().item() * 1.01, rtol=0)
    assert qg.symmetry_score(a.matrix()) == pytest.approx(qg.symmetry_score(b.matrix()), abs=0.02)


@pytest.mark.slow
def test_offline_whisper_base_has_three_components():
    qk = qg.load_qk("offline:whisper-base")
    assert qk.components == ["encoder", "decoder", "cross"]
    for component in qk.components:
        d = qk.dims(component)
        assert (d.n_layers, d.d_model, d.n_heads, d.head_dim) == (6, 512, 8, 64)
    frame = qg.score_model(qk)
    assert sorted(frame["component"].unique()) == ["cross", "decoder", "encoder"] and len(frame) == 18


def test_whisper_ctranslate2_norms_and_query_bias_match_transformers(tmp_path):
    """Layer norms and biases written where CTranslate2's Whisper converter puts them read back as the transformers
    model's: the same query bias and, with input_norm="folded", the same folded factors (the query side of
    cross-attention with the decoder block's norm, the key side with the encoder's final norm). The transformers
    path is checked against the model's own logits in the architectures tests."""
    model = _tiny_whisper()
    with torch.no_grad():  # float32-representable values, so the float32 file is exact
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_((p.uniform_(0.5, 1.5) if name.endswith("weight") else p.normal_(0, 0.5)).float().double())
            elif name.endswith("bias"):
                p.copy_(p.normal_(0, 0.5).float().double())
    _to_ctranslate2(model, tmp_path / "model.bin")
    index = CT2Index(tmp_path / "model.bin")
    variables = {n: index.raw(n).copy() for n in index.names()}

    def ln(prefix, module):
        variables[f"{prefix}/gamma"] = module.weight.detach().numpy().astype(np.float32)
        variables[f"{prefix}/beta"] = module.bias.detach().numpy().astype(np.float32)

    def b(linear):
        return linear.bias.detach().numpy().astype(np.float32) if linear.bias is not None else \
            np.zeros(linear.out_features, np.float32)

    ln("encoder/layer_norm", model.encoder.layer_norm)
    for side, layers in (("encoder", model.encoder.layers), ("decoder", model.decoder.layers)):
        for i, layer in enumerate(layers):
            a = layer.self_attn
            ln(f"{side}/layer_{i}/self_attention/layer_norm", layer.self_attn_layer_norm)
            variables[f"{side}/layer_{i}/self_attention/linear_0/bias"] = np.concatenate(
                [b(a.q_proj), b(a.k_proj), b(a.v_proj)])
            if side == "decoder":
                c = layer.encoder_attn
                ln(f"decoder/layer_{i}/attention/layer_norm", layer.encoder_attn_layer_norm)
                variables[f"decoder/layer_{i}/attention/linear_0/bias"] = b(c.q_proj)
                variables[f"decoder/layer_{i}/attention/linear_1/bias"] = np.concatenate([b(c.k_proj), b(c.v_proj)])
    write_ctranslate2(tmp_path / "model.bin", "WhisperSpec", variables, revision=3)
    model.save_pretrained(tmp_path / "hf", safe_serialization=True)
    for mode in ("raw", "folded"):
        ct2, hf = qg.load_qk(tmp_path / "model.bin", input_norm=mode), qg.load_qk(tmp_path / "hf", input_norm=mode)
        for lc, lh in zip(ct2, hf, strict=True):
            assert (lc.component, lc.index) == (lh.component, lh.index)
            torch.testing.assert_close(lc.wq, lh.wq, atol=1e-12, rtol=0)
            torch.testing.assert_close(lc.wk_kv, lh.wk_kv, atol=1e-12, rtol=0)
            torch.testing.assert_close(lc.bq, lh.bq, atol=1e-12, rtol=0)
    cross_raw, cross = qg.load_qk(tmp_path / "model.bin").layer(1, "cross"), \
        qg.load_qk(tmp_path / "model.bin", input_norm="folded").layer(1, "cross")
    gq = model.decoder.layers[1].encoder_attn_layer_norm.weight.detach()
    gk = model.encoder.layer_norm.weight.detach()
    torch.testing.assert_close(cross.wq, cross_raw.wq * gq[None, :, None], atol=1e-12, rtol=0)
    torch.testing.assert_close(cross.wk_kv, cross_raw.wk_kv * gk[None, :, None], atol=1e-12, rtol=0)
    assert not torch.allclose(gq, gk)


def test_a_shape_that_overflows_int64_is_refused_not_read_as_empty(tmp_path):
    import struct

    path = write_ctranslate2(tmp_path / "model.bin", "TinySpec", {"w": np.zeros(0, np.float32)})
    data = bytearray(path.read_bytes())
    at = data.index(b"w\0") + 2
    # rank 3, shape (2**31, 2**31, 4): 2**64 entries, which an int64 product wraps to 0 (= the 0 bytes stored)
    data[at:at + 1 + 4] = struct.pack("<B3I", 3, 2 ** 31, 2 ** 31, 4)
    path.write_bytes(bytes(data))
    with pytest.raises(CT2FormatError, match=r"'w' declares shape \(2147483648, 2147483648, 4\).*over the bound"):
        CT2Index(path)


@pytest.mark.parametrize("layer", [0, 1])
def test_a_one_dimensional_linear_weight_is_refused_by_name(tmp_path, layer):
    model = _tiny_whisper()
    _to_ctranslate2(model, tmp_path / "model.bin")
    index = CT2Index(tmp_path / "model.bin")
    variables = {name: index.raw(name).copy() for name in index.names()}
    name = f"encoder/layer_{layer}/self_attention/linear_0/weight"
    variables[name] = variables[name].reshape(-1)
    write_ctranslate2(tmp_path / "flat.bin", "WhisperSpec", variables, revision=3)
    with pytest.raises(ValueError, match=rf"'{name}' has shape \("):  # one line naming it, no IndexError
        qg.load_qk(tmp_path / "flat.bin").layer(layer, "encoder")


@pytest.mark.parametrize("layer", [0, 1])
def test_a_layer_aliased_to_a_missing_variable_is_refused_not_dropped(tmp_path, layer):
    model = _tiny_whisper()
    _to_ctranslate2(model, tmp_path / "model.bin")
    index = CT2Index(tmp_path / "model.bin")
    variables = {name: index.raw(name).copy() for name in index.names()}
    last = f"encoder/layer_{layer}/self_attention/linear_0/weight"
    del variables[last]
    write_ctranslate2(tmp_path / "alias.bin", "WhisperSpec", variables, revision=3,
                      aliases={last: "encoder/layer_9/self_attention/linear_0/weight"})
    with pytest.raises(SourceError, match=rf"alias '{last}' names the variable .*layer_9.* does not hold"):
        qg.load_qk(tmp_path / "alias.bin")
    # a layer stored under an alias of a variable the file holds is read, not dropped
    variables["shared/weight"] = index.raw(last).copy()
    write_ctranslate2(tmp_path / "shared.bin", "WhisperSpec", variables, revision=3, aliases={last: "shared/weight"})
    with qg.load_qk(tmp_path / "shared.bin") as shared, qg.load_qk(tmp_path / "model.bin") as full:
        assert shared.n_layers == full.n_layers
        pd_full = qg.score_model(full)
        pd_shared = qg.score_model(shared)
    assert pd_shared[["symmetry", "directionality"]].equals(pd_full[["symmetry", "directionality"]])


@pytest.mark.parametrize("extra", [1, -1])
def test_a_fused_self_attention_weight_of_the_wrong_row_count_is_refused_by_name(tmp_path, extra):
    model = _tiny_whisper()
    _to_ctranslate2(model, tmp_path / "model.bin")
    index = CT2Index(tmp_path / "model.bin")
    variables = {name: index.raw(name).copy() for name in index.names()}
    name = "encoder/layer_0/self_attention/linear_0/weight"
    fused = variables[name]
    variables[name] = np.concatenate([fused, fused[:1]]) if extra > 0 else fused[:-1]  # (3d ± 1, d)
    write_ctranslate2(tmp_path / "odd.bin", "WhisperSpec", variables, revision=3)
    with pytest.raises(ValueError, match=rf"'{name}' has shape \({fused.shape[0] + extra}, \d+\), expected"):
        qg.score_model(qg.load_qk(tmp_path / "odd.bin"))
