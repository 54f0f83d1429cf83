"""Metrics for the init experiments: the paper's speed-up (honestly), steps to a threshold, paired differences and
bootstrap confidence intervals over seeds. Chapter 5.

The paper's **speed-up** is the fraction of training saved before the treated run first reaches the baseline's
final loss: ``1 − t*/T`` with ``T`` the baseline's last step and ``t*`` the first logged step at which the treated
run's loss is ≤ the baseline's final loss. When that never happens the answer is **"not reached"** — not 100%, which
is what the authors' code reports. When two curves overlap, the metric measures noise, so always compute it in both
directions (:func:`speedup_table` does).

Inputs are tidy logs (pandas DataFrames) with columns ``step`` and a loss column (``val_loss`` by default), as
written by :mod:`qkgeometry.training.loop`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "SpeedUp",
    "bootstrap_ci",
    "final_loss",
    "format_ci",
    "paired_differences",
    "speedup",
    "speedup_table",
    "steps_to_threshold",
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
        return "not reached" if self.fraction is None else f"{100 * self.fraction:.1f}%"


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
    """Fraction of training saved before ``treated`` first reaches ``baseline``'s final ``loss`` (paper's metric).

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


def bootstrap_ci(values: Sequence[float], statistic: Callable = np.mean, level: float = 0.95,
                 n_resamples: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """``(estimate, low, high)``: the statistic and its percentile-bootstrap interval over ``values`` (e.g. seeds).

    With n values there are only ``C(2n−1, n)`` distinct resamples (10 for n = 3), so the interval is coarse and
    tends to be too narrow for small n; report n next to it. NaN bounds for n < 2.
    """
    x = np.asarray([v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))],
                   dtype=float)
    if len(x) == 0:
        return (math.nan, math.nan, math.nan)
    est = float(statistic(x))
    if len(x) < 2:
        return (est, math.nan, math.nan)
    if np.ptp(x) == 0:
        return (est, est, est)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_resamples, len(x)))
    stats = np.apply_along_axis(statistic, 1, x[idx])
    alpha = (1 - level) / 2
    return (est, float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha)))


def format_ci(est: float, low: float, high: float, digits: int = 3, percent: bool = False) -> str:
    """``"−0.004 [−0.028, +0.019]"`` (or percentages)."""
    if math.isnan(est):
        return "—"
    f = (lambda v: f"{100 * v:+.{max(0, digits - 2)}f}%") if percent else (lambda v: f"{v:+.{digits}f}")
    if math.isnan(low):
        return f(est)
    return f"{f(est)} [{f(low)}, {f(high)}]"


def _runs(logs: pd.DataFrame, arch: str, init: str) -> dict[int, pd.DataFrame]:
    sel = logs[(logs["arch"] == arch) & (logs["init"] == init)]
    return {int(seed): g for seed, g in sel.groupby("seed")}


def paired_differences(logs: pd.DataFrame, treatment: str = "symmetric", baseline: str = "default",
                       loss: str = "val_loss", level: float = 0.95) -> pd.DataFrame:
    """Per arch: final ``loss`` of ``treatment`` minus ``baseline``, paired by seed, with a bootstrap CI.

    ``logs`` holds many runs with columns ``arch, init, seed, step`` and ``loss``. Negative = treatment lower.
    Columns: ``arch, treatment, baseline, n, baseline_mean, treatment_mean, diff_mean, ci_low, ci_high`` (percentile
    bootstrap), ``t_low, t_high`` (Student-t interval, wider and more honest for n = 3) and ``diffs`` (per seed, in
    seed order).
    """
    rows = []
    for arch in sorted(logs["arch"].unique()):
        base, treat = _runs(logs, arch, baseline), _runs(logs, arch, treatment)
        seeds = sorted(set(base) & set(treat))
        if not seeds:
            continue
        b = np.array([final_loss(base[s], loss) for s in seeds])
        t = np.array([final_loss(treat[s], loss) for s in seeds])
        est, lo, hi = bootstrap_ci(t - b, level=level)
        t_lo, t_hi = t_interval(t - b, level)
        rows.append({"arch": arch, "treatment": treatment, "baseline": baseline, "n": len(seeds),
                     "baseline_mean": b.mean(), "treatment_mean": t.mean(), "diff_mean": est, "ci_low": lo,
                     "ci_high": hi, "t_low": t_lo, "t_high": t_hi, "diffs": [round(float(v), 4) for v in t - b]})
    return pd.DataFrame(rows)


