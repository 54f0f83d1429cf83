"""The gradient of a loss with respect to W_qk as a sum of rank-1 outer products, and how a mask splits it.

Explained in chapter 3 ("Where directional structure could come from: the gradient, and a fair test"). Conventions
are those of the book's Notation page.

For one attention head with input dimension ``d`` and head dimension ``d_h``, tokens ``x_1..x_n`` (rows of ``X``,
shape (n, d)), bilinear form ``W = W_Q W_Kᵀ`` (d × d) and a mask of allowed (query i, key j) pairs, the logits are

    a_ij = x_iᵀ W x_j / sqrt(d_h)           (only for allowed (i, j); the others get probability 0)
    P_ij = softmax_j(a_ij)                  (over the allowed keys of query i)

For any loss ``L`` that depends on ``W`` only through ``P`` (everything downstream — values, output projection,
read-out — may be arbitrary):

    g_ij := ∂L/∂a_ij = P_ij (∂L/∂P_ij − Σ_k P_ik ∂L/∂P_ik)      (the softmax Jacobian; 0 where masked)
    ∂L/∂W = Σ_ij g_ij x_i x_jᵀ / sqrt(d_h) = Xᵀ G X / sqrt(d_h)
    ∂L/∂W_Q = (∂L/∂W) W_K,   ∂L/∂W_K = (∂L/∂W)ᵀ W_Q              (chain rule through W = W_Q W_Kᵀ)

The allowed pairs fall into three disjoint sets, and the sum splits accordingly:

* **diagonal** ``i = j``: ``g_ii x_i x_iᵀ`` is exactly symmetric;
* **paired** ``i ≠ j`` with both (i, j) and (j, i) allowed: each couple contributes
  ``ḡ (x_i x_jᵀ + x_j x_iᵀ) + δ (x_i x_jᵀ − x_j x_iᵀ)`` with ``ḡ = (g_ij + g_ji)/2``, ``δ = (g_ij − g_ji)/2``;
* **unpaired** (i, j) allowed but (j, i) not: a lone ``g_ij x_i x_jᵀ``. Under a causal mask this is exactly the
  strictly lower triangle ``j < i``, and there are no paired terms; under a bidirectional mask there are no unpaired
  terms.

The mask only says which couples *may* form. A couple (i, j)/(j, i) is **effective** when the gradient itself is
non-zero on both entries: :func:`effective_pair_classes` classifies pairs by the support of g (relative tolerance
``rtol`` of the largest ``|g|``), and :func:`pair_energy_shares` reports the share of Σ g_ij² on mask-paired and on
effective pairs side by side. A masked-LM loss in a one-layer model reads only the masked rows, so g vanishes on
every unmasked query: the mask calls almost everything "paired", the gradient pairs only masked with masked.

Everything here is torch and batched: leading axes ``...`` (e.g. batch, heads) broadcast. The multi-layer models
and the three training objectives of the chapter live in :mod:`qkgeometry.training.objectives`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from ..decomposition import Energies, energies

if TYPE_CHECKING:
    import pandas

__all__ = [  # masks, the exact gradient, its split by the mask and by the gradient (all chapter 3)
    "DEFAULT_RTOL",
    "GradientSplit",
    "PairClasses",
    "PairShares",
    "attention_logits",
    "attention_probs",
    "bidirectional_mask",
    "causal_mask",
    "effective_pair_classes",
    "expected_side_weights",
    "factor_gradients",
    "logit_gradient",
    "one_step_gradient",
    "orthogonal_token_symmetry",
    "pair_classes",
    "pair_energy_shares",
    "random_mask",
    "rank1_gradient",
    "sliding_window_mask",
    "softmax_backward",
    "split_gradient",
    "token_side_weights",
]

#: An entry g_ij counts as non-zero when ``|g_ij| > DEFAULT_RTOL · max_kl |g_kl|`` (of its own (n, n) matrix).
DEFAULT_RTOL = 1e-9

Tensor = torch.Tensor


# ================================================================================================== masks
# A mask is a bool tensor (..., n, n): mask[..., i, j] is True when query i may attend to key j.
def causal_mask(n: int, *, device: torch.device | str | None = None) -> Tensor:
    """(n, n) bool mask with key j allowed for query i iff j ≤ i (decoders). Chapter 3."""
    _check_length(n)
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def bidirectional_mask(n: int, *, device: torch.device | str | None = None) -> Tensor:
    """(n, n) bool mask that allows every pair (encoders). Chapter 3."""
    _check_length(n)
    return torch.ones(n, n, dtype=torch.bool, device=device)


def sliding_window_mask(n: int, window: int, *, causal: bool = True,
                        device: torch.device | str | None = None) -> Tensor:
    """(n, n) bool mask allowing keys within ``window`` positions of the query. Chapter 3.

    ``causal=True``: ``i − window < j ≤ i`` (Mistral-style local causal attention; ``window`` keys including i).
    ``causal=False``: ``|i − j| < window`` (symmetric local attention).
    """
    _check_length(n)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"`window` must be an int >= 1 (the number of positions a query may look back, itself "
                         f"included); got {window!r}.")
    i = torch.arange(n, device=device)
    offset = i[:, None] - i[None, :]  # i - j
    if causal:
        return (offset >= 0) & (offset < window)
    return offset.abs() < window


def random_mask(n: int, p: float = 0.5, *, generator: torch.Generator | None = None,
                device: torch.device | str | None = None) -> Tensor:
    """(n, n) bool mask with each off-diagonal pair allowed independently with probability ``p``. Chapter 3.

    The diagonal is always allowed so that every query has at least one key (a query with no key has an undefined
    softmax). Such a mask has diagonal, paired and unpaired entries at once, which is what the tests need.
    """
    _check_length(n)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"`p` must be a probability in [0, 1]; got {p!r}.")
    m = torch.rand(n, n, generator=generator, device=device) < p
    return m | torch.eye(n, dtype=torch.bool, device=device)


class PairClasses(NamedTuple):
    """Disjoint bool masks (..., n, n) whose union is the allowed set."""

    diagonal: Tensor  # i = j, allowed
    paired: Tensor  # i ≠ j, both (i, j) and (j, i) allowed
    unpaired: Tensor  # (i, j) allowed, (j, i) not


def pair_classes(mask: Tensor) -> PairClasses:
    """Split the allowed pairs of ``mask`` (..., n, n) into diagonal / paired / unpaired sets. Chapter 3.

    Under :func:`causal_mask` the unpaired set is exactly the strictly lower triangle and the paired set is empty.
    """
    mask = _check_mask(mask)
    n = mask.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=mask.device)
    mt = mask.transpose(-1, -2)
    return PairClasses(mask & eye, mask & mt & ~eye, mask & ~mt)


def effective_pair_classes(g: Tensor, rtol: float = DEFAULT_RTOL) -> PairClasses:
    """Classify pairs by the support of the gradient ``g`` (..., n, n) instead of by a mask. Chapter 3.

    An entry is non-zero when ``|g_ij| > rtol · max_kl |g_kl|`` (per (n, n) matrix). ``diagonal``: non-zero g_ii;
    ``paired`` (effective pairs): i ≠ j with both g_ij and g_ji non-zero; ``unpaired`` (one-sided): g_ij non-zero,
    g_ji zero. A matrix that is zero everywhere has no pairs at all.
    """
    if not isinstance(g, Tensor) or g.ndim < 2 or g.shape[-1] != g.shape[-2]:
        raise ValueError(f"`g` must be a torch tensor of shape (..., n, n); got {tuple(getattr(g, 'shape', ()))}.")
    _check_rtol(rtol)
    scale = g.abs().amax(dim=(-1, -2), keepdim=True)
    nonzero = (g.abs() > rtol * scale) & (scale > 0)
    return pair_classes(nonzero)


class PairShares(NamedTuple):
    """Shares of the gradient's coefficient energy Σ g_ij² (floats or arrays over the leading axes)."""

    diagonal: object  # on i = j
    mask_paired: object  # on i ≠ j whose mirror the mask allows: "paired" by the mask
    effective_paired: object  # on i ≠ j with g_ij and g_ji both non-zero: paired by the gradient
    one_sided: object  # on i ≠ j with g_ij non-zero and g_ji zero


