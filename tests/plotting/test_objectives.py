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


def test_objective_trajectories_axis_labels_fit_their_panels():
    """The stacked panels' axis labels stay inside their own panels (two-line labels of chapter 3's changes from
    step 0 ran into each other); the full name of each score sits above its panel."""
    ylabels = {"symmetry_change": "change of symmetry from step 0\n(median over layers)",
               "directionality_change": "change of directionality\nfrom step 0 (median over layers)"}
    frame = _runs().rename(columns={"symmetry": "symmetry_change", "directionality": "directionality_change"})
    fig = plotting.objective_trajectories(frame, scores=tuple(ylabels), ylabels=ylabels)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        label, panel = ax.yaxis.label.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert panel.y0 - 1 <= label.y0 and label.y1 <= panel.y1 + 1, ax.yaxis.label.get_text()
    assert [ax.get_title() for ax in fig.axes] == ["change of symmetry from step 0 (median over layers)",
                                                   "change of directionality from step 0 (median over layers)"]


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


def _runs(arms=(("mlm", 0.4, 0.5), ("causal", -0.1, 0.6))) -> pd.DataFrame:
    import numpy as np

    steps = np.arange(0, 1001, 50)
    return pd.DataFrame([{"objective": o, "seed": seed, "step": int(t),
                          "symmetry": a * (1 - np.exp(-t / 300)) + 0.01 * seed,
                          "directionality": -a * t / 1000 + 0.01 * seed,
                          "loss": 7 - b * np.log1p(t / 100) + 0.01 * seed}
                         for o, a, b in arms for seed in range(3) for t in steps])


def test_chapter3_legends_sit_beside_the_data_not_over_it():
    frame = _runs()
    figures = [plotting.objective_trajectories(frame, null_bands={"symmetry": (-0.05, 0.05)}),
               plotting.objective_losses(frame, {"mlm": ("unigram", 6.0), "causal": ("unigram", 5.9)})]
    for fig in figures:
        assert plotting.legend_overlaps(fig) == []


def test_chapter3_figures_are_stacked_and_readable_on_a_phone(book_style):
    """One column of panels, the legend below, its smallest text at least 9 px on a 390-px phone (the one-step
    violins, the losses and the specification curves once scrolled sideways at about 7 px)."""
    import numpy as np

    from qkgeometry import catalogue

    frame = _runs((("mlm", 0.4, 0.5), ("causal", -0.1, 0.6), ("causal-supervision", 0.1, 0.4), ("rtd", 0.2, 0.3)))
    settings = ("random init", "MiniLM layer 0", "SmolLM2 layer 0")
    one = pd.DataFrame({"setting": np.repeat(settings, 16), "objective": ["causal", "mlm"] * 24,
                        "symmetry": np.random.default_rng(0).uniform(-0.2, 0.8, 48)})
    figures = {"one_step_distributions": plotting.one_step_distributions(one),
               "objective_losses": plotting.objective_losses(
                   frame, dict.fromkeys(set(frame.objective), ("unigram cross-entropy", 6.0))),
               "objective_trajectories": plotting.objective_trajectories(
                   frame, null_bands={"symmetry": (-0.05, 0.05)}),
               "paper_training_curves": plotting.paper_training_curves(
                   catalogue.paper_per_layer("custom-models"))}
    for name, fig in figures.items():
        assert fig.get_figwidth() == plotting.STACKED_WIDTH, name
        assert {ax.get_subplotspec().get_gridspec().ncols for ax in fig.axes} == {1}, name
        assert plotting.shown_text_px(fig) >= plotting.PHONE_TEXT_PX, name
        assert plotting.legend_overlaps(fig) == [], name
    assert [ax.get_title() for ax in figures["one_step_distributions"].axes] == list(settings)  # top to bottom
    assert len(figures["objective_losses"].axes) == 4 and len(figures["objective_losses"].legends) == 1
