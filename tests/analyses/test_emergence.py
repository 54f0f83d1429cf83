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
