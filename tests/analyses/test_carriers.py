"""What carries a gap: the decision rules read at the primary and across the curve, and a carrier not detected
said with its bound."""
from __future__ import annotations

import numpy as np

from qkgeometry import stats
from qkgeometry.analyses import carriers
from qkgeometry.analyses.fair_test import SUPERVISED_CAUSAL, Contrast
from qkgeometry.claims import Claim, Specification
from qkgeometry.training.config import SPARSE_CAUSAL


def _iv(e: float, lo: float, hi: float) -> stats.Interval:
    return stats.Interval(e, lo, hi, 12, unit="seed")


def _claim(points: dict[str, tuple[float, float, float]]) -> Claim:
    labels = list(points)
    return Claim("Δd", "up", "down", tuple(Specification("horizon", lab, _iv(*points[lab]), primary=i == 0)
                                          for i, lab in enumerate(labels)))


def test_the_rule_is_read_at_every_specification_and_a_reversal_of_the_decision_is_said():
    claims = {
        ("causal", SPARSE_CAUSAL, "directionality"): _claim({"step 4,000": (-0.3, -0.4, -0.2),
                                                             "matched at 5%": (-0.05, -0.2, 0.1),
                                                             "matched at 10%": (-0.3, -0.5, -0.1)}),
        (SUPERVISED_CAUSAL, SPARSE_CAUSAL, "directionality"): _claim({"step 4,000": (-0.05, -0.21, 0.11),
                                                                      "matched at 5%": (0.0, -0.1, 0.1),
                                                                      "matched at 10%": (-0.1, -0.3, 0.1)}),
        ("causal", SUPERVISED_CAUSAL, "directionality"): _claim({"step 4,000": (-0.25, -0.35, -0.15),
                                                                 "matched at 5%": (0.0, -0.1, 0.1),
                                                                 "matched at 10%": (-0.05, -0.2, 0.1)}),
    }
    curve = carriers.decision_curve(claims, "share or supervision", "directionality")
    assert curve == {"supervision": ["step 4,000"], "nothing to split": ["matched at 5%"],
                     "undecided": ["matched at 10%"]}
    line = carriers.decision_line(carriers.Decision("directionality", "supervision", ""), curve)
    assert "bundle" in line and "nothing to split at 1 (matched at 5%)" in line and "undecided at 1" in line
    assert "of 3 specifications" in line
    same = carriers.decision_line(carriers.Decision("directionality", "supervision", ""), {"supervision": ["a", "b"]})
    assert "reads the same at every one of the 2 specifications" in same


def _contrast(a: str, b: str, e: float, lo: float, hi: float, outcome: str) -> Contrast:
    iv = _iv(e, lo, hi)
    diff = stats.PairedDifference(np.array([e - 0.01, e, e + 0.01]), iv, 0.01)
    verdict = stats.Verdict(outcome, "claim", "Δd", iv)
    return Contrast(a, b, "directionality", diff, verdict, ("a is larger", "a is smaller"))


def test_a_carrier_not_detected_is_said_with_how_much_of_the_gap_it_may_carry():
    family = {("causal", "mlm", "directionality"): _contrast("causal", "mlm", -0.3, -0.4, -0.2, "difference"),
              (SPARSE_CAUSAL, "mlm", "directionality"): _contrast(SPARSE_CAUSAL, "mlm", -0.05, -0.21, 0.11, "none"),
              ("causal", SPARSE_CAUSAL, "directionality"): _contrast("causal", SPARSE_CAUSAL, -0.25, -0.35, -0.15,
                                                                     "difference")}
    decision = carriers.mask_or_density(family, "directionality")
    assert decision.outcome == "density"
    assert "not detected (its interval allows up to 70% of it)" in decision.sentence
    assert "does not" not in decision.sentence
    assert carriers.share_bound(_iv(0.05, 0.01, 0.1), _iv(-0.3, -0.4, -0.2)) == "none of it"
