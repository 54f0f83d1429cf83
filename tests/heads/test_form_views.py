"""A head's form seen from positions, tokens and the layer before (chapter 8)."""
import numpy as np
import pytest
import torch

from qkgeometry.heads.form_views import (
    diagonal_contrast,
    layer_norm_linear,
    shift_contrast,
    table_scores,
    view_scores,
)
from qkgeometry.training.induction_model import build_model


def test_shift_contrast_reads_the_sub_diagonal():
    t = 8
    shift = np.eye(t, k=-1)
    assert shift_contrast(shift) > 1
    assert shift_contrast(-shift) < -1
    assert shift_contrast(np.eye(t)) < 0                 # the current position, not the previous one
    assert shift_contrast(np.ones((t, t))) == 0.0
    # entries above the diagonal are invisible to a causal head
    assert shift_contrast(shift - shift.T) == pytest.approx(shift_contrast(shift + shift.T))


def test_diagonal_contrast_and_table_scores():
    assert diagonal_contrast(np.eye(5)) > 1 and diagonal_contrast(-np.eye(5)) < -1
    skew = np.triu(np.ones((4, 4)), 1)
    skew = skew - skew.T
    s = table_scores(skew, "t", "diagonal")
    assert s["t_symmetry"] == pytest.approx(-1) and s["t_skew_share"] == pytest.approx(1)
    with pytest.raises(ValueError, match="square"):
        diagonal_contrast(np.ones((2, 3)))


def test_layer_norm_linear_centres_and_scales():
    v = np.arange(6.0).reshape(2, 3)
    out = layer_norm_linear(v, np.array([1.0, 2.0, 3.0]))
    assert np.allclose(out, (v - v.mean(1, keepdims=True)) * [1, 2, 3])


def test_view_scores_on_a_model():
    model = build_model(vocab_size=16, seq_len=8, d_model=16, n_layers=2, n_heads=2, mlp=False, seed=0)
    frame = view_scores(model)
    heads, layers = frame.dropna(subset=["head"]), frame[frame["head"].isna()]
    assert len(heads) == 4 and len(layers) == 2
    assert heads.loc[heads["layer"] == 0, "composition_contrast"].isna().all()
    assert heads.loc[heads["layer"] == 1, "composition_contrast"].notna().all()
    # the position table of a head is P̃ W_qk P̃ᵀ: check its symmetry against an explicit computation
    from qkgeometry import load_qk, symmetry_score

    with load_qk(model) as qk:
        m = np.asarray(qk.layer(0).matrix(head=1), dtype=float)
    gain = model.transformer.h[0].ln_1.weight.detach().double().numpy()
    p = layer_norm_linear(model.transformer.wpe.weight.detach().double().numpy(), gain)
    row = heads[(heads["layer"] == 0) & (heads["head"] == 1)].iloc[0]
    assert row["position_symmetry"] == pytest.approx(symmetry_score(p @ m @ p.T))
    ms = (m + m.T) / 2
    assert row["energy_sym"] == pytest.approx(float((ms * ms).sum()))
    assert torch.is_tensor(model.transformer.wpe.weight)
