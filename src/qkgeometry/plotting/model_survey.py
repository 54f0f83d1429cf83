"""Figures of chapter 4, "A survey of real models" (and of ``qkgeometry plot``): scores against depth, per-head
heatmaps, the median plane with IQR bars, random-init twins, paired encoder/decoder stacks and the modality planes.

Rows are coloured by attention stack (:func:`stack_of`, :data:`~qkgeometry.plotting.style.STACK_COLORS`), random
twins in grey, one marker shape per model.
"""

from __future__ import annotations

import seaborn as sns
from matplotlib.ticker import MaxNLocator

from .style import DIVERGING, FAMILY_COLORS, MODEL_MARKERS, STACK_COLORS, STACK_WORDS, plt, require_rows

__all__ = ["curve_label", "modality_planes", "paired_stacks", "stack_of", "survey_figures", "survey_head_heatmaps",
           "survey_layer_curves", "survey_scatter", "survey_twins"]


def stack_of(family: str, component: str) -> str:
    """The attention stack of a survey row: ``family`` for ``self`` attention (``encoder`` or ``decoder``), else
    ``component`` (``encoder``, ``decoder`` or ``cross`` of an encoder-decoder model). Chapter 4."""
    return family if component == "self" else component


def curve_label(model: str, component: str) -> str:
    """How a figure names one (model, component): ``model`` for ``self`` attention, else ``model [component]``."""
    return model if component == "self" else f"{model} [{component}]"


def survey_layer_curves(frame, scores: tuple[str, ...] = ("symmetry", "directionality")):
    """Chapter 4: each score against relative depth (layer / (n_layers − 1)), one line per (model, component).

    Pretrained models are solid lines coloured by attention stack (:data:`STACK_COLORS`) with one marker shape per
    model; random-init twins are thin dashed grey lines, one legend entry for all of them. The legend sits below
    the panels. ``frame``: a survey frame (per layer, or per head, which is then averaged over heads). Returns the
    Figure."""
    require_rows(frame, "frame", "pass the frame of qkgeometry.survey(...) with at least one model")
    layers = frame.groupby(["model", "family", "init", "component", "layer"], sort=False, dropna=False)[
        list(scores)].mean().reset_index()
    fig, axes = plt.subplots(1, len(scores), figsize=(5.4 * len(scores), 3.6), squeeze=False)
    pretrained = list(dict.fromkeys(layers.loc[layers["init"] != "random", "model"]))
    marker = {m: MODEL_MARKERS[k % len(MODEL_MARKERS)] for k, m in enumerate(pretrained)}
    handles: dict[str, object] = {}
    for ax, score in zip(axes[0], scores):
        for (model, family, init, comp), g in layers.groupby(["model", "family", "init", "component"], sort=False):
            depth = g["layer"] / max(g["layer"].max(), 1)
            if init == "random":
                (line,) = ax.plot(depth, g[score], lw=0.9, ls="--", color=FAMILY_COLORS["random"], alpha=0.6)
                handles.setdefault("random-init twins (every model)", line)
                continue
            (line,) = ax.plot(depth, g[score], marker=marker[model], ms=4, lw=1.4,
                              color=STACK_COLORS.get(stack_of(family, comp), "#333333"))
            handles.setdefault(curve_label(model, comp), line)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_xlabel("relative depth (layer / last layer)")
        ax.set_ylabel(score)
        ax.set_ylim(-1, 1)
    order = [k for k in handles if not k.startswith("random")] + [k for k in handles if k.startswith("random")]
    fig.legend([handles[k] for k in order], order, loc="lower center", ncol=min(4, len(order)), fontsize=7.5,
               bbox_to_anchor=(0.5, 0.0))
    rows = -(-len(order) // min(4, len(order)))
    fig.tight_layout(rect=(0, 0.06 * rows + 0.02, 1, 1))
    return fig


def survey_head_heatmaps(frame, score: str = "symmetry"):
    """Chapter 4: one layer × head heatmap of ``score`` per (model, component) of a per-head survey frame (random
    twins left out), on a shared colour scale centred at 0, at most four panels a row. Returns the Figure."""
    require_rows(frame, "frame", "pass the frame of qkgeometry.survey(..., per='head')")
    heads = frame[frame["head"].notna() & (frame.get("init", "pretrained") != "random")]
    groups = list(heads.groupby(["model", "component"], sort=False))
    if not groups:
        raise ValueError("`frame` has no per-head rows; run the survey with per='head'.")
    ncols = min(4, len(groups))  # at most four panels a row, so that wide surveys stay readable on a page
    nrows = -(-len(groups) // ncols)
    fig, grid_axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.6 * nrows), squeeze=False,
                                  constrained_layout=True)
    axes = grid_axes.ravel()
    for ax in axes[len(groups):]:
        fig.delaxes(ax)
    axes = axes[:len(groups)]
    for ax, ((model, comp), g) in zip(axes, groups):
        grid = g.pivot_table(index="layer", columns="head", values=score)
        im = ax.imshow(grid.to_numpy(dtype=float), cmap=DIVERGING, vmin=-1, vmax=1, aspect="auto",
                       interpolation="nearest")
        ax.set_title(model if comp == "self" else f"{model} [{comp}]", fontsize=9)
        ax.set_xlabel("head")
        ax.grid(False)
        for axis in (ax.xaxis, ax.yaxis):  # imshow's default locator puts ticks at half-integers
            axis.set_major_locator(MaxNLocator(integer=True))
    for row in range(nrows):
        axes[row * ncols].set_ylabel("layer")
    fig.colorbar(im, ax=list(axes), shrink=0.8, label=score)
    return fig


