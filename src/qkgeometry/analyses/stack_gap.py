"""Encoder against decoder stacks across model families, counted at the level the evidence replicates (the
lineage), and read across every specification a referee could pick. Chapter 4, "How robust is the gap?"; its Key
results state each finding in one short line worded from the numbers (:attr:`qkgeometry.claims.Claim.line`,
:func:`separation_words`, :func:`paired_line`, :func:`folded_line`, :func:`lineage_line`).

:func:`stack_gap_claim` takes the authors' stacks (:func:`qkgeometry.catalogue.paper_models`, whose ``lineage``
column merges the result files of one lineage, :data:`qkgeometry.catalogue.PAPER_LINEAGES`) and returns a
:class:`qkgeometry.claims.Claim` whose sentence states the gap only where it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import stats
from ..claims import Claim, Specification

if TYPE_CHECKING:
    import pandas

__all__ = [
    "family_paired_line", "folded_line", "lineage_line", "paired_line", "separation_words", "stack_gap_claim"]


def stack_gap_claim(models: pandas.DataFrame, score: str, n_resamples: int = 9999, seed: int = 0) -> Claim:
    """The encoder − decoder difference of median ``score`` over the authors' stacks, resampling whole lineages, as a
    :class:`qkgeometry.claims.Claim` over its specification curve: every lineage (the pre-stated reading), families
    as the files name them, without the rows whose GQA or fused QKV the authors' code mis-read, each modality with two
    lineages of each stack, and each lineage left out in turn. Chapter 4, "How robust is the gap?".

    ``models``: :func:`qkgeometry.catalogue.paper_models` rows to use (encoder and decoder stacks, one row per distinct stack);
    ``score``: ``"symmetry"`` or ``"directionality"`` (the column ``{score}_median``, or ``score`` itself).
    """
    column = score if score in models else f"{score}_median"
    frame = models[models["stack"].isin(["encoder", "decoder"])]

    def gap(part, cluster: str = "lineage"):
        enc, dec = part[part["stack"] == "encoder"], part[part["stack"] == "decoder"]
        if len(enc) < 2 or len(dec) < 2 or part[cluster].nunique() < 2:
            return None
        return stats.clustered_difference_of_medians(enc[column], dec[column], enc[cluster], dec[cluster],
                                                     n_resamples=n_resamples, seed=seed, unit=cluster)

    specs, missing = [], []

    def add(axis: str, label: str, part, cluster: str = "lineage", primary: bool = False) -> None:
        iv = gap(part, cluster)
        if iv is None:
            missing.append(f"{label} (fewer than two stacks of each kind)")
        else:
            specs.append(Specification(axis, label, iv, primary))

    add("lineages", f"all {frame['lineage'].nunique()} lineages", frame, primary=True)
    add("lineages", f"{frame['family'].nunique()} families as the files name them", frame, cluster="family")
    add("rows", "without GQA / fused-QKV rows", frame[~frame["gqa"] & (frame["fused_qkv"] == "")])
    for modality, part in frame.groupby("modality", sort=False):
        if (part.groupby("stack")["lineage"].nunique().reindex(["encoder", "decoder"]).fillna(0) >= 2).all():
            add("modality", f"{modality} only", part)
    for lineage in sorted(frame["lineage"].unique()):
        add("one lineage left out", f"without {lineage}", frame[frame["lineage"] != lineage])
    larger, smaller = (("the encoder stacks are more symmetric than the decoder stacks",
                        "the decoder stacks are more symmetric than the encoder stacks") if score == "symmetry" else
                       ("the decoder stacks are more key-dominated (lower directionality) than the encoder stacks",
                        "the encoder stacks are more key-dominated (lower directionality) than the decoder stacks"))
    short = (("the encoder stacks are more symmetric", "the decoder stacks are more symmetric") if score == "symmetry"
             else ("the decoder stacks are more key-dominated", "the encoder stacks are more key-dominated"))
    return Claim(f"encoder − decoder median {score}", larger, smaller, tuple(specs), tuple(missing),
                 short_larger=short[0], short_smaller=short[1], short_subject="encoder − decoder median")


# ---------------------------------------------------------------------------------------------------------------
# Chapter 4's key results, one short line each, worded from the numbers (Claim.line states the gap itself)

def separation_words(ordered: float) -> str:
    """How well a score tells the stacks apart, from the share ``ordered`` of (encoder, decoder) pairs in the claimed
    order (0.5: no separation).

    >>> separation_words(0.97), separation_words(0.7), separation_words(0.5)
    ('separates the stacks almost completely', 'separates the stacks only partly', 'hardly separates the stacks')
    """
    if not 0 <= ordered <= 1:
        raise ValueError(f"ordered: a share of pairs lies in [0, 1], got {ordered!r}.")
    return ("separates the stacks almost completely" if ordered >= 0.95 else "separates the stacks well"
            if ordered >= 0.85 else "separates the stacks only partly" if ordered >= 0.65 else
            "hardly separates the stacks")


def paired_line(encoder_higher: int, n: int, score: str = "symmetry") -> str:
    """Inside encoder-decoder models: which stack is the more symmetric (or the more key-dominated) one in how many
    of the ``n`` models, named by the majority. ``encoder_higher``: models whose encoder has the higher ``score``.

    >>> paired_line(21, 22), paired_line(3, 10), paired_line(8, 10, "directionality")
    ('the encoder is the more symmetric stack in 21 of 22 models', 'the decoder is the more symmetric stack in 7 of 10 models', 'the decoder is the more key-dominated stack in 8 of 10 models')
    """
    if not 0 <= encoder_higher <= n or n < 1:
        raise ValueError(f"encoder_higher: a count of 0 to n = {n} models, got {encoder_higher!r}.")
    higher, lower = (("encoder", "decoder") if 2 * encoder_higher >= n else ("decoder", "encoder"))
    k = max(encoder_higher, n - encoder_higher)
    if score == "symmetry":
        return f"the {higher} is the more symmetric stack in {k} of {n} models"
    # a higher directionality is the less key-dominated stack
    return f"the {lower} is the more key-dominated stack in {k} of {n} models"


def family_paired_line(count_line: str, n_families: int, family_verdict) -> str:
    """A count of models (:func:`paired_line`) with the level at which it replicates: how many families the models
    come from, and the verdict with each family counted once (``family_verdict``, a
    :class:`qkgeometry.stats.Verdict` over families).

    >>> from qkgeometry import stats
    >>> v = stats.judge(stats.Interval(0.21, 0.05, 0.37, 4, unit="family"), "the encoder stacks are more symmetric",
    ...                 "the decoder stacks are more symmetric", "encoder − decoder symmetry")
    >>> family_paired_line("the encoder is the more symmetric stack in 21 of 22 models", 4, v)
    'the encoder is the more symmetric stack in 21 of 22 models, which come from 4 families; counted once per family, the encoder stacks are more symmetric (0.210 [0.050, 0.370], n = 4 families)'
    """
    i = family_verdict.interval
    unit = "family" if n_families == 1 else "families"
    claim = family_verdict.claim
    return (f"{count_line}, which come from {n_families} {unit}; counted once per family, {claim} "
            f"({stats.format_interval(i.estimate, i.low, i.high)}, n = {i.n} {'family' if i.n == 1 else 'families'})")


def folded_line(verdict, toward_zero: int, n_stacks: int) -> str:
    """The gap once the normalisation gains are folded in: ``verdict`` (a :class:`qkgeometry.stats.Verdict` of the
    encoder − decoder difference, models resampled) in one line, and how many of ``n_stacks`` stacks move toward 0.

    >>> from qkgeometry import stats
    >>> v = stats.judge(stats.Interval(0.02, -0.049, 0.089, 8, unit="model"), "up", "down", "encoder − decoder gap")
    >>> folded_line(v, 4, 4)
    'no detectable difference (encoder − decoder gap 0.020 [−0.049, 0.089], models resampled); the median directionality of 4 of 4 stacks moves toward 0.'
    """
    i = verdict.interval
    return (f"{verdict.claim} ({verdict.subject} {stats.format_interval(i.estimate, i.low, i.high)}, models "
            f"resampled); the median directionality of {toward_zero} of {n_stacks} stacks moves toward 0.")


def lineage_line(n_single: int, n_lineages: int) -> str:
    """Where the gap is measured: ``n_single`` of ``n_lineages`` lineages hold only one kind of stack, so the
    comparison is mostly between lineages (or, when they are the fewer, mostly inside lineages).

    >>> lineage_line(25, 30)
    '25 of the 30 lineages hold only one kind of stack: the gap is mostly between lineages (data, size and recipe differ), not inside one model.'
    """
    if not 0 <= n_single <= n_lineages:
        raise ValueError(f"n_single: a count of 0 to {n_lineages} lineages, got {n_single!r}.")
    where = ("mostly between lineages (data, size and recipe differ), not inside one model" if 2 * n_single > n_lineages
             else "mostly inside lineages that hold both kinds of stack")
    return f"{n_single} of the {n_lineages} lineages hold only one kind of stack: the gap is {where}."