def pair_energy_shares(g: Tensor, mask: Tensor, rtol: float = DEFAULT_RTOL, pool_dims: int = 0) -> PairShares:
    """Split Σ g_ij² by the mask's classes and by the gradient's own support, side by side. Chapter 3.

    ``g``: (..., n, n) logit gradients (zero outside ``mask``); ``mask``: bool (n, n) or (..., n, n). The mask
    split calls every allowed couple "paired"; the effective split (:func:`effective_pair_classes`, tolerance
    ``rtol``) only those where the gradient is non-zero both ways. ``pool_dims``: how many axes just before the
    (n, n) axes to pool (e.g. 1 to pool a batch axis: shares of the summed energies). Returns :class:`PairShares`,
    each of shape ``g.shape[:-2 - pool_dims]`` (NaN where g is zero everywhere).
    """
    if not isinstance(g, Tensor) or g.ndim < 2 + pool_dims:
        raise ValueError(f"`g` must be a torch tensor of shape (..., n, n) with {pool_dims} pooled axes before "
                         f"(n, n); got {tuple(getattr(g, 'shape', ()))}.")
    mask = _check_mask(mask, n=g.shape[-1])
    eff = effective_pair_classes(g, rtol)
    by_mask = pair_classes(mask)
    e = g.double() ** 2
    dims = tuple(range(-2 - pool_dims, 0))
    total = e.sum(dim=dims)

    def share(cls: Tensor) -> np.ndarray | float:
        value = (e * cls.to(e.dtype)).sum(dim=dims) / total
        value = value.numpy()
        return float(value) if value.ndim == 0 else value

    return PairShares(share(eff.diagonal), share(by_mask.paired.expand_as(e)), share(eff.paired),
                      share(eff.unpaired))


