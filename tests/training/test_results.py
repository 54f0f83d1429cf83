"""The recorded runs that ship with the package (``qkgeometry.recorded``) are what the book says they are: each log
agrees with its provenance.

Chapter 5 reads these files and never recomputes them, so a log truncated by hand, a provenance copied from another
run, or a missing file would silently change the book. These checks read the installed package data only.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import qkgeometry as qg
from qkgeometry.recorded_runs import available
from qkgeometry.training.loop import TrainConfig

#: every run of every recorded experiment, found through the accessor (by folder)
RUNS = sorted(folder for name in available() for folder in qg.recorded(name).runs.values())


def test_there_are_recorded_runs():
    assert "expB-encoder-lr2e-4-10k" in available() and "ch3-objectives" in available()
    assert RUNS, f"no recorded runs in {available()}"


@pytest.mark.parametrize("run", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_log_matches_its_provenance(run: Path):
    prov = json.loads((run / "provenance.json").read_text())
    config = TrainConfig(**prov["config"])  # a valid config, with the fields the code knows
    log = pd.read_csv(run / "log.csv")
    steps = log["step"].to_numpy()
    assert steps[0] == 0 and np.all(np.diff(steps) == config.log_every), "steps must be 0, log_every, 2·log_every…"
    assert steps[-1] == prov["steps_done"] <= config.steps
    for column in ("arch", "init", "seed", "corpus"):
        assert set(log[column]) == {getattr(config, column)}, column
    assert set(log["lr_max"]) == {config.lr}
    np.testing.assert_allclose(log["lr"].iloc[1:], [config.lr_at(s - 1) for s in steps[1:]], rtol=1e-9)
    assert log["val_loss"].notna().all() and log["train_loss"].iloc[1:].notna().all()
    scores = log.filter(regex=r"^symmetry_L\d+$")
    assert scores.shape[1] == config.layers and np.allclose(scores.mean(axis=1), log["symmetry_mean"])
    assert prov["data"]["corpus"] == config.corpus and prov["commit"]


def test_runs_of_one_experiment_are_paired():
    """Runs that are compared share everything but the init (and differ in seed): same schedule, data and shape."""
    for experiment in {run.parent for run in RUNS}:
        provs = [json.loads((run / "provenance.json").read_text()) for run in RUNS if run.parent == experiment]
        shared = [{k: v for k, v in p["config"].items() if k not in ("init", "seed")} for p in provs]
        assert all(s == shared[0] for s in shared), experiment.name
        assert len({p["data"]["fingerprint"] for p in provs}) == 1, experiment.name


def _recorded_logs() -> pd.DataFrame:
    return pd.concat([pd.read_csv(run / "log.csv") for run in RUNS], ignore_index=True)


def test_paired_curve_of_the_recorded_runs_ends_at_the_paired_final_difference():
    """The chapter's paired-difference figure and its verdict read the same numbers: the curve's last point is the
    paired final-loss difference, with the same t-interval over seeds."""
    from qkgeometry.training import metrics as tm

    logs = _recorded_logs()
    encoder = logs[logs["arch"] == "encoder"]
    curve = tm.paired_curve(encoder, "symmetric", "default", "val_loss")
    final = tm.paired_differences(encoder, "symmetric", "default").iloc[0]
    last = curve.sort_values("step").iloc[-1]
    assert last["n"] == final["n"] == encoder["seed"].nunique()
    np.testing.assert_allclose([last["diff_mean"], last["ci_low"], last["ci_high"]],
                               [final["diff_mean"], final["ci_low"], final["ci_high"]], rtol=1e-12)
    # same data and masks: at step 0 only the init differs, and the loss barely sees it
    assert curve.loc[curve["step"] == 0, "diff_mean"].abs().max() < 1e-3
    assert set(curve["step"]) == set(encoder["step"])


def test_symmetry_dynamics_of_the_recorded_runs_match_the_logs():
    from qkgeometry.training import metrics as tm

    logs = _recorded_logs()
    dyn = tm.symmetry_dynamics(logs).set_index("init")
    for init, row in dyn.iterrows():
        curve = logs[logs["init"] == init].groupby("step")["symmetry_mean"].mean()
        assert row["end"] == pytest.approx(curve.iloc[-1]) and row["peak"] == pytest.approx(curve.iloc[1:].max())
    assert dyn.loc["symmetric", "start"] == pytest.approx(1.0, abs=1e-6)  # exactly symmetric at step 0


#: the inits every experiment compares; control inits (skew, rotated, shared) may have run a subset of their seeds
MAIN_INITS = ("default", "symmetric")


def test_every_init_of_an_experiment_has_the_same_seeds_and_is_complete():
    """The chapter pairs runs by seed: the main inits of an experiment must have run the same seeds, and every
    control only seeds that they ran, each to the end of the schedule (a run still in progress is not committed)."""
    for experiment in {run.parent for run in RUNS}:
        provs = [json.loads((run / "provenance.json").read_text()) for run in RUNS if run.parent == experiment]
        seeds = {}
        for p in provs:
            seeds.setdefault(p["config"]["init"], set()).add(p["config"]["seed"])
            assert p["steps_done"] == p["config"]["steps"], f"{experiment.name}: a run stopped before its schedule"
        main = {frozenset(seeds[init]) for init in MAIN_INITS}
        assert len(main) == 1, f"{experiment.name}: the main inits ran different seeds"
        main_seeds = next(iter(main))
        assert len(main_seeds) >= 3, experiment.name
        for init, ran in seeds.items():
            assert ran <= main_seeds, f"{experiment.name}: {init} ran seeds the main inits did not"


def test_runs_paired_by_seed_read_the_same_data():
    """Pairing by seed holds only if every init of a seed trained on the same token streams: the same counts and
    the same unigram plateau (a different tokenizer moves the plateau by about 0.08 nats)."""
    for experiment in {run.parent for run in RUNS}:
        by_seed = {}
        for run in RUNS:
            if run.parent == experiment:
                p = json.loads((run / "provenance.json").read_text())
                d = p["data"]
                by_seed.setdefault(p["config"]["seed"], set()).add(
                    (d["train_tokens"], d["val_tokens"], round(d["unigram_loss"], 12)))
        mixed = {seed: sorted(v) for seed, v in by_seed.items() if len(v) > 1}
        assert not mixed, f"{experiment.name}: inits of one seed read different data: {mixed}"


def test_the_results_readme_names_every_recorded_seed():
    """The README next to the logs states which seeds ran; it must match the folders."""
    for experiment in {run.parent for run in RUNS}:
        readme = (experiment / "README.md").read_text()
        seeds = sorted({json.loads((run / "provenance.json").read_text())["config"]["seed"]
                        for run in RUNS if run.parent == experiment})
        assert f"--seed {' '.join(map(str, seeds))}" in readme, experiment.name
