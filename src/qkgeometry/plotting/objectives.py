"""Figures of chapter 3, "Where directional structure could come from": the one-step gradient of each objective,
the scores along training per objective, and the authors' own training runs."""

from __future__ import annotations

import matplotlib as mpl
import seaborn as sns

from .style import FAMILY_COLORS, OBJECTIVE_COLORS, OBJECTIVE_LABELS, plt, require_rows

__all__ = ["objective_trajectories", "one_step_distributions", "paper_training_curves"]


def one_step_distributions(frame, value: str = "symmetry", by: str = "setting"):
    """Distribution of one score of the single-step gradient, causal vs MLM, one panel per ``by`` value.

    ``frame``: tidy, one row per (setting, objective, sentence) with a column ``value``. Chapter 3, "The bias at
    one step".
    """
    require_rows(frame, "frame", "pass one row per (setting, objective, sentence)")
    groups = list(dict.fromkeys(frame[by]))
    fig, axes = plt.subplots(1, len(groups), figsize=(3.6 * len(groups), 3.3), sharey=True, squeeze=False,
                             constrained_layout=True)
    for ax, grp in zip(axes[0], groups):
        sub = frame[frame[by] == grp]
        order = [o for o in OBJECTIVE_COLORS if o in set(sub["objective"])]
        sns.violinplot(data=sub, x="objective", y=value, hue="objective", palette=OBJECTIVE_COLORS, ax=ax,
                       inner="quart", cut=0, legend=False, order=order)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_title(str(grp))
        ax.set_xlabel("")
    axes[0][0].set_ylabel(f"{value} of one-step $\\nabla W$")
    return fig


def objective_trajectories(summary, scores=("symmetry", "directionality"), null_bands: dict | None = None,
                           level: float = 0.95, full_range: bool = False):
    """Chapter 3: each score against the training step, one line per objective: the mean over seeds of the
    per-seed median over layers and heads, with its Student-t interval over seeds as a band.

    ``summary``: one row per (objective, seed, step) with the ``scores`` columns
    (:func:`qkgeometry.training.objectives.run_medians`). ``null_bands``: optional ``{score: (low, high)}`` drawn in
    grey (the spread of the same median for Gaussian matrices). ``full_range``: show the whole score range
    [−1, 1] instead of zooming on the data. Returns the Figure.
    """
    require_rows(summary, "summary", "pass qkgeometry.training.objectives.run_medians(...) of at least one run")
    import numpy as np

    from ..stats import t_interval

    fig, axes = plt.subplots(1, len(scores), figsize=(5.2 * len(scores), 3.4), squeeze=False,
                             constrained_layout=True)
    for ax, score in zip(axes[0], scores):
        if null_bands and score in null_bands:
            ax.axhspan(*null_bands[score], color=FAMILY_COLORS["random"], alpha=0.2, lw=0,
                       label="Gaussian null (95% of medians)")
        for objective, sub in summary.groupby("objective", sort=False):
            steps, mean, lo, hi = [], [], [], []
            for step, grp in sub.groupby("step"):
                values = grp[score].to_numpy()
                steps.append(step)
                mean.append(values.mean())
                if len(values) >= 2 and np.ptp(values) > 0:
                    iv = t_interval(values, level)
                    lo.append(iv.low)
                    hi.append(iv.high)
                else:
                    lo.append(values.mean())
                    hi.append(values.mean())
            color = OBJECTIVE_COLORS.get(objective, "k")
            n = sub["seed"].nunique()
            ax.plot(steps, mean, color=color, label=f"{OBJECTIVE_LABELS.get(objective, objective)} (n = {n} seeds)")
            ax.fill_between(steps, np.clip(lo, -1, 1), np.clip(hi, -1, 1), color=color, alpha=0.2, lw=0)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_xlabel("training step")
        ax.set_ylabel(f"{score} score of $W_{{qk}}$\n(median over layers and heads)")
        if full_range:
            ax.set_ylim(-1.05, 1.05)
    axes[0][0].legend(fontsize=8, loc="best")
    return fig


def paper_training_curves(frame, scores=("symmetry", "directionality")):
    """Chapter 3: the authors' own training runs, median over layers against the fraction of training, one line per
    run, blue for encoders (masked LM) and red for decoders (causal LM); solid BERT, dashed BERT-small.

    ``frame``: :func:`qkgeometry.catalogue.paper_per_layer` with ``group="custom-models"``. Returns the Figure.
    """
    require_rows(frame, "frame", "pass qkgeometry.catalogue.paper_per_layer('custom-models')")
    med = frame.groupby(["model", "step"], sort=False)[list(scores)].median().reset_index()
    fig, axes = plt.subplots(1, len(scores), figsize=(5.2 * len(scores), 3.4), squeeze=False,
                             constrained_layout=True)
    for ax, score in zip(axes[0], scores):
        for model, grp in med.groupby("model", sort=False):
            family = "decoder" if "decoder" in model else "encoder"
            grp = grp.sort_values("step")
            ax.plot(grp["step"] / grp["step"].max(), grp[score], color=FAMILY_COLORS[family], lw=1.2,
                    ls="--" if "small" in model else "-", alpha=0.8)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_xlabel("fraction of training (200k steps)")
        ax.set_ylabel(f"{score} score\n(median over layers)")
        ax.set_ylim(-1.05, 1.05)
    handles = [mpl.lines.Line2D([], [], color=FAMILY_COLORS["encoder"], label="encoder (masked LM)"),
               mpl.lines.Line2D([], [], color=FAMILY_COLORS["decoder"], label="decoder (causal LM)"),
               mpl.lines.Line2D([], [], color="0.3", label="BERT (12 layers)"),
               mpl.lines.Line2D([], [], color="0.3", ls="--", label="BERT-small (4 layers)")]
    axes[0][0].legend(handles=handles, fontsize=8, loc="lower left")
    return fig
