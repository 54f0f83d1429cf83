"""Checkers for the exercises of chapter 8, "Does geometry come before function?".

Each checker compares the learner's function or answer with :mod:`qkgeometry.analyses.change_points`,
:mod:`qkgeometry.heads.form_views` or :mod:`qkgeometry.stats` on fresh inputs, prints a one-line verdict and returns
True/False.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import stats
from ..analyses.change_points import fraction_step
from ..heads.form_views import shift_contrast
from . import compare, report

__all__ = ["check_change_point", "check_lag_interval", "check_shift_contrast"]


def _sigmoid_cases(rng: np.random.Generator) -> list[tuple]:
    cases = []
    for centre, low, high, fraction in ((300.0, 0.0, 1.0, 0.5), (650.0, 2.0, -1.0, 0.25), (420.0, 0.1, 0.9, 0.75)):
        steps = np.arange(0, 1001, 20, dtype=float)
        values = low + (high - low) / (1 + np.exp(-(steps - centre) / rng.uniform(20, 80)))
        cases.append((steps, values, fraction))
    return cases


def check_change_point(fn: Callable[[np.ndarray, np.ndarray, float], float], seed: int = 0) -> bool:
    """Exercise 8.1: ``fn(steps, values, fraction)`` returns the first step at which the (unsmoothed) curve has
    gone ``fraction`` of the way from its first value to its last, interpolated linearly between logged steps; it
    must work for falling curves too."""
    cases = _sigmoid_cases(np.random.default_rng(seed))
    return compare(fn, lambda s, v, f: fraction_step(s, v, f, window=1), cases, "change point", atol=1e-6)


def check_lag_interval(fn: Callable[[np.ndarray], tuple[float, float, float]], seed: int = 0) -> bool:
    """Exercise 8.2: ``fn(lags)`` returns ``(mean, low, high)``: the mean lag over seeds and its 95% t-interval."""
    rng = np.random.default_rng(seed)
    for i, n in enumerate((5, 12)):
        lags = rng.normal(-40, 30, size=n)
        want = stats.t_interval(lags)
        try:
            got = tuple(float(v) for v in fn(lags))
        except Exception as e:  # learners' code may raise anything
            return report(False, "lag interval", f"raised {type(e).__name__}: {e} on test case {i}")
        if len(got) != 3:
            return report(False, "lag interval", f"returned {len(got)} values, expected (mean, low, high)")
        if not np.allclose(got, (want.estimate, want.low, want.high), atol=1e-8):
            z = lags.mean() + np.array([-1.96, 1.96]) * lags.std(ddof=1) / np.sqrt(n)
            hint = " (a normal quantile instead of Student's t?)" if np.allclose(got[1:], z, atol=1e-6) else ""
            return report(False, "lag interval", f"got {np.round(got, 2)}, expected "
                                                 f"{np.round((want.estimate, want.low, want.high), 2)}{hint}")
    return report(True, "lag interval")


def check_shift_contrast(fn: Callable[[np.ndarray], float], seed: int = 0) -> bool:
    """Exercise 8.3: ``fn(table)`` returns the shift contrast of a square position table: over rows i ≥ 1, the
    mean of G[i, i−1] minus the mean of the row's other visible entries (j ≤ i, j ≠ i−1), divided by the standard
    deviation of all visible entries (j ≤ i)."""
    rng = np.random.default_rng(seed)
    cases = [(rng.normal(size=(t, t)) + shift * np.eye(t, k=-1),) for t, shift in ((6, 0.0), (10, 2.0), (16, -1.0))]
    return compare(fn, shift_contrast, cases, "shift contrast", atol=1e-9)
