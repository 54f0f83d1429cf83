"""Checkers for the exercises of chapter 1, "The Toeplitz decomposition".

Each checker calls the learner's function on fresh random inputs, compares with the reference implementation in
:mod:`qkgeometry.decomposition`, prints a one-line verdict and returns True/False (see :mod:`qkgeometry.exercises`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..decomposition import decompose, energies
from . import compare, report

__all__ = ["check_bilinear_parts", "check_decompose", "check_energy_split", "check_toy_logits"]


def _cases(seed: int, sizes=(2, 5, 16)) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    mats = [rng.standard_normal((d, d)) for d in sizes]
    sym = rng.standard_normal((6, 6))
    mats += [sym + sym.T, sym - sym.T]  # already symmetric / already skew: the split must leave them alone
    return mats


def check_decompose(fn: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], seed: int = 0) -> bool:
    """Exercise 1.1: ``fn(M)`` for ``M`` (d, d) must return ``(M_s, M_n)``, symmetric and skew parts."""
    return compare(fn, lambda M: tuple(np.asarray(p) for p in decompose(M)),
                   [(M,) for M in _cases(seed)], "decompose(M) -> (M_s, M_n)")


def _bilinear_parts_reference(M: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    Ms, Mn = decompose(M)
    return float(x @ Ms @ y), float(x @ Mn @ y)


def check_bilinear_parts(fn: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[float, float]],
                         seed: int = 0) -> bool:
    """Exercise 1.2: ``fn(M, x, y)`` with ``M`` (d, d), ``x, y`` (d,) returns ``(xᵀ M_s y, xᵀ M_n y)``.

    Includes the case ``x = y``, where the skew part must give exactly 0 (up to round-off).
    """
    rng = np.random.default_rng(seed)
    cases = []
    for d in (3, 8, 32):
        M, x, y = rng.standard_normal((d, d)), rng.standard_normal(d), rng.standard_normal(d)
        cases += [(M, x, y), (M, x, x.copy())]
    return compare(fn, _bilinear_parts_reference, cases, "bilinear_parts(M, x, y) -> (x·M_s·y, x·M_n·y)")


def check_energy_split(fn: Callable[[np.ndarray], tuple[float, float]], seed: int = 0) -> bool:
    """Exercise 1.3: ``fn(M)`` returns ``(‖M_s‖², ‖M_n‖²)`` — ideally from ``‖M‖²`` and ``tr(M M)`` only.

    Also checks that the result does not depend on how ``M`` is stored (a transposed view).
    """
    cases = [(M,) for M in _cases(seed)]
    rng = np.random.default_rng(seed + 1)
    cases.append((rng.standard_normal((9, 9)).T,))
    return compare(fn, lambda M: tuple(energies(M)[:2]), cases, "energy_split(M) -> (|M_s|^2, |M_n|^2)")


#: The matrix of chapter 1's by-hand exercise (Exercise 1.4), with the two unit tokens x_1 = (1, 0), x_2 = (0, 1).
TOY_M = np.array([[0.0, 3.0], [1.0, 0.0]])


def check_toy_logits(symmetric, skew, preferred: int) -> bool:
    """Exercise 1.4 (by hand): for :data:`TOY_M` and the tokens ``x_1 = (1, 0)``, ``x_2 = (0, 1)``, ``symmetric``
    and ``skew`` are the 2 × 2 arrays of logits ``ℓˢ_ij`` and ``ℓⁿ_ij`` (query ``i``, key ``j``), and ``preferred``
    is the key (1 or 2) that query 1 scores higher under the skew part alone. Prints one line; returns True/False.
    """
    name = "the toy logits"
    Ms, Mn = decompose(TOY_M)
    try:
        got_s, got_n = np.asarray(symmetric, dtype=float), np.asarray(skew, dtype=float)
    except (TypeError, ValueError):
        return report(False, name, "give two 2 × 2 arrays of numbers (nested lists are fine)")
    if got_s.shape != (2, 2) or got_n.shape != (2, 2):
        return report(False, name, f"both answers must be 2 × 2 arrays; got shapes {got_s.shape} and {got_n.shape}")
    if not np.allclose(got_s, Ms):
        wrong = [(i + 1, j + 1) for i in range(2) for j in range(2) if not np.isclose(got_s[i, j], Ms[i, j])]
        hint = " (a symmetric part is a symmetric array)" if not np.allclose(got_s, got_s.T) else ""
        return report(False, name, f"the symmetric logits are wrong at (i, j) = {wrong}{hint}")
    if not np.allclose(got_n, Mn):
        if np.allclose(got_n, -Mn):
            detail = "the skew logits have the wrong sign: ℓⁿᵢⱼ is query i's logit for key j, xᵢᵀ Mₙ xⱼ"
        elif not np.allclose(np.diag(got_n), 0):
            detail = "a skew part never scores a token against itself: the diagonal must be 0"
        else:
            detail = "the skew logits are wrong; Mₙ = (M − Mᵀ)/2, and with unit tokens ℓⁿᵢⱼ is its entry (i, j)"
        return report(False, name, detail)
    if preferred != 2:
        return report(False, name, "both arrays are right, but query 1's skew logit is higher for key 2 "
                                   "(ℓⁿ₁₂ = 1 > ℓⁿ₁₁ = 0)")
    return report(True, name)
