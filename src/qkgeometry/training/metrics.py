"""Metrics for the init experiments: the paper's speed-up (honestly), steps to a threshold and paired
differences over seeds. Chapter 5.

The paper's **speed-up** is the fraction of training saved before the treated run first reaches the baseline's
final loss: ``1 − t*/T`` with ``T`` the baseline's last step and ``t*`` the first logged step at which the
treated run's loss is ≤ the baseline's final loss. When that never happens the answer is **"not reached"** —
not 100%, which is what the authors' code reports. When two curves overlap, the metric measures noise, so
always compute it in both directions (:func:`speedup_table` does).

Inputs are tidy logs (pandas DataFrames) with columns ``step`` and a loss column (``val_loss`` by default), as
written by :mod:`qkgeometry.training.loop`.

Every interval and verdict comes from :mod:`qkgeometry.stats`: runs are compared over a handful of seeds, so
the intervals are Student-t intervals over seeds (a bootstrap of three values only reproduces their range),
and the verdicts are :func:`qkgeometry.stats.judge`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import stats
from ..formatting import format_number

__all__ = [
    "SpeedUp",
    "final_loss",
    "first_step_below",
    "loss_summary",
    "paired_curve",
    "paired_differences",
    "paired_table",
    "replication_verdict",
    "seed_interval",
    "speedup",
    "speedup_summary",
    "speedup_table",
    "steps_to_threshold",
    "summarize_speedups",
    "symmetry_dynamics",
    "targets_table",
    "threshold_table",
]


@dataclass(frozen=True)
class SpeedUp:
    """Result of :func:`speedup`. ``fraction`` is None when the target was never reached."""

    fraction: float | None
    step_reached: int | None
    target: float
    total_steps: int

    @property
    def reached(self) -> bool:
        return self.fraction is not None

    def __str__(self) -> str:
        return "not reached" if self.fraction is None else format_number(self.fraction, spec=".1%")


def _curve(log: pd.DataFrame, loss: str) -> tuple[np.ndarray, np.ndarray]:
    if loss not in log or "step" not in log:
        raise ValueError(f"the log needs columns 'step' and {loss!r}; it has {list(log.columns)}")
    clean = log[["step", loss]].dropna().sort_values("step")
    if clean.empty:
        raise ValueError(f"the log has no {loss!r} values")
    return clean["step"].to_numpy(), clean[loss].to_numpy(dtype=float)


def steps_to_threshold(log: pd.DataFrame, threshold: float, loss: str = "val_loss") -> int | None:
    """First logged step at which ``loss`` ≤ ``threshold``; None if never."""
    steps, values = _curve(log, loss)
    hit = np.flatnonzero(values <= threshold)
    return int(steps[hit[0]]) if len(hit) else None


def final_loss(log: pd.DataFrame, loss: str = "val_loss") -> float:
    """The ``loss`` at the last logged step."""
    return float(_curve(log, loss)[1][-1])


def speedup(baseline: pd.DataFrame, treated: pd.DataFrame, loss: str = "val_loss") -> SpeedUp:
    """Fraction of training saved before ``treated`` first reaches ``baseline``'s final ``loss`` (the paper's
    metric).

    >>> import pandas as pd
    >>> base = pd.DataFrame({"step": [0, 50, 100], "val_loss": [9.0, 7.0, 6.0]})
    >>> str(speedup(base, pd.DataFrame({"step": [0, 50, 100], "val_loss": [9.0, 6.0, 5.5]})))
    '50.0%'
    >>> str(speedup(base, pd.DataFrame({"step": [0, 50, 100], "val_loss": [9.0, 7.5, 6.5]})))
    'not reached'
    """
    b_steps, b_values = _curve(baseline, loss)
    target, total = float(b_values[-1]), int(b_steps[-1])
    if total <= 0:
        raise ValueError("the baseline log must extend beyond step 0")
    reached = steps_to_threshold(treated, target, loss)
    if reached is None:
        return SpeedUp(None, None, target, total)
    return SpeedUp(1.0 - reached / total, reached, target, total)


def seed_interval(values: Sequence[float | None], level: float = 0.95) -> stats.Interval | None:
    """Student-t interval (:func:`qkgeometry.stats.t_interval`, unit "seed") of the mean of ``values``, one
    per seed; None and NaN entries are dropped. None when fewer than two values remain (no interval exists).

    >>> seed_interval([1.0, 2.0, 3.0]).format(2)
    '2.00 [−0.48, 4.48]'
    >>> seed_interval([1.0, None]) is None
    True
    """
    x = [float(v) for v in values if v is not None and not math.isnan(v)]
    return stats.t_interval(x, level, unit="seed") if len(x) >= 2 else None


def _interval_text(values: Sequence[float | None], level: float = 0.95, digits: int = 3,
                   percent: bool = False) -> str:
    """``"estimate [low, high]"`` of :func:`seed_interval`; the bare mean for one value, "—" for none."""
    interval = seed_interval(values, level)
    if interval is not None:
        return interval.format(digits, percent=percent)
    x = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not x:
        return "—"
    return format_number(x[0], spec=f".{max(digits - 2, 0)}%") if percent else format_number(x[0], decimals=digits)


def _runs(logs: pd.DataFrame, arch: str, init: str) -> dict[int, pd.DataFrame]:
    sel = logs[(logs["arch"] == arch) & (logs["init"] == init)]
    return {int(seed): g for seed, g in sel.groupby("seed")}


def paired_differences(logs: pd.DataFrame, treatment: str = "symmetric", baseline: str = "default",
                       loss: str = "val_loss", level: float = 0.95) -> pd.DataFrame:
    """Per arch: final ``loss`` of ``treatment`` minus ``baseline``, paired by seed
    (:func:`qkgeometry.stats.paired_difference`: Student-t interval over seeds and paired t-test).

    ``logs`` holds many runs with columns ``arch, init, seed, step`` and ``loss``. Negative = treatment lower.
    Columns: ``arch, treatment, baseline, n, baseline_mean, treatment_mean, diff_mean, ci_low, ci_high``
    (t-interval; NaN for one seed), ``p_value``, ``diffs`` (per seed, in seed order) and ``result`` (the
    :class:`qkgeometry.stats.PairedDifference`, None for one seed).
    """
    rows = []
    for arch in sorted(logs["arch"].unique()):
        base, treat = _runs(logs, arch, baseline), _runs(logs, arch, treatment)
        seeds = sorted(set(base) & set(treat))
        if not seeds:
            continue
        b = np.array([final_loss(base[s], loss) for s in seeds])
        t = np.array([final_loss(treat[s], loss) for s in seeds])
        result = stats.paired_difference(t, b, level, unit="seed") if len(seeds) >= 2 else None
        low, high = (math.nan, math.nan) if result is None else (result.interval.low, result.interval.high)
        rows.append({"arch": arch, "treatment": treatment, "baseline": baseline, "n": len(seeds),
                     "baseline_mean": b.mean(), "treatment_mean": t.mean(),
                     "diff_mean": float((t - b).mean()), "ci_low": low, "ci_high": high,
                     "p_value": math.nan if result is None else result.p_value,
                     "diffs": [round(float(v), 4) for v in t - b], "result": result})
    return pd.DataFrame(rows)


def speedup_table(logs: pd.DataFrame, treatment: str = "symmetric", baseline: str = "default",
                  loss: str = "val_loss") -> pd.DataFrame:
    """Per (arch, seed): the speed-up in both directions.

    ``forward`` = how much sooner ``treatment`` reaches ``baseline``'s final loss (the paper's number);
    ``reverse`` = how much sooner ``baseline`` reaches ``treatment``'s final loss. Each is a :class:`SpeedUp`
    (``str`` gives "12.3%" or "not reached"); ``forward_fraction`` / ``reverse_fraction`` hold floats (NaN
    when not reached).
    """
    rows = []
    for arch in sorted(logs["arch"].unique()):
        base, treat = _runs(logs, arch, baseline), _runs(logs, arch, treatment)
        for seed in sorted(set(base) & set(treat)):
            fwd, rev = speedup(base[seed], treat[seed], loss), speedup(treat[seed], base[seed], loss)
            rows.append({"arch": arch, "seed": seed, "forward": fwd, "reverse": rev,
                         "forward_fraction": math.nan if fwd.fraction is None else fwd.fraction,
                         "reverse_fraction": math.nan if rev.fraction is None else rev.fraction})
    return pd.DataFrame(rows)


def summarize_speedups(table: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per arch and direction: how many seeds reached the target, and the mean fraction saved over seeds
    that did, with a Student-t interval over those seeds (:func:`seed_interval`; NaN with fewer than two). The
    mean
    over
    reached seeds is conditional on reaching; read it with ``reached``."""
    rows = []
    for arch, g in table.groupby("arch"):
        for direction in ("forward", "reverse"):
            vals = g[f"{direction}_fraction"].to_numpy(dtype=float)
            reached = vals[~np.isnan(vals)]
            interval = seed_interval(reached, level)
            rows.append({"arch": arch, "direction": direction, "n": len(vals), "reached": len(reached),
                         "mean_if_reached": float(reached.mean()) if len(reached) else math.nan,
                         "ci_low": math.nan if interval is None else interval.low,
                         "ci_high": math.nan if interval is None else interval.high,
                         "mean_if_reached_text": _interval_text(reached, level, percent=True),
                         "per_seed": ", ".join(str(s) for s in g[direction])})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------ chapter-5 summaries
