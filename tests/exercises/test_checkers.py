"""The exercise checkers of chapters 1-2 accept correct answers and reject typical wrong ones, without raising."""

from __future__ import annotations

import numpy as np
import pytest

import qkgeometry as qg
from qkgeometry.exercises import decomposition as ch1
from qkgeometry.exercises import scores as ch2


def _raises(*_):
    raise ZeroDivisionError("learner bug")


@pytest.mark.parametrize("checker, right, wrong", [
    (ch1.check_decompose, lambda M: ((M + M.T) / 2, (M - M.T) / 2), lambda M: ((M + M.T) / 2, (M.T - M) / 2)),
    (ch1.check_decompose, qg.decompose, lambda M: (M, M - M)),
    (ch1.check_bilinear_parts, lambda M, x, y: ((x @ M @ y + y @ M @ x) / 2, (x @ M @ y - y @ M @ x) / 2),
     lambda M, x, y: (x @ M @ y, 0.0)),
    (ch1.check_energy_split, lambda M: tuple(qg.energies(M)[:2]),
     lambda M: (np.sum(M * M) / 2, np.sum(M * M) / 2)),
    (ch2.check_symmetry_score, qg.symmetry_score, lambda M: 2 * qg.symmetry_score(M)),  # the seed's factor 2
    (ch2.check_symmetry_score, lambda M: np.sum(M * M.T) / np.sum(M * M),
     lambda M: 2 * np.sum(((M + M.T) / 2) ** 2) / np.sum(M * M)),  # forgets the "- 1"
    (ch2.check_directionality_score, qg.directionality_score, lambda M: qg.directionality_score(M.T)),
    (ch2.check_directionality_score, qg.directionality_score,
     lambda M: _biased_std_directionality(M)),  # ddof=0 instead of 1
    (ch2.check_symmetry_score_factored, qg.symmetry_score_factored, lambda A, B: qg.symmetry_score(A @ A.T)),
])
def test_checker_accepts_right_rejects_wrong(checker, right, wrong, capsys):
    assert checker(right) is True
    assert checker(wrong) is False
    assert checker(_raises) is False
    out = capsys.readouterr().out
    assert "correct" in out and "not yet" in out and "ZeroDivisionError" in out


def _biased_std_directionality(M, num_std=2.0):
    def excess(norms):
        tau = norms.mean() + num_std * norms.std(ddof=0)
        return np.clip(norms - tau, 0, None).sum()

    e_r, e_c = excess(np.linalg.norm(M, axis=1)), excess(np.linalg.norm(M, axis=0))
    return 0.0 if e_r + e_c == 0 else (e_r - e_c) / (e_r + e_c)


def test_factored_checker_rejects_forming_the_dense_matrix(capsys):
    def dense_route(A, B):  # right value, but builds the (d, d) matrix
        return qg.symmetry_score(A @ B.T)

    assert ch2.check_symmetry_score_factored(dense_route) is False
    assert "MiB" in capsys.readouterr().out


def test_two_axes_checker(capsys):
    G = np.random.default_rng(0).standard_normal((64, 64))
    M = G + G.T
    assert ch2.check_two_axes(M) is False  # perfectly symmetric: d = 0
    M[:, 5] += 3.0
    assert ch2.check_two_axes(M) is True
    assert ch2.check_two_axes(np.eye(4)) is False  # too small
    assert "d >= 16" in capsys.readouterr().out
