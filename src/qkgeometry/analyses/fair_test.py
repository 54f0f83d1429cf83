"""Chapter 3's fair test read as its recordings state it in advance: the recordings joined into one experiment, the
learning rule, the family of contrasts, the mask-or-density decision and the matched-learning estimand. Chapter 3,
"A fair test" and "Mask or loss density?".

The estimand (fixed before the runs): for each run, the change of a score from the initialisation that every arm of
a seed shares, summarised by the median over units (the layer's form ``Σ_h W_Q^h W_K^hᵀ`` carries the verdicts,
each head beside it); contrasts are paired by training seed and read as one Holm family
(:func:`qkgeometry.stats.judge_family`).

* :func:`read_fair_test` joins recordings of different arms (one folder per arm, each read by
  :func:`~qkgeometry.training.objective_runs.read_recorded`) after checking that they are one experiment: the same
  configuration and data, and the same initialisation for every seed (identical step-0 scores in every arm);
* :func:`plateaus` and :func:`learning_table` give each objective's plateau and whether it learns by the rule;
* :func:`contrast_family` judges a family of paired contrasts; :data:`FAMILY` is the recorded plan's family;
* the pre-stated decision rules that read the family (what carries a gap) are in
  :mod:`qkgeometry.analyses.carriers`;
* :func:`matched_steps` and :func:`matched_summaries` give the secondary estimand: each run read at the first
  logged step where its loss is :data:`MATCHED_LEVEL` of its plateau below it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import stats
from ..claims import Claim, Specification, change_words
from ..formatting import format_number
from ..training.config import ALL_OBJECTIVES, AUTHORS_DECODER, SPARSE_CAUSAL

if TYPE_CHECKING:
    import pandas

__all__ = [
    "ARMS",
    "CURVE_FIRST_STEP",
    "CURVE_LEVELS",
    "FAMILY",
    "FAMILY_WITH_SUPERVISION",
    "LEARNING_FLOOR",
    "MATCHED_LEVEL",
    "OBJECTIVE_PROSE",
    "OBJECTIVE_SHORT",
    "OUTCOME_WORDS",
    "SCORES",
    "SUPERVISED_CAUSAL",
    "UNVERIFIABLE",
    "WAYS",
    "Contrast",
    "change_claims",
    "contrast_family",
    "family_table",
    "learning_table",
    "matched_steps",
    "matched_summaries",
    "plateaus",
    "read_fair_test",
    "read_supervision_arm",
    "specification_claims",
    "trajectory_rows",
]

#: The two scores, in the order every table lists them.
SCORES = ("symmetry", "directionality")
#: The sixth arm: the dense causal LM (every position carries loss) with the batch cut from 16 sequences to 2, so that
#: each step is supervised by about as many targets as the sparse arm's (126 against 149). It is the objective
#: ``"causal"`` at another batch size; :func:`read_supervision_arm` labels its runs with this name so that they never
#: mix with the batch-16 causal LM. Chapter 3, "Share of positions or supervision per step?".
SUPERVISED_CAUSAL = "causal-supervision"
#: The supervision-matched arm's batch, in sequences, fixed in its plan (the other arms' batch is 16).
SUPERVISION_BATCH = 2
#: Every arm of the fair test: the objectives, then the supervision-matched arm.
ARMS = (*ALL_OBJECTIVES, SUPERVISED_CAUSAL)
#: How each arm is named in a sentence.
OBJECTIVE_PROSE = {"causal": "causal LM", "mlm": "masked LM", "rtd": "replaced-token-detection objective",
                   AUTHORS_DECODER: "authors' decoder objective",
                   SPARSE_CAUSAL: "causal LM with the masked LM's loss density",
                   SUPERVISED_CAUSAL: "causal LM at the sparse loss's supervision per step"}
#: How each arm is named in a narrow table column.
OBJECTIVE_SHORT = {"causal": "causal", "mlm": "MLM", "rtd": "RTD", AUTHORS_DECODER: "authors' decoder",
                   SPARSE_CAUSAL: "causal, sparse loss", SUPERVISED_CAUSAL: "causal, batch 2"}
#: The verdict words of a table.
OUTCOME_WORDS = {"difference": "difference", "suggested": "suggested", "none": "none detected",
                 "below floor": "below the floor"}
#: The words for a positive and a negative change of each score.
WAYS = {"symmetry": ("toward symmetric", "toward skew"),
        "directionality": ("toward the query side", "toward the key side")}
#: The verdict family, as (treated, baseline) pairs, each read for both scores: the causal LM against the masked LM,
#: the mask at equal loss density, the loss density with the causal mask held fixed, and the authors' decoder
#: objective against the masked LM.
FAMILY = (("causal", "mlm"), (SPARSE_CAUSAL, "mlm"), ("causal", SPARSE_CAUSAL), (AUTHORS_DECODER, "mlm"))
#: The family once the supervision-matched arm is in (fixed before its runs): the four pairs of :data:`FAMILY`, then
#: the share of positions with loss at matched supervision, and the supervision per step with every position
#: carrying loss.
FAMILY_WITH_SUPERVISION = (*FAMILY, (SUPERVISED_CAUSAL, SPARSE_CAUSAL), ("causal", SUPERVISED_CAUSAL))
#: Contrasts with an objective that may fail the learning rule; reported beside the family, never in it, when it does.
UNVERIFIABLE = (("causal", "rtd"),)
#: An objective learns when its end loss lies, across its whole 95% interval, this share of its plateau below it.
LEARNING_FLOOR = 0.02
#: The matched-learning level: a run is read at the first logged step whose loss is this share of its plateau below it.
MATCHED_LEVEL = 0.05


# ================================================================================================ reading
def read_fair_test(*folders: str | os.PathLike) -> tuple[pandas.DataFrame, pandas.DataFrame, dict]:
    """``(scores, gradients, provenance)`` of one or more recordings of the fair test, read as one experiment.

    Each folder is a recording of :func:`~qkgeometry.training.objective_runs.record_runs` (or a folder of such
    folders, one per seed). They must share the configuration, the vocabulary and the data, hold different
    objectives, and start every seed they share from the same initialisation: the step-0 scores of every layer and
    head agree across all arms of a seed (ValueError otherwise: such runs are not paired). Only seeds present in
    every folder are kept. The provenance is the first folder's, with ``objectives`` (in :data:`ALL_OBJECTIVES`
    order), ``seeds``, ``runs_done``/``runs_total`` and ``wall_seconds`` over all folders and ``recordings`` (one
    provenance per folder).
    """
    import pandas as pd

    from ..training.objective_runs import read_recorded

    if not folders:
        raise ValueError("folders: name at least one recording of the fair test.")
    read = [read_recorded(f) for f in folders]
    provs = [p for _, _, p in read]
    for key in ("config", "vocab_size"):
        if len({repr(p.get(key)) for p in provs}) > 1:
            raise ValueError(f"folders: the recordings differ in `{key}`, so they are not one experiment; read them "
                             "separately.")
    if len({p["data"]["fingerprint"] for p in provs}) > 1:
        raise ValueError("folders: the recordings read different data (tokenizer or corpus), so their runs are not "
                         "paired; read them separately.")
    objectives = [o for p in provs for o in p["objectives"]]
    if len(objectives) != len(set(objectives)):
        raise ValueError(f"folders: an objective is recorded in more than one of them ({objectives}); keep one.")
    seeds = sorted(set.intersection(*(set(p["seeds"]) for p in provs)))
    if not seeds:
        raise ValueError("folders: the recordings share no seed, so no run can be paired.")
    scores = pd.concat([s[s["seed"].isin(seeds)] for s, _, _ in read], ignore_index=True)
    grads = pd.concat([g[g["seed"].isin(seeds)] for _, g, _ in read], ignore_index=True)
    start = scores[scores["step"] == 0].set_index(["seed", "layer", "head", "objective"])[list(SCORES)]
    spread = start.groupby(level=["seed", "layer", "head"]).agg(lambda v: float(np.ptp(v.to_numpy())))
    values = spread.to_numpy()
    if np.isnan(values).any() or float(np.nanmax(values, initial=0.0)) > 1e-5:  # CSVs keep six significant digits
        off = (spread.isna() | (spread > 1e-5)).any(axis=1).to_numpy()
        bad = sorted({int(v) for v in spread.index.get_level_values("seed")[off]})
        raise ValueError(f"folders: the arms do not share their initialisation (step-0 scores differ, or are "
                         f"missing, for seeds {bad}), so they cannot be paired by seed.")
    merged = dict(provs[0])
    merged.update(objectives=[o for o in ALL_OBJECTIVES if o in objectives], seeds=seeds,
                  runs_done=sum(p["runs_done"] for p in provs), runs_total=sum(p["runs_total"] for p in provs),
                  wall_seconds=round(sum(p["wall_seconds"] for p in provs), 1), recordings=provs)
    return scores, grads, merged


def read_supervision_arm(folder: str | os.PathLike, scores: pandas.DataFrame, provenance: Mapping
                         ) -> tuple[pandas.DataFrame, pandas.DataFrame, dict]:
    """``(scores, gradients, provenance)`` of the supervision-matched arm (one folder per seed, recorded by
    ``qkgeometry train-objectives --objectives causal --batch-size 2``), checked against the fair test it joins.

    ``scores``/``provenance``: :func:`read_fair_test` of the other arms. The recording must hold the objective
    ``"causal"`` alone, share the other arms' configuration in everything but the batch size (which must be
    smaller), read the same data, and start every seed from the same initialisation (identical step-0 scores):
    ValueError naming what differs otherwise. Its runs come back labelled :data:`SUPERVISED_CAUSAL`, only for the
    seeds both recordings hold, with ``val_loss`` where it was logged. Chapter 3, "Share of positions or
    supervision per step?".
    """
    from ..training.objective_runs import read_recorded

    arm, grads, prov = read_recorded(folder)
    if prov.get("objectives") != ["causal"]:
        raise ValueError(f"folder: {folder} records {prov.get('objectives')}; the supervision-matched arm is the "
                         "objective 'causal' alone (train-objectives --objectives causal).")
    ours, theirs = dict(prov["config"]), dict(provenance["config"])
    if not ours.get("batch_size", 0) < theirs.get("batch_size", 0):
        raise ValueError(f"folder: its batch size ({ours.get('batch_size')}) is not smaller than the fair test's "
                         f"({theirs.get('batch_size')}); this reader is for the arm whose batch was cut.")
    differ = sorted(k for k in set(ours) | set(theirs) if k != "batch_size" and ours.get(k) != theirs.get(k))
    if differ:
        raise ValueError(f"folder: its configuration differs from the fair test's in {differ}, not in the batch size "
                         "alone, so its runs are not paired with the other arms; read it separately.")
    if prov["data"]["fingerprint"] != provenance["data"]["fingerprint"]:
        raise ValueError("folder: the recording reads other data (tokenizer or corpus) than the fair test, so its "
                         "runs are not paired; read it separately.")
    seeds = sorted(set(prov["seeds"]) & set(provenance["seeds"]))
    if not seeds:
        raise ValueError("folder: the recording shares no seed with the fair test, so no run can be paired.")
    arm = arm[arm["seed"].isin(seeds)].assign(objective=SUPERVISED_CAUSAL)
    grads = grads[grads["seed"].isin(seeds)].assign(objective=SUPERVISED_CAUSAL)
    keys = ["seed", "layer", "head"]
    mine = arm[arm["step"] == 0].set_index(keys)[list(SCORES)]
    other = scores[(scores["step"] == 0) & scores["seed"].isin(seeds)].groupby(keys)[list(SCORES)].first()
    gap = (mine - other.reindex(mine.index)).abs().max(axis=1)
    if gap.isna().any() or float(gap.max()) > 1e-5:  # the CSVs keep six significant digits
        bad = sorted(set(gap[gap.isna() | (gap > 1e-5)].index.get_level_values("seed")))
        raise ValueError(f"folder: seeds {bad} do not start from the fair test's initialisation (step-0 scores "
                         "differ), so they cannot be paired by seed.")
    merged = dict(prov)
    merged["seeds"] = seeds
    return arm, grads, merged


# =============================================================================================== learning
def plateaus(data, cfg, n_batches: int = 20) -> dict[str, float]:
    """The loss of a model that ignores the context, per objective: the unigram cross-entropy of the validation
    tokens for the language-model objectives, and for replaced-token detection the binary entropy of its
    replacement rate (measured on ``n_batches`` batches of seed 0). ``data``: a
    :class:`~qkgeometry.training.data.TokenData`; ``cfg``: the runs' :class:`ObjectiveConfig`."""
    from ..training.data import train_block
    from ..training.objective_batches import make_objective_batch, unigram_probs

    unigram = unigram_probs(data.train, data.vocab_size)
    rate = float(np.mean([
        make_objective_batch(train_block(data.train, cfg.seq_len, cfg.batch_size, 0, k), "rtd", data.vocab_size, 0,
                             k, cfg.mask_prob, unigram).labels.float().mean()
        for k in range(n_batches)]))
    out = {o: float(data.unigram_loss()) for o in ARMS}
    out["rtd"] = float(-(rate * np.log(rate) + (1 - rate) * np.log(1 - rate)))
    return out


