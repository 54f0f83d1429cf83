"""The figure of training trajectories (chapter 3 and ``qkgeometry plot --trajectory``): both scores of every layer
against training step (or tokens seen), one row of panels per run, with the null band of the model's shapes, optional
events, and marks on checkpoints that hold identical weights or failed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..formatting import format_number
from .style import NULL_COLOR, STACKED_FONT, plt, require_rows, stacked_figure, stacked_legend

__all__ = ["run_figure", "trajectory_curves", "trajectory_figures"]

_SCORES = {"symmetry": "symmetry s", "directionality": "directionality d"}
_NULL_LABEL = "random factors (95%)"
#: marks on checkpoints to check (identical weights, failed): a colour no family or initialisation uses
_MARK_COLOR = "#e7298a"
#: at most this many labels on a step axis (its panel is half a stacked figure's width): labels at 1, 2 and 5 × 10^k
#: when they fit, else at the powers of ten, else at every other power of ten
_MAX_TICKS = 5
#: the linear part of the step axis, below its first positive step, is this many decades wide (symlog ``linscale``)
_LINSCALE = 0.4
#: up to this many layers the legend names every layer; deeper models get first / middle layers / last
_NAMED_LAYERS = 6


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


#: a row's title runs over both panels of a stacked figure: lines of at most this many characters stay inside it
_TITLE_CHARS = 42


def _run_label(rows, band: str | None, name: str) -> str:
    import textwrap

    name = name or str(rows["model"].iloc[0])
    n_steps = rows["_x"].nunique()
    if band is None:
        lines = [f"{name}: {n_steps} checkpoints"]
    else:
        n = rows[band].nunique()
        unit = str(rows["band_unit"].iloc[0]) if "band_unit" in rows else band
        lines = [f"{name}:", f"median over {n} {unit}s (band: IQR), {n_steps} checkpoints"]
    return "\n".join(textwrap.fill(line, _TITLE_CHARS) for line in lines)


def _x_axis(rows, x: str) -> tuple[str, str]:
    """The column drawn along x and its axis label: ``tokens`` when asked, or (``"auto"``) when every checkpoint
    has it; ``step`` otherwise."""
    if x not in ("auto", "step", "tokens"):
        raise ValueError(f"x: must be 'auto', 'step' or 'tokens'; got {x!r}.")
    has_tokens = "tokens" in rows and rows["tokens"].notna().all()
    if x == "tokens" and not has_tokens:
        raise ValueError("x='tokens': not every checkpoint says its tokens seen; pass x='step'.")
    if x == "tokens" or (x == "auto" and has_tokens):
        return "tokens", "tokens seen"
    return "step", "training step"


def _check_one_checkpoint_per_x(rows, key: str) -> None:
    """Two different checkpoints at one x of one panel would be averaged into one point: refuse."""
    if "source" not in rows and "checkpoint" not in rows:
        return
    who = "source" if "source" in rows else "checkpoint"
    per_x = rows.groupby([key, "_x"], sort=False)[who].nunique()
    if (per_x > 1).any():
        (run, at) = per_x[per_x > 1].index[0]
        names = list(dict.fromkeys(rows.loc[(rows[key] == run) & (rows["_x"] == at),
                                            "checkpoint" if "checkpoint" in rows else who].astype(str)))
        raise ValueError(f"frame: checkpoints {', '.join(names)} of run {run!r} sit at the same x ({at}); one point "
                         "cannot show both. Select one, or draw against tokens seen (x='tokens').")


def _log_ticks(ax, positive: np.ndarray, zero: bool) -> None:
    """Labels at 1, 2 and 5 × 10^k on a log step axis (so that steps between powers of ten are readable), or at the
    powers of ten alone when that would make more than :data:`_MAX_TICKS` labels, or at every other power of ten
    (the largest kept) when even those would."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    lo, hi = float(positive.min()), float(positive.max())
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    ticks = [m * 10.0**k for k in decades for m in (1, 2, 5) if lo / 1.5 <= m * 10.0**k <= hi]
    far = 1.3
    if len(ticks) + zero > _MAX_TICKS:  # 1-2-5 labels would run into each other
        ticks, far = [10.0**k for k in decades if lo / 1.5 <= 10.0**k <= hi], 3.0
        while len(ticks) + zero > _MAX_TICKS and len(ticks) > 2:  # so would the powers of ten
            ticks = ticks[::-2][::-1]
    if not ticks or max(ticks) < hi / far:  # the last checkpoint is far past the last round tick: label it too
        ticks.append(hi)
    if zero:  # a label too close to 0's would run into it
        span = _LINSCALE + np.log10(hi / lo)
        ticks = sorted({0.0, *(t for t in ticks if span <= 0 or (_LINSCALE + np.log10(t / lo)) / span >= 0.12)})
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(_compact))


