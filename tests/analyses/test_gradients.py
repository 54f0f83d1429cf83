"""Tests for qkgeometry.analyses.gradients (chapter 3): the rank-1 gradient is exact, and the mask split is what it claims."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import qkgeometry as qg
from qkgeometry.analyses import gradients as gr

D, DH, N = 12, 4, 7


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def _masks(n: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return {
        "causal": gr.causal_mask(n),
        "bidirectional": gr.bidirectional_mask(n),
        "random": gr.random_mask(n, 0.4, generator=gen),
        "sliding-causal": gr.sliding_window_mask(n, 3),
        "sliding-symmetric": gr.sliding_window_mask(n, 2, causal=False),
    }


def _setup(batch=(3, 2), seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*batch, N, D, generator=gen, dtype=torch.float64)
    wq = torch.randn(D, DH, generator=gen, dtype=torch.float64) / math.sqrt(D)
    wk = torch.randn(D, DH, generator=gen, dtype=torch.float64) / math.sqrt(D)
    wv = torch.randn(D, D, generator=gen, dtype=torch.float64) / math.sqrt(D)
    target = torch.randint(0, D, (*batch, N), generator=gen)
    return x, wq, wk, wv, target


def _downstream(x, wv, target):
    """A nonlinear loss of P: values, a tanh, and cross-entropy against random targets."""
    def loss(p):
        out = torch.tanh(p @ x @ wv)
        return torch.nn.functional.cross_entropy(out.reshape(-1, D), target.reshape(-1))
    return loss


@pytest.mark.parametrize("mask_name", list(_masks(N)))
def test_rank1_sum_equals_autograd_for_w_and_factors(mask_name):
    mask = _masks(N)[mask_name]
    x, wq, wk, wv, target = _setup()
    loss_of_p = _downstream(x, wv, target)

    # autograd, with W a free leaf
    w = (wq @ wk.T).clone().requires_grad_(True)
    p = gr.attention_probs(x, w, mask, DH)
    (grad_w_auto,) = torch.autograd.grad(loss_of_p(p), w)
    # autograd, through the factors
    wq_, wk_ = wq.clone().requires_grad_(True), wk.clone().requires_grad_(True)
    p2 = gr.attention_probs(x, wq_ @ wk_.T, mask, DH)
    grad_q_auto, grad_k_auto = torch.autograd.grad(loss_of_p(p2), (wq_, wk_))

    _, g = gr.logit_gradient(x, wq @ wk.T, mask, DH, loss_of_p)
    grad_w = gr.rank1_gradient(x, g, DH).sum(dim=(0, 1))  # W is shared across the batch axes
    grad_q, grad_k = gr.factor_gradients(grad_w, wq, wk)

    assert _rel(grad_w, grad_w_auto) <= 1e-10
    assert _rel(grad_q, grad_q_auto) <= 1e-10
    assert _rel(grad_k, grad_k_auto) <= 1e-10
    # the explicit double sum over pairs gives the same matrix as X^T G X
    explicit = sum(g[0, 0, i, j] * torch.outer(x[0, 0, i], x[0, 0, j])
                   for i in range(N) for j in range(N)) / math.sqrt(DH)
    assert _rel(gr.rank1_gradient(x[0, 0], g[0, 0], DH), explicit) <= 1e-12
    # the split adds up, and g is zero outside the mask with rows summing to zero
    split = gr.split_gradient(x, g, mask, DH)
    assert _rel(split.total.sum(dim=(0, 1)), grad_w_auto) <= 1e-10
    assert torch.all(g[..., ~mask] == 0)
    assert torch.allclose(g.sum(-1), torch.zeros(()).double(), atol=1e-15)


def test_exactness_detects_a_wrong_gradient():
    """The comparison can fail: dropping the row-centering term of the softmax Jacobian is caught."""
    mask = gr.causal_mask(N)
    x, wq, wk, wv, target = _setup()
    loss_of_p = _downstream(x, wv, target)
    w = (wq @ wk.T).clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(loss_of_p(gr.attention_probs(x, w, mask, DH)), w)
    probs = gr.attention_probs(x, wq @ wk.T, mask, DH)
    p = probs.clone().requires_grad_(True)
    (dp,) = torch.autograd.grad(loss_of_p(p), p)
    wrong = gr.rank1_gradient(x, probs * dp, DH).sum(dim=(0, 1))
    assert _rel(wrong, auto) > 1e-3


def test_pair_classes_causal_and_bidirectional():
    n = 6
    c = gr.pair_classes(gr.causal_mask(n))
    assert torch.equal(c.unpaired, torch.ones(n, n, dtype=torch.bool).tril(-1))
    assert not c.paired.any()
    assert torch.equal(c.diagonal, torch.eye(n, dtype=torch.bool))
    b = gr.pair_classes(gr.bidirectional_mask(n))
    assert not b.unpaired.any()
    assert int(b.paired.sum()) == n * (n - 1)
    r = gr.pair_classes(gr.random_mask(n, 0.5, generator=torch.Generator().manual_seed(1)))
    union = r.diagonal | r.paired | r.unpaired
    assert not (r.diagonal & r.paired).any() and not (r.paired & r.unpaired).any()
    assert torch.equal(r.paired, r.paired.T)
    assert not (r.unpaired & r.unpaired.T).any()
    assert union.sum() == (r.diagonal.sum() + r.paired.sum() + r.unpaired.sum())


def test_sliding_window_masks():
    m = gr.sliding_window_mask(5, 2)
    assert torch.equal(m, torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0],
                                        [0, 0, 0, 1, 1]], dtype=torch.bool))
    assert torch.equal(gr.sliding_window_mask(5, 5), gr.causal_mask(5))
    s = gr.sliding_window_mask(5, 2, causal=False)
    assert torch.equal(s, s.T) and int(s.sum()) == 5 + 2 * 4


def test_part_symmetries():
    x = _setup(batch=())[0]
    mask = gr.bidirectional_mask(N)
    gen = torch.Generator().manual_seed(5)
    g_sym = torch.randn(N, N, generator=gen, dtype=torch.float64)
    g_sym = g_sym + g_sym.T
    split = gr.split_gradient(x, g_sym, mask, DH)
    e = split.energies()
    assert e["diagonal"].skew <= 1e-12 * e["diagonal"].total  # diagonal part is exactly symmetric
    assert e["paired"].skew <= 1e-12 * e["paired"].total  # symmetric g on pairs -> symmetric part
    g_skew = torch.randn(N, N, generator=gen, dtype=torch.float64)
    g_skew = g_skew - g_skew.T
    e2 = gr.split_gradient(x, g_skew, mask, DH).energies()
    assert e2["paired"].symmetric <= 1e-12 * e2["paired"].total  # antisymmetric g on pairs -> skew part
    # energies of the parts match qg.energies of the stored matrices
    assert e["total"].total == pytest.approx(float((split.total ** 2).sum()), rel=1e-12)
    tab = split.table()
    assert set(tab["part"]) == set(gr.GradientSplit.PARTS)


def test_single_unpaired_term_symmetry_is_cos_squared():
    gen = torch.Generator().manual_seed(2)
    u, v = torch.randn(2, D, generator=gen, dtype=torch.float64)
    cos2 = float((u @ v) ** 2 / (u @ u) / (v @ v))
    assert qg.symmetry_score(torch.outer(u, v)) == pytest.approx(cos2, abs=1e-12)


def test_orthogonal_token_prediction_is_exact_for_orthogonal_tokens():
    gen = torch.Generator().manual_seed(4)
    q, _ = torch.linalg.qr(torch.randn(D, N, generator=gen, dtype=torch.float64))
    scales = torch.rand(N, generator=gen, dtype=torch.float64) + 0.5
    x = (q * scales).T  # N orthogonal rows of different norms
    for name, mask in _masks(N).items():
        g = torch.randn(N, N, generator=gen, dtype=torch.float64) * mask
        pred = float(gr.orthogonal_token_symmetry(g, (x ** 2).sum(-1)))
        actual = qg.symmetry_score(gr.rank1_gradient(x, g, DH))
        assert pred == pytest.approx(actual, abs=1e-12), name
    # for non-orthogonal tokens the prediction is only an approximation
    xr = torch.randn(N, 3, generator=gen, dtype=torch.float64)
    g = torch.randn(N, N, generator=gen, dtype=torch.float64)
    assert abs(float(gr.orthogonal_token_symmetry(g, (xr ** 2).sum(-1)))
               - qg.symmetry_score(gr.rank1_gradient(xr, g, DH))) > 1e-6


def test_bad_inputs_have_clear_messages():
    x = torch.randn(N, D, dtype=torch.float64)
    w = torch.randn(D, D, dtype=torch.float64)
    with pytest.raises(ValueError, match="`mask` must have shape"):
        gr.attention_probs(x, w, gr.causal_mask(N + 1), DH)
    with pytest.raises(TypeError, match="`mask` must be a bool"):
        gr.attention_probs(x, w, gr.causal_mask(N).double(), DH)
    with pytest.raises(ValueError, match="`w_qk` is"):
        gr.attention_logits(x, torch.randn(D + 1, D + 1), DH)
    with pytest.raises(ValueError, match="allows no key"):
        gr.attention_probs(x, w, torch.zeros(N, N, dtype=torch.bool), DH)
    with pytest.raises(ValueError, match="`g` must have shape"):
        gr.rank1_gradient(x, torch.zeros(N + 1, N + 1), DH)
    with pytest.raises(ValueError, match="nonzero on pairs"):
        gr.split_gradient(x, torch.ones(N, N, dtype=torch.float64), gr.causal_mask(N), DH)
    with pytest.raises(ValueError, match="`head_dim`"):
        gr.attention_logits(x, w, 0)
    with pytest.raises(ValueError, match="`window`"):
        gr.sliding_window_mask(4, 0)
    with pytest.raises(ValueError, match="`grad_w`"):
        gr.factor_gradients(torch.zeros(3, 3), torch.zeros(D, DH), torch.zeros(D, DH))
    with pytest.raises(ValueError, match="scalar"):
        gr.logit_gradient(x, w, gr.causal_mask(N), DH, lambda p: p)


def _one_layer_mlm(masked: list[int], seed: int = 5):
    """One-step gradient of the one-layer model with a masked-LM loss that reads only the rows in ``masked``."""
    gen = torch.Generator().manual_seed(seed)
    vocab = 11
    emb = torch.randn(vocab, D, generator=gen, dtype=torch.float64)
    ids = torch.randint(0, vocab - 1, (N,), generator=gen)
    positions = torch.zeros(N, dtype=torch.bool)
    positions[masked] = True
    x = emb[ids.masked_fill(positions, vocab - 1)] + 0.1 * torch.randn(N, D, generator=gen, dtype=torch.float64)
    w = torch.randn(3, D, D, generator=gen, dtype=torch.float64) / D
    _, g = gr.one_step_gradient(x, w, DH, "mlm", ids, emb, positions)
    return x, g, positions


def test_effective_pairs_are_zero_when_the_loss_reads_one_row():
    x, g, positions = _one_layer_mlm([3])
    mask = gr.bidirectional_mask(N)
    shares = gr.pair_energy_shares(g, mask)
    # the mask calls nearly everything paired; the gradient pairs nothing: only row 3 of g is non-zero
    assert np.all(shares.mask_paired > 0.5)
    assert np.all(shares.effective_paired == 0.0)
    assert np.allclose(shares.diagonal + shares.effective_paired + shares.one_sided, 1.0)
    rows = (g.abs() > 0).any(dim=-1)
    assert torch.equal(rows, positions.expand_as(rows))
    by_grad = gr.split_gradient(x, g, mask, DH, by="gradient")
    assert float(by_grad.paired.abs().max()) == 0.0
    assert float(gr.split_gradient(x, g, mask, DH).paired.abs().max()) > 0  # the mask split disagrees
    torch.testing.assert_close(by_grad.total, gr.rank1_gradient(x, g, DH))


def test_effective_pairs_are_exactly_masked_with_masked_in_one_layer():
    _, g, positions = _one_layer_mlm([1, 4, 5])
    eff = gr.effective_pair_classes(g)
    both = positions[:, None] & positions[None, :] & ~torch.eye(N, dtype=torch.bool)
    assert torch.equal(eff.paired, both.expand_as(eff.paired))
    shares = gr.pair_energy_shares(g, gr.bidirectional_mask(N))
    assert np.all(shares.effective_paired > 0) and np.all(shares.effective_paired < shares.mask_paired)


def test_effective_pair_classes_tolerance_and_causal():
    g = torch.tensor([[1.0, 1e-12], [0.5, 0.0]], dtype=torch.float64)
    assert not bool(gr.effective_pair_classes(g).paired.any())  # 1e-12 is below the default tolerance
    assert bool(gr.effective_pair_classes(g, rtol=0.0).paired[0, 1])
    assert int(gr.effective_pair_classes(torch.zeros(3, 3)).diagonal.sum()) == 0
    gen = torch.Generator().manual_seed(0)
    g = torch.randn(4, N, N, generator=gen, dtype=torch.float64) * gr.causal_mask(N)
    shares = gr.pair_energy_shares(g, gr.causal_mask(N), pool_dims=1)
    assert shares.mask_paired == 0.0 and shares.effective_paired == 0.0
    with pytest.raises(ValueError, match="`rtol`"):
        gr.effective_pair_classes(g, rtol=2.0)


def test_common_direction_never_appears_on_the_key_side():
    """Rows of g sum to 0, so a direction on which every token agrees is annihilated on the key side only."""
    gen = torch.Generator().manual_seed(6)
    mu = torch.randn(D, generator=gen, dtype=torch.float64)
    z = torch.randn(N, D, generator=gen, dtype=torch.float64)
    v = torch.randn(D, generator=gen, dtype=torch.float64)
    z = z - torch.outer(z @ v, v) / (v @ v)  # every z_i orthogonal to v ...
    x = z + mu  # ... so x_i · v = mu · v for every token
    w = torch.randn(D, D, generator=gen, dtype=torch.float64) / D
    for mask in _masks(N).values():
        _, g = gr.logit_gradient(x, w, mask, DH, lambda p: (p @ x).pow(2).sum() + p[..., 0].sum())
        grad = gr.rank1_gradient(x, g, DH)
        assert float((grad @ v).norm()) < 1e-12 * float(grad.norm())  # key side: exactly nothing along v
        assert float((grad.T @ v).norm()) > 1e-3 * float(grad.norm())  # query side: generally something


def test_first_token_is_a_pure_key_under_a_causal_mask():
    x, wq, wk, wv, target = _setup(batch=(2,))
    _, g = gr.logit_gradient(x, wq @ wk.T, gr.causal_mask(N), DH, _downstream(x, wv, target))
    keys, queries = gr.token_side_weights(g)
    assert float(queries[..., 0].abs().max()) == 0.0 and float(keys[..., 0].min()) > 0
    torch.testing.assert_close(keys.sum(-1), queries.sum(-1))


def test_expected_side_weights_match_a_simulation():
    n, reps = 6, 20000
    gen = torch.Generator().manual_seed(1)
    for causal in (True, False):
        mask = gr.causal_mask(n) if causal else gr.bidirectional_mask(n)
        probs = mask.double() / mask.double().sum(-1, keepdim=True)  # (E1) uniform attention
        upstream = torch.randn(reps, n, n, generator=gen, dtype=torch.float64)  # (E2)
        keys, queries = gr.token_side_weights(gr.softmax_backward(probs.expand(reps, n, n), upstream))
        want_k, want_q = gr.expected_side_weights(n, causal)
        np.testing.assert_allclose(keys.mean(0).numpy(), want_k, rtol=0.05, atol=1e-3)
        np.testing.assert_allclose(queries.mean(0).numpy(), want_q, rtol=0.05, atol=1e-3)
    k, q = gr.expected_side_weights(64)
    assert k.max() > q.max() and q[0] == 0 and k.sum() == pytest.approx(q.sum())
    k, q = gr.expected_side_weights(8, causal=False)
    np.testing.assert_allclose(k, q)


def test_constructed_key_hub_gradient_has_negative_directionality():
    """A causal gradient whose key side is dominated by one spiky early token scores d < 0 (and d > 0 transposed)."""
    gen = torch.Generator().manual_seed(8)
    n, d = 32, 64
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    x[0, :3] += 12.0  # the first token has a few large coordinates
    g = 0.1 * torch.randn(n, n, generator=gen, dtype=torch.float64)
    g[:, 0] += 1.0  # every query sends its gradient to key 0: a key-side hub
    g = g * gr.causal_mask(n)
    m = gr.rank1_gradient(x, g, 4)
    assert qg.directionality_score(m) < -0.5
    assert qg.directionality_score(m.T) > 0.5
    hub = torch.randn(d, d, generator=gen, dtype=torch.float64)
    hub[:, :2] *= 8  # two dominant key-side (column) directions
    assert qg.directionality_score(hub) < 0


def test_exercise_checkers_accept_reference_and_reject_wrong(capsys):
    from qkgeometry.exercises.gradients import check_pair_counts, check_two_token_gradient

    def solution(a, dl_dp, causal):  # the solution printed in chapter 3
        g = np.zeros((2, 2))
        for i in range(2):
            keys = [0] if (causal and i == 0) else [0, 1]
            e = np.exp(a[i, keys] - a[i, keys].max())
            p = e / e.sum()
            g[i, keys] = p * (dl_dp[i, keys] - (p * dl_dp[i, keys]).sum())
        return g

    def ignores_mask(a, dl_dp, causal):
        return solution(a, dl_dp, False)

    assert check_two_token_gradient(solution)
    assert not check_two_token_gradient(ignores_mask)
    assert not check_two_token_gradient(lambda a, d, c: 1 / 0)
    assert check_pair_counts(12, 4, True, (12, 0, 30))
    assert check_pair_counts(12, 4, False, (12, 60, 0))
    assert not check_pair_counts(12, 4, True, (12, 30, 0))
    assert not check_pair_counts(12, 4, True, "abc")
    out = capsys.readouterr().out
    assert "unpaired" in out and "not yet" in out


def test_chapter3_figures():
    import pandas as pd

    from qkgeometry import catalogue, plotting

    rng = np.random.default_rng(0)
    summary = pd.DataFrame([{"step": s, "seed": k, "objective": o, "symmetry": rng.uniform(-1, 1),
                             "directionality": rng.choice([-1.0, 0.0, 1.0])}
                            for s in (0, 10, 20) for k in range(3) for o in ("causal", "mlm", "rtd")])
    fig = plotting.objective_trajectories(summary, null_bands={"symmetry": (-0.1, 0.1)})
    assert len(fig.axes) == 2
    for ax in fig.axes:  # bands are clipped to the scores' range, and every panel says what it shows
        assert ax.get_ylabel() and ax.get_xlabel() == "training step"
        for coll in ax.collections:
            ys = np.concatenate([p.vertices[:, 1] for p in coll.get_paths()])
            assert ys.min() >= -1 - 1e-9 and ys.max() <= 1 + 1e-9
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any("null" in lab for lab in labels) and any("n = 3 seeds" in lab for lab in labels)
    paper = plotting.paper_training_curves(catalogue.paper_per_layer("custom-models"))
    assert len(paper.axes) == 2 and len(paper.axes[0].lines) == 12 + 1  # 12 runs and the zero line
    one = pd.DataFrame({"setting": ["a"] * 8 + ["b"] * 8, "objective": ["causal", "mlm"] * 8,
                        "symmetry": rng.uniform(-1, 1, 16)})
    assert len(plotting.one_step_distributions(one).axes) == 2
    plotting.plt.close("all")
