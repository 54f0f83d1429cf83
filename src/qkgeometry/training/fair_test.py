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
* :func:`mask_or_density` applies the pre-stated decision rule to the family's verdicts;
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
from .config import ALL_OBJECTIVES, AUTHORS_DECODER, SPARSE_CAUSAL

if TYPE_CHECKING:
    import pandas

__all__ = ["FAMILY", "LEARNING_FLOOR", "MATCHED_LEVEL", "OBJECTIVE_PROSE", "OBJECTIVE_SHORT", "OUTCOME_WORDS", "SCORES", "UNVERIFIABLE", "WAYS",
           "Contrast", "Decision", "change_claims", "contrast_family", "family_table", "learning_table", "mask_or_density", "matched_steps",
           "matched_summaries", "plateaus", "read_fair_test", "trajectory_rows"]

#: The two scores, in the order every table lists them.
SCORES = ("symmetry", "directionality")
#: How each objective is named in a sentence.
OBJECTIVE_PROSE = {"causal": "causal LM", "mlm": "masked LM", "rtd": "replaced-token-detection objective",
                   AUTHORS_DECODER: "authors' decoder objective",
                   SPARSE_CAUSAL: "causal LM with the masked LM's loss density"}
#: How each objective is named in a narrow table column.
OBJECTIVE_SHORT = {"causal": "causal", "mlm": "MLM", "rtd": "RTD", AUTHORS_DECODER: "authors' decoder",
                   SPARSE_CAUSAL: "causal, sparse loss"}
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

    from .objective_runs import read_recorded

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
    if float(spread.to_numpy().max()) > 1e-5:  # the CSVs keep six significant digits
        worst = spread.max(axis=1).groupby(level="seed").max()
        raise ValueError(f"folders: the arms do not share their initialisation (step-0 scores differ for seeds "
                         f"{worst[worst > 1e-5].index.tolist()}), so they cannot be paired by seed.")
    merged = dict(provs[0])
    merged.update(objectives=[o for o in ALL_OBJECTIVES if o in objectives], seeds=seeds,
                  runs_done=sum(p["runs_done"] for p in provs), runs_total=sum(p["runs_total"] for p in provs),
                  wall_seconds=round(sum(p["wall_seconds"] for p in provs), 1), recordings=provs)
    return scores, grads, merged


# =============================================================================================== learning
def plateaus(data, cfg, n_batches: int = 20) -> dict[str, float]:
    """The loss of a model that ignores the context, per objective: the unigram cross-entropy of the validation
    tokens for the language-model objectives, and for replaced-token detection the binary entropy of its
    replacement rate (measured on ``n_batches`` batches of seed 0). ``data``: a
    :class:`~qkgeometry.training.data.TokenData`; ``cfg``: the runs' :class:`ObjectiveConfig`."""
    from .data import train_block
    from .objective_batches import make_objective_batch, unigram_probs

    unigram = unigram_probs(data.train, data.vocab_size)
    rate = float(np.mean([
        make_objective_batch(train_block(data.train, cfg.seq_len, cfg.batch_size, 0, k), "rtd", data.vocab_size, 0,
                             k, cfg.mask_prob, unigram).labels.float().mean()
        for k in range(n_batches)]))
    out = {o: float(data.unigram_loss()) for o in ALL_OBJECTIVES}
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

    @property
    def key(self) -> tuple[str, str, str]:
        return self.treated, self.baseline, self.score

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
    """The two claims (for ``a − b`` > 0 and < 0) of a contrast of *changes*, worded from where each objective moves.

    "Further toward skew" is only right when the one that moves further really moves toward skew: when both move
    toward symmetric, a negative ``a − b`` means that ``b`` moves further toward symmetric.

    >>> change_claims("causal", "mlm", "symmetry", 0.016, 0.19)[1]
    'the masked LM moves symmetry further toward symmetric than the causal LM'
    >>> change_claims("causal", "mlm", "directionality", -0.46, -0.16)[1]
    'the causal LM moves directionality further toward the key side than the masked LM'
    """
    up, down = WAYS[score]
    pa, pb = OBJECTIVE_PROSE[a], OBJECTIVE_PROSE[b]

    def claim(first: str, second: str, m1: float, m2: float, way_up: str, way_down: str) -> str:
        # first's change exceeds second's (m1 > m2 in the direction of way_up)
        if m1 > 0 and m2 >= 0:
            return f"the {first} moves {score} further {way_up} than the {second}"
        if m1 <= 0 and m2 < 0:
            return f"the {second} moves {score} further {way_down} than the {first}"
        if m1 > 0 > m2:
            return f"the {first} moves {score} {way_up} and the {second} {way_down}"
        return f"the {first}'s change of {score} exceeds the {second}'s"

    return claim(pa, pb, mean_a, mean_b, up, down), claim(pb, pa, mean_b, mean_a, up, down)