def _compact(v: float, _pos: object = None) -> str:
    """1,500 -> '1.5k', 2e9 -> '2B': short tick labels."""
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{format_number(v / scale, spec='g')}{unit}"
    return format_number(v, spec="g")


def trajectory_curves(frame, events: Mapping[str, int] | None = None, band: str | None = "head",
                      null_samples: int = 400, *, x: str = "auto", identical: Sequence[Sequence[str]] = (),
                      failed: Mapping[str, int | None] | None = None):
    """Both scores against training step: one row of panels per run (the ``run`` column, else ``model``; two runs
    are never merged), one line per layer (light: shallow, dark: deep). ``band``: the column whose units spread
    around each line ("head" for per-head rows; "seed" for several seeds of one configuration; None: one value per
    layer and step): the line is the median over them and the shaded band the interquartile range (a ``band_unit``
    column, if any, names those units in the row's title). The grey band is the 2.5–97.5% range of random Gaussian
    factors of the model's shapes (``null_samples`` draws; drawn when the rows carry ``d_model``, ``head_dim`` and
    ``n_heads``); where it covers nearly the whole range [−1, 1], it is not shaded and the panel says so. The x axis
    is logarithmic, linear below the first positive value, so that step 0 shows, with labels at 1, 2 and 5 × 10^k.

    ``x``: ``"auto"`` (tokens seen when every checkpoint has them, else the step), ``"step"`` or ``"tokens"``.
    Suites whose step count restarts at each stage (a ``stage`` column) get one row of panels per stage when drawn
    against step; two checkpoints at one x of one panel are refused, never averaged. ``events``: name -> step,
    drawn as labelled vertical lines (e.g. ``{"induction heads": 1500}``). ``identical``: groups of checkpoint names
    that hold the same weights (:func:`qkgeometry.surveying.trajectories.identical_checkpoints`), ringed in magenta;
    ``failed``: checkpoint name -> step of checkpoints that could not be scored, marked with a magenta ✕ on the axis.

    ``frame``: tidy rows with ``step``, ``layer``, ``symmetry`` and ``directionality`` (the rows of
    :func:`qkgeometry.trajectory`, or recorded training logs), for one attention stack per run. Returns the
    Figure."""
    require_rows(frame, "frame", "pass the rows of qkgeometry.trajectory for at least one checkpoint")
    if "step" not in frame or frame["step"].isna().all():
        raise ValueError("frame: has no `step` column with values; pass the rows of qkgeometry.trajectory (or a "
                         "store read through surveying.trajectories.read_trajectory).")
    from ..surveying.identity import one_view
    from ..surveying.runs import RunId, run_labels

    rows = frame[frame["step"].notna()].copy()
    key = "run" if "run" in rows else "model"
    if "component" in rows and rows.groupby(key)["component"].nunique().max() > 1:
        raise ValueError("frame: a run holds several attention stacks; draw one at a time (select rows by "
                         "`component`).")
    for run, part in rows.groupby(key, sort=False):  # per layer and per head, raw and folded: never one line
        one_view(part, f"frame (run {run!r})", cli=False)
    if key == "run":  # runs of a training callback (a start time, a seed...): the shortest label of each
        labels = run_labels(rows["run"].astype(str))
        rows["run"] = rows["run"].astype(str).map(lambda r: labels[r] if RunId.parse(r) else r)
    if band is not None and (band not in rows or rows[band].isna().all()):
        band = None
    x_col, x_label = _x_axis(rows, x)
    rows["_x"] = rows[x_col].astype(float)
    per_stage = x_col == "step" and "stage" in rows and rows.groupby(key)["stage"].nunique().max() > 1
    if per_stage:  # the step count restarts at each stage: one row of panels per (run, stage)
        rows["_panel"] = rows[key].astype(str) + " stage " + rows["stage"].astype("Int64").astype(str)
    else:
        rows["_panel"] = rows[key].astype(str)
    _check_one_checkpoint_per_x(rows, "_panel")
    panels = list(dict.fromkeys(rows["_panel"]))
    positive = np.asarray(sorted(rows.loc[rows["_x"] > 0, "_x"].unique()))
    cmap = plt.get_cmap("viridis_r")
    fig, axes = stacked_figure(len(panels), 2.6, extra=0.3, ncols=2, sharex=True)
    depth_handles: dict = {}
    n_layers = {int(rows.loc[rows["_panel"] == p, "layer"].nunique()) for p in panels}
    name_each = len(n_layers) == 1 and next(iter(n_layers)) <= _NAMED_LAYERS
    marks: dict = {}
    ringed = {str(n) for group in identical for n in group}
    failed = dict(failed or {})
    for i, panel in enumerate(panels):
        part = rows[rows["_panel"] == panel]
        layers = sorted(part["layer"].unique())
        shade = {layer: cmap(0.15 + 0.8 * j / max(len(layers) - 1, 1)) for j, layer in enumerate(layers)}
        for ax, (score, label) in zip(axes[i], _SCORES.items()):
            null = _null_band(part, score, null_samples)
            if null is not None and null[1] - null[0] >= 1.9:
                ax.text(0.99, 0.03, "random factors (95%)\nspan the whole range:\nno layer differs\nfrom chance",
                        transform=ax.transAxes, ha="right", va="bottom", fontsize=STACKED_FONT, color="0.35")
            elif null is not None:
                ax.axhspan(*null, color=NULL_COLOR, alpha=0.6, lw=0, label=_NULL_LABEL)
            for layer in layers:
                g = part[part["layer"] == layer].groupby("_x")[score]
                mid = g.median()
                xs = mid.index.to_numpy(dtype=float)
                (line,) = ax.plot(xs, mid.to_numpy(), color=shade[layer], lw=1.5, marker="o", ms=2)
                j = layers.index(layer)
                if name_each:  # every layer its own entry: "layer 1 (first)", "layer 2", ..., "layer 4 (last)"
                    word = f"layer {j + 1}" + (" (first)" if j == 0 else " (last)" if j == len(layers) - 1 else "")
                else:
                    word = "first layer" if j == 0 else "last layer" if j == len(layers) - 1 else "middle layers"
                depth_handles.setdefault(word, line)
                if band is not None and g.size().max() > 1:
                    ax.fill_between(xs, g.quantile(0.25).to_numpy(), g.quantile(0.75).to_numpy(),
                                    color=shade[layer], alpha=0.15, lw=0)
            if ringed and "checkpoint" in part:
                hit = part[part["checkpoint"].astype(str).isin(ringed)]
                if len(hit):
                    pts = hit.groupby(["_x", "layer"])[score].median().reset_index()
                    marks["identical"] = ax.scatter(pts["_x"], pts[score], s=40, facecolors="none",
                                                    edgecolors=_MARK_COLOR, lw=1.1, zorder=5,
                                                    label="identical weights (check the revisions)")
            if failed and not per_stage and x_col == "step":
                at = [float(v) for v in failed.values() if v is not None and v == v]
                if at:
                    marks["failed"] = ax.scatter(at, [0.0] * len(at), marker="x", color=_MARK_COLOR, s=36,
                                                 transform=ax.get_xaxis_transform(), clip_on=False, zorder=6,
                                                 label="failed to score")
            for name, step in (events or {}).items():
                ax.axvline(step, color="0.3", ls=":", lw=1)
                ax.annotate(str(name), (step, 1), xycoords=("data", "axes fraction"), rotation=90, va="top",
                            ha="right", fontsize=STACKED_FONT, color="0.3")
            ax.set_ylabel(label)
            if len(positive):
                ax.set_xscale("symlog", linthresh=float(positive.min()), linscale=_LINSCALE)
                _log_ticks(ax, positive, bool((rows["_x"] == 0).any()))
        axes[i][0].set_title(_run_label(part, band, panel), loc="left", fontsize=STACKED_FONT)
    for ax in axes[-1]:
        ax.set_xlabel(x_label)
    order = sorted(depth_handles, key=lambda w: (w != "first layer", w == "last layer",
                                                 int(w.split()[1]) if w.split()[1].isdigit() else 0))
    handles = [depth_handles[k] for k in order]
    labels = list(order)
    null_patch = [h for h, lab in zip(*axes[0][0].get_legend_handles_labels()) if lab == _NULL_LABEL]
    extra = [marks[k] for k in ("identical", "failed") if k in marks]
    stacked_legend(fig, handles + null_patch[:1] + extra,
                   labels + [_NULL_LABEL] * len(null_patch[:1]) + [h.get_label() for h in extra], max_ncols=3)
    return fig