def first_step_below(log: pd.DataFrame, threshold: float, column: str = "symmetry_mean") -> int | None:
    """First logged step at which ``column`` is below ``threshold`` (e.g. when a symmetric init has been
    erased)."""
    clean = log[["step", column]].dropna().sort_values("step")
    hit = clean.loc[clean[column] < threshold, "step"]
    return int(hit.iloc[0]) if len(hit) else None


def loss_summary(logs: pd.DataFrame, loss: str = "val_loss") -> pd.DataFrame:
    """Final ``loss`` per (arch, init): number of seeds, last step, mean, sd and the per-seed values (seed
    order)."""
    last = (logs.sort_values("step").groupby(["arch", "init", "seed"]).tail(1)
            .sort_values(["arch", "init", "seed"]))
    return (last.groupby(["arch", "init"])
            .agg(n=("seed", "nunique"), step=("step", "max"), final_loss=(loss, "mean"), sd=(loss, "std"),
                 per_seed=(loss, lambda v: [round(float(x), 3) for x in v]))
            .reset_index())


#: How a loss column reads in a sentence.
_LOSS_WORDS = {"val_loss": "validation loss", "train_loss": "training loss"}


def paired_table(logs: pd.DataFrame, treatments: Sequence[str] = ("symmetric", "shared"),
                 baseline: str = "default", loss: str = "val_loss", level: float = 0.95,
                 floor: float = 0.0) -> pd.DataFrame:
    """:func:`paired_differences` for each treatment present, with a printable interval (``ci_text``: mean
    difference and its t-interval over seeds, with as many decimals as the interval's width needs, so that a tiny
    difference shows its sign), the verdict on one line (``verdict``, :meth:`qkgeometry.stats.Verdict.line`: lower /
    higher, "suggested but not established", no detectable difference, or below ``floor``, the smallest
    difference in nats worth a verdict) and the same rule as a :class:`qkgeometry.stats.Verdict` (``judged``:
    one plain sentence with the number once, the statistics apart; None with one seed)."""
    parts = [paired_differences(logs, t, baseline, loss, level) for t in treatments if t in set(logs["init"])]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    table["ci_text"] = [_interval_text(r.diffs, level, 4) if r.result is None else _scaled_interval(r.result.interval)
                        for r in table.itertuples()]
    table["verdict"] = [
        "one seed: no interval" if r.result is None else
        stats.judge(r.result, f"{r.treatment} higher", f"{r.treatment} lower",
                    f"{r.treatment} − {r.baseline} final {_LOSS_WORDS.get(loss, loss)}",
                    floor=floor).line(_digits_for(r.result.interval))
        for r in table.itertuples()]
    table["judged"] = [
        None if r.result is None else
        stats.judge(r.result, f"{r.treatment} ends higher", f"{r.treatment} ends lower",
                    f"{r.treatment} − {r.baseline} final {_LOSS_WORDS.get(loss, loss)}", floor=floor)
        for r in table.itertuples()]
    return table


