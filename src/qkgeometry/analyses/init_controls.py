"""The controls of the symmetric initialisation, read against the predictions stated before their runs. Chapter 5,
"What the controls say".

The symmetric init ``W_Q := W_K`` changes four things at once: it makes every head's form symmetric, it ties the
query weights' scale and their Gram matrix over the input dimensions (``W_Q W_Qᵀ``) to the keys', it makes the form
positive semi-definite, so that every token matches itself at step 0, and it starts the form about 12% larger than
the default init's. Four controls, each with the model's own weight distribution, take them apart:

* ``skew``: exactly skew-symmetric (the opposite of the intervention);
* ``rotated``: the symmetric init's ``W_Q W_Qᵀ``, singular values and scale, neither symmetric nor skew;
* ``indefinite``: exactly symmetric with the symmetric init's ``W_Q W_Qᵀ``, but indefinite (no self-match bias);
* ``norm-matched``: the default init with each head's form scaled to the symmetric init's norm (its structure
  unchanged): the initial logit scale without the symmetry.

The quantity is the final validation loss, paired by training seed with the default and the symmetric runs of the
same seed; the control contrasts are one Holm family (:func:`qkgeometry.stats.judge_family`). The predictions:

* **symmetry itself**: rotated ends like default and above symmetric; indefinite ends like symmetric, below default;
* **the tied scale and Gram matrix**: rotated and indefinite end like symmetric, below default;
* **the self-match bias**: indefinite ends like default and above symmetric;
* **the initial scale**: norm-matched ends like symmetric, below default; **the structure**: norm-matched ends like
  default, above symmetric.

:func:`loss_gap_claim` and :func:`target_claim` read the symmetric init's own gain across its specification curve
(every logged horizon after 2,000 steps; steps to targets at 25, 50, 75 and 90% of the horizon and to the baseline's
final loss).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import stats
from ..claims import Claim, Specification
from ..formatting import format_number
from ..training import metrics as tm

__all__ = [
    "CONTROLS",
    "CONTROL_PAIRS",
    "CURVE_FIRST_STEP",
    "PLANNED_SEEDS",
    "TARGET_FRACTIONS",
    "ControlReading",
    "GainAnswer",
    "brief",
    "cause_line",
    "control_family",
    "gain_answer",
    "loss_gap_claim",
    "planned_controls",
    "power_text",
    "read_controls",
    "target_claim",
]

#: The control inits, in the order the page lists them.
CONTROLS = ("skew", "rotated", "indefinite", "norm-matched")
#: The training seeds each control's recorded plan names (each paired with the default and symmetric runs of its seed); a
#: control is read only once all of them are in (:func:`planned_controls`).
PLANNED_SEEDS = {control: tuple(range(3, 9)) for control in CONTROLS}
#: Every (control, baseline) contrast of the family.
CONTROL_PAIRS = tuple((c, b) for c in CONTROLS for b in ("default", "symmetric"))


def planned_controls(logs: pd.DataFrame, planned: dict[str, Sequence[int]] | None = None,
                     step: int | None = None) -> tuple[pd.DataFrame, dict[str, list[int]]]:
    """``logs`` without the runs of any control whose planned seeds are not all recorded to ``step`` (default: the
    last step any run reached), and ``{control: seeds recorded so far}`` for each control left out, so that a page
    reads a control only as planned and says how far the others are. Chapter 5, "The controls"."""
    planned = PLANNED_SEEDS if planned is None else planned
    step = int(logs["step"].max()) if step is None else int(step)
    done = logs[logs["step"] >= step].groupby("init")["seed"].agg(lambda s: sorted({int(v) for v in s}))
    present = set(logs["init"])
    pending = {c: done.get(c, []) for c in planned
               if c in present and not set(planned[c]) <= set(done.get(c, []))}
    return logs[~logs["init"].isin(pending)], pending


def control_family(logs: pd.DataFrame, pairs: Sequence[tuple[str, str]] = CONTROL_PAIRS, loss: str = "val_loss",
                   alpha: float = 0.05, groups: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per ``(control, baseline)`` pair present in ``logs`` with at least two shared seeds: the columns of
    :func:`qkgeometry.training.metrics.paired_table` plus ``judged`` replaced by the verdict within the Holm family
    of all these contrasts (``holm`` the adjusted p-value). ``logs``: recorded runs of one arch, every init, cut at a
    common step. ``groups``: the runs' data groups (:func:`qkgeometry.training.pairing.data_groups`); each contrast
    is then paired only over the training seeds at which both inits read the same data."""
    from ..training.pairing import paired_seeds

    rows = []
    for control, baseline in pairs:
        if not {control, baseline} <= set(logs["init"]):
            continue
        part = logs[logs["init"].isin([control, baseline])]
        if groups is not None:
            part = part[part["seed"].isin(paired_seeds(groups, control, baseline))]
            if part["seed"].nunique() < 2:
                continue
        part = tm.paired_table(part, treatments=(control,), baseline=baseline, loss=loss)
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
    """What the controls say against the stated predictions: ``rotated`` (symmetry vs the Gram matrix),
    ``indefinite`` (the self-match bias vs the other two) and ``norm_matched`` (the initial scale vs the structure),
    each one sentence, and ``power`` (seeds each control would need at the family's Holm level)."""

    rotated: str
    indefinite: str
    power: str
    norm_matched: str = ""


