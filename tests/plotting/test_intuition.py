"""The pictures of chapters 1-2 draw what they claim: the skew part's value as a signed area whose sign flips when the
two tokens swap, the quadratic form's level curves, and the directionality score's norms and threshold."""

from __future__ import annotations

import math
import statistics

import matplotlib.colors
import numpy as np
import pytest

import qkgeometry as qg
from qkgeometry import plotting
from qkgeometry.formatting import format_number

DEFINITE = np.array([[2.0, 0.6], [0.6, 1.0]])
INDEFINITE = np.array([[1.0, 1.5], [1.5, -1.0]])
J = np.array([[0.0, 1.0], [-1.0, 0.0]])


def _parallelograms(fig):
    return [p for ax in fig.axes for p in ax.patches if p.get_gid() == "parallelogram"]


def _shoelace(vertices: np.ndarray) -> float:
    """The signed area of a polygon from its vertices, in the order drawn (counter-clockwise: positive)."""
    x, y = vertices[:, 0], vertices[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


# ------------------------------------------------------------------------------------------------ chapter 1
@pytest.mark.parametrize("a, x, y", [(1.0, (1.5, 0.5), (0.6, 1.3)), (-0.7, (1.0, -2.0), (0.3, 0.4)),
                                     (2.5, (-1.0, 0.2), (0.5, -1.5))])
def test_the_drawn_area_is_the_skew_value_and_flips_sign_when_x_and_y_swap(a, x, y):
    x, y = np.array(x), np.array(y)
    fig = plotting.quadratic_form_and_signed_area([DEFINITE, INDEFINITE], a * J, x, y)
    first, second = _parallelograms(fig)
    det = x[0] * y[1] - x[1] * y[0]  # the area, written out here independently of the package
    area_xy, area_yx = _shoelace(first.get_xy()[:4]), _shoelace(second.get_xy()[:4])
    assert area_xy == pytest.approx(det) and area_yx == pytest.approx(-det)
    assert a * area_xy == pytest.approx(x @ (a * J) @ y)  # x^T M_n y = a * signed area
    assert plotting.signed_area(x, y) == pytest.approx(det) == pytest.approx(-plotting.signed_area(y, x))
    # shaded by the sign of the value: red (the diverging map's positive end) when positive, blue when negative
    red = [p.get_facecolor()[0] > p.get_facecolor()[2] for p in (first, second)]
    assert red == ([True, False] if a * det > 0 else [False, True])
    titles = [p.axes.get_title() for p in (first, second)]
    assert format_number(float(x @ (a * J) @ y), spec="+.2f") in titles[0]
    assert format_number(float(y @ (a * J) @ x), spec="+.2f") in titles[1]
    assert titles[0].startswith("$x^\\top") and titles[1].startswith("$y^\\top")


def test_the_level_curves_are_those_of_the_quadratic_form():
    fig = plotting.quadratic_form_and_signed_area([DEFINITE, INDEFINITE], J, [1.0, 0.0], [0.0, 1.0], extent=1.5)
    top = [ax for ax in fig.axes if not _parallelograms_of(ax)]
    assert len(top) == 2
    for ax, S in zip(top, (DEFINITE, INDEFINITE)):
        filled = next(c for c in ax.collections if getattr(c, "filled", False))
        corner = S[0, 0] + 2 * S[0, 1] + S[1, 1]  # q at (1, 1), scaled to the corner (1.5, 1.5)
        assert max(abs(filled.levels[0]), filled.levels[-1]) >= abs(corner) * 1.5**2 - 1e-9
        assert ax.get_xlim() == (-1.5, 1.5) and ax.get_aspect() == 1.0
    definite, indefinite = top
    zero_lines = [c for c in indefinite.collections if list(getattr(c, "levels", [])) == [0.0]]
    assert zero_lines, "the indefinite form's lines q = 0 are drawn"
    assert not [c for c in definite.collections if list(getattr(c, "levels", [])) == [0.0]]
    assert "positive definite" in definite.get_title() and "indefinite" in indefinite.get_title()
    eig = np.linalg.eigvalsh(INDEFINITE)
    assert format_number(eig[0], decimals=2) in indefinite.get_title()


def _parallelograms_of(ax):
    return [p for p in ax.patches if p.get_gid() == "parallelogram"]


@pytest.mark.parametrize("S, kind", [(DEFINITE, "positive definite"), (-DEFINITE, "negative definite"),
                                     (INDEFINITE, "indefinite"), ([[1.0, 1.0], [1.0, 1.0]], "semidefinite")])
def test_quadratic_form_kind_reads_the_eigenvalues(S, kind):
    assert plotting.quadratic_form_kind(S) == kind


@pytest.mark.parametrize("kwargs, argument", [
    ({"skew": DEFINITE}, "skew"),  # symmetric where a skew matrix is expected
    ({"skew": np.zeros(3)}, "skew"),
    ({"symmetric": [DEFINITE, J]}, r"symmetric\[1\]"),
    ({"symmetric": [np.zeros((2, 2))]}, r"symmetric\[0\]"),
    ({"symmetric": [np.eye(3)]}, r"symmetric\[0\]"),
    ({"x": [0.0, 0.0]}, "x"),
    ({"y": [1.0, 2.0, 3.0]}, "y"),
    ({"x": [np.nan, 1.0]}, "x"),
    ({"extent": -1.0}, "extent"),
])
def test_bad_input_to_the_chapter_1_picture_names_the_argument(kwargs, argument):
    args = {"symmetric": [DEFINITE], "skew": J, "x": [1.0, 0.0], "y": [0.0, 1.0]} | kwargs
    with pytest.raises(ValueError, match=rf"^{argument}:"):
        plotting.quadratic_form_and_signed_area(**args)


def test_no_symmetric_matrix_is_named():
    with pytest.raises(ValueError, match=r"^symmetric has no rows: "):
        plotting.quadratic_form_and_signed_area([], J, [1.0, 0.0], [0.0, 1.0])


# ------------------------------------------------------------------------------------------------ chapter 2
def _example(seed: int = 0, d: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    M = 0.3 * rng.standard_normal((d, d))
    M[:, 2] += 3.0 + rng.standard_normal(d)  # one strong key-side column
    return M


def _bars(ax) -> np.ndarray:
    """The drawn height of each bar (its part below the threshold plus its excess), in order of position."""
    heights: dict[float, float] = {}
    for p in ax.patches:
        if p.get_gid() in ("norms", "excess"):
            centre = round(p.get_x() + p.get_width() / 2, 6)
            heights[centre] = heights.get(centre, 0.0) + p.get_height()
    return np.array([heights[k] for k in sorted(heights)])


def _line(ax, gid: str) -> float:
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    ys = set(np.asarray(line.get_ydata(), float))
    assert len(ys) == 1  # a horizontal line
    return ys.pop()


@pytest.mark.parametrize("seed, d, num_std", [(0, 6, 2.0), (3, 6, 2.0), (1, 10, 1.5), (2, 9, 0.0)])
def test_the_bars_are_the_norms_and_the_line_is_mean_plus_num_std_sd(seed, d, num_std):
    M = _example(seed, d)
    fig = plotting.directionality_bars(M, num_std=num_std)
    rows_ax, cols_ax = fig.axes[:2]
    rows = [math.sqrt(sum(M[i, j] ** 2 for j in range(d))) for i in range(d)]
    cols = [math.sqrt(sum(M[i, j] ** 2 for i in range(d))) for j in range(d)]
    np.testing.assert_allclose(_bars(rows_ax), rows, rtol=1e-12)
    np.testing.assert_allclose(_bars(cols_ax), cols, rtol=1e-12)
    excess = []
    for ax, norms in ((rows_ax, rows), (cols_ax, cols)):
        tau = statistics.mean(norms) + num_std * statistics.stdev(norms)  # stdev: the unbiased (n - 1) one
        assert _line(ax, "threshold") == pytest.approx(tau, rel=1e-12)
        assert _line(ax, "mean") == pytest.approx(statistics.mean(norms), rel=1e-12)
        drawn = sorted((p.get_x(), p.get_height()) for p in ax.patches if p.get_gid() == "excess")
        np.testing.assert_allclose([h for _, h in drawn], [max(0.0, n - tau) for n in norms], atol=1e-12)
        excess.append(sum(max(0.0, n - tau) for n in norms))
    score = qg.directionality_score(M, num_std=num_std)
    e_r, e_c = excess
    assert score == pytest.approx((e_r - e_c) / (e_r + e_c) if e_r + e_c > 0 else 0.0, abs=1e-12)
    assert format_number(score, decimals=2) in fig._suptitle.get_text()
    assert format_number(e_r, decimals=2) in rows_ax.get_title()
    assert format_number(e_c, decimals=2) in cols_ax.get_title()


def test_the_six_by_six_example_is_key_side_dominated():
    """One strong key-side column crosses its threshold (by a sliver: at d = 6 the largest z-score is 5/√6), no row
    crosses: the score is −1."""
    M = _example()
    fig = plotting.directionality_bars(M)
    rows_ax, cols_ax = fig.axes[:2]
    assert qg.directionality_score(M) == -1.0
    assert not [p for p in rows_ax.patches if p.get_gid() == "excess" and p.get_height() > 0]
    (crossing,) = [p for p in cols_ax.patches if p.get_gid() == "excess" and p.get_height() > 0]
    assert crossing.get_x() + crossing.get_width() / 2 == pytest.approx(3)  # column j = 3 (the third)
    assert f"excess {format_number(crossing.get_height(), decimals=2)}" in [t.get_text() for t in cols_ax.texts]


@pytest.mark.parametrize("M, kwargs, argument", [
    (np.zeros((3, 4)), {}, "M"),
    (np.ones(5), {}, "M"),
    (np.zeros((4, 4)), {}, "M"),
    (np.full((3, 3), np.inf), {}, "M"),
    (np.eye(6), {"num_std": -1.0}, "num_std"),
    (np.eye(6), {"num_std": float("nan")}, "num_std"),
])
def test_bad_input_to_the_chapter_2_picture_names_the_argument(M, kwargs, argument):
    with pytest.raises(ValueError, match=rf"^{argument}:"):
        plotting.directionality_bars(M, **kwargs)


def test_an_empty_matrix_is_named():
    with pytest.raises(ValueError, match=r"^M has no rows: "):
        plotting.directionality_bars(np.zeros((0, 0)))


# ------------------------------------------------------------------------------------------------ both
def test_both_pictures_stay_readable_on_a_phone(book_style):
    figures = [plotting.quadratic_form_and_signed_area([DEFINITE, INDEFINITE], J, [1.5, 0.5], [0.6, 1.3]),
               plotting.directionality_bars(_example())]
    from matplotlib.text import Text

    for fig in figures:
        assert plotting.shown_text_px(fig) >= plotting.PHONE_TEXT_PX
        sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        assert min(sizes) >= 9
        assert not plotting.legend_overlaps(fig)


def test_the_colours_are_not_the_family_colours():
    """Blue and red mean encoder and decoder in every figure: the sign shading uses the diverging map's own shades."""
    fig = plotting.quadratic_form_and_signed_area([DEFINITE], J, [1.0, 0.0], [0.0, 1.0])
    shades = {matplotlib.colors.to_hex(p.get_facecolor()) for p in _parallelograms(fig)}
    assert not shades & {c.lower() for c in plotting.FAMILY_COLORS.values()}
