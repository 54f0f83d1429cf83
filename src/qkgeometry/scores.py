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

One kernel computes every score: the dense functions, the factored ones and :func:`layer_scores` all reduce a
matrix (or its factors) to ``tr(M M)``, ``‖M‖²`` and the squared row and column norms, and
:func:`directionality_from_norms` turns norms into the directionality score. The products run in torch, in
float64: numpy input is wrapped without a copy and computed on the CPU, a torch tensor is computed where it lives
(CPU or CUDA). The element-wise steps (outlier excess, exact rescaling) are written against the array API standard
(``array-api-compat``), so they take numpy arrays and torch tensors alike.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np
import torch
from array_api_compat import array_namespace

from ._validation import (
    ArrayLike,
    as_array,
    check_factors,
    check_finite,
    check_nonzero,
    check_num_std,
    check_real_floating,
    check_square,
    is_torch_tensor,
    rescale_extremes,
)

__all__ = [
    "CHUNK_BYTES",
    "LayerScores",
    "Scores",
    "directionality_from_norms",
    "directionality_from_squared_norms",
    "directionality_score",
    "directionality_score_factored",
    "layer_scores",
    "resolve_device",
    "scores_factored",
    "symmetry_score",
    "symmetry_score_factored",
]

#: Bytes of float64 per chunk of work (conversion buffer, product buffer, blocks of a dense matrix).
CHUNK_BYTES = 1 << 23


class Scores(NamedTuple):
    """Both scores of one matrix (floats) or of a batch (arrays of the batch shape)."""

    symmetry: np.ndarray | float
    directionality: np.ndarray | float


# ----------------------------------------------------------------------------------------------- dense
def symmetry_score(M: ArrayLike) -> np.ndarray | float:
    """Symmetry score ``tr(M M)/‖M‖²`` of ``M`` (..., d, d) in [−1, 1]. Chapter 2."""
    m, batch = _dense_input(M)
    norms = _dense_norms(m, columns=False)
    check_nonzero(_host(norms.total).reshape(batch), "M")
    return _out(_host(norms.cross / norms.total).reshape(batch))


def directionality_score(M: ArrayLike, num_std: float = 2.0) -> np.ndarray | float:
    """Directionality score of ``M`` (..., d, d) in [−1, 1]; negative = column (key-side) dominated. Chapter 2."""
    check_num_std(num_std)
    m, batch = _dense_input(M)
    norms = _dense_norms(m, cross=False)
    return _out(_host(directionality_from_squared_norms(norms.row_sq, norms.col_sq, num_std)).reshape(batch))


# -------------------------------------------------------------------------------------------- factored
def symmetry_score_factored(A: ArrayLike, B: ArrayLike) -> np.ndarray | float:
    """Symmetry score of ``M = A Bᵀ`` from ``A, B`` (..., d, r), without forming M.

    ``tr(M M) = tr((BᵀA)(BᵀA))`` and ``‖M‖² = tr((AᵀA)(BᵀB))``. Chapter 2, "The factored formulas".
    """
    return scores_factored(A, B).symmetry


def directionality_score_factored(A: ArrayLike, B: ArrayLike, num_std: float = 2.0) -> np.ndarray | float:
    """Directionality score of ``M = A Bᵀ`` from ``A, B`` (..., d, r), without forming M.

    Row norms² are ``diag(A (BᵀB) Aᵀ)`` and column norms² ``diag(B (AᵀA) Bᵀ)``. Chapter 2.
    """
    return scores_factored(A, B, num_std).directionality


def scores_factored(A: ArrayLike, B: ArrayLike, num_std: float = 2.0) -> Scores:
    """Both scores of ``M = A Bᵀ`` (``A, B``: (..., d, r)) sharing the Gram matrices. Chapter 2."""
    check_num_std(num_std)
    a, b = _input(A, "A"), _input(B, "B")
    check_factors(a, b)
    # Scale invariance: A and B are rescaled separately (M = A Bᵀ only changes by a positive factor), so that the
    # fourth powers in tr((AᵀA)(BᵀB)) stay finite for huge entries and nonzero for tiny ones.
    a, b = rescale_extremes(a), rescale_extremes(b)
    batch, (d, r) = a.shape[:-2], a.shape[-2:]
    at, bt = a.reshape(-1, d, r).mT.unsqueeze(1), b.reshape(-1, d, r).mT  # (N, 1, r, d) and (N, r, d)
    norms, _ = _factored_norms(at, bt, heads=True, layer=False)
    check_nonzero(_host(norms.total).reshape(batch), "A @ B^T")
    sym, dirn = _finish(norms, num_std)
    return Scores(_out(_host(sym).reshape(batch)), _out(_host(dirn).reshape(batch)))


