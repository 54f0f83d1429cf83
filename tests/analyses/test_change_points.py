"""Change points of training curves and the roles of heads (chapter 8)."""
import numpy as np
import pandas as pd
import pytest

from qkgeometry.analyses.change_points import (
    fraction_step,
    head_roles,
    net_change,
    null_band,
    smooth,
    steepest_step,
    threshold_step,
)

STEPS = np.arange(0, 1001, 20, dtype=float)


def sigmoid(centre, width=40.0, low=0.0, high=1.0):
    return low + (high - low) / (1 + np.exp(-(STEPS - centre) / width))


@pytest.mark.parametrize("centre", [300.0, 500.0, 700.0])
def test_half_way_step_of_a_sigmoid_is_its_centre(centre):
    assert fraction_step(STEPS, sigmoid(centre), 0.5, window=1) == pytest.approx(centre, abs=2)


def test_fractions_are_ordered_and_direction_free():
    up, down = sigmoid(500), sigmoid(500, low=1.0, high=0.0)
    q = [fraction_step(STEPS, up, f, window=1) for f in (0.25, 0.5, 0.75)]
    assert q[0] < q[1] < q[2]
    assert [fraction_step(STEPS, down, f, window=1) for f in (0.25, 0.5, 0.75)] == pytest.approx(q)


def test_steepest_step_finds_the_centre():
    assert steepest_step(STEPS, sigmoid(420), window=1) == pytest.approx(420, abs=20)
    assert steepest_step(STEPS, sigmoid(420, low=3, high=-1), window=1) == pytest.approx(420, abs=20)


def test_a_curve_that_does_not_leave_its_band_has_no_change_point():
    flat = 0.01 * np.sin(STEPS)
    assert np.isnan(fraction_step(STEPS, flat, 0.5, min_change=0.1))
    assert np.isnan(steepest_step(STEPS, flat, min_change=0.1))
    assert not np.isnan(fraction_step(STEPS, sigmoid(500), 0.5, min_change=0.1))


def test_threshold_step_interpolates_and_reports_never():
    curve = sigmoid(500)
    assert threshold_step(STEPS, curve, 0.5, window=1) == pytest.approx(500, abs=2)
    assert np.isnan(threshold_step(STEPS, curve, 1.5, window=1))


def test_smoothing_keeps_length_and_means():
    y = np.array([0.0, 3.0, 0.0, 3.0, 0.0])
    z = smooth(y, 3)
    assert len(z) == 5 and z[2] == pytest.approx(2.0) and z[0] == pytest.approx(1.5)
    with pytest.raises(ValueError, match="odd"):
        smooth(y, 4)


def test_a_lead_is_a_negative_lag():
    geometry, behaviour = sigmoid(350), sigmoid(600)
    lag = fraction_step(STEPS, geometry, 0.5) - fraction_step(STEPS, behaviour, 0.5)
    assert lag == pytest.approx(-250, abs=10)
    assert net_change(STEPS, behaviour) == pytest.approx(1.0, abs=0.02)


def test_bad_curves_are_refused():
    with pytest.raises(ValueError, match="increase"):
        fraction_step([0, 20, 10], [0, 1, 2])
    with pytest.raises(ValueError, match="NaN"):
        fraction_step([0, 10, 20], [0, np.nan, 2])
    with pytest.raises(ValueError, match="fraction"):
        fraction_step(STEPS, sigmoid(500), 1.0)


def _log(runs=3):
    rows = []
    for r in range(runs):
        for step in (0, 100, 200):
            for layer in (0, 1):
                for head in (0, 1):
                    good = step == 200 and head == 1
                    rows.append({"run": f"s{r}", "step": step, "layer": layer, "head": head,
                                 "previous": 0.8 if (good and layer == 0 and r > 0) else 0.05,
                                 "previous_chance": 0.07,
                                 "induction": 0.6 if (good and layer == 1) else 0.04, "induction_null": 0.04,
                                 "symmetry": 0.01 * (r + head + layer) + (0.3 if step > 0 else 0.0)})
    return pd.DataFrame(rows)


def test_head_roles_pick_the_best_head_and_check_its_label():
    roles = head_roles(_log())
    prev = roles[roles["role"] == "previous-token"].set_index("run")
    assert list(prev["head"]) == [0, 1, 1]            # run s0 has no previous-token head: its best is head 0
    assert list(prev["labelled"]) == [False, True, True]
    ind = roles[roles["role"] == "induction"]
    assert ind["labelled"].all() and (ind["head"] == 1).all()


def test_null_band_reads_step_zero_only():
    band = null_band(_log(), "symmetry", layer=0)
    values = [0.01 * (r + h) for r in range(3) for h in range(2)]
    assert band == pytest.approx(2 * np.std(values, ddof=1))
