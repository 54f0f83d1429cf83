"""spectrum: factored (2r × 2r) == dense (d × d) for the eigenvalues of M_s and singular values of M_n, tied forms,
and the exact rotation-null facts (trace z-score: mean 0, variance 1; positive share: law symmetric about 1/2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import qkgeometry as qg
from qkgeometry.analyses import nulls, spectrum

Z = 4.5


def _pad(values: np.ndarray, d: int) -> np.ndarray:
    """Keep the min(d, 2r) largest-magnitude values, pad with zeros to d, sort."""
    keep = values[np.argsort(-np.abs(values))][:d]
    return np.sort(np.concatenate([keep, np.zeros(d - len(keep))]))


@pytest.mark.parametrize(("d", "r"), [(10, 3), (6, 4), (40, 8), (9, 9)])
def test_factored_spectrum_equals_dense(d, r):
    rng = np.random.default_rng(d + r)
    a, b = rng.standard_normal((d, r)), rng.standard_normal((d, r))
    sym, skew = qg.decompose(a @ b.T)
    scale = np.abs(a @ b.T).max()
    np.testing.assert_allclose(_pad(spectrum.symmetric_eigenvalues(a, b), d), np.linalg.eigvalsh(sym),
                               atol=1e-9 * scale)
    np.testing.assert_allclose(_pad(spectrum.skew_singular_values(a, b), d),
                               np.sort(np.linalg.svd(skew, compute_uv=False)), atol=1e-9 * scale)
    summary = spectrum.spectral_summary(a, b)
    lam = np.linalg.eigvalsh(sym)
    assert summary.positive_share == pytest.approx(np.sum(lam[lam > 0] ** 2) / np.sum(lam ** 2), abs=1e-9)
    assert summary.trace_z == pytest.approx(math.sqrt(d) * np.trace(a @ b.T) / np.linalg.norm(a @ b.T), rel=1e-10)
    # ‖M_s‖² = Σ λ² and ‖M_n‖² = Σ σ²: the energies of chapter 1
    e = qg.energies(a @ b.T)
    assert np.sum(spectrum.symmetric_eigenvalues(a, b) ** 2) == pytest.approx(e.symmetric, rel=1e-9)
    assert np.sum(spectrum.skew_singular_values(a, b) ** 2) == pytest.approx(e.skew, rel=1e-9)


def test_batched_equals_one_by_one():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 20, 4)), rng.standard_normal((5, 20, 4))
    batch = spectrum.spectral_summary(a, b)
    for i in range(5):
        one = spectrum.spectral_summary(a[i], b[i])
        assert batch.positive_share[i] == pytest.approx(one.positive_share, rel=1e-10)


def test_tied_form_is_positive_semidefinite():
    a = np.random.default_rng(1).standard_normal((30, 6))
    summary = spectrum.spectral_summary(a, a)
    assert summary.positive_share == pytest.approx(1.0, abs=1e-12)
    assert summary.top_skew_share == 0.0
    assert spectrum.symmetric_eigenvalues(a, a).min() > -1e-9


def test_trace_z_is_standardised_under_the_rotation_null():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((12, 3)), rng.standard_normal((12, 3))
    a[:, 0] *= 4
    frames = nulls.random_frames(np.random.default_rng(3), 20_000, 12, 3)
    _, sig, vt = np.linalg.svd(a, full_matrices=False)
    rotated = frames @ (sig[:, None] * vt)  # O A for Haar O
    z = spectrum.trace_z_score(rotated, np.broadcast_to(b, rotated.shape))
    n = len(z)
    assert abs(z.mean()) < Z * z.std(ddof=1) / math.sqrt(n)
    assert abs(z.var(ddof=1) - 1) < Z * ((z - z.mean()) ** 2).std(ddof=1) / math.sqrt(n)


def test_positive_share_null_is_symmetric_about_one_half():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((16, 4)), rng.standard_normal((16, 4))
    a += b  # a head that prefers similar directions: share well above 1/2
    share = spectrum.spectral_summary(a, b).positive_share
    null = spectrum.positive_share_rotation_null(a, b, 4000, seed=5)
    assert abs(null.mean() - 0.5) < Z * null.std(ddof=1) / math.sqrt(len(null))
    assert share > np.quantile(null, 0.99)


def test_spectrum_table_on_a_real_model():
    frame = spectrum.spectrum_table("offline:minilm-l6", per="head")
    assert len(frame) == 72 and frame["positive_share"].between(0, 1).all()


# ------------------------------------------------------------------------------------------------ scale and zero
def _dense_reference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[float, ...]]:
    """Eigenvalues of M_s, singular values of M_n and the summary of M = A Bᵀ from the d × d matrix itself."""
    m = a @ b.T
    sym, skew = qg.decompose(m)
    lam, sig = np.linalg.eigvalsh(sym), np.linalg.svd(skew, compute_uv=False)
    energy, skew_energy = np.sum(lam ** 2), np.sum(sig ** 2)
    summary = (np.sum(lam[lam > 0] ** 2) / energy, np.max(lam ** 2) / energy, 2 * sig[0] ** 2 / skew_energy,
               math.sqrt(m.shape[0]) * np.trace(m) / np.linalg.norm(m))
    return lam, sig, summary


@pytest.mark.parametrize("s", [1e-150, 1e-60, 1e-4, 1.0, 1e4, 1e60, 1e150])
def test_spectra_do_not_depend_on_how_m_is_factored(s):
    """M = (sA)(B/s)ᵀ is the same matrix for every s: its spectra and summary equal the dense reference."""
    rng = np.random.default_rng(7)
    d, r = 12, 3
    a, b = rng.standard_normal((d, r)), rng.standard_normal((d, r))
    lam, sig, summary = _dense_reference(a, b)
    scale = np.abs(lam).max()
    np.testing.assert_allclose(_pad(spectrum.symmetric_eigenvalues(s * a, b / s), d), lam, atol=1e-12 * scale)
    np.testing.assert_allclose(spectrum.skew_singular_values(s * a, b / s), sig[:2 * r], atol=1e-12 * scale)
    np.testing.assert_allclose(tuple(spectrum.spectral_summary(s * a, b / s)), summary, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("s", [1e-160, 1e160])
def test_huge_and_tiny_factors_give_the_scale_free_numbers_not_a_linalg_error(s):
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((10, 2)), rng.standard_normal((10, 2))
    _, _, summary = _dense_reference(a, b)
    np.testing.assert_allclose(tuple(spectrum.spectral_summary(s * a, s * b)), summary, rtol=1e-10, atol=1e-12)
    assert spectrum.trace_z_score(s * a, s * b) == pytest.approx(summary[3], rel=1e-10)
    if s > 1:  # the eigenvalues themselves are ~1e320: beyond float64, said in one line
        with pytest.raises(ValueError, match="exceed float64's range"):
            spectrum.symmetric_eigenvalues(s * a, s * b)


def test_the_summary_of_a_zero_matrix_is_refused_not_nan():
    zero = np.zeros((6, 2))
    a = np.ones((6, 2))
    cancel = np.c_[np.ones(6), -np.ones(6)]  # nonzero factors whose product A Bᵀ is zero
    for args in ((zero, zero), (a, zero), (cancel, np.ones((6, 2)))):
        with pytest.raises(ValueError, match=r"zero matrix.*0/0"):
            spectrum.spectral_summary(*args)
        with pytest.raises(ValueError, match=r"zero matrix.*0/0"):
            spectrum.trace_z_score(*args)
    np.testing.assert_array_equal(spectrum.symmetric_eigenvalues(zero, zero), np.zeros(4))  # well defined
