"""heads.geometry: per-head scores equal the score functions; the skew effective rank and the input-conditioned
symmetry agree with dense computations on a real model built from a config."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import qkgeometry as qg
from qkgeometry.heads import geometry
from tiny_models import tiny_model


def _tiny(model_type, **extra):
    return tiny_model(model_type, attn_implementation="eager", hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, vocab_size=60, max_position_embeddings=64, **extra)


def test_head_geometry_matches_the_score_functions():
    model = _tiny("llama", num_key_value_heads=2)
    geo = geometry.head_geometry(model)
    assert len(geo) == 8
    att = model.layers[1].self_attn
    wq = att.q_proj.weight[8:16].detach().double().numpy().T  # head 1
    wk = att.k_proj.weight[0:8].detach().double().numpy().T  # its KV head 0 (h // 2)
    row = geo[(geo["layer"] == 1) & (geo["head"] == 1)].iloc[0]
    assert row.symmetry == pytest.approx(qg.symmetry_score(wq @ wk.T), abs=1e-12)
    assert row.directionality == pytest.approx(qg.directionality_score(wq @ wk.T), abs=1e-12)
    assert np.isfinite(geo["trace_z_m1"]).all() and geo["key_bias"].isna().all()
    # a tied head W_Q = W_K is symmetric positive semi-definite
    with torch.no_grad():
        att.q_proj.weight[8:16] = att.k_proj.weight[0:8]
    tied = geometry.head_geometry(model)
    row = tied[(tied["layer"] == 1) & (tied["head"] == 1)].iloc[0]
    assert row.symmetry == pytest.approx(1) and row.positive_share == pytest.approx(1) and row.trace_z > 0
    bert = geometry.head_geometry(_tiny("bert"))
    assert np.isfinite(bert["key_bias"]).all() and bert["trace_z_m1"].isna().all()



def test_skew_effective_rank_from_factors_equals_the_dense_computation():
    rng = np.random.default_rng(3)
    wq, wk = rng.standard_normal((20, 4)), rng.standard_normal((20, 4))
    m = wq @ wk.T
    sv = np.linalg.svd((m - m.T) / 2, compute_uv=False)
    sv = sv[sv > 1e-10 * sv.max()]
    p = sv / sv.sum()
    assert geometry.skew_effective_rank(wq, wk) == pytest.approx(np.exp(-(p * np.log(p)).sum()), rel=1e-9)
    # a rank-2 skew part (one rotation plane with equal singular values) has effective rank 2
    e = np.eye(20)
    assert geometry.skew_effective_rank(e[:, :1], e[:, 1:2]) == pytest.approx(2.0)
    assert geometry.skew_effective_rank(wq, wq) == 0.0  # a tied head has no skew part


def test_input_geometry_scores_the_form_on_the_layers_real_inputs():
    model = _tiny("llama", num_key_value_heads=2)
    ids = torch.randint(0, 60, (3, 9), generator=torch.Generator().manual_seed(0))
    geo = geometry.input_geometry(model, ids)
    assert len(geo) == 8 and geo["input_symmetry"].between(-1, 1).all()
    captured = []
    hook = model.layers[1].self_attn.register_forward_pre_hook(
        lambda _m, a, k: captured.append(k.get("hidden_states", a[0] if a else None).detach().double()),
        with_kwargs=True)
    with torch.no_grad():
        model(ids)
    hook.remove()
    att = model.layers[1].self_attn
    wq = att.q_proj.weight[8:16].detach().double().numpy().T
    wk = att.k_proj.weight[0:8].detach().double().numpy().T
    x = captured[0].numpy()
    s = x @ wq @ wk.T @ np.swapaxes(x, 1, 2)
    eta = float((s * np.swapaxes(s, 1, 2)).sum() / (s * s).sum())
    row = geo[(geo["layer"] == 1) & (geo["head"] == 1)].iloc[0]
    assert row.input_symmetry == pytest.approx(eta, rel=1e-9)
    assert row.skew_effective_rank == pytest.approx(geometry.skew_effective_rank(wq, wk))
    # the trace z with the inputs' own covariance, from position 4 on: √d tr(MC) / (‖M‖ tr C / d)
    seen = x[:, 4:].reshape(-1, 32)
    seen = seen - seen.mean(axis=0)
    sigma = seen.T @ seen / len(seen)
    m = wq @ wk.T
    expected = np.sqrt(32) * np.trace(m @ sigma) / (np.linalg.norm(m) * np.trace(sigma) / 32)
    assert row.input_trace_z == pytest.approx(expected, rel=1e-9)
    assert row.input_isotropy == pytest.approx(np.trace(sigma) ** 2 / (32 * np.sum(sigma * sigma)), rel=1e-9)
    assert geo.groupby("layer")["input_isotropy"].nunique().eq(1).all()  # one value per layer
    # a tied head has a symmetric form on any inputs
    with torch.no_grad():
        att.q_proj.weight[8:16] = att.k_proj.weight[0:8]
    tied = geometry.input_geometry(model, ids)
    assert tied[(tied["layer"] == 1) & (tied["head"] == 1)].iloc[0].input_symmetry == pytest.approx(1)


def test_input_trace_z_is_the_weight_level_trace_z_when_the_inputs_are_isotropic():
    rng = np.random.default_rng(5)
    wq, wk = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    m = wq @ wk.T
    weight_level = np.sqrt(6) * np.trace(m) / np.linalg.norm(m)
    x = 3.0 * np.concatenate([np.eye(6), -np.eye(6)])  # Σ = 9 I exactly
    assert geometry.input_isotropy(x) == pytest.approx(1.0)
    assert geometry.input_trace_z(x, wq, wk) == pytest.approx(weight_level)
    assert geometry.input_isotropy(np.outer(rng.standard_normal(50), rng.standard_normal(6))) == pytest.approx(1 / 6)
    with pytest.raises(ValueError, match="x: needs at least one input"):
        geometry.input_isotropy(np.zeros((0, 6)))


def test_a_vector_added_to_every_input_changes_neither_input_measure():
    """The softmax cannot see a shift shared by every token (it adds the same μᵀMμ-type terms to a query's logits),
    so neither the inputs' isotropy nor the input trace z may move with it."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 40, 8)) * np.linspace(0.5, 2.0, 8)
    wq, wk = rng.standard_normal((8, 3)), rng.standard_normal((8, 3))
    shift = 25.0 * rng.standard_normal(8)
    assert geometry.input_isotropy(x + shift) == pytest.approx(geometry.input_isotropy(x), rel=1e-9)
    assert geometry.input_trace_z(x + shift, wq, wk) == pytest.approx(geometry.input_trace_z(x, wq, wk), rel=1e-9)
    # the raw second moment would not: the shift dominates it
    raw = (x + shift).reshape(-1, 8)
    raw_sigma = raw.T @ raw / len(raw)
    assert np.trace(raw_sigma) ** 2 / (8 * np.sum(raw_sigma**2)) < 0.5 * geometry.input_isotropy(x)


def test_input_geometry_refuses_a_skip_past_the_sequence():
    model = _tiny("llama", num_key_value_heads=2)
    with pytest.raises(ValueError, match=r"skip: .* from 0 to 8"):
        geometry.input_geometry(model, torch.zeros((1, 9), dtype=torch.long), skip=9)


def test_head_geometry_of_a_model_without_separate_query_and_key_is_refused():
    from qkgeometry.heads.geometry import head_geometry, input_geometry

    gpt2 = tiny_model("gpt2", n_embd=16, n_layer=1, n_head=2, vocab_size=30, n_positions=16)
    with pytest.raises(ValueError, match="GPT2Model has no attention module with separate query and key"):
        head_geometry(gpt2)
    with pytest.raises(ValueError, match="GPT2Model"):
        input_geometry(gpt2, torch.zeros((1, 4), dtype=torch.long))