def _digits_for(interval: stats.Interval) -> int:
    """Decimals that give the interval's half-width two significant digits (at least 3, at most 6)."""
    half = (interval.high - interval.low) / 2
    return max(3, len(stats.format_number(0.0, half).split(".")[-1])) if half > 0 else 4


def _scaled_interval(interval: stats.Interval) -> str:
    return interval.format(_digits_for(interval))


def speedup_summary(logs: pd.DataFrame, treatment: str = "symmetric", baseline: str = "default",
                    loss: str = "val_loss") -> pd.DataFrame:
    """Both directions of the speed-up per arch, in words: per-seed values, how many seeds reached the target,
    and the mean fraction over seeds that did, with a t-interval over those seeds."""
    summary = summarize_speedups(speedup_table(logs, treatment, baseline, loss))
    summary["direction"] = summary["direction"].map({
        "forward": f"{treatment} reaches {baseline}'s final loss",
        "reverse": f"{baseline} reaches {treatment}'s final loss"})
    return summary


def _mid_horizon_loss(runs, loss: str) -> float:
    """Mean over ``runs`` of ``loss`` at the logged step nearest to half of the last logged step."""
    values = []
    for run in runs:
        steps, losses = _curve(run, loss)
        values.append(losses[np.argmin(np.abs(steps - steps[-1] / 2))])
    return float(np.mean(values))


