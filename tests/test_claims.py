"""Tests for qkgeometry.claims: direction words follow the signs, and a claim is stated as holding only where its
specification curve holds."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from qkgeometry import stats
from qkgeometry.claims import Claim, Specification, change_words, difference_words

UP, DOWN = "toward symmetric", "toward skew"


def _iv(estimate: float, half: float = 0.05, n: int = 12) -> stats.Interval:
    return stats.Interval(estimate, estimate - half, estimate + half, n, unit="seed")


def _claim(primary: float, others: list[tuple[float, float]], words=("a is larger", "a is smaller")) -> Claim:
    curve = [Specification("horizon", "step 4,000", _iv(primary), primary=True)]
    curve += [Specification("horizon", f"step {k * 500:,}", _iv(e, h)) for k, (e, h) in enumerate(others, 1)]
    return Claim("Δd per layer", *words, tuple(curve))


def test_a_smaller_gain_toward_symmetric_is_never_called_a_move_toward_skew():
    # causal − MLM Δs negative while every arm moves toward symmetric (+0.016 and +0.192)
    larger, smaller = change_words("causal LM", "masked LM", "symmetry", UP, DOWN, 0.016, 0.192)
    claim = Claim("Δs per layer, causal − masked LM", larger, smaller,
                  (Specification("horizon", "step 4,000", _iv(0.016 - 0.192, 0.06), primary=True),))
    assert claim.claim == "the causal LM's symmetry rises less than the masked LM's (toward symmetric)"
    assert DOWN not in claim.sentence


@pytest.mark.parametrize(("mean_a", "mean_b"), list(itertools.product([-0.3, -0.01, 0.0, 0.02, 0.4], repeat=2)))
def test_every_direction_word_is_true_of_the_arm_it_describes(mean_a, mean_b):
    """Whatever the arms' own changes, the claim that the estimate's sign selects never says an arm moves a way it
    does not, and never gives each arm a direction of its own when they move different ways."""
    if mean_a == mean_b:
        return
    larger, smaller = change_words("A", "B", "symmetry", UP, DOWN, mean_a, mean_b)
    said = larger if mean_a - mean_b > 0 else smaller
    if "rises" in said:  # both arms rise (or stand still), and the one said to rise more rises more
        assert mean_a >= 0 and mean_b >= 0 and UP in said and DOWN not in said, said
        assert ("rises more" in said) == (mean_a > mean_b), said
    elif "falls" in said:
        assert mean_a <= 0 and mean_b <= 0 and DOWN in said and UP not in said, said
        assert ("falls further" in said) == (mean_a < mean_b), said
    else:  # the arms move different ways: only the changes are compared
        assert UP not in said and DOWN not in said, said
        assert ("is larger" in said) == (mean_a > mean_b), said


def test_difference_words_follow_the_sign():
    larger, smaller = difference_words("encoders", "decoders", "more symmetric")
    up = Claim("gap", larger, smaller, (Specification("families", "all", _iv(0.3), primary=True),))
    down = Claim("gap", larger, smaller, (Specification("families", "all", _iv(-0.3), primary=True),))
    assert up.claim.startswith("the encoders are more symmetric")
    assert down.claim.startswith("the decoders are more symmetric")


def test_difference_words_take_only_what_they_use():
    """No argument is accepted and ignored: a level's claims are worded with one comparative."""
    import inspect

    assert list(inspect.signature(difference_words).parameters) == ["a", "b", "up"]


def test_a_claim_that_holds_everywhere_says_so():
    c = _claim(-0.30, [(-0.2, 0.05), (-0.4, 0.1)])
    assert c.holds and c.reading.outcome == "holds"
    assert c.sentence.startswith("A is smaller: Δd per layer")
    assert "every one of the 3 specifications" in c.sentence and "n = 12 seeds" in c.sentence


def test_a_reversal_is_named_with_its_estimate():
    # sparse − MLM Δd: −0.19 at step 500, +0.14 at 2,000 (established), −0.05 at 4,000 (primary here: established)
    c = _claim(-0.20, [(-0.19, 0.05), (0.14, 0.1)])
    assert c.reading.outcome == "reverses" and not c.holds
    assert "reverses" in c.sentence and "step 1,000 (0.14" in c.sentence
    assert c.sentence.startswith("At the pre-stated specification (step 4,000), a is smaller")


