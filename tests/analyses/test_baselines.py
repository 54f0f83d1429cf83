"""baselines: the Gaussian null of both scores is what it says (the scores of A Bᵀ for Gaussian A, B), with the
exact null mean E s = 1/d, and refuses bad sizes with a clear message."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry import directionality_score, symmetry_score
from qkgeometry.analyses.baselines import null_grid, random_factor_scores


def test_samples_are_the_scores_of_the_dense_random_matrices():
    d, r, n = 7, 3, 5
    frame = random_factor_scores(d, r, n, seed=3, chunk=n)
    rng = np.random.default_rng(3)  # the same stream: one chunk of A's, then one of B's
    a, b = rng.standard_normal((n, d, r)), rng.standard_normal((n, d, r))
    dense = a @ np.swapaxes(b, 1, 2)
    np.testing.assert_allclose(frame["symmetry"], symmetry_score(dense), rtol=0, atol=1e-12)
    np.testing.assert_allclose(frame["directionality"], directionality_score(dense), rtol=0, atol=1e-12)
    assert list(frame.columns) == ["d", "r", "sample", "symmetry", "directionality"]
    assert (frame["d"] == d).all() and (frame["r"] == r).all() and list(frame["sample"]) == list(range(n))


def test_seeded_and_chunked_without_losing_or_repeating_samples():
    one = random_factor_scores(6, 2, 50, seed=0, chunk=7)
    pd.testing.assert_frame_equal(one, random_factor_scores(6, 2, 50, seed=0, chunk=7))
    assert len(one) == 50 and one["symmetry"].nunique() == 50
    assert not np.allclose(one["symmetry"], random_factor_scores(6, 2, 50, seed=1, chunk=7)["symmetry"])


def test_null_mean_of_the_symmetry_score_is_one_over_d():
    """For A Bᵀ with i.i.d. Gaussian factors, E s = 1/d exactly (the book's Notation page), for every rank r."""
    d = 8
    for r in (1, 4):
        s = random_factor_scores(d, r, 4000, seed=r)["symmetry"]
        se = s.std(ddof=1) / np.sqrt(len(s))
        assert abs(s.mean() - 1 / d) < 4 * se, (r, s.mean(), se)
    # r = 1: s = cos²(a, b) ∈ [0, 1]
    assert random_factor_scores(d, 1, 200, seed=0)["symmetry"].between(0, 1 + 1e-12).all()


def test_directionality_null_is_symmetric_about_zero():
    """Mᵀ has the same law as M and d(Mᵀ) = −d(M): the null median is 0 up to sampling noise."""
    direc = random_factor_scores(16, 4, 2000, seed=5)["directionality"]
    assert abs((direc > 0).mean() - (direc < 0).mean()) < 0.1


@pytest.mark.parametrize("kwargs, message", [
    ({"d": 1, "r": 1, "n_samples": 3}, "`d` must be at least 2"),
    ({"d": 4, "r": 0, "n_samples": 3}, "`r` must be a positive integer; got 0"),
    ({"d": 4, "r": 2, "n_samples": 2.5}, "`n_samples` must be a positive integer; got 2.5"),
    ({"d": 4, "r": 2, "n_samples": 3, "chunk": 0}, "`chunk` must be a positive integer; got 0"),
])
def test_bad_sizes_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        random_factor_scores(**kwargs)


def test_null_grid_covers_each_rank_up_to_d_with_independent_seeds():
    grid = null_grid([4, 8], [2, 4, 8], 10, seed=0)
    pairs = sorted(set(zip(grid["d"], grid["r"])))
    assert pairs == [(4, 2), (4, 4), (8, 2), (8, 4), (8, 8)]
    assert grid.groupby(["d", "r"]).size().eq(10).all()
    first = grid[(grid.d == 8) & (grid.r == 2)]["symmetry"].to_numpy()
    assert not np.allclose(first, random_factor_scores(8, 2, 10, seed=0)["symmetry"])  # seed offset per pair
    with pytest.raises(ValueError, match="no \\(d, r\\) pair with r <= d"):
        null_grid([2], [4], 5)
