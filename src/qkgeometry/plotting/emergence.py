"""Figures of chapter 8: heads watched as they learn their jobs.

* :func:`change_snapshots` — one head on one sequence before, during and after its change: its attention pattern
  and the symmetric and skew parts of its logits (the intuition figure);
* :func:`normalised_trajectories` — each training seed's geometry and behaviour of one role's head, each drawn from 0 (its
  start) to 1 (its end), with the 50% line where the primary change points are read;
* :func:`lag_dots` — per seed, the geometric and the behavioural change point of each role, joined by a line;
* :func:`copy_offsets` — where the layer-1 heads look from inside a copy: their mean attention at each offset from
  the earlier occurrence of the query's token, per seed and over seeds, and at offsets +1 and +2 over training;
* :func:`interactive_head_trajectories` — every head of one run, one score at a time (buttons), with a static
  fallback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..formatting import format_number
from .style import DIVERGING, STACKED_WIDTH, plt, require_rows, stacked_figure, stacked_legend

__all__ = [
    "BEHAVIOUR_COLOR",
    "GEOMETRY_COLOR",
    "SCORE_WORDS",
    "change_snapshots",
    "copy_offsets",
    "interactive_head_trajectories",
    "lag_dots",
    "normalised_trajectories",
]

GEOMETRY_COLOR, BEHAVIOUR_COLOR = "#1f77b4", "#d62728"
#: The colours of the two offsets that chapter 8 compares: +1 (the induction score's key) and +2.
OFFSET_COLORS = {1: "#7f7f7f", 2: "#ff7f0e"}
#: How the figures name the recorded scores.
SCORE_WORDS = {"symmetry": "symmetry s(M)", "directionality": "directionality d(M)",
               "position_contrast": "position-table shift contrast", "composition_contrast":
               "composition-table diagonal contrast", "token_contrast": "token-table diagonal contrast",
               "position_symmetry": "position-table symmetry", "composition_symmetry": "composition-table symmetry",
               "previous": "previous-token score", "induction": "induction score", "energy_sym": "‖M_s‖²",
               "energy_skew": "‖M_n‖²"}


def _smooth(y: np.ndarray, window: int) -> np.ndarray:
    from ..analyses.change_points import smooth

    return smooth(y, window)


def change_snapshots(patterns: Sequence[np.ndarray], sym: Sequence[np.ndarray], skew: Sequence[np.ndarray],
                     titles: Sequence[str]):
    """Three rows (attention pattern; symmetric part of the logits; skew part) by one column per snapshot (before,
    during, after a head's change). Each snapshot's two parts share one zero-centred colour scale, so that their
    sizes compare. Chapter 8, "A head as it learns"."""
    require_rows(patterns, "patterns", "pass one attention pattern per snapshot")
    k = len(patterns)
    if not len(sym) == len(skew) == len(titles) == k:
        raise ValueError(f"patterns, sym, skew and titles: one of each per snapshot; got {len(patterns)}, {len(sym)}, "
                         f"{len(skew)} and {len(titles)}.")
    fig, axes = plt.subplots(3, k, figsize=(STACKED_WIDTH * 1.5, 5.6), squeeze=False, layout="constrained")
    rows = ("attention", "symmetric part of the logits", "skew part of the logits")
    for j in range(k):
        vmax = float(max(np.abs(sym[j]).max(), np.abs(skew[j]).max())) or 1.0
        for i, (mat, cmap, lo, hi) in enumerate(((patterns[j], "Greys", 0.0, 1.0), (sym[j], DIVERGING, -vmax, vmax),
                                                  (skew[j], DIVERGING, -vmax, vmax))):
            ax = axes[i, j]
            ax.imshow(np.asarray(mat), cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            if i == 0:
                ax.set_title(titles[j], fontsize=10)
            if j == 0:
                ax.set_ylabel(rows[i], fontsize=9)
    return fig


def normalised_trajectories(curves: Mapping[str, pd.DataFrame], titles: Mapping[str, str], window: int = 5,
                            linear_below: float = 20.0):
    """One panel per role: for each seed, the role head's geometry (blue) and behaviour (red), each smoothed and
    drawn from 0 at its start to 1 at its end; the dotted line at 0.5 is where the primary change points are read.
    ``curves[role]``: columns ``run, step, geometry, behaviour``. The step axis is linear up to ``linear_below``
    and logarithmic after, so that an early change and the long run after it both show. Chapter 8."""
    require_rows(pd.concat(list(curves.values())) if curves else pd.DataFrame(), "curves",
                 "pass each role's per-seed curves")
    fig, axes = stacked_figure(len(curves), 2.2, sharex=True)
    for ax, (role, frame) in zip(axes[:, 0], curves.items()):
        for _, run in frame.groupby("run", sort=False):
            run = run.sort_values("step")
            for column, colour in (("geometry", GEOMETRY_COLOR), ("behaviour", BEHAVIOUR_COLOR)):
                z = _smooth(run[column].to_numpy(dtype=float), window)
                span = z[-1] - z[0]
                if span == 0:
                    continue
                ax.plot(run["step"], (z - z[0]) / span, color=colour, lw=0.8, alpha=0.55)
        ax.axhline(0.5, color="0.4", lw=0.8, ls=":")
        ax.set_xscale("symlog", linthresh=linear_below)
        ax.set_ylim(-0.3, 1.3)
        ax.set_title(titles.get(role, role))
        ax.set_ylabel("fraction of the way")
    axes[-1, 0].set_xlabel(f"training step (logarithmic above {format_number(linear_below, spec='g')})")
    handles = [plt.Line2D([], [], color=GEOMETRY_COLOR), plt.Line2D([], [], color=BEHAVIOUR_COLOR)]
    stacked_legend(fig, handles, ["geometry (the table contrast)", "behaviour (the chapter-7 score)"])
    return fig


def lag_dots(table: pd.DataFrame, titles: Mapping[str, str]):
    """One panel per role: per seed (rows), the geometric (blue circle) and behavioural (red dot) change point,
    joined by a line; a seed whose head did not earn its label, or without a change point, is listed as such.
    ``table``: the primary specification's per-run lags (``run, role, labelled, geometry_step,
    behaviour_step``). Chapter 8."""
    require_rows(table, "table", "pass the per-run lags of the primary specification")
    roles = list(dict.fromkeys(table["role"]))
    n = table.groupby("role").size().max()
    fig, axes = stacked_figure(len(roles), 0.22 * n + 0.9)
    for ax, role in zip(axes[:, 0], roles):
        part = table[table["role"] == role].reset_index(drop=True)
        labels = []
        for y, r in part.iterrows():
            g, b = r["geometry_step"], r["behaviour_step"]
            ok = bool(r["labelled"]) and np.isfinite(g) and np.isfinite(b)
            if ok:
                ax.plot([g, b], [y, y], color="0.6", lw=1)
            ax.plot(g, y, "o", mfc="white", mec=GEOMETRY_COLOR, ms=5)
            ax.plot(b, y, "o", color=BEHAVIOUR_COLOR, ms=4)
            labels.append(str(r["run"]).split("-")[-1] + ("" if r["labelled"] else " (no label)"))
        ax.set_yticks(range(len(part)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(titles.get(role, role))
        ax.set_xlabel("training step of the change point")
    handles = [plt.Line2D([], [], marker="o", ls="", mfc="white", mec=GEOMETRY_COLOR),
               plt.Line2D([], [], marker="o", ls="", color=BEHAVIOUR_COLOR)]
    stacked_legend(fig, handles, ["geometry at 50% of the way", "behaviour at 50% of the way"])
    return fig


def copy_offsets(per_seed: pd.DataFrame, over: pd.DataFrame, trajectory: pd.DataFrame, chance: float):
    """Two panels. Top: the mean attention of one layer's heads at each offset ``r`` from the earlier occurrence of
    the query's token, one thin line per seed and the mean over seeds with its 95% interval (``per_seed``: columns
    ``run, offset, attention``; ``over``: ``offset, attention, low, high``). Bottom: the same at offsets +1 and +2
    over training, one line per seed (``trajectory``: ``run, step, offset, attention``). The dotted line is
    ``chance``, uniform attention over the visible keys. Chapter 8, "Where the copying heads look"."""
    require_rows(per_seed, "per_seed", "pass the per-seed profile of copy_offset_summary")
    require_rows(over, "over", "pass the over-seed profile of copy_offset_summary")
    require_rows(trajectory, "trajectory", "pass the layer's mean attention at +1 and +2 per step")
    fig, axes = stacked_figure(2, 2.3)
    top, bottom = axes[0, 0], axes[1, 0]
    for _, run in per_seed.groupby("run", sort=False):
        run = run.sort_values("offset")
        top.plot(run["offset"], run["attention"], color="0.6", lw=0.8, alpha=0.8)
    over = over.sort_values("offset")
    colours = [OFFSET_COLORS.get(int(r), "black") for r in over["offset"]]
    top.errorbar(over["offset"], over["attention"], yerr=[over["attention"] - over["low"],
                                                          over["high"] - over["attention"]],
                 fmt="none", ecolor="black", elinewidth=1, capsize=3)
    top.scatter(over["offset"], over["attention"], c=colours, s=30, zorder=3, edgecolors="black", linewidths=0.5)
    top.axhline(chance, color="0.4", lw=0.8, ls=":")
    top.set_xticks(over["offset"], [format_number(int(r), spec="+d") if r else "0" for r in over["offset"]])
    top.set_xlabel("key at src + r (src: earlier occurrence of the query's token)")
    top.set_ylabel("mean attention")
    top.set_ylim(bottom=0)
    for (_, offset), run in trajectory.groupby(["run", "offset"], sort=False):
        run = run.sort_values("step")
        bottom.plot(run["step"], run["attention"], color=OFFSET_COLORS.get(int(offset), "black"), lw=0.9, alpha=0.8)
    bottom.axhline(chance, color="0.4", lw=0.8, ls=":")
    bottom.set_xlabel("training step")
    bottom.set_ylabel("mean attention")
    bottom.set_ylim(bottom=0)
    handles = [plt.Line2D([], [], color=OFFSET_COLORS[1]), plt.Line2D([], [], color=OFFSET_COLORS[2]),
               plt.Line2D([], [], color="0.4", ls=":")]
    stacked_legend(fig, handles, ["r = +1 (the induction score's key)", "r = +2", "uniform attention"])
    return fig


def interactive_head_trajectories(log: pd.DataFrame, scores: Sequence[str], title: str, alt: str | None = None
                                  ) -> Any:
    """Every head of one run against training step, one score at a time (a button per score): layer-0 heads in
    solid lines, layer-1 heads dashed; hovering a step lists every head. ``log``: one run's per-head rows. The
    static fallback shows the first two scores. Chapter 8, "Every head, as it learns"."""
    import plotly.graph_objects as go

    from .interactive import InteractiveFigure, chart_buttons, chart_layout, chart_numbers

    require_rows(log, "log", "pass one run's per-head rows")
    missing = [s for s in scores if s not in log.columns]
    if missing:
        raise KeyError(f"log: missing the score columns {missing}.")
    heads = log[["layer", "head"]].drop_duplicates().sort_values(["layer", "head"]).to_numpy()
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#bcbd22")
    figure = go.Figure()
    for k, score in enumerate(scores):
        for i, (layer, head) in enumerate(heads):
            part = log[(log["layer"] == layer) & (log["head"] == head)].sort_values("step")
            figure.add_trace(go.Scatter(
                x=part["step"].to_numpy(), y=part[score].to_numpy(dtype=float), mode="lines",
                name=f"layer {layer}, head {head}", visible=k == 0, legendgroup=f"{layer}-{head}",
                line={"color": colours[i % len(colours)], "width": 1.6, "dash": "solid" if layer == 0 else "dash"},
                text=[f"L{layer}H{head}: {v}" for v in chart_numbers(part[score].fillna(0.0), 3)],
                hovertemplate="%{text}<extra></extra>"))
    per = len(heads)
    buttons = []
    for k, score in enumerate(scores):
        visible = [j // per == k for j in range(per * len(scores))]
        buttons.append((SCORE_WORDS.get(score, score).replace("‖", "||"), "update",
                        [{"visible": visible}, {"yaxis": {"title": {"text": SCORE_WORDS.get(score, score)}}}]))
    figure.update_layout(**chart_layout(title, 600, top=130, hovermode="x unified",
                                   xaxis={"title": {"text": "training step"}, "hoverformat": ",d"},
                                   yaxis={"title": {"text": SCORE_WORDS.get(scores[0], scores[0])}},
                                   updatemenus=[{**chart_buttons(buttons), "type": "dropdown", "direction": "down"}]))
    fallback, axes = stacked_figure(min(2, len(scores)), 2.2, sharex=True)
    for ax, score in zip(axes[:, 0], scores[:2]):
        for i, (layer, head) in enumerate(heads):
            part = log[(log["layer"] == layer) & (log["head"] == head)].sort_values("step")
            ax.plot(part["step"], part[score], color=colours[i % len(colours)], lw=1,
                    ls="-" if layer == 0 else "--", label=f"L{layer}H{head}")
        ax.set_ylabel(SCORE_WORDS.get(score, score))
    axes[-1, 0].set_xlabel("training step")
    h, lab = axes[0, 0].get_legend_handles_labels()
    stacked_legend(fallback, h, lab, max_ncols=4)
    plt.close(fallback)
    text = alt or (f"Line plot of one score of every head against training step, layer-0 heads solid and layer-1 "
                   f"heads dashed; a menu switches between {len(scores)} scores, and hovering a step lists every "
                   "head's value there.")
    return InteractiveFigure(figure, fallback, text)
