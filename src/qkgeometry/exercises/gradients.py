"""Checkers for the exercises of chapter 3, "Where directional structure could come from: the gradient, and a fair test".

Each checker compares the learner's answer with :mod:`qkgeometry.analyses.gradients` on fresh inputs, prints a one-line
verdict and returns True/False.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..analyses.gradients import pair_classes, sliding_window_mask, softmax_backward
from . import compare, report

__all__ = [
    "CURVES",
    "PAIRED_SEEDS",
    "check_curve_readings",
    "check_pair_counts",
    "check_paired_interval",
    "check_two_token_gradient",
    "two_token_cases",
]


def two_token_cases(seed: int = 0, n_cases: int = 6) -> list[tuple[np.ndarray, np.ndarray, bool]]:
    """Test inputs ``(a, dL_dP, causal)``: 2 × 2 logits, 2 × 2 upstream gradients, and the mask kind."""
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(n_cases):
        cases.append((rng.normal(scale=2.0, size=(2, 2)), rng.normal(size=(2, 2)), bool(k % 2)))
    return cases


def _reference_two_token(a: np.ndarray, dl_dp: np.ndarray, causal: bool) -> np.ndarray:
    a_t = torch.as_tensor(np.asarray(a, dtype=float))
    if causal:
        a_t = a_t.masked_fill(torch.tensor([[False, True], [False, False]]), float("-inf"))
    p = a_t.softmax(dim=-1)
    return softmax_backward(p, torch.as_tensor(np.asarray(dl_dp, dtype=float))).numpy()


def check_two_token_gradient(fn: Callable[[np.ndarray, np.ndarray, bool], np.ndarray], seed: int = 0) -> bool:
    """Exercise 3.1: ``fn(a, dL_dP, causal)`` returns the 2 × 2 matrix ``g_ij = ∂L/∂a_ij``.

    ``a``: logits (2, 2); ``dL_dP``: ∂L/∂P_ij (2, 2); ``causal``: if True, query 1 may not see key 2 (``a[0, 1]``
    is ignored and ``g[0, 1]`` must be 0). Write it by hand from your derivation — no autograd, no library call.
    """
    cases = two_token_cases(seed)
    ok = compare(fn, _reference_two_token, cases, "g for a 2-token sequence", atol=1e-10)
    if not ok:
        print("   hint: apply the chain rule through the softmax of each row separately, over that row's allowed keys"
              " only; under the causal mask query 1 has a single key.")
    return ok


def check_pair_counts(n: int, window: int, causal: bool, predicted: tuple[int, int, int]) -> bool:
    """Exercise 3.2: predict ``(diagonal, paired, unpaired)`` — the number of allowed (i, j) in each class.

    Counts are ordered pairs: a couple (i, j), (j, i) counts 2 in ``paired``. The mask is
    :func:`qkgeometry.analyses.gradients.sliding_window_mask(n, window, causal=causal)`.
    """
    try:
        got = tuple(int(v) for v in predicted)
    except (TypeError, ValueError):
        return report(False, "pair counts", f"`predicted` must be three integers; got {predicted!r}")
    if len(got) != 3:
        return report(False, "pair counts", f"`predicted` must be three integers; got {len(got)} values")
    cls = pair_classes(sliding_window_mask(n, window, causal=causal))
    want = tuple(int(m.sum()) for m in cls)
    if got == want:
        return report(True, "pair counts", f"n={n}, window={window}, causal={causal}: {want}")
    wrong = [name for name, g, w in zip(("diagonal", "paired", "unpaired"), got, want) if g != w]
    return report(False, "pair counts", f"n={n}, window={window}, causal={causal}: {', '.join(wrong)} "
                                        f"count{'s' if len(wrong) > 1 else ''} off (you said {got})")


#: Exercise 3.3: the change of directionality per layer (Δd, median over layers) of five training seeds of two arms
#: of a fair test. Seed k of both arms starts from the same initialisation and reads the same batches.
PAIRED_SEEDS = {"causal": (-0.18, -0.37, -0.06, -0.27, -0.49), "mlm": (-0.10, -0.32, 0.05, -0.21, -0.40)}


def _triple(value, name: str) -> tuple[float, float, float] | str:
    try:
        got = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        return f"`{name}` must be three numbers (estimate, low, high); got {value!r}"
    if len(got) != 3:
        return f"`{name}` must be three numbers (estimate, low, high); got {len(got)}"
    return got


def check_paired_interval(paired, unpaired, atol: float = 2e-3) -> bool:
    """Exercise 3.3: ``paired`` and ``unpaired`` are ``(estimate, low, high)`` of causal − masked LM over
    :data:`PAIRED_SEEDS`, as a 95% interval: ``paired`` from the five per-seed differences (Student t with 4 degrees
    of freedom), ``unpaired`` from the two arms as if they were independent samples (Welch's t). Numbers rounded to
    three decimals pass. Prints one line; returns True/False."""
    from scipy import stats as scipy_stats

    from ..stats import format_number, paired_difference

    name = "paired and unpaired intervals"
    causal, mlm = (np.asarray(PAIRED_SEEDS[k]) for k in ("causal", "mlm"))
    p = paired_difference(causal, mlm).interval
    want_p = (p.estimate, p.low, p.high)
    welch = scipy_stats.ttest_ind(causal, mlm, equal_var=False).confidence_interval(0.95)
    want_u = (float(causal.mean() - mlm.mean()), float(welch.low), float(welch.high))
    got_p, got_u = _triple(paired, "paired"), _triple(unpaired, "unpaired")
    for got in (got_p, got_u):
        if isinstance(got, str):
            return report(False, name, got)
    close = lambda a, b: bool(np.allclose(a, b, atol=atol, rtol=0))  # noqa: E731
    if close(got_p, tuple(-v for v in (want_p[0], want_p[2], want_p[1]))):
        return report(False, name, "that is masked − causal; the exercise asks for causal − masked LM")
    if close(got_p, want_u):
        return report(False, name, "your paired interval is the unpaired one: take the five per-seed differences "
                                   "first, then one interval of their mean")
    if not close(got_p[:1], want_p[:1]):
        return report(False, name, f"the paired estimate is off (you said {format_number(got_p[0], decimals=3)}); "
                                   "it is the mean of the "
                                   "five differences causal[k] − mlm[k]")
    if not close(got_p, want_p):
        z = 1.959964 * np.std(causal - mlm, ddof=1) / np.sqrt(5)
        hint = (" (that is the normal 1.96; with five seeds use Student's t with 4 degrees of freedom)"
                if close(got_p[1:], (want_p[0] - z, want_p[0] + z)) else
                " (the standard error is the standard deviation of the differences, ddof = 1, over √5)")
        return report(False, name, f"the paired interval is off{hint}")
    if not close(got_u, want_u):
        return report(False, name, "the paired interval is right; the unpaired one is off (Welch: the two arms' "
                                   "variances over 5 each, and the Welch-Satterthwaite degrees of freedom)")
    f = lambda v: format_number(v, decimals=3)  # noqa: E731
    return report(True, name, f"paired [{f(want_p[1])}, {f(want_p[2])}] excludes 0, unpaired "
                              f"[{f(want_u[1])}, {f(want_u[2])}] does not: same estimate, the spread over training seeds removed")


#: Exercise 3.4: five specification curves of one contrast; each point is (where it was read, estimate, low, high)
#: of a 95% interval, and the first point is the pre-stated one.
CURVES = {
    "A": (("step 4,000, per layer", -0.30, -0.42, -0.19), ("step 2,000, per layer", -0.25, -0.40, -0.10),
          ("step 4,000, per head", -0.28, -0.35, -0.21), ("matched at 10%", -0.20, -0.33, -0.07)),
    "B": (("step 4,000, per layer", -0.26, -0.39, -0.12), ("step 1,000, per layer", -0.05, -0.20, 0.10),
          ("step 4,000, per head", -0.15, -0.30, -0.01)),
    "C": (("step 4,000, per layer", -0.26, -0.39, -0.12), ("matched at 5%", 0.14, 0.02, 0.26),
          ("step 4,000, per head", -0.20, -0.31, -0.09)),
    "D": (("step 4,000, per layer", -0.05, -0.15, 0.06), ("step 2,000, per layer", -0.12, -0.20, -0.04),
          ("step 4,000, per head", -0.02, -0.09, 0.05)),
    "E": (("step 4,000, per layer", 0.20, 0.05, 0.35), ("step 4,000, per head", -0.03, -0.15, 0.09),
          ("matched at 10%", 0.12, 0.01, 0.23)),
}


def curve_readings() -> dict[str, str]:
    """How each of :data:`CURVES` reads (:meth:`qkgeometry.claims.Claim.reading`): the reference answers."""
    from ..claims import Claim, Specification
    from ..stats import Interval

    out = {}
    for name, points in CURVES.items():
        curve = tuple(Specification("", label, Interval(e, lo, hi, 12, unit="seed"), primary=k == 0)
                      for k, (label, e, lo, hi) in enumerate(points))
        out[name] = Claim("Δd", "larger", "smaller", curve).reading.outcome
    return out


def check_curve_readings(answers) -> bool:
    """Exercise 3.4 (by hand): ``answers`` maps each curve of :data:`CURVES` ("A" to "E") to how it reads: one of
    "holds", "direction holds", "primary only", "reverses", "not established". Prints one line; returns True/False."""
    from ..claims import OUTCOMES

    name = "reading specification curves"
    want = curve_readings()
    if not isinstance(answers, dict) or set(answers) != set(want):
        return report(False, name, f"give a dict with one reading for each of {', '.join(want)}")
    unknown = sorted(k for k, v in answers.items() if v not in OUTCOMES)
    if unknown:
        return report(False, name, f"curve{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: a reading is "
                                   f"one of {', '.join(repr(o) for o in OUTCOMES)}")
    wrong = sorted(k for k in want if answers[k] != want[k])
    if wrong:
        hints = {"not established": "start from the pre-stated interval: does it exclude 0?",
                 "reverses": "does any interval exclude 0 with the other sign?",
                 "primary only": "some estimate has the other sign, though no such interval excludes 0",
                 "direction holds": "every estimate has the pre-stated sign, but not every interval excludes 0",
                 "holds": "every interval excludes 0 with the pre-stated sign"}
        k = wrong[0]
        return report(False, name, f"curve{'s' if len(wrong) > 1 else ''} {', '.join(wrong)} read otherwise; "
                                   f"for {k}: {hints[want[k]]}")
    return report(True, name, "only A may be stated without qualification; D is no finding, though one of its "
                              "intervals excludes 0")
