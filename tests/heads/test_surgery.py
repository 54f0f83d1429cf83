"""heads.surgery: the doubled-head construction Q' = [W_Q, W_K]/√2, K' = [W_K, ±W_Q]/√2 gives M_s / M_n exactly, and
inside real transformers models (a BERT, a Llama with rotary, a Qwen2 with biases; float64, tiny configs) the
edited logits equal a direct computation of x_iᵀ ½(M(Δ) ± M(−Δ)ᵀ) x_j plus the unchanged bias terms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import qkgeometry as qg
from bounded import no_hang
from qkgeometry.analyses.rotary import RopeSpec, rope_frequencies, rotation_matrix
from qkgeometry.heads import surgery as hs
from qkgeometry.heads.models import attention_modules
from tiny_models import tiny_model

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
        "vocab_size": 60, "max_position_embeddings": 64}
MODELS = {"bert": {}, "llama": {"num_key_value_heads": 2, "rope_theta": 300.0},
          "qwen2": {"num_key_value_heads": 2, "rope_theta": 700.0}}
HEAD_DIM = 8


def _model(model_type: str, seed: int = 0):
    model = tiny_model(model_type, seed=seed, attn_implementation="eager", **TINY, **MODELS[model_type])
    model = model.to(torch.float64)
    for m in attention_modules(model):
        proj = (m.q_proj, m.k_proj) if hasattr(m, "q_proj") else (m.query, m.key)
        for p in proj:
            if p.bias is not None:
                torch.nn.init.normal_(p.bias, std=0.5)  # make the bias terms matter
    return model


def _run(model, ids):
    return model(ids, use_cache=False) if model.config.model_type != "bert" else model(ids)


def _head(model, layer, head):
    m = attention_modules(model)[layer]
    q, k = (m.q_proj, m.k_proj) if hasattr(m, "q_proj") else (m.query, m.key)
    n_kv = getattr(model.config, "num_key_value_heads", None) or model.config.num_attention_heads
    g = head // (model.config.num_attention_heads // n_kv)
    sq, sk = slice(head * HEAD_DIM, (head + 1) * HEAD_DIM), slice(g * HEAD_DIM, (g + 1) * HEAD_DIM)
    wq, wk = q.weight[sq].detach().numpy().T, k.weight[sk].detach().numpy().T
    bq = np.zeros(HEAD_DIM) if q.bias is None else q.bias[sq].detach().numpy()
    bk = np.zeros(HEAD_DIM) if k.bias is None else k.bias[sk].detach().numpy()
    return wq, wk, bq, bk


def _rotate(v: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate-half rotary of (T, d_h) rows with the model's own (T, d_h) cos and sin."""
    half = v.shape[-1] // 2
    rot = np.concatenate([-v[:, half:], v[:, :half]], axis=-1)
    return v * cos + rot * sin


def test_doubled_factors_give_the_two_parts():
    rng = np.random.default_rng(0)
    wq, wk = rng.normal(size=(7, 3)), rng.normal(size=(7, 3))
    ms, mn = qg.decompose(wq @ wk.T)
    for part, expected in (("symmetric", ms), ("skew", mn)):
        a, b = hs.doubled_factors(wq, wk, part)
        assert a.shape == b.shape == (7, 6)
        np.testing.assert_allclose(a @ b.T, expected, atol=1e-13)
        np.testing.assert_allclose(hs.part_form(wq, wk, part), expected, atol=1e-13)


def test_doubled_head_under_rotary_is_the_role_and_offset_swapped_part():
    rng = np.random.default_rng(1)
    spec = RopeSpec(rope_frequencies(100.0, 6), 6)
    wq, wk = rng.normal(size=(9, 6)), rng.normal(size=(9, 6))
    r2 = hs.doubled_rotation(spec, -3)
    for part, sign in (("symmetric", 1), ("skew", -1)):
        a, b = hs.doubled_factors(wq, wk, part)
        expected = (wq @ rotation_matrix(spec, -3) @ wk.T + sign * (wq @ rotation_matrix(spec, 3) @ wk.T).T) / 2
        np.testing.assert_allclose(a @ r2 @ b.T, expected, atol=1e-12)
        np.testing.assert_allclose(hs.part_form(wq, wk, part, spec, -3), expected, atol=1e-12)
    # at Δ ≠ 0 this is not the symmetric part of M(Δ)
    ms_delta = qg.decompose(wq @ rotation_matrix(spec, -3) @ wk.T)[0]
    assert np.abs(hs.part_form(wq, wk, "symmetric", spec, -3) - ms_delta).max() > 1e-3


