"""spectrum: factored (2r × 2r) == dense (d × d) for the eigenvalues of M_s and singular values of M_n, tied forms,
and the exact rotation-null facts (trace z-score: mean 0, variance 1; positive share: law symmetric about 1/2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import qkgeometry as qg
from qkgeometry import nulls, spectrum

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
