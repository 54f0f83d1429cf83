"""The chapter-6 exercise checkers accept correct answers and reject typical wrong ones, without raising."""

from __future__ import annotations

import numpy as np
import pytest

import qkgeometry as qg
from qkgeometry.analyses import nulls, rotary, spectrum
from qkgeometry.exercises import beyond as ch6


def _raises(*_):
    raise ZeroDivisionError("learner bug")


def _z(a, b, var_of=lambda d, rho: nulls.rotation_null_variance(d, rho), mean_of=lambda d: 1 / d):
    d = a.shape[0]
    rho = nulls.rotation_null_moments_factored(a, b).rho
    return (qg.symmetry_score_factored(a, b) - mean_of(d)) / np.sqrt(var_of(d, rho))


def _offset(wq, wk, inv_freq, delta, pairing="half", sign=1.0):
    return rotary.offset_form(wq, wk, rotary.RopeSpec(inv_freq, wq.shape[1], pairing), sign * delta)


def _share(a, b):
    lam = np.linalg.eigvalsh((a @ b.T + b @ a.T) / 2)
    return np.sum(lam[lam > 0] ** 2) / np.sum(lam ** 2)


@pytest.mark.parametrize("checker, right, wrong", [
    (ch6.check_rotation_z, _z, lambda a, b: _z(a, b, mean_of=lambda d: 0.0)),  # forgets that E s = 1/d, not 0
    (ch6.check_rotation_z, _z, lambda a, b: _z(a, b, var_of=lambda d, rho: 2 / d ** 2)),  # ignores the spectrum
    (ch6.check_offset_form, _offset, lambda *x: _offset(*x, pairing="interleaved")),  # wrong pairing
    (ch6.check_offset_form, _offset, lambda *x: _offset(*x, sign=-1.0)),  # R(−Δ): query/key positions swapped
    (ch6.check_positive_share, _share, lambda a, b: spectrum.spectral_summary(a, b).top_eigenvalue_share),
    (ch6.check_positive_share, lambda a, b: spectrum.spectral_summary(a, b).positive_share,
     lambda a, b: np.mean(np.linalg.eigvalsh((a @ b.T + b @ a.T) / 2) > 0)),  # counts, not energy
])
def test_checker_accepts_right_rejects_wrong(checker, right, wrong, capsys):
    assert checker(right) is True
    assert checker(wrong) is False
    assert checker(_raises) is False
    out = capsys.readouterr().out
    assert "correct" in out and "not yet" in out and "ZeroDivisionError" in out