@pytest.mark.parametrize("model_type", list(MODELS))
@pytest.mark.parametrize("part", ["full", "symmetric", "skew", "symmetric_matched", "skew_matched"])
def test_edited_logits_equal_the_direct_computation(model_type, part):
    model = _model(model_type)
    ids = torch.randint(0, TINY["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(3))
    layer, head = 1, 2
    with no_hang(60), torch.no_grad(), hs.edited_heads(model, {(layer, head): part}, record={layer: (head,)},
                                                       record_logits=True) as states:
        _run(model, ids)
    state = states[layer]
    wq, wk, bq, bk = _head(model, layer, head)
    causal = model_type != "bert"
    for b in range(ids.shape[0]):
        x = state.hidden[b].numpy()
        t = x.shape[0]
        got = state.logits[head][b]
        q, k = x @ wq, x @ wk  # unbiased, unrotated (T, d_h)
        if causal:
            cos, sin = (e[min(b, e.shape[0] - 1)].numpy() for e in state.position_embeddings)
            rot = lambda v, c=cos, s=sin: _rotate(v, c, s)  # noqa: E731
        else:
            rot = lambda v: v  # noqa: E731
        # the doubled head built explicitly, each half rotated with the head's own rotation
        if part == "full":
            form = rot(q) @ rot(k).T
        else:
            a, bb = hs.doubled_factors(wq, wk, part)
            qd, kd = x @ a, x @ bb
            qd = np.concatenate([rot(qd[:, :HEAD_DIM]), rot(qd[:, HEAD_DIM:])], axis=1)
            kd = np.concatenate([rot(kd[:, :HEAD_DIM]), rot(kd[:, HEAD_DIM:])], axis=1)
            form = qd @ kd.T
        bias_terms = rot(q + bq) @ rot(k + bk).T - rot(q) @ rot(k).T
        direct = (form + bias_terms) / math.sqrt(HEAD_DIM)
        keep = np.tril(np.ones((t, t), dtype=bool)) if causal else np.ones((t, t), dtype=bool)
        np.testing.assert_allclose(got[keep], direct[keep], atol=1e-10, rtol=0)
        if causal:
            assert np.all(got[~keep] < -1e30)  # the causal mask still applies
        # and the same against the dense form x_iᵀ ½(M(Δ) ± M(−Δ)ᵀ) x_j (the model's rotary is float32)
        spec = hs.model_rope_spec(model, layer)
        dense = np.empty((t, t))
        for i in range(t):
            for j in range(t):
                m = (wq @ (np.eye(HEAD_DIM) if spec is None else rotation_matrix(spec, j - i)) @ wk.T
                     if part == "full" else hs.part_form(wq, wk, part, spec, j - i))
                dense[i, j] = x[i] @ m @ x[j]
        np.testing.assert_allclose(form[keep], dense[keep], atol=1e-5 * np.abs(dense).max())


@pytest.mark.parametrize("model_type", list(MODELS))
def test_full_edit_changes_nothing_and_other_heads_are_untouched(model_type):
    model = _model(model_type)
    ids = torch.randint(0, TINY["vocab_size"], (2, 7), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        base = _run(model, ids).last_hidden_state
        with hs.edited_heads(model, {(0, 1): "full"}):
            same = _run(model, ids).last_hidden_state
        with hs.edited_heads(model, {(0, 1): "skew"}, record={0: (0, 1)}) as states:
            edited = _run(model, ids).last_hidden_state
        with hs.edited_heads(model, record={0: (0, 1)}) as plain:
            _run(model, ids)
    torch.testing.assert_close(same, base, atol=1e-6, rtol=0)  # Llama's eager softmax rounds to float32
    assert (edited - base).abs().max() > 1e-6
    np.testing.assert_allclose(states[0].patterns[0], plain[0].patterns[0], atol=1e-14)  # head 0 untouched
    assert np.abs(states[0].patterns[1] - plain[0].patterns[1]).max() > 1e-6
    assert model.config._attn_implementation == "eager"  # restored


def test_mean_ablation_with_a_zero_mean_equals_removing_the_head():
    model = _model("llama")
    ids = torch.randint(0, TINY["vocab_size"], (2, 7), generator=torch.Generator().manual_seed(5))
    layer, head = 1, 3
    with torch.no_grad():
        with hs.edited_heads(model, {(layer, head): "mean"}, means={(layer, head): torch.zeros(HEAD_DIM)}):
            ablated = _run(model, ids).last_hidden_state
        o = attention_modules(model)[layer].o_proj.weight
        o[:, head * HEAD_DIM:(head + 1) * HEAD_DIM] = 0
        with hs.edited_heads(model):  # the same attention code, nothing edited
            removed = _run(model, ids).last_hidden_state
    torch.testing.assert_close(ablated, removed, atol=1e-12, rtol=0)


def test_recorded_means_are_the_head_outputs_mean():
    model = _model("bert")
    ids = torch.randint(0, TINY["vocab_size"], (3, 6), generator=torch.Generator().manual_seed(6))
    with torch.no_grad(), hs.edited_heads(model, record_means=True) as states:
        _run(model, ids)
    assert set(states[0].output_means) == set(range(4))
    assert states[0].output_means[0].shape == (HEAD_DIM,)


def test_bad_edits_name_the_argument():
    model = _model("llama")
    with pytest.raises(ValueError, match="edits: part"), hs.edited_heads(model, {(0, 0): "half"}):
        pass
    with pytest.raises(ValueError, match="edits: layer 5"), hs.edited_heads(model, {(5, 0): "skew"}):
        pass
    with pytest.raises(ValueError, match="`part`"):
        hs.doubled_factors(np.eye(3), np.eye(3), "both")
    with pytest.raises(ValueError, match="no attention module"):
        attention_modules(torch.nn.Linear(2, 2))


def _isotropic_rms(form: np.ndarray, n: int = 4000, seed: int = 0) -> float:
    """Root-mean-square of x_iᵀ F y_j over independent standard Gaussian x, y (equals ‖F‖ in expectation)."""
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((n, form.shape[0])), rng.standard_normal((n, form.shape[0]))
    return float(np.sqrt(np.mean(np.einsum("nd,de,ne->n", x, form, y) ** 2)))


@pytest.mark.parametrize("part", ["symmetric", "skew"])
def test_norm_matched_parts_keep_the_heads_logit_scale_and_plain_parts_do_not(part):
    rng = np.random.default_rng(5)
    d, dh = 24, 6
    wq = rng.standard_normal((d, dh))
    wk = 0.6 * wq + 0.8 * rng.standard_normal((d, dh))  # a head with s well away from ±1
    m = wq @ wk.T
    s = float(np.sum(m * m.T) / np.sum(m * m))
    assert 0.1 < s < 0.9
    own = _isotropic_rms(m)
    matched = hs.part_form(wq, wk, f"{part}_matched")
    plain = hs.part_form(wq, wk, part)
    np.testing.assert_allclose(np.linalg.norm(matched), np.linalg.norm(m), rtol=1e-12)
    assert _isotropic_rms(matched) == pytest.approx(own, rel=0.05)
    expected = math.sqrt((1 + s) / 2) if part == "symmetric" else math.sqrt((1 - s) / 2)
    assert _isotropic_rms(plain) / own == pytest.approx(expected, rel=0.05)
    assert abs(_isotropic_rms(plain) / own - 1) > 0.1  # the plain part is cooler than the head
    assert hs.part_scale(wq, wk, f"{part}_matched") == pytest.approx(1 / expected, rel=1e-12)
    assert hs.part_scale(wq, wk, part) == 1.0


def test_norm_matched_edit_of_a_purely_symmetric_head_has_no_skew_part_to_rescale():
    w = np.random.default_rng(1).standard_normal((10, 3))
    assert hs.part_scale(w, w, "symmetric_matched") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no skew part"):
        hs.part_scale(w, w, "skew_matched")


@pytest.mark.parametrize("edits, needle", [
    ({(0, -1): "skew"}, "edits: head -1 is out of range"),
    ({(0, 99): "skew"}, "edits: head 99 is out of range"),
    ({(0, True): "skew"}, "edits: head must be a whole number; got True"),
    ({(True, 0): "skew"}, "edits: layer must be a whole number; got True"),
    ({(0, 1.0): "skew"}, "edits: head must be a whole number; got 1.0"),
])
def test_heads_that_are_not_a_head_of_the_model_are_refused(edits, needle):
    model = _model("llama")
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")), hs.edited_heads(model, edits):
        pass
    with pytest.raises(ValueError, match="record: head 99"), hs.edited_heads(model, record={0: (99,)}):
        pass
    assert model.config._attn_implementation == "eager"  # nothing was changed before the refusal


def test_means_for_a_missing_layer_or_head_are_refused():
    model = _model("llama")
    zero = torch.zeros(HEAD_DIM)
    with pytest.raises(ValueError, match="means: layer 7 is out of range"), \
            hs.edited_heads(model, {(1, 3): "mean"}, means={(7, 3): zero}):
        pass
    with pytest.raises(ValueError, match="means: head 4 is out of range"), \
            hs.edited_heads(model, {(1, 3): "mean"}, means={(1, 4): zero}):
        pass