# ========================================================================================= the gradient
def attention_logits(x: Tensor, w_qk: Tensor, head_dim: int) -> Tensor:
    """Logits ``a_ij = x_iᵀ W x_j / sqrt(d_h)`` for every pair, unmasked. Chapter 3.

    ``x``: (..., n, d) tokens as rows; ``w_qk``: (..., d, d) with rows on the query side. Returns (..., n, n).
    """
    x, w_qk = _check_x_w(x, w_qk)
    _check_head_dim(head_dim)
    return x @ w_qk @ x.transpose(-1, -2) / math.sqrt(head_dim)


def attention_probs(x: Tensor, w_qk: Tensor, mask: Tensor, head_dim: int) -> Tensor:
    """Masked softmax of :func:`attention_logits` over keys; (..., n, n), exactly 0 where ``mask`` is False.

    Chapter 3. ``mask``: bool (n, n) or (..., n, n), True = allowed; every query needs at least one allowed key.
    """
    logits = attention_logits(x, w_qk, head_dim)
    mask = _check_mask(mask, n=logits.shape[-1])
    _check_rows_nonempty(mask)
    return logits.masked_fill(~mask, float("-inf")).softmax(dim=-1)


def softmax_backward(probs: Tensor, grad_probs: Tensor) -> Tensor:
    """``g_ij = P_ij (∂L/∂P_ij − Σ_k P_ik ∂L/∂P_ik)``: the exact gradient of L w.r.t. the logits. Chapter 3.

    ``probs``, ``grad_probs``: (..., n, n). Entries where ``P_ij = 0`` (masked keys) get ``g_ij = 0``, so the same
    formula holds for every mask. Each row of g sums to 0 (softmax is invariant to shifting a row of logits).
    """
    if not isinstance(probs, Tensor) or not isinstance(grad_probs, Tensor):
        raise TypeError("`probs` and `grad_probs` must be torch tensors of shape (..., n, n).")
    if probs.shape[-2:] != grad_probs.shape[-2:] or probs.shape[-1] != probs.shape[-2]:
        raise ValueError(f"`probs` and `grad_probs` must both have shape (..., n, n); got {tuple(probs.shape)} and "
                         f"{tuple(grad_probs.shape)}. Pass dL/dP with the same shape as P.")
    inner = (probs * grad_probs).sum(dim=-1, keepdim=True)
    return probs * (grad_probs - inner)