def test_a_direction_that_holds_without_every_interval_excluding_zero():
    c = _claim(-0.30, [(-0.02, 0.05), (-0.4, 0.1)])
    assert c.reading.outcome == "direction holds"
    assert "includes 0 at 1 of them (step 500)" in c.sentence


def test_an_opposite_sign_that_is_not_established_is_still_reported():
    c = _claim(-0.30, [(0.02, 0.05)])
    assert c.reading.outcome == "primary only"
    assert "other sign at 1 of them" in c.sentence


def test_an_unestablished_primary_is_never_stated_as_a_finding():
    c = _claim(-0.01, [(0.3, 0.05), (-0.2, 0.05)])
    assert c.reading.outcome == "not established"
    assert c.sentence.startswith("At the pre-stated specification (step 4,000) no difference is established")
    assert "Δd per layer is positive at step 500 (0.30" in c.sentence and "negative at step 1,000" in c.sentence
    assert "a is larger" not in c.sentence and "a is smaller" not in c.sentence  # words of the primary only
    quiet = _claim(0.01, [(0.02, 0.05)])
    assert "No interval on the curve of 2 specifications excludes 0" in quiet.sentence


def test_a_curve_needs_exactly_one_primary():
    with pytest.raises(ValueError, match="exactly one specification must be the primary"):
        Claim("x", "up", "down", (Specification("a", "b", _iv(1.0)),))
    with pytest.raises(ValueError, match="exactly one"):
        Claim("x", "up", "down", (Specification("a", "b", _iv(1.0), True), Specification("a", "c", _iv(1.0), True)))


def test_the_frame_is_sorted_by_estimate_and_marks_the_primary():
    c = _claim(-0.30, [(0.1, 0.05), (-0.5, 0.1)])
    frame = c.frame()
    assert list(frame["estimate"]) == sorted(frame["estimate"])
    assert frame["primary"].sum() == 1 and frame.loc[frame["primary"], "label"].item() == "step 4,000"


def test_long_lists_are_counted_not_spelled_out():
    c = _claim(-0.30, [(0.3, 0.05)] * 6)
    assert "2 more" in c.sentence


@pytest.mark.parametrize(("primary", "others", "start", "has"), [
    (-0.30, [(-0.2, 0.05)], "A is smaller at the pre-stated specification", "at every one of the 2 specifications"),
    (-0.30, [(-0.02, 0.05)], "A is smaller", "the interval excludes 0 at 1 of them"),
    (-0.30, [(0.02, 0.05)], "A is smaller", "the other sign at 1 (step 500), none of them established"),
    (-0.30, [(0.3, 0.05)], "A is smaller", "with the other sign at 1 (step 500)"),
    (-0.01, [(0.3, 0.05)], "No difference is established", "at 1 with a positive and at 0 with a negative"),
])
def test_the_summary_states_the_primary_and_how_the_curve_reads(primary, others, start, has):
    s = _claim(primary, others).summary
    assert s.startswith(start) and has in s and "n = 12 seeds" in s


@pytest.mark.parametrize(("primary", "others", "has"), [
    (-0.30, [(-0.2, 0.05)], "holds at every one of the 2 specifications"),
    (-0.30, [(-0.02, 0.05)], "keeps its sign at all 2 specifications, with an interval that excludes 0 at 1"),
    (-0.30, [(0.02, 0.05)], "keeps its sign at 1 of 2 specifications; it has the other sign at step 500"),
    (-0.30, [(0.3, 0.05)], "reverses, with an interval that excludes 0, at 1 of 2 specifications (step 500)"),
    (-0.01, [(0.3, 0.05)], "is not established at the pre-stated specification"),
])
def test_the_brief_reads_the_curve_without_direction_words(primary, others, has):
    brief = _claim(primary, others).brief
    assert has in brief and "a is" not in brief


