"""The lags of chapter 8 on synthetic runs whose answer is known."""
import numpy as np
import pandas as pd
import pytest

from qkgeometry.analyses.emergence import (
    GEOMETRY,
    control_summary,
    lag_claim,
    lags,
    score_changes,
    specifications,
)

STEPS = np.arange(0, 1601, 20)


def sig(centre, high=1.0, low=0.0, width=40.0):
    return low + (high - low) / (1 + np.exp(-(STEPS - centre) / width))


def _runs(n=8, lead=-60.0, induction=True, seed=0):
    rng = np.random.default_rng(seed)
    logs, steps = [], []
    for r in range(n):
        jitter = rng.normal(0, 15)
        for layer in (0, 1):
            for head in range(4):
                noise = lambda: rng.normal(0, 0.01, len(STEPS))  # noqa: E731
                row = {"step": STEPS, "layer": layer, "head": head, "previous": 0.05 + noise(),
                       "previous_chance": 0.07, "induction": 0.04 + noise(), "induction_null": 0.04,
                       "position_contrast": noise(), "composition_contrast": noise(),
                       "symmetry": 0.01 * head + noise(), "token_contrast": noise()}
                if layer == 0 and head == 1:
                    row["previous"] = sig(300 + jitter, 0.9, 0.05)
                    row["position_contrast"] = sig(300 + jitter + lead, 2.0)
                if layer == 1 and head == 2 and induction:
                    row["induction"] = sig(900 + jitter, 0.6, 0.04)
                    row["composition_contrast"] = sig(900 + jitter + lead, 1.5)
                logs.append(pd.DataFrame(row).assign(run=f"s{r}"))
            steps.append(pd.DataFrame({"step": STEPS, "layer": layer, "run": f"s{r}",
                                       "position_contrast": sig(300 + jitter + lead, 2.0),
                                       "composition_contrast": sig(900 + jitter + lead, 1.5) if layer else np.nan,
                                       "in_context_loss": 3 - 2.5 * sig(900 + jitter) if induction else 3.0,
                                       "other_loss": 3.0}))
    return pd.concat(logs, ignore_index=True), pd.concat(steps, ignore_index=True)


@pytest.mark.parametrize("lead", [-80.0, 80.0])
def test_the_primary_lag_recovers_a_known_lead(lead):
    log, steps = _runs(lead=lead)
    for role in GEOMETRY:
        claim, table = lag_claim(log, steps, role)
        p = claim.primary.interval
        assert p.n == 8 and p.estimate == pytest.approx(lead, abs=5) and p.excludes_zero
        assert ("before" in claim.claim) == (lead < 0)
        assert set(table["spec"]) == {s.label for s in specifications()}


def test_a_head_without_its_label_has_no_lag():
    log, steps = _runs(induction=False)
    table = lags(log, steps, "induction", specifications()[0])
    assert not table["labelled"].any() and table["lag"].isna().all()
    with pytest.raises(ValueError, match="fewer than 3 training seeds"):
        lag_claim(log, steps, "induction")


def test_score_changes_separate_moving_from_still_scores():
    log, _ = _runs()
    moves = score_changes(log, "previous-token", ("position_contrast", "symmetry")).set_index("score")["moves"]
    assert moves["position_contrast"] and not moves["symmetry"]


def test_control_summary_reports_labels_and_losses():
    log, steps = _runs(n=3, induction=False)
    summary = control_summary(log, steps)
    assert len(summary) == 3 and not summary["induction_labelled"].any()
    assert summary["previous_labelled"].all()
    assert (summary["in_context_loss"] == 3.0).all()


def test_cross_layer_lag_is_read_between_the_layers():
    from qkgeometry.analyses.emergence import cross_layer_lags

    log, steps = _runs(lead=-80.0)
    lags_ = cross_layer_lags(log, steps)["lag"]
    # composition at 900 − 80, previous-token behaviour at 300: about 520 steps later
    assert len(lags_) == 8 and lags_.mean() == pytest.approx(520, abs=25)


def test_predictions_are_judged_from_the_numbers():
    from qkgeometry.analyses.emergence import predictions

    log, steps = _runs(lead=-80.0)
    log["position_symmetry"] = np.random.default_rng(1).normal(0, 0.05, len(log))
    log["composition_symmetry"] = log["composition_contrast"] / 3
    ctl_log, ctl_steps = _runs(n=3, induction=False, seed=2)
    table = predictions(log, steps, ctl_log, ctl_steps, min_seeds=8).set_index("prediction")
    assert table.loc["1a", "verdict"] == "right" and table.loc["2a", "verdict"] == "right"
    assert table.loc["3a", "verdict"] == "right" and table.loc["3b", "verdict"] == "right"
    assert table.loc["4", "verdict"] == "right" and table.loc["5", "verdict"] == "wrong"  # its flat loss gap is exact
    late = predictions(*_runs(lead=80.0), None, None).set_index("prediction")
    assert late.loc["3a", "verdict"] == "wrong"
    few = predictions(*_runs(n=6, lead=-80.0), None, None, min_seeds=8).set_index("prediction")
    assert few.loc["3b", "verdict"] == "not testable" and "6 of 6" in few.loc["3b", "observed"]


