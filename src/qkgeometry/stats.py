"""Intervals, paired comparisons and the one verdict rule used everywhere in the book.

Every interval the book prints comes from this module, on top of :mod:`scipy.stats`:

- :func:`t_interval` for the mean of a few values (seeds): the Student-t interval, the right tool for n ≤ 5,
  where a percentile bootstrap only reproduces the minimum and the maximum.
- :func:`bootstrap_interval` for any statistic of a larger sample (layers, heads, sentences); it refuses n < 6.
- :func:`paired_difference` for "treatment minus baseline, paired by seed" (t-interval, paired t-test,
  sign count), optionally averaged within clusters first (models of one family).
- :func:`holm_adjusted` for a family of tests read together, and :func:`judge_family`, which gives each test of
  such a family its verdict at a family-wise error rate.
- :func:`paired_t_power` and :func:`seeds_for_power` size an experiment before it runs (the paired t-test's power
  for an effect of a given size; how many training seeds reach a target power); :func:`auc_power` and
  :func:`detectable_auc` do the same for an AUC, so that a test that failed to reject says what it could detect.
- :func:`difference_of_medians` for two independent groups (encoder vs decoder models, layers): a bootstrap
  interval of the difference of medians and a permutation test.
- :func:`judge` is the one verdict rule, with the same three outcomes in every chapter: a difference (the interval
  excludes 0), "suggested but not established" (every unit points the same way, the interval includes 0) and "no
  detectable difference"; an estimate below a stated floor gets no verdict. It returns a :class:`Verdict`: one
  plain sentence for the text (the number once) and the full statistics apart
  (:func:`qkgeometry.tables.stats_box` shows them in a collapsed box), or :meth:`Verdict.line`, all on one line
  (:func:`verdict` is ``judge(...).line()``).
- :func:`format_p` writes every p-value of the book: "p = 0.031", "p < 0.0001" (never "p = 0.0000").

State n, which seeds, and the unit (model, layer, head) next to every interval; :class:`Interval` carries them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as _scipy_stats

from .formatting import MINUS, format_number
from .formatting import plural as _plural

__all__ = [
    "MINUS", "MIN_BOOTSTRAP_N", "Interval", "PairedDifference", "Verdict", "auc_power", "bootstrap_interval",
    "clustered_difference_of_medians", "detectable_auc", "difference_of_medians", "format_interval", "format_number",
    "format_p", "holm_adjusted", "judge", "judge_family", "paired_difference", "paired_t_power", "seeds_for_power",
    "t_interval", "verdict",
]

#: The smallest p-value the book writes as a number; below it: "p < 0.0001".
P_FLOOR = 1e-4

#: Below this many values a bootstrap interval is refused: resampling 3 seeds gives back their min and max.
MIN_BOOTSTRAP_N = 6


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval.

    ``n`` is the number of independent units the interval is computed over, ``unit`` names them ("seed",
    "model", "layer", ...), and ``method`` says how the interval was computed ("t", "bootstrap",
    "bootstrap-BCa").
    """

    estimate: float
    low: float
    high: float
    n: int
    level: float = 0.95
    method: str = "t"
    unit: str = "value"

    @property
    def excludes_zero(self) -> bool:
        return bool(self.low > 0 or self.high < 0)

    def format(self, digits: int = 3, percent: bool = False) -> str:
        return format_interval(self.estimate, self.low, self.high, digits=digits, percent=percent)

    def __str__(self) -> str:
        return self.format()


@dataclass(frozen=True)
class PairedDifference:
    """``treated − baseline`` paired by unit (usually the training seed): the differences, their t-interval and tests.

    ``p_value`` is the two-sided paired t-test (:func:`scipy.stats.ttest_rel`); ``n_negative`` /
    ``n_positive`` count the units whose difference has that sign.
    """

    differences: np.ndarray = field(repr=False)
    interval: Interval
    p_value: float

    @property
    def n(self) -> int:
        return self.interval.n

    @property
    def n_negative(self) -> int:
        return int(np.sum(self.differences < 0))

    @property
    def n_positive(self) -> int:
        return int(np.sum(self.differences > 0))

    @property
    def same_sign(self) -> bool:
        """True when every unit's difference has the same (non-zero) sign."""
        return self.n > 0 and (self.n_negative == self.n or self.n_positive == self.n)


def _values(values: Sequence[float] | np.ndarray, name: str = "values") -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError(f"{name}: got no values; pass at least two numbers (one per seed, model or layer).")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: contains NaN or infinite values; drop or recompute them before taking an "
                         "interval.")
    return x


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level: must lie strictly between 0 and 1 (e.g. 0.95), got {level!r}.")


