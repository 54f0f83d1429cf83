"""Chapter 3's figures: score bands stay inside the score range."""
from __future__ import annotations

import pandas as pd
import pytest

from qkgeometry import plotting


def test_objective_trajectories_clip_score_bands_to_the_score_range():
    frame = pd.DataFrame({"objective": ["mlm"] * 4, "step": [0, 0, 1, 1], "seed": [0, 1, 0, 1],
                          "symmetry": [0.99, -0.99, 0.98, 0.97]})
    fig = plotting.objective_trajectories(frame, scores=("symmetry",))
    band = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() >= -1 and band.max() <= 1
    assert band.min() == -1  # the unclipped t-interval at step 0 reaches far below −1


def test_objective_losses_draws_one_panel_per_objective_with_its_plateau():
    frame = pd.DataFrame({"objective": ["mlm"] * 6 + ["rtd"] * 6, "seed": [0, 1] * 6,
                          "step": [0, 0, 10, 10, 20, 20] * 2,
                          "loss": [float("nan")] * 2 + [7.0, 7.2, 6.5, 6.7] + [float("nan")] * 2 + [0.5, 0.45, 0.42, 0.43]})
    fig = plotting.objective_losses(frame, {"mlm": ("unigram", 6.9), "rtd": ("constant guess", 0.42)})
    assert len(fig.axes) == 2
    plateau_y = [line.get_ydata()[0] for ax in fig.axes for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert plateau_y == [6.9, 0.42]
    mean_line = fig.axes[0].get_lines()[0]
    assert list(mean_line.get_xdata()) == [10, 20] and list(mean_line.get_ydata()) == [7.1, 6.6]
    with pytest.raises(ValueError, match="plateaus: no reference loss for \\['rtd'\\]"):
        plotting.objective_losses(frame, {"mlm": ("unigram", 6.9)})


def test_chapter3_legends_sit_beside_the_data_not_over_it():
    import numpy as np

    steps = np.arange(0, 1001, 50)
    rows = [{"objective": o, "seed": seed, "step": int(t), "symmetry": a * (1 - np.exp(-t / 300)) + 0.01 * seed,
             "directionality": -a * t / 1000 + 0.01 * seed, "loss": 7 - b * np.log1p(t / 100) + 0.01 * seed}
            for o, a, b in (("mlm", 0.4, 0.5), ("causal", -0.1, 0.6)) for seed in range(3) for t in steps]
    frame = pd.DataFrame(rows)
    figures = [plotting.objective_trajectories(frame, null_bands={"symmetry": (-0.05, 0.05)}),
               plotting.objective_losses(frame, {"mlm": ("unigram", 6.0), "causal": ("unigram", 5.9)})]
    for fig in figures:
        assert plotting.legend_overlaps(fig) == []