# --------------------------------------------------------------------------------- norms -> directionality
def directionality_from_norms(rows: ArrayLike, cols: ArrayLike, num_std: float = 2.0) -> Any:
    """Directionality from row norms and column norms, both (..., d). Returns shape (...), float64.

    numpy arrays (or sequences) give a numpy array, torch tensors a tensor on their device. Chapter 2.
    """
    rows, cols = _float64_array(rows), _float64_array(cols)
    xp = array_namespace(rows, cols)
    excess_rows, excess_cols = _outlier_excess(rows, num_std), _outlier_excess(cols, num_std)
    total = excess_rows + excess_cols
    positive = total > 0
    safe = xp.where(positive, total, xp.ones_like(total))
    return xp.where(positive, (excess_rows - excess_cols) / safe, xp.zeros_like(total))


def directionality_from_squared_norms(row_sq: ArrayLike, col_sq: ArrayLike, num_std: float = 2.0) -> Any:
    """:func:`directionality_from_norms` from squared norms (..., d), as the factored formulas give them.

    Round-off can make a zero row's squared norm a tiny negative number; it is clipped to 0 before the square root.
    """
    row_sq, col_sq = _float64_array(row_sq), _float64_array(col_sq)
    xp = array_namespace(row_sq, col_sq)
    return directionality_from_norms(xp.sqrt(xp.clip(row_sq, min=0.0)), xp.sqrt(xp.clip(col_sq, min=0.0)), num_std)


def _outlier_excess(norms: Any, num_std: float) -> Any:
    """``Σ_{x > τ} (x − τ)`` over the last axis with ``τ = mean + num_std · std(ddof=1)``."""
    xp = array_namespace(norms)
    threshold = xp.mean(norms, axis=-1) + num_std * xp.std(norms, axis=-1, correction=1)
    return xp.sum(xp.clip(norms - threshold[..., None], min=0.0), axis=-1)


def _float64_array(x: ArrayLike) -> Any:
    if is_torch_tensor(x):
        return x.detach().to(torch.float64)
    return np.asarray(x, dtype=np.float64)


# ------------------------------------------------------------------------------------------------ inputs
def _input(x: ArrayLike, name: str, device: torch.device | None = None) -> torch.Tensor:
    """``x`` as a checked (real, finite), detached float64 tensor; numpy input is wrapped without a copy."""
    t = _as_tensor(x, name, device)
    check_finite(t, name)
    return t if t.dtype == torch.float64 else t.to(torch.float64)


def _dense_input(M: ArrayLike) -> tuple[torch.Tensor, tuple[int, ...]]:
    """Checked, rescaled float64 ``M`` as (N, d, d), and the batch shape."""
    m = _input(M, "M")
    check_square(m, "M")
    # Scale invariance: huge (~1e155) or tiny entries would overflow/underflow when squared; rescale them exactly.
    m = rescale_extremes(m)
    return m.reshape(-1, *m.shape[-2:]), tuple(m.shape[:-2])


def _as_tensor(x: ArrayLike, name: str, device: torch.device | None) -> torch.Tensor:
    """``x`` as a detached tensor on ``device`` (default: where it is), in its own floating dtype."""
    if is_torch_tensor(x):
        t = x
    else:
        arr = as_array(x, name)
        check_real_floating(arr, name)
        if not arr.flags.writeable or any(step < 0 for step in arr.strides):
            arr = np.array(arr)  # torch wraps only writeable arrays with non-negative strides
        t = torch.from_numpy(arr)  # zero-copy
    check_real_floating(t, name)
    t = t.detach()
    if device is not None and t.device != device:
        t = t.to(device)  # move in the stored dtype (bf16 moves a quarter of the bytes of float64), convert there
    return t