def threshold_table(logs: pd.DataFrame, threshold: float | None = None,
                    treatments: Sequence[str] = ("symmetric", "shared"), baseline: str = "default",
                    loss: str = "val_loss", level: float = 0.95) -> pd.DataFrame:
    """Steps to reach a fixed ``loss`` threshold, per arch and treatment, paired by seed against ``baseline``.

    ``threshold=None`` uses, per arch, the baseline's mean ``loss`` (over seeds) at mid-horizon, the logged
    step nearest to half its last step: a level the baseline reaches half-way, so a treatment that trains
    faster reaches it sooner and one that trains slower later (or never, None). The resolution is the logging
    interval. Columns: ``arch, treatment, threshold, n, baseline_steps, treatment_steps`` (per seed, None =
    never), ``diff_mean`` (treatment − baseline steps over seeds where both reached; negative = treatment
    sooner) and ``ci_text`` (its Student-t interval over those seeds, :func:`seed_interval`).
    """
    rows = []
    for arch in sorted(logs["arch"].unique()):
        base = _runs(logs, arch, baseline)
        treated = {t: _runs(logs, arch, t) for t in treatments if t != baseline}
        treated = {t: runs for t, runs in treated.items() if runs}
        if not base or not treated:
            continue
        level_ = threshold
        if level_ is None:
            level_ = _mid_horizon_loss(base.values(), loss)
        for name, runs in treated.items():
            seeds = sorted(set(base) & set(runs))
            b = [steps_to_threshold(base[s], level_, loss) for s in seeds]
            t = [steps_to_threshold(runs[s], level_, loss) for s in seeds]
            diffs = [tt - bb for bb, tt in zip(b, t, strict=True) if bb is not None and tt is not None]
            rows.append({"arch": arch, "treatment": name, "threshold": level_, "n": len(seeds),
                         "baseline_steps": b, "treatment_steps": t,
                         "diff_mean": float(np.mean(diffs)) if diffs else math.nan,
                         "ci_text": _interval_text(diffs, level, digits=0)})
    return pd.DataFrame(rows)


