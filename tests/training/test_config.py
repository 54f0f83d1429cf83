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
