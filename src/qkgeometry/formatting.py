"""How the book writes a number and a count: the one number formatter, the minus-sign rule, plurals.

This module sits below everything that writes text (:mod:`qkgeometry.stats`, :mod:`qkgeometry.tables`,
:mod:`qkgeometry.claims`, the book's tooling), so that each of them formats through the same rules:

- :func:`format_number`: one precision rule, thousands separators, a true minus sign, no ``−0.000``;
- :func:`true_minus`: the minus-sign rule for text that already holds numbers (a glued value, a rendered page): a
  hyphen-minus that is a number's sign becomes U+2212, a hyphen inside a word, a range or a name does not;
- :func:`plural`: ``"seed"`` → ``"seeds"``, ``"family"`` → ``"families"``, and :func:`count` for ``"n = 3 seeds"``.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["MINUS", "MINUS_SIGN", "count", "format_number", "plural", "true_minus"]

#: The minus sign the book prints (U+2212), never the hyphen-minus of ``str(-1.0)``.
MINUS = "\u2212"

#: A hyphen-minus that is a number's sign: before a digit (or a decimal point and a digit), and after anything but a
#: letter, a digit, ``_``, ``.`` or another dash (``GPT-2``, ``3-5``, ``x.-1`` keep theirs); or the sign of an
#: exponent (``2.3e-06``).
MINUS_SIGN = re.compile(r"(?:(?<![\w.\-\u2212])|(?<=\d[eE]))-(?=\.?\d)")


def true_minus(text: str) -> str:
    """``text`` with a true minus sign (U+2212) wherever a hyphen-minus is a number's sign (:data:`MINUS_SIGN`).

    >>> true_minus("-.5"), true_minus('"-6"'), true_minus("| -7 |-7"), true_minus("2.3e-06")
    ('−.5', '"−6"', '| −7 |−7', '2.3e−06')
    >>> true_minus("GPT-2, seeds 3-5, all-MiniLM-L6-v2, x-1")
    'GPT-2, seeds 3-5, all-MiniLM-L6-v2, x-1'
    """
    return MINUS_SIGN.sub(MINUS, text)


def _signed(text: str, plus: bool = False) -> str:
    """A formatted number with a true minus sign, and without the minus of a value that rounds to zero (which then
    reads as a positive zero: ``+0.000`` where ``plus``, a ``+`` format, asks for a sign)."""
    stripped = text.lstrip()
    if stripped.startswith("-") and not re.search(r"[1-9]", re.split(r"[eE]", stripped)[0]):
        text = text.replace("-", "+" if plus else "", 1)
    return true_minus(text)


def format_number(value: float, scale: float | None = None, *, decimals: int | None = None,
                  spec: str | None = None) -> str:
    """The book's one number formatter (text, tables, verdicts, slides, learners' notebooks; also
    :func:`qkgeometry.stats.format_number` and :func:`qkgeometry.tables.format_number`):

    - a true minus sign (U+2212), never a hyphen-minus, and never ``−0.000``: a value that rounds to 0 is ``0.000``;
    - thousands separators (``10,033``);
    - one precision rule: ``decimals`` when given (one quantity, one precision: pass the same ``decimals`` for every
      value of a quantity in a sentence), else as many decimals as ``scale`` (an interval's half-width, say) needs
      for two significant digits, between 1 and 6, else three decimals; integers print as integers;
    - ``spec``, a Python format specification (``".2f"``, ``"+.3f"``, ``".0%"``, ``",d"``), for values written by a
      format string (the book's glued values), with the same sign and separator rules.

    >>> format_number(0.25, 0.124), format_number(3.2e-5, 1.5e-5), format_number(12.345, 3.1), format_number(-0.0001)
    ('0.25', '0.000032', '12.3', '0.000')
    >>> format_number(-0.119, decimals=2), format_number(10033), format_number(-1234.5, decimals=1)
    ('−0.12', '10,033', '−1,234.5')
    >>> format_number(-0.054, spec=".1%"), format_number(0.61, spec=".0%"), format_number(-2.3e-06, spec=".2g")
    ('−5.4%', '61%', '−2.3 × 10⁻⁶')
    >>> format_number(-0.0321, spec="+.3f"), format_number(0.0321, spec="+.3f"), format_number(-0.0001, spec="+.3f")
    ('−0.032', '+0.032', '+0.000')
    """
    if spec is not None:
        return _powers_of_ten(_signed(format(value, _with_separators(spec)), plus="+" in spec))
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and decimals is None:
        return _signed(f"{int(value):,d}")
    if decimals is None:
        finite = scale is not None and np.isfinite(scale) and scale > 0
        decimals = int(min(6, max(1, 1 - np.floor(np.log10(abs(scale)))))) if finite else 3
    value = float(value)
    if not np.isfinite(value):
        return "∞" if value > 0 else (MINUS + "∞" if value < 0 else "nan")
    return _signed(f"{value:,.{int(decimals)}f}")


def _with_separators(spec: str) -> str:
    """``spec`` with a thousands separator where its presentation type takes one and none is given."""
    m = re.fullmatch(r"(?P<head>(?:.?[<>=^])?[+\- ]?z?#?0?\d*)(?P<sep>[,_]?)(?P<tail>(?:\.\d+)?[bcdeEfFgGnosxX%]?)", spec)
    if not m or m.group("sep") or m.group("tail")[-1:] in tuple("bcnosxX"):
        return spec
    return m.group("head") + "," + m.group("tail")


def plural(unit: str) -> str:
    """The plural of a unit of analysis: ``"seed"`` → ``"seeds"``, ``"family"`` → ``"families"``, ``"day"`` →
    ``"days"``.

    >>> plural("seed"), plural("family"), plural("key"), plural("head")
    ('seeds', 'families', 'keys', 'heads')
    """
    return unit[:-1] + "ies" if unit.endswith("y") and unit[-2:-1] not in tuple("aeiou") else unit + "s"


def count(n: int, unit: str) -> str:
    """``"n = 3 seeds"``, ``"n = 1 model"``: how many units an interval is computed over, as the book writes it.

    >>> count(3, "seed"), count(1, "family"), count(12, "family")
    ('n = 3 seeds', 'n = 1 family', 'n = 12 families')
    """
    return f"n = {format_number(int(n))} {unit if n == 1 else plural(unit)}"


_SUPERSCRIPTS = str.maketrans("0123456789" + MINUS, "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_EXPONENT = re.compile(r"(?P<mantissa>\d(?:\.\d+)?)[eE](?P<sign>[+\u2212]?)(?P<power>\d+)")


def _powers_of_ten(text: str) -> str:
    """``2.3e−06`` as ``2.3 × 10⁻⁶``, the way a reader writes it (``1e+00`` is ``1``)."""
    def power(m: re.Match) -> str:
        n = int(m.group("power"))
        if n == 0:
            return m.group("mantissa")
        exponent = (MINUS if m.group("sign") == MINUS else "") + str(n)
        return f"{m.group('mantissa')} × 10{exponent.translate(_SUPERSCRIPTS)}"

    return _EXPONENT.sub(power, text)
