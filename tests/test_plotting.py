"""The book's figures draw what their docstrings say: the right data, on the right scale, in the right panels."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from qkgeometry import decompose, plotting


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plotting.plt.close("all")


def test_matrix_triptych_shows_m_and_its_parts_on_one_zero_centred_scale():
    M = np.random.default_rng(0).normal(size=(6, 6))
    fig = plotting.matrix_triptych(M)
    images = [ax.get_images()[0] for ax in fig.axes[:3]]
    Ms, Mn = decompose(M)
    for image, expected in zip(images, (M, Ms, Mn)):
        np.testing.assert_allclose(image.get_array(), expected, rtol=0, atol=1e-12)
        lo, hi = image.get_clim()
        assert lo == -hi and hi == images[0].get_clim()[1]
    assert plotting.matrix_triptych(M, max_dim=3).axes[0].get_images()[0].get_array().shape == (3, 3)


def _per_head_frame() -> pd.DataFrame:
    rows = [{"model": "m", "component": "self", "init": "pretrained", "layer": layer, "head": head,
             "symmetry": 0.1 * layer - 0.05 * head, "directionality": 0.0}
            for layer in range(3) for head in range(4)]
    rows.append({"model": "m (random init)", "component": "self", "init": "random", "layer": 0, "head": 0,
                 "symmetry": 0.9, "directionality": 0.0})
    return pd.DataFrame(rows)


def test_head_heatmap_is_layer_by_head_with_integer_ticks_and_no_random_twins():
    fig = plotting.survey_head_heatmaps(_per_head_frame())
    ax = fig.axes[0]
    grid = ax.get_images()[0].get_array()
    assert grid.shape == (3, 4)
    assert grid[2, 1] == pytest.approx(0.2 - 0.05)
    assert len(fig.axes) == 2  # one panel (the twin is left out) + colour bar
    fig.canvas.draw()
    for ticks in (ax.get_xticks(), ax.get_yticks()):
        assert np.all(ticks == np.round(ticks))


def test_head_heatmap_without_head_rows_says_what_to_do():
    frame = _per_head_frame().assign(head=np.nan)
    with pytest.raises(ValueError, match="per='head'"):
        plotting.survey_head_heatmaps(frame)


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
    assert [a.get_title() for a in fig.axes] == ["arch = encoder", "arch = decoder"]
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), [8, 7, 6])  # mean over seeds 0, 1, 2 of 9 - step/10 - seed
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(5) and band.max() == pytest.approx(9)  # seed 2 at step 20, seed 0 at step 0
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["default (n=3)", "symmetric (n=3)"]


def test_survival_grid_has_one_panel_per_arch_and_learning_rate():
    logs = pd.concat([_run_logs(), _run_logs().assign(lr_max=5e-5)])
    fig = plotting.survival_grid(logs)
    titles = sorted(ax.get_title() for ax in fig.axes)
    assert titles == sorted(f"{a}, lr = {lr:g}" for a in ("encoder", "decoder") for lr in (5e-5, 1e-3))


def test_objective_trajectories_clip_score_bands_to_the_score_range():
    frame = pd.DataFrame({"objective": ["mlm"] * 4, "step": [0, 0, 1, 1], "seed": [0, 1, 0, 1],
                          "symmetry": [0.99, -0.99, 0.98, 0.97]})
    fig = plotting.objective_trajectories(frame, scores=("symmetry",))
    band = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() >= -1 and band.max() <= 1
    assert band.min() == -1  # the unclipped t-interval at step 0 reaches far below −1
