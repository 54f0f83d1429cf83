"""plotting.trajectory: one row of panels per run, one line per layer, the null band from the rows' shapes, and a
clear refusal of rows that cannot be drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry.plotting import plt, trajectory_curves


def _rows(run: str, seeds: int = 3, shapes: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [{"run": run, "step": step, "layer": layer, "seed": seed, "head": np.nan,
             "symmetry": rng.uniform(-1, 1), "directionality": rng.uniform(-1, 1)}
            for step in (0, 10, 100, 1000) for layer in range(3) for seed in range(seeds)]
    frame = pd.DataFrame(rows)
    if shapes:
        frame = frame.assign(d_model=32, head_dim=8, n_heads=4)
    return frame


def test_one_row_per_run_one_line_per_layer_and_a_null_band_only_with_shapes():
    fig = trajectory_curves(pd.concat([_rows("a"), _rows("b", shapes=False)]), band="seed",
                            events={"warm-up": 10})
    axes = np.asarray(fig.axes).reshape(2, 2)
    assert [len(ax.lines) for ax in axes[:, 0]] == [3 + 1, 3 + 1]  # three layers and the event line
    assert len(axes[0, 0].patches) == 1 and len(axes[1, 0].patches) == 0  # the null band: only with shapes
    assert "median over 3 seeds" in axes[0, 0].get_title(loc="left")
    assert axes[0, 0].get_xscale() == "symlog"
    plt.close(fig)


def test_rows_without_steps_or_with_two_stacks_are_refused():
    with pytest.raises(ValueError, match="no `step` column"):
        trajectory_curves(_rows("a").drop(columns="step"))
    two = pd.concat([_rows("a").assign(component="encoder"), _rows("a").assign(component="decoder")])
    with pytest.raises(ValueError, match="several attention stacks"):
        trajectory_curves(two)
