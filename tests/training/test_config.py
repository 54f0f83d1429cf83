"""Tests for qkgeometry.training.config: the learning-rate schedule, the init notes, and settings refused before any
work."""

from __future__ import annotations

import numpy as np
import pytest

from qkgeometry.training.config import INITS, TrainConfig


def test_lr_schedule_warms_up_and_decays():
    cfg = TrainConfig(steps=100, lr=1e-3, warmup=0.1)
    lrs = [cfg.lr_at(s) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-4) and max(lrs) == pytest.approx(1e-3) and lrs[-1] < 2e-5
    assert np.argmax(lrs) == 9



def test_every_init_has_a_provenance_note_and_a_figure_style():
    from qkgeometry.plotting import INIT_COLORS, INIT_STYLES
    from qkgeometry.training.config import INIT_NOTES

    assert set(INIT_NOTES) == set(INITS) == set(INIT_COLORS) == set(INIT_STYLES)


@pytest.mark.parametrize("field, value, message", [
    ("lr", float("inf"), "lr must be a finite positive number; got inf."),
    ("lr", float("nan"), "lr must be a finite positive number; got nan."),
    ("weight_decay", float("nan"), "weight_decay must be a finite number >= 0; got nan."),
    ("weight_decay", float("inf"), "weight_decay must be a finite number >= 0; got inf."),
    ("vocab_size", 10_000_000_000, "vocab_size must be at most 1,000,000; got 10,000,000,000."),
])
def test_non_finite_rates_and_huge_vocabularies_are_refused(field, value, message):
    with pytest.raises(ValueError) as err:
        TrainConfig(**{field: value})
    assert str(err.value) == message


def test_objective_config_refuses_non_finite_rates_and_init_scales():
    from qkgeometry.training.config import ObjectiveConfig

    for bad in ({"lr": float("inf")}, {"weight_decay": float("nan")}):
        with pytest.raises(ValueError, match="finite"):
            ObjectiveConfig(**bad)
    with pytest.raises(ValueError, match="`init_std`"):
        ObjectiveConfig(init_std=0.0)


def test_the_two_experiments_name_their_objectives_apart():
    from qkgeometry.training import objectives
    from qkgeometry.training.config import ARCH_OBJECTIVE, OBJECTIVES

    assert ARCH_OBJECTIVE == {"encoder": "mlm", "decoder": "clm"} and TrainConfig(arch="decoder").objective == "clm"
    assert objectives.OBJECTIVES is OBJECTIVES == ("causal", "mlm", "rtd")
