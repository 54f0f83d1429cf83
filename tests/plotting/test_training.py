"""Chapter 5's figures: seed means with their bands, one panel per arch and learning rate."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry import plotting


def _run_logs() -> pd.DataFrame:
    rows = []
    for arch in ("encoder", "decoder"):
        for init in ("default", "symmetric"):
            for seed in range(3):
                for step in (0, 10, 20):
                    rows.append({"arch": arch, "init": init, "seed": seed, "step": step, "lr_max": 1e-3,
                                 "val_loss": 9 - step / 10 - seed, "symmetry_mean": 0.5 * (init == "symmetric")})
    return pd.DataFrame(rows)


def test_init_curves_draw_the_seed_mean_with_a_min_max_band():
    fig = plotting.init_curves(_run_logs(), "val_loss")
    ax = fig.axes[0]
    assert [a.get_title() for a in fig.axes] == ["encoder (masked LM)", "decoder (causal LM)"]
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), [8, 7, 6])  # mean over seeds 0, 1, 2 of 9 - step/10 - seed
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(5) and band.max() == pytest.approx(9)  # seed 2 at step 20, seed 0 at step 0
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["default (n=3)", "symmetric (n=3)"]


def test_init_curves_put_the_legend_below_the_panels_off_the_curves():
    fig = plotting.init_curves(_run_logs(), "val_loss", zoom_from=10, hline=9.5, hline_label="unigram plateau")
    fig.canvas.draw()
    ax = fig.axes[0]
    legend, frame = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.y1 <= frame.y0, "the legend overlaps the panel"
    assert [a.get_title() for a in fig.axes if a.get_title().startswith(("encoder", "decoder"))] == [
        "encoder (masked LM)", "decoder (causal LM)"]


def test_init_curves_zoom_draws_the_late_steps_in_an_inset_of_their_own():
    fig = plotting.init_curves(_run_logs(), "val_loss", zoom_from=10)
    ax = fig.axes[0]
    (inset,) = ax.child_axes
    np.testing.assert_allclose(inset.get_lines()[0].get_xdata(), [10, 20])  # only the steps from 10 on
    np.testing.assert_allclose(inset.get_lines()[0].get_ydata(), [7, 6])
    assert inset.get_ylim()[0] > ax.get_ylim()[0] and inset.get_title() == "from step 10"
    assert not plotting.init_curves(_run_logs(), "val_loss", zoom_from=10**6).axes[0].child_axes  # nothing to zoom


def test_survival_grid_has_one_panel_per_arch_and_learning_rate():
    logs = pd.concat([_run_logs(), _run_logs().assign(lr_max=5e-5)])
    fig = plotting.survival_grid(logs)
    titles = sorted(ax.get_title() for ax in fig.axes)
    # the learning rate as a reader writes it ("5 × 10⁻⁵", never "5e-05")
    assert titles == sorted(f"{a}, learning rate {lr}" for a in ("encoder", "decoder") for lr in ("5 × 10⁻⁵", "0.001"))
