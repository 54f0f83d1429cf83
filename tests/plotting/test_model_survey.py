"""Chapter 4's figures (and `qkgeometry plot`'s) draw each model where its scores are, coloured by stack."""
from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

from qkgeometry import plotting


def _offsets(collection) -> np.ndarray:
    return np.asarray(collection.get_offsets(), dtype=float)


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


@pytest.mark.parametrize(("panels", "grid"), [(1, (1, 1)), (2, (1, 2)), (3, (2, 2)), (4, (2, 2)), (6, (2, 3)),
                                             (9, (3, 3)), (20, (5, 4))])
def test_head_heatmaps_lay_out_in_a_near_square_grid(panels, grid):
    frame = pd.concat([_per_head_frame().assign(model=f"m{k}") for k in range(panels)], ignore_index=True)
    fig = plotting.survey_head_heatmaps(frame)
    spec = fig.axes[0].get_subplotspec().get_gridspec()
    assert (spec.nrows, spec.ncols) == grid
    assert len(fig.axes) == panels + 1  # the panels and one colour bar


def test_head_heatmap_without_head_rows_says_what_to_do():
    frame = _per_head_frame().assign(head=np.nan)
    with pytest.raises(ValueError, match="per='head'"):
        plotting.survey_head_heatmaps(frame)


def test_survey_scatter_puts_each_model_at_its_medians_with_iqr_bars():
    summary = pd.DataFrame({"model": ["a", "b"], "component": ["self", "decoder"], "family": ["encoder", "decoder"],
                            "init": ["pretrained", "random"],
                            "symmetry_median": [0.4, 0.0], "symmetry_q25": [0.3, -0.1], "symmetry_q75": [0.6, 0.05],
                            "directionality_median": [0.1, -0.2], "directionality_q25": [0.0, -0.3],
                            "directionality_q75": [0.2, -0.1]})
    ax = plotting.survey_scatter(summary).axes[0]
    first, second = ax.containers
    point = np.c_[first.lines[0].get_xdata(), first.lines[0].get_ydata()].astype(float)
    np.testing.assert_allclose(point, [[0.4, 0.1]])
    xbar, ybar = (np.asarray(seg.get_segments()[0]) for seg in first.lines[2])
    np.testing.assert_allclose(xbar[:, 0], [0.3, 0.6])
    np.testing.assert_allclose(ybar[:, 1], [0.0, 0.2])
    assert matplotlib.colors.to_hex(second.lines[0].get_color()) == plotting.FAMILY_COLORS["random"]
    assert [t.get_text() for t in ax.texts] == ["a", "b [decoder]"]


def test_survey_twins_compares_each_models_layers_with_its_random_twin():
    frame = pd.DataFrame({"model": ["m"] * 3 + ["m (random init)"] * 3, "family": ["encoder"] * 6,
                          "init": ["pretrained"] * 3 + ["random"] * 3, "component": ["self"] * 6,
                          "layer": [0, 1, 2] * 2, "symmetry": [0.5, 0.6, 0.7, 0.01, -0.02, 0.0]})
    ax = plotting.survey_twins(frame).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["m"]
    strips = [c for c in ax.collections if len(_offsets(c))]
    values = sorted(round(float(y), 6) for c in strips for _, y in _offsets(c))
    assert values == sorted(round(v, 6) for v in frame["symmetry"])
    pretrained, random = (sorted(_offsets(c)[:, 1]) for c in strips)
    np.testing.assert_allclose(pretrained, [0.5, 0.6, 0.7])
    np.testing.assert_allclose(random, [-0.02, 0.0, 0.01])
    assert "one point per layer" in ax.get_ylabel()


def _survey_layers() -> pd.DataFrame:
    rows = []
    for model, family, comps, init in (("enc", "encoder", ["self"], "pretrained"),
                                       ("enc (random init)", "encoder", ["self"], "random"),
                                       ("ed", "encoder-decoder", ["encoder", "decoder", "cross"], "pretrained")):
        for comp in comps:
            for layer in range(3):
                rows.append({"model": model, "family": family, "init": init, "component": comp, "layer": layer,
                             "head": pd.NA, "symmetry": 0.1 * layer + 0.01 * len(comp), "directionality": -0.1})
    return pd.DataFrame(rows)


def test_stack_of_reads_self_attention_as_the_family_and_other_components_as_themselves():
    assert plotting.stack_of("encoder", "self") == "encoder"
    assert plotting.stack_of("encoder-decoder", "decoder") == "decoder"
    assert plotting.stack_of("encoder-decoder", "cross") == "cross"


