"""Curated tables for the book's pages: chosen columns with human headers, rounded numbers, no index column.

Every table a chapter shows goes through :func:`show_table`, so that all pages read alike: no pandas index, no
``0.000000e+00`` or ``4.440892e-16``, an em dash for a missing value, and no Python lists in cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .formatting import MINUS, format_number

__all__ = [
    "MINUS",
    "MISSING",
    "Collapsed",
    "ModeNote",
    "StatsBox",
    "after_colon",
    "collapsed",
    "failures_sentence",
    "format_number",
    "mode_note",
    "same_values",
    "show_table",
    "show_value",
    "stats_box",
    "tidy_number",
]

#: What a missing value looks like on the page.
MISSING = "—"
#: Words that open a sentence and are not names: after a colon they take a small letter.
_ORDINARY_OPENERS = frozenset(
    ["a", "across", "all", "an", "at", "both", "decoders", "each", "encoders", "every", "for", "here", "in", "it", "its", "most", "neither", "no", "none", "not", "on", "only", "over", "some", "suggested", "the", "their", "there", "these", "this", "under", "with", "without"])


def after_colon(sentence: str) -> str:
    """A full sentence written after a colon inside another sentence, with a small first letter where its first word
    is an ordinary word ("No difference …" -> "no difference …"); a name keeps its capital ("MiniLM …", "Holm's …").

    >>> after_colon("No difference is established."), after_colon("MiniLM is the encoder."), after_colon("")
    ('no difference is established.', 'MiniLM is the encoder.', '')
    """
    first = sentence.split(" ", 1)[0]
    if first.lower() in _ORDINARY_OPENERS and first[:1].isupper():
        return sentence[:1].lower() + sentence[1:]
    return sentence


def tidy_number(value: Any, precision: int = 3) -> str:
    """One cell as text, written by :func:`format_number` (true minus sign, thousands separators,
    no "−0.000"): floats rounded to ``precision`` decimals, integers as integers, lists joined with commas, missing
    values as :data:`MISSING`.

    >>> tidy_number(4.440892e-16), tidy_number(-0.00001), tidy_number(3), tidy_number(None), tidy_number([1, 2])
    ('0.000', '0.000', '3', '—', '1, 2')
    >>> tidy_number(-0.1234), tidy_number(12345)
    ('−0.123', '12,345')
    """
    if value is None:
        return MISSING
    if isinstance(value, (list, tuple, np.ndarray)):
        return ", ".join(tidy_number(v, precision) for v in value)
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return format_number(int(value))
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            return MISSING if np.isnan(value) else ("∞" if value > 0 else MINUS + "∞")
        return format_number(float(value), decimals=precision)
    try:
        import pandas as pd

        if pd.isna(value):
            return MISSING
    except (TypeError, ValueError):
        pass
    return str(value)


def show_table(frame: Any, columns: Mapping[str, str] | Sequence[str] | None = None, precision: int = 3,
               precisions: Mapping[str, int] | None = None, caption: str | None = None) -> Any:
    """A pandas Styler for the page: ``columns`` picks and renames (``{"symmetry_median": "median symmetry"}``)
    or only picks (a list); floats are rounded to ``precision`` (per-column overrides in ``precisions``, keyed by
    the shown header); the index column is hidden; missing values show as an em dash.

    Returns the Styler (Jupyter displays it); ``.to_html()`` gives the HTML.

    Book: every table of every chapter.
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame: expected a pandas DataFrame, got {type(frame).__name__}.")
    if columns is not None:
        names = dict(columns) if isinstance(columns, Mapping) else {c: c for c in columns}
        missing = [c for c in names if c not in frame.columns]
        if missing:
            raise KeyError(f"columns: {missing} not in the frame; it has {list(frame.columns)}.")
        frame = frame[list(names)].rename(columns=names)
    frame = frame.reset_index(drop=True)
    precisions = dict(precisions or {})
    formatters = {c: (lambda v, p=precisions.get(c, precision): tidy_number(v, p)) for c in frame.columns}
    styler = frame.style.hide(axis="index").format(formatters)
    if caption:
        styler = styler.set_caption(caption)
    return styler


class ModeNote:
    """A note box that says how the page was built, computed from the run's own ``QUICK`` flag (never typed).

    A quick-mode note displays as a box, ``<div class="admonition note qkg-mode-note" data-mode="quick">`` titled
    "Quick build" (the page is a smoke test, and says so up front); a full-scale note is one muted line of text,
    ``<p class="qkg-mode-note" data-mode="full">`` (how the numbers were drawn, not a warning). The mode attribute
    lets a reader's browser (and the book's page check) compare the note with the build it sits in. An empty note
    (full scale with nothing to add) displays as nothing.
    """

    def __init__(self, mode: str, text: str):
        if mode not in ("quick", "full"):
            raise ValueError(f"mode: expected 'quick' or 'full', got {mode!r}.")
        self.mode, self.text = mode, text

    def _repr_html_(self) -> str:
        import html

        if not self.text:
            return ""
        if self.mode == "full":
            return f'<p class="qkg-mode-note" data-mode="full">{html.escape(self.text)}</p>'
        return ('<div class="admonition note qkg-mode-note" data-mode="quick"><p class="admonition-title">Quick build</p>'
                f"<p>{html.escape(self.text)}</p></div>")

    def __repr__(self) -> str:
        return self.text


