"""The bibliography as the book cites it: ``book/references.bib`` read by pybtex into "Author et al. Year", for the
slide decks (:mod:`tools.slides`) and the learners' notebooks (:mod:`tools.numbering`).
"""

from __future__ import annotations

import re

__all__ = ["citation_names", "cited"]


def citation_names(bib_text: str) -> dict[str, str]:
    """``key -> "Author et al. Year"`` (or "Author Year", "A and B Year") for every entry of a BibTeX file, read by
    pybtex."""
    from pybtex.database import parse_string

    names = {}
    for key, entry in parse_string(bib_text, "bibtex").entries.items():
        people = entry.persons.get("author", [])
        if not people:
            continue
        last = [re.sub(r"[{}]", "", " ".join(p.last_names)) for p in people]
        who = last[0] if len(last) == 1 else f"{last[0]} and {last[1]}" if len(last) == 2 else f"{last[0]} et al."
        year = entry.fields.get("year", "")
        names[key] = f"{who} {year}".strip()
    return names


def cited(bib_text: str) -> dict[str, tuple[str, str]]:
    """``key -> (authors as cited, year)`` for every entry of a BibTeX file ("Saponati et al.", "2025")."""
    out = {}
    for key, name in citation_names(bib_text).items():
        m = re.match(r"^(.*?)\s+(\d{4})$", name)
        out[key] = (m.group(1), m.group(2)) if m else (name, "")
    return out
