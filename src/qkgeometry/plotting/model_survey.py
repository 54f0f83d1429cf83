"""Figures of chapter 4, "A survey of real models" (and of ``qkgeometry plot``): scores against depth, per-head
heatmaps, the median plane with IQR bars, random-init twins, paired encoder/decoder stacks and the modality planes.

Rows are coloured by attention stack (:func:`stack_of`, :data:`~qkgeometry.plotting.style.STACK_COLORS`), random
twins in grey, one marker shape per model.

A survey can hold thousands of models, and a model's name is whatever its folder was called, so every figure stays
bounded: names are shown as plain text (a ``$`` is never read as mathematics) and cut to :data:`MAX_LABEL_CHARS`
characters, a legend lists at most :data:`MAX_LEGEND_ENTRIES` entries (then one "and N more" entry), the scatter
writes names next to at most :data:`MAX_TEXT_LABELS` points, and the per-model panels (heatmaps, twins) show the
first :data:`MAX_PANELS` models and say so.
"""

from __future__ import annotations

import math

import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from .style import (
    DIVERGING,
    FAMILY_COLORS,
    MODEL_MARKERS,
    STACK_COLORS,
    STACK_WORDS,
    STACKED_WIDTH,
    plt,
    require_rows,
    stacked_figure,
    stacked_legend,
)

__all__ = ["MAX_LABEL_CHARS", "MAX_LEGEND_ENTRIES", "MAX_PANELS", "MAX_TEXT_LABELS", "check_results_file", "check_scores",
           "curve_label",
           "head_pair_terms", "label_text", "modality_planes", "paired_stacks", "raw_vs_folded", "stack_of",
           "survey_figures", "survey_head_heatmaps", "survey_layer_curves", "survey_scatter", "survey_twins"]

#: characters of a model name shown in a figure (longer names end in "…")
MAX_LABEL_CHARS = 48
#: entries of one legend; the rest are summed up in one "and N more" entry
MAX_LEGEND_ENTRIES = 24
#: points of the survey scatter that get their name written next to them
MAX_TEXT_LABELS = 40
#: per-model panels (head heatmaps) or categories (random twins) of one figure
MAX_PANELS = 32


def label_text(text) -> str:
    """``text`` as a figure label: one line, at most :data:`MAX_LABEL_CHARS` characters (cut with "…"), and every
    ``$`` escaped so that matplotlib shows it instead of parsing mathematics (a name such as ``$\\frac{$`` would
    otherwise stop the whole figure). Applying it twice gives the same label."""
    text = " ".join(str(text).replace(r"\$", "$").split())
    if len(text) > MAX_LABEL_CHARS:
        text = text[:MAX_LABEL_CHARS - 1] + "…"
    return text.replace("$", r"\$")


def _bounded_legend(handles: dict, order: list[str]) -> tuple[list, list[str]]:
    """The (handles, labels) of a legend of at most :data:`MAX_LEGEND_ENTRIES` entries: the first ones of
    ``order``, then one blank-marker entry that counts the rest."""
    if len(order) <= MAX_LEGEND_ENTRIES:
        return [handles[k] for k in order], [label_text(k) for k in order]
    shown = order[:MAX_LEGEND_ENTRIES - 1]
    more = Line2D([], [], linestyle="none", marker="none")
    return ([handles[k] for k in shown] + [more],
            [label_text(k) for k in shown] + [f"… and {len(order) - len(shown)} more"])