def _offsets_frame():
    """Two runs, two layer-1 heads: run a looks at +2 (0.3 and 0.5), run b at +2 (0.1 and 0.3); +1 at 0.1."""
    rows = []
    for run, seed, twos in (("a", 0, (0.3, 0.5)), ("b", 1, (0.1, 0.3))):
        for head, two in enumerate(twos):
            for offset in (1, 2):
                rows.append({"run": run, "seed": seed, "step": 100, "inputs": "copies", "layer": 1, "head": head,
                             "offset": offset, "attention": two if offset == 2 else 0.1, "chance": 0.05,
                             "queries": 10})
    return pd.DataFrame(rows)


def test_copy_offset_summary_averages_heads_then_seeds():
    from scipy import stats as sps

    from qkgeometry.analyses.emergence import copy_offset_summary

    per_seed, over = copy_offset_summary(_offsets_frame())
    two = per_seed[per_seed["offset"] == 2].set_index("run")
    assert two.loc["a", "attention"] == pytest.approx(0.4) and two.loc["b", "attention"] == pytest.approx(0.2)
    assert two.loc["a", "lowest_head"] == pytest.approx(0.3) and two.loc["a", "highest_head"] == pytest.approx(0.5)
    row = over.set_index("offset").loc[2]
    half = sps.t.ppf(0.975, 1) * np.std([0.4, 0.2], ddof=1) / np.sqrt(2)
    assert row["attention"] == pytest.approx(0.3) and row["high"] - row["attention"] == pytest.approx(half)
    assert row["n"] == 2 and row["chance"] == pytest.approx(0.05)
    with pytest.raises(ValueError, match=r"^step: 7 was not recorded"):
        copy_offset_summary(_offsets_frame(), step=7)
    with pytest.raises(ValueError, match=r"^offsets: no rows for layer 0"):
        copy_offset_summary(_offsets_frame(), layer=0)


def test_ablation_summary_is_the_rise_over_the_unablated_loss():
    from qkgeometry.analyses.emergence import ablation_summary

    rows = []
    for run, base, rises in (("a", 2.0, (0.1, 0.3)), ("b", 1.0, (0.2, 0.2))):
        rows.append({"run": run, "layer": pd.NA, "head": pd.NA, "in_context_loss": base, "other_loss": 3.0})
        rows += [{"run": run, "layer": 1, "head": h, "in_context_loss": base + r, "other_loss": 3.0 + r / 10}
                 for h, r in enumerate(rises)]
    per_head, per_layer = ablation_summary(pd.DataFrame(rows))
    assert per_head["rise"].round(12).tolist() == [0.1, 0.3, 0.2, 0.2]
    layer = per_layer.set_index("layer").loc[1]
    assert layer["rise"] == pytest.approx(0.2) and layer["n"] == 2
    assert (layer["smallest"], layer["largest"]) == (pytest.approx(0.1), pytest.approx(0.3))
    assert layer["other_rise"] == pytest.approx(0.02)
    with pytest.raises(ValueError, match=r"^ablation: needs"):
        ablation_summary(pd.DataFrame(rows).dropna(subset=["layer"]))


def test_the_recorded_copy_offsets_are_the_recorded_runs():
    """Each recorded copy-offset run was trained again from a clean tree and found to be the recorded run, and its
    probe profile at offsets 0 and +1 is the recorded duplicate and induction score of every head at the last step."""
    from qkgeometry.analyses.emergence import load_copy_offsets, load_runs

    offsets, ablation, provenance = load_copy_offsets()
    log, _, recorded = load_runs()
    assert sorted(provenance) == [f"attn-repeat-s{s}" for s in range(4)]
    for run, prov in provenance.items():
        assert prov["src_dirty"] is False and len(prov["commit"]) == 40
        assert prov["recorded_check"]["same"] is True and prov["recorded_check"]["steps_compared"] >= 20
        assert prov["training_batches_sha256"] == recorded[run]["data"]["training_batches_sha256"]
        last = prov["config"]["steps"]
        probe = offsets[(offsets["run"] == run) & (offsets["step"] == last) & (offsets["inputs"] == "repeat")]
        want = log[(log["run"] == run) & (log["step"] == last)].set_index(["layer", "head"])
        for offset, score in ((0, "duplicate"), (1, "induction")):
            got = probe[probe["offset"] == offset].set_index(["layer", "head"])["attention"]
            np.testing.assert_allclose(got.to_numpy(), want.loc[got.index, score].to_numpy(), rtol=2e-5, atol=1e-7)
        assert len(ablation[ablation["run"] == run]) == 1 + 2 * 4
