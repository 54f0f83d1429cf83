"""Checkers for the exercises of chapter 6, "Beyond the paper".

Each checker compares the learner's function with :mod:`qkgeometry.analyses.nulls`, :mod:`qkgeometry.analyses.rotary` or
:mod:`qkgeometry.analyses.spectrum` on fresh inputs, prints a one-line verdict and returns True/False.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..analyses.nulls import rotation_null_moments_factored
from ..analyses.rotary import RopeSpec, offset_form, rope_frequencies
from ..analyses.spectrum import spectral_summary
from ..scores import symmetry_score_factored
from ..tables import format_number
from . import compare, report

__all__ = ["check_offset_form", "check_positive_share", "check_rotation_z"]


def _factor_cases(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    cases = [(rng.standard_normal((d, r)), rng.standard_normal((d, r))) for d, r in ((6, 1), (20, 4), (48, 16))]
    a = rng.standard_normal((30, 5))
    cases.append((a, a + 0.3 * rng.standard_normal((30, 5))))  # nearly tied: strongly symmetric
    b = rng.standard_normal((25, 3))
    cases.append((rng.standard_normal((25, 3)) * [8.0, 1.0, 0.1], b))  # a spread-out spectrum
    return cases


def _reference_rotation_z(a: np.ndarray, b: np.ndarray) -> float:
    null = rotation_null_moments_factored(a, b)
    return (symmetry_score_factored(a, b) - null.mean) / np.sqrt(null.variance)


def check_rotation_z(fn: Callable[[np.ndarray, np.ndarray], float], seed: int = 0) -> bool:
    """Exercise 6.1: ``fn(A, B)`` with A, B (d, r) returns the rotation-null z-score ``(s − 1/d)/sd`` of A Bᵀ."""
    return compare(fn, _reference_rotation_z, _factor_cases(seed), "rotation-null z-score", atol=1e-6)


def check_offset_form(fn: Callable[[np.ndarray, np.ndarray, np.ndarray, float], np.ndarray], seed: int = 0) -> bool:
    """Exercise 6.2: ``fn(wq, wk, inv_freq, delta)`` returns the dense ``M(Δ) = W_Q R(Δ) W_Kᵀ`` of one head in the
    rotate-half pairing (plane k = (k, k + head_dim/2), angle Δ·θ_k)."""
    rng = np.random.default_rng(seed)
    cases = []
    for d, hd, base, delta in ((10, 4, 100.0, 3.0), (16, 8, 10_000.0, -7.0), (24, 8, 50.0, 0.0), (12, 6, 2.0, 41.0)):
        cases.append((rng.standard_normal((d, hd)), rng.standard_normal((d, hd)), rope_frequencies(base, hd), delta))

    def reference(wq, wk, inv_freq, delta):
        return offset_form(wq, wk, RopeSpec(inv_freq, wq.shape[1], "half"), delta)

    return compare(fn, reference, cases, "offset form M(Δ)")


def check_positive_share(fn: Callable[[np.ndarray, np.ndarray], float], seed: int = 0) -> bool:
    """Exercise 6.3: ``fn(A, B)`` returns Σ_{λ>0} λ² / Σ λ² over the eigenvalues λ of the symmetric part of A Bᵀ."""
    cases = _factor_cases(seed)
    a = np.random.default_rng(seed + 1).standard_normal((15, 4))
    cases.append((a, a.copy()))  # tied W_Q = W_K: positive semi-definite, share 1
    ok = compare(fn, lambda x, y: spectral_summary(x, y).positive_share, cases, "positive energy share", atol=1e-6)
    if ok:
        got = fn(a, -a)
        if not np.isclose(got, 0.0, atol=1e-6):
            return report(False, "positive energy share", f"for A = −B the form is negative semi-definite: the share "
                                                          f"must be 0, got {format_number(got, spec='.3g')}")
    return ok
