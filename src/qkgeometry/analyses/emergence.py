"""Does a head's geometry change before its behaviour? The lags of chapter 8, their intervals over training seeds and
their specification curve.

For each run and role (the previous-token head of layer 0, the induction head of layer 1; picked by
:func:`qkgeometry.analyses.change_points.head_roles`), the **lag** is the step of the geometric change point minus
the step of the behavioural change point, both read from the same run (so the comparison is paired by training
seed). The primary geometric score of each role is fixed in :data:`GEOMETRY`; the behaviour is the role's chapter-7
score. Its mean over the training seeds whose head earned its label, with a t-interval, is the estimate of one
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
from ..formatting import count, plural
from .change_points import (
    ROLES,
    fraction_step,
    head_roles,
    net_change,
    null_band,
    steepest_step,
    threshold_step,
)

__all__ = ["GEOMETRY", "GEOMETRY_SCORES", "UNIT", "LagSpec", "ablation_summary", "control_summary",
           "copy_offset_summary", "lag_claim", "lags", "load_copy_offsets", "score_changes", "specifications"]

#: The primary geometric score of each role: the table of the head's form that its job needs (chapter 8, "What the
#: algebra predicts").
GEOMETRY = {"previous-token": "position_contrast", "induction": "composition_contrast"}
#: Every geometric score a run records per head (the book's two scores, the energies, the tables' scores).
GEOMETRY_SCORES = ("symmetry", "directionality", "energy_sym", "energy_skew", "position_symmetry",
                   "position_skew_share", "position_contrast", "token_symmetry", "token_contrast",
                   "composition_symmetry", "composition_contrast")
#: The unit of every interval of chapter 8: one run per training seed (a run with copies and its control share one).
UNIT = "training seed"


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


def lags(log: pd.DataFrame, steps: pd.DataFrame, role: str, spec: LagSpec, bands: dict[str, float] | None = None,
         roles: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per run: the role's head, its geometric and behavioural change points and the lag (geometry − behaviour),
    under ``spec``. ``log``: the recorded per-head rows of the runs (``run`` column); ``steps``: their per-layer
    rows. ``bands``: the null band of each geometric score (default :func:`null_band` of ``log``, per layer).
    Runs whose head did not earn its label are kept with ``labelled`` False and no lag. ``roles``: the
    :func:`~qkgeometry.analyses.change_points.head_roles` of ``log``, when already computed. Chapter 8."""
    layer, behaviour, threshold, _ = ROLES[role]
    score = spec.score or GEOMETRY[role]
    band = (bands or {}).get(score)
    if band is None:
        band = null_band(log, score, layer)
    roles = head_roles(log) if roles is None else roles
    roles = roles[roles["role"] == role]
    by_run = dict(tuple(log[log["layer"] == layer].groupby("run", sort=False)))
    steps_by_run = dict(tuple(steps.groupby("run", sort=False)))
    rows = []
    for _, r in roles.iterrows():
        run = by_run[r["run"]]
        head = run[run["head"] == r["head"]].sort_values("step")
        s = head["step"].to_numpy(dtype=float)
        run_steps = steps_by_run[r["run"]]
        if spec.unit == "layer":
            lay = run_steps[run_steps["layer"] == layer].sort_values("step")
            g = _step(lay["step"].to_numpy(dtype=float), lay[score].to_numpy(), spec.geometry, spec.window, band)
        else:
            g = _step(s, head[score].to_numpy(), spec.geometry, spec.window, band)
        if spec.behaviour == "loss":
            lay = run_steps[run_steps["layer"] == 0].sort_values("step")
            b = fraction_step(lay["step"].to_numpy(dtype=float), lay["in_context_loss"].to_numpy(), 0.5, spec.window)
        else:
            b = _step(s, head[behaviour].to_numpy(), spec.behaviour, spec.window, 0.0, threshold)
        ok = bool(r["labelled"])
        rows.append({"run": r["run"], "role": role, "head": int(r["head"]), "labelled": ok, "geometry_step": g,
                     "behaviour_step": b, "lag": (g - b) if ok else float("nan")})
    return pd.DataFrame(rows)


