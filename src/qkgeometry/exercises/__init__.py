"""Checkers for the book's exercises, one module per chapter.

Each checker takes the learner's function or answer, tests it against the reference on fresh random inputs, prints a
one-line verdict and returns True/False. It never raises on a wrong answer (learners iterate), but it does say what
went wrong and on which input.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..tables import format_number


def report(ok: bool, name: str, detail: str = "") -> bool:
    """Print a uniform verdict line and return ``ok``."""
    mark = "\u2705 correct" if ok else "\u274c not yet"
    print(f"{mark}: {name}" + (f" \u2014 {detail}" if detail else ""))
    return ok


def compare(candidate: Callable, reference: Callable, cases: list[tuple], name: str, atol: float = 1e-8) -> bool:
    """Call ``candidate(*case)`` and ``reference(*case)`` on each case and report the first mismatch."""
    for i, case in enumerate(cases):
        try:
            got = candidate(*case)
        except Exception as e:  # learners' code may raise anything; report it instead of crashing the notebook
            return report(False, name, f"raised {type(e).__name__}: {e} on test case {i}")
        want = reference(*case)
        got_t = got if isinstance(got, tuple) else (got,)
        want_t = want if isinstance(want, tuple) else (want,)
        if len(got_t) != len(want_t):
            return report(False, name, f"returned {len(got_t)} values, expected {len(want_t)}")
        for g, w in zip(got_t, want_t):
            g = np.asarray(g, dtype=float)
            w = np.asarray(w, dtype=float)
            if g.shape != w.shape:
                return report(False, name, f"shape {g.shape} on test case {i}, expected {w.shape}")
            if not np.allclose(g, w, atol=atol, rtol=1e-6):
                err = float(np.max(np.abs(g - w)))
                return report(False, name, f"max abs error {format_number(err, spec='.3g')} on test case {i}")
    return report(True, name, f"{len(cases)} test cases")