def contrast_family(summaries: pandas.DataFrame, pairs: Sequence[tuple[str, str]] = FAMILY,
                    column: str = "{score}_change", claims=None, alpha: float = 0.05
                    ) -> dict[tuple[str, str, str], Contrast]:
    """Every ``(treated, baseline)`` of ``pairs`` for both scores, paired by seed, judged as one Holm family.

    ``summaries``: one row per (objective, seed) (:func:`~qkgeometry.training.objective_runs.seed_summaries` or
    :func:`matched_summaries`); ``column``: the value compared, ``{score}`` filled in. ``claims(a, b, score, mean_a,
    mean_b)`` gives the (larger, smaller) claims; by default :func:`change_claims`. Returns the contrasts keyed by
    ``(treated, baseline, score)``, in ``pairs`` order.
    """
    claims = claims or change_claims
    items, comparisons = [], []
    for a, b in pairs:
        for score in SCORES:
            va, vb = _paired(summaries, a, b, column.format(score=score))
            diff = stats.paired_difference(va, vb)
            items.append((a, b, score, diff))
            subject = f"Δ{score[0]} ({OBJECTIVE_SHORT[a]} − {OBJECTIVE_SHORT[b]})"
            comparisons.append((diff, *claims(a, b, score, float(va.mean()), float(vb.mean())), subject))
    verdicts = stats.judge_family(comparisons, alpha=alpha)
    return {(a, b, s): Contrast(a, b, s, d, v) for (a, b, s, d), v in zip(items, verdicts)}


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


@dataclass(frozen=True)
class Decision:
    """The pre-stated reading of the headline gap for one score: ``outcome`` is ``"mask"``, ``"density"``,
    ``"both"`` or ``"undecided"``; ``sentence`` says it in words, with the two contrasts it rests on."""

    score: str
    outcome: str
    sentence: str


def mask_or_density(family: Mapping[tuple[str, str, str], Contrast], score: str) -> Decision:
    """What drives the causal − masked LM gap in ``score``, by the rule fixed before the runs.

    A contrast *counts* when it is a difference in the family (interval excludes 0 and Holm p < 0.05) with the sign
    of the causal − masked LM estimate. The mask drives the gap when causal-sparse − masked LM counts and causal −
    causal-sparse does not; the loss density (or the learning it brings) when the reverse holds; both when both
    count; otherwise the reading is undecided at this n.
    """
    head = family[("causal", "mlm", score)]
    mask = family[(SPARSE_CAUSAL, "mlm", score)]
    density = family[("causal", SPARSE_CAUSAL, score)]
    sign = np.sign(head.difference.interval.estimate)

    def counts(c: Contrast) -> bool:
        return c.is_difference and np.sign(c.difference.interval.estimate) == sign

    way = WAYS[score][0 if sign > 0 else 1]
    parts = (f"with the loss density matched, the causal mask against the masked LM gives "
             f"{mask.verdict.estimate_text}; with the mask held causal, the dense loss against the sparse one gives "
             f"{density.verdict.estimate_text}")
    if counts(mask) and counts(density):
        return Decision(score, "both", f"Both the mask and the loss density move {score} {way}: {parts}.")
    if counts(mask):
        return Decision(score, "mask", f"The causal mask, not the loss density, moves {score} {way}: {parts}.")
    if counts(density):
        return Decision(score, "density", f"The loss density (and the learning it brings), not the mask, moves "
                                          f"{score} {way}: {parts}.")
    return Decision(score, "undecided", f"Neither the mask nor the loss density is established as the source of "
                                        f"the gap in {score}: {parts}.")


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
