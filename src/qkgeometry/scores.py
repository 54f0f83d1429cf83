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

from typing import NamedTuple

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
    "Scores",
    "directionality_from_norms",
    "directionality_score",
    "directionality_score_factored",
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
