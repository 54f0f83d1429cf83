"""The by-hand exercises (1.4, 2.5, 7.5): the reference answers pass, the usual slips fail with a message that
names them."""

from __future__ import annotations

from qkgeometry.exercises.decomposition import check_toy_logits
from qkgeometry.exercises.head_behaviour import check_holm
from qkgeometry.exercises.scores import check_toy_symmetry


def test_toy_logits(capsys):
    assert check_toy_logits([[0, 2], [2, 0]], [[0, 1], [-1, 0]], 2)
    assert not check_toy_logits([[0, 2], [2, 0]], [[0, -1], [1, 0]], 2)
    assert "wrong sign" in capsys.readouterr().out
    assert not check_toy_logits([[0, 2], [2, 0]], [[0, 1], [-1, 0]], 1)
    assert not check_toy_logits([[0, 3], [1, 0]], [[0, 1], [-1, 0]], 2)


def test_toy_symmetry(capsys):
    assert check_toy_symmetry(1 / 3, 1 / 3, 1 / 3)
    assert not check_toy_symmetry(2 / 3, 1 / 3, 1 / 3)
    assert "factor 2" in capsys.readouterr().out
    assert not check_toy_symmetry(1 / 3, -1 / 3, 1 / 3)


def test_holm(capsys):
    assert check_holm([0.04, 0.09, 0.09, 0.20, 0.025], [1, 5])
    assert not check_holm([0.05, 0.2, 0.15, 1.0, 0.025], [5])
    assert "Bonferroni" in capsys.readouterr().out
    assert not check_holm([0.04, 0.09, 0.09, 0.20, 0.025], [1, 2, 3, 5])
    assert not check_holm([0.04, 0.12, 0.09, 0.08, 0.025], [1, 5])  # no running maximum
