"""plotting.trajectory: one row of panels per run, one line per layer, the null band from the rows' shapes, and a
clear refusal of rows that cannot be drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry import plotting
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


def _checkpoints(steps, layers: int = 2, d_model: int = 64) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame([{"run": "r", "source": f"/r/checkpoint-{s}", "checkpoint": f"checkpoint-{s}", "step": s,
                          "layer": layer, "head": pd.NA, "symmetry": rng.uniform(-0.2, 0.2),
                          "directionality": rng.uniform(-0.2, 0.2), "d_model": d_model, "head_dim": 8,
                          "n_heads": 4} for s in steps for layer in range(layers)])


def test_step_ticks_are_labelled_between_powers_of_ten():
    fig = trajectory_curves(_checkpoints([0, 40, 50, 60, 300, 400]), null_samples=50)
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["0", "50", "100", "200", "400"], labels  # the last checkpoint, past the last round tick
    plt.close(fig)


def test_many_decades_are_labelled_at_every_other_power_of_ten_clear_of_zero():
    """A panel is half a stacked figure wide: five labels at most, none running into the label of step 0."""
    fig = trajectory_curves(_checkpoints([0, 10, 100, 1000, 10_000, 100_000, 200_000]), null_samples=50)
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["0", "1k", "100k"], labels
    plt.close(fig)


def test_identical_and_failed_checkpoints_are_marked():
    fig = trajectory_curves(_checkpoints([0, 10, 100]), identical=[["checkpoint-10", "checkpoint-100"]],
                            failed={"checkpoint-50": 50}, null_samples=50)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "identical weights (check the revisions)" in legend and "failed to score" in legend
    ringed = [c for c in fig.axes[0].collections if c.get_label().startswith("identical")]
    assert sorted(set(np.asarray(ringed[0].get_offsets())[:, 0])) == [10, 100]
    crossed = [c for c in fig.axes[0].collections if c.get_label() == "failed to score"]
    assert np.asarray(crossed[0].get_offsets())[:, 0].tolist() == [50]
    plt.close(fig)


def test_a_null_band_that_covers_the_whole_range_says_so_instead_of_shading():
    fig = trajectory_curves(_checkpoints([0, 10, 100], d_model=8), band=None, null_samples=200)
    directionality = fig.axes[1]  # at d = 8 the directionality of random factors reaches -1 and +1
    assert not directionality.patches and any("whole range" in t.get_text() for t in directionality.texts)
    plt.close(fig)


def test_two_checkpoints_at_one_step_are_refused_not_averaged():
    two = pd.concat([_checkpoints([0, 20]), _checkpoints([20]).assign(source="/r/stage2-step20",
                                                                       checkpoint="stage2-step20")])
    with pytest.raises(ValueError, match=r"checkpoints checkpoint-20, stage2-step20 of run 'r' sit at the same x"):
        trajectory_curves(two)


def test_a_trajectory_figure_is_readable_on_a_phone(book_style):
    rows = pd.concat([_checkpoints([0, 10, 100, 1000, 200_000], layers=4).assign(run=run)
                      for run in ("ours, masked LM", "authors' bert-small decoder")])
    fig = trajectory_curves(rows, null_samples=50)
    assert plotting.shown_text_px(fig) >= plotting.PHONE_TEXT_PX


def test_a_long_row_title_wraps_inside_the_figure(book_style):
    one = _checkpoints([0, 10, 100, 1000]).assign(run="authors' bert-small encoder (3 datasets)")
    rows = pd.concat([one.assign(seed=0), one.assign(seed=1)])
    fig = trajectory_curves(rows, band="seed", null_samples=50)
    title = fig.axes[0].get_title(loc="left")
    assert max(len(line) for line in title.split("\n")) <= 42 and title.count("\n") >= 2
    fig.canvas.draw()
    assert fig.get_tightbbox().width <= fig.get_figwidth()  # nothing sticks out: the figure shows at its width


def test_the_figure_of_a_trajectory_result_draws_its_first_stack_and_marks_what_its_attrs_say():
    """run_figure (``qkgeometry trajectory --figure``): the first attention stack of the result, its identical
    checkpoints ringed and the checkpoints that failed (the frame's ``failures`` among its ``checkpoints``) crossed
    at their steps."""
    frame = pd.concat([_checkpoints([0, 10, 100]).assign(component="encoder"),
                       _checkpoints([0, 10, 100]).assign(component="decoder")], ignore_index=True)
    frame.attrs["identical"] = [["checkpoint-10", "checkpoint-100"]]
    frame.attrs["checkpoints"] = pd.DataFrame({"name": ["checkpoint-0", "checkpoint-50", "checkpoint-100"],
                                               "source": ["/r/checkpoint-0", "/r/checkpoint-50", "/r/checkpoint-100"],
                                               "step": [0, 50, 100]})
    frame.attrs["failures"] = pd.DataFrame({"source": ["/r/checkpoint-50"], "error": ["SourceError"],
                                            "message": ["truncated"]})
    fig = plotting.trajectory.run_figure(frame)
    assert len(fig.axes[0].lines) >= 2  # the two layers of the first stack only (two stacks would be refused)
    crossed = [c for c in fig.axes[0].collections if c.get_label() == "failed to score"]
    assert len(crossed) == 1 and crossed[0].get_offsets()[:, 0].tolist() == [50.0]
    assert any(c.get_label().startswith("identical") for c in fig.axes[0].collections)
    plt.close(fig)
    plain = plotting.trajectory.run_figure(_checkpoints([0, 10]).assign(component="self"))  # no attrs: no marks
    assert not [c for c in plain.axes[0].collections if c.get_label() == "failed to score"]
    plt.close(plain)


def _settings(per: str) -> pd.DataFrame:
    rows = _checkpoints([0, 10, 100])
    if per == "head":
        rows = pd.concat([rows.assign(head=h) for h in range(4)], ignore_index=True)
    return rows.assign(per=per, input_norm="raw", qk_norm="", component="self",
                       source=rows["source"] + f"#{per}")


def test_a_store_of_two_settings_gets_one_figure_per_setting_through_the_api():
    """Per-layer and per-head rows of one run are two figures, never one line that matches neither; a frame that
    mixes them is refused by the figure itself."""
    from qkgeometry.plotting import trajectory_figures

    mixed = pd.concat([_settings("layer"), _settings("head")], ignore_index=True)
    figures = trajectory_figures(mixed.assign(stage=pd.NA, tokens=pd.NA))
    assert sorted(figures) == ["trajectory-r-self-per-head", "trajectory-r-self-per-layer"]
    lines = {stem: len(fig.axes[0].lines) for stem, fig in figures.items()}
    assert lines == {"trajectory-r-self-per-head": 2, "trajectory-r-self-per-layer": 2}
    for fig in figures.values():
        plt.close(fig)
    with pytest.raises(ValueError, match=r"frame \(run 'r'\) holds rows of per = head and layer, which one figure "
                                         r"cannot show together"):
        trajectory_curves(mixed)


def test_runs_of_a_training_callback_are_labelled_by_name_then_seed():
    rows = _checkpoints([0, 10])
    runs = ["/x/out [started 2026-01-01T00:00:00.000Z, seed 0, config aaaa]",
            "/x/out [started 2026-01-01T00:01:00.000Z, seed 1, config aaaa]"]
    frame = pd.concat([rows.assign(run=r, source=rows["source"] + r) for r in runs], ignore_index=True)
    fig = trajectory_curves(frame, null_samples=50)
    titles = [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")]
    assert [t.split(":")[0] for t in titles] == ["out (seed 0)", "out (seed 1)"]
    plt.close(fig)