def format_interval(estimate: float, low: float, high: float, digits: int = 3, percent: bool = False) -> str:
    """``"0.123 [0.100, 0.150]"`` (or ``"12.3% [10.0%, 15.0%]"`` with ``percent=True``).

    Book: every interval printed in chapters 3–5.
    """
    scale, d, sign = (100, max(digits - 2, 0), "%") if percent else (1, digits, "")
    f = lambda v: f"{format_number(scale * v, decimals=d)}{sign}"  # noqa: E731
    return f"{f(estimate)} [{f(low)}, {f(high)}]"


def t_interval(values: Sequence[float] | np.ndarray, level: float = 0.95, unit: str = "value") -> Interval:
    """Student-t interval of the mean of ``values``: mean ± t_{n−1} · s / √n (s with ddof = 1).

    Use it for a handful of seeds. With n = 1 the interval is undefined and this raises.

    >>> t_interval([1.0, 2.0, 3.0]).format(2)
    '2.00 [−0.48, 4.48]'

    Book: used for seed-level intervals in chapters 3 and 5 (n ≤ 5).
    """
    _check_level(level)
    x = _values(values)
    if x.size < 2:
        raise ValueError(f"values: a t-interval needs at least 2 values, got {x.size}; run more seeds.")
    mean = float(x.mean())
    half = float(_scipy_stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Interval(mean, mean - half, mean + half, int(x.size), level, "t", unit)


def bootstrap_interval(values: Sequence[float] | np.ndarray, statistic: Callable[..., float] = np.median,
                       level: float = 0.95, n_resamples: int = 9999, seed: int = 0, method: str = "BCa",
                       unit: str = "value") -> Interval:
    """Bootstrap interval of ``statistic`` over ``values`` (:func:`scipy.stats.bootstrap`, BCa by default).

    Refuses fewer than :data:`MIN_BOOTSTRAP_N` values: use :func:`t_interval` for a few seeds.
    ``statistic`` must accept an ``axis`` keyword (``np.median``, ``np.mean`` do).

    Book: used for layer- and model-level intervals in chapter 4 (n ≥ 6).
    """
    _check_level(level)
    x = _values(values)
    if x.size < MIN_BOOTSTRAP_N:
        raise ValueError(f"values: a bootstrap over {x.size} values only reproduces their range; use "
                         f"t_interval (or collect at least {MIN_BOOTSTRAP_N} values).")
    if method not in ("BCa", "percentile", "basic"):
        raise ValueError(f"method: must be 'BCa', 'percentile' or 'basic', got {method!r}.")
    estimate = float(statistic(x))
    if np.ptp(x) == 0:  # degenerate: every value equal
        return Interval(estimate, estimate, estimate, int(x.size), level, f"bootstrap-{method}", unit)
    res = _scipy_stats.bootstrap((x,), statistic, confidence_level=level, n_resamples=n_resamples,
                                 method=method, rng=np.random.default_rng(seed), vectorized=True)
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):  # BCa can fail on very skewed small samples
        res = _scipy_stats.bootstrap((x,), statistic, confidence_level=level, n_resamples=n_resamples,
                                     method="percentile", rng=np.random.default_rng(seed), vectorized=True)
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        method = "percentile"
    return Interval(estimate, low, high, int(x.size), level, f"bootstrap-{method}", unit)


