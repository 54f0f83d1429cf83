"""qkgeometry.stats: intervals against scipy and simulation, the verdict rule's three outcomes, clear refusals."""

import numpy as np
import pytest
from scipy import stats as sps

from qkgeometry import stats


def test_t_interval_matches_scipy():
    x = np.array([0.3, 0.1, 0.4, 0.2, 0.25])
    iv = stats.t_interval(x)
    low, high = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert iv.n == 5 and iv.method == "t"
    assert iv.low == pytest.approx(low) and iv.high == pytest.approx(high)


def test_t_interval_coverage_is_nominal():
    rng = np.random.default_rng(1)
    covered = 0
    trials = 2000
    for _ in range(trials):
        iv = stats.t_interval(rng.normal(0.5, 1.0, 3))
        covered += iv.low <= 0.5 <= iv.high
    # binomial sd at p = 0.95, n = 2000 is 0.0049: 4 sd either side
    assert abs(covered / trials - 0.95) < 0.02


def test_bootstrap_refuses_few_values():
    with pytest.raises(ValueError, match="t_interval"):
        stats.bootstrap_interval([1.0, 2.0, 3.0])


def test_bootstrap_interval_contains_median_of_large_sample():
    x = np.random.default_rng(0).normal(2.0, 1.0, 400)
    iv = stats.bootstrap_interval(x, unit="layer")
    assert iv.low < 2.0 < iv.high and iv.high - iv.low < 0.4


def test_paired_difference_and_verdicts():
    same_sign = stats.paired_difference([6.179, 6.164, 6.156], [6.186, 6.187, 6.192])
    assert same_sign.same_sign and not same_sign.interval.excludes_zero
    assert stats.verdict(same_sign, "slower", "faster").startswith("suggested but not established (faster")
    clear = stats.paired_difference([1.0, 1.1, 1.2, 1.05], [0.0, 0.05, 0.1, 0.0])
    assert stats.verdict(clear, "treated larger", "treated smaller").startswith("treated larger:")
    mixed = stats.paired_difference([1.0, -1.0, 0.5], [0.0, 0.0, 0.0])
    assert stats.verdict(mixed, "up", "down").startswith("no detectable difference")
    assert "n = 4 seeds" in stats.verdict(clear, "a", "b")


def test_difference_of_medians_detects_a_shift_and_not_noise():
    rng = np.random.default_rng(3)
    shifted, p = stats.difference_of_medians(rng.normal(1, 0.3, 20), rng.normal(0, 0.3, 20), alternative="greater")
    assert shifted.low > 0 and p < 0.01
    same, p_same = stats.difference_of_medians(rng.normal(0, 1, 20), rng.normal(0, 1, 20))
    assert same.low < 0 < same.high and p_same > 0.01


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [1.0]])
def test_bad_values_are_named(bad):
    with pytest.raises(ValueError, match="values"):
        stats.t_interval(bad)


def test_format_interval_has_no_negative_zero():
    assert stats.format_interval(-0.00001, -0.2, 0.1) == "0.000 [\u22120.200, 0.100]"
    assert stats.format_interval(0.15, 0.09, 0.21, percent=True) == "15.0% [9.0%, 21.0%]"


def test_paired_difference_clustered_counts_one_difference_per_cluster():
    # three pairs of family a (differences 1, 2, 3) and one of family b (difference -1)
    result = stats.paired_difference([2, 4, 6, 0], [1, 2, 3, 1], unit="family", clusters=["a", "a", "a", "b"])
    np.testing.assert_allclose(result.differences, [2.0, -1.0])
    assert result.n == 2 and result.interval.unit == "family"
    assert result.n_positive == 1 and result.n_negative == 1
    plain = stats.paired_difference([2, 4, 6, 0], [1, 2, 3, 1])
    assert plain.n == 4 and plain.interval.estimate == pytest.approx(1.25)
    assert result.interval.estimate == pytest.approx(0.5)
    assert result.p_value == pytest.approx(sps.ttest_1samp([2.0, -1.0], 0).pvalue)
    with pytest.raises(ValueError, match="clusters: needs one label per pair"):
        stats.paired_difference([1, 2], [0, 0], clusters=["a"])


def test_holm_adjustment_matches_the_step_down_rule():
    p = np.array([0.04, 0.001, 0.03, 0.2])
    adjusted = stats.holm_adjusted(p)
    # sorted: 0.001*4, 0.03*3, 0.04*2, 0.2*1 -> running max 0.004, 0.09, 0.09, 0.2
    np.testing.assert_allclose(adjusted, [0.09, 0.004, 0.09, 0.2])
    assert np.all(adjusted >= p)
    with pytest.raises(ValueError, match="p_values"):
        stats.holm_adjusted([0.5, 1.5])


