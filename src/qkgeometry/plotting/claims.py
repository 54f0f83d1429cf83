"""Specification curves: each headline's estimate and interval at every specification a referee could pick, sorted,
with the pre-stated primary marked (chapters 3, 4 and 5; :mod:`qkgeometry.claims` renders their sentences)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..claims import Claim
from .style import STACKED_WIDTH, plt, stacked_legend

__all__ = ["specification_curve"]

#: One colour per kind of specification (what a curve varies), cycled in the order the kinds first appear.
_AXIS_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#bcbd22")


def specification_curve(claims: Sequence[Claim], titles: Sequence[str] | None = None, ncols: int = 1,
                        ylabel: str = "estimate [95% CI]", panel_size: tuple[float, float] | None = None):
    """One panel per claim: every specification's estimate with its unadjusted 95% interval, sorted by the estimate,
    coloured by what the specification varies; the pre-stated primary is a black diamond, and 0 a grey line.
    A claim that holds across its curve has every interval on one side of 0.

    ``claims``: :class:`qkgeometry.claims.Claim` objects; ``titles``: one per panel (default: each claim's subject).
    The panels are stacked in one column (``ncols=1``, the default: a stacked figure, readable on a phone) or laid
    out in ``ncols`` columns of ``panel_size`` inches each (default: 4.2 × 2.6). Returns the Figure (one legend for
    all panels, below them). Chapter 3, "How robust is each verdict?".
    """
    claims = list(claims)
    if not claims:
        raise ValueError("claims has no rows: there is no claim to draw; pass at least one qkgeometry.claims.Claim.")
    titles = [c.subject for c in claims] if titles is None else list(titles)
    if len(titles) != len(claims):
        raise ValueError(f"titles: one per claim; got {len(titles)} for {len(claims)} claims.")
    ncols = max(1, min(int(ncols), len(claims)))
    nrows = int(np.ceil(len(claims) / ncols))
    if panel_size is None:
        panel_size = (STACKED_WIDTH, 2.15) if ncols == 1 else (4.2, 2.6)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows),
                             squeeze=False, layout="constrained")
    kinds: list[str] = []
    for c in claims:
        kinds.extend(k for k in dict.fromkeys(s.axis for s in c.curve) if k not in kinds)
    colour = {k: _AXIS_COLORS[i % len(_AXIS_COLORS)] for i, k in enumerate(kinds)}
    for ax, claim, title in zip(axes.flat, claims, titles):
        frame = claim.frame()
        x = np.arange(len(frame))
        for kind, part in frame.groupby("axis", sort=False):
            ax.errorbar(x[part.index], part["estimate"], yerr=[part["estimate"] - part["low"],
                                                               part["high"] - part["estimate"]],
                        fmt="o", ms=2.5, lw=0.7, color=colour[kind], label=kind)
        p = frame[frame["primary"]]
        ax.plot(x[p.index], p["estimate"], "D", ms=7, mfc="black", mec="white", mew=0.8, zorder=5,
                label="pre-stated primary")
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_title(title)
        ax.set_xticks([])
        ax.set_xlabel(f"{len(frame)} specifications, sorted by estimate")
        ax.set_ylabel(ylabel)
    for ax in list(axes.flat)[len(claims):]:
        ax.set_visible(False)
    found = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            found.setdefault(lab, h)
    labels = [k for k in (*kinds, "pre-stated primary") if k in found]  # kinds in order, the primary last
    stacked_legend(fig, [found[k] for k in labels], labels, max_ncols=3)
    return fig