def check_scores(frame, name: str = "frame") -> None:
    """Refuse a frame whose ``symmetry`` or ``directionality`` is missing, not finite or outside [−1, 1] (both
    scores lie in that range by definition), with one line naming ``name``, the column and the first bad row."""
    import numpy as np
    import pandas as pd

    for column in ("symmetry", "directionality"):
        if column not in frame:
            raise ValueError(f"{name} has no {column!r} column; pass a survey frame (qkgeometry.survey or "
                             "qkgeometry.surveying.read_store).")
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values) | (np.abs(values) > 1 + 1e-9)
        if bad.any():
            i = int(np.argmax(bad))
            model = frame["model"].iloc[i] if "model" in frame else "?"
            raise ValueError(f"{name}: {column} = {frame[column].iloc[i]!r} for model {label_text(model)!r} (and "
                             f"{int(bad.sum()) - 1} more rows) is not a score in [-1, 1]; the file was edited or "
                             "damaged: rerun the survey for that model.")


def check_results_file(path) -> None:
    """Refuse a results file (a survey store or CSV, what ``qkgeometry plot`` draws) with a score cell that is not a
    number in [−1, 1] (``inf``, ``nan``, ``1e300``, text), naming the file: a figure would otherwise drop the row or
    draw it off the axes without a word. A CSV is checked as written, before :func:`~qkgeometry.surveying.read_store`
    repairs it; a store holds numbers only, each checked when it was written (or missing: a training step whose
    weights were not finite)."""
    import io
    from pathlib import Path

    import pandas as pd

    from ..surveying.store import is_store_file, read_store

    path = Path(path)
    if is_store_file(path):
        scores = read_store(path)[["model", "symmetry", "directionality"]]
        check_scores(scores.dropna(subset=["symmetry", "directionality"]), f"results file {str(path)!r}")
        return
    text = path.read_bytes().decode("utf-8")
    text = text[: text.rfind("\n") + 1]  # a partial last line is the survey's to repair, not a score
    raw = pd.read_csv(io.StringIO(text), usecols=["model", "symmetry", "directionality"], dtype=str,
                      keep_default_na=False)
    raw = raw[(raw["symmetry"].str.strip() != "") & (raw["directionality"].str.strip() != "")]
    check_scores(raw.reset_index(drop=True), f"results file {str(path)!r}")

def stack_of(family: str, component: str) -> str:
    """The attention stack of a survey row: ``family`` for ``self`` attention (``encoder`` or ``decoder``), else
    ``component`` (``encoder``, ``decoder`` or ``cross`` of an encoder-decoder model). Chapter 4."""
    return family if component == "self" else component


def curve_label(model: str, component: str) -> str:
    """How a figure names one (model, component): ``model`` for ``self`` attention, else ``model [component]``."""
    return label_text(model) if component == "self" else f"{label_text(model)} [{component}]"


def _one_view_only(frame, name: str = "frame") -> None:
    """Refuse a frame that mixes what one figure cannot show together: per-layer with per-head rows, or raw with
    folded gains, of one model (the figure would average them). ``ValueError`` names how to select one."""
    from ..surveying.identity import one_view

    one_view(frame, f"`{name}`", cli=False)
    if "head" in frame.columns and "per" not in frame.columns and "model" in frame.columns:
        heads = frame["head"].isna().groupby(frame["model"], sort=False).nunique()
        if (heads > 1).any():
            raise ValueError(f"`{name}` holds per-layer and per-head rows of {heads[heads > 1].index[0]!r}, which one "
                             f"figure cannot show together; pass {name}[{name}['head'].isna()] or "
                             f"{name}[{name}['head'].notna()].")


def survey_layer_curves(frame, scores: tuple[str, ...] = ("symmetry", "directionality")):
    """Chapter 4: each score against relative depth (layer / (n_layers − 1)), one line per (model, component).

    Pretrained models are solid lines coloured by attention stack (:data:`STACK_COLORS`) with one marker shape per
    model; random-init twins are thin dashed grey lines, one legend entry for all of them. The panels are stacked (one
    score above the other, so that a phone shows them at a readable size) and the legend sits below them. ``frame``: a survey frame (per layer, or per head, which is then averaged over heads). Returns the
    Figure."""
    require_rows(frame, "frame", "pass the frame of qkgeometry.survey(...) with at least one model")
    _one_view_only(frame)
    keys = ["model", "family", "init", "component"]
    if frame[keys].isna().any(axis=1).all():  # nothing to draw, and a legend of 0 columns would fail in matplotlib
        raise ValueError(f"frame has no row with all of {', '.join(keys)} set; pass the frame of "
                         "qkgeometry.survey(...) with at least one scored model.")
    layers = frame.groupby(["model", "family", "init", "component", "layer"], sort=False, dropna=False)[
        list(scores)].mean().reset_index()
    fig, axes = stacked_figure(len(scores), 2.7, extra=0.3, sharex=True)
    pretrained = list(dict.fromkeys(layers.loc[layers["init"] != "random", "model"]))
    marker = {m: MODEL_MARKERS[k % len(MODEL_MARKERS)] for k, m in enumerate(pretrained)}
    handles: dict[str, object] = {}
    for ax, score in zip(axes[:, 0], scores):
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
        ax.set_ylabel(score)
        ax.set_ylim(-1, 1)
    axes[-1][0].set_xlabel("relative depth (layer / last layer)")
    order = [k for k in handles if not k.startswith("random")] + [k for k in handles if k.startswith("random")]
    if any(k.startswith("random") for k in order) and len(order) > MAX_LEGEND_ENTRIES:  # keep the twins' entry
        order = order[:MAX_LEGEND_ENTRIES - 2] + order[-1:] + order[MAX_LEGEND_ENTRIES - 2:-1]
    stacked_legend(fig, *_bounded_legend(handles, order))
    return fig


def survey_head_heatmaps(frame, score: str = "symmetry"):
    """Chapter 4: one layer × head heatmap of ``score`` per (model, component) of a per-head survey frame (random
    twins left out), on a shared colour scale centred at 0, in a near-square grid (at most four panels a row).
    Returns the Figure."""
    require_rows(frame, "frame", "pass the frame of qkgeometry.survey(..., per='head')")
    _one_view_only(frame[frame["head"].notna()] if "head" in frame.columns else frame)
    heads = frame[frame["head"].notna() & (frame.get("init", "pretrained") != "random")]
    groups = list(heads.groupby(["model", "component"], sort=False))
    if not groups:
        raise ValueError("`frame` has no per-head rows; run the survey with per='head'.")
    total, groups = len(groups), groups[:MAX_PANELS]
    # a near-square grid, at most four panels a row: four panels make 2 × 2, which stays readable on a phone
    ncols = min(4, math.ceil(math.sqrt(len(groups))))
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
        ax.set_title(curve_label(model, comp), fontsize=9)
        ax.set_xlabel("head")
        ax.grid(False)
        for axis in (ax.xaxis, ax.yaxis):  # imshow's default locator puts ticks at half-integers
            axis.set_major_locator(MaxNLocator(integer=True))
    for row in range(nrows):
        axes[row * ncols].set_ylabel("layer")
    fig.colorbar(im, ax=list(axes), shrink=0.8, label=score)
    if total > len(groups):
        fig.suptitle(f"the first {len(groups)} of {total} models", fontsize=10)
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
    if labels == "legend":  # sized for a phone, its legend below (stacked_legend)
        fig, axes = stacked_figure(1, 4.0)
        ax = axes[0, 0]
    else:
        fig, ax = plt.subplots(figsize=(STACKED_WIDTH, 4.0))
    init = summary["init"] if "init" in summary else ["pretrained"] * len(summary)
    names = [m for m, i in zip(summary["model"], init) if i != "random"]
    base = {m: k for k, m in enumerate(dict.fromkeys(names))}
    handles: dict[str, object] = {}
    named = labels == "text" and len(summary) <= MAX_TEXT_LABELS
    styles, order = {}, []  # one errorbar call per look (colour, marker, twin or not): fast for thousands of rows
    for k, ((_, r), kind) in enumerate(zip(summary.iterrows(), init)):
        random = kind == "random"
        color = FAMILY_COLORS["random"] if random else STACK_COLORS.get(stack_of(r["family"], r["component"]),
                                                                          "#333333")
        twin_of = str(r["model"]).replace(" (random init)", "")
        marker = MODEL_MARKERS[base.get(twin_of, 0) % len(MODEL_MARKERS)] if labels == "legend" else "o"
        styles.setdefault((color, marker, random), []).append(k)
        order.append((k, (color, marker, random), random, curve_label(r["model"], r["component"])))
    lines = {}
    for (color, marker, random), rows in styles.items():
        sub = summary.iloc[rows]
        x, y = sub["symmetry_median"].to_numpy(float), sub["directionality_median"].to_numpy(float)
        container = ax.errorbar(
            x, y, xerr=[x - sub["symmetry_q25"].to_numpy(float), sub["symmetry_q75"].to_numpy(float) - x],
            yerr=[y - sub["directionality_q25"].to_numpy(float), sub["directionality_q75"].to_numpy(float) - y],
            fmt=marker, color=color, ms=6 if not random else 5, capsize=2, lw=1, alpha=0.7 if random else 1,
            mec="white" if labels == "legend" else None)
        lines[(color, marker, random)] = container.lines[0]
    for k, style, random, label in order:
        if named:
            ax.annotate(label, (summary["symmetry_median"].iloc[k], summary["directionality_median"].iloc[k]),
                        fontsize=7, xytext=(4, 4), textcoords="offset points")
        elif labels == "legend":
            handles.setdefault("random-init twins (grey)" if random else label,
                               lines[style])
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
        ax.legend(fontsize=9, loc="upper left")  # a fixed corner: loc="best" scans every point
        if not named:
            ax.set_title(f"{len(summary)} points: too many to name each (at most {MAX_TEXT_LABELS})", fontsize=8)
        fig.tight_layout()
    else:
        order = [k for k in handles if not k.startswith("random")] + [k for k in handles if k.startswith("random")]
        stacked_legend(fig, *_bounded_legend(handles, order))
    return fig