def survey_scatter(summary, labels: str = "text"):
    """Chapter 4: median symmetry against median directionality, one point per (model, component), with IQR bars,
    coloured by attention stack (random twins grey). ``summary``: :func:`qkgeometry.summarize` of a survey
    frame with an ``init`` column merged in.

    ``labels="text"`` writes each point's name next to it; ``labels="legend"`` gives every pretrained (model,
    component) its own marker and a legend entry below the axes instead (no text on the plot, so nothing overlaps),
    and the twins one shared grey entry. Returns the Figure."""
    require_rows(summary, "summary", "pass qkgeometry.summarize(...) of a survey with at least one model")
    if labels not in ("text", "legend"):
        raise ValueError(f"labels: must be 'text' or 'legend', got {labels!r}.")
    fig, ax = plt.subplots(figsize=(6.4, 4.4 if labels == "text" else 5.4))
    init = summary["init"] if "init" in summary else ["pretrained"] * len(summary)
    names = [m for m, i in zip(summary["model"], init) if i != "random"]
    base = {m: k for k, m in enumerate(dict.fromkeys(names))}
    handles: dict[str, object] = {}
    for (_, r), kind in zip(summary.iterrows(), init):
        random = kind == "random"
        color = FAMILY_COLORS["random"] if random else STACK_COLORS.get(stack_of(r["family"], r["component"]),
                                                                          "#333333")
        twin_of = str(r["model"]).replace(" (random init)", "")
        marker = MODEL_MARKERS[base.get(twin_of, 0) % len(MODEL_MARKERS)] if labels == "legend" else "o"
        container = ax.errorbar(
            r["symmetry_median"], r["directionality_median"],
            xerr=[[r["symmetry_median"] - r["symmetry_q25"]], [r["symmetry_q75"] - r["symmetry_median"]]],
            yerr=[[r["directionality_median"] - r["directionality_q25"]],
                  [r["directionality_q75"] - r["directionality_median"]]],
            fmt=marker, color=color, ms=6 if not random else 5, capsize=2, lw=1, alpha=0.7 if random else 1,
            mec="white" if labels == "legend" else None)
        label = curve_label(r["model"], r["component"])
        if labels == "text":
            ax.annotate(label, (r["symmetry_median"], r["directionality_median"]), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        else:
            handles.setdefault("random-init twins (grey, same marker as their model)" if random else label,
                               container.lines[0])
    ax.axhline(0, color="0.6", lw=0.8, zorder=0)
    ax.axvline(0, color="0.6", lw=0.8, zorder=0)
    ax.set_xlabel("symmetry (median over layers, IQR bars)")
    ax.set_ylabel("directionality (median, IQR bars)")
    if labels == "text":
        present = {stack_of(f, c) for f, c in zip(summary["family"], summary["component"])}
        for stack in [s for s in STACK_COLORS if s in present]:
            ax.scatter([], [], color=STACK_COLORS[stack], label=stack)
        if any(i == "random" for i in init):
            ax.scatter([], [], color=FAMILY_COLORS["random"], label="random init")
        ax.legend(fontsize=8)
        fig.tight_layout()
    else:
        order = [k for k in handles if not k.startswith("random")] + [k for k in handles if k.startswith("random")]
        ncol = 2
        ax.legend([handles[k] for k in order], order, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=ncol,
                  fontsize=7.5)
        fig.tight_layout()
    return fig


def survey_twins(frame, score: str = "symmetry"):
    """Chapter 4: the layer scores of each pretrained model next to those of its random-init twin (strip + box).
    ``frame``: a survey frame with ``init`` in {pretrained, random}; twins are matched by the name suffix
    " (random init)". Returns the Figure."""
    require_rows(frame, "frame", "pass the frame of qkgeometry.survey(...) with pretrained models and their random:<source> twins")
    layers = frame.groupby(["model", "family", "init", "component", "layer"], sort=False)[score].mean().reset_index()
    layers["base"] = layers["model"].str.replace(" (random init)", "", regex=False)
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * layers["base"].nunique(), 3.6))
    palette = {"pretrained": "#1f77b4", "random": FAMILY_COLORS["random"]}
    sns.boxplot(data=layers, x="base", y=score, hue="init", palette=palette, ax=ax, showfliers=False, width=0.6)
    sns.stripplot(data=layers, x="base", y=score, hue="init", palette=palette, dodge=True, ax=ax, size=3,
                  legend=False, edgecolor="k", linewidth=0.3)
    ax.axhline(0, color="0.6", lw=0.8, zorder=0)
    ax.set_xlabel("")
    ax.set_ylabel(f"{score} (one point per layer)")
    fig.tight_layout()
    return fig


