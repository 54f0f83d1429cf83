"""Figures of chapter 3, "Where directional structure could come from": the one-step gradient of each objective,
the scores along training per objective, and the authors' own training runs."""

from __future__ import annotations

import matplotlib as mpl
import seaborn as sns

from ..formatting import format_number
from .style import (
    FAMILY_COLORS,
    OBJECTIVE_COLORS,
    OBJECTIVE_LABELS,
    require_rows,
    stacked_figure,
    stacked_legend,
)

__all__ = ["objective_losses", "objective_trajectories", "one_step_distributions", "paper_training_curves"]


def one_step_distributions(frame, value: str = "symmetry", by: str = "setting"):
    """Distribution of one score of the single-step gradient, causal vs MLM, one panel per ``by`` value, the panels
    stacked (one above the other, on one shared score axis) so that a phone shows them at a readable size.

    ``frame``: tidy, one row per (setting, objective, sentence) with a column ``value``. Chapter 3, "The bias at
    one step".
    """
    require_rows(frame, "frame", "pass one row per (setting, objective, sentence)")
    groups = list(dict.fromkeys(frame[by]))
    fig, axes = stacked_figure(len(groups), 1.9, extra=0.2, sharey=True)
    for ax, grp in zip(axes[:, 0], groups):
        sub = frame[frame[by] == grp]
        order = [o for o in OBJECTIVE_COLORS if o in set(sub["objective"])]
        sns.violinplot(data=sub, x="objective", y=value, hue="objective", palette=OBJECTIVE_COLORS, ax=ax,
                       inner="quart", cut=0, legend=False, order=order)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_xticks(range(len(order)), [OBJECTIVE_LABELS.get(o, o) for o in order])
        ax.set_title(str(grp))
        ax.set_xlabel("")
        ax.set_ylabel("")
    fig.supylabel(f"{value} of one-step $\\nabla W$")
    return fig


def _seed_band(sub, column: str, level: float):
    """Steps, mean over seeds and its Student-t band of ``column`` (one row per seed and step in ``sub``)."""
    import numpy as np

    from ..stats import t_interval

    steps, mean, lo, hi = [], [], [], []
    for step, grp in sub.groupby("step"):
        values = grp[column].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        steps.append(step)
        mean.append(values.mean())
        if len(values) >= 2 and np.ptp(values) > 0:
            iv = t_interval(values, level)
            lo.append(iv.low)
            hi.append(iv.high)
        else:
            lo.append(values.mean())
            hi.append(values.mean())
    return np.array(steps), np.array(mean), np.array(lo), np.array(hi)


def objective_trajectories(summary, scores=("symmetry", "directionality"), null_bands: dict | None = None,
                           level: float = 0.95, full_range: bool = False, ylabels: dict | None = None):
    """Chapter 3: each score against the training step, one line per objective: the mean over seeds of the
    per-seed median over layers and heads, with its Student-t interval over seeds as a band.

    ``summary``: one row per (objective, seed, step) with the ``scores`` columns
    (:func:`qkgeometry.training.objectives.run_medians`, or ``seed_summaries(..., step="all")`` with
    ``scores=("symmetry_change", "directionality_change")``). ``null_bands``: optional ``{score: (low, high)}``
    drawn in grey (the spread of the same median for Gaussian matrices). ``full_range``: show the whole score range
    [−1, 1] instead of zooming on the data. ``ylabels``: optional ``{score: label}``. The panels are stacked, one
    score above the other, so that a phone shows them at a readable size. Returns the Figure.
    """
    require_rows(summary, "summary", "pass qkgeometry.training.objectives.run_medians(...) of at least one run")
    import textwrap

    import numpy as np

    fig, axes = stacked_figure(len(scores), 2.6)
    for ax, score in zip(axes[:, 0], scores):
        if null_bands and score in null_bands:
            ax.axhspan(*null_bands[score], color=FAMILY_COLORS["random"], alpha=0.2, lw=0,
                       label="Gaussian null (95% of medians)")
        for objective, sub in summary.groupby("objective", sort=False):
            steps, mean, lo, hi = _seed_band(sub, score, level)
            color = OBJECTIVE_COLORS.get(objective, "k")
            n = sub["seed"].nunique()
            ax.plot(steps, mean, color=color, label=f"{OBJECTIVE_LABELS.get(objective, objective)} (n = {n} seeds)")
            ax.fill_between(steps, np.clip(lo, -1, 1), np.clip(hi, -1, 1), color=color, alpha=0.2, lw=0)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_xlabel("training step")
        # the full name above the panel, a short one along the axis: two-line axis labels of stacked panels are
        # taller than the panels and run into each other
        label = (ylabels or {}).get(score, f"{score} score of $W_{{qk}}$ (median over layers and heads)")
        ax.set_title(textwrap.fill(" ".join(label.split()), 60), fontsize=10)
        ax.set_ylabel(score.replace("_change", " change").replace("_", " "))
        if full_range:
            ax.set_ylim(-1.05, 1.05)
    stacked_legend(fig, *axes[0][0].get_legend_handles_labels(), max_ncols=1)  # long labels: one per line
    return fig


