"""Figures of chapter 5, "Symmetric initialisation": training curves per init with their seed bands, the survival
grid of the symmetry score, the paired difference against the baseline, and our runs next to the paper's."""

from __future__ import annotations

from ..formatting import format_number
from .style import FAMILY_COLORS, INIT_COLORS, INIT_STYLES, plt, require_rows

__all__ = ["PANEL_WORDS", "init_curves", "paired_difference_curve", "survival_grid", "trajectories_vs_paper"]

#: How a panel of chapter 5 names its architecture (never a column name such as "arch = encoder").
PANEL_WORDS = {"encoder": "encoder (masked LM)", "decoder": "decoder (causal LM)"}


def init_curves(frame, y: str = "val_loss", col: str = "arch", hue: str = "init", ylabel: str | None = None,
                title: str | None = None, logx: bool = False, hline: float | None = None,
                hline_label: str | None = None, zoom_from: int | None = None):
    """Chapter 5: ``y`` against ``step``, one panel per value of ``col``, one colour per ``hue`` value; the line is
    the mean over seeds and the band the min–max over seeds. ``frame`` is the concatenation of run logs (columns
    ``step, seed, <y>, <col>, <hue>``). ``zoom_from``: an inset per panel with the steps from there on, on a y range
    of their own, for curves that lie too close to tell apart at the full scale. Returns the Figure."""
    require_rows(frame, "frame", "pass the concatenated run logs of at least one run")
    cols = list(dict.fromkeys(frame[col]))
    fig, axes = plt.subplots(1, len(cols), figsize=(4.2 * len(cols), 3.3), squeeze=False, sharey=True)
    for ax, value in zip(axes[0], cols):
        sub = frame[frame[col] == value]
        inset = None
        if zoom_from is not None and (sub["step"] >= zoom_from).any():
            inset = ax.inset_axes([0.42, 0.42, 0.55, 0.5])
            inset.tick_params(labelsize=8)
            inset.set_title(f"from step {format_number(zoom_from)}", fontsize=8)
        for key, g in sub.groupby(hue, sort=False):
            agg = g.groupby("step")[y].agg(["mean", "min", "max"]).dropna()
            color = INIT_COLORS.get(key)
            n = g["seed"].nunique() if "seed" in g else 1
            for target, late in ((ax, agg), (inset, agg[agg.index >= (zoom_from or 0)])):
                if target is None:
                    continue
                target.plot(late.index, late["mean"], color=color, ls=INIT_STYLES.get(key, "-"), lw=1.8,
                            label=f"{key} (n={n})" if target is ax else None)
                target.fill_between(late.index, late["min"], late["max"], color=color, alpha=0.2, lw=0)
        if hline is not None:
            ax.axhline(hline, color="0.4", ls="--", lw=0.9, label=hline_label)
        if logx:
            ax.set_xscale("symlog", linthresh=10)
        words = PANEL_WORDS.get(value, str(value))
        ax.set_title(words if title is None else f"{title}: {words}")
        ax.set_xlabel("step")
    axes[0][0].set_ylabel(ylabel or y)
    # below the panels, never on a curve or on the inset
    axes[0][0].legend(fontsize=9, loc="upper left", bbox_to_anchor=(0.0, -0.2), ncol=3, frameon=False)
    fig.tight_layout()
    return fig


def survival_grid(frame, y: str = "symmetry_mean"):
    """Chapter 5, experiment A: symmetry score of ``W_qk`` (mean over layers) against step, one row per arch and one
    column per learning rate (``lr_max``), one colour per init. Returns the Figure."""
    require_rows(frame, "frame", "pass the concatenated run logs of at least one run")
    archs = list(dict.fromkeys(frame["arch"]))
    lrs = sorted(frame["lr_max"].unique())
    fig, axes = plt.subplots(len(archs), len(lrs), figsize=(3.3 * len(lrs), 2.7 * len(archs)), squeeze=False,
                             sharex=True, sharey=True)
    for i, arch in enumerate(archs):
        for j, lr in enumerate(lrs):
            ax = axes[i][j]
            sub = frame[(frame["arch"] == arch) & (frame["lr_max"] == lr)]
            for key, g in sub.groupby("init", sort=False):
                g = g.sort_values("step")
                ax.plot(g["step"], g[y], color=INIT_COLORS.get(key), ls=INIT_STYLES.get(key, "-"), lw=1.8,
                        label=key)
            ax.axhline(0, color="0.6", lw=0.8, zorder=0)
            ax.set_title(f"{arch}, learning rate {format_number(lr, spec='g')}")
            if i == len(archs) - 1:
                ax.set_xlabel("step")
        axes[i][0].set_ylabel("symmetry score")
    axes[0][0].legend(fontsize=9)
    fig.tight_layout()
    return fig


