"""Tests for qkgeometry.training.metrics (chapter 5): speed-up with "not reached", thresholds, paired differences
over seeds and their verdicts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from qkgeometry.training.metrics import (
    SpeedUp,
    final_loss,
    paired_differences,
    seed_interval,
    speedup,
    speedup_table,
    steps_to_threshold,
    summarize_speedups,
    threshold_table,
)


# ----------------------------------------------------------------------------------------------- metrics
def _log(steps, losses, **meta):
    return pd.DataFrame({"step": steps, "val_loss": losses, **meta})


def test_speedup_reports_not_reached_instead_of_100_percent():
    base = _log([0, 100, 200], [9.0, 7.0, 6.0])
    never = _log([0, 100, 200], [9.0, 7.5, 6.5])
    s = speedup(base, never)
    assert s.fraction is None and not s.reached and str(s) == "not reached"
    assert s.target == 6.0 and s.total_steps == 200
    half = speedup(base, _log([0, 100, 200], [9.0, 5.9, 5.0]))
    assert half.fraction == pytest.approx(0.5) and half.step_reached == 100 and str(half) == "50.0%"
    assert speedup(base, base).fraction == 0.0  # reaching it only at the end saves nothing


def test_speedup_table_reports_both_directions():
    rows = []
    for seed, (b, s) in enumerate([([9, 7, 6], [9, 5.9, 5.5]), ([9, 6.1, 6], [9, 7.2, 6.2])]):
        rows.append(_log([0, 100, 200], b, arch="encoder", init="default", seed=seed))
        rows.append(_log([0, 100, 200], s, arch="encoder", init="symmetric", seed=seed))
    table = speedup_table(pd.concat(rows))
    assert str(table.loc[0, "forward"]) == "50.0%" and str(table.loc[0, "reverse"]) == "not reached"
    assert str(table.loc[1, "forward"]) == "not reached" and table.loc[1, "reverse_fraction"] == 0.5
    assert math.isnan(table.loc[1, "forward_fraction"])
    summary = summarize_speedups(table).set_index("direction")
    assert summary.loc["forward", "reached"] == 1 and summary.loc["forward", "n"] == 2
    paired = paired_differences(pd.concat(rows))
    assert paired.loc[0, "n"] == 2 and paired.loc[0, "diffs"] == [-0.5, 0.2]


def test_steps_to_threshold_and_final_loss():
    log = _log([0, 50, 100], [9.0, 6.5, 6.1])
    assert steps_to_threshold(log, 6.5) == 50 and steps_to_threshold(log, 6.0) is None
    assert final_loss(log) == 6.1
    with pytest.raises(ValueError, match="needs columns"):
        final_loss(pd.DataFrame({"step": [0]}))


def test_threshold_table_pairs_steps_by_seed_at_the_baselines_mid_horizon_loss():
    steps = [0, 50, 100, 150, 200]
    runs = []
    for seed in range(3):  # default's loss at mid-horizon (step 100) is 6.5 + 0.03·seed, 6.53 on average
        runs.append(_log(steps, [9.0, 7.0, 6.5 + 0.03 * seed, 6.3, 6.2], arch="encoder", init="default", seed=seed))
        runs.append(_log(steps, [9.0, 6.5, 6.3, 6.2, 6.1], arch="encoder", init="symmetric", seed=seed))
    table = threshold_table(pd.concat(runs))
    row = table.iloc[0]
    assert row.threshold == pytest.approx(6.53)
    assert row.baseline_steps == [100, 100, 150] and row.treatment_steps == [50, 50, 50]
    assert row.diff_mean == pytest.approx(-200 / 3) and row.ci_text.startswith("\u221267 [")
    never = threshold_table(pd.concat(runs), threshold=6.15).iloc[0]
    assert never.baseline_steps == [None] * 3 and math.isnan(never.diff_mean) and never.ci_text == "—"


def test_seed_intervals_are_student_t_intervals_over_seeds():
    values = [1.0, 2.0, 3.0, 4.0]
    interval = seed_interval(values)
    low, high = stats.t.interval(0.95, 3, loc=2.5, scale=stats.sem(values))
    assert (interval.estimate, interval.n, interval.unit, interval.method) == (2.5, 4, "seed", "t")
    assert interval.low == pytest.approx(low) and interval.high == pytest.approx(high)
    assert seed_interval([2.0, 2.0]).format() == "2.000 [2.000, 2.000]"
    assert seed_interval([1.0, None, math.nan]) is None and seed_interval([]) is None


def test_speedup_result_reads_as_reached_or_not():
    never, half = SpeedUp(None, None, 1.0, 10), SpeedUp(0.5, 5, 1.0, 10)
    assert (never.reached, str(never)) == (False, "not reached")
    assert (half.reached, str(half)) == (True, "50.0%")


def _grid(pairs):
    rows = []
    for seed, (b, s) in enumerate(pairs):
        rows.append(_log([0, 100, 200], b, arch="encoder", init="default", seed=seed))
        rows.append(_log([0, 100, 200], s, arch="encoder", init="symmetric", seed=seed))
    return pd.concat(rows, ignore_index=True)


def test_replication_verdict_needs_a_consistent_effect():
    from qkgeometry.training.metrics import paired_table, replication_verdict

    clear = _grid([([9, 7, 6], [9, 5.9, 5.5]), ([9, 7.1, 6.1], [9, 6.0, 5.6]), ([9, 7, 6.05], [9, 5.8, 5.5])])
    assert "a speed-up is detected" in replication_verdict(clear, "x")
    assert paired_table(clear).loc[0, "verdict"].startswith("symmetric lower: symmetric − default final validation loss \u22120.5")
    assert "95% t-interval, n = 3 seeds" in paired_table(clear).loc[0, "verdict"]
    judged = paired_table(clear).loc[0, "judged"]
    assert judged.outcome == "difference" and judged.sentence.startswith(
        "Symmetric ends lower: symmetric − default final validation loss \u22120.5")
    assert judged.details["n"] == "3 seeds" and judged.details["test"].startswith("paired t-test: p")
    noise = _grid([([9, 7, 6], [9, 5.95, 6.02]), ([9, 6.9, 6.01], [9, 7.0, 5.99]), ([9, 7, 6.0], [9, 6.9, 6.01])])
    verdict = replication_verdict(noise, "x")
    assert "no consistent speed-up" in verdict and "reaches symmetric's in" in verdict
    assert paired_table(noise).loc[0, "verdict"].startswith("no detectable difference")
    # every seed points the same way, but n = 3 with a spread-out difference: suggested, not established
    same_way = _grid([([9, 7, 6], [9, 5.9, 5.99]), ([9, 7, 6], [9, 5.9, 5.9]), ([9, 7, 6], [9, 5.9, 5.8])])
    verdict = replication_verdict(same_way, "x")
    assert "suggested but not established" in verdict and "includes 0 at n = 3" in verdict


def test_same_sign_in_three_seeds_is_not_called_conclusive_when_the_t_interval_includes_0():
    from qkgeometry.training.metrics import paired_table

    grid = _grid([([9, 7, 6], [9, 7, 6.001]), ([9, 7, 6], [9, 7, 6.2]), ([9, 7, 6], [9, 7, 6.0005])])
    verdict = paired_table(grid).loc[0, "verdict"]
    assert verdict.startswith("suggested but not established (symmetric higher;") and "n = 3 seeds" in verdict



def test_paired_curve_pairs_by_seed_and_step():
    from qkgeometry.training.metrics import paired_curve, symmetry_dynamics

    rows = []
    for init, shift in (("default", 0.0), ("symmetric", -0.1)):
        for seed in (0, 1, 2):
            for step in (0, 10, 20):
                rows.append({"arch": "encoder", "init": init, "seed": seed, "step": step,
                             "val_loss": 9.0 - 0.1 * step + (shift * step / 20) + 0.01 * seed,
                             "symmetry_mean": {"default": [0.0, 0.3, 0.1], "symmetric": [1.0, 0.2, 0.4]}[init][step // 10]})
    logs = pd.DataFrame(rows)
    curve = paired_curve(logs).set_index("step")
    assert list(curve["n"]) == [3, 3, 3]
    assert curve.loc[0, "diff_mean"] == pytest.approx(0.0) and curve.loc[20, "diff_mean"] == pytest.approx(-0.1)
    assert curve.loc[20, "n_negative"] == 3 and curve.loc[0, "n_negative"] == 0
    with pytest.raises(ValueError, match="logs"):
        paired_curve(logs.drop(columns="seed"))
    dyn = symmetry_dynamics(logs).set_index("init")
    assert dyn.loc["default", "peak_step"] == 10 and dyn.loc["symmetric", "low_step"] == 10
    np.testing.assert_allclose([dyn.loc["default", "peak"], dyn.loc["default", "end"], dyn.loc["symmetric", "low"]],
                               [0.3, 0.1, 0.2])
    assert dyn.loc["symmetric", "end_minus_low"] == pytest.approx(0.2)
