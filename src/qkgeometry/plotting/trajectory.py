"""The figure of a training trajectory (chapter 3 and ``qkgeometry plot --trajectory``): both scores of every layer
against training step, with the null band of the model's shapes and optional named events."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .style import NULL_COLOR, plt, require_rows

__all__ = ["trajectory_curves"]

_SCORES = {"symmetry": "symmetry score s", "directionality": "directionality score d"}


def _null_band(frame, score: str, n_samples: int) -> tuple[float, float] | None:
    """The 2.5–97.5% band of ``score`` for random Gaussian factors of the rows' shapes (d = d_model; rank the head
    dimension for per-head rows, all heads' for per-layer rows), or None when the rows mix shapes."""
    from ..analyses.nulls import directionality_null_quantiles, symmetry_null_quantiles

    shapes = frame[["d_model", "head_dim", "n_heads"]].drop_duplicates()
    if len(shapes) != 1:
        return None
    d, head_dim, heads = (int(v) for v in shapes.iloc[0])
    per_head = frame["head"].notna().any()
    r = min(d, head_dim if per_head else head_dim * heads)
    law = symmetry_null_quantiles if score == "symmetry" else directionality_null_quantiles
    q = law(d, r, q=(0.025, 0.975), n_samples=n_samples)
    return float(q.iloc[0]), float(q.iloc[1])


def trajectory_curves(frame, events: Mapping[str, int] | None = None, null_samples: int = 400):
    """Both scores against training step for one model's checkpoints: one line per layer (coloured from shallow,
    light, to deep, dark), the median over its heads with the interquartile band when the rows are per head; the
    grey band is the 2.5–97.5% range of random Gaussian factors of the model's shapes (``null_samples`` draws).
    The step axis is logarithmic (linear below the first positive step, so that step 0 shows). ``events``: name
    -> step, drawn as labelled vertical lines (e.g. ``{"induction heads": 1500}``).

    ``frame``: rows of :func:`qkgeometry.trajectory` (or a store read with
    :func:`qkgeometry.surveying.trajectories.with_steps`) with a ``step`` column, for one model and one stack.
    Returns the Figure."""
    require_rows(frame, "frame", "pass the rows of qkgeometry.trajectory for at least one checkpoint")
    if "step" not in frame or frame["step"].isna().all():
        raise ValueError("frame: has no `step` column with values; pass the rows of qkgeometry.trajectory (or a "
                         "store read through surveying.trajectories.with_steps).")
    rows = frame[frame["step"].notna()]
    components = list(dict.fromkeys(rows["component"]))
    if len(components) > 1:
        raise ValueError(f"frame: holds {len(components)} attention stacks ({', '.join(map(str, components))}); "
                         "draw one at a time (select rows by `component`).")
    steps = np.asarray(sorted(rows["step"].astype(int).unique()))
    positive = steps[steps > 0]
    layers = sorted(rows["layer"].unique())
    cmap = plt.get_cmap("viridis_r")
    shade = {layer: cmap(0.15 + 0.8 * i / max(len(layers) - 1, 1)) for i, layer in enumerate(layers)}
    per_head = rows["head"].notna().any()
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.4), sharex=True, layout="constrained")
    for ax, (score, label) in zip(axes, _SCORES.items()):
        band = _null_band(rows, score, null_samples)
        if band is not None:
            ax.axhspan(*band, color=NULL_COLOR, alpha=0.6, lw=0, label="random factors (95%)")
        for layer in layers:
            g = rows[rows["layer"] == layer].groupby("step")[score]
            mid = g.median()
            ax.plot(mid.index.astype(int), mid.to_numpy(), color=shade[layer], lw=1.6, marker="o", ms=2.5,
                    label=f"layer {layer}")
            if per_head:
                ax.fill_between(mid.index.astype(int), g.quantile(0.25).to_numpy(), g.quantile(0.75).to_numpy(),
                                color=shade[layer], alpha=0.15, lw=0)
        for name, step in (events or {}).items():
            ax.axvline(step, color="0.3", ls=":", lw=1)
            ax.annotate(str(name), (step, 1), xycoords=("data", "axes fraction"), rotation=90, va="top",
                        ha="right", fontsize=8, color="0.3")
        if len(positive):
            ax.set_xscale("symlog", linthresh=float(positive.min()), linscale=0.4)
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
    model = str(rows["run"].iloc[0] if "run" in rows and rows["run"].iloc[0] else rows["model"].iloc[0])
    fig.suptitle(f"{model}: {'median over heads (band: IQR)' if per_head else 'per layer'}, "
                 f"{len(steps)} checkpoints", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    if len(layers) > 8:  # keep the legend short: first, middle and last layer, and the null band
        keep = {f"layer {layers[0]}", f"layer {layers[len(layers) // 2]}", f"layer {layers[-1]}",
                "random factors (95%)"}
        pairs = [(h, lab) for h, lab in zip(handles, labels) if lab in keep]
        handles, labels = [p[0] for p in pairs], [p[1] for p in pairs]
    fig.legend(handles, labels, loc="outside right center", fontsize=8, frameon=False)
    return fig
