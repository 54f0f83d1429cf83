"""What scoring a form costs: the dense route (form the d × d matrix, then score it) against the factored one (score
it from the d × r factors through r × r Gram matrices), timed side by side. Chapter 2, "Scoring without forming the
matrix".

Timings on a shared machine move with its load, so the two routes are called alternately, ``repeats`` times each,
and each is given its median: load that comes and goes hits both alike. The ratio is the measurement; the absolute
times are this machine's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..scores import directionality_score, scores_factored, symmetry_score

__all__ = ["dense_vs_factored", "round_robin"]


def round_robin(fns: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median wall time (s) of each function of ``fns``, calling them in turn ``repeats`` times so that the
    machine's load hits every one alike.

    >>> sorted(round_robin({"a": lambda: None, "b": lambda: sum(range(10))}, repeats=3))
    ['a', 'b']
    """
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"repeats: must be a whole number >= 1; got {repeats!r}.")
    if not fns:
        raise ValueError("fns: give at least one function to time.")
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(int(repeats)):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def dense_vs_factored(ds: Sequence[int], r: int = 64, repeats: int = 7, seed: int = 0) -> pd.DataFrame:
    """One row per width d of ``ds``: both scores of a random form A Bᵀ (A, B of shape (d, r), i.i.d. N(0, 1),
    drawn from one generator seeded by ``seed``) by the dense route and by the factored one, their median times
    (ms, :func:`round_robin`), the speed-up, the memory each route holds (MiB of float64) and the largest difference
    between the two routes' scores in units of float64's machine epsilon. Chapter 2.

    >>> row = dense_vs_factored([32], r=4, repeats=1).iloc[0]
    >>> int(row["d"]), int(row["r"]), bool(row["max |difference|"] < 100)
    (32, 4, True)
    """
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise ValueError(f"r: must be a whole number >= 1; got {r!r}.")
    bad = [d for d in ds if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2]
    if bad or not len(ds):
        raise ValueError(f"ds: widths must be whole numbers >= 2, at least one; got {list(ds)!r}.")
    eps = np.finfo(float).eps
    rng = np.random.default_rng(seed)
    rows = []
    for d in ds:
        a, b = rng.standard_normal((d, r)), rng.standard_normal((d, r))

        def dense(a=a, b=b):
            m = a @ b.T
            return symmetry_score(m), directionality_score(m)

        def factored(a=a, b=b):
            return scores_factored(a, b)

        (s_d, d_d), (s_f, d_f) = dense(), factored()
        t = round_robin({"dense": dense, "factored": factored}, repeats=repeats)
        rows.append({"d": int(d), "r": int(r), "dense (ms)": 1e3 * t["dense"], "factored (ms)": 1e3 * t["factored"],
                     "speed-up": t["dense"] / t["factored"], "dense memory (MiB)": d * d * 8 / 2**20,
                     "factored memory (MiB)": 2 * d * r * 8 / 2**20,
                     "max |difference|": max(abs(s_d - s_f), abs(d_d - d_f)) / eps})
    return pd.DataFrame(rows)