def survey_twins(frame, score: str = "symmetry"):
    """Chapter 4: the layer scores of each pretrained model next to those of its random-init twin (strip + box).
    ``frame``: a survey frame with ``init`` in {pretrained, random}; twins are matched by the name suffix
    " (random init)". Returns the Figure."""
    require_rows(frame, "frame", "pass the frame of qkgeometry.survey(...) with pretrained models and their random:<source> twins")
    _one_view_only(frame)
    layers = frame.groupby(["model", "family", "init", "component", "layer"], sort=False)[score].mean().reset_index()
    layers["base"] = layers["model"].str.replace(" (random init)", "", regex=False)
    bases = list(dict.fromkeys(layers["base"]))
    if len(bases) > MAX_PANELS:
        layers = layers[layers["base"].isin(set(bases[:MAX_PANELS]))]
    layers["base"] = layers["base"].map(label_text)
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * layers["base"].nunique(), 3.6))
    palette = {"pretrained": "#1f77b4", "random": FAMILY_COLORS["random"]}
    sns.boxplot(data=layers, x="base", y=score, hue="init", palette=palette, ax=ax, showfliers=False, width=0.6)
    sns.stripplot(data=layers, x="base", y=score, hue="init", palette=palette, dodge=True, ax=ax, size=3,
                  legend=False, edgecolor="k", linewidth=0.3)
    ax.axhline(0, color="0.6", lw=0.8, zorder=0)
    ax.set_xlabel(f"the first {MAX_PANELS} of {len(bases)} models" if len(bases) > MAX_PANELS else "")
    ax.set_ylabel(f"{score} (one point per layer)")
    fig.tight_layout()
    return fig


