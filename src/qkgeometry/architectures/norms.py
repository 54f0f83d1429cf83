"""Which bilinear form: folding the gains of QK-norm and of the normalisation before attention into the factors
(chapter 4, "Which bilinear form"; conventions on the book's Notation page)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from .._arrays import as_float64, cast_like, einsum

if TYPE_CHECKING:  # pragma: no cover
    from .registry import AttentionBlock

QKNorm = Literal["folded", "raw"]


def fold_qk_norm(wq: Any, wk: Any, gq: Any, gk: Any):
    """Fold QK-norm gains into the head factors: ``W_Q^h ← W_Q^h diag(g_q^h)``, ``W_K^g ← W_K^g diag(g_k^g)``.

    With QK-norm the logit between tokens i and j of head h is

        (g_q ⊙ q_i / rms(q_i)) · (g_k ⊙ k_j / rms(k_j)) · scale,   q_i = W_Qᵀ x_i,  k_j = W_Kᵀ x_j,

    and ``g_q ⊙ (W_Qᵀ x) = (W_Q diag(g_q))ᵀ x``. So the gains are linear and fold into the factors, while the
    normalisations ``1/rms(q_i)`` and ``1/rms(k_j)`` are one positive scalar per query token and one per key token:
    they rescale whole rows and columns of the logit matrix and are not part of a fixed bilinear form. The folded
    ``W_qk = W_Q diag(g_q g_k) W_Kᵀ`` is therefore the bilinear form the model applies to x, up to those per-token
    scalars; the raw form ignores the gains.

    ``wq``: (n_heads, d, head_dim), ``wk``: (n_kv_heads, d, head_dim); ``gq``/``gk`` of length head_dim (shared by the
    heads) or n_heads·head_dim / n_kv_heads·head_dim (one gain vector per head).
    """
    hd = wq.shape[-1]
    return wq * cast_like(gq, wq).reshape(-1, 1, hd), wk * cast_like(gk, wk).reshape(-1, 1, hd)


def qk_norm_gains(block: AttentionBlock, get: Callable[[str], Any], i: int):
    """The (g_q, g_k) gains of layer ``i`` of a QK-norm block, offset included (Gemma: 1 + weight)."""
    return (block.norm_offset + as_float64(get(block.q_norm.format(i=i))),
            block.norm_offset + as_float64(get(block.k_norm.format(i=i))))


InputNorm = Literal["raw", "folded"]


def input_norm_names(block: AttentionBlock, i: int) -> tuple[str, str]:
    """Names of the (query-side, key-side) input-norm gains of layer ``i`` of ``block`` (equal for self-attention).

    Raises ``ValueError`` when the block does not declare them (see :attr:`AttentionBlock.input_norm`).
    """
    if block.input_norm is None:
        raise ValueError(f"the gain of the normalisation before the {block.component} attention is not known")
    q = block.input_norm_first if i == 0 and block.input_norm_first is not None else \
        block.input_norm.format(i=i, prev=i - 1)
    return q, (q if block.input_norm_k is None else block.input_norm_k.format(i=i))


def norm_shift_name(gain_name: str) -> str | None:
    """The name of a LayerNorm's shift β next to its gain γ (``….weight`` -> ``….bias``, ``…/gamma`` -> ``…/beta``)."""
    for gain, shift in ((".weight", ".bias"), ("/gamma", "/beta"), ("weight", "bias")):
        if gain_name.endswith(gain):
            return gain_name[: -len(gain)] + shift
    return None


def fold_input_norm(wq: Any, wk: Any, bq: Any | None, gq: Any, gk: Any, beta_q: Any | None = None):
    """Fold the gains of the normalisation before attention into the factors: ``W_Q ← diag(γ_q) W_Q``,
    ``W_K ← diag(γ_k) W_K``, so that ``W_qk ← diag(γ_q) W_qk diag(γ_k)`` (a congruence when γ_q = γ_k: it keeps
    exact symmetry, but it moves both scores).

    The normalisation maps the residual stream x to ``h = γ ⊙ x̂ + β`` with ``x̂ = (x − mean(x)) / std(x)``
    (LayerNorm) or ``x̂ = x / rms(x)`` (RMSNorm, β = 0). With ``q = W_Qᵀ h + b_q`` the logit is then

        (W_Q'ᵀ x̂_i + b_q')ᵀ (W_K'ᵀ x̂_j + b_k') · scale,   W_Q' = diag(γ_q) W_Q,   b_q' = b_q + W_Qᵀ β_q,

    and likewise on the key side. The folded form is the bilinear form the model applies to the standardised
    vectors x̂; the raw form is the one it applies to h. The shift β is not part of any bilinear form: on the query
    side it moves into the query bias (returned as ``bq``, so the key-only logit term stays exact); on the key side
    it moves into the key bias, whose terms depend on the query token only and cancel in the softmax, so it is not
    kept. ``1/std(x)`` (or ``1/rms(x)``) is one positive scalar per token, outside any fixed bilinear form.

    ``wq``: (n_heads, d, head_dim), ``wk``: (n_kv_heads, d, head_dim), ``bq``: (n_heads, head_dim) or None,
    ``gq``/``gk``/``beta_q``: (d,). Returns ``(wq, wk, bq)`` in float64. Chapter 4 ("Which bilinear form").
    """
    wq, wk = as_float64(wq), as_float64(wk)
    gq, gk = cast_like(gq, wq).reshape(1, -1, 1), cast_like(gk, wk).reshape(1, -1, 1)
    if beta_q is not None:
        shift = einsum("hde,d->he", wq, cast_like(beta_q, wq))
        bq = shift if bq is None else cast_like(bq, wq) + shift
    return wq * gq, wk * gk, bq