def _lookup(family: pd.DataFrame, control: str, baseline: str):
    row = family[(family["treatment"] == control) & (family["baseline"] == baseline)]
    return None if row.empty else row.iloc[0]["judged"]


def _est(v: stats.Verdict) -> str:
    return f"{format_number(v.interval.estimate, spec='+.3f')} nats"


def _reading(family: pd.DataFrame, control: str, missing: str, like_default: str, like_symmetric: str,
             neither: str, tail: str) -> str:
    """One control against its predictions: it ends above symmetric and like default, below default and like
    symmetric, or neither (undecided, saying which contrasts are established and where its point estimate lies)."""
    vs_def, vs_sym = _lookup(family, control, "default"), _lookup(family, control, "symmetric")
    name = control[:1].upper() + control[1:]
    if vs_def is None or vs_sym is None:
        return f"The {control} control {missing}."
    established = {k: v.outcome == "difference" for k, v in (("def", vs_def), ("sym", vs_sym))}
    if established["sym"] and vs_sym.interval.estimate > 0 and not established["def"]:
        return f"{name} ends above symmetric and like default: {like_default} ({control} − symmetric {_est(vs_sym)})."
    if established["def"] and vs_def.interval.estimate < 0 and not established["sym"]:
        return f"{name} ends below default and like symmetric: {like_symmetric} ({control} − default {_est(vs_def)})."
    nearer = "default" if abs(vs_def.interval.estimate) < abs(vs_sym.interval.estimate) else "symmetric"
    where = (f"its point estimate lies nearer {nearer} ({_est(vs_def)} from default, {_est(vs_sym)} from symmetric)")
    if established["def"] and established["sym"]:
        status = "both contrasts are established, in a pattern no prediction names"
    elif established["def"] or established["sym"]:
        which = "default" if established["def"] else "symmetric"
        status = f"only the contrast with {which} is established, with a sign no prediction names"
    else:
        status = "neither contrast is established after the correction"
    return f"{name} {neither} at n = {vs_def.interval.n} seeds: {where}, and {status}{tail}."


def _seeds_needed(effect: float, sd: float, level: float) -> float:
    """Seeds for 80% power of the paired t-test at ``level`` (inf beyond 1,000; nan for a spread of 0, which no
    number of seeds sizes)."""
    if not sd > 0:
        return float("nan")
    try:
        return float(stats.seeds_for_power(abs(effect), sd, alpha=level))
    except ValueError:
        return float("inf")


def _count(n: float) -> str:
    return "more than 1,000" if n == float("inf") else format_number(n, decimals=0)


def power_text(family: pd.DataFrame, effect: float, gap_differences: Sequence[float] | None = None) -> str:
    """How many training seeds would settle the control contrasts, said with what it rests on: each control's own
    paired spread (standard deviation of its per-seed differences), the level of Holm's first step over the family,
    the symmetric − default spread for comparison (``gap_differences``, its per-seed differences), how uncertain a
    spread from so few seeds is (its 95% chi-square interval turned into seeds), what attributing half the gap
    would take, and that each new seed needs new default and symmetric runs. Chapter 5, "What the controls say"."""
    from scipy.stats import chi2

    if family.empty:
        return ""
    level = 0.05 / len(family)
    needed, spread = {}, {}
    for r in family.itertuples():
        diffs = np.asarray(r.result.differences, dtype=float)
        sd = float(np.std(diffs, ddof=1))
        n = _seeds_needed(effect, sd, level)
        if r.treatment not in needed or n > needed[r.treatment] or np.isnan(needed[r.treatment]):
            needed[r.treatment], spread[r.treatment] = n, (sd, len(diffs))
    def word(n: float) -> str:
        return "none (its differences do not vary)" if np.isnan(n) else _count(n)
    parts = [f"{c} {word(n)}" for c, n in needed.items()]
    text = (f"From each control's own paired spread, telling a gap the size of the symmetric init's "
            f"({format_number(abs(effect), decimals=4)} nats) from zero with 80% power at the level of "
            f"Holm's first step over these {len(family)} contrasts ({format_number(100 * level, decimals=2)}%) "
            f"would take, per control and for the harder of its two contrasts: " + ", ".join(parts) + " seeds.")
    if gap_differences is not None and len(gap_differences) >= 2:
        sd_gap = float(np.std(np.asarray(gap_differences, dtype=float), ddof=1))
        text += (f" With the spread of the symmetric − default differences instead, {word(_seeds_needed(effect, sd_gap, level))} "
                 "would do.")
    finite = {c: n for c, n in needed.items() if np.isfinite(n)}
    if finite:
        worst = max(finite, key=finite.get)
        sd, n_seeds = spread[worst]
        df = n_seeds - 1
        low = sd * np.sqrt(df / chi2.ppf(0.975, df))
        high = sd * np.sqrt(df / chi2.ppf(0.025, df))
        text += (f" A spread measured on {n_seeds} seeds is itself uncertain: its 95% interval puts the need for "
                 f"{worst} anywhere from {_count(_seeds_needed(effect, low, level))} to "
                 f"{_count(_seeds_needed(effect, high, level))} seeds. Telling apart a cause that carries half the "
                 f"gap takes about four times as many ({_count(_seeds_needed(effect / 2, sd, level))} for {worst}).")
    return text + (" Every new seed also needs new default and symmetric runs, since a control is paired only with "
                   "the runs of its own seed.")


def read_controls(family: pd.DataFrame, effect: float,
                  gap_differences: Sequence[float] | None = None) -> ControlReading:
    """The reading of ``family`` (:func:`control_family`) against the predictions, and how many seeds would settle
    each control (:func:`power_text`; ``effect`` is the symmetric init's own gap, ``gap_differences`` its per-seed
    differences).

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
    norm_matched = _reading(family, "norm-matched", "has not run yet",
                            like_default="the pattern the structure predicts, not the initial scale",
                            like_symmetric="the pattern the initial scale predicts",
                            neither="fits neither prediction",
                            tail=", so the initial scale is neither shown nor ruled out as the cause")
    return ControlReading(rotated, indefinite, power_text(family, effect, gap_differences), norm_matched)


def brief(family: pd.DataFrame) -> str:
    """The controls in one line, for a box of key results: how many differ detectably from each baseline after
    Holm's correction over ``family`` (:func:`control_family`), with n, naming those that do; a line that
    decides nothing says so. The page reads each control against its predictions (:func:`read_controls`)."""
    if family.empty:
        return "no control has run yet."
    controls = list(dict.fromkeys(family["treatment"]))
    seeds = sorted({int(v.interval.n) for v in family["judged"]})
    n = f"n = {seeds[0]} seeds each" if len(seeds) == 1 else f"n = {seeds[0]}–{seeds[-1]} seeds"
    found = {b: [c for c in controls if (v := _lookup(family, c, b)) is not None and v.outcome == "difference"]
             for b in ("default", "symmetric")}
    named = {b: f" ({', '.join(c)})" if c else "" for b, c in found.items()}
    verb = "differs" if len(found["default"]) == 1 else "differ"
    head = (f"of the {len(controls)} controls ({n}; Holm over {len(family)} contrasts), {len(found['default'])} "
            f"{verb} detectably from default{named['default']} and {len(found['symmetric'])} from "
            f"symmetric{named['symmetric']} in final loss")
    if not any(v.outcome == "difference" for v in family["judged"]):
        return head + ": none of them decides what causes the gap."
    return head + "."


def cause_line(family: pd.DataFrame) -> str:
    """What the controls say about the cause of the gain, in one plain sentence for a chapter's opening answer:
    whether any control start differs detectably from the default or the symmetric start after Holm's correction
    over ``family`` (:func:`control_family`), with n. Chapter 5."""
    if family.empty:
        return "Which property of the symmetric start helps is not tested yet: no control start has run."
    controls = list(dict.fromkeys(family["treatment"]))
    seeds = sorted({int(v.interval.n) for v in family["judged"]})
    n = f"n = {seeds[0]} seeds each" if len(seeds) == 1 else f"n = {seeds[0]} to {seeds[-1]} seeds"
    found = [f"{c} from {b}" for c in controls for b in ("default", "symmetric")
             if (v := _lookup(family, c, b)) is not None and v.outcome == "difference"]
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}.get(len(controls), str(len(controls)))
    if not found:
        return (f"Which property of the symmetric start helps is not settled: none of the {words} control starts, "
                f"each changing one property of it, differs detectably from the default or the symmetric start "
                f"({n}; Holm's correction over {len(family)} contrasts).")
    return (f"Of the {words} control starts, each changing one property of the symmetric one, these differ "
            f"detectably after Holm's correction over {len(family)} contrasts: {', '.join(found)} ({n}).")


# ================================================================================== specification curves
#: Horizons of the loss-gap curve: every logged step after this one (the gain appears late in the schedule).
CURVE_FIRST_STEP = 2000
#: Targets of the steps-to-target curve: shares of the horizon at which the baseline's mean loss is the target;
#: 1.0 is the baseline's final loss (the speed-up's own target, the pre-stated one).
TARGET_FRACTIONS = (0.25, 0.5, 0.75, 0.9, 1.0)


def loss_gap_claim(logs: pd.DataFrame, treatment: str = "symmetric", baseline: str = "default",
                   first_step: int = CURVE_FIRST_STEP, loss: str = "val_loss", arch: str = "encoder") -> Claim:
    """``treatment − baseline`` validation loss, paired by seed, at every logged step after ``first_step`` (and at
    the last, the pre-stated one), as a :class:`qkgeometry.claims.Claim`. Chapter 5, "How robust is the gain?"."""
    curve = tm.paired_curve(logs[logs["arch"] == arch], treatment, baseline, loss)
    curve = curve[curve["n"] >= 2]
    if curve.empty:
        raise ValueError(f"logs: no step has two seeds with both a {treatment!r} and a {baseline!r} run.")
    last = int(curve["step"].max())
    specs = []
    for r in curve[(curve["step"] > first_step) | (curve["step"] == last)].itertuples():
        iv = stats.Interval(r.diff_mean, r.ci_low, r.ci_high, int(r.n), unit="seed")
        specs.append(Specification("horizon", f"step {format_number(int(r.step))}", iv, primary=r.step == last))
    return Claim(f"{treatment} − {baseline} validation loss, nats", f"{treatment} has the higher loss",
                 f"{treatment} has the lower loss", tuple(specs))


def target_claim(logs: pd.DataFrame, treatment: str = "symmetric", baseline: str = "default",
                 fractions: Sequence[float] = TARGET_FRACTIONS, loss: str = "val_loss",
                 arch: str = "encoder") -> Claim:
    """``treatment − baseline`` steps to each target (:func:`qkgeometry.training.metrics.targets_table`), paired by
    seed over the training seeds where both runs reach it, as a :class:`qkgeometry.claims.Claim`; the baseline's final loss
    (fraction 1.0) is the pre-stated target. Targets that fewer than two seeds reach are listed in ``not_computed``.
    Chapter 5, "How robust is the gain?"."""
    if 1.0 not in fractions:
        raise ValueError("fractions: must include 1.0, the baseline's final loss (the pre-stated target).")
    table = tm.targets_table(logs, fractions, treatment, baseline, loss, arch)
    specs, missing = [], []
    for r in table.itertuples():
        share = format_number(r.fraction, spec=".0%")
        label = "the baseline's final loss" if r.fraction == 1.0 else f"its loss at {share} of the horizon"
        if r.diff is None:
            missing.append(f"{label} ({r.reached} of {r.n} seeds reach it)")
            continue
        specs.append(Specification("target", label, r.diff, primary=r.fraction == 1.0))
    if not any(s.primary for s in specs):
        raise ValueError("logs: fewer than two seeds reach the baseline's final loss, so the pre-stated target has "
                         "no interval.")
    return Claim(f"{treatment} − {baseline} steps to the target", f"{treatment} gets there later",
                 f"{treatment} gets there sooner", tuple(specs), tuple(missing), decimals=0)


def _step_of(spec: Specification) -> int:
    """The step of a horizon of :func:`loss_gap_claim` (its label is ``"step 2,100"``)."""
    return int(spec.label.rsplit(" ", 1)[-1].replace(",", ""))


@dataclass(frozen=True)
class GainAnswer:
    """The answer to "does the symmetric init speed up training?" in the pieces a page shows: ``head`` (the answer
    in a few plain words), ``loss`` (the final-loss gap), ``speed`` (the pre-stated measure of speed), ``horizons``
    (where along the schedule the loss gap is established) and ``text`` (all of it, as one paragraph)."""

    head: str
    loss: str
    speed: str
    horizons: str
    text: str


def gain_answer(final: stats.Verdict, gap: Claim, target: Claim, baseline_loss: float,
                early_step: int = 5000) -> GainAnswer:
    """The answer to "does the symmetric init speed up training?", from the numbers: the final-loss verdict
    (``final``, with the gap as a share of ``baseline_loss``), the pre-stated measure of speed (``target``, steps to
    the default runs' final loss, :func:`target_claim`) and the loss gap over the horizons (``gap``,
    :func:`loss_gap_claim`: where its interval includes 0, and how many of those horizons come before
    ``early_step``). "Speed-up" is said only when the steps to the target are established as fewer; the horizons are
    checkpoints of one learning-rate schedule, which the answer says. Chapter 5."""
    f = format_number
    gain = final.interval
    lower = final.outcome == "difference" and gain.estimate < 0
    faster = target.primary.established and target.primary.interval.estimate < 0
    slower = target.primary.established and target.primary.interval.estimate > 0
    tp = target.primary.interval
    steps = (f"{f(tp.estimate, decimals=0)} steps [{f(tp.low, decimals=0)}, {f(tp.high, decimals=0)}], "
             f"n = {tp.n} seeds that reach it")
    share = f(100 * abs(gain.estimate) / baseline_loss, decimals=1)
    loss_value = (f"{f(gain.estimate, decimals=4)} nats [{f(gain.low, decimals=4)}, {f(gain.high, decimals=4)}], "
                  f"{share}% of the loss, n = {gain.n} seeds")
    open_ = [s for s in gap.curve if not s.established]
    early = sum(_step_of(s) < early_step for s in open_)
    horizons = (f"the loss gap's interval includes 0 at {len(open_)} of the {len(gap.curve)} logged horizons after "
                f"step {f(CURVE_FIRST_STEP, decimals=0)}" + (f" ({early} of them before step {f(early_step, decimals=0)})"
                                                              if open_ else ""))
    if lower:
        loss = f"The symmetric start ends with a slightly lower validation loss ({loss_value})."
    elif final.outcome == "difference":
        loss = f"The symmetric start ends with a higher validation loss ({loss_value})."
    else:
        loss = f"The final validation losses do not differ detectably ({loss_value})."
    if faster:
        head = "Yes, on the measure of speed stated before the runs."
        speed = f"It reaches the default start's final loss sooner ({steps})."
    else:
        head = "Not shown as a speed-up at our scale." if lower else "No, not at our scale."
        speed = ("It reaches the default start's final loss later" if slower else
                 "It does not reach the default start's final loss detectably sooner") + f" ({steps})."
    text = (f"{head} {loss} {speed} Along the schedule, {horizons}; those horizons are checkpoints of one decaying "
            "learning-rate schedule, not shorter runs, so they do not show what a shorter training would gain.")
    return GainAnswer(head, loss, speed, horizons, text)
