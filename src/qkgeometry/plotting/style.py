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
    "PHONE_COLUMN_PX",
    "PHONE_TEXT_PX",
    "STACKED_FONT",
    "STACKED_WIDTH",
    "STACK_COLORS",
    "STACK_WORDS",
    "legend_overlaps",
    "plt",
    "require_rows",
    "shown_text_px",
    "stacked_figure",
    "stacked_legend",
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

#: The one home of a stacked figure's size (one column of panels, the legend below; every chapter's figure meant to
#: be read on a phone): this wide in inches, its text never below STACKED_FONT points. On a 390-px phone such a figure
#: shows at the column's width (PHONE_COLUMN_PX) and its smallest text at about 10 px (:func:`shown_text_px`), where a
#: 6.4-inch figure showed it at about 7 px.
STACKED_WIDTH = 4.8
#: The smallest text of a stacked figure (legend, tick labels, titles), in points.
STACKED_FONT = 10.0
#: How wide (CSS px) a 390-px phone shows a figure that fills the book's column.
PHONE_COLUMN_PX = 342
#: The smallest text (CSS px) a figure should show on that phone.
PHONE_TEXT_PX = 9.0
#: The default size of a single-panel figure (``plt.subplots()`` after :func:`use_style`): as wide as a stacked
#: figure, so that its text is as readable on a phone (a 6.4-inch one showed it at about 7.6 px).
SINGLE_SIZE = (STACKED_WIDTH, 3.4)


def use_style() -> None:
    """Apply the book's matplotlib style (crisp, small, consistent). Every chapter calls it once."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95)
    mpl.rcParams.update({
        "figure.dpi": 100,
        "savefig.dpi": 200,
        "figure.figsize": SINGLE_SIZE,
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


def stacked_figure(nrows: int, panel_height: float, *, extra: float = 0.0, ncols: int = 1, **subplots):
    """``(fig, axes)`` of a stacked figure: ``nrows`` rows of ``ncols`` panels (2-D ``axes``), each row
    ``panel_height`` inches high plus ``extra`` inches for the legend, :data:`STACKED_WIDTH` wide, laid out by
    constrained layout; ``subplots`` go to ``plt.subplots`` (``sharex``, ``sharey``)."""
    return plt.subplots(nrows, ncols, figsize=(STACKED_WIDTH, extra + panel_height * nrows), squeeze=False,
                        layout="constrained", **subplots)


def stacked_legend(fig, handles, labels, max_ncols: int = 2, grow: bool = True, **legend):
    """One legend below the panels of a stacked figure, at :data:`STACKED_FONT` points, in as many columns (at most
    ``max_ncols``) as fit the figure's width; labels too long for one column are wrapped onto several lines. With
    ``grow`` the figure grows by the legend's height, so that the panels keep theirs. Returns the Legend."""
    import textwrap

    labels = [str(lab) for lab in labels]
    legend = {"columnspacing": 1.0, "handlelength": 1.5, "handletextpad": 0.5, **legend}  # compact: more fit a row
    width = fig.get_figwidth() * fig.dpi
    renderer = fig.canvas.get_renderer()
    longest = max((len(lab) for lab in labels), default=0)
    tries = [(n, None) for n in range(max(1, min(max_ncols, len(labels))), 0, -1)]
    tries += [(1, chars) for chars in range(longest - 4, 15, -4)]
    made = None
    for ncols, chars in tries:
        if made is not None:
            made.remove()
        # wrapped between words, never inside "n = 12"
        shown = labels if chars is None else [textwrap.fill(lab.replace(" = ", "\u00a0=\u00a0"), chars,
                                                            break_on_hyphens=False) for lab in labels]
        made = fig.legend(handles, shown, loc="outside lower center", ncols=ncols, fontsize=STACKED_FONT,
                          frameon=False, **legend)
        if made.get_window_extent(renderer).width <= width:
            break
    if grow and made is not None:
        fig.set_figheight(fig.get_figheight() + made.get_window_extent(renderer).height / fig.dpi + 0.1)
    return made


def shown_text_px(fig, column_px: float = PHONE_COLUMN_PX) -> float:
    """The smallest text of ``fig`` (CSS px) as a phone shows it: the figure saved as the book saves it
    (``bbox_inches="tight"``, 0.1-inch pad) and shown at ``column_px`` wide, or at its own width if narrower.

    A text of ``s`` points in a figure ``w`` inches wide shows at ``s * column_px / (72 * w)`` px: the figure's dpi
    cancels out. Only texts that are drawn count (tick labels of shared axes and empty titles do not).
    """
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    fig.canvas.draw()
    width_in = fig.get_tightbbox(renderer).width + 2 * 0.1
    shown = min(column_px, width_in * fig.dpi)
    sizes = [t.get_fontsize() for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.get_visible())]
    return min(sizes) * shown / (72 * width_in) if sizes else float("inf")
