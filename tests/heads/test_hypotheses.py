"""heads.hypotheses: the AUC, its interval and permutation test; the hypotheses, their two Holm families and the
rank correlation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry.heads import behaviour, hypotheses


def _scores_frame(**columns):
    n = len(next(iter(columns.values())))
    base = {name: np.zeros(n) for name in behaviour.DECODER_LABELS}
    base.update(duplicate_null=np.zeros(n), induction_null=np.zeros(n))
    base.update({k: np.asarray(v, dtype=float) for k, v in columns.items()})
    return pd.DataFrame({"layer": 0, "head": np.arange(n), **base})



def test_separation_auc_interval_and_permutation():
    perfect = hypotheses.separation([5, 6, 7, 8, 9, 10, 1, 2, 3, 4], [1] * 6 + [0] * 4, n_resamples=500)
    assert perfect.auc == 1 and perfect.low == 1 and perfect.p_value < 0.05
    assert perfect.n_label == 6 and perfect.n_rest == 4
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = rng.random(200) < 0.3
    null = hypotheses.separation(x, y, n_resamples=500)
    assert null.low < 0.5 < null.high and null.p_value > 0.05
    assert "no detectable difference" in hypotheses.separation_verdict(null, "higher", "lower")
    assert hypotheses.separation_verdict(perfect, "higher", "lower").startswith("higher")
    assert hypotheses.separation([1, 2, 3], [1, 0, 0]) is None
    # pooled over strata: a per-model offset alone separates nothing
    strata = np.repeat(["a", "b"], 100)
    shifted = np.concatenate([x[:100], x[100:] + 50])
    lab = np.concatenate([np.zeros(100, bool), np.ones(100, bool)]) & (rng.random(200) < 0.5)
    lab[:10] = True
    pooled = hypotheses.separation(shifted, lab, n_resamples=400)
    within = hypotheses.separation(shifted, lab, n_resamples=400, strata=strata)
    assert pooled.auc > 0.7 and pooled.p_value < 0.05
    assert abs(within.auc - 0.5) < 0.15 and within.p_value > 0.05  # permutations stay inside each model
    # one stratum: the stratified permutation is the plain one (same AUC; p-values agree up to resampling noise)
    one = hypotheses.separation(x[:60] + 0.5 * y[:60], y[:60], n_resamples=2000, strata=np.zeros(60))
    plain = hypotheses.separation(x[:60] + 0.5 * y[:60], y[:60], n_resamples=2000)
    assert one.auc == pytest.approx(plain.auc) and abs(one.p_value - plain.p_value) < 0.05
    with pytest.raises(ValueError, match="same length"):
        hypotheses.separation([1, 2], [1])



def test_hypotheses_are_all_reported():
    rng = np.random.default_rng(2)
    rows = []
    for model in ("a", "b"):
        for h in range(40):
            first = h < 10
            rows.append({"model": model, "is_first": first, "is_previous": 10 <= h < 20, "is_current": h >= 34,
                         "is_duplicate": h >= 30, "is_induction": False, "directionality": rng.normal() - first,
                         "symmetry": rng.normal(), "positive_share": rng.random(), "trace_z": rng.normal(),
                         "trace_gain_m1": rng.normal(), "key_bias": rng.random(), "rotary": model == "a",
                         "has_bias": model == "b"})
    out = hypotheses.run_hypotheses(pd.DataFrame(rows), n_resamples=200)
    assert set(out["hypothesis"]) == {h.key for h in hypotheses.HYPOTHESES}
    h7 = out[(out.hypothesis == "H7") & (out.model == "pooled")].iloc[0]
    assert h7.auc < 0.5 and h7.verdict.startswith("confirmed (lower)")
    assert set(out[out.hypothesis == "H5"]["model"]) == {"a"}  # rotary only


def test_hypotheses_are_split_into_predictions_of_the_algebra_and_empirical_ones():
    kinds = {h.key: h.kind for h in hypotheses.HYPOTHESES}
    assert {k for k, v in kinds.items() if v == "algebra"} == {"H1", "H2", "H3", "H4"}
    # a prediction of the algebra states what it assumes; the trace-based ones assume isotropic inputs
    assert all(h.assumption for h in hypotheses.HYPOTHESES if h.kind == "algebra")
    assert all("isotropic" in h.assumption for h in hypotheses.HYPOTHESES if h.score == "trace_z")
    h4 = next(h for h in hypotheses.HYPOTHESES if h.key == "H4")
    assert h4.label == "current" and "Current-token heads" in h4.statement and "duplicate" not in h4.statement.lower()


def _hyp_results(p_values, kinds, aucs, expected):
    return pd.DataFrame({"hypothesis": [f"H{i}" for i in range(len(p_values))], "kind": kinds, "model": "pooled",
                         "p_value": p_values, "auc": aucs, "expected": expected})


def test_holm_is_applied_within_each_kind_and_decides_what_holds():
    res = _hyp_results([0.001, 0.04, 0.001, 0.02, 0.05], ["algebra", "algebra", "empirical", "empirical",
                                                           "empirical"], [0.8, 0.7, 0.8, 0.3, 0.6],
                       ["higher", "higher", "higher", "lower", "higher"])
    fam = hypotheses.hypothesis_family(res)
    np.testing.assert_allclose(fam["p_holm"], [0.002, 0.04, 0.003, 0.04, 0.05])
    assert fam["holds"].tolist() == [True, True, True, True, False]
    wrong_side = hypotheses.hypothesis_family(_hyp_results([0.001], ["empirical"], [0.3], ["higher"]))
    assert not wrong_side["holds"].iloc[0]  # significant, but the other way round



def test_rank_correlation_interval_covers_the_estimate_and_detects_a_monotone_relation():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(200)
    from scipy.stats import spearmanr

    noisy = np.exp(x) + 0.1 * rng.standard_normal(200)
    assert hypotheses._spearman(np.stack([x, -x]), np.stack([noisy, noisy])) == pytest.approx(
        [spearmanr(x, noisy).statistic, -spearmanr(x, noisy).statistic])
    ci = hypotheses.rank_correlation(x, noisy, n_resamples=300)
    assert ci.low <= ci.estimate <= ci.high and ci.low > 0.8
    null = hypotheses.rank_correlation(x, rng.standard_normal(200), n_resamples=300)
    assert null.low < 0 < null.high
    with pytest.raises(ValueError, match="at least 4"):
        hypotheses.rank_correlation([1, 2, 3], [1, 2, 3])


def test_a_pooled_separation_counts_each_model_once():
    """Pooled at the model level: one model with many heads cannot carry the result, the estimate is the mean of
    the models' own AUCs, and the interval is over models."""
    rng = np.random.default_rng(3)
    values, labels, models = [], [], []
    for name, n, shift in (("big", 300, 2.0), ("a", 20, 0.0), ("b", 20, 0.0), ("c", 20, 0.0)):
        lab = np.arange(n) < n // 4
        values.append(rng.standard_normal(n) + shift * lab)
        labels.append(lab)
        models.append(np.full(n, name))
    values, labels, models = map(np.concatenate, (values, labels, models))
    sep = hypotheses.pooled_separation(values, labels, models, n_resamples=300)
    per_head = hypotheses.separation(values, labels, n_resamples=300, strata=models)
    assert sep.n_models == 4 and sep.interval.unit == "model" and sep.interval.n == 4
    assert sep.auc == pytest.approx(np.mean(sep.per_model))
    assert sep.auc < per_head.auc - 0.1  # the heads of the big model no longer outvote the others
    assert sep.low < sep.auc < sep.high and 0 <= sep.power(0.6) <= 1


