"""The blank-panel detector of the rendered-page check, on figures drawn here in the book's style."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from figure_panels import blank_panels, panels
from qkgeometry import plotting


@pytest.fixture(autouse=True)
def _style():
    plotting.use_style()
    yield
    plt.close("all")


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=200, bbox_inches="tight")
    return buffer.getvalue()


def _image(fig):
    from PIL import Image

    return Image.open(io.BytesIO(_png(fig)))


def test_axes_with_nothing_drawn_is_blank():
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3))
    a.plot(np.arange(20), np.sin(np.arange(20)), marker="o")
    b.set(xlabel="step", ylabel="loss", title="nothing here")
    found = panels(_image(fig))
    assert len(found) == 2
    assert len(blank_panels(_image(fig))) == 1


def test_heatmap_of_a_constant_is_blank_and_a_real_one_is_not():
    rng = np.random.default_rng(0)
    fig, axes = plt.subplots(1, 3, figsize=(10, 3), constrained_layout=True)
    for ax, grid in zip(axes, (rng.uniform(-1, 1, (6, 8)), np.full((6, 8), 0.004), rng.uniform(-0.3, 0.3, (6, 8)))):
        im = ax.imshow(grid, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        ax.grid(False)
    fig.colorbar(im, ax=list(axes))
    blank = blank_panels(_image(fig))
    assert len(blank) == 1
    assert blank[0].left > _image(fig).width / 4  # the middle panel, not the first
    assert len(panels(_image(fig))) >= 3


def test_sparse_but_real_panels_are_not_blank():
    fig, axes = plt.subplots(1, 3, figsize=(10, 3))
    axes[0].plot([0, 1], [0.2, 0.25], lw=1)  # one thin line
    axes[1].scatter([0.5], [0.5], s=30)  # one point
    axes[2].axhspan(-0.1, 0.1, color="0.85")
    axes[2].plot(np.linspace(0, 1, 50), 0.3 * np.sin(np.linspace(0, 9, 50)))
    assert panels(_image(fig)) and blank_panels(_image(fig)) == []


def test_a_deleted_axes_leaves_no_panel():
    fig, axes = plt.subplots(2, 2, figsize=(6, 5))
    for ax in axes.ravel()[:3]:
        ax.plot([0, 1, 2], [1, 0, 1])
    fig.delaxes(axes[1, 1])
    assert len(panels(_image(fig))) == 3 and blank_panels(_image(fig)) == []


def test_grid_lines_behind_data_and_bars_under_a_curve_are_not_frames():
    """An empty corner of a real panel, bounded by grid lines that data hides (the authors' training curves), and
    a tall histogram bar under a steep density (a Beta law) once read as blank panels."""
    rng = np.random.default_rng(1)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
    x = np.linspace(0, 1, 200)
    for k in range(4):
        a.plot(x, -0.5 + 0.1 * k + 0.05 * np.sin(9 * x + k), ls="--" if k % 2 else "-")
    a.set_ylim(-1.05, 1.05)
    draws = rng.beta(0.5, 7.5, 20_000)
    b.hist(draws, bins=100, density=True, color="0.75")
    grid = np.linspace(0.002, 1, 400)
    from scipy import stats as scipy_stats

    b.plot(grid, scipy_stats.beta(0.5, 7.5).pdf(grid), color="black")
    b.set_ylim(0, 12)
    image = _image(fig)
    assert len(panels(image)) >= 2 and blank_panels(image) == []