def run_figure(frame, events: Mapping[str, int] | None = None):
    """The figure of one :func:`qkgeometry.trajectory` result (``qkgeometry trajectory --figure``): its first
    attention stack, with the identical checkpoints (``frame.attrs["identical"]``) ringed and the failed ones
    (``frame.attrs["failures"]``) marked at their steps."""
    first = frame[frame["component"] == frame["component"].iloc[0]]
    failures = frame.attrs.get("failures")
    failed_sources = set() if failures is None else {str(s) for s in failures["source"]}
    asked = frame.attrs.get("checkpoints")
    failed = {} if asked is None or not len(asked) else {
        str(c.name): c.step for c in asked.itertuples() if str(c.source) in failed_sources and c.step == c.step}
    return trajectory_curves(first, events=events, identical=frame.attrs.get("identical", ()), failed=failed)


def trajectory_figures(frame) -> dict:
    """``qkgeometry plot STORE --trajectory``: one figure per (run, attention stack, setting) of the rows that are
    checkpoints with a known step (a store read with
    :func:`qkgeometry.surveying.trajectories.read_trajectory`), by file stem. Two runs are never merged, whatever
    their folders' names; each is labelled by the shortest tail of its path (or name) that tells it from the
    others. A store that holds several settings (per layer and per head, raw and folded gains: the columns of
    :data:`~qkgeometry.surveying.identity.VIEW_OPTIONS`) gets one figure for each, its stem naming the setting."""
    import re

    from ..surveying.identity import VIEW_OPTIONS
    from ..surveying.trajectories import identical_checkpoints, order_rows, run_labels

    rows = order_rows(frame[frame["step"].notna()]) if "step" in frame else frame.iloc[:0]
    if not len(rows):
        raise ValueError("--trajectory: no row of the store is a checkpoint with a known step; write one with "
                         "`qkgeometry trajectory SOURCE --out STORE`.")
    labels = run_labels(rows["run"].astype(str))
    varied = [c for c in VIEW_OPTIONS if c in rows and rows[c].fillna("").astype(str).nunique() > 1]
    keys = [rows["run"].astype(str), "component", *(rows[c].fillna("").astype(str) for c in varied)]
    out = {}
    for (run, component, *setting), part in rows.groupby(keys, sort=False):
        named = "".join(f"-{c.replace('_', '-')}-{v}" for c, v in zip(varied, setting) if v)
        stem = re.sub(r"[^A-Za-z0-9._]+", "-", f"trajectory-{labels[run]}-{component}{named}").strip("-")
        out[stem] = trajectory_curves(part.assign(run=labels[run]), identical=identical_checkpoints(part))
    return out
