"""The statistics exercises of chapter 3 (3.3 paired against unpaired intervals, 3.4 reading a specification
curve): the reference answers pass, the usual slips fail with a message that names them, and nothing raises."""

from __future__ import annotations

import numpy as np
from scipy import stats as scipy_stats

from qkgeometry.exercises.gradients import (
    CURVES,
    PAIRED_SEEDS,
    check_curve_readings,
    check_paired_interval,
    curve_readings,
)


def _reference():
    causal, mlm = (np.asarray(PAIRED_SEEDS[k]) for k in ("causal", "mlm"))
    d = causal - mlm
    half = scipy_stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    welch = scipy_stats.ttest_ind(causal, mlm, equal_var=False).confidence_interval()
    return (d.mean(), d.mean() - half, d.mean() + half), (d.mean(), welch.low, welch.high), d


def test_paired_interval_accepts_the_answer_rounded_to_three_decimals(capsys):
    paired, unpaired, _ = _reference()
    assert check_paired_interval(paired, unpaired)
    assert check_paired_interval(np.round(paired, 3), np.round(unpaired, 3))
    out = capsys.readouterr().out
    assert "correct" in out and "excludes 0" in out


def test_paired_interval_names_the_usual_slips(capsys):
    paired, unpaired, d = _reference()
    assert not check_paired_interval(unpaired, unpaired)
    assert "the unpaired one" in capsys.readouterr().out
    assert not check_paired_interval((-paired[0], -paired[2], -paired[1]), unpaired)
    assert "masked − causal" in capsys.readouterr().out
    z = 1.959964 * d.std(ddof=1) / np.sqrt(len(d))
    assert not check_paired_interval((d.mean(), d.mean() - z, d.mean() + z), unpaired)
    assert "1.96" in capsys.readouterr().out
    assert not check_paired_interval(paired, (unpaired[0], unpaired[1] / 2, unpaired[2] / 2))
    assert "unpaired one is off" in capsys.readouterr().out
    assert not check_paired_interval("nope", unpaired)
    assert not check_paired_interval(paired, (1.0, 2.0))
    assert "three numbers" in capsys.readouterr().out


def test_curve_readings_cover_every_outcome_and_name_the_wrong_curve(capsys):
    want = curve_readings()
    assert sorted(want.values()) == sorted(["holds", "direction holds", "reverses", "not established",
                                            "primary only"])
    assert set(want) == set(CURVES)
    assert check_curve_readings(want)
    assert not check_curve_readings({**want, "D": "holds"})  # a later interval excludes 0; the pre-stated does not
    out = capsys.readouterr().out
    assert "curve D" in out and "pre-stated interval" in out
    assert not check_curve_readings({**want, "A": "strong"})
    assert "one of" in capsys.readouterr().out
    assert not check_curve_readings(["holds"])
