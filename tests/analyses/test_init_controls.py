"""Tests for qkgeometry.analyses.init_controls: the control family and its reading against the predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry.analyses import init_controls as ic


def _logs(final: dict[str, float], n_seeds: int = 8, noise: float = 0.002, seed: int = 3) -> pd.DataFrame:
    """Two logged steps per run; the final validation loss of init ``i`` is ``final[i]`` plus a seed effect shared by
    every init of the seed (runs are paired by seed) and a little noise of its own."""
    rng = np.random.default_rng(seed)
    seed_effect = rng.normal(0, 0.05, n_seeds)
    rows = []
    for init, level in final.items():
        for seed in range(n_seeds):
            end = level + seed_effect[seed] + rng.normal(0, noise)
            rows += [{"arch": "encoder", "init": init, "seed": seed, "step": 0, "val_loss": 9.0},
                     {"arch": "encoder", "init": init, "seed": seed, "step": 100, "val_loss": end}]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("indefinite", "expected"), [
    (5.02, "self-match bias predicts"),   # like default, above symmetric
    (5.00, "not of the self-match bias"),  # like symmetric, below default
])
def test_the_indefinite_control_is_read_against_its_predictions(indefinite, expected):
    logs = _logs({"default": 5.02, "symmetric": 5.00, "indefinite": indefinite, "rotated": 5.02, "skew": 5.02,
                  "norm-matched": 5.02})
    family = ic.control_family(logs)
    assert set(zip(family.treatment, family.baseline)) == set(ic.CONTROL_PAIRS)
    assert family["holm"].between(0, 1).all() and all(v.family_size == 8 for v in family["judged"])
    reading = ic.read_controls(family, effect=0.02)
    assert expected in reading.indefinite
    assert "symmetry itself predicts" in reading.rotated
    assert "seeds" in reading.power and "indefinite" in reading.power


def test_noise_gives_an_undecided_reading_not_equality():
    logs = _logs({"default": 5.02, "symmetric": 5.00, "indefinite": 5.01, "rotated": 5.01}, n_seeds=4, noise=0.03)
    reading = ic.read_controls(ic.control_family(logs), effect=0.02)
    assert "fits none of the predictions at n = 4 seeds" in reading.indefinite
    assert "fits neither prediction" in reading.rotated


def test_missing_controls_are_said_plainly():
    family = ic.control_family(_logs({"default": 5.02, "symmetric": 5.00}))
    assert family.empty
    reading = ic.read_controls(_family_with_rotated_only(), effect=0.02)
    assert reading.indefinite == "The indefinite control has not run yet."


def _family_with_rotated_only():
    return ic.control_family(_logs({"default": 5.02, "symmetric": 5.00, "rotated": 5.00}))


@pytest.mark.parametrize(("norm_matched", "expected"), [
    (5.02, "the structure predicts, not the initial scale"),  # like default, above symmetric
    (5.00, "the initial scale predicts"),  # like symmetric, below default
])
def test_the_norm_matched_control_is_read_against_its_predictions(norm_matched, expected):
    logs = _logs({"default": 5.02, "symmetric": 5.00, "norm-matched": norm_matched})
    reading = ic.read_controls(ic.control_family(logs), effect=0.02)
    assert expected in reading.norm_matched


def test_two_established_contrasts_are_never_called_neither_established():
    # the control ends far below both baselines: both contrasts are differences, in a pattern no prediction names
    logs = _logs({"default": 5.02, "symmetric": 5.00, "indefinite": 4.90})
    family = ic.control_family(logs)
    assert all(v.outcome == "difference" for v in family["judged"])
    reading = ic.read_controls(family, effect=0.02)
    assert "neither contrast is established" not in reading.indefinite
    assert "both contrasts are established" in reading.indefinite


def test_power_is_sized_at_the_level_of_holms_first_step():
    family = ic.control_family(_logs({"default": 5.02, "symmetric": 5.00, "rotated": 5.01, "skew": 5.01},
                                     n_seeds=6, noise=0.01))
    reading = ic.read_controls(family, effect=0.019)
    assert "Holm's first step over these 4 contrasts (1.25%)" in reading.power
    sd = max(float(np.std(r.differences, ddof=1)) for r in family["result"])
    from qkgeometry import stats

    assert f"{stats.seeds_for_power(0.019, sd, alpha=0.05 / 4):,}" in reading.power


def _curve_logs(n_seeds: int = 6, gain: float = -0.02) -> pd.DataFrame:
    """Runs logged every 1,000 steps to 10,000; the treatment's gain grows over the schedule."""
    rng = np.random.default_rng(1)
    rows = []
    for seed in range(n_seeds):
        for init, g in (("default", 0.0), ("symmetric", gain)):
            for step in range(0, 10_001, 1000):
                loss = 9.0 - 3.0 * np.log1p(step / 1000) / np.log(11) + g * step / 10_000 + rng.normal(0, 0.002)
                rows.append({"arch": "encoder", "init": init, "seed": seed, "step": step, "val_loss": loss,
                             "lr": 1.0 - step / 10_000})
    return pd.DataFrame(rows)


