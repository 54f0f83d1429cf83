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
    from qkgeometry.training.config import ALL_OBJECTIVES

    assert set(style.OBJECTIVE_LABELS) == set(style.OBJECTIVE_COLORS) == set(ALL_OBJECTIVES)
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