def logit_gradient(x: Tensor, w_qk: Tensor, mask: Tensor, head_dim: int,
                   loss_of_probs: Callable[[Tensor], Tensor]) -> tuple[Tensor, Tensor]:
    """``(P, g)`` for the loss ``loss_of_probs(P)``: P (..., n, n) and g_ij = ∂L/∂a_ij (..., n, n). Chapter 3.

    ``loss_of_probs`` maps the attention matrix to a scalar loss (values, read-out, cross-entropy... anything
    downstream). Only ``∂L/∂P`` is taken from autograd; the softmax step is :func:`softmax_backward`.
    """
    with torch.no_grad():
        probs = attention_probs(x, w_qk, mask, head_dim)
    p = probs.detach().requires_grad_(True)
    loss = loss_of_probs(p)
    if not isinstance(loss, Tensor) or loss.numel() != 1:
        raise ValueError("`loss_of_probs` must return a scalar torch tensor (the loss); got "
                         f"{type(loss).__name__} with shape {tuple(getattr(loss, 'shape', ()))}.")
    (grad_probs,) = torch.autograd.grad(loss, p)
    return probs, softmax_backward(probs, grad_probs)


def rank1_gradient(x: Tensor, g: Tensor, head_dim: int) -> Tensor:
    """``∂L/∂W = Σ_ij g_ij x_i x_jᵀ / sqrt(d_h) = Xᵀ G X / sqrt(d_h)``, shape (..., d, d). Chapter 3.

    ``x``: (..., n, d); ``g``: (..., n, n) from :func:`softmax_backward`. Rows index the query side (x_i), columns
    the key side (x_j), as for W_qk itself.
    """
    x = _check_tokens(x)
    _check_head_dim(head_dim)
    n = x.shape[-2]
    if g.shape[-2:] != (n, n):
        raise ValueError(f"`g` must have shape (..., n, n) = (..., {n}, {n}) to match `x` (..., n={n}, d); got "
                         f"{tuple(g.shape)}.")
    return x.transpose(-1, -2) @ g.to(x.dtype) @ x / math.sqrt(head_dim)


def factor_gradients(grad_w: Tensor, w_q: Tensor, w_k: Tensor) -> tuple[Tensor, Tensor]:
    """``(∂L/∂W_Q, ∂L/∂W_K) = (G W_K, Gᵀ W_Q)`` for ``W = W_Q W_Kᵀ`` with G = ∂L/∂W (..., d, d). Chapter 3.

    ``w_q``, ``w_k``: (..., d, d_h), the convention q = W_Qᵀ x (torch's ``nn.Linear.weight`` is W_Qᵀ).
    """
    if w_q.shape != w_k.shape or w_q.ndim < 2:
        raise ValueError(f"`w_q` and `w_k` must have the same shape (..., d, d_h); got {tuple(w_q.shape)} and "
                         f"{tuple(w_k.shape)}.")
    d = w_q.shape[-2]
    if grad_w.shape[-2:] != (d, d):
        raise ValueError(f"`grad_w` must have shape (..., d, d) = (..., {d}, {d}) to match `w_q` (..., d={d}, d_h); "
                         f"got {tuple(grad_w.shape)}.")
    return grad_w @ w_k, grad_w.transpose(-1, -2) @ w_q


