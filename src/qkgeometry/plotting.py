"""The book's figures, in one style.

Every chapter calls :func:`use_style` once so that fonts, colours and resolution agree across the book. Importing this
module changes no global state: the style is applied only when :func:`use_style` is called. Figures are
saved/rendered as SVG-crisp vector or 2x PNG.

Chapter-specific figure functions live below in sections marked by chapter; each takes tidy data and returns the
matplotlib Figure (never calls ``plt.show``), so notebooks stay one line per figure.
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.ticker import MaxNLocator

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


__all__ = ["DIVERGING", "FAMILY_COLORS", "MODEL_MARKERS", "STACK_COLORS", "plt", "stack_of", "use_style"]


# ---------------------------------------------------------------------------------- chapters 1-2 and intro
def matrix_triptych(M, title: str | None = None, labels: tuple[str, str, str] = ("$M$", "$M_s$", "$M_n$"),
                    max_dim: int | None = None):
    """Heatmaps of ``M`` (d, d), its symmetric part and its skew part on one shared, zero-centred colour scale.

    ``max_dim`` crops to the top-left ``max_dim × max_dim`` block (all three crops come from the full split).
    Chapter 1, "Two real heads".
    """
    import numpy as np

    from .decomposition import decompose

    Ms, Mn = decompose(M)
    mats = [np.asarray(Ms + Mn), np.asarray(Ms), np.asarray(Mn)]
    if max_dim is not None:
        mats = [m[:max_dim, :max_dim] for m in mats]
    vmax = float(np.quantile(np.abs(mats[0]), 0.995)) or 1.0
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.6), constrained_layout=True)
    for ax, mat, label in zip(axes, mats, labels):
        im = ax.imshow(mat, cmap=DIVERGING, vmin=-vmax, vmax=vmax, interpolation="nearest")
        ax.set_title(label)
        ax.set_xlabel("key-side dimension $j$")
        ax.grid(False)
    axes[0].set_ylabel("query-side dimension $i$")
    fig.colorbar(im, ax=axes, shrink=0.85, label="entry (clipped at the 99.5% quantile of $|M|$)")
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig


def score_plane(frame, null=None, title: str | None = None, label_col: str = "model"):
    """Scatter of symmetry (x) against directionality (y), one colour per family, one marker per ``label_col``.

    ``frame``: tidy scores (columns ``symmetry, directionality, family`` and ``label_col``); ``null``: optional
    frame with ``symmetry, directionality`` of random matrices, drawn as a grey cloud behind. Both axes run a little
    beyond [-1, 1] so that points at ±1 are drawn whole; the legend sits below the axes, never on a data point.
    Book: the introduction's headline figure and chapter 2, "Two axes, not one".
    """
    fig, ax = plt.subplots(figsize=(6.4, 5.4))
    if null is not None and len(null):
        ax.scatter(null["symmetry"], null["directionality"], s=10, color=FAMILY_COLORS["random"], alpha=0.5,
                   linewidths=0, label="random Gaussian $W_QW_K^\\top$ (same shapes)")
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    groups = list(frame.groupby(label_col, sort=False))
    palette = sns.color_palette("colorblind", len(groups))
    for k, (name, sub) in enumerate(groups):
        if "family" in sub:  # real models: one colour per family
            family = sub["family"].iloc[0]
            color, label = FAMILY_COLORS.get(family, "k"), f"{name} ({family})"
        else:  # constructed matrices: one colour per label
            color, label = palette[k], str(name)
        ax.scatter(sub["symmetry"], sub["directionality"], s=40, marker=markers[k % len(markers)],
                   color=color, edgecolor="white", linewidths=0.6, label=label, clip_on=False, zorder=3)
    ax.axhline(0, color="0.6", lw=0.8, zorder=0)
    ax.axvline(0, color="0.6", lw=0.8, zorder=0)
    ax.set_xlim(-1.1, 1.1)
    ax.set_ylim(-1.1, 1.1)
    ax.set_xlabel("symmetry score $s(M)$  (+1 symmetric, −1 skew)")
    ax.set_ylabel("directionality score $d(M)$\n(−: key columns dominate)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def null_spread(null, quantiles: tuple[float, float] = (0.05, 0.95)):
    """Null distributions of both scores against d, one colour per rank r: median and a quantile band.

    ``null``: frame from :func:`qkgeometry.baselines.null_grid` (columns ``d, r, symmetry, directionality``).
    Chapter 2, "How noisy is one layer?".
    """
    lo, hi = quantiles
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.8), constrained_layout=True)
    ranks = sorted(null["r"].unique())
    palette = sns.color_palette("viridis", len(ranks))
    for ax, score in zip(axes, ("symmetry", "directionality")):
        for color, (i, r) in zip(palette, enumerate(ranks)):
            sub = null[null["r"] == r].groupby("d")[score]
            q = sub.quantile([lo, 0.5, hi]).unstack()
            shift = 1 + 0.04 * (i - (len(ranks) - 1) / 2)  # small horizontal dodge so bands do not overlap
            x = q.index.to_numpy() * shift
            ax.errorbar(x, q[0.5], yerr=[q[0.5] - q[lo], q[hi] - q[0.5]], color=color, marker="o", ms=4,
                        capsize=3, lw=1.2, label=f"$r = {r}$")
        ax.set_xscale("log", base=2)
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_xlabel("input dimension $d$")
        ax.set_ylabel(f"{score} score")
        ax.set_title(f"{score}: median and {int(lo * 100)}–{int(hi * 100)}% band")
    axes[0].legend(title="rank $r$ ($=d_h$ for a head)", fontsize=8)
    return fig


def heads_vs_layers(heads, layers, score: str = "symmetry", null_band=None):
    """Per-head scores (dots) and the layer score (black diamond) for each layer, one panel per model.

    ``heads``/``layers``: tidy frames from :func:`qkgeometry.score_model` with ``per="head"``/``"layer"``.
    ``null_band``: optional ``{model: (low, high)}`` drawn as a grey band (random heads of that shape).
    Chapter 2, "Per head or per layer?".
    """
    models = list(dict.fromkeys(layers["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(5.3 * len(models), 3.6), squeeze=False,
                             constrained_layout=True)
    for ax, model in zip(axes[0], models):
        h = heads[heads["model"] == model]
        lay = layers[layers["model"] == model]
        family = lay["family"].iloc[0]
        if null_band and model in null_band:
            ax.axhspan(*null_band[model], color=FAMILY_COLORS["random"], alpha=0.2, lw=0, label="random head (90%)")
        ax.scatter(h["layer"], h[score], s=12, color=FAMILY_COLORS.get(family, "k"), alpha=0.55, lw=0,
                   label="one head")
        ax.scatter(lay["layer"], lay[score], s=40, marker="D", color="black", label="whole layer")
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_title(f"{model} ({family})")
        ax.set_xlabel("layer")
        ax.set_ylabel(f"{score} score")
    axes[0][0].legend(fontsize=8)
    return fig


# ------------------------------------------------------------------------------------------------- Chapter 3
#: Colours of the training objectives / mask kinds in chapter 3.
OBJECTIVE_COLORS = {"causal": FAMILY_COLORS["decoder"], "mlm": FAMILY_COLORS["encoder"], "rtd": "#2ca02c"}
#: How chapter 3 names the objectives on figures.
OBJECTIVE_LABELS = {"causal": "causal LM", "mlm": "masked LM", "rtd": "replaced-token detection"}


def one_step_distributions(frame, value: str = "symmetry", by: str = "setting"):
    """Distribution of one score of the single-step gradient, causal vs MLM, one panel per ``by`` value.

    ``frame``: tidy, one row per (setting, objective, sentence) with a column ``value``. Chapter 3, "The bias at
    one step".
    """
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
    import numpy as np

    from .stats import t_interval

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

    ``frame``: :func:`qkgeometry.zoo.paper_per_layer` with ``group="custom-models"``. Returns the Figure.
    """
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