def test_the_loss_gap_claim_covers_every_horizon_after_the_first_and_marks_the_last():
    claim = ic.loss_gap_claim(_curve_logs())
    assert [s.label for s in claim.curve] == [f"step {k:,}" for k in range(3000, 10_001, 1000)]
    assert claim.primary.label == "step 10,000" and claim.primary.interval.n == 6
    assert claim.claim == "symmetric has the lower loss"


def test_the_target_claim_reads_each_target_and_says_which_are_out_of_reach():
    claim = ic.target_claim(_curve_logs())
    assert claim.primary.label == "the baseline's final loss"
    assert "its loss at 25% of the horizon" in [s.label for s in claim.curve]
    with pytest.raises(ValueError, match="fewer than two seeds reach the baseline's final loss"):
        ic.target_claim(_curve_logs(gain=+0.05))  # the treatment never reaches the baseline's final loss
    with pytest.raises(ValueError, match=r"must include 1\.0"):
        ic.target_claim(_curve_logs(), fractions=(0.5,))


def test_a_control_is_read_only_when_every_planned_seed_is_in():
    logs = _logs({"default": 5.02, "symmetric": 5.00, "rotated": 5.01, "norm-matched": 5.01}, n_seeds=6)
    planned = {"rotated": range(6), "norm-matched": range(6)}
    unfinished = logs[~((logs.init == "norm-matched") & (logs.seed >= 4) & (logs.step == 100))]
    kept, pending = ic.planned_controls(unfinished, planned)
    assert pending == {"norm-matched": [0, 1, 2, 3]}
    assert "norm-matched" not in set(kept.init) and "rotated" in set(kept.init)
    kept, pending = ic.planned_controls(logs, planned)
    assert pending == {} and len(kept) == len(logs)


def test_the_brief_counts_the_controls_that_differ_and_says_when_none_decides():
    undecided = ic.control_family(_logs({"default": 5.02, "symmetric": 5.00, "indefinite": 5.01, "rotated": 5.01},
                                        n_seeds=4, noise=0.03))
    line = ic.brief(undecided)
    assert line.startswith("of the 2 controls (n = 4 seeds each; Holm over 4 contrasts), 0 differ detectably from ")
    assert "default and 0 from symmetric in final loss: none of them decides" in line
    decided = ic.control_family(_logs({"default": 5.02, "symmetric": 5.00, "rotated": 5.02}))
    line = ic.brief(decided)
    assert "0 differ detectably from default and 1 from symmetric (rotated) in final loss." in line
    assert "decides" not in line
    assert ic.brief(pd.DataFrame()) == "no control has run yet."


