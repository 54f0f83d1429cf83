"""Symmetry and directionality scores of W_qk, dense and factored, batched.

Conventions (the book's Notation page; chapter 2, "Two scores, two axes"):

* ``M`` has shape (..., d, d); rows index query-side input dimensions, columns key-side ones.
* Symmetry score ``s(M) = (‖M_s‖² − ‖M_n‖²)/‖M‖² = tr(M M)/‖M‖²`` in [−1, 1]: +1 symmetric, −1 skew.
  The paper plots ``2‖M_s‖²/‖M‖² − 1``, the same number. A factor 2 in front of the difference, as in some statements
  of the score, is a slip: its range would be [−2, 2].
* Directionality score: row norms ``r_i = ‖M[i, :]‖``, column norms ``c_j = ‖M[:, j]‖``, thresholds
  ``τ = mean + num_std · std`` (unbiased std, ddof=1), excesses ``E = Σ_{x > τ} (x − τ)``, and
  ``d(M) = (E_r − E_c)/(E_r + E_c)`` in [−1, 1], 0 when ``E_r + E_c = 0``.
  **Negative means a few key-side (column) directions dominate** — where decoder-only models sit.
* The factored forms take ``M = A Bᵀ`` with ``A, B`` of shape (..., d, r) and never build the d × d matrix:
  cost O(d r²) instead of O(d² r), memory O(d r + r²) instead of O(d²).
* All arithmetic is float64, whatever the input dtype (bf16, fp16, dequantised GGUF...).

A single matrix gives a Python float; a batch gives a float64 numpy array of the batch shape.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch

from ._validation import (
    ArrayLike,
    check_factors,
    check_nonzero,
    check_num_std,
    check_square,
    rescale_extremes,
    to_float64,
)

__all__ = [
    "LayerScores",
    "Scores",
    "directionality_from_norms",
    "directionality_score",
    "directionality_score_factored",
    "layer_scores",
    "resolve_device",
    "scores_factored",
    "symmetry_score",
    "symmetry_score_factored",
]


class Scores(NamedTuple):
    """Both scores of one matrix (floats) or of a batch (arrays of the batch shape)."""

    symmetry: np.ndarray | float
    directionality: np.ndarray | float


# ----------------------------------------------------------------------------------------------- dense
def symmetry_score(M: ArrayLike) -> np.ndarray | float:
    """Symmetry score ``tr(M M)/‖M‖²`` of ``M`` (..., d, d) in [−1, 1]. Chapter 2."""
    arr = _square(M)
    total = np.einsum("...ij,...ij->...", arr, arr)
    check_nonzero(total, "M")
    cross = np.einsum("...ij,...ji->...", arr, arr)
    return _out(cross / total)


def directionality_score(M: ArrayLike, num_std: float = 2.0) -> np.ndarray | float:
    """Directionality score of ``M`` (..., d, d) in [−1, 1]; negative = column (key-side) dominated. Chapter 2."""
    _check_num_std(num_std)
    arr = _square(M)
    rows = np.sqrt(np.einsum("...ij,...ij->...i", arr, arr))
    cols = np.sqrt(np.einsum("...ij,...ij->...j", arr, arr))
    return _out(directionality_from_norms(rows, cols, num_std))


# -------------------------------------------------------------------------------------------- factored
def symmetry_score_factored(A: ArrayLike, B: ArrayLike) -> np.ndarray | float:
    """Symmetry score of ``M = A Bᵀ`` from ``A, B`` (..., d, r), without forming M.

    ``tr(M M) = tr((BᵀA)(BᵀA))`` and ``‖M‖² = tr((AᵀA)(BᵀB))``. Chapter 2, "The factored formulas".
    """
    a, b = _factors(A, B)
    return _out(_symmetry_from_factors(a, b, *_grams(a, b)))


def directionality_score_factored(A: ArrayLike, B: ArrayLike, num_std: float = 2.0) -> np.ndarray | float:
    """Directionality score of ``M = A Bᵀ`` from ``A, B`` (..., d, r), without forming M.

    Row norms² are ``diag(A (BᵀB) Aᵀ)`` and column norms² ``diag(B (AᵀA) Bᵀ)``. Chapter 2.
    """
    _check_num_std(num_std)
    a, b = _factors(A, B)
    return _out(_directionality_from_factors(a, b, *_grams(a, b), num_std))


def scores_factored(A: ArrayLike, B: ArrayLike, num_std: float = 2.0) -> Scores:
    """Both scores of ``M = A Bᵀ`` sharing the Gram matrices (what the survey uses). Chapter 2."""
    _check_num_std(num_std)
    a, b = _factors(A, B)
    gram_a, gram_b = _grams(a, b)
    sym = _symmetry_from_factors(a, b, gram_a, gram_b)
    return Scores(_out(sym), _out(_directionality_from_factors(a, b, gram_a, gram_b, num_std)))


# ------------------------------------------------------------------------------------------- internals
def directionality_from_norms(rows: np.ndarray, cols: np.ndarray, num_std: float = 2.0) -> np.ndarray:
    """Directionality from row norms and column norms, both (..., d). Returns an array of shape (...)."""
    excess_rows = _outlier_excess(np.asarray(rows, dtype=np.float64), num_std)
    excess_cols = _outlier_excess(np.asarray(cols, dtype=np.float64), num_std)
    total = excess_rows + excess_cols
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(total > 0, (excess_rows - excess_cols) / np.where(total > 0, total, 1.0), 0.0)
    return score


def _outlier_excess(norms: np.ndarray, num_std: float) -> np.ndarray:
    """``Σ_{x > τ} (x − τ)`` over the last axis with ``τ = mean + num_std · std(ddof=1)``."""
    threshold = norms.mean(axis=-1) + num_std * norms.std(axis=-1, ddof=1)
    return np.clip(norms - threshold[..., None], 0.0, None).sum(axis=-1)


def _grams(a: np.ndarray, b: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)  # zero-copy; torch's batched BLAS is much faster than numpy's
    return ta.mT @ ta, tb.mT @ tb


def _symmetry_from_factors(a, b, gram_a, gram_b) -> np.ndarray:
    total = torch.einsum("...rs,...rs->...", gram_a, gram_b).numpy()  # tr(G_A G_B), both Grams symmetric
    check_nonzero(total, "A @ B^T")
    core = torch.from_numpy(b).mT @ torch.from_numpy(a)  # (..., r, r) = BᵀA
    cross = torch.einsum("...rs,...sr->...", core, core).numpy()  # tr((BᵀA)(BᵀA)) = tr(M M)
    return cross / total


def _directionality_from_factors(a, b, gram_a, gram_b, num_std: float) -> np.ndarray:
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    row_sq = torch.einsum("...ir,...ir->...i", ta @ gram_b, ta).numpy()
    col_sq = torch.einsum("...jr,...jr->...j", tb @ gram_a, tb).numpy()
    # Round-off can make a zero row's squared norm a tiny negative number; clip before the square root.
    return directionality_from_norms(np.sqrt(np.clip(row_sq, 0, None)), np.sqrt(np.clip(col_sq, 0, None)),
                                     num_std)


def _square(M: ArrayLike) -> np.ndarray:
    arr = to_float64(M, "M")
    check_square(arr, "M")
    # Scale invariance: huge (~1e155) or tiny entries would overflow/underflow when squared; rescale them exactly.
    return rescale_extremes(arr)


def _factors(A: ArrayLike, B: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a, b = to_float64(A, "A"), to_float64(B, "B")
    check_factors(a, b)
    # Scale invariance: A and B are rescaled separately (M = A Bᵀ only changes by a positive factor), so that the
    # fourth powers in tr((AᵀA)(BᵀB)) stay finite for huge entries and nonzero for tiny ones.
    return rescale_extremes(a), rescale_extremes(b)


def _check_num_std(num_std: float) -> None:
    check_num_std(num_std)  # any real scalar (numpy's included), finite and >= 0


def _out(v: np.ndarray) -> np.ndarray | float:
    return float(v) if np.ndim(v) == 0 else np.asarray(v, dtype=np.float64)


# ------------------------------------------------------------------------------------ attention layers
class LayerScores(NamedTuple):
    """Scores of one attention layer (or of a stack of layers).

    ``heads``: per query head, arrays of shape (..., n_heads), or None when not requested.
    ``layer``: of the layer matrix ``M_layer = Σ_h W_Q^h W_K^{g(h)ᵀ}``, arrays of shape (...) (floats for one layer),
    or None when not requested.
    """

    heads: Scores | None
    layer: Scores | None


def resolve_device(device: Any = None) -> torch.device:
    """``None`` → CPU; otherwise ``torch.device(device)``, refusing a CUDA (or other) device that is not available.

    Every number is float64 on every device; on CPU the result is the same as with the default.
    """
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"`device` must be 'cpu', 'cuda', 'cuda:N' or a torch.device; got {device!r} ({e}).") from e
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"`device` {device!r} was requested but CUDA is not available here (torch "
                             f"{torch.__version__}, built {'with' if torch.version.cuda else 'without'} CUDA). "
                             "Use device='cpu' (the default), or run where `torch.cuda.is_available()` is True.")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"`device` {device!r} does not exist: this machine has "
                             f"{torch.cuda.device_count()} CUDA device(s).")
    elif dev.type != "cpu":
        raise ValueError(f"`device` must be 'cpu' or a CUDA device ('cuda', 'cuda:N'); got {device!r}.")
    return dev


def layer_scores(wq: ArrayLike, wk_kv: ArrayLike, num_std: float = 2.0, *, heads: bool = True,
                 layer: bool = True, device: Any = None) -> LayerScores:
    """Scores of every query head of an attention layer and of the layer matrix, in a few large float64 products.

    ``wq``: (..., n_heads, d, head_dim), ``wk_kv``: (..., n_kv_heads, d, head_dim) with KV heads *not* expanded;
    query head ``h`` reads KV head ``g(h) = h // (n_heads // n_kv_heads)``, so ``W_qk^h = wq[h] @ wk_kv[g(h)].T``.
    Leading axes (several layers) are batched. Any floating dtype (bf16, fp16, float32...) on any device: the
    weights are converted to float64 once, a few KV groups at a time, into a reused buffer (inputs are never
    modified). ``device``: where to compute (default: where ``wq`` is, CPU for numpy input); the scores come back
    as float64 numpy arrays (floats for one layer's ``layer`` scores).

    Cost per query head ``h`` with ``A = W_Q^h``, ``B = W_K^{g(h)}`` (d × r, r = head_dim): four products of
    d·r² multiply-adds plus one per KV group (chapter 2, "The factored formulas"):

    * ``AᵀA`` per query head, ``BᵀB`` once per KV head;
    * ``BᵀA`` for all the query heads of a group in one product: ``‖M‖² = ⟨AᵀA, BᵀB⟩``, ``tr(M M) = tr((BᵀA)²)``;
    * row norms² ``diag(A (BᵀB) Aᵀ)`` and column norms² ``diag(B (AᵀA) Bᵀ)``.

    K is never expanded to the query heads. The layer matrix has factors of rank ``R = n_kv_heads·head_dim``; it is
    scored with the same factored formulas when that is cheaper (``5R < d``) and by forming the d × d matrix
    otherwise (about 2d²R multiply-adds against 10dR²). Both agree with the dense definitions to round-off (tested
    to 1e-10).
    """
    _check_num_std(num_std)
    dev = resolve_device(device) if device is not None else None
    tq, tk = _as_tensor(wq, "wq", dev), _as_tensor(wk_kv, "wk_kv", dev)
    if tq.ndim < 3 or tk.ndim != tq.ndim or tq.shape[:-3] != tk.shape[:-3] or tq.shape[-2:] != tk.shape[-2:]:
        raise ValueError(f"`wq` and `wk_kv` must have shapes (..., n_heads, d, head_dim) and (..., n_kv_heads, d, "
                         f"head_dim) with the same leading axes, d and head_dim; got wq{tuple(tq.shape)} and "
                         f"wk_kv{tuple(tk.shape)}.")
    n_heads, n_kv, d, r = tq.shape[-3], tk.shape[-3], tq.shape[-2], tq.shape[-1]
    if n_kv < 1 or n_heads % n_kv:
        raise ValueError(f"`wq` has {n_heads} query heads and `wk_kv` {n_kv} KV heads; n_heads must be a multiple of "
                         "n_kv_heads (grouped-query attention).")
    if d < 2 or r < 1:
        raise ValueError(f"the scores need d >= 2 and head_dim >= 1; got d={d}, head_dim={r}.")
    tq, tk = _rescale_extreme(tq), _rescale_extreme(tk)
    batch = tq.shape[:-3]
    # Wᵀ per head, (L·K, G, r, d) and (L·K, r, d): free views for QKLayer's layout, stored dtype kept until converted
    at = tq.reshape(-1, n_kv, n_heads // n_kv, d, r).mT.reshape(-1, n_heads // n_kv, r, d)
    bt = tk.reshape(-1, d, r).mT
    sym, dirn, layer_out = _stream_groups(at, bt, num_std, heads, layer)
    head_scores = layer_score = None
    if heads:
        head_scores = Scores(_out(sym.reshape(*batch, n_heads).cpu().numpy()),
                             _out(dirn.reshape(*batch, n_heads).cpu().numpy()))
    if layer:
        n_layers = at.shape[0] // n_kv
        lsym, ldirn = _layer_matrix_scores(layer_out[0].reshape(n_layers, n_kv * r, d),
                                           layer_out[1].reshape(n_layers, n_kv * r, d), num_std)
        layer_score = Scores(_out(lsym.reshape(batch).cpu().numpy()), _out(ldirn.reshape(batch).cpu().numpy()))
    return LayerScores(head_scores, layer_score)


#: Bytes of float64 per chunk of KV groups (the conversion buffer and the product buffer each hold this much).
CHUNK_BYTES = 1 << 23


def _as_tensor(x: ArrayLike, name: str, device: torch.device | None) -> torch.Tensor:
    """``x`` as a detached tensor on ``device``, in its own floating dtype (numpy: zero-copy)."""
    t = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))
    if not t.is_floating_point():
        kind = "complex" if t.is_complex() else ("bool" if t.dtype == torch.bool else "integer")
        raise TypeError(f"`{name}` has {kind} dtype {t.dtype}; the scores need real floating-point weights. Convert "
                        f"them first, e.g. `{name}.double()`.")
    t = t.detach()
    if device is not None and t.device != device:
        t = t.to(device)  # move in the stored dtype (bf16 moves a quarter of the bytes of float64), convert there
    return t


def _rescale_extreme(t: torch.Tensor) -> torch.Tensor:
    """``t`` times a power of two when its largest magnitude lies outside [2⁻⁶⁴, 2⁶⁴] (else ``t`` itself).

    One factor for the whole stack: every head score and the layer score are invariant to a positive factor on all
    of ``wq`` (or all of ``wk_kv``), and the products below square and multiply entries, so weights near 1e155
    would overflow and near 1e-160 underflow. Non-finite entries are left for the finiteness check to name.
    """
    if t.numel() == 0:
        return t
    low, high = torch.aminmax(t)
    peak = max(float(high), -float(low))
    if not math.isfinite(peak) or peak == 0:
        return t
    exponent = math.frexp(peak)[1]
    if abs(exponent) <= 64:
        return t
    return torch.ldexp(t.to(torch.float64), torch.tensor(float(-exponent), dtype=torch.float64, device=t.device))


def _transposed_float64(x: ArrayLike, name: str, device: torch.device | None) -> torch.Tensor:
    """``x`` (..., d, r) as a contiguous float64 ``xᵀ`` (..., r, d); no copy when it already is one."""
    t = _as_tensor(x, name, device).mT
    if t.dtype == torch.float64 and t.is_contiguous():
        return t
    return torch.empty(t.shape, dtype=torch.float64, device=t.device).copy_(t)


class _Buffers:
    """Float64 work buffers reused from one chunk (and one call) to the next: a fresh 8 MB tensor per product
    costs page faults and zeroing; one thread-local set per device is kept."""

    _local = None

    @classmethod
    def get(cls, name: str, numel: int, device: torch.device) -> torch.Tensor:
        import threading

        if cls._local is None:
            cls._local = threading.local()
        store = cls._local.__dict__.setdefault("buffers", {})
        key = (name, str(device))
        buf = store.get(key)
        if buf is None or buf.numel() < numel:
            buf = store[key] = torch.empty(numel, dtype=torch.float64, device=device)
        return buf[:numel]


def _float64(x: torch.Tensor, name: str) -> torch.Tensor:
    """Contiguous float64 ``x``: the tensor itself when it is one, else a copy into a reused buffer."""
    if x.dtype == torch.float64 and x.is_contiguous():
        return x
    return _Buffers.get(name, x.numel(), x.device).view(x.shape).copy_(x)


def _stream_groups(at: torch.Tensor, bt: torch.Tensor, num_std: float, heads: bool, layer: bool):
    """Per-head scores (and the layer factors) from ``at`` (N, G, r, d) = W_Qᵀ per query head, grouped by KV head,
    and ``bt`` (N, r, d) = W_Kᵀ per KV head, N = layers × KV heads; a few KV groups at a time.

    Returns symmetry and directionality of shape (N, G) (None when ``heads`` is False) and, when ``layer``, the
    float64 layer factors ``(Σ_{h∈g} W_Q^hᵀ, W_K^gᵀ)`` of shapes (N, r, d) each.
    """
    N, G, r, d = at.shape
    dev = at.device
    chunk = max(1, CHUNK_BYTES // (8 * G * r * d))
    sym = dirn = row_sq = col_sq = None
    if heads:
        sym = torch.empty(N, G, dtype=torch.float64, device=dev)
        row_sq = torch.empty(N, G, d, dtype=torch.float64, device=dev)
        col_sq = torch.empty(N, G, d, dtype=torch.float64, device=dev)
    a_sum = torch.empty(N, r, d, dtype=torch.float64, device=dev) if layer else None
    b_all = torch.empty(N, r, d, dtype=torch.float64, device=dev) if layer else None
    for s in range(0, N, chunk):
        e = min(N, s + chunk)
        c = e - s
        a, b = _float64(at[s:e], "a"), _float64(bt[s:e], "b")  # the one float64 conversion
        if layer:
            torch.sum(a, dim=1, out=a_sum[s:e])
            b_all[s:e] = b
        if not heads:
            continue
        gram_a = a @ a.mT  # (c, G, r, r) = AᵀA per query head
        gram_b = b @ b.mT  # (c, r, r)    = BᵀB once per KV head
        _check_finite_grams(torch.diagonal(gram_a, dim1=-2, dim2=-1).reshape(c * G, r), "wq", s * G)
        _check_finite_grams(torch.diagonal(gram_b, dim1=-2, dim2=-1), "wk_kv", s)
        total = (gram_a * gram_b.unsqueeze(1)).sum(dim=(-2, -1))  # ‖M‖² = ⟨AᵀA, BᵀB⟩ (both symmetric)
        if bool((total <= 0).any()):
            first = s * G + int(torch.nonzero(total.reshape(-1) <= 0)[0])
            raise ValueError(f"query head {first} (counting through the layers) has an all-zero W_qk (‖M‖_F = 0), "
                             "so its symmetry score is undefined. Check that the weights were loaded (a zero matrix "
                             "often means a missing tensor).")
        # BᵀA for the G query heads of a group in one product: (r, d) @ (d, G·r) -> (r, G·r).
        core = (b @ a.reshape(c, G * r, d).mT).reshape(c, r, G, r).transpose(1, 2)  # (c, G, r, r)
        sym[s:e] = (core * core.mT).sum(dim=(-2, -1)) / total  # tr(M M) = ⟨BᵀA, (BᵀA)ᵀ⟩
        # Row norms² of M: diag(A G_B Aᵀ) = Σ_r (G_B Aᵀ) ⊙ Aᵀ. Column norms²: Σ_r (G_A Bᵀ) ⊙ Bᵀ, where the G heads
        # of a group share Bᵀ, so [G_A1; ...; G_AG] (G·r, r) @ Bᵀ (r, d) is one product per KV head.
        work = _Buffers.get("work", c * G * r * d, dev)
        prod = torch.bmm(gram_b.unsqueeze(1).expand(c, G, r, r).reshape(c * G, r, r), a.view(c * G, r, d),
                         out=work.view(c * G, r, d))
        torch.sum(prod.view(c, G, r, d).mul_(a), dim=-2, out=row_sq[s:e])
        prod = torch.bmm(gram_a.view(c, G * r, r), b, out=work.view(c, G * r, d))
        torch.sum(prod.view(c, G, r, d).mul_(b.unsqueeze(1)), dim=-2, out=col_sq[s:e])
    if heads:
        dirn = _directionality_torch(row_sq, col_sq, num_std)
    return sym, dirn, (a_sum, b_all)


def _check_finite_grams(diag: torch.Tensor, name: str, offset: int = 0) -> None:
    """Each Gram diagonal entry is a sum of squares of one weight column: it is finite iff that column is."""
    bad = ~torch.isfinite(diag).all(dim=-1)
    if bool(bad.any()):
        first = offset + int(torch.nonzero(bad)[0])
        raise ValueError(f"`{name}` contains NaN or Inf entries (first in head {first}, counting through the "
                         "layers); the scores are undefined. Check the weights (a diverged run or a failed "
                         "dequantisation) or drop the affected heads.")


def _layer_matrix_scores(a_t: torch.Tensor, b_t: torch.Tensor, num_std: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores of ``M = A Bᵀ`` from float64 ``a_t = Aᵀ``, ``b_t = Bᵀ`` of shape (L, R, d): the layer matrix, whose
    factors are the grouped sums ``Σ_{h∈g} W_Q^h`` and ``W_K^g`` side by side (rank R = n_kv_heads·head_dim).
    Factored when cheaper (5R < d), else by forming M one layer at a time. Returns two (L,) tensors."""
    L, R, d = a_t.shape
    if d > 5 * R:
        sym, dirn, _ = _stream_groups(a_t.unsqueeze(1), b_t, num_std, heads=True, layer=False)
        return sym.reshape(L), dirn.reshape(L)
    sym = torch.empty(L, dtype=torch.float64, device=a_t.device)
    row_sq = torch.empty(L, d, dtype=torch.float64, device=a_t.device)
    col_sq = torch.empty(L, d, dtype=torch.float64, device=a_t.device)
    block = max(1, CHUNK_BYTES // (8 * d))
    for i in range(L):
        m = a_t[i].mT @ b_t[i]  # (d, d): A Bᵀ
        row_sq[i] = torch.linalg.vector_norm(m, dim=-1).square_()
        col_sq[i] = torch.linalg.vector_norm(m, dim=-2).square_()
        total = row_sq[i].sum()
        if not bool(total > 0) or not bool(torch.isfinite(total)):
            where = f" (entry {i} of the stack)" if L > 1 else ""
            raise ValueError(f"the layer matrix{where} is all zero or has NaN/Inf entries; its scores are "
                             "undefined. Check that the weights were loaded.")
        cross = sum((m[j:j + block] * m[:, j:j + block].mT).sum() for j in range(0, d, block))  # tr(M M)
        sym[i] = cross / total
    return sym, _directionality_torch(row_sq, col_sq, num_std)


def _directionality_torch(row_sq: torch.Tensor, col_sq: torch.Tensor, num_std: float) -> torch.Tensor:
    """:func:`directionality_from_norms` from squared norms (..., d), in torch on their device."""
    # Round-off can make a zero row's squared norm a tiny negative number; clip before the square root.
    excess_rows = _outlier_excess_torch(row_sq.clamp_(min=0).sqrt_(), num_std)
    excess_cols = _outlier_excess_torch(col_sq.clamp_(min=0).sqrt_(), num_std)
    total = excess_rows + excess_cols
    safe = torch.where(total > 0, total, torch.ones_like(total))
    return torch.where(total > 0, (excess_rows - excess_cols) / safe, torch.zeros_like(total))


def _outlier_excess_torch(norms: torch.Tensor, num_std: float) -> torch.Tensor:
    threshold = norms.mean(dim=-1) + num_std * norms.std(dim=-1, correction=1)
    return (norms - threshold.unsqueeze(-1)).clamp_(min=0).sum(dim=-1)