def paired_stacks(pairs, scores: tuple[str, ...] = ("symmetry", "directionality"), highlight=()):
    """Chapter 4: the encoder stack and the decoder stack of each encoder-decoder model, joined by a line (a slope
    chart), one panel per score.

    ``pairs``: one row per (model, stack) with columns ``model``, ``group`` (the colour: e.g. "T5", "Whisper"),
    ``stack`` (``encoder`` or a decoder stack), ``source`` (``authors`` or ``ours``) and the ``scores``. The
    authors' pairs are thin coloured lines (one colour per group); ours are thick black lines with star markers.
    Models in ``highlight`` are drawn dashed and named in the legend. Returns the Figure."""
    require_rows(pairs, "pairs", "pass one row per (model, stack) of at least one encoder-decoder model")
    import numpy as np

    pairs = pairs.copy()
    pairs["side"] = np.where(pairs["stack"] == "encoder", 0, 1)
    groups = list(dict.fromkeys(pairs.loc[pairs["source"] != "ours", "group"]))
    palette = dict(zip(groups, sns.color_palette("colorblind", len(groups))))
    fig, axes = plt.subplots(1, len(scores), figsize=(4.6 * len(scores), 4.2), squeeze=False)
    handles: dict[str, object] = {}
    rng = np.random.default_rng(0)
    for ax, score in zip(axes[0], scores):
        for (model, source), g in pairs.groupby(["model", "source"], sort=False):
            g = g.sort_values("side")
            if len(g) != 2:
                raise ValueError(f"pairs: model {model!r} needs one encoder and one decoder row, got {len(g)}.")
            group = g["group"].iloc[0]
            jitter = rng.uniform(-0.04, 0.04)
            if source == "ours":
                (line,) = ax.plot(g["side"], g[score], color="black", lw=2.4, marker="*", ms=13, zorder=5)
                handles.setdefault(f"{model} (ours)", line)
                continue
            dashed = model in highlight
            (line,) = ax.plot(g["side"] + jitter, g[score], color=palette[group], lw=1.1 if not dashed else 1.6,
                              ls="--" if dashed else "-", marker="o", ms=4, alpha=0.85)
            handles.setdefault(f"{model} (decoder above encoder)" if dashed else group, line)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_xticks([0, 1], ["encoder stack", "decoder stack"])
        ax.set_xlim(-0.3, 1.3)
        ax.set_ylabel(f"{score} (median over the stack's layers)")
    order = [k for k in handles if k in groups] + [k for k in handles if k not in groups]
    fig.legend([handles[k] for k in order], order, loc="lower center", ncol=min(4, len(order)), fontsize=7.5)
    rows = -(-len(order) // min(4, len(order)))
    fig.tight_layout(rect=(0, 0.05 * rows + 0.02, 1, 1))
    return fig


def modality_planes(paper, ours=None, modalities: tuple[str, ...] = ("language", "vision", "audio")):
    """Chapter 4: median symmetry (x) against median directionality (y), one panel per modality, the authors'
    models as small dots coloured by stack and ours as large outlined markers (one shape per model, named in the
    legend).

    ``paper``: :func:`qkgeometry.catalogue.paper_models` (columns ``modality, stack, symmetry_median,
    directionality_median``). ``ours``: optional frame with ``model, modality, stack, symmetry_median,
    directionality_median``. Modalities beyond ``modalities`` that appear in either frame get panels too, and a
    modality with no model at all gets none; ``paper`` may be empty when ``ours`` is not. Returns the Figure."""
    if ours is None or not len(ours):
        require_rows(paper, "paper", "pass qkgeometry.catalogue.paper_models(), or models of ours in `ours`")
    present = set(paper["modality"]) | (set(ours["modality"]) if ours is not None else set())
    panels = [m for m in modalities if m in present] + sorted(present - set(modalities))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.9 * len(panels), 4.0), squeeze=False, sharex=True,
                             sharey=True)
    handles: dict[str, object] = {}
    names = list(dict.fromkeys(ours["model"])) if ours is not None else []
    marker = {m: MODEL_MARKERS[k % len(MODEL_MARKERS)] for k, m in enumerate(names)}
    for ax, modality in zip(axes[0], panels):
        sub = paper[paper["modality"] == modality]
        for stack, g in sub.groupby("stack", sort=False):
            pts = ax.scatter(g["symmetry_median"], g["directionality_median"], s=16, alpha=0.55, lw=0,
                             color=STACK_COLORS.get(stack, "#333333"))
            handles.setdefault(f"authors' {STACK_WORDS.get(stack, stack)} stacks", pts)
        n_ours = 0
        if ours is not None:
            for _, r in ours[ours["modality"] == modality].iterrows():
                pts = ax.scatter(r["symmetry_median"], r["directionality_median"], s=110, marker=marker[r["model"]],
                                 color=STACK_COLORS.get(r["stack"], "#333333"), edgecolor="black", lw=1.0, zorder=5)
                handles.setdefault(f"{r['model']} (ours)", pts)
                n_ours += 1
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.axvline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_title(f"{modality}: {len(sub)} of theirs, {n_ours} of ours")
        ax.set_xlabel("symmetry (median over layers)")
    axes[0][0].set_ylabel("directionality (median over layers)")
    order = [k for k in handles if k.startswith("authors")] + [k for k in handles if not k.startswith("authors")]
    ncol = min(4, len(order))
    fig.legend([handles[k] for k in order], order, loc="lower center", ncol=ncol, fontsize=7.5)
    rows = -(-len(order) // ncol)
    fig.tight_layout(rect=(0, 0.055 * rows + 0.03, 1, 1))
    return fig


def survey_figures(frame) -> dict:
    """Chapter 4 / ``qkgeometry plot``: every survey figure that ``frame`` supports, by file stem."""
    require_rows(frame, "frame", "pass the frame of qkgeometry.survey(...) with at least one model")
    from ..surveying import summarize

    figs = {"layer_curves": survey_layer_curves(frame)}
    summary = summarize(frame).merge(frame[["model", "init"]].drop_duplicates(), on="model", how="left") \
        if "init" in frame else summarize(frame)
    figs["scatter"] = survey_scatter(summary)
    if "init" in frame and (frame["init"] == "random").any():
        figs["random_twins"] = survey_twins(frame)
    if frame["head"].notna().any():
        figs["head_heatmaps_symmetry"] = survey_head_heatmaps(frame, "symmetry")
        figs["head_heatmaps_directionality"] = survey_head_heatmaps(frame, "directionality")
    return figs
