"""The Toeplitz split of a square matrix into symmetric and skew-symmetric parts.

Convention (the book's Notation page; chapter 1, "The Toeplitz decomposition"): for ``M`` of shape (..., d, d),

    M = M_s + M_n,   M_s = (M + Mᵀ)/2 (symmetric),   M_n = (M − Mᵀ)/2 (skew-symmetric),

where the transpose acts on the last two axes. The parts are orthogonal in the Frobenius inner product, so
‖M‖² = ‖M_s‖² + ‖M_n‖². Everything is computed in float64 whatever the input dtype.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._arrays import is_torch_tensor
from ._validation import ArrayLike, check_square, to_float64


def decompose(M: ArrayLike) -> tuple:
    """Split ``M`` (..., d, d) into ``(M_s, M_n)`` with ``M = M_s + M_n``.

    Returns float64 arrays of the same kind as the input (numpy in, numpy out; torch in, torch out on the
    CPU). Explained in chapter 1.
    """
    arr = to_float64(M, "M")
    check_square(arr, "M")
    Mt = np.swapaxes(arr, -1, -2)
    Ms, Mn = (arr + Mt) / 2.0, (arr - Mt) / 2.0
    if is_torch_tensor(M):
        import torch

        return torch.from_numpy(Ms), torch.from_numpy(Mn)
    return Ms, Mn


class Energies(NamedTuple):
    """Squared Frobenius norms (float or array over the batch axes).

    Book: chapter 1, "Orthogonality and the Pythagorean identity".
    """

    symmetric: np.ndarray | float  # ‖M_s‖²
    skew: np.ndarray | float  # ‖M_n‖²
    total: np.ndarray | float  # ‖M‖² = symmetric + skew


def energies(M: ArrayLike) -> Energies:
    """Return ``(‖M_s‖², ‖M_n‖², ‖M‖²)`` for ``M`` (..., d, d), computed without forming the parts.

    Uses ‖M_s‖² = (‖M‖² + tr(M M))/2 and ‖M_n‖² = (‖M‖² − tr(M M))/2, where tr(M M) = Σ_ij M_ij M_ji.
    Explained in chapter 1.
    """
    arr = to_float64(M, "M")
    check_square(arr, "M")
    total = np.einsum("...ij,...ij->...", arr, arr)
    cross = np.einsum("...ij,...ji->...", arr, arr)
    sym, skew = (total + cross) / 2.0, (total - cross) / 2.0
    return Energies(*(_scalar_or_array(v) for v in (sym, skew, total)))


def _scalar_or_array(v: np.ndarray) -> np.ndarray | float:
    return float(v) if np.ndim(v) == 0 else np.asarray(v)