def test_survey_layer_curves_colour_by_stack_one_marker_per_model_and_one_twin_entry():
    frame = _survey_layers()
    fig = plotting.survey_layer_curves(frame)
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 3]
    assert len(lines) == 5  # enc, its twin, and three components of ed
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["enc", "ed [encoder]", "ed [decoder]", "ed [cross]", "random-init twins (every model)"]
    by_label = dict(zip(labels, fig.legends[0].legend_handles))
    assert matplotlib.colors.to_hex(by_label["ed [decoder]"].get_color()) == plotting.STACK_COLORS["decoder"]
    assert by_label["enc"].get_marker() != by_label["ed [encoder]"].get_marker()
    np.testing.assert_allclose(lines[0].get_ydata(), [0.04, 0.14, 0.24])
    np.testing.assert_allclose(lines[0].get_xdata(), [0, 0.5, 1])


def test_survey_scatter_legend_mode_names_each_model_once_and_draws_no_text():
    summary = pd.DataFrame({"model": ["a", "a (random init)", "b"], "component": ["self", "self", "decoder"],
                            "family": ["encoder", "encoder", "encoder-decoder"],
                            "init": ["pretrained", "random", "pretrained"],
                            "symmetry_median": [0.4, 0.0, 0.1], "symmetry_q25": [0.3, -0.1, 0.0],
                            "symmetry_q75": [0.6, 0.05, 0.2], "directionality_median": [0.1, -0.2, -0.5],
                            "directionality_q25": [0.0, -0.3, -0.6], "directionality_q75": [0.2, -0.1, -0.4]})
    fig = plotting.survey_scatter(summary, labels="legend")
    ax = fig.axes[0]
    assert not ax.texts
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:2] == ["a", "b [decoder]"] and labels[2].startswith("random-init twins")
    a, twin, b = ax.containers
    assert a.lines[0].get_marker() == twin.lines[0].get_marker() != b.lines[0].get_marker()
    assert matplotlib.colors.to_hex(b.lines[0].get_color()) == plotting.STACK_COLORS["decoder"]
    with pytest.raises(ValueError, match="labels"):
        plotting.survey_scatter(summary, labels="nope")


def _pairs() -> pd.DataFrame:
    rows = []
    for model, group, source, enc, dec in (("t5-a", "T5", "authors", 0.4, 0.1), ("t5-b", "T5", "authors", 0.3, 0.5),
                                           ("bart", "BART", "authors", 0.5, 0.0), ("w", "Whisper", "ours", 0.45, 0.2)):
        rows += [{"model": model, "group": group, "source": source, "stack": "encoder", "symmetry": enc,
                  "directionality": -enc},
                 {"model": model, "group": group, "source": source, "stack": "decoder", "symmetry": dec,
                  "directionality": -dec}]
    return pd.DataFrame(rows)


def test_paired_stacks_joins_each_models_encoder_and_decoder_and_marks_ours_and_exceptions():
    fig = plotting.paired_stacks(_pairs(), highlight=("t5-b",))
    ax = fig.axes[0]
    lines = ax.get_lines()[:4]
    ys = [tuple(np.round(ln.get_ydata(), 6)) for ln in lines]
    assert ys == [(0.4, 0.1), (0.3, 0.5), (0.5, 0.0), (0.45, 0.2)]
    xs = np.array([ln.get_xdata() for ln in lines], dtype=float)
    assert np.all(np.abs(xs[:, 0]) < 0.05) and np.all(np.abs(xs[:, 1] - 1) < 0.05)
    assert lines[1].get_linestyle() == "--" and lines[3].get_marker() == "*"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["T5", "BART", "t5-b (decoder above encoder)", "w (ours)"]
    np.testing.assert_allclose(fig.axes[1].get_lines()[0].get_ydata(), [-0.4, -0.1])
    bad = _pairs().iloc[1:]
    with pytest.raises(ValueError, match="t5-a"):
        plotting.paired_stacks(bad)


def test_modality_planes_put_theirs_and_ours_in_their_modality_panel():
    paper = pd.DataFrame({"modality": ["language", "language", "audio"], "stack": ["encoder", "decoder", "encoder"],
                          "symmetry_median": [0.5, 0.1, 0.3], "directionality_median": [-0.1, -0.5, -0.05]})
    ours = pd.DataFrame({"model": ["m", "v"], "modality": ["language", "vision"], "stack": ["encoder", "encoder"],
                         "symmetry_median": [0.6, 0.2], "directionality_median": [-0.2, 0.0]})
    fig = plotting.modality_planes(paper, ours)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["language: 2 of theirs, 1 of ours", "vision: 0 of theirs, 1 of ours",
                      "audio: 1 of theirs, 0 of ours"]
    language = fig.axes[0]
    points = np.vstack([_offsets(c) for c in language.collections])
    np.testing.assert_allclose(sorted(map(tuple, points)), [(0.1, -0.5), (0.5, -0.1), (0.6, -0.2)])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["authors' encoder stacks", "authors' decoder stacks", "m (ours)", "v (ours)"]
    assert len(plotting.modality_planes(paper).axes) == 2  # no vision panel without vision models


