"""Sphinx extension: how the book's pages read, beyond what Jupyter Book does by default.

- MathJax is loaded on every page, so that chapter titles with math (in the sidebar, in "previous/next" links)
  are typeset on pages that have no math of their own (the search page, the proof index...).
- The browser tab title is plain text: ``\\(W_{qk}\\)`` becomes ``W_qk`` (a tab cannot show typeset math).
- The proof index lists each theorem, proposition or corollary by its title, grouped by kind, instead of by its
  label id.
- Bibliography entries are labelled "Author et al. Year" (the style ``qkg_authoryear``), matching the author–year
  citations in the text.
- ``qkgeometry.css``: long code lines and outputs wrap instead of scrolling sideways; wide tables and displays
  scroll inside their own box on a phone instead of pushing the page wider.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx

STATIC = Path(__file__).parent / "static"
CSS = "qkgeometry.css"

_SYMBOLS = {r"\top": "ᵀ", r"\ell": "ℓ", r"\tau": "τ", r"\Delta": "Δ", r"\le": "≤", r"\ge": "≥", r"\ne": "≠",
            r"\times": "×", r"\cdot": "·", r"\|": "‖", r"\in": "∈", r"\mathbb{R}": "ℝ", r"\nabla": "∇",
            r"\approx": "≈", r"\to": "→"}
_INLINE_MATH = re.compile(r"\\\((.*?)\\\)|\$([^$]+)\$")


def tex_to_text(tex: str) -> str:
    r"""A plain-text rendering of a short TeX formula, for places that cannot typeset math.

    >>> tex_to_text(r"W_{qk}"), tex_to_text(r"W_Q = W_K"), tex_to_text(r"1/d"), tex_to_text(r"W_Q R(\Delta) W_K^\top")
    ('W_qk', 'W_Q = W_K', '1/d', 'W_Q R(Δ) W_Kᵀ')
    """
    text = tex
    for key in sorted(_SYMBOLS, key=len, reverse=True):
        text = re.sub(re.escape(key) + r"(?![A-Za-z])", _SYMBOLS[key], text)
    text = re.sub(r"\^\{?ᵀ\}?", "ᵀ", text)
    text = re.sub(r"\\(?:mathrm|operatorname|text|mathbf|boldsymbol|mathcal)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"_\{([^{}]*)\}", r"_\1", text)
    text = re.sub(r"\\[,;!: ]", " ", text)
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text)
    return re.sub(r"\s+", " ", text.replace("{", "").replace("}", "")).strip()


def plain_title(html: str) -> str:
    """A page or section title with its inline math turned into plain text (for ``<title>`` and indices)."""
    return _INLINE_MATH.sub(lambda m: tex_to_text(m.group(1) or m.group(2)), html)


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if context.get("title"):
        context["title"] = plain_title(context["title"])


# ------------------------------------------------------------------------------------------------ proof index
def _record_proof_titles(app: Sphinx) -> None:
    """Keep each proof directive's title next to its label, so that the index can list titles."""
    from sphinx_proof import directive

    original = directive.ElementDirective.run
    if getattr(original, "_qkg_titles", False):
        return

    def run(self):
        result = original(self)
        env = self.env
        label = self.options.get("label") or next(iter(reversed(env.proof_list)), None)
        if label in getattr(env, "proof_list", {}):
            env.proof_list[label]["title"] = self.arguments[0] if self.arguments else ""
        return result

    run._qkg_titles = True
    directive.ElementDirective.run = run


def _titled_proof_index():
    from sphinx_proof.domain import ProofIndex

    class TitledProofIndex(ProofIndex):
        """Proof index by title, grouped by kind (Corollary, Proposition, Theorem...)."""

        def generate(self, docnames=None):
            content: dict[str, list] = defaultdict(list)
            for anchor, values in getattr(self.domain.env, "proof_list", {}).items():
                title = plain_title(values.get("title") or "") or anchor
                kind = values["realtype"].capitalize()
                page = self.domain.env.titles.get(values["docname"])
                where = plain_title(page.astext()) if page is not None else ""
                content[kind].append((title, 0, values["docname"], anchor, where, "", ""))
            return sorted((k, sorted(v)) for k, v in content.items()), True

    return TitledProofIndex


# -------------------------------------------------------------------------------------------- bibliography
def _register_bibliography_style() -> None:
    from pybtex.plugin import register_plugin
    from pybtex.richtext import Text
    from pybtex.style.formatting.unsrt import Style as UnsrtStyle
    from pybtex.style.labels import BaseLabelStyle

    def last(person) -> str:
        return Text.from_latex(" ".join(person.last_names)).render_as("text")

    class AuthorYearLabels(BaseLabelStyle):
        def format_labels(self, sorted_entries):
            for entry in sorted_entries:
                people = entry.persons.get("author") or entry.persons.get("editor") or []
                year = entry.fields.get("year", "")
                if not people:
                    names = Text.from_latex(entry.fields.get("title", entry.key)).render_as("text")
                elif len(people) == 1:
                    names = last(people[0])
                elif len(people) == 2:
                    names = f"{last(people[0])} & {last(people[1])}"
                else:
                    names = f"{last(people[0])} et al."
                yield f"{names} {year}".strip()

    class AuthorYearStyle(UnsrtStyle):
        default_label_style = AuthorYearLabels
        default_sorting_style = "author_year_title"

    register_plugin("pybtex.style.formatting", "qkg_authoryear", AuthorYearStyle, force=True)


def _configure(app: Sphinx, config: Any) -> None:
    if str(STATIC) not in [str(p) for p in config.html_static_path]:
        config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict[str, Any]:
    app.set_html_assets_policy("always")
    app.add_css_file(CSS)
    app.connect("config-inited", _configure)
    app.connect("html-page-context", _page_context)
    _register_bibliography_style()
    _record_proof_titles(app)
    from sphinx_proof.domain import ProofDomain

    ProofDomain.indices = {_titled_proof_index()}
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