def test_verdict_names_the_unit_in_the_plural():
    result = stats.paired_difference([3, 5, 1, 2], [1, 1, 0, 0], unit="family", clusters=["a", "a", "b", "b"])
    assert "n = 2 families" in stats.verdict(result, "up", "down")
    assert "n = 3 seeds" in stats.verdict(stats.t_interval([1, 2, 3], unit="seed"), "up", "down")


def test_format_p_never_prints_zero():
    assert stats.format_p(0.0) == "p < 0.0001"
    assert stats.format_p(4e-5) == "p < 0.0001"
    assert stats.format_p(0.0312) == "p = 0.031"
    assert stats.format_p(1.0) == "p = 1"
    with pytest.raises(ValueError, match="p: a p-value lies in"):
        stats.format_p(1.5)


def test_judge_states_the_number_once_and_keeps_the_statistics_apart():
    """The sentence carries the estimate and its interval once; n, the method and the test sit in the details."""
    tiny = stats.paired_difference([1e-5, 3e-5, 4e-5], [0.0, 0.0, 0.0])
    v = stats.judge(tiny, "shared higher", "shared lower", "loss gap (nats)")
    assert "0.0000 " not in v.sentence and "0.0000]" not in v.sentence  # tiny numbers keep their digits
    assert v.sentence.count("CI") == 1 and "n =" not in v.sentence and "p =" not in v.sentence and "p <" not in v.sentence
    assert v.details["n"] == "3 seeds" and v.details["test"].startswith("paired t-test: p")
    assert v.outcome in ("difference", "suggested")
    none = stats.judge(stats.t_interval([0.1, -0.1, 0.05]), "a", "b", "gap")
    assert none.sentence.startswith("No detectable difference: gap ") and none.outcome == "none"
    perm = stats.judge(stats.difference_of_medians(np.arange(10.0) + 5, np.arange(10.0), n_resamples=999), "A", "B")
    assert perm.details["test"].startswith("permutation test: p")
    with pytest.raises(TypeError, match="result: expected"):
        stats.judge(0.3, "a", "b")
    by_family = stats.judge(stats.paired_difference([1, 2, 3, 4.5], [0, 0, 0, 0], unit="family"), "up", "down")
    assert by_family.details["n"] == "4 families"  # not "4 familys"


def test_an_effect_below_the_stated_floor_gets_no_verdict():
    tiny = stats.paired_difference([1e-4, 2e-4, 3e-4], [0.0, 0.0, 0.0])  # excludes 0, but 0.0002 nats
    assert stats.verdict(tiny, "up", "down", "gap").startswith("suggested") or \
        stats.verdict(tiny, "up", "down", "gap").startswith("up")
    assert stats.verdict(tiny, "up", "down", "gap", floor=0.01).startswith("below the effect-size floor of 0.01")
    assert stats.judge(tiny, "up", "down", "gap", floor=0.01).outcome == "below floor"
    big = stats.paired_difference([0.05, 0.06, 0.07], [0.0, 0.0, 0.0])
    assert stats.verdict(big, "up", "down", "gap", floor=0.01).startswith("up")
    with pytest.raises(ValueError, match="floor"):
        stats.verdict(big, "up", "down", floor=-1)


def test_judge_family_demotes_a_difference_that_does_not_survive_holm():
    # two tests with unadjusted p between 0.025 and 0.05: each interval excludes 0, Holm doubles the smaller p
    rng = np.random.default_rng(3)
    found = []
    while len(found) < 2:
        diffs = rng.normal(0.6, 1.0, 8)
        pd_ = stats.paired_difference(diffs, np.zeros(8))
        if 0.025 < pd_.p_value < 0.05:
            found.append(pd_)
    verdicts = stats.judge_family([(f, "up", "down", f"gap {k}") for k, f in enumerate(found)])
    assert all(f.interval.excludes_zero for f in found)
    assert [v.outcome for v in verdicts] == ["suggested", "suggested"]
    assert all("after correcting for 2 tests" in v.claim for v in verdicts)
    assert all(v.p_adjusted >= 0.05 and v.family_size == 2 for v in verdicts)
    assert "Holm-adjusted" in verdicts[0].details["corrected"]
    # alone, the same comparison is a difference
    assert stats.judge(found[0], "up", "down").outcome == "difference"