def mode_note(quick: bool, quick_text: str, full_text: str = "") -> ModeNote:
    """The note that opens a chapter: ``quick_text`` for a quick run (``quick=True``), ``full_text`` otherwise.

    Leave ``full_text`` empty when the full build needs no note (the page then shows none).

    >>> mode_note(True, "A smoke test.", "Full scale.").mode, repr(mode_note(False, "A smoke test."))
    ('quick', '')
    >>> print(mode_note(False, "quick", "20,000 draws per check.")._repr_html_())
    <p class="qkg-mode-note" data-mode="full">20,000 draws per check.</p>
    """
    if not isinstance(quick, (bool, np.bool_)):
        raise TypeError(f"quick: expected the notebook's QUICK flag (True or False), got {quick!r}.")
    return ModeNote("quick" if quick else "full", quick_text if quick else full_text)


class StatsBox:
    """A verdict for a page: its sentence in the text, the full statistics in a collapsed box beneath.

    Displays as ``<p>sentence</p><details class="qkg-stats"><summary>Full statistics</summary>...</details>``;
    ``str()`` is the sentence alone (for ``{glue:text}`` in running text).
    """

    def __init__(self, verdicts, with_sentence: bool = True, labels: Sequence[str] | None = None):
        self.verdicts, self.with_sentence = list(verdicts), with_sentence
        if not self.verdicts:
            raise ValueError("verdicts: pass at least one qkgeometry.stats.Verdict.")
        self.labels = list(labels) if labels is not None else [""] * len(self.verdicts)
        if len(self.labels) != len(self.verdicts):
            raise ValueError(f"labels: one per verdict, got {len(self.labels)} for {len(self.verdicts)}.")

    @property
    def sentence(self) -> str:
        return " ".join(v.sentence for v in self.verdicts)

    def _repr_html_(self) -> str:
        import html

        rows = []
        for v, label in zip(self.verdicts, self.labels):
            cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(t)}</td></tr>"
                            for k, t in _rounded_details(v).items())
            head = f"<p class=\"qkg-stats-label\">{html.escape(label)}</p>" if label else ""
            rows.append(f"{head}<table class=\"qkg-stats-table\"><tbody>{cells}</tbody></table>")
        lead = f"<p class=\"qkg-verdict\">{html.escape(self.sentence)}</p>" if self.with_sentence else ""
        return (f"{lead}<details class=\"qkg-stats\"><summary>Full statistics</summary>{''.join(rows)}</details>")

    def __str__(self) -> str:
        return self.sentence

    __repr__ = __str__


def _rounded_details(verdict) -> dict[str, str]:
    """A verdict's statistics with its interval's ends at the precision of the interval (``[-0.0073, 0.0042]``,
    not ``[-0.0073485, 0.00422155]``)."""

    rows = dict(verdict.details)
    interval = verdict.interval
    scale = (interval.high - interval.low) / 2 or None
    for key, text in rows.items():
        if key.endswith("% interval"):
            method = text.split("] ", 1)[1] if "] " in text else ""
            rows[key] = f"[{format_number(interval.low, scale)}, {format_number(interval.high, scale)}] {method}".rstrip()
    return rows


def stats_box(*verdicts, with_sentence: bool = True, labels: Sequence[str] | None = None) -> StatsBox:
    """One or more :class:`qkgeometry.stats.Verdict` as a sentence plus a collapsed box of their statistics.

    With ``with_sentence=False`` the box alone displays (the sentence then goes into the text, e.g. through
    ``glue(key, box.sentence)``). ``labels`` (one per verdict) head each verdict's statistics in the box, so that a
    box of several results says which is which.

    >>> from qkgeometry import stats
    >>> box = stats_box(stats.judge(stats.t_interval([0.2, 0.3, 0.25]), "A higher", "B higher", "gap"))
    >>> str(box)
    'A higher: gap 0.25 (95% CI 0.13 to 0.37).'
    >>> "<summary>Full statistics</summary>" in box._repr_html_()
    True
    >>> "<td>[0.13, 0.37] (Student t)</td>" in box._repr_html_()  # the interval at its own precision
    True
    """
    return StatsBox(verdicts, with_sentence, labels)


class Collapsed:
    """A table (or any displayable) behind a one-line summary that opens it on a click.

    Displays as ``<details class="qkg-collapsed"><summary>summary</summary>...</details>``; ``str()`` is the
    summary.
    """

    def __init__(self, content: Any, summary: str):
        if not summary.strip():
            raise ValueError("summary: say what the collapsed table holds, e.g. 'All 61 rows'.")
        self.content, self.summary = content, summary

    def _inner_html(self) -> str:
        for method in ("_repr_html_", "to_html"):
            if hasattr(self.content, method):
                return getattr(self.content, method)()
        import html

        return f"<pre>{html.escape(str(self.content))}</pre>"

    def _repr_html_(self) -> str:
        import html

        return (f'<details class="qkg-collapsed"><summary>{html.escape(self.summary)}</summary>'
                f"{self._inner_html()}</details>")

    def __str__(self) -> str:
        return self.summary

    __repr__ = __str__


