"""Does a head's geometry predict its job? Separations (AUC with intervals) and the chapter's hypotheses, tested
as two Holm families. Chapter 7.

:func:`separation` turns "labelled heads vs the rest" into an AUC with a bootstrap interval over heads and a
permutation test; :func:`rank_correlation` gives Spearman's ρ of two head scores with a bootstrap interval.

**Predictions of the algebra and empirical hypotheses.** At offset 0, ``xᵀ M x = xᵀ M_s x`` (``xᵀ M_n x ≡ 0``): a
head's current-token logit is set by ``M_s`` alone, and a duplicate token's (the same token met again) nearly so.
The hypotheses about those heads (kind ``"algebra"``) are predictions of that algebra under assumptions each one
states (``Hypothesis.assumption``: isotropic inputs, two occurrences of a token entering the head alike), not
identities; the others (kind ``"empirical"``) test readings of the split. :func:`hypothesis_family` applies Holm's correction within each kind,
and :func:`threshold_sensitivity` runs the family again with every label threshold scaled.

Conventions: the book's Notation page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import bootstrap, mannwhitneyu, permutation_test, rankdata, spearmanr

from ..stats import Interval, format_p, verdict
from .behaviour import relabel

__all__ = [
    "HYPOTHESES",
    "Hypothesis",
    "JobAnswer",
    "Separation",
    "hypothesis_family",
    "hypothesis_reading",
    "job_answer",
    "pooled_separation",
    "rank_correlation",
    "run_hypotheses",
    "separation",
    "separation_verdict",
    "threshold_sensitivity",
]

@dataclass(frozen=True)
class Separation:
    """How well one score separates heads with a label from the rest: ``auc`` = P(score of a labelled head >
    score of another head) (ties count ½), a percentile bootstrap interval resampling each group, and a
    two-sided permutation p-value of "AUC = ½"."""

    auc: float
    low: float
    high: float
    p_value: float
    n_label: int
    n_rest: int
    level: float = 0.95
    #: for a separation pooled at the model level (:func:`pooled_separation`): each model's own AUC
    per_model: tuple[float, ...] = ()

    def format(self, digits: int = 2) -> str:
        return f"{self.auc:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    @property
    def n_models(self) -> int:
        return len(self.per_model)

    @property
    def interval(self) -> Interval:
        """``AUC − ½`` as an :class:`~qkgeometry.stats.Interval` (for :func:`qkgeometry.stats.verdict`): over
        heads, or over models for a separation pooled at the model level."""
        if self.per_model:
            return Interval(self.auc - 0.5, self.low - 0.5, self.high - 0.5, self.n_models, self.level,
                            "bootstrap-percentile", "model")
        return Interval(self.auc - 0.5, self.low - 0.5, self.high - 0.5, self.n_label + self.n_rest, self.level,
                        "bootstrap-percentile", "head")

    def power(self, auc: float = 0.6, alpha: float = 0.05) -> float:
        """For a separation pooled at the model level: the power of a t-test over models (their own AUCs, with
        the spread they show) to detect a mean AUC of ``auc``; NaN with fewer than two models or no spread. How
        much a "not detected" here says."""
        from ..stats import paired_t_power

        aucs = np.asarray(self.per_model, dtype=float)
        if len(aucs) < 2 or not np.std(aucs, ddof=1) > 0:
            return float("nan")
        return paired_t_power(abs(auc - 0.5), float(np.std(aucs, ddof=1)), len(aucs), alpha)


def _auc(pos: np.ndarray, neg: np.ndarray, axis: int = -1) -> np.ndarray:
    """AUC of ``pos`` against ``neg`` along ``axis`` (ties count ½): the Mann-Whitney U of ``pos`` over
    ``n_pos · n_neg``, vectorised as :func:`scipy.stats.bootstrap` and :func:`scipy.stats.permutation_test` call it."""
    u = mannwhitneyu(pos, neg, axis=axis, method="asymptotic").statistic
    return u / (np.shape(pos)[axis] * np.shape(neg)[axis])


def _two_sided_p(observed: float, null: np.ndarray) -> float:
    """The two-sided permutation p-value as :func:`scipy.stats.permutation_test` computes it from its null
    distribution (counts include the observed arrangement; the smaller tail doubled, capped at 1)."""
    eps = 1e-14 * max(1.0, abs(observed))
    less = (np.sum(null <= observed + eps) + 1) / (null.size + 1)
    greater = (np.sum(null >= observed - eps) + 1) / (null.size + 1)
    return float(min(1.0, 2 * min(less, greater)))


def separation(values, is_label, n_resamples: int = 2000, level: float = 0.95, seed: int = 0,
               strata=None) -> Separation | None:
    """AUC of ``values`` for heads with ``is_label`` against the rest, with a percentile bootstrap interval that
    resamples each group (:func:`scipy.stats.bootstrap`) and a two-sided permutation test of "AUC = ½"
    (:func:`scipy.stats.permutation_test`). ``strata`` (e.g. the model of each head): values are first turned
    into within-stratum percentiles and labels are permuted inside strata only (a pooled test over models of
    different widths; scipy has no stratified permutation, so those permutations are drawn here and the p-value
    is computed by scipy's rule). Returns None when either group has fewer than 2 heads or no value is finite.
    Chapter 7."""
    x = np.asarray(values, dtype=np.float64)
    y = np.asarray(is_label, dtype=bool)
    if x.shape != y.shape:
        raise ValueError(f"values and is_label: must have the same length; got {x.shape} and {y.shape}.")
    ok = np.isfinite(x)
    x, y = x[ok], y[ok]
    st = None if strata is None else np.asarray(strata)[ok]
    if st is not None:
        x = x.copy()
        for s in np.unique(st):
            sel = st == s
            x[sel] = rankdata(x[sel]) / sel.sum()
    if y.sum() < 2 or (~y).sum() < 2:
        return None
    pos, neg = x[y], x[~y]
    auc = float(_auc(pos, neg))
    rng = np.random.default_rng(seed)
    boot = bootstrap((pos, neg), _auc, n_resamples=n_resamples, confidence_level=level, method="percentile",
                     vectorized=True, rng=rng)
    low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    if st is None:
        p = float(permutation_test((pos, neg), _auc, permutation_type="independent", n_resamples=n_resamples,
                                   vectorized=True, alternative="two-sided", rng=rng).pvalue)
    else:  # every draw permutes the labels within each stratum: sort random keys inside strata
        order = np.lexsort((rng.random((n_resamples, len(y))), np.broadcast_to(st, (n_resamples, len(y)))), axis=-1)
        base = np.lexsort((np.arange(len(y)), st))  # the positions of each stratum, in the same stratum order
        shuffled = np.empty((n_resamples, len(y)), dtype=bool)
        shuffled[:, base] = y[order]
        ranks = rankdata(x)
        n1, n0 = int(y.sum()), int((~y).sum())
        null = ((shuffled * ranks).sum(-1) - n1 * (n1 + 1) / 2) / (n1 * n0)
        p = _two_sided_p(auc, null)
    return Separation(auc, low, high, p, int(y.sum()), int((~y).sum()), level)


def _auc_by_rank(ranks: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """AUC of the labelled units from their (tie-averaged) ranks, for each row of ``labels`` (..., n)."""
    n1 = labels.sum(-1)
    n0 = labels.shape[-1] - n1
    return ((labels * ranks).sum(-1) - n1 * (n1 + 1) / 2) / (n1 * n0)


def pooled_separation(values, is_label, models, n_resamples: int = 2000, level: float = 0.95,
                      seed: int = 0) -> Separation | None:
    """A separation pooled at the level where the evidence replicates, the model: the estimate is the mean of the
    models' own AUCs (each model counts once, however many heads it has), its interval a two-stage percentile
    bootstrap (models resampled, then the labelled heads and the rest within each), its p-value a permutation test
    of "every model's AUC is ½" that permutes labels within models only. Models where either group has fewer than 2
    heads are left out. Returns None when fewer than two models remain. The heads of one model share its training,
    so they are not counted as independent draws. Chapter 7."""
    x = np.asarray(values, dtype=np.float64)
    y = np.asarray(is_label, dtype=bool)
    m = np.asarray(models)
    if not x.shape == y.shape == m.shape:
        raise ValueError(f"values, is_label and models: must have the same length; got {x.shape}, {y.shape} and "
                         f"{m.shape}.")
    ok = np.isfinite(x)
    parts = []
    for name in dict.fromkeys(m[ok]):
        sel = ok & (m == name)
        if y[sel].sum() >= 2 and (~y[sel]).sum() >= 2:
            parts.append((x[sel], y[sel]))
    if len(parts) < 2:
        return None
    per_model = [float(_auc_by_rank(rankdata(v), lab)) for v, lab in parts]
    auc = float(np.mean(per_model))
    rng = np.random.default_rng(seed)
    boot = np.empty(n_resamples)
    for b in range(n_resamples):
        aucs = []
        for i in rng.integers(0, len(parts), len(parts)):
            v, lab = parts[i]
            pos = rng.choice(v[lab], lab.sum())
            neg = rng.choice(v[~lab], (~lab).sum())
            both = np.concatenate([pos, neg])
            aucs.append(float(_auc_by_rank(rankdata(both), np.arange(len(both)) < len(pos))))
        boot[b] = np.mean(aucs)
    alpha = (1 - level) / 2
    low, high = (float(q) for q in np.quantile(boot, [alpha, 1 - alpha]))
    null = np.zeros(n_resamples)
    for v, lab in parts:
        shuffled = rng.permuted(np.broadcast_to(lab, (n_resamples, len(lab))), axis=-1)
        null += _auc_by_rank(rankdata(v), shuffled)
    null /= len(parts)
    return Separation(auc, low, high, _two_sided_p(auc, null), int(sum(lab.sum() for _, lab in parts)),
                      int(sum((~lab).sum() for _, lab in parts)), level, tuple(per_model))


def separation_verdict(sep: Separation | None, larger: str, smaller: str) -> str:
    """One sentence from a :class:`Separation`, by :func:`qkgeometry.stats.verdict` on ``AUC − ½``. Chapter 7."""
    if sep is None:
        return "not testable: fewer than 2 heads in a group"
    return (verdict(sep.interval, larger, smaller, subject="AUC − ½", digits=2)
            + f"; AUC {sep.format()}, permutation {format_p(sep.p_value)}, {sep.n_label} labelled vs "
              f"{sep.n_rest} other heads")


@dataclass(frozen=True)
class Hypothesis:
    """One hypothesis, written before looking: heads with ``label`` have a ``direction`` ("higher" / "lower")
    ``score`` than the other heads, in ``models`` ("rotary", "bias", "all"). ``kind``: ``"algebra"`` when the
    behaviour is set by ``M_s`` alone at offset 0 and the hypothesis predicts it from the algebra under the stated
    ``assumption``, else ``"empirical"``."""

    key: str
    label: str
    score: str
    direction: str
    models: str
    statement: str
    kind: str = "empirical"
    assumption: str = ""
    #: the hypothesis in a few plain words, for a chapter's opening answer
    short: str = ""


#: The chapter's hypotheses, in the order they are written on the page.
HYPOTHESES: tuple[Hypothesis, ...] = (
    Hypothesis("H1", "duplicate", "positive_share", "higher", "all",
               "Duplicate-token heads need xᵢᵀ M xⱼ large when xⱼ ≈ xᵢ, which only Mₛ "
               "sets: Mₛ should carry mostly positive eigen-energy.", "algebra",
               "the two occurrences of a token enter the head alike (xⱼ ≈ xᵢ: position and context change them "
               "little)",
               short="duplicate-token heads carry more positive energy in Mₛ"),
    Hypothesis("H2", "duplicate", "trace_z", "higher", "all",
               "Duplicate-token heads have a large positive trace of M (xᵀ M x = xᵀ Mₛ x large "
               "on average).", "algebra",
               "xⱼ ≈ xᵢ as in H1, and isotropic inputs: a token's advantage on itself, tr(MC) with C the inputs' covariance, follows tr M only when C ∝ I",
               short="duplicate-token heads have a larger trace"),
    Hypothesis("H3", "current", "trace_z", "higher", "all",
               "Current-token heads have a large positive trace of M (a token's logit on itself is "
               "xᵀ Mₛ x).", "algebra",
               "isotropic inputs: a token's advantage on itself, tr(MC) with C the inputs' covariance, follows tr M only when C ∝ I",
               short="current-token heads have a larger trace"),
    Hypothesis("H4", "current", "symmetry", "higher", "all",
               "Current-token heads compare a token with itself, which only Mₛ can do: their W_qk is more "
               "symmetric.", "algebra",
               "a head that must attend to itself has little use for Mₙ (the algebra asks only for a large xᵀMₛx; "
               "the symmetry score also counts how much of M is Mₙ)",
               short="current-token heads are more symmetric"),
    Hypothesis("H5", "previous", "trace_gain_m1", "higher", "rotary",
               "Previous-token heads in rotary models show it at Δ = −1: tr M(−1) "
               "exceeds tr M(0).",
               short="previous-token heads of rotary models gain at offset −1"),
    Hypothesis("H6", "previous", "symmetry", "lower", "all",
               "Previous-token heads are order-sensitive: their W_qk is less symmetric (the intuition that "
               "skew means 'attend by order').",
               short="previous-token heads are less symmetric"),
    Hypothesis("H7", "first", "directionality", "lower", "all",
               "Sink heads are column-dominated: directionality below that of other heads.",
               short="sink heads are more key-dominated"),
    Hypothesis("H8", "first", "key_bias", "higher", "bias",
               "In models with a query bias, sink heads carry a larger key-only bias term.",
               short="sink heads carry a larger key-bias term"),
    Hypothesis("H9", "routing", "symmetry", "lower", "all",
               "Routing heads (previous, next, induction) are more skew than the rest, as the routing/filtering "
               "reading of the split claims.",
               short="routing heads are more skew"),
)


def run_hypotheses(table: pd.DataFrame, hypotheses: Sequence[Hypothesis] = HYPOTHESES,
                    n_resamples: int = 2000, seed: int = 0, pooled_only: bool = False) -> pd.DataFrame:
    """Every hypothesis on every model and pooled over models: AUC, interval, permutation p, group sizes and the
    verdict sentence. ``table``: one row per head with a ``model`` column, ``is_<label>`` columns (``is_routing``
    is derived: previous, next or induction), geometric scores, and ``rotary`` / ``has_bias`` flags.
    ``pooled_only``: skip the per-model rows (a hypothesis met in one model only keeps that model's row).
    Chapter 7."""
    t = table.copy()
    routing = [c for c in ("is_previous", "is_next", "is_induction") if c in t]
    t["is_routing"] = t[routing].fillna(False).astype(bool).any(axis=1)
    rows = []
    for hyp in hypotheses:
        sel = t
        if hyp.models == "rotary":
            sel = t[t["rotary"]]
        elif hyp.models == "bias":
            sel = t[t["has_bias"]]
        col = f"is_{hyp.label}"
        groups = [(m, g) for m, g in sel.groupby("model", sort=False)] + [("pooled", sel)]
        if pooled_only and sel["model"].nunique() >= 2:
            groups = [("pooled", sel)]
        for name, g in groups:
            if col not in g or g[col].isna().all():
                continue
            lab = g[col].fillna(False).astype(bool).to_numpy()
            if name == "pooled" and g["model"].nunique() < 2:
                continue
            if name == "pooled":
                sep = pooled_separation(g[hyp.score].to_numpy(), lab, g["model"].to_numpy(), n_resamples, seed=seed)
            else:
                sep = separation(g[hyp.score].to_numpy(), lab, n_resamples, seed=seed)
            if hyp.direction == "higher":
                verdict_text = separation_verdict(sep, "confirmed (higher)", "reversed (lower)")
            else:
                verdict_text = separation_verdict(sep, "reversed (higher)", "confirmed (lower)")
            rows.append({"hypothesis": hyp.key, "kind": hyp.kind, "label": hyp.label, "score": hyp.score,
                         "expected": hyp.direction,
                         "model": name, "n_label": int(lab.sum()), "n_rest": int((~lab).sum()),
                         "auc": np.nan if sep is None else sep.auc, "low": np.nan if sep is None else sep.low,
                         "high": np.nan if sep is None else sep.high,
                         "p_value": np.nan if sep is None else sep.p_value, "verdict": verdict_text,
                         "n_models": np.nan if sep is None or name != "pooled" else sep.n_models,
                         "power_0_6": np.nan if sep is None or name != "pooled" else sep.power(0.6)})
    return pd.DataFrame(rows)


def hypothesis_family(results: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per hypothesis (pooled over models where it was tested in two or more, else its one model) with
    the permutation p-value adjusted by Holm's method within its kind (``"algebra"`` and ``"empirical"`` are two
    families), and ``holds``: the AUC lies on the stated side of ½ and the Holm-adjusted p is below ``alpha``.
    ``results``: from :func:`run_hypotheses`. Chapter 7."""
    from ..stats import holm_adjusted

    rows = []
    for _, g in results.groupby("hypothesis", sort=False):
        pooled = g[g["model"] == "pooled"]
        rows.append((pooled if len(pooled) else g).iloc[0])
    fam = pd.DataFrame(rows).reset_index(drop=True)
    fam["p_holm"] = np.nan
    for kind in fam["kind"].unique():
        sel = (fam["kind"] == kind) & fam["p_value"].notna()
        if sel.any():
            fam.loc[sel, "p_holm"] = holm_adjusted(fam.loc[sel, "p_value"].to_numpy())
    side = np.where(fam["expected"] == "higher", fam["auc"] > 0.5, fam["auc"] < 0.5)
    fam["holds"] = side & (fam["p_holm"] < alpha)
    bounds = {c: fam[c] if c in fam else pd.Series(np.nan, index=fam.index) for c in ("low", "high")}
    fam["reading"] = [hypothesis_reading(e, a, lo, hi, p, alpha) for e, a, lo, hi, p in
                      zip(fam["expected"], fam["auc"], bounds["low"], bounds["high"], fam["p_holm"])]
    return fam


def hypothesis_reading(expected: str, auc: float, low: float, high: float, p_holm: float,
                       alpha: float = 0.05) -> str:
    """A hypothesis's verdict in words, with its bound when nothing is detected: "holds", "reversed", "not
    established" (the interval excludes ½ but Holm's correction does not let the test pass, said with its p), or
    "not detected" with the AUC the interval still allows on the predicted side. Chapter 7.

    >>> hypothesis_reading("higher", 0.55, 0.45, 0.66, 0.4)
    'not detected (the interval allows an AUC up to 0.66)'
    >>> hypothesis_reading("lower", 0.40, 0.31, 0.48, 0.09)
    'not established (its interval excludes 0.5, but the Holm-adjusted permutation p is 0.09)'
    """
    from ..stats import format_number, format_p

    if not np.isfinite(auc):
        return "not testable"
    predicted = auc > 0.5 if expected == "higher" else auc < 0.5
    if np.isfinite(p_holm) and p_holm < alpha:
        return "holds" if predicted else "reversed"
    if low > 0.5 or high < 0.5:
        return (f"not established (its interval excludes 0.5, but the Holm-adjusted permutation "
                f"{format_p(min(p_holm, 1.0))})").replace("p = ", "p is ")
    bound = (f"up to {format_number(high, decimals=2)}" if expected == "higher" else
             f"down to {format_number(low, decimals=2)}")
    return f"not detected (the interval allows an AUC {bound})"



def threshold_sensitivity(table: pd.DataFrame, factors: Sequence[float] = (0.5, 0.75, 1.0, 1.25, 1.5),
                          hypotheses: Sequence[Hypothesis] = HYPOTHESES, n_resamples: int = 500,
                          seed: int = 0) -> pd.DataFrame:
    """Every hypothesis, pooled, with the labels made at each threshold ``factor``: one row per (factor,
    hypothesis) with the columns of :func:`hypothesis_family` and the factor. ``table``: recorded heads of
    several models with the ``rotary`` / ``has_bias`` flags. Chapter 7."""
    rows = []
    for f in factors:
        res = run_hypotheses(relabel(table, f), hypotheses, n_resamples, seed, pooled_only=True)
        fam = hypothesis_family(res)
        fam.insert(0, "factor", f)
        rows.append(fam)
    return pd.concat(rows, ignore_index=True)



def _spearman(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's ρ along ``axis``, vectorised: the Pearson correlation of the ranks."""
    ra, rb = rankdata(a, axis=axis), rankdata(b, axis=axis)
    ra = ra - ra.mean(axis=axis, keepdims=True)
    rb = rb - rb.mean(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ra * rb).sum(axis) / np.sqrt((ra * ra).sum(axis) * (rb * rb).sum(axis))


def rank_correlation(x, y, n_resamples: int = 2000, level: float = 0.95, seed: int = 0,
                     unit: str = "head") -> Interval:
    """Spearman's ρ of ``x`` and ``y`` (pairs with a non-finite value dropped) with a percentile bootstrap
    interval over pairs (:func:`scipy.stats.bootstrap`, paired; resamples whose ρ is undefined are dropped).
    Chapter 7."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if len(a) < 4:
        raise ValueError(f"x and y: need at least 4 finite pairs; got {len(a)}.")
    rho = float(spearmanr(a, b).statistic)
    boot = bootstrap((a, b), _spearman, paired=True, vectorized=True, n_resamples=n_resamples,
                     confidence_level=level, method="percentile", rng=np.random.default_rng(seed))
    dist = boot.bootstrap_distribution[np.isfinite(boot.bootstrap_distribution)]
    alpha = (1 - level) / 2
    low, high = (float(v) for v in np.quantile(dist, [alpha, 1 - alpha]))
    return Interval(rho, low, high, len(a), level, "bootstrap-percentile", unit)


@dataclass(frozen=True)
class JobAnswer:
    """The answer to "what does a head's geometry say about its job?" in the pieces a chapter opens with: ``head``
    (a few plain words), ``algebra`` and ``readings`` (which predictions of each family hold, and the others with
    their bound) and ``firmness`` (how many verdicts change with the label thresholds)."""

    head: str
    algebra: str
    readings: str
    firmness: str


def _listed(rows: pd.DataFrame) -> str:
    from ..claims import join_words

    by_key = {h.key: h for h in HYPOTHESES}
    return join_words([f"{by_key[k].short or by_key[k].statement} ({k})" for k in rows["hypothesis"]])


def job_answer(family: pd.DataFrame, sensitivity: pd.DataFrame | None = None) -> JobAnswer:
    """:class:`JobAnswer` from the hypothesis family (:func:`hypothesis_family`) and, when given, its threshold
    sensitivity (:func:`threshold_sensitivity`). "Little" when at most a third of the readings of the split hold;
    a reading not detected is named with its bound (:func:`hypothesis_reading`). Chapter 7."""
    from ..claims import join_words
    from ..formatting import format_number

    algebra, emp = family[family["kind"] == "algebra"], family[family["kind"] == "empirical"]
    held_alg, held_emp = algebra[algebra["holds"]], emp[emp["holds"]]
    k, n = len(held_emp), len(emp)
    flips: list[str] = []
    firmness = ""
    if sensitivity is not None and len(sensitivity):
        stable = sensitivity.groupby("hypothesis")["holds"].agg(lambda v: bool(v.all()) or not bool(v.any()))
        flips = sorted(stable[~stable].index)
        factors = sorted(sensitivity["factor"].unique())
        firmness = (f"{len(flips)} of the {len(stable)} verdicts change when every label threshold is scaled from "
                    f"×{format_number(factors[0], spec='g')} to ×{format_number(factors[-1], spec='g')}" + (f" ({join_words(flips)})" if flips else "") + ".")
    amount = "Little" if 3 * k <= n else "Some" if 2 * k <= n else "Much"
    fragile = [h for h in held_emp["hypothesis"] if h in flips]
    fragile_alg = [h for h in held_alg["hypothesis"] if h in flips]
    head = (f"{amount}: beyond what the algebra fixes, {k} of the {n} readings of the split hold"
            + (f" ({join_words(list(held_emp['hypothesis']))})" if k else "")
            + (f", and {'it changes' if len(fragile) == 1 and k == 1 else f'{len(fragile)} of them change'} with the "
               f"label thresholds" if fragile else "")
            + f"; {len(held_alg)} of the {len(algebra)} predictions of the algebra come out as predicted"
            + (f" ({join_words(fragile_alg)} only at some of the label thresholds)" if fragile_alg else "") + ".")
    alg = (f"The algebra's predictions that hold: {_listed(held_alg)}." if len(held_alg) else
           "None of the algebra's predictions holds.")
    missed = emp[~emp["holds"]]
    readings = ((f"Readings that hold: {_listed(held_emp)}. " if k else "No reading of the split holds. ")
                + ("; ".join(f"{h} is {r}" for h, r in zip(missed["hypothesis"], missed["reading"])) + "."
                   if len(missed) else ""))
    return JobAnswer(head, alg, readings, firmness)