def test_judge_family_keeps_a_strong_difference_and_checks_its_input():
    strong = stats.paired_difference([1.0, 1.1, 0.9, 1.05, 0.95], [0.0] * 5)
    weak = stats.paired_difference([0.1, -0.2, 0.05, -0.1, 0.15], [0.0] * 5)
    v = stats.judge_family([(strong, "up", "down", "a"), (weak, "up", "down", "b")])
    assert [x.outcome for x in v] == ["difference", "none"]
    with pytest.raises(ValueError, match="alpha"):
        stats.judge_family([(strong, "up", "down", "a")], alpha=1.5)
    with pytest.raises(TypeError, match=r"comparisons\[0\]"):
        stats.judge_family([(strong.interval, "up", "down", "a")])


def test_below_floor_verdict_has_details():
    v = stats.judge(stats.t_interval([0.002, 0.003, 0.0025]), "up", "down", "loss gap", floor=0.01)
    assert v.outcome == "below floor"
    assert "0.01" in v.details["rule"]


def test_paired_t_power_matches_simulation_and_sizes_seeds():
    rng = np.random.default_rng(0)
    n, effect, sd = 8, 0.7, 1.0
    sims = rng.normal(effect, sd, (20000, n))
    t = sims.mean(1) / (sims.std(1, ddof=1) / np.sqrt(n))
    crit = sps.t.ppf(0.975, n - 1)
    simulated = np.mean(np.abs(t) > crit)
    assert abs(stats.paired_t_power(effect, sd, n) - simulated) < 0.015
    n_needed = stats.seeds_for_power(effect, sd, power=0.8)
    assert stats.paired_t_power(effect, sd, n_needed) >= 0.8 > stats.paired_t_power(effect, sd, n_needed - 1)
    with pytest.raises(ValueError, match="sd"):
        stats.paired_t_power(0.5, 0.0, 5)
    with pytest.raises(ValueError, match="n_max"):
        stats.seeds_for_power(1e-4, 1.0, n_max=50)


def test_auc_power_matches_a_simulated_rank_test_and_gives_the_detectable_auc():
    rng = np.random.default_rng(1)
    for auc, n1, n0 in ((0.7, 30, 30), (0.65, 12, 100)):
        shift = np.sqrt(2) * sps.norm.ppf(auc)  # two unit normals this far apart have this AUC
        x, y = rng.standard_normal((1500, n1)) + shift, rng.standard_normal((1500, n0))
        simulated = np.mean(sps.mannwhitneyu(x, y, axis=1).pvalue < 0.05)
        assert abs(stats.auc_power(auc, n1, n0) - simulated) < 0.04, (auc, n1, n0, simulated)
    assert stats.auc_power(0.3, 30, 30) == pytest.approx(stats.auc_power(0.7, 30, 30))  # two-sided
    found = stats.detectable_auc(30, 30)
    assert stats.auc_power(found, 30, 30) == pytest.approx(0.8, abs=1e-4)
    assert stats.detectable_auc(30, 30, alpha=0.01) > found > stats.detectable_auc(300, 300)
    assert stats.detectable_auc(1, 1) == 1.0  # two units cannot reach 80% power at any AUC
    with pytest.raises(ValueError, match="n_label"):
        stats.auc_power(0.7, 0, 30)
    with pytest.raises(ValueError, match="auc"):
        stats.auc_power(1.2, 3, 3)


def test_a_verdict_below_the_floor_still_lists_its_statistics():
    from qkgeometry import stats

    v = stats.judge(stats.t_interval([0.002, 0.003, 0.0025]), "higher", "lower", "loss gap", floor=0.01)
    assert v.outcome == "below floor" and v.sentence.startswith("Below the effect-size floor of 0.01 (no verdict)")
    assert "floor" in v.details["rule"] and v.details["n"] == "3 values"


def test_a_family_bootstrap_counts_families_and_is_wider_than_a_value_bootstrap():
    """Ten near-copies per family are one replication, not ten: resampling families widens the interval."""
    rng = np.random.default_rng(0)
    shift = rng.normal(0, 0.3, 12)
    enc = np.concatenate([0.3 + shift[f] + rng.normal(0, 0.01, 10) for f in range(6)])  # families 0-5: encoders
    dec = np.concatenate([shift[f] + rng.normal(0, 0.01, 10) for f in range(6, 12)])  # families 6-11: decoders
    clustered = stats.clustered_difference_of_medians(enc, dec, np.repeat(np.arange(6), 10),
                                                      np.repeat(np.arange(6, 12), 10), n_resamples=2000)
    flat, _ = stats.difference_of_medians(enc, dec, n_resamples=2000)
    assert clustered.n == 12 and clustered.unit == "family" and flat.n == 120
    assert clustered.estimate == pytest.approx(flat.estimate)
    assert (clustered.high - clustered.low) > 2 * (flat.high - flat.low)
    with pytest.raises(ValueError, match="one label per value"):
        stats.clustered_difference_of_medians(enc, dec, np.zeros(59), np.ones(60))
    with pytest.raises(ValueError, match="at least 2 clusters"):
        stats.clustered_difference_of_medians(enc, dec, np.zeros(60), np.zeros(60))


