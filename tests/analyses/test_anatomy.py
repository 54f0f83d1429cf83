"""Within-/cross-head shares and the key-bias ratio, against dense computations and the models' own logits."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch

import qkgeometry as qg
from architectures.test_registry import CASES
from logit_harness import build_tiny_model, capture_softmax_inputs
from qkgeometry.analyses.anatomy import (
    ANATOMY_COLUMNS,
    head_pair_traces,
    head_share,
    key_bias_ratio,
    key_bias_ratio_per_head,
    layer_anatomy,
)
from qkgeometry.model import QKLayer
from qkgeometry.surveying import input_norm_comparison


def _random_layer(n_heads=6, n_kv=2, d=20, r=4, bias=True, seed=0) -> QKLayer:
    gen = torch.Generator().manual_seed(seed)
    wq = torch.randn(n_heads, d, r, generator=gen, dtype=torch.float64)
    wk = torch.randn(n_kv, d, r, generator=gen, dtype=torch.float64)
    bq = torch.randn(n_heads, r, generator=gen, dtype=torch.float64) if bias else None
    return QKLayer(3, "self", wq, wk, bq)


@pytest.mark.parametrize("n_heads,n_kv", [(6, 6), (6, 2), (4, 1)])
def test_head_share_equals_the_dense_computation(n_heads, n_kv):
    layer = _random_layer(n_heads, n_kv)
    heads = [layer.matrix(h) for h in range(n_heads)]  # dense, KV head g(h) = h // group
    m = sum(heads)
    trace = np.array([[torch.trace(a @ b).item() for b in heads] for a in heads])
    frob = np.array([[(a * b).sum().item() for b in heads] for a in heads])
    t, f = head_pair_traces(layer)
    np.testing.assert_allclose(t, trace, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(f, frob, rtol=1e-10, atol=1e-9)
    share = head_share(layer)
    assert share["within_head"] == pytest.approx(np.trace(trace) / torch.trace(m @ m).item(), rel=1e-10)
    assert share["cross_head"] == pytest.approx(1 - share["within_head"], abs=1e-15)
    assert share["within_head_frobenius"] == pytest.approx(np.trace(frob) / (m * m).sum().item(), rel=1e-10)
    assert t.sum() == pytest.approx(torch.trace(m @ m).item(), rel=1e-10)  # the layer's symmetry numerator


def test_head_share_of_one_head_is_one_and_cross_terms_can_push_it_outside_0_1():
    layer = _random_layer(1, 1)
    assert head_share(layer)["within_head"] == pytest.approx(1.0)
    # two heads whose own forms are symmetric but whose cross terms are large and negative: M_2 = -M_1 + small
    a = torch.randn(10, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    wq = torch.stack([a, -a + 0.01 * torch.ones_like(a)])
    wk = torch.stack([a, a])
    share = head_share(QKLayer(0, "self", wq, wk))
    assert share["within_head"] > 1 and share["cross_head"] < 0


def test_key_bias_ratio_equals_the_dense_definition_and_the_isotropic_rms_ratio():
    layer = _random_layer()
    m = layer.matrix()
    v = sum(layer.wk[h] @ layer.bq[h] for h in range(layer.n_heads))  # Σ_h W_K^{g(h)} b_q^h
    expected = (torch.linalg.vector_norm(v) / torch.linalg.matrix_norm(m)).item()
    assert key_bias_ratio(layer) == pytest.approx(expected, rel=1e-12)
    per_head = key_bias_ratio_per_head(layer)
    for h in range(layer.n_heads):
        vh = layer.wk[h] @ layer.bq[h]
        assert per_head[h] == pytest.approx((vh.norm() / layer.matrix(h).norm()).item(), rel=1e-12)
    # what it means: the RMS of the key-only term over the RMS of the bilinear term, for isotropic inputs
    gen = torch.Generator().manual_seed(2)
    xi, xj = (torch.randn(40_000, m.shape[0], generator=gen, dtype=torch.float64) for _ in range(2))
    bilinear = torch.einsum("nd,de,ne->n", xi, m, xj)
    key_term = xj @ v
    assert (key_term.pow(2).mean() / bilinear.pow(2).mean()).sqrt().item() == pytest.approx(expected, rel=0.03)


def test_key_bias_ratio_is_nan_without_a_query_bias():
    layer = _random_layer(bias=False)
    assert math.isnan(key_bias_ratio(layer)) and np.isnan(key_bias_ratio_per_head(layer)).all()


# Architectures with a query bias, each in its own layout (Linear, GPT-2's fused Conv1D, NeoX's interleaved fused
# tensor, the relative-bias encoder MPNet, Qwen2 with GQA, Whisper's cross-attention).
BIAS_CASES = ["bert", "mpnet-no-position-bias", "gpt2", "gpt_neox-interleaved", "qwen2-gqa-bias", "whisper-cross",
              "bart-encoder"]


@pytest.mark.parametrize("case_id", BIAS_CASES)
def test_query_bias_is_the_key_only_logit_term(case_id, tmp_path):
    """logit/scale − x_iᵀ W_qk x_j − b_qᵀ W_Kᵀ x_j depends on the query token only (what is left is the query-only
    terms, which cancel in the softmax): so the loader's b_q is the model's query bias, in the right layout."""
    case = next(c for c in CASES if c.id == case_id)
    case = dataclasses.replace(case, bias_names=(), randomize=("bias",))  # keep every bias, and make it non-zero
    model = build_tiny_model(case, tmp_path)
    qk = qg.load_qk(tmp_path)
    dims = qk.dims(case.component)
    scale = case.scale(model.config) if case.scale else 1.0 / math.sqrt(dims.head_dim)
    gen = torch.Generator().manual_seed(1)
    for layer in (lyr for lyr in qk if lyr.component == case.component):
        assert layer.bq is not None and layer.bq.shape == (dims.n_heads, dims.head_dim)
        x = torch.randn(2, 7, dims.d_model, generator=gen, dtype=torch.float64)
        with torch.no_grad(), capture_softmax_inputs() as captured:
            case.call(case.attention(model, layer.index), x, model)
        logits = captured[0]
        bilinear = torch.einsum("bid,hde,bje->bhij", x, torch.stack([layer.matrix(h) for h in range(dims.n_heads)]), x)
        key_term = torch.einsum("hde,he,bjd->bhj", layer.wk, layer.bq, x)[:, :, None, :]
        rest = logits / scale - bilinear - key_term
        keep = logits > case.masked_below
        spread = (rest - rest.diagonal(dim1=-2, dim2=-1)[..., None])[keep].abs().max().item()
        assert spread < 1e-9, f"{case_id} layer {layer.index}: {spread:.3g}"
        without = (rest + key_term - (rest + key_term).diagonal(dim1=-2, dim2=-1)[..., None])[keep].abs().max()
        assert without > 1e-3  # the key term is really there


def test_layer_anatomy_frame(tmp_path):
    case = next(c for c in CASES if c.id == "qwen2-gqa-bias")
    build_tiny_model(dataclasses.replace(case, bias_names=(), randomize=("bias", "input_layernorm.weight")), tmp_path)
    from qkgeometry.catalogue import PresetEntry

    entries = [PresetEntry(str(tmp_path), "tiny qwen2", "decoder", "language"), f"random:{tmp_path}"]
    frame = layer_anatomy(entries)
    assert list(frame.columns) == ANATOMY_COLUMNS and len(frame) == 4
    assert frame["model"].tolist()[:2] == ["tiny qwen2"] * 2 and frame["init"].tolist() == ["pretrained"] * 2 + \
        ["random"] * 2
    layer = qg.load_qk(tmp_path).layer(1)
    row = frame.iloc[1]
    assert row["within_head_share"] == pytest.approx(head_share(layer)["within_head"], rel=1e-12)
    assert row["key_bias_ratio"] == pytest.approx(key_bias_ratio(layer), rel=1e-12)
    assert frame.loc[frame["init"] == "random", "key_bias_ratio"].isna().all()  # the twin has no bias
    folded = layer_anatomy([str(tmp_path)], input_norm="folded")
    assert (folded["input_norm"] == "folded").all()
    assert not np.allclose(folded["within_head_share"], frame["within_head_share"][:2])
    with pytest.raises(TypeError, match="`sources` must be a list"):
        layer_anatomy(str(tmp_path))


def test_minilm_layer_4_is_almost_all_cross_head():
    frame = layer_anatomy(["offline:minilm-l6"])
    assert isinstance(frame, pd.DataFrame) and len(frame) == 6
    assert frame.loc[4, "within_head_share"] < 0.05  # ≈ 97% of tr(M M) from cross-head terms
    assert (frame["key_bias_ratio"] > 0).all()


def test_the_comparison_of_forms_has_one_home_in_the_surveying_layer():
    """Two surveys joined is surveying's work: the analyses module does not lend it a second name."""
    from qkgeometry.analyses import anatomy

    assert input_norm_comparison.__module__ == "qkgeometry.surveying.forms"
    assert not hasattr(anatomy, "input_norm_comparison")


def test_input_norm_comparison_joins_the_two_surveys(tmp_path):
    case = next(c for c in CASES if c.id == "llama")
    build_tiny_model(dataclasses.replace(case, randomize=("input_layernorm.weight",)), tmp_path / "m")
    frame = input_norm_comparison([str(tmp_path / "m")], cache=tmp_path / "s.csv")
    assert list(frame.columns) == ["model", "family", "component", "layer", "symmetry_raw", "symmetry_folded",
                                   "directionality_raw", "directionality_folded"]
    folded = qg.load_qk(tmp_path / "m", input_norm="folded").layer(1)
    assert frame.loc[1, "symmetry_folded"] == pytest.approx(qg.symmetry_score(folded.matrix()), abs=1e-10)
    assert frame.loc[1, "symmetry_raw"] != pytest.approx(frame.loc[1, "symmetry_folded"], abs=1e-6)