@dataclass
class GradientSplit:
    """``∂L/∂W`` and its diagonal / paired / unpaired parts, each (..., d, d); ``total`` is their sum. Chapter 3."""

    total: Tensor
    diagonal: Tensor
    paired: Tensor
    unpaired: Tensor

    PARTS = ("total", "diagonal", "paired", "unpaired")

    def energies(self) -> dict[str, Energies]:
        """``‖·_s‖², ‖·_n‖², ‖·‖²`` of each part (floats, or arrays over the batch axes), via :func:`energies`."""
        return {p: energies(getattr(self, p)) for p in self.PARTS}

    def table(self) -> pandas.DataFrame:
        """Tidy energies: one row per (part, batch index) with symmetric, skew, total and share of ‖∂L/∂W‖²."""
        import pandas as pd

        en = self.energies()
        grand = np.asarray(en["total"].total, dtype=float)
        rows = []
        for part, e in en.items():
            sym, skew, tot = (np.asarray(v, dtype=float) for v in e)
            for idx in np.ndindex(sym.shape):
                rows.append({"part": part, "index": idx if idx else None, "symmetric": sym[idx],
                             "skew": skew[idx], "total": tot[idx],
                             "symmetry": (sym[idx] - skew[idx]) / tot[idx] if tot[idx] > 0 else np.nan,
                             "share_of_gradient": tot[idx] / grand[idx] if grand[idx] > 0 else np.nan})
        return pd.DataFrame(rows)


def split_gradient(x: Tensor, g: Tensor, mask: Tensor, head_dim: int, by: str = "mask",
                   rtol: float = DEFAULT_RTOL) -> GradientSplit:
    """Split ``Σ g_ij x_i x_jᵀ / sqrt(d_h)`` into diagonal / paired / unpaired parts. Chapter 3.

    ``by="mask"``: the classes of :func:`pair_classes` of ``mask``; ``by="gradient"``: the classes of
    :func:`effective_pair_classes` of ``g`` (paired = both g_ij and g_ji non-zero, relative tolerance ``rtol``).
    ``x``: (..., n, d); ``g``: (..., n, n); ``mask``: bool (n, n) or (..., n, n). Entries of g outside the mask
    must be 0 (they are, when g comes from :func:`softmax_backward`); otherwise a ValueError says so.
    """
    if by not in ("mask", "gradient"):
        raise ValueError(f"`by` must be 'mask' or 'gradient'; got {by!r}.")
    x = _check_tokens(x)
    n = x.shape[-2]
    mask = _check_mask(mask, n=n)
    if g.shape[-2:] != (n, n):
        raise ValueError(f"`g` must have shape (..., {n}, {n}) to match `x`; got {tuple(g.shape)}.")
    outside = (g.abs() * (~mask)).amax() if g.numel() else 0.0
    if float(outside) > 0:
        raise ValueError("`g` is nonzero on pairs that `mask` does not allow (largest |g| there: "
                         f"{float(outside):.3g}). Pass the mask that produced g, or zero g outside it.")
    cls = pair_classes(mask) if by == "mask" else effective_pair_classes(g, rtol)
    parts = [rank1_gradient(x, g * m.to(g.dtype), head_dim) for m in cls]
    return GradientSplit(parts[0] + parts[1] + parts[2], *parts)