def test_one_number_formatter_writes_a_true_minus_sign_and_thousands_separators():
    # every path a number takes to a page: fixed decimals, a scale, a format spec, an integer, an interval
    assert stats.format_number(-0.119, decimals=2) == "\u22120.12"
    assert stats.format_number(-0.0004, decimals=3) == "0.000"  # no negative zero
    assert stats.format_number(10033) == "10,033"
    assert stats.format_number(-12345.678, decimals=1) == "\u221212,345.7"
    assert stats.format_number(-0.054, spec=".1%") == "\u22125.4%"
    assert stats.format_number(-0.0001, spec=".1%") == "0.0%"
    assert stats.format_number(1234567, spec="d") == "1,234,567"
    assert stats.format_number(-2.3e-06, spec=".2g") == "\u22122.3 \u00d7 10\u207b\u2076"  # a power of ten, never e-06
    assert stats.format_number(20000.0, spec=".0f") == "20,000" and stats.format_number(5e-5, spec="g") == "5 \u00d7 10\u207b\u2075"
    assert stats.format_number(3, spec="x") == "3"  # no separator where the type takes none
    assert stats.format_number(-0.25, decimals=2) == "\u22120.25"
    assert stats.format_interval(-0.2, -0.3, -0.1, digits=2, percent=True) == "\u221220% [\u221230%, \u221210%]"
    for text in (stats.format_number(-1.5), stats.format_number(-3, decimals=0), stats.format_interval(-1, -2, 0)):
        assert "-" not in text, text


def test_a_difference_below_the_floor_is_written_to_the_floors_precision_not_six_decimals():
    """A lab too short to show an effect gave '0.000000 (95% CI −0.000041 to 0.000041)': below the effect-size
    floor the sentence and the box's estimate use the floor's precision; the box keeps the full interval."""
    v = stats.judge(stats.Interval(3e-7, -4.1e-5, 4.1e-5, 3), "higher", "lower", "loss gap", floor=0.005)
    assert v.outcome == "below floor"
    assert v.sentence.endswith("loss gap 0.0000 (95% CI 0.0000 to 0.0000).")
    assert v.details["estimate"] == "loss gap = 0.0000" and "4.1 × 10⁻⁵" in v.details["95% interval"]
    above = stats.judge(stats.Interval(0.02, 0.011, 0.029, 3), "higher", "lower", "loss gap", floor=0.005)
    assert above.sentence.endswith("loss gap 0.0200 (95% CI 0.0110 to 0.0290).")


def test_an_interval_that_excludes_zero_while_its_own_test_does_not_is_only_suggested():
    """A percentile bootstrap over a few units can exclude 0 where the permutation test of the same comparison
    gives p above 0.05: the comparison is then not worded as established."""
    from qkgeometry import stats

    iv = stats.Interval(0.2, 0.01, 0.35, 7, unit="model")
    v = stats.judge((iv, 0.057), "encoders are more symmetric", "decoders are more symmetric", "encoder − decoder")
    assert v.outcome == "suggested" and "not established" in v.claim and "p = 0.057" in v.claim
    assert stats.judge((iv, 0.01), "up", "down").outcome == "difference"


def test_verdict_and_judge_are_one_rule():
    """verdict() is judge() written on one line: the same outcome and words for every kind of result."""
    results = [stats.t_interval([0.2, 0.3, 0.25], unit="seed"), stats.t_interval([-0.1, 0.3, 0.05]),
               stats.paired_difference([1.0, 1.1, 1.2], [1.05, 1.12, 1.3]),
               stats.t_interval([0.002, 0.003, 0.0025])]
    for result in results:
        judged = stats.judge(result, "up", "down", "gap", floor=0.01)
        assert stats.verdict(result, "up", "down", "gap", digits=4, floor=0.01) == judged.line(4)
        assert judged.line(4).startswith(judged.claim[:-1] if judged.outcome == "suggested" else judged.claim)
