"""Encoder against decoder stacks across model families, counted at the level the evidence replicates (the
lineage), and read across every specification a referee could pick. Chapter 4, "How robust is the gap?".

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

__all__ = ["stack_gap_claim"]


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
    return Claim(f"encoder − decoder median {score}", larger, smaller, tuple(specs), tuple(missing))
