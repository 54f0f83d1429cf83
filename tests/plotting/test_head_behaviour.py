"""plotting.head_behaviour: the chapter 7 figures draw from tidy frames, keep outliers on symmetric-log axes,
name the farthest heads, and put legends outside the data."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from qkgeometry.plotting import head_behaviour as hbp


def _heads(seed=0, n_layers=3, n_heads=4):
    rng = np.random.default_rng(seed)
    rows = [{"layer": la, "head": h, "labels": rng.choice(["first", "previous+local", "none", "duplicate"]),
             "symmetry_z": rng.normal() * (600 if (la, h) == (0, 0) else 1), "trace_z": rng.normal()}
            for la in range(n_layers) for h in range(n_heads)]
    t = pd.DataFrame(rows)
    t.loc[0, "labels"] = "first"  # the far head is drawn
    for lab in ("first", "previous", "duplicate"):
        t[f"is_{lab}"] = t["labels"].str.contains(lab)
    return t


def test_primary_label_follows_the_drawing_order():
    assert hbp.primary_label("previous+local") == "previous"
    assert hbp.primary_label("first+broad") == "first"
    assert hbp.primary_label("none") == "none"


def test_label_map_has_one_panel_per_model_and_its_legend_below_the_panels():
    fig = hbp.label_map({"a": _heads(0), "b": _heads(1, 2, 5)})
    assert len(fig.axes) == 2
    legend = fig.legends[0]
    assert legend.get_window_extent().y1 <= min(ax.get_window_extent().y0 for ax in fig.axes) + 1


def test_geometry_by_label_keeps_far_heads_on_a_symlog_axis():
    fig = hbp.geometry_by_label({"a": _heads(0)}, {"symmetry_z": "symmetry z", "trace_z": "trace z"},
                                ["first", "previous"], symlog=["symmetry_z"])
    assert fig.axes[0].get_yscale() == "symlog" and fig.axes[1].get_yscale() == "linear"
    low, high = fig.axes[0].get_ylim()
    values = _heads(0)["symmetry_z"]
    assert low <= values.min() and high >= values.max()  # nothing clipped


def test_edit_losses_names_the_farthest_heads_and_fits_every_point():
    rng = np.random.default_rng(2)
    wide = pd.DataFrame({"layer": np.arange(50) // 5, "head": np.arange(50) % 5,
                         "symmetric": rng.normal(0, 0.01, 50), "skew": rng.normal(0, 0.01, 50)})
    wide.loc[17, "skew"] = 1.35
    fig = hbp.edit_losses(wide, [("symmetric", "skew", "plain")], n_annotate=2)
    ax = fig.axes[0]
    assert ax.get_xscale() == "symlog" and ax.get_yscale() == "symlog"
    names = [t.get_text() for t in ax.texts]
    # named as heads ("L3 H2"), never "3.2", which reads as a value on these axes
    assert "L3 H2" in names and len(names) == 2 and all(re.fullmatch(r"L\d+ H\d+", n) for n in names)
    assert ax.get_ylim()[1] >= 1.35


def test_empty_input_is_refused_by_name():
    with pytest.raises(ValueError, match="wide"):
        hbp.edit_losses(pd.DataFrame(), [("symmetric", "skew", "plain")])
