"""Sphinx extension: how the book's pages read, beyond what Jupyter Book does by default.

- MathJax is loaded on every page, so that chapter titles with math (in the sidebar, in "previous/next" links)
  are typeset on pages that have no math of their own (the search page, the proof index...).
- The browser tab title is plain text: ``\\(W_{qk}\\)`` becomes ``W_qk`` (a tab cannot show typeset math).
- The proof index lists each theorem, proposition or corollary by its title, grouped by kind, instead of by its
  label id.
- Bibliography entries are labelled "Author et al. Year" (the style ``qkg_authoryear``), matching the author–year
  citations in the text.
- Figures keep their true shape at every width: a notebook's image output carries its size in pixels, which
  myst-nb copies onto the ``<img>`` as an inline ``width`` *and* ``height``. The theme caps the width at the column
  and the fixed height then squashes the figure. Only the width is kept (it caps the figure at its natural size),
  and the browser derives the height from the image itself.
- Every page carries ``<meta name="qkgeometry-build" content="quick|full">`` (from the ``QKG_BUILD_MODE``
  environment variable the book builder sets), so that a page's "quick mode" note can be checked against the build.
- Inline math wraps on a phone: MathJax 3 never breaks a formula, so a long inline formula (in a theorem box above
  all) runs past the right edge at 390 px. Each inline formula longer than a few symbols is split at its top-level
  relations (``=``, ``\\le``, ...) into pieces that MathJax typesets one by one, with a line-break opportunity
  between them.
- A glued sentence (a verdict pasted with ``{glue:text}``) reads in the text's weight; myst-nb's bold is kept for
  glued numbers and short phrases.
- Long proofs are collapsed: a proof longer than ``PROOF_FOLD_CHARS`` characters sits in a ``<details>`` box
  ("Show the proof"), open on a click.
- Reading time: every chapter shows "About N min to read" under its title, computed from its own words and
  figures when the book is built; the role ``{reading-time}`path``` writes another page's time (the intro's
  chapter table uses it).
- Interactive figures (``qkgeometry.plotting.interactive``) get Plotly from the book's own ``_static/plotly/``
  (copied from the installed ``plotly`` package when the build finishes), loaded only on the pages that have one:
  no network, like MathJax.
- Numbered tables: a notebook cell whose output is named ``tbl-...`` (cell metadata ``mystnb.figure.name``, with
  its ``caption``) becomes a numbered table ("Table 6.1", caption above), cited with ``{numref}`tbl-...```.
- ``qkgeometry.css``: long code lines and outputs wrap instead of scrolling sideways; wide tables and displays
  scroll inside their own box on a phone instead of pushing the page wider, and ``qkgeometry.js`` marks a table box
  that scrolls so that a hint above it says so; a long table's full version sits behind a summary line
  (``qkgeometry.tables.collapsed``).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

STATIC = Path(__file__).parent / "static"
CSS = "qkgeometry.css"
#: Marks a table box that scrolls sideways, so that its hint shows (``qkgeometry.css``).
JS = "qkgeometry.js"

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


#: Environment variable through which the book builder says how the notebooks were executed.
BUILD_MODE_ENV = "QKG_BUILD_MODE"


def build_mode() -> str:
    """``"quick"`` or ``"full"`` (from ``QKG_BUILD_MODE``), ``"unknown"`` when the builder did not say."""
    mode = os.environ.get(BUILD_MODE_ENV, "").strip().lower()
    return mode if mode in ("quick", "full") else "unknown"


#: Where the book serves Plotly from, inside ``_static``.
PLOTLY_JS = "plotly/plotly.min.js"


def plotly_source() -> Path | None:
    """The ``plotly.min.js`` of the installed ``plotly`` package, or None without it."""
    try:
        import plotly
    except ImportError:
        return None
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return path if path.is_file() else None


def _copy_plotly(app: Sphinx, exception: Exception | None) -> None:
    import shutil

    source = plotly_source()
    if exception is not None or app.builder.format != "html" or source is None:
        return
    target = Path(app.outdir) / "_static" / PLOTLY_JS
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if "qkg-plotly" in context.get("body", ""):
        app.add_js_file(PLOTLY_JS)  # this page only
    if context.get("title"):
        context["title"] = plain_title(context["title"])
    context["metatags"] = context.get("metatags", "") + f'\n<meta name="qkgeometry-build" content="{build_mode()}" />'


# ------------------------------------------------------------------------------------------------- figures
def keep_true_shape(doctree: nodes.Node) -> int:
    """Drop the fixed ``height`` of every image that also has a ``width``; return how many were changed.

    The width alone caps the image at its natural size; with ``max-width: 100%`` the browser then scales both
    sides together.
    """
    changed = 0
    for image in doctree.findall(nodes.image):
        if image.get("width") and image.get("height"):
            del image["height"]
            changed += 1
    return changed


# -------------------------------------------------------------------------------------------------- tables
#: A notebook output named with this prefix is a numbered table, not a figure.
TABLE_PREFIX = "tbl-"


class numbered_table(nodes.figure):
    """A notebook output shown as a numbered table (a figure node counted and titled as a table)."""


def tables_from_outputs(doctree: nodes.Node) -> int:
    """Turn every figure named ``tbl-...`` into a :class:`numbered_table` with its caption on top; return how
    many."""
    changed = 0
    for fig in list(doctree.findall(nodes.figure)):
        if type(fig) is not nodes.figure or not any(i.startswith(TABLE_PREFIX) for i in fig["ids"]):
            continue
        children = list(fig.children)
        captions = [c for c in children if isinstance(c, nodes.caption)]
        rest = [c for c in children if not isinstance(c, nodes.caption)]
        table = numbered_table(fig.rawsource, *(captions + rest), **fig.attributes)
        table["classes"] = [*table.get("classes", []), "qkg-table"]
        fig.replace_self(table)
        document = getattr(doctree, "ids", None)
        if isinstance(document, dict):  # the document's id map still points at the old figure: {numref} reads it
            for ident in table["ids"]:
                document[ident] = table
        changed += 1
    return changed


def _visit_numbered_table(self, node: nodes.Element) -> None:
    self.context.append(len(self.body))
    self.visit_figure(node)


def close_caption(body: list[str], start: int) -> list[str]:
    """``body`` (an HTML writer's output pieces) with the ``<figcaption>`` opened at or after ``start`` closed
    right after its caption paragraph, so that the table that follows sits beside the caption, not inside it.

    The HTML writer closes a figure's ``<figcaption>`` only when the figure ends (a figure's caption is its last
    child, so everything after it is a legend); a numbered table's caption comes first, and the whole table would
    otherwise render as caption text (small, muted). The permalink says "table" instead of "image".

    >>> close_caption(["<figure>", "<figcaption>\n", "<p>", "Table 1", "</p>\n", "<table/>"], 0)
    ['<figure>', '<figcaption>\n', '<p>', 'Table 1', '</p>\n', '</figcaption>\n', '<table/>']
    """
    out = list(body)
    try:
        opened = out.index("<figcaption>\n", start)
        closed = out.index("</p>\n", opened)
    except ValueError:
        return out
    out.insert(closed + 1, "</figcaption>\n")
    for k in range(opened, closed + 1):
        out[k] = out[k].replace("Link to this image", "Link to this table")
    return out


def _depart_numbered_table(self, node: nodes.Element) -> None:
    start = self.context.pop()
    self.body[start:] = close_caption(self.body[start:], 0)
    self.body.append("</figure>\n")


# ---------------------------------------------------------------------------------------------------- math
#: Relations at which an inline formula may be broken across lines (the relation starts the next piece).
_RELATIONS = ("\\approx", "\\equiv", "\\leq", "\\geq", "\\le", "\\ge", "\\ne", "\\sim", "\\to", "=", "<", ">")
#: Formulas shorter than this (characters of TeX) are left whole.
MIN_SPLIT_CHARS = 24


def split_inline_math(tex: str) -> list[str]:
    r"""Pieces of an inline formula at its top-level relations, each typesettable on its own.

    Pieces after the first start with ``{}`` so that the relation keeps its spacing. Nothing inside braces,
    ``\left ... \right`` or an environment is split.

    >>> split_inline_math(r"M_s + M_n = \tfrac12(M+M^\top) + \tfrac12(M-M^\top) = M")
    ['M_s + M_n ', '{}= \\tfrac12(M+M^\\top) + \\tfrac12(M-M^\\top) ', '{}= M']
    >>> split_inline_math(r"\{x : f(x) = 0\}"), split_inline_math(r"a = b")
    (['\\{x : f(x) = 0\\}'], ['a = b'])
    """
    if len(tex) < MIN_SPLIT_CHARS:
        return [tex]
    pieces, start, depth, i = [], 0, 0, 0
    while i < len(tex):
        ch = tex[i]
        if ch == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", tex[i:])
            name = m.group(1)
            if name in ("left", "begin"):
                depth += 1
            elif name in ("right", "end"):
                depth -= 1
            elif depth == 0 and name in ("{", "}"):
                depth += 1 if name == "{" else -1
            elif depth == 0 and i > start and any(m.group(0) == r for r in _RELATIONS) and tex[start:i].strip():
                pieces.append(tex[start:i])
                start = i
            i += len(m.group(0))
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0 and ch in "=<>" and i > start and tex[start:i].strip() and tex[i - 1] not in "&<>!":
            pieces.append(tex[start:i])
            start = i
        i += 1
    pieces.append(tex[start:])
    if depth != 0 or len(pieces) == 1:
        return [tex]
    return [pieces[0]] + ["{}" + p for p in pieces[1:]]


def wrap_inline_math(doctree: nodes.Node) -> int:
    """Split every long inline formula of the body text (not titles) into pieces; return how many were split."""
    changed = 0
    for math in list(doctree.findall(nodes.math)):
        if any(isinstance(a, (nodes.title, nodes.rubric, nodes.caption)) for a in _ancestors(math)):
            continue
        pieces = split_inline_math(math.astext())
        if len(pieces) == 1:
            continue
        new: list[nodes.Node] = []
        for k, piece in enumerate(pieces):
            if k:
                new.append(nodes.raw("", "<wbr>", format="html"))
            new.append(nodes.math(piece, piece))
        math.replace_self(new)
        changed += 1
    return changed


def _ancestors(node: nodes.Node):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


# -------------------------------------------------------------------------------------------------- proofs
#: Proofs with more text than this (characters, formulas included) are collapsed behind a "Proof" summary.
PROOF_FOLD_CHARS = 500


def fold_long_proofs(doctree: nodes.Node) -> int:
    """Put every long proof in a ``<details>`` box; return how many were folded."""
    from sphinx_proof.nodes import proof_node

    folded = 0
    for proof in list(doctree.findall(proof_node)):
        if len(proof.astext()) < PROOF_FOLD_CHARS or proof.parent is None:
            continue
        parent, index = proof.parent, proof.parent.index(proof)
        parent.insert(index + 1, nodes.raw("", "</details>", format="html"))
        parent.insert(index, nodes.raw("", '<details class="qkg-proof"><summary>Show the proof</summary>', format="html"))
        folded += 1
    return folded


# -------------------------------------------------------------------------------------------- reading time
#: Reading speed for technical prose (words per minute) and the time a figure or a table takes to look at.
WORDS_PER_MINUTE = 180
MINUTES_PER_FIGURE = 0.5


def page_size(doctree: nodes.Node) -> tuple[int, int]:
    """``(words of prose, figures)`` of one page: prose outside code cells and their outputs; a figure is a
    figure directive or a notebook output that holds an image."""
    words = 0
    for para in doctree.findall(nodes.paragraph):
        if any(isinstance(a, (nodes.literal_block,)) or "cell_output" in a.get("classes", [])
               for a in _ancestors(para)):
            continue
        words += len(re.findall(r"\w+", para.astext()))
    bundles = {id(n.parent) for n in doctree.findall(nodes.Element)
               if str(n.get("mime_type", "")).startswith("image/")
               and not any(isinstance(a, nodes.figure) for a in _ancestors(n))}  # a captioned one counts once
    figures = sum(1 for f in doctree.findall(nodes.figure) if type(f) is nodes.figure) + len(bundles)
    return words, figures


def reading_minutes(words: int, figures: int) -> int:
    """Minutes to read a page of ``words`` words and ``figures`` figures (at least 1).

    >>> reading_minutes(3600, 10)
    25
    """
    return max(1, round(words / WORDS_PER_MINUTE + MINUTES_PER_FIGURE * figures))


def _doctree_read(app: Sphinx, doctree: nodes.document) -> None:
    wrap_inline_math(doctree)
    tables_from_outputs(doctree)
    env = app.env
    if not hasattr(env, "qkg_reading"):
        env.qkg_reading = {}
    env.qkg_reading[env.docname] = page_size(doctree)


def _merge_reading(app: Sphinx, env, docnames, other) -> None:
    if not hasattr(env, "qkg_reading"):
        env.qkg_reading = {}
    env.qkg_reading.update(getattr(other, "qkg_reading", {}))


class reading_time_ref(nodes.inline):
    """Placeholder for another page's reading time, filled in once every page has been read."""


