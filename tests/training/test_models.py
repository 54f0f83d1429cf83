"""Tests for qkgeometry.training.models (chapter 5): the initialisations keep the model's own distribution; a causal
decoder never sees future tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from qkgeometry import symmetry_score
from qkgeometry.training.config import TrainConfig
from qkgeometry.training.models import (
    LanguageModelLoss,
    ModelSpec,
    build_model,
    qk_factors,
    qk_scores,
    self_attentions,
)

SPEC = ModelSpec(vocab_size=8000, hidden=128, layers=4, heads=4, ffn=512, max_len=64)  # the book's model


# ------------------------------------------------------------------------------------------------ inits
@pytest.mark.parametrize("arch", ["encoder", "decoder"])
def test_symmetric_init_is_exactly_symmetric_per_layer_and_head(arch):
    model = build_model(SPEC, arch, "symmetric", seed=3)
    for attn in self_attentions(model):
        assert torch.equal(attn.query.weight, attn.key.weight)
        assert torch.equal(attn.query.bias, attn.key.bias)
        W_Q, W_K = attn.query.weight.T.double(), attn.key.weight.T.double()  # (d, H·d_h)
        d_h = W_Q.shape[1] // SPEC.heads
        for h in range(SPEC.heads):
            M = W_Q[:, h * d_h:(h + 1) * d_h] @ W_K[:, h * d_h:(h + 1) * d_h].T
            assert torch.allclose(M, M.T, rtol=0, atol=1e-15)
            assert symmetry_score(M) == pytest.approx(1.0, abs=1e-12)
    sym, _ = qk_scores(model)
    np.testing.assert_allclose(sym, 1.0, atol=1e-12)


def test_symmetric_init_keeps_the_models_own_init_distribution():
    default = build_model(SPEC, "encoder", "default", seed=0)
    symmetric = build_model(SPEC, "encoder", "symmetric", seed=0)
    d_params, s_params = dict(default.named_parameters()), dict(symmetric.named_parameters())
    for name, p in s_params.items():
        if ".attention.self.query." in name:
            # W_Q is a copy of the model's own initialised key weight, not a fresh draw
            assert torch.equal(p, d_params[name.replace(".query.", ".key.")]), name
        else:
            assert torch.equal(p, d_params[name]), f"{name} changed; only W_Q may"
    q_default = torch.cat([a.query.weight.detach().flatten() for a in self_attentions(default)]).numpy()
    q_sym = torch.cat([a.query.weight.detach().flatten() for a in self_attentions(symmetric)]).numpy()
    assert q_sym.std() == pytest.approx(SPEC.init_range, rel=0.02)
    assert stats.ks_2samp(q_default, q_sym).pvalue > 1e-3
    # the test can fail: PyTorch's default nn.Linear init (the authors' bug) is a different distribution
    fresh = torch.nn.Linear(SPEC.hidden, SPEC.hidden).weight.detach().flatten().numpy()
    assert stats.ks_2samp(q_default[: fresh.size], fresh).pvalue < 1e-6


def test_skew_init_is_skew_and_shared_is_tied():
    skew = build_model(SPEC, "encoder", "skew", seed=1)
    np.testing.assert_allclose(qk_scores(skew)[0], -1.0, atol=1e-12)
    for a in self_attentions(skew):
        assert a.query.weight.std().item() == pytest.approx(SPEC.init_range, rel=0.05)
    shared = build_model(SPEC, "encoder", "shared", seed=1)
    for a in self_attentions(shared):
        assert a.query.weight is a.key.weight and a.query.bias is a.key.bias
    n_default = sum(p.numel() for p in build_model(SPEC, "encoder", "default", 1).parameters())
    n_shared = sum(p.numel() for p in shared.parameters())
    assert n_default - n_shared == SPEC.layers * (SPEC.hidden ** 2 + SPEC.hidden)


def test_rotated_init_keeps_the_key_distribution_and_is_neither_symmetric_nor_skew():
    rotated = build_model(SPEC, "encoder", "rotated", seed=1)
    default = build_model(SPEC, "encoder", "default", seed=1)
    d_head = SPEC.hidden // SPEC.heads
    sym = qk_scores(rotated)[0]
    assert np.all(np.abs(sym) < 0.5)  # a symmetric init gives 1, a skew one -1
    for a, b in zip(self_attentions(rotated), self_attentions(default)):
        assert torch.equal(a.key.weight, b.key.weight)  # only W_Q moves
        q = a.query.weight.detach().double().view(SPEC.heads, d_head, -1)
        k = a.key.weight.detach().double().view(SPEC.heads, d_head, -1)
        # W_Q^h = W_K^h O^h with O^h orthogonal: the Gram matrices over the input dimension agree
        np.testing.assert_allclose((q.transpose(1, 2) @ q).numpy(), (k.transpose(1, 2) @ k).numpy(), atol=1e-6)
        assert a.query.weight.std().item() == pytest.approx(SPEC.init_range, rel=0.05)
    again = build_model(SPEC, "encoder", "rotated", seed=1)
    assert all(torch.equal(a.query.weight, b.query.weight)
               for a, b in zip(self_attentions(rotated), self_attentions(again)))
    other = build_model(SPEC, "encoder", "rotated", seed=2)
    assert not torch.equal(self_attentions(other)[0].key.weight, self_attentions(rotated)[0].key.weight)
    # the rotations come from their own stream: the global generator ends where the default build leaves it
    build_model(SPEC, "encoder", "default", seed=3)
    after_default = torch.rand(1)
    build_model(SPEC, "encoder", "rotated", seed=3)
    assert torch.equal(torch.rand(1), after_default)


def test_indefinite_init_is_symmetric_with_the_symmetric_gram_but_no_self_match_bias():
    indefinite = build_model(SPEC, "encoder", "indefinite", seed=4)
    symmetric = build_model(SPEC, "encoder", "symmetric", seed=4)
    d_head = SPEC.hidden // SPEC.heads
    np.testing.assert_allclose(qk_scores(indefinite)[0], 1.0, atol=1e-12)  # exactly symmetric per head
    for a, b in zip(self_attentions(indefinite), self_attentions(symmetric)):
        assert torch.equal(a.key.weight, b.key.weight)
        q = a.query.weight.detach().double().view(SPEC.heads, d_head, -1)
        k = a.key.weight.detach().double().view(SPEC.heads, d_head, -1)
        signs = (q / k).mean(-1)  # each row of (W_Q^h)ᵀ is ± the same row of (W_K^h)ᵀ
        assert torch.equal(signs.abs().round(), torch.ones_like(signs))
        assert (signs.round().sum(-1) == 0).all()  # half +1, half -1 in every head
        # same Gram matrix over the input dimension as the symmetric init (W_Q^hᵀ W_Q^h = W_K^hᵀ W_K^h)
        np.testing.assert_allclose((q.transpose(1, 2) @ q).numpy(), (k.transpose(1, 2) @ k).numpy(), atol=1e-6)
        for h in range(SPEC.heads):
            M = q[h].T @ k[h]  # W_Q^h W_K^hᵀ, (d, d)
            eig = torch.linalg.eigvalsh(M)
            assert eig.min() < -0.5 * eig.max() < 0  # indefinite, unlike the symmetric init (PSD)
            # the self-match term x^T M x averages tr(M) ≈ 0, against ‖W_K^h‖² for the symmetric init
            assert abs(float(torch.trace(M))) < 0.3 * float((k[h] ** 2).sum())
    other = build_model(SPEC, "encoder", "indefinite", seed=5)
    assert not torch.equal(self_attentions(other)[0].query.weight.sign(), self_attentions(other)[0].key.weight.sign()
                           * self_attentions(indefinite)[0].query.weight.sign()
                           * self_attentions(indefinite)[0].key.weight.sign())
    build_model(SPEC, "encoder", "default", seed=3)
    after_default = torch.rand(1)
    build_model(SPEC, "encoder", "indefinite", seed=3)
    assert torch.equal(torch.rand(1), after_default)  # the signs come from their own stream


def test_haar_orthogonal_is_orthogonal_and_sign_balanced():
    from qkgeometry.training.data import keyed_generator
    from qkgeometry.training.models import haar_orthogonal

    gen = keyed_generator(0)
    mats = torch.stack([haar_orthogonal(4, gen).double() for _ in range(2000)])
    np.testing.assert_allclose((mats @ mats.transpose(1, 2)).numpy(), np.broadcast_to(np.eye(4), mats.shape),
                               atol=1e-6)
    # Haar: E O = 0 entrywise (a QR without the sign fix has a positive diagonal mean)
    assert abs(mats.diagonal(dim1=1, dim2=2).mean().item()) < 0.05


def test_unknown_init_and_arch_are_clear_errors():
    with pytest.raises(ValueError, match="init must be one of"):
        build_model(SPEC, "encoder", "orthogonal")
    with pytest.raises(ValueError, match="arch must be one of"):
        TrainConfig(arch="seq2seq")


def test_qk_factors_match_the_layer_matrix():
    model = build_model(ModelSpec(vocab_size=50, hidden=16, layers=2, heads=2, ffn=16, max_len=8), "encoder")
    A, B = qk_factors(model)
    attn = self_attentions(model)[1]
    M = attn.query.weight.double().T @ attn.key.weight.double()  # Σ_h W_Q^h W_K^hᵀ
    np.testing.assert_allclose(A[1] @ B[1].T, M.detach().numpy(), atol=1e-12)


# --------------------------------------------------------------------------------------------- causality
def _hidden(model, ids):
    with torch.no_grad():
        return model.bert(input_ids=ids).last_hidden_state


@pytest.mark.parametrize("init", ["default", "symmetric", "shared"])
def test_causal_decoder_never_sees_future_tokens(init):
    spec = ModelSpec(vocab_size=100, hidden=32, layers=2, heads=4, ffn=64, max_len=16)
    model = build_model(spec, "decoder", init, seed=0).eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 100, (2, 16), generator=gen)
    base = _hidden(model, ids)
    for t in (3, 9, 15):
        perturbed = ids.clone()
        perturbed[:, t] = (perturbed[:, t] + 1 - 5) % 95 + 5
        out = _hidden(model, perturbed)
        assert torch.equal(out[:, :t], base[:, :t]), f"positions before {t} saw the change at {t}"
        assert (out[:, t] - base[:, t]).abs().max() > 1e-4
    # and the causal-LM loss on a prefix ignores the tokens after it
    loss = LanguageModelLoss(model, "clm")
    future = ids.clone()
    future[:, 10:] = torch.randint(5, 100, future[:, 10:].shape, generator=gen)
    l1 = loss(ids[:, :10], ids[:, :10])[0]
    l2 = loss(future[:, :10], future[:, :10])[0]
    assert torch.equal(l1, l2)


def test_encoder_does_see_future_tokens():  # the perturbation test above can fail
    spec = ModelSpec(vocab_size=100, hidden=32, layers=2, heads=4, ffn=64, max_len=16)
    model = build_model(spec, "encoder", "default", seed=0).eval()
    ids = torch.randint(5, 100, (1, 16), generator=torch.Generator().manual_seed(1))
    perturbed = ids.clone()
    perturbed[0, 12] = (perturbed[0, 12] + 1 - 5) % 95 + 5
    assert (_hidden(model, perturbed)[0, :12] - _hidden(model, ids)[0, :12]).abs().max() > 1e-4


def test_norm_matched_init_has_the_symmetric_form_norm_and_the_default_geometry():
    default = build_model(SPEC, "encoder", "default", seed=6)
    matched = build_model(SPEC, "encoder", "norm-matched", seed=6)
    symmetric = build_model(SPEC, "encoder", "symmetric", seed=6)
    d_head = SPEC.hidden // SPEC.heads

    def forms(model):  # (L, H, d, d): W_Q^h W_K^hᵀ per layer and head
        out = []
        for a in self_attentions(model):
            q = a.query.weight.detach().double().view(SPEC.heads, d_head, -1)
            k = a.key.weight.detach().double().view(SPEC.heads, d_head, -1)
            out.append(q.transpose(1, 2) @ k)
        return torch.stack(out)

    fd, fm, fs = forms(default), forms(matched), forms(symmetric)
    from qkgeometry.training.models import qk_form_norms

    np.testing.assert_allclose(qk_form_norms(matched), torch.linalg.matrix_norm(fm).numpy(), rtol=1e-12)
    norm = lambda f: torch.linalg.matrix_norm(f)  # noqa: E731
    np.testing.assert_allclose(norm(fm).numpy(), norm(fs).numpy(), rtol=1e-5)  # the symmetric init's form norm
    assert (norm(fs) > 1.03 * norm(fd)).all()  # which is larger than the default's: the confound it controls
    # the same form up to one positive factor per head: default scores, default geometry
    cos = (fm * fd).sum((-1, -2)) / (norm(fm) * norm(fd))
    np.testing.assert_allclose(cos.numpy(), 1.0, atol=1e-6)
    from qkgeometry.scores import directionality_score, symmetry_score

    for score in (symmetry_score, directionality_score):  # each head's scores are the default's
        np.testing.assert_allclose(score(fm.numpy()), score(fd.numpy()), atol=1e-5)  # float32 weights
    for a, b in zip(self_attentions(matched), self_attentions(default)):  # queries and keys scaled alike
        ratio_q = a.query.weight.detach().norm() / b.query.weight.detach().norm()
        ratio_k = a.key.weight.detach().norm() / b.key.weight.detach().norm()
        assert abs(float(ratio_q - ratio_k)) < 0.02 and float(ratio_q) > 1.0
        assert torch.equal(a.value.weight, b.value.weight)
    build_model(SPEC, "encoder", "default", seed=3)
    after_default = torch.rand(1)
    build_model(SPEC, "encoder", "norm-matched", seed=3)
    assert torch.equal(torch.rand(1), after_default)  # no random draw: the data order is the default run's