def collapsed(content: Any, summary: str) -> Collapsed:
    """``content`` (a :func:`show_table` Styler, a frame...) collapsed behind ``summary``: a long table's full
    version next to the short one a page shows.

    >>> import pandas as pd
    >>> box = collapsed(show_table(pd.DataFrame({"a": [1, 2]})), "All 2 rows")
    >>> box._repr_html_().startswith('<details class="qkg-collapsed"><summary>All 2 rows</summary>')
    True
    """
    return Collapsed(content, summary)


def failures_sentence(failures: Mapping[str, Any]) -> str:
    """The models a survey could not score, as one sentence for the page (never a warning or a raw error line).

    ``failures``: view name -> the ``frame.attrs["failures"]`` of :func:`qkgeometry.survey` run that way (columns
    ``name``, ``error``, ``message``). Each failed model is named with the view and the first clause of its
    message. Chapter 4.

    >>> import pandas as pd
    >>> none = pd.DataFrame(columns=["name", "error", "message"])
    >>> failures_sentence({"per layer": none, "per head": none})
    'Every model was scored per layer and per head.'
    >>> one = pd.DataFrame([{"name": "m", "error": "SourceError", "message": "no Q/K found; pass a folder"}])
    >>> failures_sentence({"per layer": none, "per head": one})
    'Every model was scored per layer; per head, m (no Q/K found) could not be scored, so it is left out there.'
    """
    views = list(failures)
    failed = {view: f for view, f in failures.items() if f is not None and len(f)}
    if not failed:
        return f"Every model was scored {' and '.join(views)}."
    parts = []
    for view, frame in failed.items():
        names = [f"{r['name']} ({str(r['message']).split(';')[0].split('. ')[0].rstrip('.')})"
                 for _, r in frame.iterrows()]
        who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        parts.append(f"{view}, {who} could not be scored")
    scored = [v for v in views if v not in failed]
    head = f"Every model was scored {' and '.join(scored)}; " if scored else ""
    n = sum(len(f) for f in failed.values())
    text = head + "; ".join(parts) + (", so it is left out there." if n == 1 else ", so they are left out there.")
    return text[:1].upper() + text[1:]


def same_values(frame: Any, columns: Sequence[str], name: str) -> Any:
    """For each row of ``frame``, the ``name`` of the first earlier row whose values in ``columns`` are all equal to
    its own, else ``""``: rows that repeat another row's numbers, to be flagged on the page (a copy is not a second
    result).

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"model": ["a", "b", "c"], "s": [0.5, 0.5, 0.1], "d": [0.2, 0.2, 0.2]})
    >>> same_values(frame, ["s", "d"], "model").tolist()
    ['', 'a', '']
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame: expected a pandas DataFrame, got {type(frame).__name__}.")
    missing = [c for c in [*columns, name] if c not in frame.columns]
    if missing:
        raise KeyError(f"columns: {missing} not in the frame; it has {list(frame.columns)}.")
    first: dict[tuple, Any] = {}
    out = []
    for key, label in zip(frame[list(columns)].itertuples(index=False, name=None), frame[name]):
        if any(pd.isna(v) for v in key):
            out.append("")
            continue
        out.append(first.setdefault(key, label) if key in first else "")
        first.setdefault(key, label)
    return pd.Series(out, index=frame.index, name="same values as")


def show_value(name: str, value: Any, display: bool = True) -> None:
    """Show a value the chapter's text quotes, as the output of the cell that computes it (numbers through
    :func:`format_number`, a sentence as text, anything that displays richly, a figure, a table or a statistics
    box, as itself).

    The book's notebooks pass such values to ``myst_nb.glue``, which pastes them into the text; the notebooks a
    learner opens in Colab or Jupyter call this instead, with the same arguments, so that every value is visible
    where it is computed. ``display`` means what it means to ``glue``, whether the book's own cell shows the value:

    - ``display=True``: the book's cell shows the value, and so does this one, the same way: the value alone;
    - ``display=False``: the book shows the value only where its text quotes it; here it is shown under its name
      (``name: value``), so that a learner finds the value the text quotes.

    >>> show_value("share", -0.1234, display=False), show_value("n", 10033, display=False)
    share: −0.123
    n: 10,033
    (None, None)
    >>> show_value("share", -0.1234), show_value("verdict", "no detectable difference")
    −0.123
    no detectable difference
    (None, None)
    """
    label = "" if display else f"{name}: "
    if isinstance(value, (bool, np.bool_)) or value is None:
        print(f"{label}{value}")
    elif isinstance(value, (int, float, np.integer, np.floating)):
        print(f"{label}{tidy_number(value, 3)}")
    elif isinstance(value, str):
        print(f"{label}{value}")
    else:
        from IPython.display import display as _display

        if label:
            print(label.rstrip())
        _display(value)
