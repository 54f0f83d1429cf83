"""Chapter 3's figures: score bands stay inside the score range."""
from __future__ import annotations

import pandas as pd

from qkgeometry import plotting


def test_objective_trajectories_clip_score_bands_to_the_score_range():
    frame = pd.DataFrame({"objective": ["mlm"] * 4, "step": [0, 0, 1, 1], "seed": [0, 1, 0, 1],
                          "symmetry": [0.99, -0.99, 0.98, 0.97]})
    fig = plotting.objective_trajectories(frame, scores=("symmetry",))
    band = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() >= -1 and band.max() <= 1
    assert band.min() == -1  # the unclipped t-interval at step 0 reaches far below −1