# ------------------------------------------------------------------------------------------------- Chapter 4
def _survey_color(row_family: str, init: str) -> str:
    return FAMILY_COLORS["random"] if init == "random" else FAMILY_COLORS.get(row_family, "#333333")


#: One colour per attention stack (chapter 4): a component's stack is its family for ``self`` attention, else the
#: component itself (``encoder``, ``decoder``, ``cross``).
STACK_COLORS = {"encoder": FAMILY_COLORS["encoder"], "decoder": FAMILY_COLORS["decoder"],
                "decoder, not causal": "#ff7f0e", "cross": FAMILY_COLORS["encoder-decoder"],
                "encoder-decoder": FAMILY_COLORS["encoder-decoder"]}
#: Markers cycled over models, so that each model of a figure is told apart by shape as well as by colour.
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")


def stack_of(family: str, component: str) -> str:
    """The attention stack of a survey row: ``family`` for ``self`` attention (``encoder`` or ``decoder``), else
    ``component`` (``encoder``, ``decoder`` or ``cross`` of an encoder-decoder model). Chapter 4."""
    return family if component == "self" else component


def _curve_label(model: str, component: str) -> str:
    return model if component == "self" else f"{model} [{component}]"


def survey_layer_curves(frame, scores: tuple[str, ...] = ("symmetry", "directionality")):
    """Chapter 4: each score against relative depth (layer / (n_layers − 1)), one line per (model, component).

    Pretrained models are solid lines coloured by attention stack (:data:`STACK_COLORS`) with one marker shape per
    model; random-init twins are thin dashed grey lines, one legend entry for all of them. The legend sits below
    the panels. ``frame``: a survey frame (per layer, or per head, which is then averaged over heads). Returns the
    Figure."""
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
            handles.setdefault(_curve_label(model, comp), line)
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
    coloured by attention stack (random twins grey). ``summary``: :func:`qkgeometry.survey.summarize` of a survey
    frame with an ``init`` column merged in.

    ``labels="text"`` writes each point's name next to it; ``labels="legend"`` gives every pretrained (model,
    component) its own marker and a legend entry below the axes instead (no text on the plot, so nothing overlaps),
    and the twins one shared grey entry. Returns the Figure."""
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
        label = _curve_label(r["model"], r["component"])
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


_STACK_WORDS = {"decoder, not causal": "non-causal decoder"}


def modality_planes(paper, ours=None, modalities: tuple[str, ...] = ("language", "vision", "audio")):
    """Chapter 4: median symmetry (x) against median directionality (y), one panel per modality, the authors'
    models as small dots coloured by stack and ours as large outlined markers (one shape per model, named in the
    legend).

    ``paper``: :func:`qkgeometry.zoo.paper_models` (columns ``modality, stack, symmetry_median,
    directionality_median``). ``ours``: optional frame with ``model, modality, stack, symmetry_median,
    directionality_median``. Modalities beyond ``modalities`` that appear in either frame get panels too, and a
    modality with no model at all gets none. Returns the Figure."""
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
            handles.setdefault(f"authors' {_STACK_WORDS.get(stack, stack)} stacks", pts)
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


#: The figures ``qkgeometry plot`` writes: file stem -> function(frame) -> Figure.
def survey_figures(frame) -> dict:
    """Chapter 4 / ``qkgeometry plot``: every survey figure that ``frame`` supports, by file stem."""
    from .surveying import summarize

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


# ------------------------------------------------------------------------------------------------- Chapter 5
#: One colour per initialisation / attention variant (chapter 5).
INIT_COLORS = {"default": "#7f7f7f", "symmetric": "#1f77b4", "shared": "#2ca02c", "skew": "#d62728",
               "rotated": "#9467bd"}
#: Line styles per initialisation, so that overlapping curves stay distinguishable (chapter 5).
INIT_STYLES = {"default": "-", "symmetric": "--", "shared": ":", "skew": "-.", "rotated": (0, (3, 1, 1, 1, 1, 1))}


def init_curves(frame, y: str = "val_loss", col: str = "arch", hue: str = "init", ylabel: str | None = None,
                title: str | None = None, logx: bool = False, hline: float | None = None,
                hline_label: str | None = None):
    """Chapter 5: ``y`` against ``step``, one panel per value of ``col``, one colour per ``hue`` value; the line is
    the mean over seeds and the band the min–max over seeds. ``frame`` is the concatenation of run logs (columns
    ``step, seed, <y>, <col>, <hue>``). Returns the Figure."""
    cols = list(dict.fromkeys(frame[col]))
    fig, axes = plt.subplots(1, len(cols), figsize=(4.2 * len(cols), 3.3), squeeze=False, sharey=True)
    for ax, value in zip(axes[0], cols):
        sub = frame[frame[col] == value]
        for key, g in sub.groupby(hue, sort=False):
            agg = g.groupby("step")[y].agg(["mean", "min", "max"]).dropna()
            color = INIT_COLORS.get(key)
            n = g["seed"].nunique() if "seed" in g else 1
            ax.plot(agg.index, agg["mean"], color=color, ls=INIT_STYLES.get(key, "-"), lw=1.8,
                    label=f"{key} (n={n})")
            ax.fill_between(agg.index, agg["min"], agg["max"], color=color, alpha=0.2, lw=0)
        if hline is not None:
            ax.axhline(hline, color="0.4", ls="--", lw=0.9, label=hline_label)
        if logx:
            ax.set_xscale("symlog", linthresh=10)
        ax.set_title(f"{col} = {value}" if title is None else f"{title}: {value}")
        ax.set_xlabel("step")
    axes[0][0].set_ylabel(ylabel or y)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def survival_grid(frame, y: str = "symmetry_mean"):
    """Chapter 5, experiment A: symmetry score of ``W_qk`` (mean over layers) against step, one row per arch and one
    column per learning rate (``lr_max``), one colour per init. Returns the Figure."""
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
            ax.set_title(f"{arch}, lr = {lr:g}")
            if i == len(archs) - 1:
                ax.set_xlabel("step")
        axes[i][0].set_ylabel("symmetry score")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def paired_difference_curve(curve, ylabel: str = "validation loss, symmetric − default (nats)",
                            title: str | None = None):
    """Chapter 5: the paired difference ``treatment − baseline`` against step, one panel per arch, with its
    Student-t band over seeds. ``curve`` is :func:`qkgeometry.training.metrics.paired_curve`'s frame (columns
    ``arch, step, n, diff_mean, ci_low, ci_high``). The zero line is drawn: where the band leaves it, the
    difference is resolved at that step. Returns the Figure."""
    archs = list(dict.fromkeys(curve["arch"]))
    fig, axes = plt.subplots(1, len(archs), figsize=(5.6 * len(archs), 3.3), squeeze=False)
    for ax, arch in zip(axes[0], archs):
        sub = curve[curve["arch"] == arch].sort_values("step")
        n = int(sub["n"].max())
        ax.plot(sub["step"], sub["diff_mean"], color=INIT_COLORS["symmetric"], lw=1.8, label=f"mean (n={n} seeds)")
        ax.fill_between(sub["step"], sub["ci_low"], sub["ci_high"], color=INIT_COLORS["symmetric"], alpha=0.2,
                        lw=0, label="95% t-interval over seeds")
        ax.axhline(0, color="0.3", lw=0.9)
        ax.set_title(arch if title is None else f"{title}: {arch}")
        ax.set_xlabel("step")
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def trajectories_vs_paper(ours, theirs, y: str = "symmetry"):
    """Chapter 5: two panels on the same axes, our recorded runs (left) and the paper's own training runs (right):
    ``y`` (the median over layers) against the fraction of training done.

    ``ours`` has columns ``fraction, init, seed, <y>``: one line per init, the mean over seeds with the min–max
    band. ``theirs`` has columns ``fraction, arch, model, <y>``: one thin line per run, coloured by arch (encoder
    or decoder). Returns the Figure."""
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
    arch_colors = {"encoder": "#1f77b4", "decoder": "#ff7f0e"}
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
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