def test_labels_concentrated_in_one_model_with_higher_scores_are_not_a_separation():
    """A model whose heads all score higher and hold most labels: permuting within models sees no separation."""
    rng = np.random.default_rng(4)
    values = np.concatenate([rng.standard_normal(40) + 5, rng.standard_normal(40), rng.standard_normal(40)])
    labels = np.concatenate([np.arange(40) < 30, np.arange(40) < 3, np.arange(40) < 3])
    models = np.repeat(["hot", "x", "y"], 40)
    sep = hypotheses.pooled_separation(values, labels, models, n_resamples=500)
    assert sep.p_value > 0.05
    assert hypotheses.pooled_separation(values, labels, np.repeat(["one"], 120)) is None  # one model: nothing to pool


def test_the_opening_answer_counts_what_holds_and_bounds_what_does_not():
    fam = pd.DataFrame({"hypothesis": ["H1", "H3", "H6", "H7", "H9"],
                        "kind": ["algebra", "algebra", "empirical", "empirical", "empirical"],
                        "holds": [True, False, True, False, False],
                        "reading": ["holds", "not detected (the interval allows an AUC up to 0.66)", "holds",
                                    "not detected (the interval allows an AUC down to 0.41)", "reversed"]})
    sens = pd.DataFrame({"hypothesis": ["H1", "H1", "H6", "H6"], "factor": [0.5, 1.5, 0.5, 1.5],
                         "holds": [True, True, True, False]})
    answer = hypotheses.job_answer(fam, sens)
    assert answer.head.startswith("Little: beyond what the algebra fixes, 1 of the 3 readings of the split hold (H6), "
                                  "and it changes with the label thresholds")
    assert "1 of the 2 predictions of the algebra" in answer.head
    assert "H7 is not detected (the interval allows an AUC down to 0.41)" in answer.readings
    assert "H9 is reversed" in answer.readings
    assert answer.firmness.startswith("1 of the 2 verdicts change") and "(H6)" in answer.firmness
    # a prediction of the algebra that holds only at some thresholds is named in the opening answer too
    sens_alg = pd.concat([sens, pd.DataFrame({"hypothesis": ["H1"], "factor": [2.0], "holds": [False]})])
    assert "1 of the 2 predictions of the algebra come out as predicted (H1 only at some of the label thresholds)." \
        in hypotheses.job_answer(fam, sens_alg).head


def _recorded_heads(*aliases: str) -> pd.DataFrame:
    import qkgeometry as qg

    return pd.concat([pd.read_csv(qg.recorded(f"ch7-{a}").path / "heads.csv") for a in aliases], ignore_index=True)


def test_threshold_sensitivity_runs_the_family_again_at_each_scaled_threshold():
    """At ×1 it is the family of the recorded labels; a stricter threshold labels no more heads; every hypothesis
    is reported at every factor."""
    table = _recorded_heads("minilm-l6", "smollm2-135m")
    sens = hypotheses.threshold_sensitivity(table, factors=(1.0, 2.0), n_resamples=100)
    assert list(sens.columns[:1]) == ["factor"] and set(sens["factor"]) == {1.0, 2.0}
    for f, part in sens.groupby("factor"):
        assert set(part["hypothesis"]) == {h.key for h in hypotheses.HYPOTHESES}, f
    once = hypotheses.hypothesis_family(hypotheses.run_hypotheses(behaviour.relabel(table, 1.0), n_resamples=100,
                                                                   pooled_only=True))
    at_one = sens[sens["factor"] == 1.0].drop(columns="factor").reset_index(drop=True)
    pd.testing.assert_frame_equal(at_one, once)
    labelled = {f: behaviour.relabel(table, f).filter(like="is_").sum().sum() for f in (1.0, 2.0)}
    assert labelled[2.0] <= labelled[1.0]
