"""Figures of book chapter 7 (what a head's geometry says about its job): :func:`label_map`,
:func:`geometry_by_label` and :func:`edit_losses`.

Each takes tidy frames (one row per head, or per head and edit) and returns the matplotlib Figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgb

from .style import plt, require_rows

__all__ = ["PRIMARY_LABELS", "edit_losses", "geometry_by_label", "label_colours", "label_map", "primary_label"]

#: The order in which a head with several labels is drawn: the first label of this order that it carries.
PRIMARY_LABELS = ("induction", "duplicate", "previous", "next", "current", "local", "sep", "first", "broad")


def label_colours() -> dict[str, str]:
    """One colour per label (sinks dark grey, unlabelled heads light grey)."""
    return {n: f"C{i}" for i, n in enumerate(PRIMARY_LABELS)} | {"first": "0.35", "none": "0.92"}


def primary_label(labels: str) -> str:
    """The label a head is drawn with, from its ``labels`` string ("previous+local" -> "previous")."""
    parts = str(labels).split("+")
    return next((p for p in PRIMARY_LABELS if p in parts), "none")


def label_map(heads: Mapping[str, pd.DataFrame], titles: Mapping[str, str] | None = None):
    """One panel per model: its (layer, head) grid coloured by each head's :func:`primary_label`. ``heads``:
    model -> frame with ``layer``, ``head``, ``labels``. The legend sits below the panels, outside the data."""
    require_rows(list(heads), "heads", "pass {model: heads table}")
    colours = label_colours()
    fig, axes = plt.subplots(1, len(heads), figsize=(3.2 * len(heads), 4.6), squeeze=False)
    for ax, (name, t) in zip(axes[0], heads.items(), strict=True):
        grid = np.full((int(t["layer"].max()) + 1, int(t["head"].max()) + 1, 3), 1.0)
        for layer, head, lab in zip(t["layer"], t["head"], t["labels"].map(primary_label), strict=True):
            grid[layer, head] = to_rgb(colours[lab])
        ax.imshow(grid, aspect="auto", origin="lower", interpolation="nearest")
        ax.grid(False)
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        ax.set(title=(titles or {}).get(name, name), xlabel="head", ylabel="layer")
    names = [*PRIMARY_LABELS, "none"]
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[n]) for n in names]
    shown = ["first (sink)" if n == "first" else "no label" if n == "none" else n for n in names]
    fig.legend(handles, shown, loc="lower center", ncol=5, frameon=False, fontsize=12)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    return fig


def geometry_by_label(heads: Mapping[str, pd.DataFrame], scores: Mapping[str, str], labels: Sequence[str],
                      titles: Mapping[str, str] | None = None, symlog: Sequence[str] = ()):
    """Strip plots: one row per geometric score (``scores``: column -> axis label), one column group per label
    (and "no label"), one colour per model. Scores named in ``symlog`` get a symmetric-log axis, so that heads far
    out (a rotation-null z of several hundred) stay on the page without flattening the rest. The model legend sits
    above the panels."""
    require_rows(list(heads), "heads", "pass {model: heads table}")
    fig, axes = plt.subplots(len(scores), 1, figsize=(11, 2.1 * len(scores) + 0.6), sharex=True, squeeze=False)
    axes = axes[:, 0]
    columns = [*labels, "none"]
    for ax, (score, axis_label) in zip(axes, scores.items(), strict=True):
        for k, (name, t) in enumerate(heads.items()):
            for j, lab in enumerate(columns):
                sel = (t["labels"] == "none") if lab == "none" else t.get(f"is_{lab}", pd.Series(False, index=t.index))
                v = t.loc[sel.fillna(False).astype(bool), score].dropna()
                if len(v):
                    x = j + (k - (len(heads) - 1) / 2) * 0.18
                    jitter = np.random.default_rng(j).uniform(-0.05, 0.05, len(v))
                    ax.scatter(np.full(len(v), x) + jitter, v, s=6, color=f"C{k}", alpha=0.6,
                               label=(titles or {}).get(name, name) if (j == 0 and score == next(iter(scores)))
                               else None)
        if score in symlog:
            ax.set_yscale("symlog", linthresh=1.0)
        ax.axhline(0, color="0.7", lw=0.6, zorder=0)
        ax.set_ylabel(axis_label, fontsize=9)
    axes[-1].set_xticks(range(len(columns)), ["first (sink)" if c == "first" else "no label" if c == "none" else c
                                              for c in columns])
    fig.legend(loc="upper center", ncol=len(heads), fontsize=12, markerscale=3, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


#: How an edit of :func:`edit_losses` is named on an axis.
EDIT_NAMES = {"symmetric": "Mₛ only", "skew": "Mₙ only", "symmetric_matched": "Mₛ only, norm-matched",
              "skew_matched": "Mₙ only, norm-matched", "mean": "mean-ablated"}


def edit_losses(wide: pd.DataFrame, pairs: Sequence[tuple[str, str, str]], label_of: pd.Series | None = None,
                n_annotate: int = 3, linthresh: float = 0.01):
    """One panel per ``(x_edit, y_edit, title)`` of ``pairs``: each head's loss change with one edit against
    another (nats), on symmetric-log axes (linear within ±``linthresh``), so that the hundreds of heads near 0 and
    the few far out are both visible; the ``n_annotate`` heads farthest from the origin are named "L<layer> H<head>".
    ``wide``: one row per head with ``layer``, ``head`` and a column per edit; ``label_of``: each row's drawn label
    (colours), aligned with ``wide``."""
    require_rows(wide, "wide", "pass one row per head with a column per edit")
    colours = label_colours()
    labels = (label_of if label_of is not None else pd.Series("none", index=wide.index)).reindex(wide.index)
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.2 * len(pairs), 4.8), squeeze=False)
    for ax, (xe, ye, title) in zip(axes[0], pairs, strict=True):
        x, y = wide[xe].to_numpy(float), wide[ye].to_numpy(float)
        for lab in [*PRIMARY_LABELS, "none"]:
            sel = (labels == lab).to_numpy()
            if sel.any():
                ax.scatter(x[sel], y[sel], s=14, color=colours[lab], edgecolor="0.3", linewidth=0.3,
                           label=("first (sink)" if lab == "first" else "no label" if lab == "none" else lab)
                           if ax is axes[0][0] else None)
        lim = 1.15 * np.nanmax(np.abs(np.r_[x, y]))
        ax.plot([-lim, lim], [-lim, lim], color="0.6", lw=0.8)
        ax.axhline(0, color="0.8", lw=0.6)
        ax.axvline(0, color="0.8", lw=0.6)
        ax.set_xscale("symlog", linthresh=linthresh)
        ax.set_yscale("symlog", linthresh=linthresh)
        ax.set(xlim=(-lim, lim), ylim=(-lim, lim), title=title, xlabel=f"loss change, {EDIT_NAMES.get(xe, xe)} (nats)",
               ylabel=f"loss change, {EDIT_NAMES.get(ye, ye)} (nats)")
        far = np.argsort(-np.hypot(np.nan_to_num(x), np.nan_to_num(y)))[:n_annotate]
        for i in far:
            # "L3 H7", with a leader to its point: "3.7" would read as a value on axes of numbers
            ax.annotate(f"L{int(wide['layer'].iloc[i])} H{int(wide['head'].iloc[i])}", (x[i], y[i]),
                        textcoords="offset points", xytext=(10, -14), fontsize=9, color="0.25",
                        arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.6})
    fig.legend(loc="lower center", ncol=5, fontsize=11, frameon=False, markerscale=1.5)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig
