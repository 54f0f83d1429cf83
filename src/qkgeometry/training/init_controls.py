"""The controls of the symmetric initialisation, read against the predictions stated before their runs. Chapter 5,
"What the controls say".

The symmetric init ``W_Q := W_K`` changes three things at once: it makes every head's form symmetric, it ties the
query weights' scale and Gram matrix to the keys', and it makes the form positive semi-definite, so that every token
matches itself at step 0. Three controls, each with the model's own weight distribution, take them apart:

* ``skew``: exactly skew-symmetric (the opposite of the intervention);
* ``rotated``: the symmetric init's Gram matrix and scale, neither symmetric nor skew;
* ``indefinite``: exactly symmetric with the symmetric init's Gram matrix, but indefinite (no self-match bias).

The quantity is the final validation loss, paired by training seed with the default and the symmetric runs of the
same seed; the control contrasts are one Holm family (:func:`qkgeometry.stats.judge_family`). The predictions:

* **symmetry itself**: rotated ends like default and above symmetric; indefinite ends like symmetric, below default;
* **the tied scale and Gram matrix**: rotated and indefinite end like symmetric, below default;
* **the self-match bias**: indefinite ends like default and above symmetric.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import stats
from . import metrics as tm

__all__ = ["CONTROLS", "CONTROL_PAIRS", "ControlReading", "control_family", "read_controls"]

#: The control inits, in the order the page lists them.
CONTROLS = ("skew", "rotated", "indefinite")
#: Every (control, baseline) contrast of the family.
CONTROL_PAIRS = tuple((c, b) for c in CONTROLS for b in ("default", "symmetric"))


def control_family(logs: pd.DataFrame, pairs: Sequence[tuple[str, str]] = CONTROL_PAIRS, loss: str = "val_loss",
                   alpha: float = 0.05) -> pd.DataFrame:
    """One row per ``(control, baseline)`` pair present in ``logs`` with at least two shared seeds: the columns of
    :func:`qkgeometry.training.metrics.paired_table` plus ``judged`` replaced by the verdict within the Holm family
    of all these contrasts (``holm`` the adjusted p-value). ``logs``: recorded runs of one arch, every init, cut at a
    common step."""
    rows = []
    for control, baseline in pairs:
        if not {control, baseline} <= set(logs["init"]):
            continue
        part = tm.paired_table(logs[logs["init"].isin([control, baseline])], treatments=(control,), baseline=baseline,
                               loss=loss)
        rows.extend(r for r in part.to_dict("records") if r["result"] is not None)
    if not rows:
        return pd.DataFrame()
    table = pd.DataFrame(rows)
    verdicts = stats.judge_family([(r["result"], f"{r['treatment']} ends higher", f"{r['treatment']} ends lower",
                                    f"{r['treatment']} − {r['baseline']} final validation loss")
                                   for r in rows], alpha=alpha)
    table["judged"] = verdicts
    table["holm"] = [v.p_adjusted for v in verdicts]
    return table


@dataclass(frozen=True)
class ControlReading:
    """What the controls say against the stated predictions: ``rotated`` (symmetry vs the Gram matrix) and
    ``indefinite`` (the self-match bias vs the other two), each one sentence, and ``power`` (seeds each control
    would need)."""

    rotated: str
    indefinite: str
    power: str


def _lookup(family: pd.DataFrame, control: str, baseline: str):
    row = family[(family["treatment"] == control) & (family["baseline"] == baseline)]
    return None if row.empty else row.iloc[0]["judged"]


def _est(v: stats.Verdict) -> str:
    return f"{v.interval.estimate:+.3f} nats"


def _reading(family: pd.DataFrame, control: str, missing: str, like_default: str, like_symmetric: str,
             neither: str, tail: str) -> str:
    """One control against its predictions: it ends above symmetric and like default, below default and like
    symmetric, or neither (undecided, with where its point estimate lies)."""
    vs_def, vs_sym = _lookup(family, control, "default"), _lookup(family, control, "symmetric")
    name = control.capitalize()
    if vs_def is None or vs_sym is None:
        return f"The {control} control {missing}."
    established = {k: v.outcome == "difference" for k, v in (("def", vs_def), ("sym", vs_sym))}
    if established["sym"] and vs_sym.interval.estimate > 0 and not established["def"]:
        return f"{name} ends above symmetric and like default: {like_default} ({control} − symmetric {_est(vs_sym)})."
    if established["def"] and vs_def.interval.estimate < 0 and not established["sym"]:
        return f"{name} ends below default and like symmetric: {like_symmetric} ({control} − default {_est(vs_def)})."
    nearer = "default" if abs(vs_def.interval.estimate) < abs(vs_sym.interval.estimate) else "symmetric"
    return (f"{name} {neither} at n = {vs_def.interval.n} seeds: its point estimate lies nearer {nearer} "
            f"({_est(vs_def)} from default, {_est(vs_sym)} from symmetric), and neither contrast is established "
            f"after the correction{tail}.")


def read_controls(family: pd.DataFrame, effect: float) -> ControlReading:
    """The reading of ``family`` (:func:`control_family`) against the predictions, and how many seeds each control
    would need for 80% power at 5% against a gap of size ``effect`` (the symmetric init's own), from its spread.

    A contrast is *established* when it is a difference in the family; "like" means not established. Outcomes that
    fit no prediction are called undecided, never read as equality.
    """
    rotated = _reading(family, "rotated", "has not run",
                       like_default="the pattern the symmetry itself predicts",
                       like_symmetric="the pattern the tied scale and Gram matrix predict",
                       neither="fits neither prediction", tail="")
    indefinite = _reading(family, "indefinite", "has not run yet",
                          like_default="the pattern the self-match bias predicts",
                          like_symmetric="the pattern of symmetry or of the tied Gram matrix, not of the self-match "
                                         "bias",
                          neither="fits none of the predictions",
                          tail=", so the self-match bias is neither shown nor ruled out")
    needed = {}
    for r in family.itertuples():
        sd = float(np.std(r.result.differences, ddof=1))
        try:
            needed[r.treatment] = max(needed.get(r.treatment, 0), stats.seeds_for_power(abs(effect), sd))
        except ValueError:
            needed[r.treatment] = np.inf
    power = ""
    if needed:
        parts = [f"{c} {'more than 1,000' if not np.isfinite(n) else f'{n:,.0f}'}" for c, n in needed.items()]
        power = (f"From each control's own spread, telling a gap the size of the symmetric init's "
                 f"({abs(effect):.3f} nats) from zero with 80% power at the 5% level would take, per control, up to: "
                 + ", ".join(parts) + " seeds.")
    return ControlReading(rotated, indefinite, power)
