"""Checkers for the exercises of chapter 7, "What a head's geometry says about its job".

Each checker compares the learner's function with :mod:`qkgeometry.heads.behaviour`, :mod:`~qkgeometry.heads.hypotheses` or
:mod:`qkgeometry.heads.surgery` on fresh inputs, prints a one-line verdict and returns True/False.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..heads.behaviour import pattern_scores
from ..heads.hypotheses import separation
from ..heads.surgery import part_form, part_scale
from ..tables import format_number
from . import report

__all__ = ["HOLM_P_VALUES", "check_auc", "check_doubled_head", "check_holm", "check_part_scale",
           "check_previous_token_score"]


def _random_patterns(rng: np.random.Generator, heads: int, t: int) -> np.ndarray:
    logits = rng.normal(scale=3.0, size=(2, heads, t, t))
    logits = np.where(np.tril(np.ones((t, t), bool)), logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def check_previous_token_score(fn: Callable[[np.ndarray], np.ndarray], seed: int = 0) -> bool:
    """Exercise 7.1: ``fn(patterns)`` with causal patterns (sequences, heads, T, T) returns each head's mean
    attention on the previous token over query rows 4 … T−1 and over sequences, shape (heads,)."""
    rng = np.random.default_rng(seed)
    for i, (heads, t) in enumerate(((3, 9), (5, 16))):
        a = _random_patterns(rng, heads, t)
        want = pattern_scores(a, causal=True)["previous"].to_numpy()
        try:
            got = np.asarray(fn(a), dtype=float)
        except Exception as e:  # learners' code may raise anything
            return report(False, "previous-token score", f"raised {type(e).__name__}: {e} on test case {i}")
        if got.shape != want.shape:
            return report(False, "previous-token score", f"shape {got.shape}, expected {want.shape}")
        if not np.allclose(got, want, atol=1e-10):
            hint = " (did you start at row 4?)" if np.allclose(got, _all_rows(a), atol=1e-10) else ""
            return report(False, "previous-token score", f"off by {format_number(np.max(np.abs(got - want)), spec='.3g')}{hint}")
    return report(True, "previous-token score")


def _all_rows(a: np.ndarray) -> np.ndarray:
    i = np.arange(1, a.shape[-1])
    return a[:, :, i, i - 1].mean(-1).mean(0)


def check_doubled_head(fn: Callable[[np.ndarray, np.ndarray, str], tuple[np.ndarray, np.ndarray]],
                       seed: int = 0) -> bool:
    """Exercise 7.2: ``fn(wq, wk, part)`` returns ``(Q', K')`` of shape (d, 2 d_h) with ``Q' K'ᵀ`` the symmetric
    (``part="symmetric"``) or skew (``"skew"``) part of ``W_Q W_Kᵀ``. Any factorisation with that product and that
    width passes."""
    rng = np.random.default_rng(seed)
    for d, dh in ((5, 2), (12, 4)):
        wq, wk = rng.normal(size=(d, dh)), rng.normal(size=(d, dh))
        for part in ("symmetric", "skew"):
            try:
                a, b = (np.asarray(x, dtype=float) for x in fn(wq, wk, part))
            except Exception as e:  # learners' code may raise anything
                return report(False, "doubled head", f"raised {type(e).__name__}: {e} for part={part!r}")
            if a.shape != (d, 2 * dh) or b.shape != (d, 2 * dh):
                return report(False, "doubled head", f"shapes {a.shape}, {b.shape}; expected ({d}, {2 * dh}) each")
            if not np.allclose(a @ b.T, part_form(wq, wk, part), atol=1e-10):
                return report(False, "doubled head", f"Q' K'ᵀ is not the {part} part (d = {d})")
    return report(True, "doubled head")


def check_auc(fn: Callable[[np.ndarray, np.ndarray], float], seed: int = 0) -> bool:
    """Exercise 7.3: ``fn(values, is_label)`` returns P(value of a labelled head > value of another), ties ½."""
    rng = np.random.default_rng(seed)
    cases = [(rng.normal(size=40), rng.random(40) < 0.3),
             (np.round(rng.normal(size=30)), rng.random(30) < 0.5)]  # with ties
    for i, (x, y) in enumerate(cases):
        y[:2], y[-2:] = True, False
        want = separation(x, y, n_resamples=10).auc
        try:
            got = float(fn(x, y))
        except Exception as e:  # learners' code may raise anything
            return report(False, "AUC", f"raised {type(e).__name__}: {e} on test case {i}")
        if not np.isclose(got, want, atol=1e-10):
            hint = " (ties count one half)" if i == 1 else ""
            return report(False, "AUC", f"got {got:.4f}, expected {want:.4f} on test case {i}{hint}")
    return report(True, "AUC")


def check_part_scale(fn: Callable[[np.ndarray, np.ndarray, str], float], seed: int = 0) -> bool:
    """Exercise 7.4: ``fn(wq, wk, part)`` returns the factor that gives the kept part (``"symmetric"`` or
    ``"skew"``) of ``W_Q W_Kᵀ`` the Frobenius norm of the whole form, ``‖M‖ / ‖M_s‖`` or ``‖M‖ / ‖M_n‖``."""
    rng = np.random.default_rng(seed)
    for d, dh in ((6, 2), (16, 4)):
        wq = rng.normal(size=(d, dh))
        wk = 0.5 * wq + rng.normal(size=(d, dh))
        for part in ("symmetric", "skew"):
            want = part_scale(wq, wk, f"{part}_matched")
            try:
                got = float(fn(wq, wk, part))
            except Exception as e:  # learners' code may raise anything
                return report(False, "norm-matched scale", f"raised {type(e).__name__}: {e} for part={part!r}")
            if not np.isclose(got, want, rtol=1e-9):
                hint = (" (that is the squared factor: take the square root)" if np.isclose(got, want**2, rtol=1e-9)
                        else " (that is the other part's factor)" if np.isclose(
                            got, part_scale(wq, wk, ("skew" if part == "symmetric" else "symmetric") + "_matched"),
                            rtol=1e-9) else "")
                return report(False, "norm-matched scale", f"got {got:.4f}, expected {want:.4f} for "
                                                           f"part={part!r}{hint}")
    return report(True, "norm-matched scale")


#: The p-values of a family of five tests, for Exercise 7.5 (Holm's method by hand).
HOLM_P_VALUES = (0.01, 0.04, 0.03, 0.20, 0.005)


def check_holm(adjusted, holding) -> bool:
    """Exercise 7.5 (by hand): ``adjusted`` are the Holm-adjusted p-values of :data:`HOLM_P_VALUES`, in their
    order, and ``holding`` the positions (1 to 5) of the tests that pass at a family-wise level of 0.05. Prints one
    line; returns True/False."""
    from ..stats import holm_adjusted

    name = "Holm's method"
    want = holm_adjusted(np.array(HOLM_P_VALUES))
    try:
        got = np.asarray(adjusted, dtype=float)
    except (TypeError, ValueError):
        return report(False, name, "give five numbers")
    if got.shape != (5,):
        return report(False, name, f"give the five adjusted p-values in the original order; got shape {got.shape}")
    if np.allclose(got, np.minimum(1, np.array(HOLM_P_VALUES) * 5)):
        return report(False, name, "that is Bonferroni (every p times 5); Holm multiplies the k-th smallest by 5 − k + 1")
    if not np.allclose(got, want, atol=1e-9):
        wrong = [k + 1 for k in range(5) if not np.isclose(got[k], want[k])]
        hint = (" (remember the running maximum: an adjusted p-value is never smaller than the one before it in "
                "sorted order)")
        return report(False, name, f"the adjusted p-values at positions {wrong} are wrong{hint}")
    want_hold = sorted(k + 1 for k in range(5) if want[k] < 0.05)
    if sorted(int(k) for k in holding) != want_hold:
        return report(False, name, "the adjusted p-values are right; a test passes when its adjusted p is below "
                                   "0.05")
    return report(True, name, f"tests {want_hold} pass; the others do not, although tests 2 and 3 had p < 0.05 alone")
