"""The one palette and the one style: every init, objective and stack has its colour, and only use_style changes
matplotlib's settings."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest

from qkgeometry.plotting import style


def test_every_init_has_a_colour_and_a_line_style_including_the_rotated_control():
    assert set(style.INIT_COLORS) == set(style.INIT_STYLES) >= {"default", "symmetric", "shared", "skew", "rotated"}
    assert len(set(style.INIT_COLORS.values())) == len(style.INIT_COLORS)  # told apart by colour


def test_objectives_and_stacks_have_colours_and_labels():
    from qkgeometry.analyses.fair_test import ARMS

    assert set(style.OBJECTIVE_LABELS) == set(style.OBJECTIVE_COLORS) == set(ARMS)  # every arm of chapter 3
    assert set(style.STACK_WORDS) <= set(style.STACK_COLORS)
    assert {"encoder", "decoder", "cross"} <= set(style.STACK_COLORS)
    assert style.STACK_COLORS["encoder"] == style.FAMILY_COLORS["encoder"]


def test_only_use_style_changes_the_settings():
    import importlib

    before = dict(matplotlib.rcParams)
    importlib.reload(style)
    assert dict(matplotlib.rcParams) == before
    with matplotlib.rc_context():
        style.use_style()
        assert matplotlib.rcParams["image.cmap"] == style.DIVERGING and not matplotlib.rcParams["axes.spines.top"]


def test_require_rows_names_the_argument():
    style.require_rows(pd.DataFrame({"a": [1]}), "frame", "unused")
    with pytest.raises(ValueError, match=r"^summary has no rows: pass more\.$"):
        style.require_rows(pd.DataFrame({"a": []}), "summary", "pass more")


def test_one_colour_meaning_across_the_book():
    """Blue is always an encoder, red always a decoder, purple cross-attention, grey random: no other palette
    reuses a family colour for something else."""
    family = {c.lower(): name for name, c in style.FAMILY_COLORS.items()}
    assert len(family) == len(style.FAMILY_COLORS)
    assert not {c.lower() for c in style.INIT_COLORS.values()} & set(family)
    assert {family.get(style.OBJECTIVE_COLORS[k].lower()) for k in ("mlm", "causal")} == {"encoder", "decoder"}
    assert style.OBJECTIVE_COLORS["rtd"].lower() not in family
    for stack, colour in style.STACK_COLORS.items():
        meaning = family.get(colour.lower())
        assert meaning is None or meaning == stack or (stack == "cross" and meaning == "encoder-decoder"), stack
    assert style.NULL_COLOR.lower() not in family


def test_the_papers_runs_use_the_family_colours():
    import inspect

    from qkgeometry.plotting import training

    assert "#ff7f0e" not in inspect.getsource(training)  # the decoder was orange in chapter 5


def test_legend_overlaps_finds_a_legend_over_data_and_spares_one_beside_it():
    import numpy as np

    from qkgeometry import plotting

    x = np.linspace(0, 1, 200)
    fig, ax = plotting.plt.subplots(figsize=(4, 3))
    ax.plot(x, np.full_like(x, 0.5), label="flat line through the middle")
    ax.axhline(0.52, color="0.5")  # a reference line is not data
    ax.set_ylim(0, 1)
    ax.legend(loc="center")
    assert plotting.legend_overlaps(fig) and "flat line" in plotting.legend_overlaps(fig)[0]
    ax.get_legend().remove()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15))  # below the axes, over the reference line's end
    assert plotting.legend_overlaps(fig) == []
    ax.get_legend().remove()
    ax.legend(loc="upper right")  # a corner the line does not reach
    assert plotting.legend_overlaps(fig) == []
    fig2, ax2 = plotting.plt.subplots(figsize=(4, 3))
    ax2.fill_between(x, -1, 1, label="band")
    ax2.legend(loc="center")
    assert plotting.legend_overlaps(fig2) == ["legend 'band' covers a band of axes 0"]
    plotting.plt.close("all")


def test_shown_text_px_is_the_smallest_text_scaled_to_the_phone_column(book_style):
    fig, ax = style.plt.subplots(figsize=(6.4, 3), layout="constrained")
    ax.plot([0, 1], [0, 1])
    ax.set_title("a title", fontsize=14)
    ax.tick_params(labelsize=8)
    fig.canvas.draw()  # constrained layout places the axes
    width = fig.get_tightbbox().width + 0.2  # saved with bbox_inches="tight" and its 0.1-inch pad
    assert style.shown_text_px(fig) == pytest.approx(8 * style.PHONE_COLUMN_PX / (72 * width))
    small, ax = style.plt.subplots(figsize=(2, 2), layout="constrained")  # narrower than the column: its own size
    ax.tick_params(labelsize=9)
    assert style.shown_text_px(small) == pytest.approx(9 * small.dpi / 72)


def test_a_stacked_figure_shows_its_text_readable_on_a_phone_where_a_wide_one_does_not(book_style):
    def draw(fig, axes):
        for ax in axes[:, 0]:
            ax.plot([0, 1000], [0, 0.4], label="a curve")
            ax.set_ylabel("symmetry")
        return fig

    wide = draw(*style.plt.subplots(2, 1, figsize=(6.4, 6), squeeze=False, layout="constrained"))
    assert style.shown_text_px(wide) < style.PHONE_TEXT_PX
    fig, axes = style.stacked_figure(2, 2.6, sharex=True)
    draw(fig, axes)
    style.stacked_legend(fig, *axes[0][0].get_legend_handles_labels())
    assert fig.get_figwidth() == style.STACKED_WIDTH
    assert style.shown_text_px(fig) >= style.PHONE_TEXT_PX


def test_stacked_legend_fits_the_figure_in_fewer_columns_or_wrapped_lines(book_style):
    fig, axes = style.stacked_figure(1, 2.0)
    handles = [axes[0][0].plot([0, 1], [0, k])[0] for k in range(3)]
    height = fig.get_figheight()
    labels = ["causal LM, batch of 2 (the sparse loss's targets per step) (n = 12 seeds)", "b", "c"]
    legend = style.stacked_legend(fig, handles, labels, max_ncols=3)
    fig.canvas.draw()
    assert legend.get_window_extent().width <= fig.bbox.width
    first = legend.get_texts()[0].get_text()
    assert "\n" in first and "n\u00a0=\u00a012" in first  # wrapped between words, never inside "n = 12"
    assert fig.get_figheight() > height  # the figure grew by the legend: the panel kept its height
    short = style.stacked_legend(*style.stacked_figure(1, 2.0)[:1], handles, ["a", "b", "c"], max_ncols=3)
    assert short._ncols == 3


def test_a_single_panel_figure_of_the_default_size_is_readable_on_a_phone(book_style):
    """``plt.subplots()`` after use_style is as wide as a stacked figure: its text shows at 9 px or more on a 390-px
    phone (a 6.4-inch default showed it at about 7.6 px)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set(xlabel="symmetry", ylabel="directionality", title="A title")
    ax.legend()
    assert tuple(fig.get_size_inches()) == style.SINGLE_SIZE and style.SINGLE_SIZE[0] == style.STACKED_WIDTH
    assert style.shown_text_px(fig) >= style.PHONE_TEXT_PX
    plt.close(fig)