def targets_table(logs: pd.DataFrame, fractions: Sequence[float] = (0.25, 0.5, 0.75, 1.0), treatment: str = "symmetric",
                  baseline: str = "default", loss: str = "val_loss", arch: str = "encoder") -> pd.DataFrame:
    """Steps to several loss targets, ``treatment`` − ``baseline`` paired by seed: one row per ``fraction`` of the
    horizon, the target being the baseline's mean ``loss`` at the logged step nearest to that fraction of its last
    step (1.0: its final loss). A speed-up that appears only at the last targets is a late-schedule effect.

    Columns ``fraction, target, n, reached`` (seeds where both runs reach the target), ``baseline_step`` (mean over
    those seeds), ``diff`` (:class:`qkgeometry.stats.Interval` of treatment − baseline steps, None below two seeds)
    and ``lr_share`` (the learning rate at the baseline's mean step, as a share of its peak).
    Chapter 5, "Where in the schedule".
    """
    base = _runs(logs, arch, baseline)
    treated = _runs(logs, arch, treatment)
    seeds = sorted(set(base) & set(treated))
    if not seeds:
        raise ValueError(f"logs: no seed has both a {baseline!r} and a {treatment!r} run of arch {arch!r}.")
    rows = []
    for fraction in fractions:
        if not 0 < fraction <= 1:
            raise ValueError(f"fractions: shares of the horizon in (0, 1]; got {fraction!r}.")
        values = []
        for s in seeds:
            steps, losses = _curve(base[s], loss)
            values.append(losses[np.argmin(np.abs(steps - fraction * steps[-1]))])
        target = float(np.mean(values))
        pairs = [(steps_to_threshold(base[s], target, loss), steps_to_threshold(treated[s], target, loss)) for s in seeds]
        pairs = [(b, t) for b, t in pairs if b is not None and t is not None]
        diffs = [t - b for b, t in pairs]
        base_step = float(np.mean([b for b, _ in pairs])) if pairs else math.nan
        lr_share = math.nan
        if pairs and "lr" in logs.columns:
            run = base[seeds[0]]
            at = run.iloc[int(np.argmin(np.abs(run["step"].to_numpy() - base_step)))]
            lr_share = float(at["lr"] / run["lr"].max())
        rows.append({"fraction": fraction, "target": target, "n": len(seeds), "reached": len(pairs),
                     "baseline_step": base_step, "diff": seed_interval(diffs) if len(diffs) >= 2 else None,
                     "lr_share": lr_share})
    return pd.DataFrame(rows)


def replication_verdict(logs: pd.DataFrame, label: str, arch: str = "encoder", treatment: str = "symmetric",
                        baseline: str = "default", loss: str = "val_loss") -> str:
    """One computed sentence on the paper's claim for ``arch``: a speed-up counts as detected only if the
    paired t-interval over seeds of the final-loss difference is below 0
    (:func:`qkgeometry.stats.paired_difference`), the treated run reaches the baseline's final loss in every
    seed, and the reverse does not hold in every seed. It is called "suggested but not established" (the words
    of :func:`qkgeometry.stats.judge`) when everything but the t-interval points the same way (every seed
    lower, reached in every seed, the reverse in none).
    """
    sub = logs[logs["arch"] == arch]
    p = paired_differences(sub, treatment, baseline, loss)
    if p.empty:
        return f"{label}: no {arch} pairs to compare"
    p = p.iloc[0]
    if p.result is None:
        return f"{label}: one {arch} seed only, so no interval and no verdict"
    sp = speedup_table(sub, treatment, baseline, loss)
    n = len(sp)
    fwd, rev = int(sp["forward_fraction"].notna().sum()), int(sp["reverse_fraction"].notna().sum())
    interval = p.result.interval
    text = f"{interval.format(4)} nats, 95% t-interval over n = {n} seeds"
    if interval.high < 0 and fwd == n and rev < n:
        return (f"{label}: a speed-up is detected for the {arch} (paired final-loss difference {text}; "
                f"{treatment} reaches {baseline}'s final loss in all {n} seeds, the reverse in {rev} of {n})")
    if p.result.n_negative == n and fwd == n and rev == 0:
        return (f"{label}: a speed-up for the {arch} is suggested but not established: {treatment} "
                f"ends lower in all {n} seeds and reaches {baseline}'s final loss in all {n}, the reverse in "
                f"none, but the t-interval of the paired final-loss difference includes 0 at n = {n} "
                f"({text})")
    return (f"{label}: no consistent speed-up is detected for the {arch} (paired final-loss difference "
            f"{text}; {treatment} reaches {baseline}'s final loss in {fwd} of {n} seeds, {baseline} reaches "
            f"{treatment}'s in {rev} of {n})")