def objective_losses(summary, plateaus: dict, level: float = 0.95):
    """Chapter 3: the training loss of each objective against the step, one panel per objective (their losses
    live on different scales), the mean over seeds with its Student-t band, and the loss of a model that ignores
    the context as a dashed line: an objective whose curve stays on that line has not started to learn. The panels
    are stacked, one objective above the other, so that a phone shows them at a readable size; the legend sits
    below them.

    ``summary``: one row per (objective, seed, step) with a ``loss`` column (``seed_summaries(..., step="all")``).
    ``plateaus``: ``{objective: (label, loss)}``. Returns the Figure.
    """
    import textwrap

    require_rows(summary, "summary", "pass qkgeometry.training.objectives.seed_summaries(scores, step='all')")
    objectives = list(dict.fromkeys(summary["objective"]))
    missing = [o for o in objectives if o not in plateaus]
    if missing:
        raise ValueError(f"plateaus: no reference loss for {missing}; pass {{objective: (label, loss)}} for each.")
    seeds = {o: summary.loc[(summary["objective"] == o) & (summary["step"] > 0), "seed"].nunique() for o in objectives}
    one_n = len(set(seeds.values())) == 1
    fig, axes = stacked_figure(len(objectives), 1.55, sharex=True)
    handles: dict = {}
    for ax, objective in zip(axes[:, 0], objectives):
        sub = summary[(summary["objective"] == objective) & (summary["step"] > 0)]
        steps, mean, lo, hi = _seed_band(sub, "loss", level)
        color = OBJECTIVE_COLORS.get(objective, "k")
        ax.plot(steps, mean, color=color)
        ax.fill_between(steps, lo, hi, color=color, alpha=0.25, lw=0)
        label, value = plateaus[objective]
        handles.setdefault(label, ax.axhline(value, color="0.35", ls="--", lw=1))
        title = OBJECTIVE_LABELS.get(objective, objective) + ("" if one_n else f" (n = {seeds[objective]} seeds)")
        ax.set_title(textwrap.fill(title, 40), fontsize=10)
    axes[-1][0].set_xlabel("training step")
    fig.supylabel("training loss (nats)")
    words = f"mean of n = {next(iter(seeds.values()))} seeds" if one_n else "mean over seeds"
    mean = mpl.lines.Line2D([], [], color="0.3")
    band = mpl.patches.Patch(color="0.3", alpha=0.25, lw=0)
    stacked_legend(fig, [(band, mean), *handles.values()],
                   [f"{words}, {format_number(level, spec='.0%')} t-band", *(f"{lab} (dashed)" for lab in handles)],
                   max_ncols=1)
    return fig


def paper_training_curves(frame, scores=("symmetry", "directionality")):
    """Chapter 3: the authors' own training runs, median over layers against the fraction of training, one line per
    run, blue for encoders (masked LM) and red for decoders (a causal mask over the masked-LM collator's input, as
    the authors' script trains them); solid BERT, dashed BERT-small. One panel per score, stacked, so that the figure
    stays readable on a phone; the legend sits below the panels, clear of the data.

    ``frame``: :func:`qkgeometry.catalogue.paper_per_layer` with ``group="custom-models"``. Returns the Figure.
    """
    require_rows(frame, "frame", "pass qkgeometry.catalogue.paper_per_layer('custom-models')")
    med = frame.groupby(["model", "step"], sort=False)[list(scores)].median().reset_index()
    fig, axes = stacked_figure(len(scores), 2.4, sharex=True)
    for ax, score in zip(axes[:, 0], scores):
        for model, grp in med.groupby("model", sort=False):
            family = "decoder" if "decoder" in model else "encoder"
            grp = grp.sort_values("step")
            ax.plot(grp["step"] / grp["step"].max(), grp[score], color=FAMILY_COLORS[family], lw=1.2,
                    ls="--" if "small" in model else "-", alpha=0.8)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_ylabel(f"{score}\n(median over layers)")
        ax.set_ylim(-1.05, 1.05)
    axes[-1][0].set_xlabel("fraction of training (200k steps)")
    handles = [mpl.lines.Line2D([], [], color=FAMILY_COLORS["encoder"], label="encoder (masked LM)"),
               mpl.lines.Line2D([], [], color=FAMILY_COLORS["decoder"], label="decoder (causal mask, masked-LM input)"),
               mpl.lines.Line2D([], [], color="0.3", label="BERT (12 layers)"),
               mpl.lines.Line2D([], [], color="0.3", ls="--", label="BERT-small (4 layers)")]
    stacked_legend(fig, handles, [h.get_label() for h in handles])
    return fig