def learning_table(per_run: pandas.DataFrame, plateau: Mapping[str, float], step: int | None = None,
                   floor: float = LEARNING_FLOOR) -> pandas.DataFrame:
    """One row per objective: its plateau, the mean end loss, the gap below the plateau (a t-interval over seeds)
    and whether it learns (the whole interval more than ``floor`` of the plateau below it).

    ``per_run``: :func:`~qkgeometry.training.objective_runs.seed_summaries` with ``step="all"``; ``step``: the step
    read (default: the last logged one). Columns ``objective, plateau, end_loss, gap (Interval), share, learned``.
    """
    import pandas as pd

    step = int(per_run["step"].max()) if step is None else int(step)
    rows = []
    for objective, runs in per_run[per_run["step"] == step].groupby("objective", sort=False):
        p = float(plateau[objective])
        gap = stats.t_interval(p - runs.sort_values("seed")["loss"].to_numpy(), unit="seed")
        rows.append({"objective": objective, "plateau": p, "end_loss": p - gap.estimate, "gap": gap,
                     "share": gap.estimate / p, "learned": bool(gap.low > floor * p)})
    return pd.DataFrame(rows)


# ============================================================================================== contrasts
@dataclass(frozen=True)
class Contrast:
    """One paired contrast ``treated − baseline`` of one score and its verdict within its family."""

    treated: str
    baseline: str
    score: str
    difference: stats.PairedDifference
    verdict: stats.Verdict
    #: What a positive and a negative difference say (:func:`change_claims`), whatever the verdict.
    words: tuple[str, str] = ("", "")

    @property
    def key(self) -> tuple[str, str, str]:
        return self.treated, self.baseline, self.score

    @property
    def direction(self) -> str:
        """The words of the estimate's sign, with no verdict attached (for naming a gap, not for judging it)."""
        return self.words[0] if self.difference.interval.estimate > 0 else self.words[1]

    @property
    def is_difference(self) -> bool:
        return self.verdict.outcome == "difference"


