"""The page "Reading our statistics" (book/statistics.md): every statistical word the chapters use has a labelled
section there with an example small enough to check by hand, and every chapter links the first use of each word in
its prose to that section (the Key results box at the top of a chapter is left out: it is read before the text)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tools import commonmark, numbering

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "book" / "statistics.md"
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

#: label of the page's section -> how the chapters write the word (its first use must link there)
TERMS = {
    "stat-estimand": r"\bestimands?\b",
    "stat-paired": r"\bpaired\s+by\s+(?:training\s+)?seeds?\b",
    "stat-interval": r"\b95% (?:t-)?intervals?\b|\bt-intervals?\b",
    "stat-bootstrap": r"\b(?:percentile-)?bootstrap\b",
    "stat-holm": r"\bHolm(?:'s (?:correction|method|adjustment)|-adjusted|-corrected)?(?![\w-])",
    "stat-curve": r"\bspecification\s+curves?\b",
    "stat-matched": r"\bmatched\s+learning\b",
    "stat-lineage": r"\blineages?\b",
    "stat-null": r"\b(?:rotation|random-init|Gaussian|i\.i\.d\.)[ -]null\b|\bnull\s+(?:model|band)s?\b|"
                 r"\brandom-init\s+twins?\b",
    "stat-z": r"\bz-scores?\b",
    "stat-auc": r"\bAUCs?\b",
    "stat-kappa": r"Cohen's κ|(?<!\w)κ(?!\w)",
    "stat-not-detected": r"\bnot\s+detected\b",
    "stat-power": r"\b(?:80% )?power\b",
}
_REF = re.compile(r"\{ref\}`[^`<]*<(?P<label>[\w.:-]+)>`")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _prose_cells(path: Path) -> list[str]:
    """The chapter's Markdown a reader meets in the text, in order: hidden cells and the Key results cell left out."""
    out = []
    for cell in _cells(path):
        text = "".join(cell["source"])
        if (cell["cell_type"] == "markdown" and "remove-cell" not in cell["metadata"].get("tags", [])
                and "qkg-front-door" not in text):
            out.append(text)
    return out


def _not_prose(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are not running prose: code blocks, directive fence and option lines, headings,
    targets, table rows, math, inline code, links and roles other than a reference to this page."""
    spans = [m.span() for m in re.finditer(r"^(`{3,}|~{3,})(?!\{)[^\n]*\n.*?^\1[ \t]*$", text, re.S | re.M)]
    spans += [m.span() for m in re.finditer(r"^(?:`{3,}|:{3,})\{[^\n]*$|^:[\w-]+:[^\n]*$|^#{1,6} [^\n]*$|"
                                            r"^\([\w.:-]+\)=[ \t]*$|^\|[^\n]*$", text, re.M)]
    spans += [m.span() for m in re.finditer(r"\$\$.*?\$\$|\$[^$\n]+\$", text, re.S)]
    spans += [m.span() for m in re.finditer(r"\{[\w:+-]+\}`[^`]*`|`[^`\n]*`|\[[^\]\n]*\]\([^)\n]*\)", text)
              if not _REF.fullmatch(m.group(0))]
    return spans


def first_use(path: Path, pattern: str) -> tuple[str, re.Match] | None:
    """The cell text and the match of the first use of a word in the chapter's prose, if any."""
    for text in _prose_cells(path):
        spans = _not_prose(text)
        for m in re.finditer(pattern, text):
            if not any(a <= m.start() < b for a, b in spans):
                return text, m
    return None


def _linked(text: str, m: re.Match, label: str) -> bool:
    return any(r.start() <= m.start() < r.end() and r.group("label") == label for r in _REF.finditer(text))


def test_the_page_explains_every_word_with_an_example():
    labels = numbering.page_labels(ROOT / "book")
    text = PAGE.read_text(encoding="utf-8")
    sections = re.split(r"^\([\w.:-]+\)=[ \t]*$", text, flags=re.M)
    for label in TERMS:
        assert labels.get(label, ("",))[0] == "book/statistics", f"book/statistics.md has no section {label}"
    for section in sections[1:]:
        assert "*Example.*" in section, f"a section of book/statistics.md has no worked example: {section[:80]!r}"


def test_the_page_is_in_the_table_of_contents_next_to_the_notation():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [c.get("file") for part in toc["parts"] for c in part["chapters"]]
    assert files.index("book/statistics") == files.index("book/notation") + 1


def test_every_reference_to_the_page_names_one_of_its_sections():
    labels = numbering.page_labels(ROOT / "book")
    for path in CHAPTERS:
        for cell in _cells(path):
            for r in _REF.finditer("".join(cell["source"])):
                if r.group("label").startswith("stat-"):
                    assert r.group("label") in labels, f"{path.name}: no section {r.group('label')} to link to"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_the_first_use_of_each_word_links_to_the_page(path: Path):
    unlinked = []
    for label, pattern in TERMS.items():
        found = first_use(path, pattern)
        if found and not _linked(*found, label):
            text, m = found
            unlinked.append(f"{m.group(0)!r} ({label}) in …{text[max(0, m.start() - 50):m.end() + 20]!r}")
    assert not unlinked, f"{path.name}: first uses not linked to book/statistics.md: " + "; ".join(unlinked)


def test_a_learners_notebook_links_the_word_to_the_page():
    """In plain Markdown the reference is a link to the page's section (no MyST left for Colab to show)."""
    labels = numbering.chapter_labels(CHAPTERS[:1], pages=ROOT / "book")
    ctx = commonmark.Context(labels.chapters[CHAPTERS[0].stem], labels, {}, "full")
    text = commonmark.markdown_to_commonmark("The {ref}`AUC <stat-auc>` and {ref}`Cohen's κ <stat-kappa>`.", ctx)
    assert text == (f"The [AUC]({commonmark.GITHUB}/book/statistics.md#auc) and "
                    f"[Cohen's κ]({commonmark.GITHUB}/book/statistics.md#κ-cohens-kappa).")
    assert commonmark.myst_leftovers(text) == []
    ctx.links = "book"
    assert "(../book/statistics.html#stat-auc)" in commonmark.markdown_to_commonmark("{ref}`AUC <stat-auc>`", ctx)