def paired_difference(treated: Sequence[float] | np.ndarray, baseline: Sequence[float] | np.ndarray,
                      level: float = 0.95, unit: str = "seed",
                      clusters: Sequence[Any] | np.ndarray | None = None) -> PairedDifference:
    """``treated − baseline`` paired element by element (same seed, same sentence...), with a t-interval of
    the mean difference and the two-sided paired t-test.

    ``clusters`` (one label per pair) counts the evidence at the level it replicates: pairs that share a label
    (models of one family, layers of one model) are first averaged into one difference per cluster, and the
    interval, the test and the sign counts run over those cluster means; ``unit`` then names the cluster
    ("family").

    >>> pd_ = paired_difference([6.179, 6.164, 6.156], [6.186, 6.187, 6.192])
    >>> pd_.n, pd_.same_sign, pd_.interval.excludes_zero
    (3, True, False)
    >>> paired_difference([3, 5, 1, 2], [1, 1, 0, 0], unit="family", clusters=["a", "a", "b", "b"]).differences
    array([3. , 1.5])

    Book: chapter 5, treatment against baseline with the same seeds; chapter 4, encoder against decoder stacks
    clustered by family.
    """
    t = _values(treated, "treated")
    b = _values(baseline, "baseline")
    if t.shape != b.shape:
        raise ValueError(f"treated and baseline: must pair one to one, got {t.size} and {b.size} values.")
    diffs = t - b
    if clusters is not None:
        labels = np.asarray(clusters, dtype=object).ravel()
        if labels.size != diffs.size:
            raise ValueError(f"clusters: needs one label per pair, got {labels.size} labels for {diffs.size} pairs.")
        order = list(dict.fromkeys(labels.tolist()))  # first-appearance order
        diffs = np.array([diffs[labels == label].mean() for label in order])
    interval = t_interval(diffs, level, unit)
    if np.ptp(diffs) == 0:
        p = 0.0 if diffs[0] != 0 else 1.0
    else:
        p = float(_scipy_stats.ttest_1samp(diffs, 0.0).pvalue)
    return PairedDifference(diffs, interval, p)