def lag_claim(log: pd.DataFrame, steps: pd.DataFrame, role: str, level: float = 0.95) -> tuple[Claim, pd.DataFrame]:
    """The :class:`~qkgeometry.claims.Claim` of one role's lag across :func:`specifications` (mean lag in steps
    over training seeds, t-interval), and the per-run lags of every specification (column ``spec``). Chapter 8."""
    bands = {score: null_band(log, score, ROLES[role][0]) for score in {GEOMETRY[role]}}
    roles = head_roles(log)
    curve, skipped, tables = [], [], []
    for spec in specifications():
        table = lags(log, steps, role, spec, bands, roles).assign(spec=spec.label)
        tables.append(table)
        values = table["lag"].dropna().to_numpy()
        if len(values) < 3:
            skipped.append(f"{spec.label}: a change point in fewer than 3 {plural(UNIT)}")
            if spec.primary:
                raise ValueError(f"the primary lag of the {role} head has fewer than 3 {plural(UNIT)} with both change "
                                 f"points ({len(values)}); no claim can be stated.")
            continue
        curve.append(Specification(spec.axis, spec.label, stats.t_interval(values, level, unit=UNIT),
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
                  level: float = 0.95, roles: pd.DataFrame | None = None) -> pd.DataFrame:
    """Which scores of the role's head move: per score, the net change from the first to the last logged step
    (smoothed, mean over the training seeds whose head earned its label, t-interval), the null band of freshly
    initialised heads, and whether the interval lies wholly outside the band. ``roles``: the :func:`head_roles` of ``log``,
    when already computed. Chapter 8."""
    layer = ROLES[role][0]
    roles = head_roles(log) if roles is None else roles
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
        iv = stats.t_interval(changes, level, unit=UNIT)
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


def load_runs(folder_or_name: str = "ch8-induction") -> tuple[pd.DataFrame, pd.DataFrame, dict[str, dict]]:
    """The recorded runs of chapter 8: ``(log, steps, provenance)`` with ``run``, ``data`` (repeat / no-repeat)
    and ``seed`` columns added; ``folder_or_name``: a recorded experiment's name or a folder of run folders.
    Chapter 8."""
    from pathlib import Path

    from ..recorded_runs import RecordedExperiment, read_record_csv, read_record_json, recorded

    path = Path(folder_or_name)
    rec = RecordedExperiment(path.name, path) if path.is_dir() else recorded(folder_or_name)
    logs, steps, provenance = [], [], {}
    for run, folder in rec.runs.items():
        prov = read_record_json(folder / "provenance.json", needs=("config",))
        cfg = prov["config"]
        extra = {"run": run, "data": cfg["data"], "seed": int(cfg["seed"])}
        logs.append(read_record_csv(folder / "log.csv").assign(**extra))
        steps.append(read_record_csv(folder / "steps.csv").assign(**extra))
        provenance[run] = prov
    if not logs:
        raise ValueError(f"{str(folder_or_name)!r} holds no recorded runs (no run folder with a log.csv).")
    return pd.concat(logs, ignore_index=True), pd.concat(steps, ignore_index=True), provenance


def load_copy_offsets(folder_or_name: str = "ch8-induction") -> tuple[pd.DataFrame, pd.DataFrame, dict[str, dict]]:
    """The recorded copy offsets of chapter 8 (its ``copy-offsets`` folder: runs trained again, see
    :mod:`qkgeometry.training.induction_offsets`): ``(offsets, ablation, provenance)`` with ``run`` and ``seed``
    columns added. Chapter 8, "Where the copying heads look"."""
    from pathlib import Path

    from ..recorded_runs import read_record_csv, read_record_json, recorded

    path = Path(folder_or_name)
    root = (path if path.is_dir() else Path(recorded(folder_or_name))) / "copy-offsets"
    offsets, ablation, provenance = [], [], {}
    for folder in sorted(root.glob("*/offsets.csv")):
        folder = folder.parent
        prov = read_record_json(folder / "provenance.json", needs=("config",))
        extra = {"run": folder.name, "seed": int(prov["config"]["seed"])}
        offsets.append(read_record_csv(folder / "offsets.csv").assign(**extra))
        ablation.append(read_record_csv(folder / "ablation.csv").assign(**extra))
        provenance[folder.name] = prov
    if not offsets:
        raise ValueError(f"{str(root)!r} holds no recorded copy offsets (no run folder with an offsets.csv).")
    return pd.concat(offsets, ignore_index=True), pd.concat(ablation, ignore_index=True), provenance


def copy_offset_summary(offsets: pd.DataFrame, layer: int = 1, step: int | None = None, inputs: str = "copies",
                        level: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Where one layer's heads look at ``step`` (default: the last recorded step). Returns ``(per_seed, over)``:
    per run and offset, the mean attention of the layer's heads (``attention``; also its smallest and largest
    head) and its chance level; over runs, per offset, the mean of the per-run values with its t-interval
    (``low``, ``high``, ``n``; unit: training seed). Chapter 8, "Where the copying heads look"."""
    f = offsets[(offsets["layer"] == layer) & (offsets["inputs"] == inputs)]
    if not len(f):
        raise ValueError(f"offsets: no rows for layer {layer} on {inputs!r}.")
    step = int(f["step"].max()) if step is None else int(step)
    f = f[f["step"] == step]
    if not len(f):
        raise ValueError(f"step: {step} was not recorded.")
    per_seed = (f.groupby(["run", "seed", "offset"], as_index=False)
                .agg(attention=("attention", "mean"), lowest_head=("attention", "min"),
                     highest_head=("attention", "max"), chance=("chance", "first")))
    rows = []
    for offset, g in per_seed.groupby("offset"):
        iv = stats.t_interval(g["attention"].to_numpy(), level=level, unit=UNIT)
        rows.append({"offset": int(offset), "attention": iv.estimate, "low": iv.low, "high": iv.high, "n": iv.n,
                     "chance": float(g["chance"].mean())})
    return per_seed, pd.DataFrame(rows)


def ablation_summary(ablation: pd.DataFrame, level: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """How much each head's output serves the copying: per run, layer and head, the rise of the in-context loss
    (and of the other tokens' loss) when that head alone is zeroed; per layer, the mean over runs of the mean rise
    of its heads with its t-interval (unit: training seed), and the smallest and largest rise of any one head.
    Returns ``(per_head, per_layer)``. Chapter 8, "Where the copying heads look"."""
    base = ablation[ablation["layer"].isna()].set_index("run")[["in_context_loss", "other_loss"]]
    heads = ablation.dropna(subset=["layer"]).astype({"layer": int, "head": int})
    if not len(base) or not len(heads):
        raise ValueError("ablation: needs, per run, a row with no head zeroed and one row per zeroed head.")
    per_head = heads.assign(
        rise=heads["in_context_loss"].to_numpy() - base.loc[heads["run"], "in_context_loss"].to_numpy(),
        other_rise=heads["other_loss"].to_numpy() - base.loc[heads["run"], "other_loss"].to_numpy())
    rows = []
    for layer, g in per_head.groupby("layer"):
        iv = stats.t_interval(g.groupby("run")["rise"].mean().to_numpy(), level=level, unit=UNIT)
        rows.append({"layer": int(layer), "rise": iv.estimate, "low": iv.low, "high": iv.high, "n": iv.n,
                     "smallest": float(g["rise"].min()), "largest": float(g["rise"].max()),
                     "other_rise": float(g["other_rise"].mean())})
    return per_head, pd.DataFrame(rows)


def cross_layer_lags(log: pd.DataFrame, steps: pd.DataFrame, window: int = 5) -> pd.DataFrame:
    """Per run whose induction head earned its label: the step at which that head's composition contrast is 50% of
    the way (geometry of layer 1) minus the step at which the previous-token head's score is 50% of the way
    (behaviour of layer 0). Prediction 4 of chapter 8: positive."""
    band = null_band(log, GEOMETRY["induction"], ROLES["induction"][0])
    roles = head_roles(log)
    rows = []
    for run, part in roles.groupby("run", sort=False):
        prev = part[part["role"] == "previous-token"].iloc[0]
        ind = part[part["role"] == "induction"].iloc[0]
        if not (prev["labelled"] and ind["labelled"]):
            continue
        h0 = log[(log["run"] == run) & (log["layer"] == 0) & (log["head"] == prev["head"])].sort_values("step")
        h1 = log[(log["run"] == run) & (log["layer"] == 1) & (log["head"] == ind["head"])].sort_values("step")
        g = fraction_step(h1["step"].to_numpy(dtype=float), h1[GEOMETRY["induction"]].to_numpy(), 0.5, window, band)
        b = fraction_step(h0["step"].to_numpy(dtype=float), h0["previous"].to_numpy(), 0.5, window)
        rows.append({"run": run, "lag": g - b})
    return pd.DataFrame(rows, columns=["run", "lag"])


def predictions(log: pd.DataFrame, steps: pd.DataFrame, control_log: pd.DataFrame | None,
                control_steps: pd.DataFrame | None, min_seeds: int = 8, claims: dict[str, Claim] | None = None
                ) -> pd.DataFrame:
    """Each prediction stated before the runs (the recorded runs' notes), what was observed, and a verdict:
    "right", "wrong", "not detected" or "not testable" (with why). ``log``/``steps``: the runs with copies;
    ``control_*``: the runs without; ``claims``: the roles' :func:`lag_claim` claims, when already computed.
    Chapter 8, "What the predictions got right"."""
    rows = []

    def add(number: str, text: str, verdict: str, observed: str) -> None:
        rows.append({"prediction": number, "statement": text, "observed": observed, "verdict": verdict})

    roles = head_roles(log)
    tables: dict[str, pd.DataFrame] = {}

    def change(role: str, score: str) -> pd.Series | None:
        if role not in tables:
            tables[role] = score_changes(log, role, roles=roles).set_index("score")
        return tables[role].loc[score] if score in tables[role].index else None

    def words(row: pd.Series) -> str:
        return (f"net change {stats.format_number(row['change'], decimals=2)} "
                f"[{stats.format_number(row['low'], decimals=2)}, {stats.format_number(row['high'], decimals=2)}], "
                f"band ±{stats.format_number(row['band'], decimals=2)}, {count(int(row['n']), UNIT)}")

    labelled = roles.groupby("role")["labelled"].sum()
    n_runs = roles["run"].nunique()
    for role, score, direction, number, text in (
            ("previous-token", "position_contrast", 1, "1a", "the previous-token head's position-table shift "
                                                            "contrast rises"),
            ("induction", "composition_contrast", 1, "2a", "the induction head's composition-table contrast rises"),
            ("induction", "token_contrast", 0, "2b", "the induction head's token-table contrast does not move"),
            ("induction", "composition_symmetry", 1, "2c", "the induction head's composition table turns more "
                                                          "symmetric")):
        if labelled.get(role, 0) < (min_seeds if role == "induction" else 2):
            add(number, text, "not testable", f"{int(labelled.get(role, 0))} of {n_runs} {plural(UNIT)} have a labelled "
                                              f"{role} head")
            continue
        row = change(role, score)
        if row is None:
            add(number, text, "not testable", f"{score} was not recorded")
            continue
        if direction == 0:
            ok = not row["moves"]
        else:
            ok = bool(row["moves"]) and np.sign(row["change"]) == direction
        add(number, text, "right" if ok else "wrong", words(row))
    # 1b: the position table's symmetry stays near 0 (within the band of freshly initialised heads)
    prev = roles[(roles["role"] == "previous-token") & roles["labelled"]]
    finals = []
    for _, r in prev.iterrows() if "position_symmetry" in log else ():
        head = log[(log["run"] == r["run"]) & (log["layer"] == 0) & (log["head"] == r["head"])]
        finals.append(float(head.loc[head["step"].idxmax(), "position_symmetry"]))
    text = "the previous-token head's position table stays neither symmetric nor skew (symmetry near 0)"
    if "position_symmetry" not in log:
        add("1b", text, "not testable", "the position table's symmetry was not recorded")
    elif len(finals) >= 2:
        band = null_band(log, "position_symmetry", 0)
        iv = stats.t_interval(finals, unit=UNIT)
        ok = -band < iv.low and iv.high < band
        add("1b", text, "right" if ok else "wrong",
            f"final symmetry {stats.format_number(iv.estimate, decimals=2)} [{stats.format_number(iv.low, decimals=2)}, "
            f"{stats.format_number(iv.high, decimals=2)}] against the band ±{stats.format_number(band, decimals=2)}, "
            f"{count(iv.n, UNIT)}")
    else:
        add("1b", text, "not testable", "fewer than 2 labelled previous-token heads")
    # 3: geometry first, for each role
    for role, number in (("previous-token", "3a"), ("induction", "3b")):
        text = f"the {role} head's geometry changes before its behaviour (lag < 0)"
        if labelled.get(role, 0) < (min_seeds if role == "induction" else 3):
            add(number, text, "not testable", f"{int(labelled.get(role, 0))} of {n_runs} {plural(UNIT)} have a labelled "
                                              f"{role} head")
            continue
        claim = (claims or {}).get(role) or lag_claim(log, steps, role)[0]
        iv = claim.primary.interval
        verdict = "right" if iv.high < 0 else "wrong" if iv.low > 0 else "not detected"
        add(number, text, verdict, f"mean lag {stats.format_number(iv.estimate, decimals=0)} "
                                   f"[{stats.format_number(iv.low, decimals=0)}, {stats.format_number(iv.high, decimals=0)}] "
                                   f"steps, {count(iv.n, UNIT)}; the curve {claim.brief}")
    # 4: across layers
    cross = cross_layer_lags(log, steps)["lag"].dropna()
    text = "the induction head's composition changes after the previous-token head's behaviour"
    if len(cross) >= 3 and labelled.get("induction", 0) >= min_seeds:
        iv = stats.t_interval(cross.to_numpy(), unit=UNIT)
        verdict = "right" if iv.low > 0 else "wrong" if iv.high < 0 else "not detected"
        add("4", text, verdict, f"{stats.format_number(iv.estimate, decimals=0)} "
                                f"[{stats.format_number(iv.low, decimals=0)}, {stats.format_number(iv.high, decimals=0)}] "
                                f"steps, {count(iv.n, UNIT)}")
    else:
        add("4", text, "not testable", f"{int(labelled.get('induction', 0))} of {n_runs} {plural(UNIT)} have a labelled "
                                       "induction head")
    # 5: the control
    if control_log is not None and control_steps is not None and len(control_log):
        summary = control_summary(control_log, control_steps)
        gap = (summary["in_context_loss"] - summary["other_loss"]).to_numpy()
        ind = int(summary["induction_labelled"].sum())
        prev_ok = int(summary["previous_labelled"].sum())
        iv = stats.t_interval(gap, unit="run") if len(gap) >= 2 else None
        flat = iv is not None and iv.low < 0 < iv.high
        add("5", "without copies: no induction label, in-context loss at the other tokens' loss, a previous-token "
                 "head as before", "right" if (ind == 0 and flat and prev_ok == len(summary)) else "wrong",
            f"{ind} of {len(summary)} control runs have a head with the induction label, {prev_ok} one with the "
            f"previous-token label; in-context "
            f"minus other loss " + (f"{stats.format_number(iv.estimate, decimals=3)} "
                                    f"[{stats.format_number(iv.low, decimals=3)}, {stats.format_number(iv.high, decimals=3)}]"
                                    if iv is not None else "not estimable") + " nats")
    return pd.DataFrame(rows).sort_values("prediction", kind="stable", ignore_index=True)


#: The induction heads of Pythia-1B that Xu (2026, arXiv:2606.02378) names, as (layer, head).
PYTHIA_1B_INDUCTION = ((4, 4), (7, 0), (7, 1))


def named_heads(frame: pd.DataFrame, heads: tuple[tuple[int, int], ...] = PYTHIA_1B_INDUCTION) -> pd.DataFrame:
    """The named ``heads`` (layer, head) of a per-head trajectory (``qkgeometry.trajectory(source, per="head")``:
    one training run across its checkpoints, such as Pythia's ``step0`` … ``step143000`` branches, of which only the
    Q/K bytes are read; ``qkgeometry.trajectory_plan`` shows them first): one row per (step, layer, head) with both
    scores. ValueError names the heads the run does not have. Chapter 8, "Real checkpoints"."""
    keep = frame[[(int(layer), int(head)) in set(heads) for layer, head in zip(frame["layer"], frame["head"])]]
    missing = set(heads) - {(int(a), int(b)) for a, b in zip(keep["layer"], keep["head"])}
    if missing:
        raise ValueError(f"heads: {sorted(missing)} are not heads of this run.")
    return keep[["step", "layer", "head", "symmetry", "directionality"]].sort_values(
        ["layer", "head", "step"]).reset_index(drop=True)