def paired_difference_curve(curve, ylabel: str = "validation loss, symmetric − default (nats)",
                            title: str | None = None):
    """Chapter 5: the paired difference ``treatment − baseline`` against step, one panel per arch, with its
    Student-t band over seeds. ``curve`` is :func:`qkgeometry.training.metrics.paired_curve`'s frame (columns
    ``arch, step, n, diff_mean, ci_low, ci_high``). The zero line is drawn: where the band leaves it, the
    difference is resolved at that step. Returns the Figure."""
    require_rows(curve, "curve", "pass qkgeometry.training.metrics.paired_curve(...) of at least one pair of runs")
    archs = list(dict.fromkeys(curve["arch"]))
    fig, axes = plt.subplots(1, len(archs), figsize=(5.6 * len(archs), 3.3), squeeze=False)
    for ax, arch in zip(axes[0], archs):
        sub = curve[curve["arch"] == arch].sort_values("step")
        n = int(sub["n"].max())
        ax.plot(sub["step"], sub["diff_mean"], color=INIT_COLORS["symmetric"], lw=1.8, label=f"mean (n={n} seeds)")
        ax.fill_between(sub["step"], sub["ci_low"], sub["ci_high"], color=INIT_COLORS["symmetric"], alpha=0.2,
                        lw=0, label="95% t-interval over seeds")
        ax.axhline(0, color="0.3", lw=0.9)
        words = PANEL_WORDS.get(arch, str(arch))
        ax.set_title(words if title is None else f"{title}: {words}")
        ax.set_xlabel("step")
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend(fontsize=9, loc="lower left")
    fig.tight_layout()
    return fig


def trajectories_vs_paper(ours, theirs, y: str = "symmetry"):
    """Chapter 5: two panels on the same axes, our recorded runs (left) and the paper's own training runs (right):
    ``y`` (the median over layers) against the fraction of training done.

    ``ours`` has columns ``fraction, init, seed, <y>``: one line per init, the mean over seeds with the min–max
    band. ``theirs`` has columns ``fraction, arch, model, <y>``: one thin line per run, coloured by arch (encoder
    or decoder). Returns the Figure."""
    require_rows(ours, "ours", "pass the recorded runs (fraction, init, seed and the score)")
    require_rows(theirs, "theirs", "pass the paper's runs (qkgeometry.catalogue.paper_per_layer('custom-models'))")
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.5), sharex=True, sharey=True)
    ax = axes[0]
    for init, g in ours.groupby("init", sort=False):
        agg = g.groupby("fraction")[y].agg(["mean", "min", "max"])
        color = INIT_COLORS.get(init)
        ax.plot(agg.index, agg["mean"], color=color, ls=INIT_STYLES.get(init, "-"), lw=1.8,
                label=f"{init} (n={g['seed'].nunique()} seeds)")
        ax.fill_between(agg.index, agg["min"], agg["max"], color=color, alpha=0.2, lw=0)
    ax.set_title("our recorded encoder runs (d = 128, 10k steps)")
    ax.set_ylabel(f"{y} score, median over layers")
    arch_colors = {"encoder": FAMILY_COLORS["encoder"], "decoder": FAMILY_COLORS["decoder"]}
    seen = set()
    for (arch, _model), g in theirs.groupby(["arch", "model"]):
        g = g.sort_values("fraction")
        axes[1].plot(g["fraction"], g[y], color=arch_colors.get(arch, "0.5"), lw=1.0, alpha=0.8,
                     label=None if arch in seen else arch)
        seen.add(arch)
    axes[1].set_title("the paper's training runs (BERT, 200 checkpoints)")
    for ax in axes:
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_xlabel("fraction of training done")
        ax.legend(fontsize=9)
    fig.tight_layout()
    return fig
