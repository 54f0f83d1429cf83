"""The recorded runs under results/ are what the book says they are: each log agrees with its provenance.

Chapter 5 reads these files and never recomputes them, so a log truncated by hand, a provenance copied from another
run, or a missing file would silently change the book. These checks read the committed files only.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from qkgeometry.training.loop import TrainConfig

RESULTS = Path(__file__).resolve().parents[1] / "results"
RUNS = sorted(p.parent for p in RESULTS.glob("*/*/log.csv"))


def test_there_are_recorded_runs():
    assert RUNS, f"no */*/log.csv under {RESULTS}"


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
