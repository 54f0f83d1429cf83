"""Figures of chapters 1 and 2, "The Toeplitz decomposition" and "Two scores, two axes" (and the introduction): a
matrix and its two parts, the score plane, the null spread of both scores, and per-head against per-layer scores.
"""

from __future__ import annotations

import seaborn as sns

from .style import DIVERGING, FAMILY_COLORS, plt, require_rows

__all__ = ["attention_parts", "heads_vs_layers", "matrix_triptych", "model_name", "null_spread", "score_plane"]


def matrix_triptych(M, title: str | None = None, labels: tuple[str, str, str] = ("$M$", "$M_s$", "$M_n$"),
                    max_dim: int | None = None):
    """Heatmaps of ``M`` (d, d), its symmetric part and its skew part on one shared, zero-centred colour scale.

    ``max_dim`` crops to the top-left ``max_dim × max_dim`` block (all three crops come from the full split).
    Chapter 1, "Two real heads".
    """
    import numpy as np

    from ..decomposition import decompose

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
    require_rows(frame, "frame", "pass the tidy scores of at least one model (qkgeometry.score_model)")
    # narrow, one legend column, 10-point legend: on a 390-px phone the figure shrinks little and its text stays
    # readable (about 9 px), where a wide two-column version fell to 5 px
    fig, ax = plt.subplots(figsize=(5.0, 5.0))
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
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, fontsize=10)
    if title:
        ax.set_title(title, fontsize=11, wrap=True)
    fig.tight_layout()
    return fig


def null_spread(null, quantiles: tuple[float, float] = (0.05, 0.95)):
    """Null distributions of both scores against d, one colour per rank r: median and a quantile band.

    ``null``: frame from :func:`qkgeometry.analyses.baselines.null_grid` (columns ``d, r, symmetry, directionality``).
    Chapter 2, "How noisy is one layer?".
    """
    require_rows(null, "null", "pass qkgeometry.analyses.baselines.null_grid(...) with at least one d and rank")
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
    axes[0].legend(title="rank $r$ ($=d_h$ for a head)", fontsize=9)
    return fig


def model_name(source: str) -> str:
    """The name a reader knows a model by, wherever it was read from: ``offline:minilm-l6`` (the offline package)
    and ``sentence-transformers/all-MiniLM-L6-v2`` (its Hub id) are both ``all-MiniLM-L6-v2``; a local folder is
    its last part.

    >>> model_name("offline:minilm-l6"), model_name("sentence-transformers/all-MiniLM-L6-v2"), model_name("m")
    ('all-MiniLM-L6-v2', 'all-MiniLM-L6-v2', 'm')
    """
    from ..catalogue import OFFLINE_MODELS
    from ..source_names import OFFLINE_PREFIX

    source = str(source)
    alias = source.removeprefix(OFFLINE_PREFIX)
    if source.startswith(OFFLINE_PREFIX) and alias in OFFLINE_MODELS:
        source = OFFLINE_MODELS[alias].hub_id
    return source.rstrip("/").rsplit("/", 1)[-1]


def heads_vs_layers(heads, layers, score: str = "symmetry", null_band=None, null_label: str = "random head (90%)"):
    """Per-head scores (dots) and the layer score (black diamond) for each layer, one panel per model.

    ``heads``/``layers``: tidy frames from :func:`qkgeometry.score_model` with ``per="head"``/``"layer"``.
    ``null_band``: optional ``{model: (low, high)}`` drawn as a grey band (random heads of that shape), labelled
    ``null_label`` in the legend.
    Chapter 2, "Per head or per layer?".
    """
    require_rows(heads, "heads", "pass qkgeometry.score_model(source, per='head')")
    require_rows(layers, "layers", "pass qkgeometry.score_model(source, per='layer')")
    models = list(dict.fromkeys(layers["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(5.3 * len(models), 3.6), squeeze=False,
                             constrained_layout=True)
    for ax, model in zip(axes[0], models):
        h = heads[heads["model"] == model]
        lay = layers[layers["model"] == model]
        family = lay["family"].iloc[0]
        if null_band and model in null_band:
            ax.axhspan(*null_band[model], color=FAMILY_COLORS["random"], alpha=0.2, lw=0, label=null_label)
        ax.scatter(h["layer"], h[score], s=12, color=FAMILY_COLORS.get(family, "k"), alpha=0.55, lw=0,
                   label="one head")
        ax.scatter(lay["layer"], lay[score], s=40, marker="D", color="black", label="whole layer")
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_title(f"{model_name(model)} ({family})")
        ax.set_xlabel("layer")
        ax.set_ylabel(f"{score} score")
    axes[0][0].legend(fontsize=9)
    return fig


def attention_parts(pattern, logits, tokens, title: str | None = None):
    """A head on one sentence, in four panels (two by two, so that each stays readable on a phone): the attention
    pattern the model computes (``pattern``, queries as rows), the bilinear-form logits ``logits`` = X M Xᵀ / √d_h
    (``(n, n)``), and their symmetric and skew parts on one zero-centred colour scale; ``tokens`` label the axes.
    Chapter 1, "The two parts on a sentence".
    """
    import numpy as np

    from ..decomposition import decompose

    logits = np.asarray(logits, dtype=float)
    require_rows(logits, "logits", "pass the (n, n) logits of a sentence of at least one token")
    if logits.shape != (len(tokens), len(tokens)) or np.shape(pattern) != logits.shape:
        raise ValueError(f"logits: expected ({len(tokens)}, {len(tokens)}) for {len(tokens)} tokens, like the pattern; "
                         f"got {logits.shape} and {np.shape(pattern)}.")
    Ls, Ln = decompose(logits)
    vmax = float(np.abs(logits).max()) or 1.0
    n = len(tokens)
    fig, axes = plt.subplots(2, 2, figsize=(8.4, 8.4), constrained_layout=True)
    panels = [(np.asarray(pattern), "attention weights (as the model computes them)", "Greys", 0.0, None),
              (logits, "logits $x_i^\\top M x_j/\\sqrt{d_h}$", DIVERGING, -vmax, vmax),
              (np.asarray(Ls), "symmetric part (a mirror image)", DIVERGING, -vmax, vmax),
              (np.asarray(Ln), "skew part (opposite signs)", DIVERGING, -vmax, vmax)]
    for ax, (mat, label, cmap, lo, hi) in zip(axes.flat, panels):
        im = ax.imshow(mat, cmap=cmap, vmin=lo, vmax=hi if hi is not None else float(mat.max()),
                       interpolation="nearest")
        ax.set_title(label, fontsize=10)
        ax.set_xticks(range(n), tokens, rotation=90, fontsize=9)
        ax.set_yticks(range(n), tokens, fontsize=9)
        ax.grid(False)
        fig.colorbar(im, ax=ax, shrink=0.8)
    for ax in axes[1]:
        ax.set_xlabel("key token $j$")
    for ax in axes[:, 0]:
        ax.set_ylabel("query token $i$")
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig
