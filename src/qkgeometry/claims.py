"""Claims that hold across their specification curve, and the sentences that state them.

A headline such as "the dense loss moves directionality toward the key side" is read from one estimate at one
*specification*: one horizon, one unit (layer or head), one way of matching learning, one set of families. A referee
could have picked another, equally defensible one. A :class:`Claim` holds the estimate at **every** such
specification (its *specification curve*), marks the one stated before the numbers (the *primary*), and renders the
sentence from the numbers, so that

* the direction words always follow the sign of the estimate they describe (:func:`change_words` words a contrast of
  two changes from where both arms move, so a smaller gain toward symmetric is never called a move "toward skew",
  and a difference is never turned into a direction for each arm);
* a claim is stated as holding only when it holds across its curve; otherwise the sentence says where it holds and
  where it reverses (:meth:`Claim.reading`);
* n and the unit of the interval stand next to the number.

The intervals of a curve are the unadjusted 95% intervals of each specification (a description of how the estimate
moves with the choice, not a second test); the verdict of the primary within its family of tests is the
:class:`qkgeometry.stats.Verdict` the page shows beside it. Chapter 3 ("How robust is each verdict?"), chapter 4 and
chapter 5 draw each headline's curve with :func:`qkgeometry.plotting.claims.specification_curve`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from . import stats
from .formatting import count

if TYPE_CHECKING:
    import pandas

__all__ = ["OUTCOMES", "Claim", "Reading", "Specification", "change_words", "difference_words", "join_words"]

#: How a curve reads against its primary, from strongest to weakest (:meth:`Claim.reading`).
OUTCOMES = ("holds", "direction holds", "primary only", "reverses", "not established")

#: At most this many specifications are named in a sentence; the rest are counted.
_NAMED = 4


@dataclass(frozen=True)
class Specification:
    """One point of a specification curve: what was chosen (``axis``, e.g. "horizon", and ``label``, e.g.
    "step 2,000, per layer") and the estimate with its interval there."""

    axis: str
    label: str
    interval: stats.Interval
    primary: bool = False

    @property
    def sign(self) -> int:
        return int(np.sign(self.interval.estimate))

    @property
    def established(self) -> bool:
        """The interval excludes 0."""
        return self.interval.excludes_zero


@dataclass(frozen=True)
class Reading:
    """How a curve reads against the sign of its primary estimate.

    ``outcome`` (one of :data:`OUTCOMES`):

    * ``"holds"``: the primary is established and every specification is established with its sign;
    * ``"direction holds"``: the primary is established, every estimate has its sign, some intervals include 0;
    * ``"primary only"``: the primary is established, some estimates have the other sign, none of them established;
    * ``"reverses"``: the primary is established and some specification is established with the other sign;
    * ``"not established"``: the primary's interval includes 0.

    ``agree``/``against``: the specifications whose estimate has the primary's sign / the other sign;
    ``established_agree``/``established_against``: those among them whose interval excludes 0.
    """

    outcome: str
    agree: tuple[Specification, ...]
    against: tuple[Specification, ...]
    established_agree: tuple[Specification, ...]
    established_against: tuple[Specification, ...]

    @property
    def total(self) -> int:
        return len(self.agree) + len(self.against)


def join_words(words: Sequence[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``.

    >>> join_words(["step 500"]), join_words(["a", "b", "c"])
    ('step 500', 'a, b and c')
    """
    words = list(words)
    if not words:
        return ""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _named(specs: Sequence[Specification], with_values: bool = True, decimals: int | None = None) -> str:
    """Up to :data:`_NAMED` specifications by label (with their estimate), then how many more."""
    shown = [f"{s.label} ({_value(s.interval, decimals)})" if with_values else s.label for s in specs[:_NAMED]]
    rest = len(specs) - len(shown)
    if rest:
        shown.append(f"{rest} more")
    return join_words(shown)


def _value(interval: stats.Interval, decimals: int | None = None) -> str:
    """``"−0.26 [−0.39, −0.12]"``: the estimate and its interval, at the precision the interval supports (or with
    ``decimals`` decimals: 0 for counts of steps)."""
    half = (interval.high - interval.low) / 2
    if decimals is not None:
        f = lambda v: stats.format_number(v, decimals=decimals)  # noqa: E731
    else:
        f = lambda v: stats.format_number(v, half if half > 0 else None)  # noqa: E731
    return f"{f(interval.estimate)} [{f(interval.low)}, {f(interval.high)}]"


def _units(interval: stats.Interval) -> str:
    """``"n = 3 seeds"``: the interval's n and unit (:func:`qkgeometry.formatting.count`)."""
    return count(interval.n, interval.unit)


def difference_words(a: str, b: str, up: str) -> tuple[str, str]:
    """The claims of ``a − b`` for a *level* (not a change): ``(larger, smaller)``, both worded with ``up`` (the
    comparative of a larger value, "more symmetric"). A smaller level of ``a`` is a larger one of ``b``, so the second
    claim swaps the groups: a level below another's is not thereby "more skew" (both may be symmetric), which is why
    no word for the other direction is taken.

    >>> difference_words("encoders", "decoders", "more symmetric")
    ('the encoders are more symmetric than the decoders', 'the decoders are more symmetric than the encoders')
    """
    return f"the {a} are {up} than the {b}", f"the {b} are {up} than the {a}"


def change_words(a: str, b: str, score: str, up: str, down: str, mean_a: float, mean_b: float
                 ) -> tuple[str, str]:
    """The two claims (for ``a − b`` > 0 and < 0) of a contrast of *changes*, in plain words.

    When both arms' mean changes have one sign, the claim compares how far each moves that way ("rises less",
    "falls further"), naming the way once (``up``/``down``: what a positive and a negative change of ``score``
    mean, "toward symmetric", "toward the key side"). When they do not, the claim compares the changes and says
    nothing of either arm's own direction: a difference of two changes is never turned into a direction for each
    arm.

    >>> change_words("causal LM", "masked LM", "symmetry", "toward symmetric", "toward skew", 0.016, 0.19)[1]
    "the causal LM's symmetry rises less than the masked LM's (toward symmetric)"
    >>> change_words("causal LM", "masked LM", "directionality", "toward the query side", "toward the key side",
    ...              -0.46, -0.16)[1]
    "the causal LM's directionality falls further than the masked LM's (toward the key side)"
    >>> change_words("causal LM", "masked LM", "symmetry", "toward symmetric", "toward skew", 0.02, -0.01)[0]
    "the causal LM's change of symmetry is larger than the masked LM's"
    """
    if mean_a >= 0 and mean_b >= 0 and (mean_a > 0 or mean_b > 0):
        return (f"the {a}'s {score} rises more than the {b}'s ({up})",
                f"the {a}'s {score} rises less than the {b}'s ({up})")
    if mean_a <= 0 and mean_b <= 0 and (mean_a < 0 or mean_b < 0):
        return (f"the {a}'s {score} falls less than the {b}'s ({down})",
                f"the {a}'s {score} falls further than the {b}'s ({down})")
    return (f"the {a}'s change of {score} is larger than the {b}'s",
            f"the {a}'s change of {score} is smaller than the {b}'s")


@dataclass(frozen=True)
class Claim:
    """A contrast stated from its specification curve.

    ``subject`` names the quantity ("Δd per layer, causal − masked LM"); ``larger``/``smaller`` are what a positive
    and a negative estimate say (from :func:`change_words` or :func:`difference_words`); ``curve`` holds every
    specification, exactly one of them ``primary`` (the one stated before the numbers). ``not_computed`` lists
    specifications that could not be computed, with why ("matched at 15%: the masked LM never gets there").
    ``decimals`` fixes how numbers are written (0 for counts of steps); by default each interval's width decides.
    ``short_larger``/``short_smaller``/``short_subject``: shorter words for the same two claims and the quantity,
    for :attr:`line` (default: the full ones).
    """

    subject: str
    larger: str
    smaller: str
    curve: tuple[Specification, ...]
    not_computed: tuple[str, ...] = field(default=())
    decimals: int | None = None
    short_larger: str = ""
    short_smaller: str = ""
    short_subject: str = ""
    #: the primary's p-value adjusted within the family of tests it belongs to (Holm), when it belongs to one: a
    #: primary whose own interval excludes 0 is not called established when this is 0.05 or more
    p_adjusted: float | None = None

    def __post_init__(self):
        primaries = [s for s in self.curve if s.primary]
        if len(primaries) != 1:
            raise ValueError(f"curve: exactly one specification must be the primary; got {len(primaries)} of "
                             f"{len(self.curve)} for {self.subject!r}.")

    @property
    def primary(self) -> Specification:
        return next(s for s in self.curve if s.primary)

    @property
    def claim(self) -> str:
        """What the primary estimate says, by its sign."""
        return self.larger if self.primary.interval.estimate > 0 else self.smaller

    @property
    def reading(self) -> Reading:
        sign = self.primary.sign
        agree = tuple(s for s in self.curve if s.sign == sign and sign != 0)
        against = tuple(s for s in self.curve if s not in agree)
        est_agree = tuple(s for s in agree if s.established)
        est_against = tuple(s for s in against if s.established)
        if not self.primary.established or self._adjusted_away:
            outcome = "not established"
        elif est_against:
            outcome = "reverses"
        elif against:
            outcome = "primary only"
        elif len(est_agree) == len(self.curve):
            outcome = "holds"
        else:
            outcome = "direction holds"
        return Reading(outcome, agree, against, est_agree, est_against)

    @property
    def _adjusted_away(self) -> bool:
        """The primary's interval excludes 0, but the family's correction does not let it pass."""
        return self.primary.established and self.p_adjusted is not None and not self.p_adjusted < 0.05

    @property
    def _adjusted_note(self) -> str:
        return (f" (its interval excludes 0 before correction; after Holm's correction over its family, "
                f"{stats.format_p(self.p_adjusted)})" if self._adjusted_away else "")

    @property
    def holds(self) -> bool:
        """True when the claim may be stated without qualification: it holds at every specification."""
        return self.reading.outcome == "holds"

    @property
    def range_text(self) -> str:
        """The smallest and the largest estimate over the curve."""
        est = [s.interval.estimate for s in self.curve]
        scale = float(np.median([(s.interval.high - s.interval.low) / 2 for s in self.curve]))
        if self.decimals is not None:
            f = lambda v: stats.format_number(v, decimals=self.decimals)  # noqa: E731
        else:
            f = lambda v: stats.format_number(v, scale if scale > 0 else None)  # noqa: E731
        return f"{f(min(est))} to {f(max(est))}"

    @property
    def sentence(self) -> str:
        """The claim as the page states it: at the primary, then across the curve.

        >>> iv = lambda e, lo, hi: stats.Interval(e, lo, hi, 12, unit="seed")
        >>> c = Claim("Δd", "a is larger", "a is smaller", (
        ...     Specification("horizon", "step 4,000", iv(-0.26, -0.39, -0.12), primary=True),
        ...     Specification("horizon", "step 2,000", iv(0.14, 0.02, 0.26))))
        >>> c.reading.outcome
        'reverses'
        >>> print(c.sentence)
        At the pre-stated specification (step 4,000), a is smaller: Δd −0.26 [−0.39, −0.12] (n = 12 seeds). This does not hold across the 2 specifications: the interval excludes 0 with this sign at 1 of them, and the estimate reverses, with an interval that excludes 0, at step 2,000 (0.14 [0.02, 0.26]).
        """
        p = self.primary
        head = f"{self.subject} {_value(p.interval, self.decimals)} ({_units(p.interval)})"
        r = self.reading
        m = r.total
        if r.outcome == "not established":
            first = (f"At the pre-stated specification ({p.label}) no difference is established: {head}"
                     f"{self._adjusted_note}.")
            established = [s for s in self.curve if s.established]
            if established:
                # the arms' own changes differ between specifications, so the words of the primary are not reused:
                # only the sign of each estimate is stated
                sides = []
                for word, sign in (("positive", 1), ("negative", -1)):
                    these = [s for s in established if s.sign == sign]
                    if these:
                        sides.append(f"{word} at {_named(these, decimals=self.decimals)}")
                return (f"{first} Elsewhere on the curve of {m} specifications an interval excludes 0: "
                        f"{self.subject} is {'; '.join(sides)}.")
            return f"{first} No interval on the curve of {m} specifications excludes 0 ({self.range_text})."
        first = f"{_capital(self.claim)}: {head}"
        if r.outcome == "holds":
            return (f"{first}, at the pre-stated specification ({p.label}); the interval excludes 0 with the same "
                    f"sign at every one of the {m} specifications ({self.range_text}).")
        first = f"At the pre-stated specification ({p.label}), {self.claim}: {head}."
        k = len(r.established_agree)
        if r.outcome == "direction holds":
            weak = [s for s in r.agree if not s.established]
            return (f"{first} Every one of the {m} specifications points the same way ({self.range_text}); the "
                    f"interval excludes 0 at {k} of them and includes 0 at {len(weak)} of them "
                    f"({_named(weak, with_values=False)}).")
        if r.outcome == "primary only":
            return (f"{first} It does not hold across the {m} specifications: the interval excludes 0 with this sign "
                    f"at {k} of them, and the estimate has the other sign at {len(r.against)} of them "
                    f"({_named(r.against, decimals=self.decimals)}), none of them established.")
        return (f"{first} This does not hold across the {m} specifications: the interval excludes 0 with this sign "
                f"at {k} of them, and the estimate reverses, with an interval that excludes 0, at "
                f"{_named(r.established_against, decimals=self.decimals)}.")

    @property
    def _signs_text(self) -> str:
        """Where the interval excludes 0, by the sign of the estimate (for a claim not established)."""
        pos = sum(s.established and s.sign > 0 for s in self.curve)
        neg = sum(s.established and s.sign < 0 for s in self.curve)
        return f"the interval excludes 0 at {pos} with a positive and at {neg} with a negative estimate"

    @property
    def brief(self) -> str:
        """How the curve reads, in a clause with no direction words (for a sentence that names the contrast itself).

        >>> iv = lambda e, lo, hi: stats.Interval(e, lo, hi, 12, unit="seed")
        >>> Claim("Δd", "up", "down", (Specification("horizon", "step 4,000", iv(-0.26, -0.39, -0.12), primary=True),
        ...                            Specification("horizon", "step 2,000", iv(0.14, 0.02, 0.26)))).brief
        'reverses, with an interval that excludes 0, at 1 of 2 specifications (step 2,000)'
        """
        r = self.reading
        m, k = r.total, len(r.established_agree)
        if r.outcome == "not established":
            return (f"is not established at the pre-stated specification{self._adjusted_note}; of {m} specifications, "
                    f"{self._signs_text}")
        if r.outcome == "holds":
            return f"holds at every one of the {m} specifications ({self.range_text})"
        if r.outcome == "direction holds":
            return f"keeps its sign at all {m} specifications, with an interval that excludes 0 at {k} of them"
        if r.outcome == "primary only":
            return (f"keeps its sign at {len(r.agree)} of {m} specifications; it has the other sign at "
                    f"{_named(r.against, with_values=False)}, never with an interval that excludes 0")
        return (f"reverses, with an interval that excludes 0, at {len(r.established_against)} of {m} specifications "
                f"({_named(r.established_against, with_values=False)})")

    @property
    def short(self) -> str:
        """How the curve reads in a clause of counts only, naming no specification (for a box of key results, where
        a line must stay short on a phone; the page's table names them).

        >>> iv = lambda e, lo, hi: stats.Interval(e, lo, hi, 12, unit="seed")
        >>> Claim("Δd", "up", "down", (Specification("horizon", "step 4,000", iv(-0.26, -0.39, -0.12), primary=True),
        ...                            Specification("horizon", "step 2,000", iv(0.14, 0.02, 0.26)))).short
        'reverses, with an interval that excludes 0, at 1 of 2 specifications'
        """
        r = self.reading
        m = r.total
        if r.outcome == "not established":
            return "is not established at the pre-stated specification" + self._adjusted_note
        if r.outcome == "holds":
            return f"holds at every one of the {m} specifications"
        if r.outcome == "direction holds":
            weak = m - len(r.established_agree)
            return f"keeps its sign at all {m} specifications, but its interval includes 0 at {weak} of them"
        if r.outcome == "primary only":
            return (f"keeps its sign at {len(r.agree)} of {m} specifications and has the other sign at "
                    f"{len(r.against)}, never with an interval that excludes 0; its interval includes 0 at "
                    f"{m - len(r.established_agree)} of them")
        return f"reverses, with an interval that excludes 0, at {len(r.established_against)} of {m} specifications"

    @property
    def line(self) -> str:
        """The claim in one short line, for a box of key results (a phone shows it in a few lines): what the
        primary estimate says (in the short words, by its sign), the estimate with its interval and n, and how the
        curve reads in counts (:attr:`short`). It starts in lower case, after the box's own lead words.

        >>> iv = lambda e, lo, hi: stats.Interval(e, lo, hi, 30, unit="lineage")
        >>> Claim("encoder − decoder median directionality",
        ...       "the decoder stacks are more key-dominated (lower directionality) than the encoder stacks", "...",
        ...       (Specification("lineages", "all 30 lineages", iv(0.15, 0.05, 0.35), primary=True),
        ...        Specification("rows", "without GQA rows", iv(0.12, 0.03, 0.3))),
        ...       short_larger="the decoder stacks are more key-dominated", short_subject="encoder − decoder median").line
        'the decoder stacks are more key-dominated (encoder − decoder median 0.15 [0.05, 0.35], n = 30 lineages); it holds at every one of the 2 specifications.'
        """
        p = self.primary
        value = f"{self.short_subject or self.subject} {_value(p.interval, self.decimals)}, {_units(p.interval)}"
        if self.reading.outcome == "not established":
            return f"no difference is established ({value}){self._adjusted_note}."
        words = ((self.short_larger or self.larger) if p.interval.estimate > 0 else
                 (self.short_smaller or self.smaller))
        return f"{words} ({value}); it {self.short}."

    @property
    def summary(self) -> str:
        """The claim in one shorter sentence, for a box of key results: the primary, then how the curve reads.

        >>> iv = lambda e, lo, hi: stats.Interval(e, lo, hi, 12, unit="seed")
        >>> print(Claim("Δd", "a is larger", "a is smaller", (
        ...     Specification("horizon", "step 4,000", iv(-0.26, -0.39, -0.12), primary=True),
        ...     Specification("horizon", "step 2,000", iv(0.14, 0.02, 0.26)))).summary)
        A is smaller at the pre-stated specification (step 4,000: Δd −0.26 [−0.39, −0.12], n = 12 seeds), but not across the curve: of 2 specifications, the interval excludes 0 with this sign at 1 and with the other sign at 1 (step 2,000).
        """
        p, r = self.primary, self.reading
        at = f"({p.label}: {self.subject} {_value(p.interval, self.decimals)}, {_units(p.interval)})"
        m, k = r.total, len(r.established_agree)
        if r.outcome == "not established":
            return (f"No difference is established at the pre-stated specification {at}{self._adjusted_note}; of {m} "
                    f"specifications, {self._signs_text}.")
        head = f"{_capital(self.claim)} at the pre-stated specification {at}"
        if r.outcome == "holds":
            return f"{head}, and at every one of the {m} specifications ({self.range_text})."
        if r.outcome == "direction holds":
            return (f"{head}; every one of the {m} specifications has this sign, and the interval excludes 0 at "
                    f"{k} of them.")
        if r.outcome == "primary only":
            return (f"{head}, but not across the curve: of {m} specifications, the interval excludes 0 with this sign "
                    f"at {k}, and the estimate has the other sign at {len(r.against)} "
                    f"({_named(r.against, with_values=False)}), none of them established.")
        return (f"{head}, but not across the curve: of {m} specifications, the interval excludes 0 with this sign at "
                f"{k} and with the other sign at {len(r.established_against)} "
                f"({_named(r.established_against, with_values=False)}).")

    def by_axis(self) -> pandas.DataFrame:
        """The curve counted by the choice it varies (its ``axis``: horizons per layer, matched learning per head,
        ...), so that a choice with many points (every logged step) does not outvote one with few: per axis, the
        number of specifications, how many are established with the primary's sign and with the other sign, and the
        range of n (a level that only some seeds reach rests on fewer)."""
        import pandas as pd

        sign = self.primary.sign
        rows = []
        for axis in dict.fromkeys(s.axis for s in self.curve):
            specs = [s for s in self.curve if s.axis == axis]
            ns = [s.interval.n for s in specs]
            rows.append({"axis": axis, "specifications": len(specs),
                         "same_sign": sum(s.established and s.sign == sign for s in specs),
                         "other_sign": sum(s.established and s.sign == -sign for s in specs),
                         "n": f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}–{max(ns)}"})
        return pd.DataFrame(rows)

    def frame(self) -> pandas.DataFrame:
        """The curve as a table: ``axis, label, estimate, low, high, n, unit, primary, established``, sorted by the
        estimate (the order of the figure)."""
        import pandas as pd

        rows = [{"axis": s.axis, "label": s.label, "estimate": s.interval.estimate, "low": s.interval.low,
                 "high": s.interval.high, "n": s.interval.n, "unit": s.interval.unit, "primary": s.primary,
                 "established": s.established} for s in self.curve]
        return pd.DataFrame(rows).sort_values("estimate", kind="stable", ignore_index=True)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
