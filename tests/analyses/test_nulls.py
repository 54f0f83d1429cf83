"""nulls: every closed form against Monte Carlo, with tolerances from the Monte Carlo standard error (Z = 4.5
standard errors: a false alarm has probability below 1e-5 per check; seeds are fixed, so runs are reproducible),
and the exact directionality facts (d <= 5 theorem, atoms, symmetry)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import qkgeometry as qg
from qkgeometry.analyses import nulls

Z = 4.5


def _close(estimate: float, exact: float, standard_error: float) -> None:
    assert abs(estimate - exact) < Z * standard_error, (estimate, exact, standard_error)


def _mean_and_var_se(x: np.ndarray) -> tuple[float, float]:
    """Standard errors of the sample mean and of the sample variance (delta method: sd of (x − x̄)² / √n)."""
    n = len(x)
    return float(x.std(ddof=1) / math.sqrt(n)), float(((x - x.mean()) ** 2).std(ddof=1) / math.sqrt(n))


def _lowrank(d: int, r: int, n: int, seed: int):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((n, d, r)), rng.standard_normal((n, d, r))
    return qg.symmetry_score_factored(a, b), nulls.rotation_null_moments_factored(a, b).rho


# ------------------------------------------------------------------------------------------ Gaussian null
@pytest.mark.parametrize("d", [3, 8, 20])
def test_gaussian_null_is_a_shifted_beta(d):
    x = qg.symmetry_score(np.random.default_rng(d).standard_normal((20_000, d, d)))
    law = nulls.gaussian_symmetry_law(d)
    mean, var = nulls.gaussian_symmetry_moments(d)
    assert (law.mean(), law.var()) == pytest.approx((mean, var), rel=1e-12)
    assert mean == 1 / d
    se_mean, se_var = _mean_and_var_se(x)
    _close(x.mean(), mean, se_mean)
    _close(x.var(ddof=1), var, se_var)
    assert stats.kstest(x, law.cdf).pvalue > 1e-5  # the whole law, not only two moments


# ------------------------------------------------------------------------------------------ low-rank null
@pytest.mark.parametrize("d", [4, 16, 50])
def test_rank_one_is_cos_squared_beta(d):
    x, rho = _lowrank(d, 1, 20_000, seed=d)
    np.testing.assert_allclose(rho, 1.0, atol=1e-12)  # rank one: ρ = 1 exactly
    assert stats.kstest(x, nulls.rank_one_symmetry_law(d).cdf).pvalue > 1e-5
    # the variance formula is exact at r = 1 and equals the Beta variance
    assert nulls.lowrank_symmetry_variance(d, 1) == pytest.approx(nulls.rank_one_symmetry_law(d).var(), rel=1e-12)


@pytest.mark.parametrize(("d", "r"), [(8, 3), (16, 4), (32, 8), (24, 24), (64, 2)])
def test_lowrank_mean_is_one_over_d_and_variance_identity(d, r):
    x, rho = _lowrank(d, r, 20_000, seed=100 * d + r)
    se_mean, se_var = _mean_and_var_se(x)
    _close(x.mean(), 1 / d, se_mean)
    # Var s = rotation_null_variance(d, E ρ): ρ estimated from the same draws; its error propagates linearly
    slope = 6 * d / (d * d * (d - 1) * (d + 2))
    se_total = math.hypot(se_var, slope * rho.std(ddof=1) / math.sqrt(len(rho)))
    _close(x.var(ddof=1), nulls.lowrank_symmetry_variance(d, r, rho=rho.mean()), se_total)


@pytest.mark.parametrize(("d", "r"), [(32, 8), (64, 2), (128, 16)])
def test_ratio_of_means_variance_for_d_much_larger_than_r(d, r):
    """The closed-form E‖MᵀM‖²/E‖M‖⁴ stands in for E ρ; for d ≫ r its bias is far below the MC error here."""
    x, _ = _lowrank(d, r, 20_000, seed=7 * d + r)
    _close(x.var(ddof=1), nulls.lowrank_symmetry_variance(d, r), _mean_and_var_se(x)[1])
    assert nulls.lowrank_symmetry_variance(d, r) == pytest.approx(2 / d ** 2 * (1 - 3 / (r * d)), rel=0.2)


@pytest.mark.parametrize("r", [1, 3])
def test_fixed_r_large_d_limit(r):
    d = 2000
    x, _ = _lowrank(d, r, 4000, seed=r)
    scaled = d * x
    limit = nulls.large_d_limit_samples(r, 200_000, seed=1)
    _close(limit.mean(), 1.0, limit.std() / math.sqrt(len(limit)))
    _close(limit.var(), 2.0, _mean_and_var_se(limit)[1])
    _close(scaled.mean(), 1.0, scaled.std(ddof=1) / math.sqrt(len(scaled)))  # E[d·s] = 1 exactly at every d
    assert stats.ks_2samp(scaled, limit).pvalue > 1e-5


# ------------------------------------------------------------------------------------------ rotation null
def _fixed_matrices():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((10, 3)), rng.standard_normal((10, 3))
    a[:, 0] *= 6  # a spread-out spectrum
    full = rng.standard_normal((7, 7)) + 3 * np.eye(7)
    return [(a, b), (full, np.eye(7))]


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("two_sided", [False, True])
def test_rotation_null_moments(which, two_sided):
    a, b = _fixed_matrices()[which]
    null = nulls.rotation_null_moments_factored(a, b)
    dense = nulls.rotation_null_moments(a @ b.T)
    assert dense.rho == pytest.approx(null.rho, rel=1e-12)
    assert 1 / a.shape[1] - 1e-12 <= null.rho <= 1
    x = nulls.rotation_null_samples(a, b, 20_000, seed=11 + which, two_sided=two_sided)["symmetry"].to_numpy()
    se_mean, se_var = _mean_and_var_se(x)
    _close(x.mean(), null.mean, se_mean)
    _close(x.var(ddof=1), null.variance, se_var)


def test_rotation_null_directionality_is_symmetric_only_two_sided():
    a, b = _fixed_matrices()[0]
    one = nulls.rotation_null_samples(a, b, 4000, seed=3)["directionality"].to_numpy()
    two = nulls.rotation_null_samples(a, b, 4000, seed=3, two_sided=True)["directionality"].to_numpy()
    _close(two.mean(), 0.0, two.std(ddof=1) / math.sqrt(len(two)))
    # one-sided O M keeps M's column norms: here a strong key-side column... the law is NOT centred
    assert abs(one.mean()) > 10 * one.std(ddof=1) / math.sqrt(len(one))


def test_rotation_z_scores_of_a_real_model():
    frame = nulls.rotation_z_scores("offline:minilm-l6", per="layer")
    assert len(frame) == 6 and (frame["null_mean"] == 1 / 384).all()
    assert (frame["z"] > 10).all()  # every MiniLM layer is far more symmetric than its own rotations


# -------------------------------------------------------------------------------------- directionality
def test_max_z_score_is_attained_and_d_le_5_is_identically_zero():
    for n in range(2, 12):
        x = np.zeros(n)
        x[0] = 1.0
        assert (x[0] - x.mean()) / x.std(ddof=1) == pytest.approx(nulls.max_z_score(n), rel=1e-12)
        assert nulls.directionality_is_identically_zero(n) == (n <= 5)
    rng = np.random.default_rng(0)
    for d in range(2, 6):
        batch = rng.standard_normal((3000, d, d)) * rng.lognormal(0, 3, (3000, d, 1))  # wild row scales
        batch[:1000, 0] *= 1e6  # one enormous row
        batch[1000:2000, :, -1] *= 1e6  # one enormous column
        assert np.all(qg.directionality_score(batch) == 0.0)
    # sharp: at d = 6 a single outlier row already crosses mean + 2 std
    m = np.ones((6, 6))
    m[0] *= 100
    assert nulls.directionality_is_identically_zero(6) is False and qg.directionality_score(m) != 0


def test_atoms_at_minus_one_zero_plus_one_for_d_6_are_open_sets():
    rng = np.random.default_rng(1)
    w = np.arange(1.0, 7.0)
    for base, expected in ((np.outer(np.eye(6)[0], w), 1.0), (np.outer(w, np.eye(6)[0]), -1.0),
                           (np.outer(w, w), 0.0)):
        perturbed = base + 1e-3 * rng.standard_normal((200, 6, 6))
        assert np.all(qg.directionality_score(perturbed) == expected)
    x = nulls.directionality_null_samples(6, None, 4000, seed=2)
    assert min((x == 0).mean(), (x == 1).mean(), (x == -1).mean()) > 0


@pytest.mark.parametrize(("d", "r"), [(6, None), (16, 4), (64, None), (64, 8)])
def test_directionality_null_is_symmetric_about_zero(d, r):
    x = nulls.directionality_null_samples(d, r, 4000, seed=9)
    _close(x.mean(), 0.0, x.std(ddof=1) / math.sqrt(len(x)))
    p = (x > 0).mean() / ((x != 0).mean())
    _close(p, 0.5, math.sqrt(0.25 / (x != 0).sum()))


def test_quantiles_are_cached_symmetric_and_zero_below_6():
    q = nulls.directionality_null_quantiles(32, 8, q=(0.05, 0.5, 0.95), n_samples=500)
    assert q[0.05] == pytest.approx(-q[0.95]) and q[0.5] == pytest.approx(0.0, abs=1e-12)
    cached = nulls.directionality_null_samples(32, 8, 500)
    cached[:] = 9.0  # the caller gets a copy: the cache stays as it was
    assert (nulls.directionality_null_samples(32, 8, 500) != 9.0).all()
    assert (nulls.directionality_null_quantiles(5) == 0).all()
    sym = nulls.symmetry_null_quantiles(40, q=(0.5,))
    assert sym[0.5] == pytest.approx(nulls.gaussian_symmetry_law(40).median())


def test_shipped_table_is_what_the_function_computes():
    shipped = nulls.directionality_quantile_table()
    assert set(shipped["d"]) == set(nulls.TABLE_DS)
    fresh = nulls.directionality_quantile_table(ds=[8, 64], rs=[0, 8], shipped=False)
    rows = shipped[shipped["d"].isin([8, 64]) & shipped["r"].isin([0, 8])].reset_index(drop=True)
    np.testing.assert_allclose(fresh.to_numpy(float), rows.to_numpy(float), rtol=1e-5, atol=1e-6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="`d` must be an integer >= 2"):
        nulls.gaussian_symmetry_law(1)
    with pytest.raises(ValueError, match="`r`"):
        nulls.lowrank_symmetry_variance(10, 0)
    with pytest.raises(ValueError, match="`q`"):
        nulls.directionality_null_quantiles(10, q=(1.5,))


# ------------------------------------------------------------------------------------------------ bad arguments
@pytest.mark.parametrize("rho", [5, -0.1, 0.01, np.nan, np.inf, [0.5, 2.0]])
def test_rotation_null_variance_refuses_a_rho_outside_its_range(rho):
    with pytest.raises(ValueError, match=r"`rho` must lie in \[1/10, 1\]"):
        nulls.rotation_null_variance(10, rho)
    assert nulls.rotation_null_variance(10, [0.1, 1.0]).min() > 0  # the ends of the range are fine


def test_lowrank_symmetry_variance_bounds_rho_by_the_rank():
    with pytest.raises(ValueError, match=r"`rho` must lie in \[1/3, 1\]"):
        nulls.lowrank_symmetry_variance(10, 3, rho=0.2)
    assert nulls.lowrank_symmetry_variance(10, 3, rho=0.5) > 0


@pytest.mark.parametrize("q", [[1.5], [-0.1], [np.nan], "median", [[0.5]]])
def test_null_quantiles_refuse_levels_outside_0_1(q):
    with pytest.raises(ValueError, match=r"`q` must (hold quantile levels|be quantile levels) in \[0, 1\]"):
        nulls.symmetry_null_quantiles(8, q=q)
    with pytest.raises(ValueError, match=r"`q` must (hold quantile levels|be quantile levels) in \[0, 1\]"):
        nulls.directionality_null_quantiles(8, q=q, n_samples=10)


def test_null_law_checks_draw_in_the_chapters_order_and_compare_each_closed_form():
    """The same draws as drawing Gaussian shapes first, then each low-rank shape chunk by chunk, from one generator;
    each row's gaps are its Monte Carlo moment minus the closed form, in standard errors."""
    checks, samples = nulls.null_law_checks(700, seed=3, gaussian_ds=(6,), lowrank_shapes=((10, 2),), chunk=500)
    rng = np.random.default_rng(3)
    gauss = np.concatenate([qg.symmetry_score(rng.standard_normal((m, 6, 6))) for m in (500, 200)])
    np.testing.assert_array_equal(samples[("gaussian", 6)], gauss)
    a1, b1 = rng.standard_normal((500, 10, 2)), rng.standard_normal((500, 10, 2))
    a2, b2 = rng.standard_normal((200, 10, 2)), rng.standard_normal((200, 10, 2))
    low = np.concatenate([qg.symmetry_score_factored(a1, b1), qg.symmetry_score_factored(a2, b2)])
    np.testing.assert_array_equal(samples[("lowrank", 10, 2)], low)
    row = checks.iloc[0]
    mean, var = nulls.gaussian_symmetry_moments(6)
    assert row["exact mean"] == mean and row["formula variance"] == var
    assert row["mean gap (SE)"] == pytest.approx((gauss.mean() - mean) / (gauss.std(ddof=1) / np.sqrt(700)))
    assert list(checks["r"]) == [6, 2, 2] and set(checks["exact mean"].iloc[1:]) == {0.1}


@pytest.mark.parametrize("kwargs, name", [({"n_draws": 1}, "n_draws"), ({"n_draws": 10, "chunk": 0}, "chunk"),
                                          ({"n_draws": 10, "lowrank_shapes": ((8, 0),)}, "lowrank_shapes")])
def test_null_law_checks_name_a_bad_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        nulls.null_law_checks(**kwargs)
