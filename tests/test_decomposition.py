"""The Toeplitz split: existence, uniqueness of the parts' symmetry, orthogonality, Pythagoras."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import qkgeometry as qg


@pytest.mark.parametrize("seed", range(10))
def test_parts_sum_symmetric_skew_orthogonal(seed):
    M = np.random.default_rng(seed).standard_normal((4, 11, 11))
    Ms, Mn = qg.decompose(M)
    np.testing.assert_allclose(Ms + Mn, M, atol=1e-14)
    np.testing.assert_array_equal(Ms, np.swapaxes(Ms, -1, -2))
    np.testing.assert_array_equal(Mn, -np.swapaxes(Mn, -1, -2))
    inner = np.einsum("...ij,...ij->...", Ms, Mn)
    np.testing.assert_allclose(inner, 0.0, atol=1e-12)
    e = qg.energies(M)
    np.testing.assert_allclose(e.total, e.symmetric + e.skew, rtol=1e-13)
    np.testing.assert_allclose(e.symmetric, np.einsum("...ij,...ij->...", Ms, Ms), rtol=1e-12)
    np.testing.assert_allclose(e.skew, np.einsum("...ij,...ij->...", Mn, Mn), rtol=1e-12)


def test_bilinear_form_view():
    rng = np.random.default_rng(0)
    M, x, y = rng.standard_normal((7, 7)), rng.standard_normal(7), rng.standard_normal(7)
    Ms, Mn = qg.decompose(M)
    assert x @ Ms @ y == pytest.approx(y @ Ms @ x)
    assert x @ Mn @ y == pytest.approx(-(y @ Mn @ x))
    assert x @ Mn @ x == pytest.approx(0.0, abs=1e-12)


def test_torch_in_torch_out_float64():
    Ms, _ = qg.decompose(torch.randn(3, 3, dtype=torch.float16))
    assert isinstance(Ms, torch.Tensor) and Ms.dtype == torch.float64
    e = qg.energies(torch.eye(3))
    assert isinstance(e.total, float) and e.skew == 0.0