def one_step_gradient(x: Tensor, w_qk: Tensor, head_dim: int, objective: str, targets: Tensor,
                      readout: Tensor, positions: Tensor | None = None) -> tuple[GradientSplit, Tensor]:
    """One-step ``∂L/∂W`` of a minimal one-layer model on one sequence, split by the mask. Chapter 3.

    The model: attention with identity values, ``o_i = Σ_j P_ij x_j``, read out through ``readout`` (V, d)
    (tied input embeddings) into ``logits_i = E o_i``; cross-entropy against ``targets``.

    * ``objective="causal"``: causal mask; position i predicts ``targets[i + 1]`` (next token), i < n − 1.
    * ``objective="mlm"``: bidirectional mask; the positions in ``positions`` (bool (n,), already replaced by the
      mask token in ``x``) predict ``targets`` there (masked-token reconstruction).

    ``x``: (n, d); ``w_qk``: (..., d, d), e.g. one matrix per head, each head an independent one-head model.
    Returns ``(split, g)`` with split tensors (..., d, d) and g (..., n, n).
    """
    x = _check_tokens(x)
    n = x.shape[-2]
    targets = torch.as_tensor(targets)
    if targets.shape != (n,):
        raise ValueError(f"`targets` must be token ids of shape (n,) = ({n},); got {tuple(targets.shape)}.")
    if readout.ndim != 2 or readout.shape[1] != x.shape[-1]:
        raise ValueError(f"`readout` must have shape (vocab, d={x.shape[-1]}); got {tuple(readout.shape)}.")
    if objective == "causal":
        mask = causal_mask(n, device=x.device)
        rows, tgt = torch.arange(n - 1), targets[1:]
    elif objective == "mlm":
        if positions is None or positions.dtype != torch.bool or positions.shape != (n,) or not positions.any():
            raise ValueError("objective='mlm' needs `positions`: a bool tensor of shape (n,) with at least one True "
                             "(the masked positions to reconstruct).")
        mask = bidirectional_mask(n, device=x.device)
        rows, tgt = torch.nonzero(positions).squeeze(1), targets[positions]
    else:
        raise ValueError(f"`objective` must be 'causal' or 'mlm'; got {objective!r}.")
    batch = w_qk.shape[:-2]

    def loss_of_probs(p: Tensor) -> Tensor:
        logits = (p[..., rows, :] @ x) @ readout.T  # (..., rows, V)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tgt.expand(*batch, len(tgt)).reshape(-1), reduction="sum")

    _, g = logit_gradient(x, w_qk, mask, head_dim, loss_of_probs)
    return split_gradient(x, g, mask, head_dim), g


def token_side_weights(g: Tensor) -> tuple[Tensor, Tensor]:
    """``(key_weights, query_weights)`` of the logit gradients ``g`` (..., n, n), each (..., n). Chapter 3.

    ``key_weights[j] = Σ_i g_ij²``: how much gradient token j receives in the key slot (column j of G);
    ``query_weights[i] = Σ_j g_ij²``: in the query slot (row i). Both sum to Σ_ij g_ij². In
    ``Σ g_ij x_i x_jᵀ`` a token with a large key weight shapes the columns (key side) of the gradient.
    """
    if not isinstance(g, Tensor) or g.ndim < 2 or g.shape[-1] != g.shape[-2]:
        raise ValueError(f"`g` must be a torch tensor of shape (..., n, n); got {tuple(getattr(g, 'shape', ()))}.")
    e = g.double() ** 2
    return e.sum(dim=-2), e.sum(dim=-1)


