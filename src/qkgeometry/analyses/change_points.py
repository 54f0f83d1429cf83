"""When a curve changes: change points of training curves, and the lag between a head's geometry and its behaviour.
Chapter 8.

A logged curve ``y(step)`` is first smoothed (a centred running mean over ``window`` logged steps). Its **start**
and **end** are the smoothed values at the first and the last logged step, and its **net change** is end − start.

* :func:`fraction_step` — the change point at fraction ``f`` (0.25, 0.5, 0.75): the first step at which the
  smoothed curve has gone ``f`` of the way from its start to its end (linear interpolation between logged steps);
* :func:`steepest_step` — the step at which the smoothed curve moves fastest in the direction of its net change
  (the middle of the steepest interval);
* :func:`threshold_step` — the first step at which the smoothed curve reaches a fixed level (a behaviour
  threshold).

A curve whose net change is smaller than ``min_change`` has no change point (NaN): it did not move beyond its noise.
The **lag** of a head is its geometric change point minus its behavioural change point, both read from the same
run: a negative lag means the geometry moved first. :func:`null_band` gives the band a score's change must leave
(twice the spread of the score over the heads of freshly initialised models). :func:`head_roles` picks, in each
run, the heads whose lags are read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["ROLES", "fraction_step", "head_roles", "net_change", "null_band", "smooth", "steepest_step",
           "threshold_step"]

#: The two jobs of chapter 8: (layer, behaviour score, chapter-7 threshold, its null column or chance column).
ROLES = {"previous-token": (0, "previous", 0.4, "previous_chance"),
         "induction": (1, "induction", 0.3, "induction_null")}


def _curve(steps, values) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(steps, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    if s.ndim != 1 or s.shape != y.shape or len(s) < 3:
        raise ValueError(f"steps and values: expected two 1-d arrays of the same length >= 3; got shapes "
                         f"{s.shape} and {y.shape}.")
    if np.any(np.diff(s) <= 0):
        raise ValueError("steps: must increase strictly (one value per logged step, in step order).")
    if not np.all(np.isfinite(y)):
        raise ValueError("values: contain NaN or infinite values.")
    return s, y


def smooth(values, window: int = 5) -> np.ndarray:
    """Centred running mean over ``window`` (odd, >= 1) points; near the ends, over the points that exist.
    Chapter 8."""
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1 or window % 2 == 0:
        raise ValueError(f"window: must be an odd whole number >= 1; got {window!r}.")
    y = np.asarray(values, dtype=np.float64)
    return pd.Series(y).rolling(window, center=True, min_periods=1).mean().to_numpy()


def net_change(steps, values, window: int = 5) -> float:
    """Smoothed end value minus smoothed start value. Chapter 8."""
    _, y = _curve(steps, values)
    z = smooth(y, window)
    return float(z[-1] - z[0])


def fraction_step(steps, values, fraction: float = 0.5, window: int = 5, min_change: float = 0.0) -> float:
    """The first step at which the smoothed curve has gone ``fraction`` of the way from its start to its end
    (interpolated between logged steps); NaN when the net change is at most ``min_change`` in size. Chapter 8.

    >>> fraction_step([0, 10, 20, 30, 40], [0, 0, 1, 1, 1], 0.5, window=1)
    15.0
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction: must lie strictly between 0 and 1; got {fraction!r}.")
    s, y = _curve(steps, values)
    z = smooth(y, window)
    change = z[-1] - z[0]
    if not abs(change) > min_change or change == 0:
        return float("nan")
    u = (z - z[0]) / change  # 0 at the start, 1 at the end, whatever the direction
    k = int(np.argmax(u >= fraction))
    if k == 0:
        return float(s[0])
    a, b = u[k - 1], u[k]
    return float(s[k - 1] + (fraction - a) / (b - a) * (s[k] - s[k - 1]))


def steepest_step(steps, values, window: int = 5, min_change: float = 0.0) -> float:
    """The middle of the logged interval over which the smoothed curve moves fastest (per step) in the direction of
    its net change; NaN when the net change is at most ``min_change`` in size. Chapter 8.

    >>> steepest_step([0, 10, 20, 30], [0, 0.1, 0.9, 1.0], window=1)
    15.0
    """
    s, y = _curve(steps, values)
    z = smooth(y, window)
    change = z[-1] - z[0]
    if not abs(change) > min_change or change == 0:
        return float("nan")
    rate = np.sign(change) * np.diff(z) / np.diff(s)
    k = int(np.argmax(rate))
    return float((s[k] + s[k + 1]) / 2)


def threshold_step(steps, values, level: float, window: int = 5) -> float:
    """The first step at which the smoothed curve reaches ``level`` from below (interpolated); NaN if it never does,
    the first step if it starts there. Chapter 8.

    >>> threshold_step([0, 10, 20], [0.0, 0.2, 0.6], 0.4, window=1)
    15.0
    """
    s, y = _curve(steps, values)
    z = smooth(y, window)
    above = z >= level
    if not above.any():
        return float("nan")
    k = int(np.argmax(above))
    if k == 0:
        return float(s[0])
    return float(s[k - 1] + (level - z[k - 1]) / (z[k] - z[k - 1]) * (s[k] - s[k - 1]))


def null_band(heads: pd.DataFrame, score: str, layer: int | None = None, factor: float = 2.0) -> float:
    """``factor`` × the standard deviation of ``score`` over every head (of ``layer``, or of all layers) at step 0
    of every run in ``heads``: how far a head's score lies from another's in a freshly initialised model, the band
    that a change must leave to count. Chapter 8."""
    first = heads[heads["step"] == heads.groupby("run")["step"].transform("min")]
    if layer is not None:
        first = first[first["layer"] == layer]
    values = first[score].dropna().to_numpy(dtype=np.float64)
    if len(values) < 2:
        raise ValueError(f"heads: need at least two heads at step 0 to estimate the spread of {score!r}.")
    return float(factor * values.std(ddof=1))


def head_roles(heads: pd.DataFrame, null_factor: float = 3.0) -> pd.DataFrame:
    """Per run and role (:data:`ROLES`), the head of that role's layer with the largest behaviour score at the last
    logged step, and whether it earns chapter 7's label there (score >= the threshold and >= ``null_factor`` × its
    null). Columns ``run, role, layer, head, final_score, final_null, labelled``. Chapter 8."""
    rows = []
    for run, frame in heads.groupby("run", sort=False):
        last = frame[frame["step"] == frame["step"].max()]
        for role, (layer, score, threshold, null) in ROLES.items():
            part = last[last["layer"] == layer]
            if part.empty:
                raise ValueError(f"heads: run {run!r} has no layer {layer}; the {role} role needs one.")
            best = part.loc[part[score].idxmax()]
            rows.append({"run": run, "role": role, "layer": layer, "head": int(best["head"]),
                         "final_score": float(best[score]), "final_null": float(best[null]),
                         "labelled": bool(best[score] >= threshold and best[score] >= null_factor * best[null])})
    return pd.DataFrame(rows)