def test_raw_vs_folded_names_models_and_keeps_the_legend_off_the_data():
    import pandas as pd

    forms = pd.DataFrame({"model": ["MiniLM-L6"] * 3 + ["whisper-base"] * 2, "family": ["encoder"] * 3
                          + ["encoder-decoder"] * 2, "component": ["self"] * 3 + ["encoder", "cross"],
                          "symmetry_raw": [0.2, 0.4, 0.5, 0.3, 0.0], "symmetry_folded": [0.3, 0.5, 0.6, 0.5, 0.01]})
    fig = plotting.raw_vs_folded(forms)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["MiniLM-L6", "whisper-base [encoder]", "whisper-base [cross]"]
    assert "mathrm{diag}" in ax.get_ylabel() and "$W_{qk}$" in ax.get_xlabel()
    legend_box = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    assert legend_box.y1 <= ax.get_window_extent(fig.canvas.get_renderer()).y0 + 1  # below the axes


def test_head_pair_terms_is_square_and_centred():
    import numpy as np

    terms = np.array([[0.5, -0.1], [-0.1, 0.7]])
    fig = plotting.head_pair_terms(terms)
    image = fig.axes[0].images[0]
    assert image.get_clim() == (-0.7, 0.7) and not fig.axes[0].xaxis._major_tick_kw.get("gridOn", False)
    with pytest.raises(ValueError, match="square"):
        plotting.head_pair_terms(np.zeros((2, 3)))


def _layer_rows(**kw) -> pd.DataFrame:
    return pd.DataFrame([{"model": "m", "family": "decoder", "component": "self", "init": "pretrained", "layer": i,
                          "head": pd.NA, "symmetry": 0.1 * i, "directionality": 0.0, **kw} for i in range(3)])


@pytest.mark.parametrize("mixed, needle", [
    (lambda: pd.concat([_layer_rows(input_norm="raw"), _layer_rows(input_norm="folded")]),
     "input_norm = folded and raw"),
    (lambda: pd.concat([_layer_rows(per="layer"), _layer_rows(per="head").assign(head=0)]), "per = head and layer"),
    (lambda: pd.concat([_layer_rows(), _layer_rows().assign(head=0)]), "per-layer and per-head rows of 'm'"),
])
def test_the_figure_functions_refuse_a_frame_that_mixes_views(mixed, needle):
    """The command line refused such frames; the functions averaged them into one curve."""
    for draw in (plotting.survey_layer_curves, plotting.survey_twins):
        with pytest.raises(ValueError, match=needle):
            draw(mixed())


def test_chapter4_stacked_figures_are_readable_on_a_phone(book_style):
    paper = pd.DataFrame({"modality": ["language", "audio"], "stack": ["encoder", "decoder, not causal"],
                          "symmetry_median": [0.5, 0.3], "directionality_median": [-0.1, -0.05]})
    ours = pd.DataFrame({"model": ["sentence-transformers/all-MiniLM-L6-v2"], "modality": ["language"],
                         "stack": ["encoder"], "symmetry_median": [0.6], "directionality_median": [-0.2]})
    summary = pd.DataFrame({"model": ["sentence-transformers/all-MiniLM-L6-v2", "gpt2"], "component": ["self", "self"],
                            "family": ["encoder", "decoder"], "init": "pretrained", "symmetry_median": [0.4, 0.0],
                            "symmetry_q25": [0.3, -0.1], "symmetry_q75": [0.6, 0.05], "directionality_median": [0.1, -0.2],
                            "directionality_q25": [0.0, -0.3], "directionality_q75": [0.2, -0.1]})
    for fig in (plotting.survey_layer_curves(_survey_layers()), plotting.paired_stacks(_pairs(), highlight=("t5-b",)),
                plotting.modality_planes(paper, ours), plotting.survey_scatter(summary, labels="legend")):
        assert fig.get_figwidth() == plotting.STACKED_WIDTH
        assert plotting.shown_text_px(fig) >= plotting.PHONE_TEXT_PX
