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
:func:`directionality_from_norms` turns norms into the directionality score. It is written once, against the array
API standard (``array-api-compat``): numpy arrays (and sequences) are computed with numpy on the CPU, without
importing torch; torch tensors are computed with torch where they live (CPU or CUDA); ``device=`` moves the work
to a torch device. The same code gives the same float64 numbers (to round-off) on every backend.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

import numpy as np

from ._arrays import array_namespace, as_float64, device_of, einsum, host_float64, is_torch_tensor, widened
from ._threads import kernel_pool
from ._validation import (
    SAFE_EXPONENT,
    ArrayLike,
    as_array,
    check_factors,
    check_finite,
    check_nonzero,
    check_num_std,
    check_real_floating,
    check_square,
    rescale_extremes,
)
from .devices import resolve_device
from .errors import NonFiniteWeights, ZeroWeights

__all__ = [
    "CHUNK_BYTES",
    "LayerScores",
    "Scores",
    "directionality_from_norms",
    "directionality_from_squared_norms",
    "directionality_score",
    "directionality_score_factored",
    "layer_scores",
    "outlier_threshold",
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
    check_nonzero(host_float64(norms.total).reshape(batch), "M")
    return _out(host_float64(norms.cross / norms.total).reshape(batch))


def directionality_score(M: ArrayLike, num_std: float = 2.0) -> np.ndarray | float:
    """Directionality score of ``M`` (..., d, d) in [−1, 1]; negative = column (key-side) dominated. Chapter 2."""
    check_num_std(num_std)
    m, batch = _dense_input(M)
    norms = _dense_norms(m, cross=False)
    return _out(host_float64(directionality_from_squared_norms(norms.row_sq, norms.col_sq, num_std)).reshape(batch))


# -------------------------------------------------------------------------------------------- factored
def symmetry_score_factored(A: ArrayLike, B: ArrayLike | None = None) -> np.ndarray | float:
    """Symmetry score of ``M = A Bᵀ`` from ``A, B`` (..., d, r), or from one :class:`~qkgeometry.FactoredQK`, without
    forming M.

    ``tr(M M) = tr((BᵀA)(BᵀA))`` and ``‖M‖² = tr((AᵀA)(BᵀB))``. Chapter 2, "The factored formulas".
    """
    return scores_factored(A, B).symmetry


def directionality_score_factored(A: ArrayLike, B: ArrayLike | None = None, num_std: float = 2.0
                                  ) -> np.ndarray | float:
    """Directionality score of ``M = A Bᵀ`` from ``A, B`` (..., d, r), or from one :class:`~qkgeometry.FactoredQK`,
    without forming M.

    Row norms² are ``diag(A (BᵀB) Aᵀ)`` and column norms² ``diag(B (AᵀA) Bᵀ)``. Chapter 2.
    """
    return scores_factored(A, B, num_std).directionality


def scores_factored(A: ArrayLike, B: ArrayLike | None = None, num_std: float = 2.0) -> Scores:
    """Both scores of ``M = A Bᵀ`` (``A, B``: (..., d, r), or one :class:`~qkgeometry.FactoredQK` ``(A, B)`` with
    ``B`` left out) sharing the Gram matrices. Chapter 2.

    >>> import numpy as np
    >>> a = np.random.default_rng(0).normal(size=(6, 2))
    >>> from qkgeometry.model import FactoredQK
    >>> scores_factored(FactoredQK(a, a)).symmetry == scores_factored(a, a).symmetry == 1.0
    True
    """
    if B is None:
        A, B = _factor_pair(A)
    check_num_std(num_std)
    a, b = _input(A, "A"), _input(B, "B")
    if is_torch_tensor(a) != is_torch_tensor(b):  # one torch tensor and one array: compute in torch
        a, b = _to_torch(a, b)
    check_factors(a, b)
    # Scale invariance: A and B are rescaled separately (M = A Bᵀ only changes by a positive factor), so that the
    # fourth powers in tr((AᵀA)(BᵀB)) stay finite for huge entries and nonzero for tiny ones.
    a, b = rescale_extremes(a), rescale_extremes(b)
    batch, (d, r) = tuple(a.shape[:-2]), tuple(a.shape[-2:])
    xp = array_namespace(a, b)
    at, bt = xp.matrix_transpose(a.reshape(-1, d, r))[:, None], xp.matrix_transpose(b.reshape(-1, d, r))  # (N, 1, r, d) and (N, r, d)
    norms, _, _ = _factored_norms(at, bt, heads=True, layer=False)
    check_nonzero(host_float64(norms.total).reshape(batch), "A @ B^T")
    sym, dirn = _finish(norms, num_std)
    return Scores(_out(host_float64(sym).reshape(batch)), _out(host_float64(dirn).reshape(batch)))


# --------------------------------------------------------------------------------- norms -> directionality
def _factor_pair(form: Any) -> tuple[Any, Any]:
    """``(A, B)`` of a :class:`~qkgeometry.FactoredQK` (or any pair) given alone in place of ``A``."""
    if isinstance(form, tuple) and len(form) == 2:
        return form[0], form[1]
    raise TypeError("`B` is missing: pass the two factors A, B, or one FactoredQK (e.g. layer.factors()) as A.")


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


def outlier_threshold(norms: ArrayLike, num_std: float = 2.0) -> Any:
    """The directionality score's threshold ``τ = mean + num_std · std`` (unbiased std, ddof=1) of norms (..., d),
    over the last axis: a row (or column) counts as an outlier by how far its norm exceeds τ. Returns shape (...).

    Chapter 2 ("The two scores") draws it over the norms of a 6 × 6 example.

    >>> float(outlier_threshold([1.0, 2.0, 3.0]))  # mean 2, std 1
    4.0
    """
    norms = _float64_array(norms)
    xp = array_namespace(norms)
    return xp.mean(norms, axis=-1) + num_std * xp.std(norms, axis=-1, correction=1)


def _outlier_excess(norms: Any, num_std: float) -> Any:
    """``Σ_{x > τ} (x − τ)`` over the last axis with τ from :func:`outlier_threshold`."""
    xp = array_namespace(norms)
    threshold = outlier_threshold(norms, num_std)
    return xp.sum(xp.clip(norms - threshold[..., None], min=0.0), axis=-1)


def _float64_array(x: ArrayLike) -> Any:
    """``x`` as float64: a torch tensor stays a (detached) tensor on its device, anything else a numpy array."""
    return as_float64(x.detach() if is_torch_tensor(x) else x)


# ------------------------------------------------------------------------------------------------ inputs
def _torch() -> Any:
    """torch, imported when a torch tensor or a device asks for it (never on the numpy path)."""
    import torch

    return torch


def _input(x: ArrayLike, name: str) -> Any:
    """``x`` as a checked (real, finite), detached float64 array of its own library; numpy input is not copied
    when it already is float64."""
    t = _as_array(x, name, None)
    check_finite(t, name)
    return _astype64(t)


def _dense_input(M: ArrayLike) -> tuple[Any, tuple[int, ...]]:
    """Checked, rescaled float64 ``M`` as (N, d, d), and the batch shape."""
    m = _input(M, "M")
    check_square(m, "M")
    # Scale invariance: huge (~1e155) or tiny entries would overflow/underflow when squared; rescale them exactly.
    m = rescale_extremes(m)
    return m.reshape(-1, *m.shape[-2:]), tuple(m.shape[:-2])


def _as_array(x: ArrayLike, name: str, device: Any) -> Any:
    """``x`` as a detached torch tensor (on ``device`` when one is given, else where it is) or a numpy array, in its
    own floating dtype."""
    if is_torch_tensor(x):
        check_real_floating(x, name)
        t = x.detach()
        if device is not None and t.device != device:
            t = t.to(device)  # move in the stored dtype (bf16 moves a quarter of the bytes of float64), convert there
        return t
    arr = _ml_float_to_float32(as_array(x, name))
    check_real_floating(arr, name)
    if device is None:
        return arr
    torch = _torch()
    if not arr.flags.writeable or any(step < 0 for step in arr.strides):
        arr = np.array(arr)  # torch wraps only writeable arrays with non-negative strides
    return torch.from_numpy(arr).to(device)  # zero-copy on the CPU


def _ml_float_to_float32(arr: np.ndarray) -> np.ndarray:
    """An ``ml_dtypes`` float array (bfloat16, float8...) as float32 (exact: each of them is a subset of float32;
    :func:`qkgeometry._arrays.widened`); other arrays as they are."""
    return widened(arr) if arr.dtype.type.__module__.startswith("ml_dtypes") else arr


def _astype64(x: Any) -> Any:
    xp = array_namespace(x)
    return x if x.dtype == xp.float64 else xp.astype(x, xp.float64)


def _to_torch(*arrays: Any) -> tuple[Any, ...]:
    """numpy arrays among ``arrays`` as tensors on the device of the first tensor (for mixed inputs)."""
    torch = _torch()
    dev = next(a.device for a in arrays if is_torch_tensor(a))
    return tuple(a if is_torch_tensor(a) else torch.from_numpy(np.ascontiguousarray(a)).to(dev) for a in arrays)


def _out(v: np.ndarray) -> np.ndarray | float:
    return float(v) if np.ndim(v) == 0 else np.asarray(v, dtype=np.float64)


# ------------------------------------------------------------------------------------------------ kernel
class _Norms(NamedTuple):
    """What both scores are made of, per matrix: ``tr(M M)``, ``‖M‖²`` and squared row / column norms (..., d)."""

    cross: Any
    total: Any
    row_sq: Any
    col_sq: Any


def _finish(norms: _Norms, num_std: float) -> tuple[Any, Any]:
    """Symmetry and directionality from the norms (totals already checked to be positive)."""
    return norms.cross / norms.total, directionality_from_squared_norms(norms.row_sq, norms.col_sq, num_std)


def _dense_norms(m: Any, *, cross: bool = True, columns: bool = True) -> _Norms:
    """:class:`_Norms` of float64 matrices ``m`` (N, d, d), a block of rows at a time, so that no temporary exceeds
    :data:`CHUNK_BYTES` (``tr(M M) = ⟨M, Mᵀ⟩`` pairs a block of rows with the same block of columns)."""
    xp = array_namespace(m)
    n, d = m.shape[0], m.shape[-1]
    rows = []
    col_sq = xp.zeros((n, d), dtype=m.dtype, device=device_of(m))
    trace = xp.zeros(n, dtype=m.dtype, device=device_of(m))
    block = max(1, CHUNK_BYTES // (8 * d * max(n, 1)))
    for j in range(0, d, block):
        part = m[:, j:j + block, :]
        square = part * part
        rows.append(xp.sum(square, axis=-1))
        if columns:
            col_sq = col_sq + xp.sum(square, axis=-2)
        if cross:
            trace = trace + xp.sum(part * xp.matrix_transpose(m[:, :, j:j + block]), axis=(-2, -1))
    row_sq = xp.concat(rows, axis=-1)
    return _Norms(trace if cross else None, xp.sum(row_sq, axis=-1), row_sq, col_sq if columns else None)


def _diagonal(x: Any) -> Any:
    """The diagonals of a stack of square matrices (..., n, n) -> (..., n)."""
    if is_torch_tensor(x):
        return _torch().diagonal(x, dim1=-2, dim2=-1)
    return np.diagonal(x, axis1=-2, axis2=-1)


def _factored_norms(at: Any, bt: Any, heads: bool, layer: bool):
    """:class:`_Norms` of ``M = A Bᵀ`` for ``at`` (N, G, r, d) = Aᵀ per matrix, grouped so that the G matrices of a
    group share ``bt`` (N, r, d) = Bᵀ (query heads of one KV head; G = 1 for independent factors); a few groups at
    a time, in any stored dtype (converted to float64 once, chunk by chunk). numpy arrays or torch tensors.

    numpy arrays are split into slices of groups that run side by side on the CPU cores, each slice in its own
    thread with one BLAS thread (:func:`qkgeometry._threads.kernel_pool`): on these head-sized products that runs
    at close to the machine's GEMM peak, where one call with a multi-threaded BLAS spends much of its time
    synchronising its threads. torch tensors use torch's own threads (or the GPU).

    Returns the norms, of shapes (N, G) and (N, G, d) (None when ``heads`` is False); when ``layer``, the
    float64 layer factors ``(Σ_{h∈g} Aᵀ_h, Bᵀ_g)`` of shapes (N, r, d) each (else None); and the largest Gram
    diagonal entry of the A and of the B factors (the largest squared norm of a row of Aᵀ or Bᵀ; None when
    ``heads`` is False), which :func:`layer_scores` reads to tell whether the inputs needed rescaling.
    """
    if is_torch_tensor(at):
        return _factored_norms_in(at, bt, heads, layer)
    N, G, r, d = at.shape
    chunk = max(1, CHUNK_BYTES // (8 * G * r * d))
    with kernel_pool(N, chunk) as (run, step):
        parts = run(lambda s: _factored_norms_in(at[s:s + step], bt[s:s + step], heads, layer, offset=s * G),
                    range(0, N, step))
    norms = _Norms(*(np.concatenate(f, axis=0) for f in zip(*(p[0] for p in parts)))) if heads else None
    factors = tuple(np.concatenate(f, axis=0) for f in zip(*(p[1] for p in parts))) if layer else None
    peaks = tuple(max(f) for f in zip(*(p[2] for p in parts))) if heads else None
    return norms, factors, peaks


def _factored_norms_in(at: Any, bt: Any, heads: bool, layer: bool, offset: int = 0):
    """:func:`_factored_norms` on one slice of groups, in the calling thread; ``offset`` is the index of its first
    matrix (for error messages). Overflow is not warned about: a non-finite Gram raises an error of its own."""
    # numpy's error state is per thread: set here, in the worker
    with contextlib.nullcontext() if is_torch_tensor(at) else np.errstate(over="ignore", invalid="ignore"):
        return _factored_norms_body(at, bt, heads, layer, offset)


def _factored_norms_body(at: Any, bt: Any, heads: bool, layer: bool, offset: int) -> tuple[Any, Any, Any]:
    xp = array_namespace(at, bt)
    N, G, r, d = at.shape
    mT = xp.matrix_transpose
    chunk = max(1, CHUNK_BYTES // (8 * G * r * d))
    parts: list[tuple[Any, ...]] = []
    sums, kv, peaks = [], [], []
    for s in range(0, N, chunk):
        e = min(N, s + chunk)
        c = e - s
        a, b = _astype64(at[s:e]), _astype64(bt[s:e])  # the one float64 conversion (a view when already float64)
        if layer:
            sums.append(xp.sum(a, axis=1))
            kv.append(b)
        if not heads:
            continue
        gram_a = a @ mT(a)  # (c, G, r, r) = AᵀA per matrix
        gram_b = b @ mT(b)  # (c, r, r)    = BᵀB once per group
        diag_a, diag_b = xp.reshape(_diagonal(gram_a), (c * G, r)), _diagonal(gram_b)
        _check_finite_grams(xp, diag_a, "wq", offset + s * G)
        _check_finite_grams(xp, diag_b, "wk_kv", offset // G + s)
        peaks.append((float(xp.max(diag_a)), float(xp.max(diag_b))))
        total = xp.sum(gram_a * gram_b[:, None], axis=(-2, -1))  # ‖M‖² = ⟨AᵀA, BᵀB⟩ (both symmetric)
        # BᵀA for the G matrices of a group in one product: (r, d) @ (d, G·r) -> (r, G·r).
        core = xp.permute_dims(xp.reshape(b @ mT(xp.reshape(a, (c, G * r, d))), (c, r, G, r)), (0, 2, 1, 3))
        cross = xp.sum(core * mT(core), axis=(-2, -1))  # tr(M M) = ⟨BᵀA, (BᵀA)ᵀ⟩
        # Row norms² of M: diag(A G_B Aᵀ) = Σ_r (G_B Aᵀ) ⊙ Aᵀ. Column norms²: Σ_r (G_A Bᵀ) ⊙ Bᵀ, where the G matrices
        # of a group share Bᵀ, so [G_A1; ...; G_AG] (G·r, r) @ Bᵀ (r, d) is one product per group.
        # (einsum: not in the array API standard, but numpy's sums the products without a temporary)
        row_sq = einsum("cgrd,cgrd->cgd", gram_b[:, None] @ a, a)
        col_sq = einsum("cgrd,crd->cgd", xp.reshape(xp.reshape(gram_a, (c, G * r, r)) @ b, (c, G, r, d)), b)
        parts.append((cross, total, row_sq, col_sq))
    norms = _Norms(*(xp.concat(field, axis=0) for field in zip(*parts))) if heads else None
    factors = (xp.concat(sums, axis=0), xp.concat(kv, axis=0)) if layer else None
    peaks = tuple(max(f) for f in zip(*peaks)) if heads else None
    return norms, factors, peaks


def _in_safe_range(peak_sq: float, d: int) -> bool:
    """Whether a factor whose largest squared row norm (over its d entries) is ``peak_sq`` certainly has its
    largest magnitude p inside :func:`~qkgeometry._validation.rescale_extremes`'s range [2⁻⁶⁴, 2⁶⁴), so that
    rescaling would have left it as it is: p² ≤ peak_sq ≤ d·p², with a factor 4 of margin for round-off."""
    return d * 2.0 ** (2 - 2 * SAFE_EXPONENT) <= peak_sq <= 2.0 ** (2 * SAFE_EXPONENT - 2)


def _check_finite_grams(xp: Any, diag: Any, name: str, offset: int = 0) -> None:
    """Each Gram diagonal entry is a sum of squares of one weight column: it is finite iff that column is."""
    bad = ~xp.all(xp.isfinite(diag), axis=-1)
    if bool(xp.any(bad)):
        first = offset + int(host_float64(xp.astype(bad, xp.float64)).argmax())
        raise NonFiniteWeights(f"`{name}` contains NaN or Inf entries (first in head {first}, counting through "
                                "the layers); the scores are undefined. Check the weights (a diverged run or a "
                                "failed dequantisation) or drop the affected heads.")


# ------------------------------------------------------------------------------------ attention layers
class LayerScores(NamedTuple):
    """Scores of one attention layer (or of a stack of layers).

    ``heads``: per query head, arrays of shape (..., n_heads), or None when not requested.
    ``layer``: of the layer matrix ``M_layer = Σ_h W_Q^h W_K^{g(h)ᵀ}``, arrays of shape (...) (floats for one layer),
    or None when not requested.
    """

    heads: Scores | None
    layer: Scores | None


def layer_scores(wq: ArrayLike, wk_kv: ArrayLike, num_std: float = 2.0, *, heads: bool = True,
                 layer: bool = True, device: Any = None) -> LayerScores:
    """Scores of every query head of an attention layer and of the layer matrix, in a few large float64 products.

    ``wq``: (..., n_heads, d, head_dim), ``wk_kv``: (..., n_kv_heads, d, head_dim) with KV heads *not* expanded;
    query head ``h`` reads KV head ``g(h) = h // (n_heads // n_kv_heads)``, so ``W_qk^h = wq[h] @ wk_kv[g(h)].T``.
    Leading axes (several layers) are batched. Any floating dtype (bf16, fp16, float32...): the weights are
    converted to float64 once, a few KV groups at a time (inputs are never modified). numpy arrays are computed
    with numpy, torch tensors with torch where they are; ``device`` (``"cpu"``, ``"cuda"``, a ``torch.device``)
    computes with torch on that device. The scores come back as float64 numpy arrays (floats for one layer's
    ``layer`` scores).

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
    tq, tk = _as_array(wq, "wq", dev), _as_array(wk_kv, "wk_kv", dev)
    if is_torch_tensor(tq) != is_torch_tensor(tk):
        tq, tk = _to_torch(tq, tk)
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
    batch = tuple(tq.shape[:-3])
    xp = array_namespace(tq, tk)

    def factors(q: Any, k: Any) -> tuple[Any, Any]:
        # Wᵀ per head, (L·K, G, r, d) and (L·K, r, d): free views of QKLayer's layout, in the stored dtype
        return (xp.matrix_transpose(q.reshape(-1, n_kv, n_heads // n_kv, d, r)).reshape(-1, n_heads // n_kv, r, d),
                xp.matrix_transpose(k.reshape(-1, d, r)))

    # One factor for the whole stack: every head score and the layer score are invariant to a positive factor on
    # all of ``wq`` (or all of ``wk_kv``). Finding it takes a pass over the weights, which the Gram diagonals make
    # unnecessary: when the largest of them shows every magnitude in range, rescaling would have changed nothing
    # and the result stands; otherwise (or on NaN/Inf in a Gram) the inputs are rescaled and scored again, and
    # non-finite entries are left for the finiteness check to name.
    result = None
    if heads:
        try:
            result = _factored_norms(*factors(tq, tk), heads, layer)
        except NonFiniteWeights:
            pass
        else:
            if not all(_in_safe_range(p, d) for p in result[2]):
                result = None
    if result is None:
        result = _factored_norms(*factors(rescale_extremes(tq, axes=None), rescale_extremes(tk, axes=None)),
                                 heads, layer)
    norms, layer_factors, _ = result
    head_scores = layer_score = None
    if heads:
        total = host_float64(norms.total).reshape(-1)
        zero = total <= 0
        if bool(zero.any()):
            first = int(np.nonzero(zero)[0][0])
            raise ZeroWeights(f"query head {first} (counting through the layers) has an all-zero W_qk (‖M‖_F = 0), "
                             "so its symmetry score is undefined. Check that the weights were loaded (a zero matrix "
                             "often means a missing tensor).")
        sym, dirn = _finish(norms, num_std)
        head_scores = Scores(_out(host_float64(sym).reshape(*batch, n_heads)), _out(host_float64(dirn).reshape(*batch, n_heads)))
    if layer:
        n_layers = layer_factors[0].shape[0] // n_kv
        lsym, ldirn = _layer_matrix_scores(layer_factors[0].reshape(n_layers, n_kv * r, d),
                                           layer_factors[1].reshape(n_layers, n_kv * r, d), num_std)
        layer_score = Scores(_out(host_float64(lsym).reshape(batch)), _out(host_float64(ldirn).reshape(batch)))
    return LayerScores(head_scores, layer_score)


def _layer_matrix_scores(a_t: Any, b_t: Any, num_std: float) -> tuple[Any, Any]:
    """Scores of ``M = A Bᵀ`` from float64 ``a_t = Aᵀ``, ``b_t = Bᵀ`` of shape (L, R, d): the layer matrix, whose
    factors are the grouped sums ``Σ_{h∈g} W_Q^h`` and ``W_K^g`` side by side (rank R = n_kv_heads·head_dim).
    Factored when cheaper (5R < d), else by forming M one layer at a time. Returns two (L,) arrays."""
    xp = array_namespace(a_t, b_t)
    L, R, d = a_t.shape
    if d > 5 * R:
        norms, _, _ = _factored_norms(a_t[:, None], b_t, heads=True, layer=False)
        norms = _Norms(*(xp.reshape(t, (L, *t.shape[2:])) for t in norms))
    else:
        parts = [_dense_norms((xp.matrix_transpose(a_t[i]) @ b_t[i])[None]) for i in range(L)]  # (1, d, d): A Bᵀ
        norms = _Norms(*(xp.concat(field, axis=0) for field in zip(*parts)))
    total = host_float64(norms.total)
    bad = ~((total > 0) & np.isfinite(total))
    if bool(bad.any()):
        where = f" (entry {int(np.nonzero(bad)[0][0])} of the stack)" if L > 1 else ""
        error = ZeroWeights if np.isfinite(total).all() else NonFiniteWeights
        raise error(f"the layer matrix{where} is all zero or has NaN/Inf entries; its scores are "
                         "undefined. Check that the weights were loaded.")
    return _finish(norms, num_std)