def test_power_says_what_it_rests_on_and_how_uncertain_the_spread_is():
    logs = _logs({"default": 5.02, "symmetric": 5.00, "rotated": 5.01, "skew": 5.01}, n_seeds=6, noise=0.01)
    family = ic.control_family(logs)
    gap = ic.control_family(logs, pairs=[("symmetric", "default")]).iloc[0]["result"].differences
    text = ic.power_text(family, effect=0.019, gap_differences=gap)
    assert "With the spread of the symmetric − default differences instead" in text
    assert "its 95% interval puts the need for" in text and "anywhere from" in text
    assert "about four times as many" in text
    assert "new default and symmetric runs" in text


def test_a_control_whose_differences_do_not_vary_is_not_sized_as_a_thousand_seeds():
    logs = _logs({"default": 5.02, "symmetric": 5.00, "rotated": 5.01}, n_seeds=4, noise=0.0)
    logs.loc[logs.init == "rotated", "val_loss"] = logs.loc[logs.init == "default", "val_loss"].to_numpy() + 0.01
    family = ic.control_family(logs, pairs=[("rotated", "default")])
    text = ic.power_text(family, effect=0.02)
    assert "more than 1,000" not in text and "do not vary" in text


def test_a_contrast_is_paired_only_over_seeds_that_read_the_same_data():
    from qkgeometry.training.pairing import RunStart, data_groups

    logs = _logs({"default": 5.02, "symmetric": 5.00, "rotated": 5.01}, n_seeds=6)
    starts = [RunStart(f"{i}-{s}", s, i, {}, 9.0 + (0.003 if (i == "rotated" and s < 2) else 0.0))
              for i in ("default", "symmetric", "rotated") for s in range(6)]
    family = ic.control_family(logs, pairs=[("rotated", "default")], groups=data_groups(starts))
    assert family.iloc[0]["n"] == 4  # seeds 0 and 1 of rotated read other data
    assert ic.control_family(logs, pairs=[("rotated", "default")]).iloc[0]["n"] == 6


def test_the_answer_says_speed_up_only_when_the_steps_to_the_target_are_established():
    from qkgeometry import stats

    logs = _curve_logs(gain=-0.02)
    gap, target = ic.loss_gap_claim(logs), ic.target_claim(logs)
    final = ic.control_family(logs, pairs=[("symmetric", "default")]).iloc[0]["judged"]
    text = ic.gain_answer(final, gap, target, baseline_loss=6.0).text
    assert ("Yes, on the measure of speed stated before the runs" in text) == (
        target.primary.established and target.primary.interval.estimate < 0)
    assert "checkpoints of one decaying learning-rate schedule" in text
    assert f"at {sum(not s.established for s in gap.curve)} of the {len(gap.curve)} logged horizons" in text
    # a target that is not established: never "speed-up", never "Yes"
    weak = type(target)(target.subject, target.larger, target.smaller, tuple(
        type(s)(s.axis, s.label, stats.Interval(-650, -1356, 56, 4, unit="seed"), s.primary) for s in target.curve),
        decimals=0)
    answer = ic.gain_answer(final, gap, weak, baseline_loss=6.0)
    assert answer.head == "Not shown as a speed-up at our scale."
    assert "does not reach the default start's final loss detectably sooner (−650 steps [−1,356, 56]" in answer.speed
    assert answer.text.startswith(answer.head) and "speed-up" not in answer.speed


def test_the_cause_line_names_what_differs_or_says_nothing_is_settled():
    settled = ic.control_family(_logs({"default": 5.02, "symmetric": 5.00, "indefinite": 4.90}))
    assert "indefinite from default" in ic.cause_line(settled)
    noisy = ic.control_family(_logs({"default": 5.02, "symmetric": 5.00, "rotated": 5.01}, n_seeds=4, noise=0.03))
    assert ic.cause_line(noisy).startswith("Which property of the symmetric start helps is not settled")
    assert "not tested yet" in ic.cause_line(pd.DataFrame())