def speedup_table(logs: pd.DataFrame, treatment: str = "symmetric", baseline: str = "default",
                  loss: str = "val_loss") -> pd.DataFrame:
    """Per (arch, seed): the speed-up in both directions.

    ``forward`` = how much sooner ``treatment`` reaches ``baseline``'s final loss (the paper's number);
    ``reverse`` = how much sooner ``baseline`` reaches ``treatment``'s final loss. Each is a :class:`SpeedUp`
    (``str`` gives "12.3%" or "not reached"); ``forward_fraction`` / ``reverse_fraction`` hold floats (NaN when not
    reached).
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
    """Per arch and direction: how many seeds reached the target, and the mean fraction saved over the seeds that
    did, with a bootstrap CI. The mean over reached seeds is conditional on reaching; read it with ``reached``."""
    rows = []
    for arch, g in table.groupby("arch"):
        for direction in ("forward", "reverse"):
            vals = g[f"{direction}_fraction"].to_numpy(dtype=float)
            reached = vals[~np.isnan(vals)]
            est, lo, hi = bootstrap_ci(reached, level=level)
            rows.append({"arch": arch, "direction": direction, "n": len(vals), "reached": len(reached),
                         "mean_if_reached": est, "ci_low": lo, "ci_high": hi,
                         "per_seed": ", ".join(str(s) for s in g[direction])})
    return pd.DataFrame(rows)


__all__ += ["summarize_speedups"]


# ------------------------------------------------------------------------------------ chapter-5 summaries
def first_step_below(log: pd.DataFrame, threshold: float, column: str = "symmetry_mean") -> int | None:
    """First logged step at which ``column`` is below ``threshold`` (e.g. when a symmetric init has been erased)."""
    clean = log[["step", column]].dropna().sort_values("step")
    hit = clean.loc[clean[column] < threshold, "step"]
    return int(hit.iloc[0]) if len(hit) else None


def loss_summary(logs: pd.DataFrame, loss: str = "val_loss") -> pd.DataFrame:
    """Final ``loss`` per (arch, init): number of seeds, last step, mean, sd and the per-seed values (seed order)."""
    last = (logs.sort_values("step").groupby(["arch", "init", "seed"]).tail(1)
            .sort_values(["arch", "init", "seed"]))
    return (last.groupby(["arch", "init"])
            .agg(n=("seed", "nunique"), step=("step", "max"), final_loss=(loss, "mean"), sd=(loss, "std"),
                 per_seed=(loss, lambda v: [round(float(x), 3) for x in v]))
            .reset_index())


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the mean of ``values`` (NaN for n < 2)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return (math.nan, math.nan)
    half = stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return (float(x.mean() - half), float(x.mean() + half))


def _verdict(row) -> str:
    boot = "below" if row.ci_high < 0 else "above" if row.ci_low > 0 else None
    t = "below" if row.t_high < 0 else "above" if row.t_low > 0 else None
    word = {"below": "lower", "above": "higher"}
    if boot and boot == t:
        return f"{row.treatment} {word[boot]} (bootstrap and t intervals exclude 0)"
    if boot:
        return (f"{row.treatment} {word[boot]} in all {row.n} seeds, but the t-interval includes 0: "
                f"not conclusive at n = {row.n}")
    return "no detectable difference (CI includes 0)"


def paired_table(logs: pd.DataFrame, treatments: Sequence[str] = ("symmetric", "shared"),
                 baseline: str = "default", loss: str = "val_loss") -> pd.DataFrame:
    """:func:`paired_differences` for each treatment present, with a printable CI (``ci_text``) and a verdict computed
    from the interval (lower / higher / no detectable difference)."""
    parts = [paired_differences(logs, t, baseline, loss) for t in treatments if t in set(logs["init"])]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    table["ci_text"] = [format_ci(r.diff_mean, r.ci_low, r.ci_high, digits=4) for r in table.itertuples()]
    table["t_ci_text"] = [format_ci(r.diff_mean, r.t_low, r.t_high, digits=4) for r in table.itertuples()]
    table["verdict"] = [_verdict(r) for r in table.itertuples()]
    return table


def speedup_summary(logs: pd.DataFrame, treatment: str = "symmetric", baseline: str = "default",
                    loss: str = "val_loss") -> pd.DataFrame:
    """Both directions of the speed-up per arch, in words: per-seed values, how many seeds reached the target, and
    the mean fraction over the seeds that did with a bootstrap CI."""
    summary = summarize_speedups(speedup_table(logs, treatment, baseline, loss))
    summary["mean_if_reached_text"] = [format_ci(r.mean_if_reached, r.ci_low, r.ci_high, percent=True)
                                       for r in summary.itertuples()]
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

    ``threshold=None`` uses, per arch, the baseline's mean ``loss`` (over seeds) at mid-horizon, the logged step
    nearest to half its last step: a level the baseline reaches half-way, so a treatment that trains faster reaches
    it sooner and one that trains slower later (or never, None). The resolution is the logging interval.
    Columns: ``arch, treatment, threshold, n, baseline_steps, treatment_steps`` (per seed, None = never),
    ``diff_mean`` (treatment − baseline steps over the seeds where both reached; negative = treatment sooner),
    ``ci_text`` (bootstrap) and ``t_ci_text`` (Student-t).
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
            diffs = [tt - bb for bb, tt in zip(b, t) if bb is not None and tt is not None]
            est, lo, hi = bootstrap_ci(diffs, level=level)
            t_lo, t_hi = t_interval(diffs, level)
            rows.append({"arch": arch, "treatment": name, "threshold": level_, "n": len(seeds),
                         "baseline_steps": b, "treatment_steps": t, "diff_mean": est,
                         "ci_text": format_ci(est, lo, hi, digits=0),
                         "t_ci_text": format_ci(est, t_lo, t_hi, digits=0)})
    return pd.DataFrame(rows)


def replication_verdict(logs: pd.DataFrame, label: str, arch: str = "encoder", treatment: str = "symmetric",
                        baseline: str = "default", loss: str = "val_loss") -> str:
    """One computed sentence on the paper's claim for ``arch``: a speed-up counts as detected only if the paired CI
    of the final-loss difference (bootstrap and t) is below 0, the treated run reaches the baseline's final loss in
    every seed, and the reverse does not hold in every seed. It is called "suggested but not established" when
    everything but the t-interval points the same way (every seed lower, reached in every seed, the reverse in none).
    """
    sub = logs[logs["arch"] == arch]
    p = paired_differences(sub, treatment, baseline, loss)
    if p.empty:
        return f"{label}: no {arch} pairs to compare"
    p = p.iloc[0]
    sp = speedup_table(sub, treatment, baseline, loss)
    n = len(sp)
    fwd, rev = int(sp["forward_fraction"].notna().sum()), int(sp["reverse_fraction"].notna().sum())
    if p.ci_high < 0 and p.t_high < 0 and fwd == n and rev < n:
        return (f"{label}: a speed-up is detected for the {arch} (paired final-loss difference "
                f"{format_ci(p.diff_mean, p.ci_low, p.ci_high, digits=4)} nats; {treatment} reaches {baseline}'s "
                f"final loss in all {n} seeds, the reverse in {rev} of {n})")
    if p.ci_high < 0 and fwd == n and rev == 0:
        return (f"{label}: a speed-up for the {arch} is suggested but not established: {treatment} ends lower in all "
                f"{n} seeds and reaches {baseline}'s final loss in all {n}, the reverse in none, but the t-interval "
                f"of the paired final-loss difference includes 0 at n = {n} "
                f"({format_ci(p.diff_mean, p.t_low, p.t_high, digits=4)} nats)")
    return (f"{label}: no consistent speed-up is detected for the {arch} (paired final-loss difference "
            f"{format_ci(p.diff_mean, p.ci_low, p.ci_high, digits=4)} nats; {treatment} reaches {baseline}'s final "
            f"loss in "
            f"{fwd} of {n} seeds, {baseline} reaches {treatment}'s in {rev} of {n})")


__all__ += ["first_step_below", "loss_summary", "paired_table", "replication_verdict", "speedup_summary", "t_interval",
            "threshold_table"]