def holm_adjusted(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (controls the family-wise error rate at any level, with
    no assumption on how the tests depend on each other): the k-th smallest p is multiplied by (m − k + 1), the
    running maximum is taken, and the result is capped at 1. Returned in the input order.

    >>> holm_adjusted([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.06, 0.06]

    Book: chapter 3, the objective comparisons as one family of tests.
    """
    p = _values(p_values, "p_values")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p_values: every p-value must lie in [0, 1].")
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted
    return out


def difference_of_medians(group_a: Sequence[float] | np.ndarray, group_b: Sequence[float] | np.ndarray,
                          level: float = 0.95, n_resamples: int = 9999, seed: int = 0,
                          alternative: str = "two-sided", unit: str = "value") -> tuple[Interval, float]:
    """``median(a) − median(b)`` for two independent groups: a percentile bootstrap interval (resampling each
    group) and the p-value of a permutation test of "no difference" (:func:`scipy.stats.permutation_test`).

    ``alternative`` is passed to the permutation test ("greater": a's median is larger). ``n`` in the returned
    interval is ``len(a) + len(b)``; state both group sizes next to it.

    Book: chapter 4, encoders against decoders.
    """
    _check_level(level)
    a, b = _values(group_a, "group_a"), _values(group_b, "group_b")
    if a.size < 2 or b.size < 2:
        raise ValueError(f"group_a and group_b: need at least 2 values each, got {a.size} and {b.size}.")

    def stat(x, y, axis=-1):
        return np.median(x, axis=axis) - np.median(y, axis=axis)

    estimate = float(stat(a, b))
    res = _scipy_stats.bootstrap((a, b), stat, confidence_level=level, n_resamples=n_resamples,
                                 method="percentile", rng=np.random.default_rng(seed), vectorized=True)
    perm = _scipy_stats.permutation_test((a, b), stat, n_resamples=n_resamples, alternative=alternative,
                                         rng=np.random.default_rng(seed), vectorized=True)
    interval = Interval(estimate, float(res.confidence_interval.low), float(res.confidence_interval.high),
                        int(a.size + b.size), level, "bootstrap", unit)
    return interval, float(perm.pvalue)


def clustered_difference_of_medians(group_a: Sequence[float] | np.ndarray, group_b: Sequence[float] | np.ndarray,
                                    clusters_a: Sequence[Any], clusters_b: Sequence[Any], level: float = 0.95,
                                    n_resamples: int = 9999, seed: int = 0, unit: str = "family") -> Interval:
    """``median(a) − median(b)`` with a percentile bootstrap that resamples whole **clusters** (model families), not
    single values: the interval counts the evidence at the level it replicates. ``clusters_a`` / ``clusters_b``
    label each value; a label may hold values of both groups (a family with encoders and decoders). A resample that
    draws no value of one group is drawn again. ``n`` is the number of clusters.

    >>> iv = clustered_difference_of_medians([1, 1.1, 2, 2.1], [0, 0.1, 1, 1.1], ["x", "x", "y", "y"],
    ...                                      ["x", "x", "y", "y"], n_resamples=999)
    >>> iv.n, iv.unit, round(iv.estimate, 2)
    (2, 'family', 1.0)

    Book: chapter 4, encoders against decoders counted by family.
    """
    _check_level(level)
    a, b = _values(group_a, "group_a"), _values(group_b, "group_b")
    la, lb = np.asarray(clusters_a, dtype=object).ravel(), np.asarray(clusters_b, dtype=object).ravel()
    if la.size != a.size or lb.size != b.size:
        raise ValueError(f"clusters_a and clusters_b: need one label per value, got {la.size} for {a.size} and "
                         f"{lb.size} for {b.size}.")
    labels = list(dict.fromkeys([*la.tolist(), *lb.tolist()]))
    if len(labels) < 2:
        raise ValueError(f"clusters: need at least 2 clusters to resample, got {len(labels)}.")
    index = {c: k for k, c in enumerate(labels)}
    rng = np.random.default_rng(seed)
    counts = np.empty((0, len(labels)), dtype=np.int64)
    while len(counts) < n_resamples:  # how often each cluster is drawn, one row per resample
        picks = rng.integers(0, len(labels), (n_resamples, len(labels)))
        drawn = np.stack([np.bincount(row, minlength=len(labels)) for row in picks])
        ok = (drawn @ np.bincount([index[c] for c in la], minlength=len(labels)) > 0) & \
             (drawn @ np.bincount([index[c] for c in lb], minlength=len(labels)) > 0)  # both groups drawn
        counts = np.concatenate([counts, drawn[ok]])[:n_resamples]
    draws = (_resampled_medians(a, np.array([index[c] for c in la]), counts)
             - _resampled_medians(b, np.array([index[c] for c in lb]), counts))
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(np.median(a) - np.median(b)), float(low), float(high), len(labels), level,
                    "bootstrap-cluster", unit)


def _resampled_medians(values: np.ndarray, cluster: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The median of each resample that repeats every value as often as its cluster was drawn (``counts``: one row
    per resample, one column per cluster), exactly as ``np.median`` of the concatenated values, without building
    them: the two middle order statistics are read from the cumulative counts over the sorted values."""
    order = np.argsort(values, kind="stable")
    v, weights = values[order], counts[:, cluster[order]]
    cum = np.cumsum(weights, axis=1)
    total = cum[:, -1]
    lo = np.argmax(cum > ((total - 1) // 2)[:, None], axis=1)
    hi = np.argmax(cum > (total // 2)[:, None], axis=1)
    return (v[lo] + v[hi]) / 2


def _below_floor(interval: Interval, floor: float) -> bool:
    """True when ``floor`` > 0 and the estimate is smaller than it in size: too small an effect to call."""
    if not (np.isfinite(floor) and floor >= 0):
        raise ValueError(f"floor: the smallest effect worth a verdict, a number >= 0; got {floor!r}.")
    return floor > 0 and abs(interval.estimate) < floor


def verdict(result: Interval | PairedDifference, larger: str, smaller: str, subject: str = "the difference",
            digits: int = 3, floor: float = 0.0) -> str:
    """``judge(result, larger, smaller, subject, floor=floor).line(digits)``: the one rule (:func:`judge`) written
    as one line with its statistics, for text that has no box beside it.

    >>> verdict(t_interval([0.2, 0.3, 0.25]), "encoder more symmetric", "decoder more symmetric",
    ...         "symmetry gap")
    'encoder more symmetric: symmetry gap 0.250 [0.126, 0.374] (95% t-interval, n = 3 values)'
    >>> verdict(t_interval([0.002, 0.003, 0.0025]), "higher", "lower", "loss gap", digits=4, floor=0.01)
    'below the effect-size floor of 0.01 (no verdict): loss gap 0.0025 [0.0013, 0.0037] (95% t-interval, n = 3 values)'
    """
    return judge(result, larger, smaller, subject, floor=floor).line(digits)


def format_p(p: float) -> str:
    """A p-value as the book writes it: two significant digits, and ``"p < 0.0001"`` below :data:`P_FLOOR`.

    >>> format_p(0.0312), format_p(0.5), format_p(0.0), format_p(3e-7), format_p(0.00012)
    ('p = 0.031', 'p = 0.5', 'p < 0.0001', 'p < 0.0001', 'p = 0.00012')
    """
    p = float(p)
    if not np.isfinite(p) or p < 0 or p > 1:
        raise ValueError(f"p: a p-value lies in [0, 1], got {p!r}.")
    return "p < 0.0001" if p < P_FLOOR else f"p = {p:.2g}"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison, for a page: :attr:`sentence` for the text, :attr:`details` for a box.

    ``outcome`` is ``"difference"`` (the interval excludes 0), ``"suggested"`` (it includes 0 but every unit
    agrees), ``"none"`` (no detectable difference) or ``"below floor"`` (an estimate smaller than the stated
    effect-size floor); ``claim`` is what that outcome says in words.
    """

    outcome: str
    claim: str
    subject: str
    interval: Interval
    p_value: float | None = None
    test: str = ""
    #: Holm-adjusted p-value when the comparison is one of a family (:func:`judge_family`), with the family's size.
    p_adjusted: float | None = None
    family_size: int = 1
    floor: float = 0.0

    @property
    def estimate_text(self) -> str:
        """The estimate and its interval, once: ``"0.25 (95% CI 0.13 to 0.37)"``; below the floor, to its precision."""
        i = self.interval
        f = lambda v: format_number(v, self._scale)  # noqa: E731
        return f"{f(i.estimate)} ({round(100 * i.level)}% CI {f(i.low)} to {f(i.high)})"

    @property
    def _scale(self) -> float | None:  # two significant digits of the half-width, or of the floor below it
        i = self.interval
        below = self.outcome == "below floor" and self.floor
        return self.floor if below else (i.high - i.low) / 2 if i.high > i.low else abs(i.estimate) or None

    @property
    def sentence(self) -> str:
        """One plain sentence with the number once ("Encoders are more symmetric: gap 0.12 (95% CI 0.05 to 0.20).")."""
        claim = self.claim[:1].upper() + self.claim[1:]
        return f"{claim}: {self.subject} {self.estimate_text}."

    def line(self, digits: int = 3) -> str:
        """The verdict on one line with its statistics: the claim, the estimate and its interval to ``digits``
        decimals, the method and n with its unit (``"the encoder is more symmetric: symmetry gap 0.250 [0.126,
        0.374] (95% t-interval, n = 3 values)"``)."""
        i = self.interval
        method = {"t": "t-interval"}.get(i.method, i.method.replace("bootstrap-", "bootstrap ")
                                         + (" interval" if i.method.startswith("bootstrap") else ""))
        units = i.unit if i.n == 1 else _plural(i.unit)
        detail = f"{self.subject} {i.format(digits)} ({round(100 * i.level)}% {method}, n = {i.n} {units})"
        if self.outcome == "suggested":  # "suggested but not established (direction)" + why
            return f"{self.claim[:-1]}; every {i.unit} agrees, the interval includes 0): {detail}"
        return f"{self.claim}: {detail}"

    @property
    def details(self) -> dict[str, str]:
        """The full statistics, one line each (label → value)."""
        i = self.interval
        method = {"t": "Student t"}.get(i.method, i.method.replace("bootstrap-", "bootstrap, "))
        units = i.unit if i.n == 1 else _plural(i.unit)
        rows = {"estimate": f"{self.subject} = {format_number(i.estimate, self._scale)}",
                f"{round(100 * i.level)}% interval": f"[{format_number(i.low, spec='.6g')}, {format_number(i.high, spec='.6g')}] ({method})",
                "n": f"{i.n} {units}"}
        if self.p_value is not None:
            rows["test"] = f"{self.test + ': ' if self.test else ''}{format_p(self.p_value)}"
        if self.p_adjusted is not None:
            rows["corrected"] = (f"Holm-adjusted over the {self.family_size} tests of its family: "
                                 f"{format_p(self.p_adjusted)}")
        if self.outcome == "below floor":
            rows["rule"] = f"the estimate is smaller in size than the stated floor of {self.floor:g}"
        elif self.p_adjusted is not None:
            rows["rule"] = {"difference": "the interval excludes 0 and the Holm-adjusted p is below 0.05",
                            "suggested": "the interval excludes 0 before the correction only, or it includes 0 "
                                         f"but every {i.unit} points the same way",
                            "none": "the interval includes 0"}[self.outcome]
        else:
            rows["rule"] = {"difference": "the interval excludes 0",
                            "suggested": f"the interval includes 0, but every {i.unit} points the same way",
                            "none": "the interval includes 0"}[self.outcome]
        return rows


def judge(result: Interval | PairedDifference | tuple, larger: str, smaller: str,
          subject: str = "the difference", test: str = "", floor: float = 0.0) -> Verdict:
    """The one verdict rule: the interval excludes 0 -> ``larger`` (estimate > 0) or ``smaller`` (estimate < 0),
    "established at this n"; it includes 0 but every unit points the same way (paired results only) -> "suggested
    but not established"; otherwise "no detectable difference". ``floor`` (in the estimate's units, e.g. 0.01 nats)
    is the smallest effect worth a verdict, stated before the numbers: an estimate smaller than it in size gets
    "below the floor" whatever its interval says. Returns a :class:`Verdict` (sentence apart from the statistics;
    :meth:`Verdict.line` on one line).

    ``result`` may also be the ``(interval, p)`` pair of :func:`difference_of_medians`; a
    :class:`PairedDifference` brings its paired t-test.

    >>> v = judge(t_interval([0.2, 0.3, 0.25]), "the encoder is more symmetric", "the decoder is more symmetric",
    ...           "symmetry gap")
    >>> v.sentence
    'The encoder is more symmetric: symmetry gap 0.25 (95% CI 0.13 to 0.37).'
    >>> v.details["n"], v.outcome
    ('3 values', 'difference')
    """
    p_value = None
    if isinstance(result, tuple):
        result, p_value = result
        test = test or "permutation test"
    if isinstance(result, PairedDifference):
        interval, same_sign = result.interval, result.same_sign and result.n > 1
        p_value, test = result.p_value, test or "paired t-test"
    elif isinstance(result, Interval):
        interval, same_sign = result, False
    else:
        raise TypeError(f"result: expected an Interval, a PairedDifference or (Interval, p), got "
                        f"{type(result).__name__}.")
    if _below_floor(interval, floor):
        outcome, claim = "below floor", f"below the effect-size floor of {floor:g} (no verdict)"
    elif interval.excludes_zero and p_value is not None and not p_value < 0.05:
        # the interval and its own test disagree (a percentile bootstrap of few units): the test decides
        outcome, claim = "suggested", (f"suggested but not established ({larger if interval.estimate > 0 else smaller}"
                                       f"; the interval excludes 0, the {test} gives {format_p(p_value)})")
    elif interval.excludes_zero:
        outcome, claim = "difference", larger if interval.estimate > 0 else smaller
    elif same_sign:
        direction = larger if interval.estimate > 0 else smaller
        outcome, claim = "suggested", f"suggested but not established ({direction})"
    else:
        outcome, claim = "none", "no detectable difference"
    return Verdict(outcome, claim, subject, interval, None if p_value is None else float(p_value), test,
                   floor=floor)


def judge_family(comparisons: Sequence[tuple], alpha: float = 0.05) -> list[Verdict]:
    """Verdicts for a family of paired comparisons read together, at family-wise error rate ``alpha`` (Holm).

    ``comparisons``: one ``(result, larger, smaller, subject)`` tuple per test, ``result`` a
    :class:`PairedDifference` (its paired t-test gives the p-value). A comparison is a *difference* only when its
    interval excludes 0 **and** its Holm-adjusted p-value is below ``alpha``; one whose interval excludes 0
    before the correction only is *suggested*, with the claim saying so. The intervals stay the unadjusted 95%
    intervals (say so next to them); :attr:`Verdict.details` shows both p-values.

    >>> a = paired_difference([1.0, 1.2, 0.9, 1.1], [0.0, 0.1, 0.0, 0.1])
    >>> b = paired_difference([0.30, 0.01, 0.22, 0.12], [0.0, 0.0, 0.0, 0.0])
    >>> [v.outcome for v in judge_family([(a, "up", "down", "gap a"), (b, "up", "down", "gap b")])]
    ['difference', 'suggested']

    Book: chapter 3, the objectives compared as one family of tests.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: the family-wise error rate, strictly between 0 and 1; got {alpha!r}.")
    if not comparisons:
        raise ValueError("comparisons: the family is empty; pass at least one (result, larger, smaller, subject).")
    for k, item in enumerate(comparisons):
        if len(item) != 4 or not isinstance(item[0], PairedDifference):
            raise TypeError(f"comparisons[{k}]: expected (PairedDifference, larger, smaller, subject), got {item!r}.")
    adjusted = holm_adjusted([item[0].p_value for item in comparisons])
    out = []
    for (result, larger, smaller, subject), p_adj in zip(comparisons, adjusted):
        v = judge(result, larger, smaller, subject)
        outcome, claim = v.outcome, v.claim
        if outcome == "difference" and p_adj >= alpha:
            direction = larger if v.interval.estimate > 0 else smaller
            outcome, claim = "suggested", (f"suggested but not established after correcting for "
                                           f"{len(comparisons)} tests ({direction})")
        out.append(Verdict(outcome, claim, subject, v.interval, v.p_value, v.test, float(p_adj), len(comparisons)))
    return out


# the power of the tests above, sized before an experiment runs (one home: qkgeometry.power)
from .power import auc_power, detectable_auc, paired_t_power, seeds_for_power  # noqa: E402
