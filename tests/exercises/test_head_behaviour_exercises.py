"""The chapter-7 checkers accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from qkgeometry.exercises.head_behaviour import (
    check_auc,
    check_doubled_head,
    check_part_scale,
    check_previous_token_score,
)
from qkgeometry.heads import surgery as hs


def test_previous_token_checker(capsys):
    def good(a):
        i = np.arange(4, a.shape[-1])
        return a[:, :, i, i - 1].mean(-1).mean(0)

    def every_row(a):
        i = np.arange(1, a.shape[-1])
        return a[:, :, i, i - 1].mean(-1).mean(0)

    assert check_previous_token_score(good)
    assert not check_previous_token_score(every_row)
    assert "row 4" in capsys.readouterr().out
    assert not check_previous_token_score(lambda a: 1 / 0)


def test_doubled_head_checker():
    assert check_doubled_head(hs.doubled_factors)
    assert not check_doubled_head(lambda q, k, p: (np.hstack([q, k]), np.hstack([k, q])))  # no 1/√2
    assert not check_doubled_head(lambda q, k, p: (q, k))


def test_auc_checker():
    def good(x, y):
        r = rankdata(x)
        n1, n0 = y.sum(), (~y).sum()
        return (r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)

    def strict(x, y):
        return np.mean(x[y][:, None] > x[~y][None, :])

    assert check_auc(good)
    assert not check_auc(strict)


def test_part_scale_checker(capsys):
    def good(wq, wk, part):
        m = wq @ wk.T
        kept = (m + m.T) / 2 if part == "symmetric" else (m - m.T) / 2
        return np.linalg.norm(m) / np.linalg.norm(kept)

    def squared(wq, wk, part):
        return good(wq, wk, part) ** 2

    def swapped(wq, wk, part):
        return good(wq, wk, "skew" if part == "symmetric" else "symmetric")

    assert check_part_scale(good)
    assert not check_part_scale(squared)
    assert "square root" in capsys.readouterr().out
    assert not check_part_scale(swapped)
    assert not check_part_scale(lambda q, k, p: 1.0)  # the plain edit
