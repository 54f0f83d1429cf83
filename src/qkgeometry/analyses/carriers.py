"""What carries a gap: chapter 3's two decision rules, fixed before the runs, read at the pre-stated specification
and across the specification curve. Chapter 3, "Mask or loss density?" and "Share of positions or supervision per
step?".

Each rule splits a gap between two arms into two candidate carriers, each measured by a contrast of the family
(:func:`qkgeometry.analyses.fair_test.contrast_family`): a carrier *counts* when its contrast is a difference in the
family with the sign of the gap. A carrier that does not count is **not detected**, never "not the cause": the
sentence says how much of the gap its interval still allows (:func:`share_bound`). A decision is stated without
qualification only where the same rule, applied at every specification of the curve
(:func:`decision_curve`), reads the same; otherwise :func:`decision_line` says where it reads otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .. import stats
from ..claims import Claim, Specification, join_words  # noqa: F401 - Specification: the doctests build claims
from ..training.config import SPARSE_CAUSAL
from .fair_test import SUPERVISED_CAUSAL, Contrast

__all__ = ["Decision", "decision_curve", "decision_line", "gap_answer", "mask_or_density", "share_bound",
           "share_or_supervision"]


@dataclass(frozen=True)
class Decision:
    """The pre-stated reading of a gap for one score: ``outcome`` is one of the rule's outcomes (``"mask"``,
    ``"density"``, ``"both"``, ``"undecided"`` for :func:`mask_or_density`; ``"share"``, ``"supervision"``,
    ``"both"``, ``"undecided"``, ``"nothing to split"`` for :func:`share_or_supervision`); ``sentence`` says it in
    words, with the two contrasts it rests on."""

    score: str
    outcome: str
    sentence: str

    @property
    def brief(self) -> str:
        """What carries the gap, in a few words (for a box of key results)."""
        return OUTCOME_WORDS[self.outcome]


#: The outcomes of the two pre-stated rules, in a few words. The supervision per step is a bundle: a step with
#: more targets also reads more tokens, passes over the data more often and averages out more gradient noise.
OUTCOME_WORDS = {
    "mask": "the causal mask (a share carried by the loss density is not detected)",
    "density": "the loss density or the learning it brings (a share carried by the mask is not detected)",
    "both": "both candidates",
    "undecided": "undecided at this number of seeds",
    "share": "the share of positions with loss (a share carried by the supervision per step is not detected)",
    "supervision": "the bundle that comes with more supervision per step: more targets, more tokens read, more "
                   "passes over the data and less gradient noise (a share carried by the share of positions is not "
                   "detected)",
    "nothing to split": "nothing to split: the density gap is not established here",
}


def _counts(c: Contrast, sign: float) -> bool:
    """A contrast counts for a reading when it is a difference in its family with the sign of the gap it splits."""
    return c.is_difference and np.sign(c.difference.interval.estimate) == sign


def share_bound(part: stats.Interval, gap: stats.Interval) -> str:
    """How much of ``gap`` a carrier that is not detected may still carry: the end of ``part``'s interval on the
    gap's side, as a share of the gap's estimate ("up to 70% of it", or "none of it" when the whole interval lies on
    the other side).

    >>> iv = lambda e, lo, hi: stats.Interval(e, lo, hi, 12, unit="seed")
    >>> share_bound(iv(-0.05, -0.21, 0.11), iv(-0.3, -0.4, -0.2))
    'up to 70% of it'
    """
    sign = np.sign(gap.estimate)
    far = part.high if sign > 0 else part.low
    share = sign * far / abs(gap.estimate) if gap.estimate else float("nan")
    if not np.isfinite(share):
        return "an unknown share of it"
    return "none of it" if share <= 0 else f"up to {stats.format_number(100 * share, decimals=0)}% of it"


def mask_or_density(family: Mapping[tuple[str, str, str], Contrast], score: str) -> Decision:
    """What drives the causal − masked LM gap in ``score``, by the rule fixed before the runs.

    A contrast *counts* when it is a difference in the family (interval excludes 0 and Holm p < 0.05) with the sign
    of the causal − masked LM estimate. The mask drives the gap when causal-sparse − masked LM counts and causal −
    causal-sparse does not; the loss density (or the learning it brings) when the reverse holds; both when both
    count; otherwise the reading is undecided at this n. The sentence names the gap by its own claim (where each
    arm moves), never by a direction neither arm takes, and a carrier not detected with the share of the gap its
    interval still allows.
    """
    head = family[("causal", "mlm", score)]
    mask = family[(SPARSE_CAUSAL, "mlm", score)]
    density = family[("causal", SPARSE_CAUSAL, score)]
    sign = np.sign(head.difference.interval.estimate)
    gap = f"the gap in {score} ({head.direction})"
    parts = (f"with the loss density matched, the causal mask against the masked LM gives "
             f"{mask.verdict.estimate_text}; with the mask held causal, the dense loss against the sparse one gives "
             f"{density.verdict.estimate_text}")
    bound = {name: share_bound(c.difference.interval, head.difference.interval)
             for name, c in (("mask", mask), ("density", density))}
    if _counts(mask, sign) and _counts(density, sign):
        return Decision(score, "both", f"Both the mask and the loss density carry {gap}: {parts}.")
    if _counts(mask, sign):
        return Decision(score, "mask", f"The causal mask carries {gap}; a share carried by the loss density is not "
                                       f"detected (its interval allows {bound['density']}): {parts}.")
    if _counts(density, sign):
        return Decision(score, "density", f"The loss density (or the learning it brings) carries {gap}; a share "
                                          f"carried by the mask alone is not detected (its interval allows "
                                          f"{bound['mask']}): {parts}.")
    return Decision(score, "undecided", f"Neither the mask nor the loss density is established as the source of "
                                        f"{gap}: {parts}.")


def share_or_supervision(family: Mapping[tuple[str, str, str], Contrast], score: str,
                         targets: tuple[int, int] | None = None) -> Decision:
    """What carries the loss-density gap (causal − causal-sparse) in ``score``, by the rule fixed before the runs of
    the supervision-matched arm (:data:`~qkgeometry.analyses.fair_test.SUPERVISED_CAUSAL`).

    The share of positions with loss carries it when the supervision-matched dense arm − causal-sparse counts
    (a difference in the family with the sign of causal − causal-sparse) and causal − the supervision-matched arm
    does not; the supervision per step (a bundle: targets, tokens read, passes over the data, gradient noise) in the
    reverse case; both when both count; undecided otherwise. When causal − causal-sparse is itself no difference,
    there is nothing to split. ``targets``: the supervised targets per step of the dense arm and of the
    supervision-matched arm, named in the sentence when given.
    """
    gap = family[("causal", SPARSE_CAUSAL, score)]
    share = family[(SUPERVISED_CAUSAL, SPARSE_CAUSAL, score)]
    amount = family[("causal", SUPERVISED_CAUSAL, score)]
    sign = np.sign(gap.difference.interval.estimate)
    parts = (f"at matched supervision, every position against 15% of them gives {share.verdict.estimate_text}; with "
             f"every position carrying loss, "
             + (f"{stats.format_number(targets[0])} targets per step against {stats.format_number(targets[1])}"
                if targets else "the full batch against the cut one")
             + f" give {amount.verdict.estimate_text}")
    if not gap.is_difference:
        return Decision(score, "nothing to split", f"The dense and the sparse causal LM do not differ detectably in "
                                                   f"{score} in this family ({gap.verdict.estimate_text}), so there "
                                                   f"is no density gap to split: {parts}.")
    what = f"the density gap in {score} ({gap.direction})"
    bound = {name: share_bound(c.difference.interval, gap.difference.interval)
             for name, c in (("share", share), ("amount", amount))}
    if _counts(share, sign) and _counts(amount, sign):
        return Decision(score, "both", f"Both the share of positions with loss and the supervision per step carry "
                                       f"{what}: {parts}.")
    if _counts(share, sign):
        return Decision(score, "share", f"The share of positions with loss carries {what}; a share carried by the "
                                        f"supervision per step is not detected (its interval allows "
                                        f"{bound['amount']}): {parts}.")
    if _counts(amount, sign):
        return Decision(score, "supervision", f"What comes with more supervision per step (more targets, more "
                                              f"tokens read, more passes over the data, less gradient noise: a "
                                              f"bundle this arm does not take apart) carries {what}; a share carried "
                                              f"by the share of positions is not detected (its interval allows "
                                              f"{bound['share']}): {parts}.")
    return Decision(score, "undecided", f"Neither the share of positions nor the supervision per step is "
                                        f"established as the source of {what}: {parts}.")


#: The three contrasts each rule reads: the gap, then the contrast of each candidate (in the order of its outcomes).
RULES = {
    "mask or density": (("causal", "mlm"), (SPARSE_CAUSAL, "mlm"), ("causal", SPARSE_CAUSAL), ("mask", "density")),
    "share or supervision": (("causal", SPARSE_CAUSAL), (SUPERVISED_CAUSAL, SPARSE_CAUSAL),
                             ("causal", SUPERVISED_CAUSAL), ("share", "supervision")),
}


def decision_curve(claims: Mapping[tuple[str, str, str], Claim], rule: str, score: str) -> dict[str, list[str]]:
    """The rule ``rule`` ("mask or density" or "share or supervision") applied at every specification of the curve
    where its three contrasts are all computed (:func:`qkgeometry.analyses.fair_test.specification_claims`), with
    each specification's unadjusted interval in place of the family's verdict: ``{outcome: [labels]}``. A
    description of how the decision moves with the choice, not a second test."""
    gap_pair, first_pair, second_pair, names = RULES[rule]
    curves = [{s.label: s for s in claims[(*pair, score)].curve} for pair in (gap_pair, first_pair, second_pair)]
    out: dict[str, list[str]] = {}
    for label in [lab for lab in curves[0] if lab in curves[1] and lab in curves[2]]:
        gap, first, second = (c[label] for c in curves)
        if rule == "share or supervision" and not gap.established:
            outcome = "nothing to split"
        else:
            sign = gap.sign
            counts = [s.established and s.sign == sign for s in (first, second)]
            outcome = ("both" if all(counts) else names[0] if counts[0] else names[1] if counts[1] else "undecided")
        out.setdefault(outcome, []).append(label)
    return out


def decision_line(decision: Decision, curve: Mapping[str, list[str]],
                  lead: str = "by the rule stated before the runs, ", where: bool = True) -> str:
    """A decision in one line that carries its curve: what the rule reads at the pre-stated specification (after
    Holm's correction), then, when the same rule reads otherwise anywhere on the curve, how often and where.
    ``lead``: the words before the decision; ``where=False``: count the other readings without naming where they
    are (the short form an opening answer uses).

    >>> d = Decision("directionality", "supervision", "...")
    >>> decision_line(d, {"supervision": ["step 4,000, per layer"] * 9, "nothing to split": ["matched at 5%"]})[-100:]
    'the same rule reads supervision at 9 and nothing to split at 1 (matched at 5%) of 10 specifications.'
    >>> decision_line(d, {"supervision": ["step 4,000, per layer"] * 9, "nothing to split": ["matched at 5%"]},
    ...               where=False)[-90:]
    'the same reading at 9 of the 10 specifications of its curve (elsewhere: nothing to split).'
    """
    m = sum(len(v) for v in curve.values())
    head = f"{lead}{decision.brief}"
    if not curve:
        return head + "."
    if set(curve) == {decision.outcome}:
        return f"{head}; the same rule reads the same at every one of the {m} specifications of its curve."
    if not where:
        same = len(curve.get(decision.outcome, []))
        others = [k for k in sorted(curve, key=lambda k: -len(curve[k])) if k != decision.outcome]
        return (f"{head} at the pre-stated specification; the same reading at {same or 'none'} of the {m} "
                f"specifications of its curve (elsewhere: {join_words(others)}).")
    order = sorted(curve, key=lambda k: (k != decision.outcome, -len(curve[k])))
    parts = []
    for outcome in order:
        labels = curve[outcome]
        named = "" if outcome == decision.outcome else f" ({join_words(sorted(set(labels))[:3])}" + (
            f" and {len(set(labels)) - 3} more)" if len(set(labels)) > 3 else ")")
        parts.append(f"{outcome} at {len(labels)}{named}")
    return (f"{head} at the pre-stated specification; across its curve the same rule reads {join_words(parts)} of "
            f"{m} specifications.")


def gap_answer(claim: Claim, paper: str = "as the paper predicts") -> str:
    """The answer to "does causal training make the form more directional?" in a few plain words, from the causal −
    masked LM claim on directionality (:func:`qkgeometry.analyses.fair_test.specification_claims`): yes where it
    holds across its curve, "partly" where it holds at the pre-stated specification only, "not detected" where it
    is not established there. ``paper``: how the direction relates to the paper's prediction (said only when the
    causal LM's directionality ends further toward the key side). Chapter 3.

    >>> iv = lambda e, lo, hi: stats.Interval(e, lo, hi, 12, unit="seed")
    >>> c = Claim("Δd", "larger", "the causal LM's directionality falls further than the masked LM's (toward the key side)",
    ...           (Specification("horizon", "step 4,000", iv(-0.3, -0.4, -0.2), primary=True),
    ...            Specification("matched", "matched at 5%", iv(0.26, 0.06, 0.46))))
    >>> gap_answer(c)
    "Partly: at the step fixed before the runs, the causal LM's directionality falls further than the masked LM's (toward the key side), as the paper predicts, but the gap reverses at 1 of 2 specifications."
    """

    r = claim.reading
    toward_key = claim.primary.interval.estimate < 0
    said = claim.claim + (f", {paper}" if toward_key else "")
    if r.outcome == "not established":
        return ("Not detected at our scale: at the step fixed before the runs, the causal and the masked LM do not "
                "differ detectably in how their directionality changes.")
    if r.outcome == "holds":
        return f"Yes, in our small models: {said}, at every one of the {r.total} specifications."
    if r.outcome == "reverses":
        return (f"Partly: at the step fixed before the runs, {said}, but the gap reverses at "
                f"{len(r.established_against)} of {r.total} specifications.")
    return (f"Partly: at the step fixed before the runs, {said}, but not with an interval that excludes 0 at every "
            f"one of the {r.total} specifications.")