def paired_stacks(pairs, scores: tuple[str, ...] = ("symmetry", "directionality"), highlight=()):
    """Chapter 4: the encoder stack and the decoder stack of each encoder-decoder model, joined by a line (a slope
    chart), one panel per score.

    ``pairs``: one row per (model, stack) with columns ``model``, ``group`` (the colour: e.g. "T5", "Whisper"),
    ``stack`` (``encoder`` or a decoder stack), ``source`` (``authors`` or ``ours``) and the ``scores``. The
    authors' pairs are thin coloured lines (one colour per group); ours are thick black lines with star markers.
    Models in ``highlight`` are drawn dashed and named in the legend. The panels are stacked (readable on a phone),
    the legend below them. Returns the Figure."""
    require_rows(pairs, "pairs", "pass one row per (model, stack) of at least one encoder-decoder model")
    import numpy as np

    pairs = pairs.copy()
    pairs["side"] = np.where(pairs["stack"] == "encoder", 0, 1)
    groups = list(dict.fromkeys(pairs.loc[pairs["source"] != "ours", "group"]))
    palette = dict(zip(groups, sns.color_palette("colorblind", len(groups))))
    fig, axes = stacked_figure(len(scores), 3.2, extra=0.3, sharex=True)
    handles: dict[str, object] = {}
    rng = np.random.default_rng(0)
    for ax, score in zip(axes[:, 0], scores):
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
            handles.setdefault(f"{label_text(str(model).split('/')[-1])} (decoder above encoder)" if dashed else group,
                               line)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_xticks([0, 1], ["encoder stack", "decoder stack"])
        ax.set_xlim(-0.3, 1.3)
        ax.set_ylabel(f"{score}\n(median over the stack's layers)")
    order = [k for k in handles if k in groups] + [k for k in handles if k not in groups]
    stacked_legend(fig, *_bounded_legend(handles, order))
    return fig


def modality_planes(paper, ours=None, modalities: tuple[str, ...] = ("language", "vision", "audio")):
    """Chapter 4: median symmetry (x) against median directionality (y), one panel per modality, the authors'
    models as small dots coloured by stack and ours as large outlined markers (one shape per model, named in the
    legend).

    ``paper``: :func:`qkgeometry.catalogue.paper_models` (columns ``modality, stack, symmetry_median,
    directionality_median``). ``ours``: optional frame with ``model, modality, stack, symmetry_median,
    directionality_median``. Modalities beyond ``modalities`` that appear in either frame get panels too, and a
    modality with no model at all gets none; ``paper`` may be empty when ``ours`` is not. The panels are stacked
    (readable on a phone), with the legend below them. Returns the Figure."""
    if ours is None or not len(ours):
        require_rows(paper, "paper", "pass qkgeometry.catalogue.paper_models(), or models of ours in `ours`")
    present = set(paper["modality"]) | (set(ours["modality"]) if ours is not None else set())
    panels = [m for m in modalities if m in present] + sorted(present - set(modalities))
    fig, axes = stacked_figure(len(panels), 2.6, extra=0.3, sharex=True, sharey=True)
    handles: dict[str, object] = {}
    names = list(dict.fromkeys(ours["model"])) if ours is not None else []
    marker = {m: MODEL_MARKERS[k % len(MODEL_MARKERS)] for k, m in enumerate(names)}
    for ax, modality in zip(axes[:, 0], panels):
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
        ax.set_ylabel("directionality\n(median over layers)")
    axes[-1][0].set_xlabel("symmetry (median over layers)")
    order = [k for k in handles if k.startswith("authors")] + [k for k in handles if not k.startswith("authors")]
    stacked_legend(fig, *_bounded_legend(handles, order))
    return fig


