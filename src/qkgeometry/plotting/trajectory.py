"""The figure of training trajectories (chapter 3 and ``qkgeometry plot --trajectory``): both scores of every layer
against training step, one row of panels per run, with the null band of the model's shapes and optional events."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .style import NULL_COLOR, plt, require_rows

__all__ = ["trajectory_curves"]

_SCORES = {"symmetry": "symmetry s", "directionality": "directionality d"}
_NULL_LABEL = "random factors (95%)"


def _null_band(rows, score: str, n_samples: int) -> tuple[float, float] | None:
    """The 2.5–97.5% band of ``score`` for random Gaussian factors of the rows' shapes (d = d_model; rank the head
    dimension for per-head rows, all heads' for per-layer rows), or None when the rows lack or mix shapes."""
    from ..analyses.nulls import directionality_null_quantiles, symmetry_null_quantiles

    columns = ["d_model", "head_dim", "n_heads"]
    if not set(columns) <= set(rows.columns):
        return None
    shapes = rows[columns].drop_duplicates()
    if len(shapes) != 1 or shapes.isna().any(axis=None):
        return None
    d, head_dim, heads = (int(v) for v in shapes.iloc[0])
    per_head = "head" in rows and rows["head"].notna().any()
    r = min(d, head_dim if per_head else head_dim * heads)
    law = symmetry_null_quantiles if score == "symmetry" else directionality_null_quantiles
    q = law(d, r, q=(0.025, 0.975), n_samples=n_samples)
    return float(q.iloc[0]), float(q.iloc[1])


def _run_label(rows, band: str | None) -> str:
    run = rows["run"].iloc[0] if "run" in rows and str(rows["run"].iloc[0]) else rows["model"].iloc[0]
    n_steps = rows["step"].nunique()
    if band is None:
        return f"{run}: {n_steps} checkpoints"
    n = rows[band].nunique()
    unit = str(rows["band_unit"].iloc[0]) if "band_unit" in rows else band
    return f"{run}: median over {n} {unit}s (band: IQR), {n_steps} checkpoints"


def trajectory_curves(frame, events: Mapping[str, int] | None = None, band: str | None = "head",
                      null_samples: int = 400):
    """Both scores against training step: one row of panels per run (the ``run`` column, else ``model``), one line
    per layer (light: shallow, dark: deep). ``band``: the column whose units spread around each line ("head" for
    per-head rows; "seed" for several seeds of one configuration; None: one value per layer and step): the line is
    the median over them and the shaded band the interquartile range (a ``band_unit`` column, if any, names those
    units in the row's title). The grey band is the 2.5–97.5% range of
    random Gaussian factors of the model's shapes (``null_samples`` draws; drawn when the rows carry ``d_model``,
    ``head_dim`` and ``n_heads``). The step axis is logarithmic, linear below the first positive step, so that step
    0 shows. ``events``: name -> step, drawn as labelled vertical lines (e.g. ``{"induction heads": 1500}``).

    ``frame``: tidy rows with ``step``, ``layer``, ``symmetry`` and ``directionality`` (the rows of
    :func:`qkgeometry.trajectory`, or recorded training logs), for one attention stack per run. Returns the
    Figure."""
    require_rows(frame, "frame", "pass the rows of qkgeometry.trajectory for at least one checkpoint")
    if "step" not in frame or frame["step"].isna().all():
        raise ValueError("frame: has no `step` column with values; pass the rows of qkgeometry.trajectory (or a "
                         "store read through surveying.trajectories.with_steps).")
    rows = frame[frame["step"].notna()].copy()
    key = "run" if "run" in rows else "model"
    if "component" in rows and rows.groupby(key)["component"].nunique().max() > 1:
        raise ValueError("frame: a run holds several attention stacks; draw one at a time (select rows by "
                         "`component`).")
    if band is not None and (band not in rows or rows[band].isna().all()):
        band = None
    runs = list(dict.fromkeys(rows[key]))
    positive = np.asarray(sorted(rows.loc[rows["step"] > 0, "step"].astype(int).unique()))
    cmap = plt.get_cmap("viridis_r")
    fig, axes = plt.subplots(len(runs), 2, figsize=(9.0, 0.4 + 2.6 * len(runs)), sharex=True, squeeze=False,
                             layout="constrained")
    depth_handles = {}
    for i, run in enumerate(runs):
        part = rows[rows[key] == run]
        layers = sorted(part["layer"].unique())
        shade = {layer: cmap(0.15 + 0.8 * j / max(len(layers) - 1, 1)) for j, layer in enumerate(layers)}
        for ax, (score, label) in zip(axes[i], _SCORES.items()):
            null = _null_band(part, score, null_samples)
            if null is not None:
                ax.axhspan(*null, color=NULL_COLOR, alpha=0.6, lw=0, label=_NULL_LABEL)
            for layer in layers:
                g = part[part["layer"] == layer].groupby("step")[score]
                mid = g.median()
                steps = mid.index.astype(int)
                (line,) = ax.plot(steps, mid.to_numpy(), color=shade[layer], lw=1.5, marker="o", ms=2)
                depth_handles.setdefault(("first", "middle", "last")[
                    0 if layer == layers[0] else 2 if layer == layers[-1] else 1], line)
                if band is not None and g.size().max() > 1:
                    ax.fill_between(steps, g.quantile(0.25).to_numpy(), g.quantile(0.75).to_numpy(),
                                    color=shade[layer], alpha=0.15, lw=0)
            for name, step in (events or {}).items():
                ax.axvline(step, color="0.3", ls=":", lw=1)
                ax.annotate(str(name), (step, 1), xycoords=("data", "axes fraction"), rotation=90, va="top",
                            ha="right", fontsize=8, color="0.3")
            ax.set_ylabel(label)
            if len(positive):
                ax.set_xscale("symlog", linthresh=float(positive.min()), linscale=0.4)
        axes[i][0].set_title(_run_label(part, band), loc="left", fontsize=10)
    for ax in axes[-1]:
        ax.set_xlabel("training step")
    handles = [depth_handles[k] for k in ("first", "middle", "last") if k in depth_handles]
    labels = [f"{k} layer" for k in ("first", "middle", "last") if k in depth_handles]
    null_patch = [h for h, lab in zip(*axes[0][0].get_legend_handles_labels()) if lab == _NULL_LABEL]
    fig.legend(handles + null_patch[:1], labels + [_NULL_LABEL] * len(null_patch[:1]), loc="outside lower center",
               ncols=4, fontsize=9, frameon=False)
    return fig
