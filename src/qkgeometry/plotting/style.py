"""The book's one figure style: the matplotlib settings of :func:`use_style` and the one palette every chapter's
figures share (families, attention stacks, objectives, initialisations, model markers).

Importing this module changes no global state: the style is applied only when :func:`use_style` is called.
:func:`require_rows` is the check every figure function starts with, so that an empty frame is reported by the
argument's name instead of by a matplotlib error deep inside the drawing.
"""

from __future__ import annotations

from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import seaborn as sns

__all__ = [
    "DIVERGING",
    "FAMILY_COLORS",
    "INIT_COLORS",
    "INIT_STYLES",
    "MODEL_MARKERS",
    "NULL_COLOR",
    "OBJECTIVE_COLORS",
    "OBJECTIVE_LABELS",
    "STACK_COLORS",
    "STACK_WORDS",
    "legend_overlaps",
    "plt",
    "require_rows",
    "use_style",
]

#: One colour per model family, used everywhere: blue is always an encoder, red always a decoder, purple
#: cross-attention (an encoder-decoder's third stack), grey a random twin or a random baseline. No other palette of
#: the book reuses these four colours for anything else.
FAMILY_COLORS = {"encoder": "#1f77b4", "decoder": "#d62728", "encoder-decoder": "#9467bd", "random": "#7f7f7f"}
#: The band (or cloud) of a null distribution drawn behind real data.
NULL_COLOR = "#c7c7c7"
#: Diverging colour map for signed matrices (centred at 0).
DIVERGING = "RdBu_r"

#: Colours of the training objectives / mask kinds (chapter 3).
OBJECTIVE_COLORS = {"causal": FAMILY_COLORS["decoder"], "mlm": FAMILY_COLORS["encoder"], "rtd": "#2ca02c",
                    "causal-masked": "#8c564b", "causal-sparse": "#ff7f0e", "causal-supervision": "#e377c2"}
#: How chapter 3 names the objectives on figures.
OBJECTIVE_LABELS = {"causal": "causal LM", "mlm": "masked LM", "rtd": "replaced-token detection",
                    "causal-masked": "causal mask, masked-LM collator",
                    "causal-sparse": "causal LM, loss at 15% of positions",
                    "causal-supervision": "causal LM, batch of 2 (the sparse loss's targets per step)"}

#: One colour per attention stack (chapter 4): a component's stack is its family for ``self`` attention, else the
#: component itself (``encoder``, ``decoder``, ``cross``); see :func:`qkgeometry.plotting.stack_of`.
STACK_COLORS = {"encoder": FAMILY_COLORS["encoder"], "decoder": FAMILY_COLORS["decoder"],
                "decoder, not causal": "#ff7f0e", "cross": FAMILY_COLORS["encoder-decoder"],
                "encoder-decoder": FAMILY_COLORS["encoder-decoder"]}
#: How a legend words a stack whose key is not a phrase (chapter 4).
STACK_WORDS = {"decoder, not causal": "non-causal decoder"}
#: Markers cycled over models, so that each model of a figure is told apart by shape as well as by colour.
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")

#: One colour per initialisation / attention variant (chapter 5; all encoder runs). None of them is a family colour,
#: so that blue and red keep meaning encoder and decoder.
INIT_COLORS = {"default": "#000000", "symmetric": "#17becf", "shared": "#8c564b", "skew": "#e377c2",
               "rotated": "#bcbd22", "indefinite": "#6a3d9a", "norm-matched": "#637939"}
#: Line styles per initialisation, so that overlapping curves stay distinguishable (chapter 5).
INIT_STYLES = {"default": "-", "symmetric": "--", "shared": ":", "skew": "-.", "rotated": (0, (3, 1, 1, 1, 1, 1)),
               "indefinite": (0, (1, 1)), "norm-matched": (0, (5, 2))}


def use_style() -> None:
    """Apply the book's matplotlib style (crisp, small, consistent). Every chapter calls it once."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95)
    mpl.rcParams.update({
        "figure.dpi": 100,
        "savefig.dpi": 200,
        "figure.figsize": (6.4, 3.8),
        "axes.titlesize": 11,
        "axes.titleweight": "bold",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.frameon": False,
        "image.cmap": DIVERGING,
        "svg.fonttype": "none",
    })


def require_rows(frame: Any, name: str, hint: str) -> None:
    """Raise ``ValueError("<name> has no rows: <hint>.")`` when ``frame`` (a DataFrame) is empty.

    ``name`` is the figure function's argument; ``hint`` says what to pass instead.

    >>> import pandas as pd
    >>> require_rows(pd.DataFrame({"symmetry": []}), "frame", "pass the scores of at least one model")
    Traceback (most recent call last):
    ...
    ValueError: frame has no rows: pass the scores of at least one model.
    """
    if len(frame) == 0:
        raise ValueError(f"{name} has no rows: {hint}.")


def legend_overlaps(fig) -> list[str]:
    """Every legend of ``fig`` that sits over data: ``"legend 'a, b' covers 12 points of axes 0"`` per legend and
    axes, empty when every legend is clear of the data.

    A legend covers data when a marker or a line vertex drawn in data coordinates (``plot``, ``scatter``) lies
    inside the legend's box, or when the middle of the box lies inside a filled band (``fill_between``). Lines
    drawn in axes coordinates (``axhline``, ``axvline``) are reference lines, not data. Figure-level legends are
    checked against every axes. The figure is drawn once to place its legends.
    """
    import numpy as np
    from matplotlib.collections import PathCollection, PolyCollection

    fig.canvas.draw()
    found = []
    legends = [(lg, [ax]) for ax in fig.axes if (lg := ax.get_legend()) is not None]
    legends += [(lg, list(fig.axes)) for lg in fig.legends]
    for legend, axes in legends:
        box = legend.get_window_extent()
        centre = ((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2)
        name = ", ".join(t.get_text() for t in legend.get_texts())[:60]
        for ax in axes:
            points = [line.get_transform().transform(line.get_xydata()) for line in ax.get_lines()
                      if line.get_transform() is ax.transData and len(line.get_xydata())]
            band = False
            for coll in ax.collections:
                if isinstance(coll, PathCollection) and coll.get_offset_transform() is ax.transData:
                    points.append(ax.transData.transform(coll.get_offsets()))
                elif isinstance(coll, PolyCollection) and coll.get_transform() is ax.transData:
                    band |= any(path.transformed(ax.transData).contains_point(centre) for path in coll.get_paths())
            xy = np.concatenate(points) if points else np.empty((0, 2))
            inside = int(np.sum((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)))
            if inside or band:
                what = f"{inside} points" + (" and a band" if band else "") if inside else "a band"
                found.append(f"legend '{name}' covers {what} of axes {fig.axes.index(ax)}")
    return found

