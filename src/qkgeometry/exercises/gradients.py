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

__all__ = ["check_pair_counts", "check_two_token_gradient", "two_token_cases"]


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
