"""Does a head's geometry change before its behaviour? The lags of chapter 8, their intervals over seeds and their
specification curve.

For each run and role (the previous-token head of layer 0, the induction head of layer 1; picked by
:func:`qkgeometry.analyses.change_points.head_roles`), the **lag** is the step of the geometric change point minus
the step of the behavioural change point, both read from the same run (so the comparison is paired by seed). The
primary geometric score of each role is fixed in :data:`GEOMETRY`; the behaviour is the role's chapter-7 score.
Its mean over the seeds whose head earned its label, with a t-interval, is the estimate of one
:class:`qkgeometry.claims.Specification`; :func:`lag_claim` gathers every specification of :func:`specifications`
into one :class:`qkgeometry.claims.Claim`, whose sentence says where the sign holds and where it reverses.

:func:`score_changes` says which scores move at all (net change from the first to the last step, against the band
of freshly initialised heads), and :func:`control_summary` what the run without copies learns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import stats
from ..claims import Claim, Specification
from .change_points import (
    ROLES,
    fraction_step,
    head_roles,
    net_change,
    null_band,
    steepest_step,
    threshold_step,
)

__all__ = ["GEOMETRY", "GEOMETRY_SCORES", "LagSpec", "control_summary", "lag_claim", "lags", "score_changes",
           "specifications"]

#: The primary geometric score of each role: the table of the head's form that its job needs (chapter 8, "What the
#: algebra predicts").
GEOMETRY = {"previous-token": "position_contrast", "induction": "composition_contrast"}
#: Every geometric score a run records per head (the book's two scores, the energies, the tables' scores).
GEOMETRY_SCORES = ("symmetry", "directionality", "energy_sym", "energy_skew", "position_symmetry",
                   "position_skew_share", "position_contrast", "token_symmetry", "token_contrast",
                   "composition_symmetry", "composition_contrast")


@dataclass(frozen=True)
class LagSpec:
    """One way of reading the lag: how the geometric and the behavioural change points are found.

    ``geometry``/``behaviour``: ``"f0.25"``, ``"f0.5"``, ``"f0.75"`` (that fraction of the way), ``"steepest"``,
    or for the behaviour ``"t<factor>"`` (the chapter-7 threshold times factor) and ``"loss"`` (the in-context loss
    at 50% of its drop); ``unit``: ``"head"`` or ``"layer"`` (the layer's summed form); ``window``: the smoothing
    window; ``score``: the geometric score (default: the role's :data:`GEOMETRY`)."""

    axis: str
    label: str
    geometry: str = "f0.5"
    behaviour: str = "f0.5"
    unit: str = "head"
    window: int = 5
    score: str | None = None
    primary: bool = False


def specifications() -> tuple[LagSpec, ...]:
    """The specification curve of chapter 8, fixed before the runs: the primary (both change points at 50% of the
    way, per head, window 5) and each departure from it."""
    return (
        LagSpec("definition", "both at 50% of the way", primary=True),
        LagSpec("definition", "both at 25% of the way", "f0.25", "f0.25"),
        LagSpec("definition", "both at 75% of the way", "f0.75", "f0.75"),
        LagSpec("definition", "both at the steepest step", "steepest", "steepest"),
        LagSpec("behaviour threshold", "behaviour at half its label's threshold", behaviour="t0.5"),
        LagSpec("behaviour threshold", "behaviour at its label's threshold", behaviour="t1"),
        LagSpec("behaviour threshold", "behaviour at 1.5 × its label's threshold", behaviour="t1.5"),
        LagSpec("behaviour", "behaviour: in-context loss", behaviour="loss"),
        LagSpec("unit", "geometry of the layer's form", unit="layer"),
        LagSpec("smoothing", "no smoothing", window=1),
        LagSpec("smoothing", "smoothing over 9 logged steps", window=9),
    )


def _step(steps: np.ndarray, values: np.ndarray, how: str, window: int, band: float, level: float | None = None,
          ) -> float:
    if how == "steepest":
        return steepest_step(steps, values, window, band)
    if how.startswith("f"):
        return fraction_step(steps, values, float(how[1:]), window, band)
    if how.startswith("t"):
        return threshold_step(steps, values, level * float(how[1:]), window)
    raise ValueError(f"how: unknown change-point definition {how!r}.")


def lags(log: pd.DataFrame, steps: pd.DataFrame, role: str, spec: LagSpec, bands: dict[str, float] | None = None
         ) -> pd.DataFrame:
    """Per run: the role's head, its geometric and behavioural change points and the lag (geometry − behaviour),
    under ``spec``. ``log``: the recorded per-head rows of the runs (``run`` column); ``steps``: their per-layer
    rows. ``bands``: the null band of each geometric score (default :func:`null_band` of ``log``, per layer).
    Runs whose head did not earn its label are kept with ``labelled`` False and no lag. Chapter 8."""
    layer, behaviour, threshold, _ = ROLES[role]
    score = spec.score or GEOMETRY[role]
    band = (bands or {}).get(score)
    if band is None:
        band = null_band(log, score, layer)
    roles = head_roles(log)
    roles = roles[roles["role"] == role]
    rows = []
    for _, r in roles.iterrows():
        run = log[(log["run"] == r["run"]) & (log["layer"] == layer)]
        head = run[run["head"] == r["head"]].sort_values("step")
        s = head["step"].to_numpy(dtype=float)
        if spec.unit == "layer":
            lay = steps[(steps["run"] == r["run"]) & (steps["layer"] == layer)].sort_values("step")
            g = _step(lay["step"].to_numpy(dtype=float), lay[score].to_numpy(), spec.geometry, spec.window, band)
        else:
            g = _step(s, head[score].to_numpy(), spec.geometry, spec.window, band)
        if spec.behaviour == "loss":
            lay = steps[(steps["run"] == r["run"]) & (steps["layer"] == 0)].sort_values("step")
            b = fraction_step(lay["step"].to_numpy(dtype=float), lay["in_context_loss"].to_numpy(), 0.5, spec.window)
        else:
            b = _step(s, head[behaviour].to_numpy(), spec.behaviour, spec.window, 0.0, threshold)
        ok = bool(r["labelled"])
        rows.append({"run": r["run"], "role": role, "head": int(r["head"]), "labelled": ok, "geometry_step": g,
                     "behaviour_step": b, "lag": (g - b) if ok else float("nan")})
    return pd.DataFrame(rows)


def lag_claim(log: pd.DataFrame, steps: pd.DataFrame, role: str, level: float = 0.95) -> tuple[Claim, pd.DataFrame]:
    """The :class:`~qkgeometry.claims.Claim` of one role's lag across :func:`specifications` (mean lag in steps
    over seeds, t-interval), and the per-run lags of every specification (column ``spec``). Chapter 8."""
    bands = {score: null_band(log, score, ROLES[role][0]) for score in {GEOMETRY[role]}}
    curve, skipped, tables = [], [], []
    for spec in specifications():
        table = lags(log, steps, role, spec, bands).assign(spec=spec.label)
        tables.append(table)
        values = table["lag"].dropna().to_numpy()
        if len(values) < 3:
            skipped.append(f"{spec.label}: a change point in fewer than 3 seeds")
            if spec.primary:
                raise ValueError(f"the primary lag of the {role} head has fewer than 3 seeds with both change points "
                                 f"({len(values)}); no claim can be stated.")
            continue
        curve.append(Specification(spec.axis, spec.label, stats.t_interval(values, level, unit="seed"),
                                   primary=spec.primary))
    geometry = GEOMETRY[role].replace("_", " ")
    claim = Claim(f"lag of the {role} head ({geometry} − behaviour, steps)",
                  f"the {role} head's geometry changes after its behaviour",
                  f"the {role} head's geometry changes before its behaviour",
                  tuple(curve), not_computed=tuple(skipped), decimals=0,
                  short_larger="geometry after behaviour", short_smaller="geometry before behaviour",
                  short_subject="lag")
    return claim, pd.concat(tables, ignore_index=True)


def score_changes(log: pd.DataFrame, role: str, scores: tuple[str, ...] = GEOMETRY_SCORES,
                  level: float = 0.95) -> pd.DataFrame:
    """Which scores of the role's head move: per score, the net change from the first to the last logged step
    (smoothed, mean over the seeds whose head earned its label, t-interval), the null band of freshly initialised
    heads, and whether the interval lies wholly outside the band. Chapter 8."""
    layer = ROLES[role][0]
    roles = head_roles(log)
    roles = roles[(roles["role"] == role) & roles["labelled"]]
    rows = []
    for score in scores:
        if score not in log or log.loc[log["layer"] == layer, score].isna().all():
            continue
        band = null_band(log, score, layer)
        changes = []
        for _, r in roles.iterrows():
            head = log[(log["run"] == r["run"]) & (log["layer"] == layer) & (log["head"] == r["head"])]
            head = head.sort_values("step")
            changes.append(net_change(head["step"].to_numpy(dtype=float), head[score].to_numpy()))
        if len(changes) < 2:
            continue
        iv = stats.t_interval(changes, level, unit="seed")
        rows.append({"score": score, "change": iv.estimate, "low": iv.low, "high": iv.high, "n": iv.n, "band": band,
                     "moves": bool(iv.low > band or iv.high < -band)})
    return pd.DataFrame(rows)


def control_summary(log: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per run: the final in-context loss and the other tokens' loss, the largest final previous-token and induction
    scores with their nulls, and whether any head earned either label. Chapter 8."""
    roles = head_roles(log)
    rows = []
    for run, frame in steps.groupby("run", sort=False):
        last = frame[(frame["step"] == frame["step"].max()) & (frame["layer"] == 0)].iloc[0]
        row = {"run": run, "in_context_loss": float(last["in_context_loss"]), "other_loss": float(last["other_loss"])}
        for _, r in roles[roles["run"] == run].iterrows():
            key = r["role"].split("-")[0]
            row |= {f"{key}_score": r["final_score"], f"{key}_null": r["final_null"], f"{key}_labelled": r["labelled"]}
        rows.append(row)
    return pd.DataFrame(rows)
