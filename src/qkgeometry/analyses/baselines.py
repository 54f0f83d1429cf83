"""Null baselines: the scores of random Gaussian bilinear forms ``W = A Bᵀ``.

A single layer's score means little without knowing how much a random matrix of the same shape scatters, so every
figure that shows real scores shows this baseline next to it. Book chapter 2, "How noisy is one layer?".

``A`` and ``B`` have i.i.d. N(0, 1) entries and shape (d, r): ``r = d_h`` for one head, ``r = n_kv_heads · d_h`` for a
layer (the book's Notation page). The scale does not matter: both scores are scale invariant.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..scores import scores_factored

__all__ = ["null_grid", "random_factor_scores"]


def random_factor_scores(d: int, r: int, n_samples: int, seed: int = 0, num_std: float = 2.0,
                         chunk: int = 32) -> pd.DataFrame:
    """Scores of ``n_samples`` random ``A Bᵀ`` with ``A, B`` of shape (d, r), i.i.d. standard normal.

    Returns a frame with columns ``d, r, sample, symmetry, directionality`` (one row per sample), computed with the
    factored formulas in chunks of ``chunk`` matrices (memory O(chunk · d · r)).

    Book: chapter 2, "How noisy is one layer?".
    """
    for name, v in (("d", d), ("r", r), ("n_samples", n_samples), ("chunk", chunk)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"`{name}` must be a positive integer; got {v!r}.")
    if d < 2:
        raise ValueError(f"`d` must be at least 2 (the directionality score needs a standard deviation); got {d}.")
    rng = np.random.default_rng(seed)
    sym, direc = [], []
    for start in range(0, n_samples, chunk):
        n = min(chunk, n_samples - start)
        a = rng.standard_normal((n, d, r))
        b = rng.standard_normal((n, d, r))
        s = scores_factored(a, b, num_std=num_std)
        sym.append(np.atleast_1d(s.symmetry))
        direc.append(np.atleast_1d(s.directionality))
    return pd.DataFrame({"d": d, "r": r, "sample": np.arange(n_samples),
                         "symmetry": np.concatenate(sym), "directionality": np.concatenate(direc)})


def null_grid(ds: list[int], rs: list[int], n_samples: int, seed: int = 0, num_std: float = 2.0) -> pd.DataFrame:
    """:func:`random_factor_scores` for every (d, r) with r <= d, stacked into one tidy frame.

    Book: chapter 2, "How noisy is one layer?" (the grid of d and r).
    """
    frames = [random_factor_scores(d, r, n_samples, seed=seed + 1000 * i + j, num_std=num_std)
              for i, d in enumerate(ds) for j, r in enumerate(rs) if r <= d]
    if not frames:
        raise ValueError(f"no (d, r) pair with r <= d in ds={ds}, rs={rs}.")
    return pd.concat(frames, ignore_index=True)
