"""The book's figures, in one style.

Every chapter calls :func:`use_style` once (it is also applied on import of this module) so that fonts, colours and
resolution agree across the book. Figures are saved/rendered as SVG-crisp vector or 2x PNG.

Chapter-specific figure functions live below in sections marked by chapter; each takes tidy data and returns the
matplotlib Figure (never calls ``plt.show``), so notebooks stay one line per figure.
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import seaborn as sns

#: One colour per model family, used everywhere.
FAMILY_COLORS = {"encoder": "#1f77b4", "decoder": "#d62728", "encoder-decoder": "#9467bd", "random": "#7f7f7f"}
#: Diverging colour map for signed matrices (centred at 0).
DIVERGING = "RdBu_r"


def use_style() -> None:
    """Apply the book's matplotlib style (crisp, small, consistent)."""
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


use_style()

__all__ = ["FAMILY_COLORS", "DIVERGING", "use_style", "plt"]