def expected_side_weights(n: int, causal: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Expected key and query weights (:func:`token_side_weights`) under the chapter's assumptions. Chapter 3.

    Assumptions: (E1) every query attends uniformly to its allowed keys, P_ij = 1/k_i with k_i = i (causal, 1-based)
    or n (bidirectional); (E2) the upstream gradients ∂L/∂P_ij are independent with mean 0 and variance 1. Then
    E g_ij² = (k_i − 1)/k_i³ on allowed pairs, and the weights are its column and row sums. Returns two arrays
    (n,) in units of the variance in (E2).
    """
    _check_length(n)
    i = np.arange(1, n + 1, dtype=float)
    k = i if causal else np.full(n, float(n))
    e_row = (k - 1) / k**3  # E g_ij² for each allowed key of query i
    allowed = np.tril(np.ones((n, n))) if causal else np.ones((n, n))
    e = allowed * e_row[:, None]
    return e.sum(axis=0), e.sum(axis=1)


def orthogonal_token_symmetry(g: Tensor, sq_norms: Tensor) -> Tensor:
    """Symmetry score that ``Σ g_ij x_i x_jᵀ`` has when the tokens are mutually orthogonal. Chapter 3.

    With ``n_i = ‖x_i‖²`` (``sq_norms``, shape (..., n)) and ``x_iᵀ x_k = 0`` for i ≠ k:

        s = (Σ_i g_ii² n_i² + Σ_{i≠j} g_ij g_ji n_i n_j) / Σ_ij g_ij² n_i n_j .

    This is the chapter's Proposition: exact under orthogonality, and a prediction to compare with real tokens
    (which are not orthogonal). Returns shape (...).
    """
    w = sq_norms[..., :, None] * sq_norms[..., None, :]
    num = (g * g.transpose(-1, -2) * w).sum(dim=(-1, -2))
    den = (g * g * w).sum(dim=(-1, -2))
    return num / den


# ========================================================================================= validation
def _check_rtol(rtol: float) -> None:
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 0 <= rtol < 1:
        raise ValueError(f"`rtol` must be a number in [0, 1) (relative to the largest |g|); got {rtol!r}.")


def _check_length(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"`n` (sequence length) must be an int >= 1; got {n!r}.")


def _check_head_dim(head_dim: int) -> None:
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1:
        raise ValueError(f"`head_dim` must be an int >= 1 (d_h, the 1/sqrt(d_h) in the logits); got {head_dim!r}.")


def _check_tokens(x: Tensor) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"`x` must be a torch tensor of shape (..., n, d); got {type(x).__name__}. "
                        "Convert with torch.as_tensor(x, dtype=torch.float64).")
    if x.ndim < 2 or not x.is_floating_point():
        raise ValueError(f"`x` must be a floating tensor of shape (..., n, d) (tokens as rows); got shape "
                         f"{tuple(x.shape)} and dtype {x.dtype}.")
    return x


def _check_x_w(x: Tensor, w_qk: Tensor) -> tuple[Tensor, Tensor]:
    x = _check_tokens(x)
    if not isinstance(w_qk, Tensor) or w_qk.ndim < 2 or w_qk.shape[-1] != w_qk.shape[-2]:
        raise ValueError(f"`w_qk` must be a torch tensor of shape (..., d, d); got "
                         f"{tuple(getattr(w_qk, 'shape', ()))}. From factors use w_q @ w_k.T.")
    if w_qk.shape[-1] != x.shape[-1]:
        raise ValueError(f"`w_qk` is {w_qk.shape[-1]} x {w_qk.shape[-1]} but the tokens `x` have d={x.shape[-1]}; "
                         "they must match (W_qk is d_model x d_model).")
    return x, w_qk


def _check_mask(mask: Tensor, n: int | None = None) -> Tensor:
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"`mask` must be a bool torch tensor (..., n, n), True = allowed; got "
                        f"{type(mask).__name__} {getattr(mask, 'dtype', '')}. Build one with causal_mask(n), "
                        "bidirectional_mask(n), sliding_window_mask(n, w) or random_mask(n).")
    if mask.ndim < 2 or mask.shape[-1] != mask.shape[-2] or (n is not None and mask.shape[-1] != n):
        want = f"(..., {n}, {n})" if n is not None else "(..., n, n)"
        raise ValueError(f"`mask` must have shape {want} (one row per query, one column per key); got "
                         f"{tuple(mask.shape)}.")
    return mask


def _check_rows_nonempty(mask: Tensor) -> None:
    empty = ~mask.any(dim=-1)
    if bool(empty.any()):
        where = tuple(int(i) for i in torch.nonzero(empty)[0])
        raise ValueError(f"`mask` allows no key for a query (first at index {where}): the softmax is undefined "
                         "there. Allow at least the diagonal (each token attends to itself).")