def raw_vs_folded(forms, score: str = "symmetry"):
    """Chapter 4, "Which bilinear form": each layer's ``score`` in the raw form (x) against the form with the
    normalisation gains folded in (y), one marker per model, coloured by attention stack, with the diagonal.

    ``forms``: :func:`qkgeometry.surveying.input_norm_comparison` (columns ``model, family, component,
    <score>_raw, <score>_folded``). The legend sits below the axes. Returns the Figure."""
    require_rows(forms, "forms", "pass qkgeometry.surveying.input_norm_comparison(...) of at least one model")
    import numpy as np

    x_col, y_col = f"{score}_raw", f"{score}_folded"
    fig, ax = plt.subplots(figsize=(5.6, 6.0))
    models = list(dict.fromkeys(forms["model"]))
    handles: dict[str, object] = {}
    for (model, family, component), part in forms.groupby(["model", "family", "component"], sort=False):
        pts = ax.scatter(part[x_col], part[y_col], s=22, alpha=0.85, lw=0.4, edgecolor="white",
                         marker=MODEL_MARKERS[models.index(model) % len(MODEL_MARKERS)],
                         color=STACK_COLORS.get(stack_of(family, component), "#333333"))
        handles.setdefault(curve_label(model, component), pts)
    values = forms[[x_col, y_col]].to_numpy(dtype=float)
    lims = [float(np.nanmin(values)) - 0.05, float(np.nanmax(values)) + 0.05]
    ax.plot(lims, lims, color="0.4", lw=0.8, ls="--", zorder=0)
    ax.set(xlim=lims, ylim=lims, xlabel=f"{score} of $W_{{qk}}$ (raw form)",
           ylabel=rf"{score} of $\mathrm{{diag}}(\gamma_q)\,W_{{qk}}\,\mathrm{{diag}}(\gamma_k)$ (folded)")
    shown, labels = _bounded_legend(handles, list(handles))
    ax.legend(shown, labels, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=9)
    fig.tight_layout()
    return fig


def head_pair_terms(terms, label: str = r"$\mathrm{tr}(M_h M_{h'})\,/\,\mathrm{tr}(M_\mathrm{layer} M_\mathrm{layer})$"):
    """Chapter 4, "What a layer score measures": the (head, head') terms of one layer's symmetry numerator as a
    heatmap on a colour scale centred at 0 (the diagonal holds the heads' own terms). ``terms``: a square array or
    frame, each term already divided by the layer's total. Returns the Figure."""
    import numpy as np

    grid = np.asarray(terms, dtype=float)
    if grid.size == 0:
        raise ValueError("terms has no rows: pass the (n_heads, n_heads) pair terms of one layer.")
    if grid.ndim != 2 or grid.shape[0] != grid.shape[1]:
        raise ValueError(f"terms: expected a square (n_heads, n_heads) array, got shape {grid.shape}.")
    n = grid.shape[0]
    fig, ax = plt.subplots(figsize=(4.8, 4.0))
    lim = float(np.nanmax(np.abs(grid))) or 1.0
    im = ax.imshow(grid, cmap=DIVERGING, vmin=-lim, vmax=lim, interpolation="nearest")
    ax.grid(False)
    ticks = range(0, n, max(1, -(-n // 12)))
    ax.set(xlabel="head $h'$", ylabel="head $h$", xticks=list(ticks), yticks=list(ticks))
    fig.colorbar(im, ax=ax, label=label)
    fig.tight_layout()
    return fig


def survey_figures(frame) -> dict:
    """Chapter 4 / ``qkgeometry plot``: every survey figure that ``frame`` supports, by file stem.

    The figures show one level and one form: a frame that mixes per-layer with per-head rows, or raw with folded
    gains, is refused (select one first); models of different sources that share a name are told apart
    (:func:`qkgeometry.surveying.identity.distinct_labels`)."""
    require_rows(frame, "frame", "pass the frame of qkgeometry.survey(...) with at least one model")
    check_scores(frame)
    from ..surveying.identity import distinct_labels, one_view
    from ..surveying.scoring import summarize

    frame = distinct_labels(one_view(frame, "`frame`", cli=False))

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
