"""How many units a paired test or an AUC test needs, and what a test that failed to reject could have detected:
the power side of :mod:`qkgeometry.stats` (which re-exports these names). Chapters 5 and 7.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as _scipy_stats

__all__ = ["auc_power", "detectable_auc", "paired_t_power", "seeds_for_power"]


def paired_t_power(effect: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided one-sample (paired) t-test at level ``alpha`` with ``n`` units, when the true mean
    difference is ``effect`` and the differences have standard deviation ``sd`` (noncentral t).

    >>> round(paired_t_power(1.0, 1.0, 10), 3)
    0.803
    """
    if not (np.isfinite(sd) and sd > 0):
        raise ValueError(f"sd: the standard deviation of the differences, a number > 0; got {sd!r}.")
    if int(n) != n or n < 2:
        raise ValueError(f"n: the number of units, an integer >= 2; got {n!r}.")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: the test's level, strictly between 0 and 1; got {alpha!r}.")
    df = int(n) - 1
    crit = _scipy_stats.t.ppf(1 - alpha / 2, df)
    nc = abs(effect) / sd * math.sqrt(n)
    return float(_scipy_stats.nct.sf(crit, df, nc) + _scipy_stats.nct.cdf(-crit, df, nc))


def seeds_for_power(effect: float, sd: float, power: float = 0.8, alpha: float = 0.05, n_max: int = 1000) -> int:
    """The smallest number of units (seeds) at which the paired t-test detects ``effect`` with probability
    ``power`` (:func:`paired_t_power`); ValueError when even ``n_max`` does not.

    >>> seeds_for_power(1.0, 1.0)
    10
    """
    if not 0 < power < 1:
        raise ValueError(f"power: a probability strictly between 0 and 1; got {power!r}.")
    for n in range(2, n_max + 1):
        if paired_t_power(effect, sd, n, alpha) >= power:
            return n
    raise ValueError(f"effect: {effect!r} with sd {sd!r} needs more than n_max = {n_max} units for power "
                     f"{power}; raise n_max or accept a larger detectable effect.")


def auc_power(auc: float, n_label: int, n_rest: int, alpha: float = 0.05) -> float:
    """Power of the two-sided rank test of "AUC = ½" (Mann-Whitney) at level ``alpha`` with ``n_label`` and
    ``n_rest`` units in the two groups, when the true AUC is ``auc``: the normal approximation with the null
    variance ``(n₁ + n₀ + 1) / (12 n₁ n₀)`` and Hanley and McNeil's variance under the alternative. Ties, strata
    and dependence between units are ignored: a guide to what a test could detect, not an exact figure.

    >>> round(auc_power(0.7, 30, 30), 2), round(auc_power(0.5, 30, 30), 3)
    (0.78, 0.05)
    """
    if not 0 <= auc <= 1:
        raise ValueError(f"auc: an area under the curve, from 0 to 1; got {auc!r}.")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: the test's level, strictly between 0 and 1; got {alpha!r}.")
    for name, n in (("n_label", n_label), ("n_rest", n_rest)):
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"{name}: the size of a group, a whole number >= 1; got {n!r}.")
    n1, n0 = int(n_label), int(n_rest)
    se0 = math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))
    a = max(auc, 1 - auc)  # the test is two-sided and symmetric about ½
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var1 = (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0)
    se1, z = math.sqrt(max(var1, 1e-300)), float(_scipy_stats.norm.ppf(1 - alpha / 2))
    return float(_scipy_stats.norm.sf((0.5 + z * se0 - a) / se1) + _scipy_stats.norm.cdf((0.5 - z * se0 - a) / se1))


def detectable_auc(n_label: int, n_rest: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """The smallest AUC above ½ that the rank test of :func:`auc_power` detects with probability ``power``
    (by symmetry, ``1 − detectable_auc`` below ½); 1.0 when no AUC reaches it.

    >>> round(detectable_auc(30, 30), 2)
    0.7
    """
    if not 0 < power < 1:
        raise ValueError(f"power: a probability strictly between 0 and 1; got {power!r}.")
    if auc_power(1.0, n_label, n_rest, alpha) < power:
        return 1.0
    from scipy.optimize import brentq

    return float(brentq(lambda a: auc_power(a, n_label, n_rest, alpha) - power, 0.5, 1.0, xtol=1e-6))
