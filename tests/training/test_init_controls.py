"""Tests for qkgeometry.training.init_controls: the control family and its reading against the predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry.training import init_controls as ic


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
    logs = _logs({"default": 5.02, "symmetric": 5.00, "indefinite": indefinite, "rotated": 5.02, "skew": 5.02})
    family = ic.control_family(logs)
    assert set(zip(family.treatment, family.baseline)) == set(ic.CONTROL_PAIRS)
    assert family["holm"].between(0, 1).all() and all(v.family_size == 6 for v in family["judged"])
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
