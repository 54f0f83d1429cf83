"""rotary: M(Δ) = W_Q R(Δ) W_Kᵀ against the models' own logits with rotary ON (positions ≠ 0), factored == dense,
the long-offset theorem, and where the frequencies are read from (config.json, GGUF metadata)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import qkgeometry as qg
from logit_harness import LogitCase, _qk_rms, build_tiny_model, capture_softmax_inputs
from qkgeometry.analyses import rotary
from qkgeometry.analyses.nulls import rotation_null_moments

TINY = {"hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 64, "vocab_size": 99, "max_position_embeddings": 32}
GEMMA3 = {**TINY, "head_dim": 16, "query_pre_attn_scalar": 24, "sliding_window": 64,
          "layer_types": ["sliding_attention", "full_attention"]}
POSITIONS = torch.tensor([3, 7, 8, 20, 41, 42, 90])  # all non-zero, offsets from 1 to 87 in both directions


def _layers(model):
    return model.language_model.layers if hasattr(model, "language_model") else model.layers


CASES = [
    LogitCase("llama", "llama", {**TINY, "rope_theta": 500.0}, lambda m, i: m.layers[i].self_attn),
    LogitCase("qwen2-bias", "qwen2", {**TINY, "rope_theta": 2000.0}, lambda m, i: m.layers[i].self_attn),
    LogitCase("phi-partial-rotary", "phi", {**TINY, "rope_theta": 700.0, "partial_rotary_factor": 0.5},
              lambda m, i: m.layers[i].self_attn),
    LogitCase("gemma3-local-global", "gemma3_text", GEMMA3, lambda m, i: m.layers[i].self_attn,
              scale=lambda c: c.query_pre_attn_scalar ** -0.5, randomize=("q_norm.weight", "k_norm.weight"),
              qk_norm="head"),
]


def _rotary_logits(case: LogitCase, model, layer: int, x: torch.Tensor) -> torch.Tensor:
    """The attention module's own pre-softmax logits at POSITIONS, with the model's own rotary embedding."""
    pos = POSITIONS[None].expand(x.shape[0], -1)
    if case.model_type.startswith("gemma3"):
        cos_sin = model.rotary_emb(x, pos, model.config.layer_types[layer])
    else:
        cos_sin = model.rotary_emb(x, pos)
    module = case.attention(model, layer)
    with torch.no_grad(), capture_softmax_inputs() as captured:
        module(x, position_embeddings=cos_sin, attention_mask=None)
    assert len(captured) == 1
    return captured[0].to(torch.float64)


def _predicted(qk, layer, spec, x, scale):
    """x_iᵀ M(p_j − p_i) x_j · scale for every head and token pair, M(Δ) built densely from our factors."""
    t = len(POSITIONS)
    out = torch.zeros(x.shape[0], layer.n_heads, t, t, dtype=torch.float64)
    for h in range(layer.n_heads):
        q, k = (f.numpy() for f in layer.factors(h))
        for i in range(t):
            for j in range(t):
                m = torch.from_numpy(rotary.offset_form(q, k, spec, float(POSITIONS[j] - POSITIONS[i])))
                out[:, h, i, j] = torch.einsum("bd,de,be->b", x[:, i], m, x[:, j]) * scale
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_offset_form_reproduces_logits_with_rotary_on(case, tmp_path):
    model = build_tiny_model(case, tmp_path)
    qk = qg.load_qk(tmp_path)
    scale = case.scale(model.config) if case.scale else 1.0 / math.sqrt(qk.head_dim)
    gen = torch.Generator().manual_seed(2)
    bases = []
    for layer in qk:
        spec = rotary.rope_spec(qk, layer.index)
        bases.append(spec.base)
        assert spec.pairing == "half"
        fraction = case.config.get("partial_rotary_factor", 1.0)
        assert spec.rotary_dim == int(qk.head_dim * fraction)
        x = torch.randn(2, len(POSITIONS), qk.d_model, generator=gen, dtype=torch.float64)
        logits = _rotary_logits(case, model, layer.index, x)
        predicted = _predicted(qk, layer, spec, x, scale)
        if case.qk_norm:  # per-token RMS of the raw projections, outside the bilinear form (as at offset 0)
            rq, rk = _qk_rms(qg.load_qk(tmp_path, qk_norm="raw").layer(layer.index), x, "head",
                             model.config.rms_norm_eps)
            predicted = predicted / (rq[..., :, None] * rk[..., None, :])
        # HF computes the angles in float32: allow that round-off, relative to the logits' size
        tol = 1e-5 * float(logits.abs().max())
        assert float((logits - predicted).abs().max()) < tol, case.id
        # and the form really depends on the offset: the offset-0 form does NOT reproduce these logits
        flat = torch.einsum("bid,hde,bje->bhij", x, torch.stack([layer.matrix(h) for h in range(layer.n_heads)]), x)
        flat = flat * scale / ((rq[..., :, None] * rk[..., None, :]) if case.qk_norm else 1.0)
        assert float((logits - flat).abs().max()) > 100 * tol
    if case.model_type.startswith("gemma3"):
        assert bases == [10_000.0, 1_000_000.0]  # sliding layer: local base; full layer: global base
    else:
        assert bases == [case.config["rope_theta"]] * 2


def _write_llama_gguf(model, path, rope_base: float, arch: str = "llama"):
    """A GGUF as llama.cpp writes it: for ``arch="llama"`` the Q and K rows permuted inside each head (qwen2 is
    stored unpermuted, with its Q/K biases), the rope base in the metadata."""
    import gguf

    cfg = model.config

    def permute(w, n_heads):
        rows, cols = w.shape
        return w.reshape(n_heads, 2, rows // n_heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)

    if arch != "llama":
        def permute(w, n_heads):  # NEOX-rope architectures are stored as transformers has them
            return w

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_freq_base(rope_base)
    for i, layer in enumerate(model.layers):
        writer.add_tensor(f"blk.{i}.attn_q.weight",
                          permute(layer.self_attn.q_proj.weight.detach().float().numpy(), cfg.num_attention_heads))
        writer.add_tensor(f"blk.{i}.attn_k.weight",
                          permute(layer.self_attn.k_proj.weight.detach().float().numpy(), cfg.num_key_value_heads))
        for name in ("q", "k"):
            bias = getattr(layer.self_attn, f"{name}_proj").bias
            if bias is not None:
                writer.add_tensor(f"blk.{i}.attn_{name}.bias", bias.detach().float().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_gguf_offset_form_reproduces_logits(arch, tmp_path):
    """The GGUF route: llama.cpp's rotary permutation undone by the loader (llama), or none to undo (qwen2), θ read
    from the GGUF metadata."""
    case = next(c for c in CASES if c.model_type == arch)
    model = build_tiny_model(case, tmp_path / "hf")
    _write_llama_gguf(model, tmp_path / "tiny.gguf", case.config["rope_theta"], arch)
    qk = qg.load_qk(tmp_path / "tiny.gguf")
    gen = torch.Generator().manual_seed(3)
    for layer in qk:
        spec = rotary.rope_spec(qk, layer.index)
        assert spec.base == case.config["rope_theta"] and spec.pairing == "half"
        x = torch.randn(2, len(POSITIONS), qk.d_model, generator=gen, dtype=torch.float64)
        logits = _rotary_logits(case, model, layer.index, x)
        predicted = _predicted(qk, layer, spec, x, 1.0 / math.sqrt(qk.head_dim))
        # the GGUF holds float32 weights: tolerance relative to the logits' size
        assert float((logits - predicted).abs().max()) < 1e-5 * float(logits.abs().max())


def test_rope_spec_of_the_offline_models():
    smol = qg.load_qk("offline:smollm2-135m")
    spec = rotary.rope_spec(smol, 0)
    assert (spec.base, spec.rotary_dim, spec.pairing) == (100_000.0, 64, "half")
    qwen = qg.load_qk("offline:qwen2.5-coder-0.5b")
    spec = rotary.rope_spec(qwen, 0)
    assert (spec.base, spec.rotary_dim, spec.pairing) == (1_000_000.0, 64, "half")
    gemma = qg.load_qk("offline:gemma3-270m")
    bases = [rotary.rope_spec(gemma, i).base for i in range(gemma.n_layers)]
    assert bases == [1_000_000.0 if (i + 1) % 6 == 0 else 10_000.0 for i in range(18)]


def test_the_rotary_settings_come_through_the_model_not_from_its_files(tmp_path):
    """rope_spec reads the settings the model's reader found (QKModel.config), never the source's files again: a
    model whose config.json is gone after loading still answers, and a model from memory needs no config= ."""
    build_tiny_model(CASES[0], tmp_path)
    qk = qg.load_qk(tmp_path)
    (tmp_path / "config.json").unlink()
    spec = rotary.rope_spec(qk, 1)
    assert (spec.base, spec.rotary_dim, spec.pairing) == (500.0, 12, "half")
    twin = qk.randomized()
    assert rotary.rope_spec(twin, 0).base == 500.0


def test_a_ggufs_rotary_metadata_reads_as_a_config():
    from qkgeometry.readers.gguf import rope_config

    fields = {"gemma3.rope.freq_base": 1e6, "gemma3.rope.dimension_count": 64, "gemma3.rope.scaling.type": "linear",
              "gemma3.rope.scaling.factor": 8.0, "gemma3.attention.sliding_window_pattern": 6}
    model = type("M", (), {"head_dim": 64, "name": "m", "config": rope_config(fields, "gemma3", "gemma3_text", 64, 12)})
    specs = [rotary.rope_spec(model, i) for i in range(12)]
    assert [s.base for s in specs] == [1e6 if (i + 1) % 6 == 0 else 10_000.0 for i in range(12)]
    np.testing.assert_allclose(specs[5].inv_freq, rotary.rope_frequencies(1e6, 64, 8.0))  # scaled: global only
    np.testing.assert_allclose(specs[0].inv_freq, rotary.rope_frequencies(10_000.0, 64))
    odd = type("M", (), {"head_dim": 64, "name": "m",
                         "config": rope_config({"llama.rope.scaling.type": "yarn"}, "llama", "llama", 64, 2)})
    with pytest.raises(ValueError, match="'yarn' is not supported"):
        rotary.rope_spec(odd, 0)


# ------------------------------------------------------------------------------------------- the math
@pytest.fixture
def head():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((24, 8)), rng.standard_normal((24, 8))
    k[:, :3] += 2 * q[:, :3]  # some alignment, so that the numbers are not all near 1/d
    return q, k


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_rotation_is_a_group_and_matches_the_hf_convention(pairing):
    spec = rotary.RopeSpec(rotary.rope_frequencies(100.0, 8), 8, pairing)
    r3 = rotary.rotation_matrix(spec, 3.0)
    np.testing.assert_allclose(r3.T @ r3, np.eye(8), atol=1e-12)
    np.testing.assert_allclose(rotary.rotation_matrix(spec, 1.0) @ rotary.rotation_matrix(spec, 2.0), r3, atol=1e-12)
    np.testing.assert_allclose(rotary.rotation_matrix(spec, -3.0), r3.T, atol=1e-12)
    # HF applies q' = q cos + rotate(q) sin at position p: that is q' = R(p) q with our R(p)
    q, p = np.random.default_rng(1).standard_normal(8), 5.0
    theta = np.tile(spec.inv_freq, 2) if pairing == "half" else np.repeat(spec.inv_freq, 2)
    rotated = (np.concatenate([-q[4:], q[:4]]) if pairing == "half"
               else np.stack([-q[1::2], q[::2]], axis=-1).ravel())
    hf = q * np.cos(p * theta) + rotated * np.sin(p * theta)
    np.testing.assert_allclose(hf, rotary.rotation_matrix(spec, p) @ q, atol=1e-12)


def test_factored_offset_scores_equal_dense(head, tmp_path):
    q, k = head
    spec = rotary.RopeSpec(rotary.rope_frequencies(50.0, 8), 8)
    deltas = np.array([-7.0, -1.0, 0.0, 2.0, 30.0])
    traces = rotary.offset_traces(q, k, spec, np.concatenate([deltas, -deltas]))
    for i, delta in enumerate(deltas):
        m, m_mirror = rotary.offset_form(q, k, spec, delta), rotary.offset_form(q, k, spec, -delta)
        assert traces["cross"][i] == pytest.approx(np.trace(m @ m), rel=1e-10)
        assert traces["total"][i] == pytest.approx(np.sum(m * m), rel=1e-10)
        assert traces["mirror"][i] == pytest.approx(np.sum(m * m_mirror.T), rel=1e-10)
    dense = [qg.directionality_score(rotary.offset_form(q, k, spec, v)) for v in deltas]
    np.testing.assert_allclose(rotary.directionality_by_offset(q, k, spec, deltas), dense, atol=1e-10)


def test_offset_zero_is_the_papers_form_and_reciprocity_is_symmetric(head):
    q, k = head
    spec = rotary.RopeSpec(rotary.rope_frequencies(50.0, 8), 8)
    np.testing.assert_allclose(rotary.offset_form(q, k, spec, 0.0), q @ k.T, atol=1e-12)
    tr = rotary.offset_traces(q, k, spec, np.array([0.0, 5.0, -5.0]))
    assert tr["cross"][0] / tr["total"][0] == pytest.approx(qg.symmetry_score_factored(q, k), abs=1e-12)
    assert tr["mirror"][1] == pytest.approx(tr["mirror"][2], rel=1e-10)  # ⟨M(Δ), M(−Δ)ᵀ⟩ is even in Δ


def test_long_offset_average_converges_to_the_theorem(head):
    q, k = head
    spec = rotary.RopeSpec(rotary.rope_frequencies(30.0, 8), 8)
    tr = rotary.offset_traces(q, k, spec, np.arange(1, 60_001, dtype=float), chunk=4096)
    numerator, energy = rotary.long_offset_limit(q, k, spec)
    assert numerator >= 0
    # slowest frequency 30^(-3/4): the Cesàro error is O(1/(T·min gap)); 2% is far above it at T = 60 000
    assert tr["cross"].mean() == pytest.approx(numerator, rel=0.02)
    assert tr["total"].mean() == pytest.approx(energy, rel=0.02)


def test_layer_level_offset_form_is_sum_of_heads(tmp_path):
    case = CASES[0]
    build_tiny_model(case, tmp_path)
    qk = qg.load_qk(tmp_path)
    layer = qk.layer(1)
    spec = rotary.rope_spec(qk, 1)
    a, b = (f.numpy() for f in layer.factors())
    heads = sum(rotary.offset_form(*(f.numpy() for f in layer.factors(h)), spec, 6.0) for h in range(layer.n_heads))
    np.testing.assert_allclose(rotary.offset_form(a, b, spec, 6.0), heads, atol=1e-12)
    frame = rotary.offset_scores(qk, [0, 6], per="layer", layers=[1])
    m6 = rotary.offset_form(a, b, spec, 6.0)
    assert frame.loc[frame["delta"] == 6, "symmetry"].item() == pytest.approx(qg.symmetry_score(m6), abs=1e-10)
    z = rotary.offset_z_scores(qk, [6], per="layer", layers=[1])
    null = rotation_null_moments(m6)
    assert z["rho"].item() == pytest.approx(null.rho, rel=1e-10)


def test_bad_spec_is_a_clear_error():
    with pytest.raises(ValueError, match="pairing"):
        rotary.RopeSpec(np.ones(2), 4, "zigzag")
    with pytest.raises(ValueError, match="rotary_dim"):
        rotary.rope_frequencies(10_000.0, 7)
    qk = qg.load_qk("offline:minilm-l6")
    with pytest.raises(ValueError, match="not supported"):
        rotary.rope_spec(qk, 0)


# ------------------------------------------------------------------------------------------------ bad arguments
@pytest.mark.parametrize("head_dim", [0, -4, 2.5, True, "8"])
def test_rope_spec_refuses_a_head_dim_that_is_not_a_positive_integer(head_dim):
    with pytest.raises(ValueError, match="`head_dim` must be a positive integer"):
        rotary.RopeSpec(np.zeros(0), head_dim)


@pytest.mark.parametrize("delta", [np.nan, np.inf, "one", [[1.0]]])
def test_offsets_must_be_finite_numbers(delta):
    spec = rotary.RopeSpec(rotary.rope_frequencies(50.0, 8), 8)
    rng = np.random.default_rng(0)
    wq, wk = rng.standard_normal((6, 8)), rng.standard_normal((6, 8))
    with pytest.raises(ValueError, match=r"`deltas?`"):
        rotary.offset_form(wq, wk, spec, delta)
    with pytest.raises(ValueError, match="`deltas`"):
        rotary.offset_traces(wq, wk, spec, [0.0, delta] if np.ndim(delta) == 0 else delta)
    with pytest.raises(ValueError, match="`deltas`"):
        rotary.directionality_by_offset(wq, wk, spec, [delta] if np.ndim(delta) == 0 else delta)
