"""Tests for qkgeometry.analyses.fair_test: joining recordings, the learning rule, the family, the mask-or-density
decision and the matched-learning estimand."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

import qkgeometry as qg
from qkgeometry.analyses import carriers
from qkgeometry.analyses import fair_test as ft
from qkgeometry.training import objectives as ob

SPARSE = "causal-sparse"


def _summaries(changes: dict[str, list[float]], score: str = "directionality") -> pd.DataFrame:
    rows = []
    for objective, values in changes.items():
        for seed, v in enumerate(values):
            rows.append({"objective": objective, "seed": seed, f"{score}_change": v,
                         "symmetry_change" if score == "directionality" else "directionality_change": 0.01 * seed})
    return pd.DataFrame(rows)


def _family(mlm, causal, sparse):
    frame = _summaries({"mlm": mlm, "causal": causal, SPARSE: sparse, ob.AUTHORS_DECODER: mlm})
    return ft.contrast_family(frame, pairs=ft.FAMILY[:3])


RNG = np.random.default_rng(0)
NOISE = list(RNG.normal(0, 0.02, 12))


@pytest.mark.parametrize(("sparse_shift", "outcome"), [(-0.3, "mask"), (0.0, "density"), (-0.15, "both")])
def test_mask_or_density_follows_the_stated_rule(sparse_shift, outcome):
    mlm = [-0.15 + e for e in NOISE]
    causal = [-0.45 + 0.5 * e for e in NOISE[::-1]]
    sparse = [-0.15 + sparse_shift + 0.7 * e for e in NOISE[3:] + NOISE[:3]]
    decision = carriers.mask_or_density(_family(mlm, causal, sparse), "directionality")
    assert decision.outcome == outcome
    assert "directionality" in decision.sentence and "CI" in decision.sentence


def test_mask_or_density_is_undecided_when_neither_contrast_is_established():
    noisy = list(RNG.normal(0, 0.5, 12))
    mlm = [-0.15 + e for e in noisy]
    causal = [-0.45 + e for e in noisy[::-1]]
    sparse = [-0.3 + e for e in noisy[5:] + noisy[:5]]
    assert carriers.mask_or_density(_family(mlm, causal, sparse), "directionality").outcome == "undecided"


def test_a_difference_of_the_opposite_sign_does_not_count_for_the_mask():
    mlm = [-0.15 + e for e in NOISE]
    causal = [-0.45 + e for e in NOISE[::-1]]
    sparse = [+0.3 + e for e in NOISE[2:] + NOISE[:2]]  # far on the other side of the masked LM
    decision = carriers.mask_or_density(_family(mlm, causal, sparse), "directionality")
    assert decision.outcome == "density"


def test_claims_name_the_objective_that_really_moves_further():
    larger, smaller = ft.change_claims("causal", "mlm", "symmetry", 0.016, 0.19)
    assert smaller == "the causal LM's symmetry rises less than the masked LM's (toward symmetric)"
    assert ft.change_claims("causal", "mlm", "symmetry", -0.1, 0.2)[1] == \
        "the causal LM's change of symmetry is smaller than the masked LM's"
    assert larger.startswith("the causal LM's symmetry rises more")


def test_matched_steps_take_the_first_step_below_the_level_and_leave_out_runs_that_never_reach_it():
    per_run = pd.DataFrame({"objective": ["a"] * 4 + ["b"] * 4, "seed": [0] * 8,
                            "step": [0, 100, 200, 300] * 2,
                            "loss": [np.nan, 9.8, 9.4, 9.0, np.nan, 9.9, 9.8, 9.7],
                            "directionality_change": [0, 1, 2, 3, 0, 5, 6, 7]})
    steps = ft.matched_steps(per_run, {"a": 10.0, "b": 10.0}, level=0.05)
    by = steps.set_index("objective")["step"]
    assert by["a"] == 200 and np.isnan(by["b"])
    at = ft.matched_summaries(per_run, steps).set_index("objective")
    assert at.loc["a", "directionality_change"] == 2 and np.isnan(at.loc["b", "directionality_change"])
    with pytest.raises(ValueError, match="plateau: no plateau for"):
        ft.matched_steps(per_run, {"a": 10.0})
    with pytest.raises(ValueError, match="level"):
        ft.matched_steps(per_run, {"a": 10.0, "b": 10.0}, level=1.5)


def test_learning_table_applies_the_floor_to_the_whole_interval():
    per_run = pd.DataFrame({"objective": ["x"] * 3 + ["y"] * 3, "seed": [0, 1, 2] * 2, "step": [10] * 6,
                            "loss": [9.0, 9.1, 8.9, 9.79, 9.81, 9.80]})
    table = ft.learning_table(per_run, {"x": 10.0, "y": 10.0}).set_index("objective")
    assert table.loc["x", "learned"] and not table.loc["y", "learned"]  # y ends 2% below: not more than the floor
    assert table.loc["x", "share"] == pytest.approx(0.1)


def _copy_recording(tmp_path, name, objective_filter=None):
    src = qg.recorded("ch3-objectives-4k")
    out = tmp_path / name
    for seed in (0, 1, 2):
        part = out / f"s{seed}"
        shutil.copytree(src / f"s{seed}", part)
        if objective_filter:
            for csv in ("scores.csv", "gradients.csv"):
                frame = pd.read_csv(part / csv)
                frame[frame.objective.isin(objective_filter)].to_csv(part / csv, index=False)
            prov = json.loads((part / "provenance.json").read_text())
            prov.update(objectives=list(objective_filter), runs_total=len(objective_filter),
                        runs_done=len(objective_filter))
            (part / "provenance.json").write_text(json.dumps(prov))
    return out


def test_read_fair_test_joins_arms_that_share_their_initialisation_and_refuses_others(tmp_path):
    a = _copy_recording(tmp_path, "a", ["causal", "mlm"])
    b = _copy_recording(tmp_path, "b", ["rtd"])
    scores, _, prov = ft.read_fair_test(a, b)
    assert prov["objectives"] == ["causal", "mlm", "rtd"] and prov["seeds"] == [0, 1, 2]
    assert len(prov["recordings"]) == 2 and scores.groupby(["objective", "seed"]).ngroups == 9
    with pytest.raises(ValueError, match="more than one of them"):
        ft.read_fair_test(a, a)
    frame = pd.read_csv(b / "s1" / "scores.csv")
    frame.loc[(frame.step == 0) & (frame["head"] == 2), "symmetry"] += 0.01  # another initialisation for seed 1
    frame.to_csv(b / "s1" / "scores.csv", index=False)
    with pytest.raises(ValueError, match=r"do not share their initialisation .*\[1\]"):
        ft.read_fair_test(a, b)
    frame.loc[(frame.step == 0) & (frame["head"] == 2), "symmetry"] -= 0.01
    frame.loc[(frame.step == 0) & (frame["head"] == 1), "directionality"] = float("nan")  # a score not recorded
    frame.to_csv(b / "s1" / "scores.csv", index=False)
    with pytest.raises(ValueError, match=r"do not share their initialisation .*missing.*\[1\]"):
        ft.read_fair_test(a, b)


def test_a_decision_never_calls_a_smaller_move_toward_symmetric_a_move_toward_skew():
    # every arm moves symmetry toward symmetric; the causal LM least (the recorded pattern)
    frame = _summaries({"mlm": [0.19 + e for e in NOISE], "causal": [0.016 + e for e in NOISE[::-1]],
                        SPARSE: [0.073 + e for e in NOISE[4:] + NOISE[:4]], ob.AUTHORS_DECODER: NOISE},
                       score="symmetry")
    decision = carriers.mask_or_density(ft.contrast_family(frame, pairs=ft.FAMILY[:3]), "symmetry")
    assert decision.outcome == "both"
    assert "toward skew" not in decision.sentence
    assert "the causal LM's symmetry rises less than the masked LM's (toward symmetric)" in decision.sentence


def _supervision_family(causal, sparse, small):
    frame = _summaries({"mlm": NOISE, "causal": causal, SPARSE: sparse, ft.SUPERVISED_CAUSAL: small})
    return ft.contrast_family(frame, pairs=[("causal", SPARSE), (ft.SUPERVISED_CAUSAL, SPARSE),
                                            ("causal", ft.SUPERVISED_CAUSAL)])


@pytest.mark.parametrize(("small_at", "outcome"), [(-0.45, "share"), (-0.15, "supervision"), (-0.3, "both")])
def test_share_or_supervision_follows_the_stated_rule(small_at, outcome):
    causal = [-0.45 + 0.5 * e for e in NOISE[::-1]]
    sparse = [-0.15 + 0.7 * e for e in NOISE[3:] + NOISE[:3]]
    small = [small_at + 0.6 * e for e in NOISE[6:] + NOISE[:6]]
    decision = carriers.share_or_supervision(_supervision_family(causal, sparse, small), "directionality", (1008, 126))
    assert decision.outcome == outcome
    assert "1,008 targets per step against 126" in decision.sentence and "CI" in decision.sentence


def test_share_or_supervision_has_nothing_to_split_without_a_density_gap():
    same = [-0.2 + e for e in NOISE]
    decision = carriers.share_or_supervision(_supervision_family(same, same[::-1], same), "directionality")
    assert decision.outcome == "nothing to split"


def _supervision_recording(tmp_path, batch_size=2, seeds=(0, 1, 2), **config):
    """The recorded causal runs of seeds ``seeds`` relabelled as a batch-cut recording (same initialisation)."""
    out = _copy_recording(tmp_path, "small", ["causal"])
    for seed in (0, 1, 2):
        prov_path = out / f"s{seed}" / "provenance.json"
        if seed not in seeds:
            shutil.rmtree(out / f"s{seed}")
            continue
        prov = json.loads(prov_path.read_text())
        prov["config"].update(batch_size=batch_size, **config)
        prov_path.write_text(json.dumps(prov))
    return out


def test_read_supervision_arm_labels_its_runs_and_checks_that_they_pair(tmp_path):
    base = _copy_recording(tmp_path, "base", ["causal", "mlm"])
    scores, _, prov = ft.read_fair_test(base)
    arm, grads, arm_prov = ft.read_supervision_arm(_supervision_recording(tmp_path, seeds=(0, 2)), scores, prov)
    assert set(arm["objective"]) == {ft.SUPERVISED_CAUSAL} and set(grads["objective"]) == {ft.SUPERVISED_CAUSAL}
    assert arm_prov["seeds"] == [0, 2] and sorted(arm["seed"].unique()) == [0, 2]


@pytest.mark.parametrize(("change", "message"), [
    ({"batch_size": 16}, "not smaller"),
    ({"lr": 0.01}, r"differs from the fair test's in \['lr'\]"),
])
def test_read_supervision_arm_refuses_runs_that_are_not_the_planned_arm(tmp_path, change, message):
    base = _copy_recording(tmp_path, "base", ["causal", "mlm"])
    scores, _, prov = ft.read_fair_test(base)
    batch = change.pop("batch_size", 2)
    folder = _supervision_recording(tmp_path, batch_size=batch, **change)
    with pytest.raises(ValueError, match=message):
        ft.read_supervision_arm(folder, scores, prov)


def test_read_supervision_arm_refuses_another_initialisation(tmp_path):
    base = _copy_recording(tmp_path, "base", ["causal", "mlm"])
    scores, _, prov = ft.read_fair_test(base)
    folder = _supervision_recording(tmp_path)
    frame = pd.read_csv(folder / "s1" / "scores.csv")
    frame.loc[(frame.step == 0) & (frame["head"] == 1), "directionality"] += 0.05
    frame.to_csv(folder / "s1" / "scores.csv", index=False)
    with pytest.raises(ValueError, match=r"seeds \[1\] do not start from the fair test's initialisation"):
        ft.read_supervision_arm(folder, scores, prov)


def test_specification_claims_cover_every_horizon_unit_and_level_and_mark_the_primary(tmp_path):
    scores, _, _ = ft.read_fair_test(_copy_recording(tmp_path, "base", ["causal", "mlm"]))
    plateau = dict.fromkeys(ft.ARMS, 6.938)
    claims = ft.specification_claims(scores, plateau, pairs=[("causal", "mlm")], first_step=3000,
                                     levels=(0.05, 0.5))
    assert set(claims) == {("causal", "mlm", "symmetry"), ("causal", "mlm", "directionality")}
    c = claims[("causal", "mlm", "directionality")]
    labels = [s.label for s in c.curve]
    assert c.primary.label == "step 4,000, per layer" and c.primary.interval.n == 3
    assert "step 3,000, per head" in labels and "matched at 5% below the plateau, per layer" in labels
    assert len([s for s in c.curve if s.axis.startswith("horizon")]) == 2 * 11  # steps 3,000-4,000, two units
    # no run gets 50% below its plateau: listed, never imputed
    assert any(m.startswith("matched at 50% below the plateau, per layer") for m in c.not_computed)
    # the primary is the family's per-layer contrast at the last step
    summaries = ob.seed_summaries(scores, "layer")
    primary = ft.contrast_family(summaries, [("causal", "mlm")])[("causal", "mlm", "directionality")]
    assert c.primary.interval.estimate == pytest.approx(primary.difference.interval.estimate)
    with pytest.raises(ValueError, match="primary_step"):
        ft.specification_claims(scores, plateau, pairs=[("causal", "mlm")], primary_step=4050)
