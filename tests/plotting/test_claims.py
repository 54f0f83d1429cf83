"""Tests for qkgeometry.plotting.claims: one panel per claim, every specification drawn, the primary marked."""

from __future__ import annotations

import pytest

from qkgeometry import plotting, stats
from qkgeometry.claims import Claim, Specification


def _claim(estimates, primary=0, axes=("horizon", "unit")) -> Claim:
    curve = tuple(Specification(axes[k % len(axes)], f"spec {k}", stats.Interval(e, e - 0.1, e + 0.1, 12, unit="seed"),
                                primary=k == primary) for k, e in enumerate(estimates))
    return Claim("Δd", "up", "down", curve)


def test_every_specification_is_drawn_sorted_with_the_primary_marked():
    fig = plotting.specification_curve([_claim([0.3, -0.1, 0.2]), _claim([0.5, 0.4], primary=1)], ncols=2)
    left = fig.axes[0]
    points = [line for line in left.get_lines() if line.get_marker() == "o"]
    drawn = sorted(y for line in points for y in line.get_ydata())
    assert drawn == sorted([0.3, -0.1, 0.2])
    primary = [line for line in left.get_lines() if line.get_marker() == "D"]
    assert len(primary) == 1 and list(primary[0].get_ydata()) == [0.3]
    # sorted: the primary (0.3) is the largest of three, so it sits at the right end
    assert list(primary[0].get_xdata()) == [2]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["horizon", "unit", "pre-stated primary"]
    plotting.plt.close(fig)


def test_titles_must_match_the_claims():
    with pytest.raises(ValueError, match="titles: one per claim"):
        plotting.specification_curve([_claim([0.1])], titles=["a", "b"])


def test_the_default_layout_is_stacked_and_readable_on_a_phone(book_style):
    claims = [_claim([0.3 - 0.01 * k for k in range(40)], axes=("horizon, per layer", "horizon, per head",
                                                                 "matched learning, per layer",
                                                                 "matched learning, per head"))
              for _ in range(6)]
    fig = plotting.specification_curve(claims, titles=[f"causal, batch 2 − arm {k}" for k in range(6)])
    assert fig.get_figwidth() == plotting.STACKED_WIDTH
    assert {ax.get_subplotspec().get_gridspec().ncols for ax in fig.axes} == {1}
    assert plotting.shown_text_px(fig) >= plotting.PHONE_TEXT_PX
    assert plotting.specification_curve(claims, ncols=2).get_figwidth() == 2 * 4.2  # columns on request