def _host(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def _out(v: np.ndarray) -> np.ndarray | float:
    return float(v) if np.ndim(v) == 0 else np.asarray(v, dtype=np.float64)


# ------------------------------------------------------------------------------------------------ kernel
class _Norms(NamedTuple):
    """What both scores are made of, per matrix: ``tr(M M)``, ``‖M‖²`` and squared row / column norms (..., d)."""

    cross: torch.Tensor | None
    total: torch.Tensor
    row_sq: torch.Tensor | None
    col_sq: torch.Tensor | None


def _finish(norms: _Norms, num_std: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetry and directionality from the norms (totals already checked to be positive)."""
    return norms.cross / norms.total, directionality_from_squared_norms(norms.row_sq, norms.col_sq, num_std)


def _dense_norms(m: torch.Tensor, *, cross: bool = True, columns: bool = True) -> _Norms:
    """:class:`_Norms` of float64 matrices ``m`` (N, d, d); ``tr(M M)`` is summed over blocks of rows, so that no
    temporary exceeds :data:`CHUNK_BYTES` (a d × d product for one large matrix)."""
    n, d = m.shape[0], m.shape[-1]
    row_sq = torch.linalg.vector_norm(m, dim=-1).square_()
    col_sq = torch.linalg.vector_norm(m, dim=-2).square_() if columns else None
    trace = None
    if cross:
        trace = torch.zeros(n, dtype=torch.float64, device=m.device)
        block = max(1, CHUNK_BYTES // (8 * d * max(n, 1)))
        for j in range(0, d, block):
            trace += (m[:, j:j + block, :] * m[:, :, j:j + block].mT).sum(dim=(-2, -1))  # tr(M M) = ⟨M, Mᵀ⟩
    return _Norms(trace, row_sq.sum(dim=-1), row_sq, col_sq)


class _Buffers:
    """Float64 work buffers reused from one chunk (and one call) to the next: a fresh 8 MB tensor per product
    costs page faults and zeroing; one thread-local set per device is kept."""

    _local = threading.local()

    @classmethod
    def get(cls, name: str, numel: int, device: torch.device) -> torch.Tensor:
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


def _factored_norms(at: torch.Tensor, bt: torch.Tensor, heads: bool, layer: bool):
    """:class:`_Norms` of ``M = A Bᵀ`` for ``at`` (N, G, r, d) = Aᵀ per matrix, grouped so that the G matrices of a
    group share ``bt`` (N, r, d) = Bᵀ (query heads of one KV head; G = 1 for independent factors); a few groups at
    a time, in any stored dtype (converted to float64 once, chunk by chunk).

    Returns the norms, of shapes (N, G) and (N, G, d) (None when ``heads`` is False) and, when ``layer``, the
    float64 layer factors ``(Σ_{h∈g} Aᵀ_h, Bᵀ_g)`` of shapes (N, r, d) each (else None).
    """
    N, G, r, d = at.shape
    dev = at.device
    chunk = max(1, CHUNK_BYTES // (8 * G * r * d))
    norms = None
    if heads:
        norms = _Norms(*(torch.empty(shape, dtype=torch.float64, device=dev)
                         for shape in ((N, G), (N, G), (N, G, d), (N, G, d))))
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
        gram_a = a @ a.mT  # (c, G, r, r) = AᵀA per matrix
        gram_b = b @ b.mT  # (c, r, r)    = BᵀB once per group
        _check_finite_grams(torch.diagonal(gram_a, dim1=-2, dim2=-1).reshape(c * G, r), "wq", s * G)
        _check_finite_grams(torch.diagonal(gram_b, dim1=-2, dim2=-1), "wk_kv", s)
        norms.total[s:e] = (gram_a * gram_b.unsqueeze(1)).sum(dim=(-2, -1))  # ‖M‖² = ⟨AᵀA, BᵀB⟩ (both symmetric)
        # BᵀA for the G matrices of a group in one product: (r, d) @ (d, G·r) -> (r, G·r).
        core = (b @ a.reshape(c, G * r, d).mT).reshape(c, r, G, r).transpose(1, 2)  # (c, G, r, r)
        norms.cross[s:e] = (core * core.mT).sum(dim=(-2, -1))  # tr(M M) = ⟨BᵀA, (BᵀA)ᵀ⟩
        # Row norms² of M: diag(A G_B Aᵀ) = Σ_r (G_B Aᵀ) ⊙ Aᵀ. Column norms²: Σ_r (G_A Bᵀ) ⊙ Bᵀ, where the G matrices
        # of a group share Bᵀ, so [G_A1; ...; G_AG] (G·r, r) @ Bᵀ (r, d) is one product per group.
        work = _Buffers.get("work", c * G * r * d, dev)
        prod = torch.bmm(gram_b.unsqueeze(1).expand(c, G, r, r).reshape(c * G, r, r), a.view(c * G, r, d),
                         out=work.view(c * G, r, d))
        torch.sum(prod.view(c, G, r, d).mul_(a), dim=-2, out=norms.row_sq[s:e])
        prod = torch.bmm(gram_a.view(c, G * r, r), b, out=work.view(c, G * r, d))
        torch.sum(prod.view(c, G, r, d).mul_(b.unsqueeze(1)), dim=-2, out=norms.col_sq[s:e])
    return norms, ((a_sum, b_all) if layer else None)


def _check_finite_grams(diag: torch.Tensor, name: str, offset: int = 0) -> None:
    """Each Gram diagonal entry is a sum of squares of one weight column: it is finite iff that column is."""
    bad = ~torch.isfinite(diag).all(dim=-1)
    if bool(bad.any()):
        first = offset + int(torch.nonzero(bad)[0])
        raise ValueError(f"`{name}` contains NaN or Inf entries (first in head {first}, counting through the "
                         "layers); the scores are undefined. Check the weights (a diverged run or a failed "
                         "dequantisation) or drop the affected heads.")


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
    check_num_std(num_std)
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
    # One factor for the whole stack: every head score and the layer score are invariant to a positive factor on
    # all of ``wq`` (or all of ``wk_kv``); non-finite entries are left for the finiteness check to name.
    tq, tk = rescale_extremes(tq, axes=None), rescale_extremes(tk, axes=None)
    batch = tq.shape[:-3]
    # Wᵀ per head, (L·K, G, r, d) and (L·K, r, d): free views for QKLayer's layout, stored dtype kept until converted
    at = tq.reshape(-1, n_kv, n_heads // n_kv, d, r).mT.reshape(-1, n_heads // n_kv, r, d)
    bt = tk.reshape(-1, d, r).mT
    norms, layer_factors = _factored_norms(at, bt, heads, layer)
    head_scores = layer_score = None
    if heads:
        zero = norms.total.reshape(-1) <= 0
        if bool(zero.any()):
            first = int(torch.nonzero(zero)[0])
            raise ValueError(f"query head {first} (counting through the layers) has an all-zero W_qk (‖M‖_F = 0), "
                             "so its symmetry score is undefined. Check that the weights were loaded (a zero matrix "
                             "often means a missing tensor).")
        sym, dirn = _finish(norms, num_std)
        head_scores = Scores(_out(_host(sym).reshape(*batch, n_heads)), _out(_host(dirn).reshape(*batch, n_heads)))
    if layer:
        n_layers = at.shape[0] // n_kv
        lsym, ldirn = _layer_matrix_scores(layer_factors[0].reshape(n_layers, n_kv * r, d),
                                           layer_factors[1].reshape(n_layers, n_kv * r, d), num_std)
        layer_score = Scores(_out(_host(lsym).reshape(batch)), _out(_host(ldirn).reshape(batch)))
    return LayerScores(head_scores, layer_score)


def _layer_matrix_scores(a_t: torch.Tensor, b_t: torch.Tensor, num_std: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores of ``M = A Bᵀ`` from float64 ``a_t = Aᵀ``, ``b_t = Bᵀ`` of shape (L, R, d): the layer matrix, whose
    factors are the grouped sums ``Σ_{h∈g} W_Q^h`` and ``W_K^g`` side by side (rank R = n_kv_heads·head_dim).
    Factored when cheaper (5R < d), else by forming M one layer at a time. Returns two (L,) tensors."""
    L, R, d = a_t.shape
    if d > 5 * R:
        norms, _ = _factored_norms(a_t.unsqueeze(1), b_t, heads=True, layer=False)
        norms = _Norms(*(t.reshape(L, *t.shape[2:]) for t in norms))
    else:
        parts = [_dense_norms((a_t[i].mT @ b_t[i]).unsqueeze(0)) for i in range(L)]  # (1, d, d): A Bᵀ
        norms = _Norms(*(torch.cat(field) for field in zip(*parts)))
    bad = ~((norms.total > 0) & torch.isfinite(norms.total))
    if bool(bad.any()):
        where = f" (entry {int(torch.nonzero(bad)[0])} of the stack)" if L > 1 else ""
        raise ValueError(f"the layer matrix{where} is all zero or has NaN/Inf entries; its scores are "
                         "undefined. Check that the weights were loaded.")
    return _finish(norms, num_std)
