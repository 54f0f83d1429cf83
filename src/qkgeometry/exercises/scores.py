"""Checkers for the exercises of chapter 2, "Two scores, two axes".

Each checker compares the learner's function with :mod:`qkgeometry.scores` on fresh inputs (random, symmetric, skew,
and matrices with outlier rows or columns), prints a one-line verdict and returns True/False.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np

from ..scores import directionality_score, symmetry_score, symmetry_score_factored
from ..tables import format_number
from . import compare, report

__all__ = [
    "check_directionality_score",
    "check_symmetry_score",
    "check_symmetry_score_factored",
    "check_toy_symmetry",
    "check_two_axes",
    "score_test_matrices",
]


def score_test_matrices(seed: int = 0) -> list[np.ndarray]:
    """Test inputs (d, d): Gaussian, symmetric, skew, a dominant key column, a dominant query row, a rank-one form."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((12, 12))
    key_hub = 0.3 * rng.standard_normal((12, 12))
    key_hub[:, 3] += 4.0  # one key-side direction read by every query dimension
    rank_one = np.outer(rng.standard_normal(10), rng.standard_normal(10))
    return [g, g + g.T, g - g.T, key_hub, key_hub.T.copy(), rank_one, rng.standard_normal((40, 40))]


def check_symmetry_score(fn: Callable[[np.ndarray], float], seed: int = 0) -> bool:
    """Exercise 2.1: ``fn(M)`` for ``M`` (d, d) returns ``(‖M_s‖² − ‖M_n‖²)/‖M‖²`` (in [−1, 1], no factor 2)."""
    return compare(fn, symmetry_score, [(M,) for M in score_test_matrices(seed)], "symmetry_score(M)")


def check_directionality_score(fn: Callable[[np.ndarray], float], seed: int = 0) -> bool:
    """Exercise 2.2: ``fn(M)`` returns the directionality score with ``num_std = 2`` and the unbiased std."""
    return compare(fn, directionality_score, [(M,) for M in score_test_matrices(seed)], "directionality_score(M)")


def check_two_axes(M: np.ndarray, min_symmetry: float = 0.8, max_directionality: float = -0.5) -> bool:
    """Exercise 2.3: ``M`` (d, d) with d >= 16 must be strongly symmetric *and* strongly key-side directional."""
    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] < 16:
        return report(False, "two axes", f"need a square matrix with d >= 16; got shape {M.shape}")
    s, d = symmetry_score(M), directionality_score(M)
    ok = s > min_symmetry and d < max_directionality
    hint = "" if ok else (" (add a symmetric part that dominates the energy)" if s <= min_symmetry
                          else " (make one key-side column stand out from the others)")
    return report(ok, "two axes", f"s(M) = {s:.3f} (need > {min_symmetry}), d(M) = {d:.3f} "
                                  f"(need < {max_directionality}){hint}")


def check_symmetry_score_factored(fn: Callable[[np.ndarray, np.ndarray], float], seed: int = 0,
                                  d_big: int = 3000, r_big: int = 8) -> bool:
    """Exercise 2.4: ``fn(A, B)`` with ``A, B`` (d, r) returns the symmetry score of ``A Bᵀ`` without forming it.

    Values are compared on small inputs; then, for ``d = d_big``, the peak memory that numpy allocates during the
    call must stay below half the size of the d × d matrix (tracemalloc sees numpy's allocations).
    """
    rng = np.random.default_rng(seed)
    cases = [(rng.standard_normal((d, r)), rng.standard_normal((d, r))) for d, r in ((5, 1), (16, 4), (64, 64))]
    a = rng.standard_normal((12, 3))
    cases.append((a, a.copy()))  # A = B: symmetric, score 1
    if not compare(fn, symmetry_score_factored, cases, "symmetry_score_factored(A, B) values"):
        return False
    A, B = rng.standard_normal((d_big, r_big)), rng.standard_normal((d_big, r_big))
    tracemalloc.start()
    try:
        got = fn(A, B)
        _, peak = tracemalloc.get_traced_memory()
    except Exception as e:
        return report(False, "symmetry_score_factored(A, B) memory", f"raised {type(e).__name__}: {e}")
    finally:
        tracemalloc.stop()
    dense_bytes = d_big * d_big * 8
    if peak > dense_bytes / 2:
        return report(False, "symmetry_score_factored(A, B) memory",
                      f"peak {peak / 2**20:.0f} MiB for d={d_big}, r={r_big}: that is the size of the "
                      f"{d_big}×{d_big} matrix ({dense_bytes / 2**20:.0f} MiB); use only r×r products")
    if not np.isclose(float(got), symmetry_score_factored(A, B), atol=1e-8):
        return report(False, "symmetry_score_factored(A, B) memory", "wrong value on the large case")
    return report(True, "symmetry_score_factored(A, B)",
                  f"values match, peak memory {peak / 2**20:.1f} MiB vs {dense_bytes / 2**20:.0f} MiB dense")


def check_toy_symmetry(s_M: float, s_transposed: float, s_scaled: float) -> bool:
    """Exercise 2.5 (by hand): the symmetry scores of chapter 1's toy matrix ``M = [[1, 2], [0, 1]]``, of ``Mᵀ`` and
    of ``−3 M``, each as a number (a fraction is fine). Prints one line; returns True/False."""
    name = "the toy matrix's symmetry scores"
    M = np.array([[1.0, 2.0], [0.0, 1.0]])
    want = float(symmetry_score(M))
    try:
        got = [float(v) for v in (s_M, s_transposed, s_scaled)]
    except (TypeError, ValueError):
        return report(False, name, "give three numbers")
    if not np.isclose(got[0], want):
        hint = " (the factor 2 of some statements of the score is a slip; the range is [−1, 1])" if np.isclose(
            got[0], 2 * want) else " (‖M_s‖² = 4, ‖M_n‖² = 2: count the squared entries of each part)"
        return report(False, name, f"s(M) is not {format_number(got[0], spec='g')}{hint}")
    if not np.isclose(got[1], want):
        return report(False, name, "s(Mᵀ): transposing keeps M_s and flips the sign of M_n, so both energies stay")
    if not np.isclose(got[2], want):
        return report(False, name, "s(−3M): the score is a ratio of energies, so scaling by any nonzero number "
                                   "keeps it")
    return report(True, name, f"s = {want:.4f} = 1/3 for all three")