def reading_time_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    target = text.strip()
    node = reading_time_ref(rawtext, "")
    node["target"] = target
    return [node], []


def _fill_reading_times(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    from posixpath import join, normpath

    table = getattr(app.env, "qkg_reading", {})
    for ref in list(doctree.findall(reading_time_ref)):
        target = normpath(join(docname.rsplit("/", 1)[0] if "/" in docname else "", ref["target"]))
        if target not in table:
            from sphinx.util import logging

            logging.getLogger(__name__).warning(f"reading-time: no page {target!r}", location=ref)
            ref.replace_self(nodes.Text("?"))
            continue
        ref.replace_self(nodes.Text(f"{reading_minutes(*table[target])} min"))
    if docname.startswith("notebooks/") and docname in table:
        words, figures = table[docname]
        for section in doctree.findall(nodes.section):
            title = section.next_node(nodes.title)
            note = nodes.paragraph("", f"About {reading_minutes(words, figures)} min to read "
                                       f"({words:,} words, {figures} figures), more to run its code and exercises.",
                                   classes=["qkg-reading-time"])
            section.insert(section.index(title) + 1, note)
            break


#: A glued value with more words than this is a sentence (a verdict), not a number.
GLUED_SENTENCE_WORDS = 4


def plain_glued_sentences(doctree: nodes.Node) -> int:
    """Mark every glued value (``{glue:text}``, shown in bold by myst-nb) that is a whole sentence or clause with
    ``qkg-glued-sentence``, so that it reads in the text's own weight: numbers stand out, sentences do not. Returns
    how many were marked."""
    marked = 0
    for node in doctree.findall(nodes.inline):
        if "pasted-text" in node.get("classes", []) and len(node.astext().split()) > GLUED_SENTENCE_WORDS:
            node["classes"].append("qkg-glued-sentence")
            marked += 1
    return marked


def _doctree_resolved(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    # myst-nb turns notebook outputs into images in a post-transform, so after reading is too early
    keep_true_shape(doctree)
    plain_glued_sentences(doctree)
    _fill_reading_times(app, doctree, docname)
    if app.builder.format == "html":
        fold_long_proofs(doctree)


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
    app.add_js_file(JS)
    app.connect("config-inited", _configure)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _copy_plotly)
    app.add_enumerable_node(numbered_table, "table", html=(_visit_numbered_table, _depart_numbered_table))
    app.connect("doctree-read", _doctree_read)
    app.connect("env-merge-info", _merge_reading)
    app.add_role("reading-time", reading_time_role)
    app.connect("doctree-resolved", _doctree_resolved)
    _register_bibliography_style()
    _record_proof_titles(app)
    from sphinx_proof.domain import ProofDomain

    ProofDomain.indices = {_titled_proof_index()}
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