def paired_curve(logs: pd.DataFrame, treatment: str = "symmetric", baseline: str = "default",
                 column: str = "val_loss", level: float = 0.95) -> pd.DataFrame:
    """``treatment − baseline`` of ``column`` at every logged step, paired by seed, per arch: where in the
    schedule a difference appears.

    ``logs`` holds many runs (columns ``arch, init, seed, step`` and ``column``). Only steps logged by both runs of
    a seed count. Columns: ``arch, step, n`` (seeds paired at that step), ``diff_mean``, ``ci_low, ci_high`` (the
    Student-t interval over seeds of :func:`qkgeometry.stats.paired_difference`; NaN with fewer than two seeds) and
    ``n_negative`` (seeds whose difference is below 0). Negative = treatment lower.

    >>> logs = pd.DataFrame({"arch": "encoder", "init": ["default"] * 4 + ["symmetric"] * 4,
    ...                      "seed": [0, 0, 1, 1] * 2, "step": [0, 10] * 4,
    ...                      "val_loss": [9.0, 6.0, 9.0, 6.2, 9.0, 5.9, 9.0, 6.0]})
    >>> paired_curve(logs)[["step", "n", "diff_mean", "n_negative"]].round(3).to_dict("records")
    [{'step': 0, 'n': 2, 'diff_mean': 0.0, 'n_negative': 0}, {'step': 10, 'n': 2, 'diff_mean': -0.15, 'n_negative': 2}]
    """
    needed = {"arch", "init", "seed", "step", column}
    if not needed <= set(logs.columns):
        raise ValueError(f"logs: needs columns {sorted(needed)}; it has {list(logs.columns)}")
    rows = []
    for arch in sorted(logs["arch"].unique()):
        sub = logs[logs["arch"] == arch].dropna(subset=[column])
        wide = sub[sub["init"].isin([treatment, baseline])].pivot_table(
            index=["step", "seed"], columns="init", values=column, aggfunc="last")
        if treatment not in wide or baseline not in wide:
            continue
        wide = wide[[treatment, baseline]].dropna()
        for step, g in wide.groupby(level="step"):
            values = (g[treatment] - g[baseline]).to_numpy(dtype=float)
            low = high = math.nan
            if len(values) >= 2:
                interval = stats.paired_difference(g[treatment].to_numpy(), g[baseline].to_numpy(), level,
                                                   unit="seed").interval
                low, high = interval.low, interval.high
            rows.append({"arch": arch, "step": int(step), "n": len(values), "diff_mean": float(values.mean()),
                         "ci_low": low, "ci_high": high, "n_negative": int(np.sum(values < 0))})
    return pd.DataFrame(rows, columns=["arch", "step", "n", "diff_mean", "ci_low", "ci_high", "n_negative"])


def symmetry_dynamics(logs: pd.DataFrame, column: str = "symmetry_mean") -> pd.DataFrame:
    """Landmarks of the ``column`` trajectory per (arch, init), on the mean over seeds at each logged step.

    Columns: ``arch, init, n`` (seeds), ``start`` (first logged value), ``peak, peak_step`` (largest value after
    the first logged step), ``low, low_step`` (smallest value after the first logged step), ``end, end_step``
    (last logged value) and ``end_minus_low`` (how far it drifted back up after its lowest point). Chapter 5 reads
    the rise and fall of the default runs' symmetry and the late drift of the symmetric runs from it.
    """
    needed = {"arch", "init", "seed", "step", column}
    if not needed <= set(logs.columns):
        raise ValueError(f"logs: needs columns {sorted(needed)}; it has {list(logs.columns)}")
    rows = []
    for (arch, init), g in logs.dropna(subset=[column]).groupby(["arch", "init"]):
        curve = g.groupby("step")[column].mean().sort_index()
        later = curve.iloc[1:] if len(curve) > 1 else curve
        rows.append({"arch": arch, "init": init, "n": int(g["seed"].nunique()), "start": float(curve.iloc[0]),
                     "peak": float(later.max()), "peak_step": int(later.idxmax()),
                     "low": float(later.min()), "low_step": int(later.idxmin()),
                     "end": float(curve.iloc[-1]), "end_step": int(curve.index[-1]),
                     "end_minus_low": float(curve.iloc[-1] - later.min())})
    return pd.DataFrame(rows)