def _paired(frame: pandas.DataFrame, a: str, b: str, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The values of ``column`` for objectives ``a`` and ``b``, aligned by seed; seeds missing (or NaN) in either
    are left out."""
    wide = frame[frame["objective"].isin([a, b])].pivot(index="seed", columns="objective", values=column)
    missing = [o for o in (a, b) if o not in wide.columns]
    if missing:
        raise ValueError(f"frame: no runs of {missing} in it; it holds {sorted(frame['objective'].unique())}.")
    wide = wide[[a, b]].dropna()
    return wide[a].to_numpy(), wide[b].to_numpy()


def change_claims(a: str, b: str, score: str, mean_a: float, mean_b: float) -> tuple[str, str]:
    """The two claims (for ``a − b`` > 0 and < 0) of a contrast of *changes* between two arms, worded from where
    each arm moves (:func:`qkgeometry.claims.change_words`, with the arms' names and the score's directions).

    >>> change_claims("causal", "mlm", "symmetry", 0.016, 0.19)[1]
    "the causal LM's symmetry rises less than the masked LM's (toward symmetric)"
    >>> change_claims("causal", "mlm", "directionality", -0.46, -0.16)[1]
    "the causal LM's directionality falls further than the masked LM's (toward the key side)"
    """
    return change_words(OBJECTIVE_PROSE[a], OBJECTIVE_PROSE[b], score, *WAYS[score], mean_a, mean_b)


def contrast_family(summaries: pandas.DataFrame, pairs: Sequence[tuple[str, str]] = FAMILY,
                    column: str = "{score}_change", claims=None, alpha: float = 0.05,
                    symbol: str = "Δ{s}") -> dict[tuple[str, str, str], Contrast]:
    """Every ``(treated, baseline)`` of ``pairs`` for both scores, paired by seed, judged as one Holm family.

    ``summaries``: one row per (objective, seed) (:func:`~qkgeometry.training.objective_runs.seed_summaries` or
    :func:`matched_summaries`); ``column``: the value compared, ``{score}`` filled in. ``claims(a, b, score, mean_a,
    mean_b)`` gives the (larger, smaller) claims; by default :func:`change_claims`. ``symbol`` names the compared
    quantity in the sentences, ``{s}`` filled in with the score's initial: ``"Δ{s}"`` (Δs, Δd) for a change
    from the initialisation, another symbol for a level (chapter 3 writes ``"{s}(∇W)"``, s(∇W) and d(∇W), for the
    scores of a one-step gradient). Returns the contrasts keyed by ``(treated, baseline, score)``, in ``pairs`` order.
    """
    claims = claims or change_claims
    items, comparisons = [], []
    for a, b in pairs:
        for score in SCORES:
            va, vb = _paired(summaries, a, b, column.format(score=score))
            diff = stats.paired_difference(va, vb)
            words = claims(a, b, score, float(va.mean()), float(vb.mean()))
            items.append((a, b, score, diff, words))
            subject = f"{symbol.format(s=score[0])} ({OBJECTIVE_SHORT[a]} − {OBJECTIVE_SHORT[b]})"
            comparisons.append((diff, *words, subject))
    verdicts = stats.judge_family(comparisons, alpha=alpha)
    return {(a, b, s): Contrast(a, b, s, d, v, tuple(w)) for (a, b, s, d, w), v in zip(items, verdicts)}


def _p_text(p: float | None) -> str:
    return "" if p is None else stats.format_p(p).replace("p = ", "").replace("p ", "")


def family_table(family: Mapping[tuple[str, str, str], Contrast],
                 per_head: Mapping[tuple[str, str, str], Contrast] | None = None) -> pandas.DataFrame:
    """The page's table of a family: one row per contrast with ``contrast, score, layer`` (the interval), ``signs``
    (seeds each way), ``holm`` (adjusted p), ``outcome`` (words) and, with ``per_head``, ``head`` and ``holm_head``."""
    import pandas as pd

    rows = []
    for key, c in family.items():
        d = c.difference
        row = {"contrast": f"{OBJECTIVE_SHORT[c.treated]} − {OBJECTIVE_SHORT[c.baseline]}", "score": f"Δ{c.score[0]}",
               "layer": d.interval.format(), "signs": f"{d.n_positive} + / {d.n_negative} −",
               "holm": _p_text(c.verdict.p_adjusted), "outcome": OUTCOME_WORDS[c.verdict.outcome]}
        if per_head is not None:
            h = per_head[key]
            row.update(head=h.difference.interval.format(), holm_head=_p_text(h.verdict.p_adjusted))
        rows.append(row)
    return pd.DataFrame(rows)


# ======================================================================================= matched learning
def matched_steps(per_run: pandas.DataFrame, plateau: Mapping[str, float], level: float = MATCHED_LEVEL
                  ) -> pandas.DataFrame:
    """The first logged step (> 0) at which each run's logged loss is at least ``level`` of its plateau below it.

    ``per_run``: :func:`~qkgeometry.training.objective_runs.seed_summaries` with ``step="all"`` (the logged loss is
    the mean training loss since the previous log). Returns ``objective, seed, step`` with ``step`` NaN for a run that
    never reaches the level (it is then left out of every matched contrast, not imputed).
    """
    if not 0 < level < 1:
        raise ValueError(f"level: a share of the plateau strictly between 0 and 1; got {level!r}.")
    runs = per_run[per_run["step"] > 0]
    unknown = sorted(set(runs["objective"]) - set(plateau))
    if unknown:
        raise ValueError(f"plateau: no plateau for {unknown}; pass one per objective (see plateaus()).")
    target = runs["objective"].map(plateau) * (1 - level)
    reached = runs[runs["loss"] <= target]
    first = reached.groupby(["objective", "seed"])["step"].min()
    every = runs[["objective", "seed"]].drop_duplicates().set_index(["objective", "seed"])
    return every.join(first).reset_index()


def matched_summaries(per_run: pandas.DataFrame, steps: pandas.DataFrame) -> pandas.DataFrame:
    """``per_run`` read at each run's matched step (:func:`matched_steps`): one row per (objective, seed), with the
    columns of ``per_run`` (``{score}_change`` the change from the initialisation to that step); NaN for runs that
    never reach the level."""
    keyed = steps.rename(columns={"step": "matched_step"})
    out = per_run.merge(keyed, on=["objective", "seed"], how="right")
    hit = out[out["step"] == out["matched_step"]]
    missing = keyed[~keyed.set_index(["objective", "seed"]).index.isin(hit.set_index(["objective", "seed"]).index)]
    import pandas as pd

    return (pd.concat([hit.drop(columns="matched_step"), missing.rename(columns={"matched_step": "step"})],
                      ignore_index=True)
            .sort_values(["objective", "seed"], ignore_index=True))


def trajectory_rows(scores: pandas.DataFrame, cfg, objectives: Sequence[str] = ("mlm", "causal"),
                    paper: pandas.DataFrame | None = None, paper_size: str = "bert-small") -> pandas.DataFrame:
    """The chapter's runs as trajectories, for :func:`qkgeometry.plotting.trajectory.trajectory_curves`: one run per
    objective (its layer rows over every seed, spread over seeds, with the model's shapes for the null band) and,
    with ``paper`` (:func:`qkgeometry.catalogue.paper_per_layer` of ``"custom-models"``), the authors' encoder and
    decoder runs of ``paper_size`` (spread over their datasets; no null band, their shapes are not in their
    files). Chapter 3, "Scores across training"."""
    import pandas as pd

    layer_rows = scores[scores["head"] < 0]
    parts = []
    for objective in objectives:
        part = layer_rows[layer_rows["objective"] == objective]
        n = part["seed"].nunique()
        parts.append(pd.DataFrame({
            "run": f"ours, {OBJECTIVE_PROSE[objective]} ({n} seeds)", "step": part["step"].astype(int),
            "layer": part["layer"], "head": np.nan, "seed": part["seed"].astype(str), "band_unit": "seed",
            "symmetry": part["symmetry"], "directionality": part["directionality"], "d_model": cfg.d_model,
            "head_dim": cfg.head_dim, "n_heads": cfg.n_heads}))
    if paper is not None:
        for arch in ("encoder", "decoder"):
            part = paper[paper["model"].str.startswith(f"{paper_size}-{arch}-")]
            if not len(part):
                raise ValueError(f"paper: has no {paper_size} {arch} runs; pass paper_per_layer('custom-models').")
            datasets = part["model"].str.removeprefix(f"{paper_size}-{arch}-")
            parts.append(pd.DataFrame({
                "run": f"authors' {paper_size} {arch} ({datasets.nunique()} datasets)",
                "step": part["step"].astype(int), "layer": part["layer"], "head": np.nan, "seed": datasets,
                "band_unit": "dataset", "symmetry": part["symmetry"], "directionality": part["directionality"]}))
    return pd.concat(parts, ignore_index=True)


# ================================================================================== specification curves
#: The horizons of the specification curve: every logged step from this one on.
CURVE_FIRST_STEP = 500
#: The matched-learning levels of the specification curve (shares of the plateau below it).
CURVE_LEVELS = (0.05, 0.10, 0.15, 0.20)


def _curve_point(frame: pandas.DataFrame, a: str, b: str, column: str, axis: str, label: str, primary: bool,
                 min_pairs: int) -> Specification | str:
    """One specification of ``a − b`` in ``column`` (paired by seed), or why it cannot be computed."""
    va, vb = _paired(frame, a, b, column)
    if len(va) < min_pairs:
        reached = {o: int(frame.loc[frame["objective"] == o, column].notna().sum()) for o in (a, b)}
        return f"{label} ({OBJECTIVE_SHORT[a]} {reached[a]}, {OBJECTIVE_SHORT[b]} {reached[b]} runs get there)"
    return Specification(axis, label, stats.paired_difference(va, vb).interval, primary)


def specification_claims(scores: pandas.DataFrame, plateau: Mapping[str, float],
                         pairs: Sequence[tuple[str, str]] = FAMILY, primary_step: int | None = None,
                         first_step: int = CURVE_FIRST_STEP, levels: Sequence[float] = CURVE_LEVELS,
                         min_pairs: int = 3) -> dict[tuple[str, str, str], Claim]:
    """Every contrast of ``pairs`` (both scores) as a :class:`qkgeometry.claims.Claim` over its specification curve:
    the change from the initialisation, paired by seed, at every logged step from ``first_step`` on and at matched
    learning for each of ``levels``, each per layer and per head. The primary is the pre-stated one: per layer at
    ``primary_step`` (default: the last logged step). Chapter 3, "How robust is each verdict?".

    ``scores``: the runs of every arm (:func:`read_fair_test`, with :func:`read_supervision_arm` appended);
    ``plateau``: :func:`plateaus`. A specification with fewer than ``min_pairs`` paired seeds (a level an arm never
    reaches) is listed in the claim's ``not_computed`` with the reason, never imputed. The direction words come
    from where each arm moves at the primary (:func:`change_claims`).
    """
    from ..training.objective_runs import UNITS, seed_summaries

    per_run = {unit: seed_summaries(scores, unit, step="all") for unit in UNITS}
    logged = sorted(int(s) for s in per_run["layer"]["step"].unique())
    primary_step = logged[-1] if primary_step is None else int(primary_step)
    if primary_step not in logged:
        raise ValueError(f"primary_step: {primary_step} is not a logged step; logged: {logged[0]}…{logged[-1]}.")
    horizons = [s for s in logged if s >= first_step or s == primary_step]  # a short run still has its primary
    matched = {(unit, level): matched_summaries(per_run[unit], matched_steps(per_run[unit], plateau, level))
               for unit in UNITS for level in levels}
    out = {}
    for a, b in pairs:
        for score in SCORES:
            column = f"{score}_change"
            specs, missing = [], []

            for unit in UNITS:
                points = [(per_run[unit][per_run[unit]["step"] == step], f"horizon, per {unit}",
                           f"step {format_number(step)}, per {unit}", unit == "layer" and step == primary_step)
                          for step in horizons]
                points += [(matched[(unit, level)], f"matched learning, per {unit}",
                            f"matched at {format_number(level, spec='.0%')} below the plateau, per {unit}", False)
                           for level in levels]
                for frame, axis, label, primary in points:
                    point = _curve_point(frame, a, b, column, axis, label, primary, min_pairs)
                    (specs if isinstance(point, Specification) else missing).append(point)
            at = per_run["layer"][per_run["layer"]["step"] == primary_step]
            va, vb = _paired(at, a, b, column)
            larger, smaller = change_claims(a, b, score, float(va.mean()), float(vb.mean()))
            subject = f"Δ{score[0]} ({OBJECTIVE_SHORT[a]} − {OBJECTIVE_SHORT[b]})"
            out[(a, b, score)] = Claim(subject, larger, smaller, tuple(specs), tuple(missing))
    return out
