"""The one formatting home (qkgeometry.formatting): the number formatter, the minus-sign rule and plurals, and every
writer of text using them (tables, stats, claims, the book's tooling)."""

from __future__ import annotations

import pytest

from qkgeometry import claims, formatting, stats, tables
from qkgeometry.formatting import MINUS, count, format_number, plural, true_minus


@pytest.mark.parametrize("text, expected", [
    ("-.5", MINUS + ".5"),  # a leading decimal point
    ('"-6"', f'"{MINUS}6"'),  # a quoted value
    ("|-7|", f"|{MINUS}7|"),  # a Markdown table cell
    ("a gap of -0.05 [-0.1, 0.2]", f"a gap of {MINUS}0.05 [{MINUS}0.1, 0.2]"),
    ("2.3e-06", f"2.3e{MINUS}06"),
    ("(-3)", f"({MINUS}3)"),
    ("GPT-2, layers 3-5, all-MiniLM-L6-v2, x-1, v1.-2, --5", "GPT-2, layers 3-5, all-MiniLM-L6-v2, x-1, v1.-2, --5"),
])
def test_the_minus_sign_rule(text, expected):
    assert true_minus(text) == expected


def test_the_formatter_writes_signs_by_the_same_rule():
    assert format_number(-0.5, spec=".1f") == MINUS + "0.5"
    assert format_number(-0.0004, decimals=3) == "0.000"  # no negative zero
    assert format_number(-0.0321, spec="+.3f") == MINUS + "0.032"
    assert format_number(0.0321, spec="+.3f") == "+0.032"
    assert format_number(-0.0001, spec="+.3f") == "+0.000"  # a zero is not negative, with or without its sign
    assert format_number(5, spec="->6") == "-----5"  # a fill character is not a sign


def test_formatting_has_one_home_that_the_other_modules_re_export():
    assert tables.format_number is stats.format_number is formatting.format_number
    assert tables.MINUS == stats.MINUS == MINUS


def test_plurals_have_one_home():
    assert [plural(u) for u in ("seed", "family", "key", "layer")] == ["seeds", "families", "keys", "layers"]
    assert count(1, "family") == "n = 1 family" and count(12345, "head") == "n = 12,345 heads"
    interval = stats.Interval(0.1, 0.05, 0.15, n=3, unit="family")
    assert claims._units(interval) == "n = 3 families"
    assert "n = 3 families" in stats.verdict(interval, "up", "down")