@pytest.mark.parametrize("primary, others, words, reading", [
    (-0.30, [(-0.2, 0.05), (-0.4, 0.1)], "a is smaller", "it holds at every one of the 3 specifications"),
    (0.30, [(0.02, 0.05)], "a is larger", "it keeps its sign at all 2 specifications"),
    (-0.20, [(-0.19, 0.05), (0.14, 0.1)], "a is smaller", "it reverses, with an interval that excludes 0, at 1 of 3"),
])
def test_the_line_follows_the_sign_and_reads_the_curve_in_counts(primary, others, words, reading):
    c = _claim(primary, others)
    assert c.line.startswith(f"{words} (Δd per layer ") and reading in c.line
    assert "n = 12 seeds" in c.line and "step 500" not in c.line  # counts only: the table names the specifications
    assert len(c.line) < len(c.summary) and c.line.endswith(".")
    assert "\u2212" in _claim(-0.3, []).line and "-0.3" not in _claim(-0.3, []).line  # true minus signs


def test_the_line_uses_the_short_words_and_never_states_an_unestablished_primary():
    curve = (Specification("lineages", "all", _iv(-0.3), primary=True),)
    c = Claim("the gap in full words", "the long words of a larger gap", "the long words of a smaller gap", curve,
              short_larger="larger", short_smaller="smaller", short_subject="gap")
    assert c.line.startswith("smaller (gap −0.3")
    quiet = _claim(-0.01, [(0.3, 0.05)])
    assert quiet.line.startswith("no difference is established (Δd per layer")
    assert "a is" not in quiet.line


def test_a_primary_that_fails_its_family_correction_is_not_worded_as_established():
    iv = lambda e, lo, hi: stats.Interval(e, lo, hi, 6, unit="seed")  # noqa: E731
    curve = (Specification("horizon", "step 10,000", iv(0.03, 0.01, 0.05), primary=True),
             Specification("horizon", "step 9,000", iv(0.02, 0.005, 0.04)))
    plain = Claim("norm-matched − symmetric loss", "norm-matched has the higher loss", "lower", curve)
    assert plain.reading.outcome == "holds"
    adjusted = dataclasses.replace(plain, p_adjusted=0.34)
    assert adjusted.reading.outcome == "not established"
    for text in (adjusted.sentence, adjusted.line, adjusted.summary, adjusted.short, adjusted.brief):
        assert "higher loss" not in text and "Holm" in text and "p = 0.34" in text
    assert dataclasses.replace(plain, p_adjusted=0.01).reading.outcome == "holds"


@pytest.mark.parametrize("seed", range(40))
def test_no_rendering_of_a_claim_drops_a_reversal_or_a_lost_interval(seed):
    """Whatever the curve, every rendering of a claim whose curve reverses or loses its interval somewhere says so
    in the same text: a key line can never state the primary alone."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 9))
    est = rng.normal(0.0, 1.0, m)
    half = rng.uniform(0.2, 1.5, m)
    curve = tuple(Specification("horizon", f"step {1000 * (i + 1):,}", stats.Interval(e, e - h, e + h, 8, unit="seed"),
                                primary=i == 0) for i, (e, h) in enumerate(zip(est, half)))
    claim = Claim("Δd", "a is larger", "a is smaller", curve)
    r = claim.reading
    renderings = (claim.sentence, claim.line, claim.summary, claim.short, claim.brief)
    if r.outcome == "reverses":
        assert all("reverses" in t or "other sign" in t for t in renderings), renderings
    elif r.outcome == "direction holds":
        assert all("includes 0" in t or "excludes 0 at" in t for t in renderings), renderings
    elif r.outcome == "primary only":
        assert all("other sign" in t for t in renderings), renderings
    elif r.outcome == "holds":
        assert all("at every one of the" in t or "holds at every" in t or "every one of the" in t
                   for t in renderings)


def test_the_curve_is_counted_by_the_choice_it_varies():
    iv = lambda e, n: stats.Interval(e, e - 0.1, e + 0.1, n, unit="seed")  # noqa: E731
    curve = (Specification("horizon, per layer", "step 4,000", iv(-0.3, 12), primary=True),
             *(Specification("horizon, per layer", f"step {k:,}", iv(-0.3, 12)) for k in range(500, 4000, 500)),
             Specification("matched, per layer", "matched at 10%", iv(0.3, 7)),
             Specification("matched, per layer", "matched at 20%", iv(0.05, 4)))
    table = Claim("Δd", "up", "down", curve).by_axis().set_index("axis")
    assert table.loc["horizon, per layer"].tolist() == [8, 8, 0, "12"]
    assert table.loc["matched, per layer"].tolist() == [2, 0, 1, "4–7"]
