"""The book's numbering, as a learner's notebook or a slide reads it: every figure, table, statement, exercise and
labelled equation numbered per chapter and kind ("Fig. 3.4", "Theorem 1.2", "(2.1)"), the chapters' titles, and the
bibliography's citations.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import myst
from .citations import cited

__all__ = ["Chapter", "Labels", "chapter_labels", "page_labels"]


@dataclass
class Chapter:
    """One chapter of the book: its number (its place among ``notebooks/NN_*.ipynb``), file stem and title."""

    number: int
    stem: str
    title: str


@dataclass
class Labels:
    """What every label of the book reads as in a learner's notebook, and the chapters."""

    text: dict[str, str] = field(default_factory=dict)  # label -> "Theorem 1.2", "Fig. 3.4", "(2.1)", section title
    titles: dict[str, str] = field(default_factory=dict)  # label -> a statement's title, where it has one
    chapters: dict[str, Chapter] = field(default_factory=dict)  # stem -> chapter
    citations: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> ("Saponati et al.", "2025")
    pages: dict[str, tuple[str, str]] = field(default_factory=dict)  # label -> ("book/statistics", its heading)


def chapter_labels(notebooks: Sequence, bib: Path | None = None, pages: Path | None = None) -> Labels:
    """Number every figure, table, statement, exercise and labelled equation of the chapters as the book does
    (per chapter and per kind: "Fig. 3.4", "Table 6.1", "Theorem 1.2", "Exercise 3.2", "(2.1)"), and read the
    chapters' titles and the bibliography. ``notebooks``: paths, or ``(file stem, notebook node)`` pairs."""

    labels = Labels()
    items = [(Path(x).stem, None) if isinstance(x, (str, Path)) else x for x in notebooks]
    paths = {Path(x).stem: Path(x) for x in notebooks if isinstance(x, (str, Path))}
    for stem, nb in sorted(items, key=lambda item: item[0]):
        m = re.match(r"^(\d+)_", stem)
        if not m:
            continue
        n = int(m.group(1))
        if nb is None:
            nb = myst.read_notebook(paths[stem])
        counts: Counter = Counter()
        pending_target = None
        title = None
        for cell in nb.cells:
            figure = myst.cell_figure(cell)
            name = str(figure.get("name", ""))
            if cell.cell_type == "code" and myst.FIGURE_NAME.match(name):
                kind = "Table" if name.startswith("tbl-") else "Fig."
                counts[kind] += 1
                labels.text[name] = f"{kind} {n}.{counts[kind]}"
            if cell.cell_type != "markdown":
                continue
            for line in cell.source.splitlines():
                if title is None and line.startswith("# "):
                    title = line[2:].strip()
                if pending_target and re.match(r"^#{1,6} ", line):
                    labels.text[pending_target] = f"the section ‘{line.lstrip('#').strip()}’ of chapter {n}"
                    pending_target = None
            for name_, argument, options, _body, _tok in myst.walk_blocks(cell.source):
                kind = name_.split(":")[-1]
                if name_ == "target":
                    pending_target = argument
                    # the heading follows in the same cell (handled above when it comes later in the lines)
                    after = cell.source.split(f"({argument})=", 1)[1]
                    heading = re.search(r"^#{1,6} (.+)$", after, re.M)
                    if heading:
                        labels.text[argument] = f"the section ‘{heading.group(1).strip()}’ of chapter {n}"
                        pending_target = None
                elif name_ == "equation":
                    counts["equation"] += 1
                    labels.text[argument] = f"({n}.{counts['equation']})"
                elif name_.startswith("prf:") and kind in myst.PROOF_KINDS:
                    counts[kind] += 1
                    if "label" in options:
                        labels.text[options["label"]] = f"{kind.capitalize()} {n}.{counts[kind]}"
                        labels.titles[options["label"]] = argument
                elif name_ == "exercise":
                    counts["exercise"] += 1
                    if "label" in options:
                        labels.text[options["label"]] = f"Exercise {n}.{counts['exercise']}"
        labels.chapters[stem] = Chapter(n, stem, title or stem)
    if bib is not None and Path(bib).is_file():
        labels.citations = cited(Path(bib).read_text(encoding="utf-8"))
    if pages is None and bib is not None:
        pages = Path(bib).parent  # the book's pages sit beside its bibliography
    if pages is not None and Path(pages).is_dir():
        labels.pages = page_labels(Path(pages))
    return labels


def page_labels(folder: Path) -> dict[str, tuple[str, str]]:
    """``label -> (page, heading)`` for every ``(label)=`` target of the book's Markdown pages in ``folder`` that a
    heading follows ("stat-kappa" -> ("book/statistics", "κ (Cohen's kappa)"))."""
    out = {}
    for path in sorted(Path(folder).glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^\(([\w.:-]+)\)=[ \t]*\n+#{1,6} (.+)$", text, re.M):
            out[m.group(1)] = (f"{path.parent.name}/{path.stem}", m.group(2).strip())
    return out
