"""One slide deck per session of the course module, made from the executed chapters when the book is built.

Each deck is one self-contained HTML page, ``slides/session-N.html`` next to the book's pages: a title slide, the
chapter's key results (its "Key results" box, with every number the chapter computed filled in), its theorems and
propositions, its numbered figures (each titled by its caption's first clause) with their captions, and its
exercises. Everything is numbered as in the book ("Theorem 2.1", "Fig. 2.3", "Exercise 2.1"). A session that asks
for predictions first (:attr:`Session.predict`) shows the chapter's hypotheses and a poll before any result, and its
results table after the figures. A caption's sentences about what the page has around the figure ("the table
above", "hover") are left out. The slides stack vertically and snap to the screen; the arrow keys, Page Up/Down and
the space bar step through them, and the deck works without JavaScript (it then scrolls). Math is typeset by the
book's own copy of MathJax, so nothing is loaded from the network.

The chapters' MyST is read by ``tools/myst.py`` and written as Markdown by ``tools/commonmark.py`` (markdown-it-py
with the MyST plugins, the same conversion as the learners' notebooks); the Markdown becomes HTML with
markdown-it-py's CommonMark renderer. The build calls :func:`write_decks` after rendering the book; the teachers'
page links the decks.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from dataclasses import dataclass
from pathlib import Path

from . import myst
from .citations import citation_names
from .commonmark import Context, markdown_to_commonmark
from .numbering import Chapter, Labels, chapter_labels

__all__ = ["SESSIONS", "DeckError", "Session", "citation_names", "deck_html", "glue_values", "markdown_html",
           "slide_caption", "slide_title", "write_decks"]


class DeckError(ValueError):
    """A deck cannot be made: its chapter was not executed, or a figure's output is not an image."""


@dataclass(frozen=True)
class Session:
    """One teaching session of the course module and the chapter it is built on."""

    number: int
    title: str
    notebook: str  # file stem in notebooks/
    #: the heading of the chapter's section that states the predictions (hypotheses) a room makes before any
    #: result: the deck shows it and a poll first, and the Key results last
    predict: str | None = None
    #: the numbered table (``tbl-...``) of the results of those predictions, shown after the figures
    results_table: str | None = None
    #: the question the session opens with (its first ten minutes), asked on the slide after the title and again
    #: before the answer keys
    opening_poll: str | None = None

    @property
    def file_name(self) -> str:
        return f"session-{self.number}.html"


#: The sessions of the course module (``book/course_module.md``), in order.
SESSIONS = (
    Session(1, "The decomposition", "01_toeplitz_decomposition"),
    Session(2, "The scores", "02_scores"),
    Session(3, "Beyond the paper", "06_beyond_the_paper",
            opening_poll="What is the mean symmetry score $\\mathbb E\\,s$ of a Gaussian $d\\times d$ matrix?"),
    Session(4, "What a head's geometry says about its job", "07_head_behaviour",
            predict="The hypotheses, stated before the numbers", results_table="tbl-ch7-hypotheses",
            opening_poll="Which part of $W_{qk}$ should a previous-token head need: the symmetric part, the skew "
                         "part, or both? Write the class's answer on the board."),
    Session(5, "Does geometry come before function?", "08_geometry_before_function",
            predict="What the algebra predicts", results_table="tbl-ch8-predictions"),
)

#: Figures shown per deck (the first ones of the chapter), so that a deck stays a session's worth.
MAX_FIGURES = 6
#: Theorems, propositions and corollaries shown per deck (the first ones of the chapter).
MAX_THEORY = 4
#: The kinds of statement a deck shows as theory slides (sphinx-proof directive names).
THEORY_KINDS = ("theorem", "proposition", "corollary", "lemma", "definition")
#: A caption sentence that points at what the chapter's page has and a slide lacks.
_PAGE_ONLY = re.compile(r"\b(?:above|below|hover(?:ing)?|click|opens?)\b", re.IGNORECASE)
#: Longest figure-slide title (characters) before it is cut at a word.
TITLE_CHARS = 90


def glue_values(nb) -> dict[str, str]:
    """Every value a notebook glued (``myst_nb.glue``), as the text its ``text/plain`` form shows."""
    return {name: myst.plain(bundle) for name, bundle in myst.glued_outputs(nb).items()}


def _math(content: str, options: dict) -> str:
    if options.get("display_mode"):
        return r"\[" + html.escape(content) + r"\]"
    return r"\(" + html.escape(content) + r"\)"


def _renderer():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    return MarkdownIt("commonmark", {"html": False}).enable("table").use(dollarmath_plugin, renderer=_math,
                                                                          double_inline=True)


def markdown_html(markdown: str, inline: bool = False) -> str:
    """CommonMark (tables and ``$``-math included) as HTML, math left for MathJax (``\\( \\)``, ``\\[ \\]``).

    >>> markdown_html("- a *(Small d.)* and $x<y$", inline=False).replace("\\n", "")
    '<ul><li>a <em>(Small d.)</em> and <span class="math inline">\\\\(x&lt;y\\\\)</span></li></ul>'
    """
    md = _renderer()
    return md.renderInline(markdown) if inline else md.render(markdown)


def png_width(png: bytes) -> int:
    """The width in pixels of a PNG (from its header; 0 for bytes that are not a PNG). The book's figures are
    stored at twice their display size.

    >>> png_width(b"\\x89PNG\\r\\n\\x1a\\n" + b"\\x00\\x00\\x00\\rIHDR" + (640).to_bytes(4, "big") + bytes(4))
    640
    """
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        return 0
    return int.from_bytes(png[16:20], "big")


def slide_caption(caption: str) -> str:
    """A figure's caption without its sentences about the page around the figure ("the table above", "hover").

    >>> slide_caption("Both scores per layer. Hover over a point for its model. The table above lists them.")
    'Both scores per layer.'
    """
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", caption.strip())
    kept = [s for s in sentences if not _PAGE_ONLY.search(re.sub(r"\{[\w:-]+\}`[^`]*`|\$[^$]*\$", "", s))]
    return " ".join(kept or sentences[:1])


def _clauses(text: str) -> list[tuple[int, str]]:
    """``(position, character)`` of every clause boundary of ``text`` (". ", "; ", ": ", a comma or a dash) that
    lies outside brackets and formulas."""
    found, depth, math = [], 0, False
    for k, ch in enumerate(text):
        if ch == "$":
            math = not math
        elif math:
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and ch in ".;:,—–" and (k + 1 == len(text) or text[k + 1] == " "):
            found.append((k, ch))
    return found


def slide_title(caption: str) -> str:
    """A figure slide's title: its caption's first sentence or clause, whole, never cut inside a bracket, a
    formula or a word. A "Left:"/"Right:" panel label at the start is dropped. A first clause longer than
    ``TITLE_CHARS`` characters is shortened at its last comma or dash before that length.

    >>> slide_title("Symmetry against directionality for every layer: encoders right, decoders left.")
    'Symmetry against directionality for every layer'
    >>> slide_title("Left: one head (dots; one per input) and its null; right: the same head, rescaled.")
    'One head (dots; one per input) and its null'
    """
    text = re.sub(r"^(?:Left|Right|Top|Bottom|Middle)\s*(?:\([^)]*\))?\s*:\s*", "", caption.strip())
    ends = [k for k, ch in _clauses(text) if ch in ".;:"]
    first = (text[:ends[0]] if ends else text).strip()
    first = re.sub(r",?\s*(?:interactive|hover[^,]*)$", "", first)  # a slide's figure is a still image
    first = first[:1].upper() + first[1:]
    if len(first) <= TITLE_CHARS:
        return first
    cuts = [k for k, ch in _clauses(first) if ch in ",—–" and 20 <= k <= TITLE_CHARS]
    return first[:cuts[-1]].rstrip(" ,—–") if cuts else first


def _chapter_context(nb, session: Session, labels: Labels | None):
    stem = session.notebook
    if labels is None:
        labels = chapter_labels([(stem, nb)])
    chapter = labels.chapters.get(stem) or Chapter(int(stem[:2]) if stem[:2].isdigit() else 0, stem, stem)
    return Context(chapter, labels, myst.glued_outputs(nb), "full", links="book")


def _md(markdown: str, ctx) -> str:
    """A piece of the chapter's MyST as plain Markdown (the learners' conversion)."""
    return markdown_to_commonmark(markdown, ctx)


def _directives(nb):
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for name, argument, options, body, _token in myst.walk_blocks(cell.source):
                yield name, argument, options, body


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "remove-cell" not in cell.get("metadata", {}).get("tags", []):
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return "Untitled chapter"


def _theory(nb, ctx) -> list[tuple[str, str]]:
    """(title HTML, body HTML) of the chapter's first :data:`MAX_THEORY` theorems, propositions and corollaries."""
    found = []
    for name, argument, options, body in _directives(nb):
        kind = name.split(":")[-1]
        if not name.startswith("prf:") or kind not in THEORY_KINDS:
            continue
        number = ctx.labels.text.get(options.get("label", ""), kind.capitalize())
        heading = f"{number}: {_md(argument, ctx)}" if argument else number
        found.append((markdown_html(heading, inline=True), markdown_html(_md(body, ctx))))
    return found[:MAX_THEORY]


def _figures(nb, ctx, session: Session | None = None) -> list[tuple[bytes, str, str, str, str]]:
    """(PNG bytes, number, title HTML, caption HTML, alt text) of the chapter's numbered figures, in order."""
    found = []
    for cell in nb.cells:
        figure = myst.cell_figure(cell)
        name = str(figure.get("name", ""))
        if cell.cell_type != "code" or not name.startswith("fig-"):
            continue
        for out in cell.get("outputs", []):
            data = out.get("data", {}).get("image/png")
            if not data:
                continue
            try:
                png = base64.b64decode("".join(data), validate=True)
            except (binascii.Error, ValueError):
                png = b""
            if not png_width(png):
                where = f"session {session.number}: " if session else ""
                raise DeckError(f"{where}figure {name} of {ctx.chapter.stem}: its image/png output is not a PNG "
                                "image; execute the chapter again.")
            caption = _md(str(figure.get("caption", "")), ctx)
            alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt") or re.sub(
                r"[*_`$\\]", "", caption.split(". ")[0])
            found.append((png, ctx.labels.text.get(name, "Fig."), markdown_html(slide_title(caption), inline=True),
                          markdown_html(slide_caption(caption), inline=True), alt))
            break
    return found


def _exercises(nb, ctx) -> list[tuple[str, str]]:
    return [(ctx.labels.text.get(options.get("label", ""), "Exercise"), markdown_html(_md(body, ctx)))
            for name, _argument, options, body in _directives(nb) if name == "exercise"]


def _key_results(nb, ctx) -> str:
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for token in myst.md_parser().parse(cell.source):
            found = myst.directive(token)
            if found and found[0] == "admonition" and "qkg-front-door" in token.content.split("\n", 1)[0]:
                _, body = myst.options(token.content)
                return markdown_html(_md(body, ctx))
    return ""


def _section(nb, heading: str, ctx) -> str:
    """The Markdown of the chapter's section headed ``heading`` (up to the next heading)."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        m = re.search(rf"^(#+) {re.escape(heading)}\s*$\n(.*?)(?=^#+ |\Z)", cell.source, re.M | re.S)
        if m:
            return m.group(2)
    raise DeckError(f"{ctx.chapter.stem}: no section headed {heading!r} for the predictions slide.")


def _prediction_slides(nb, heading: str, ctx) -> list[tuple[str, str]]:
    """(title, HTML) of each predictions slide: one per table of the section headed ``heading``, titled by the
    italic line above it ("*Empirical hypotheses:*"), so that a room reads the hypotheses, not the chapter's prose
    about them; a section without a table is shown whole."""
    blocks = re.split(r"\n\s*\n", _section(nb, heading, ctx).strip())
    slides = []
    for k, block in enumerate(blocks):
        if block.lstrip().startswith("|"):
            label = re.fullmatch(r"\*([^*]+?):?\*:?", blocks[k - 1].strip()) if k else None
            title = label.group(1).strip() if label else heading
            slides.append((f"{title[:1].upper()}{title[1:]}", markdown_html(_md(block, ctx))))
    return slides or [(heading, markdown_html(_md("\n\n".join(blocks), ctx)))]


def _table(nb, name: str, ctx) -> tuple[str, str]:
    """(number and caption HTML, table HTML) of the chapter's numbered table ``name`` from its executed output."""
    for cell in nb.cells:
        figure = myst.cell_figure(cell)
        if cell.cell_type == "code" and figure.get("name") == name:
            for out in cell.get("outputs", []):
                table = out.get("data", {}).get("text/html")
                if table:
                    caption = slide_caption(_md(str(figure.get("caption", "")), ctx))
                    return (markdown_html(f"**{ctx.labels.text.get(name, 'Table')}.** {caption}", inline=True),
                            "".join(table) if isinstance(table, list) else str(table))
    raise DeckError(f"{ctx.chapter.stem}: no executed output of the table {name} for the results slide.")


_STYLE = """
html { scroll-snap-type: y mandatory; }
body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; }
section.slide { box-sizing: border-box; min-height: 100vh; padding: 4vh 6vw; scroll-snap-align: start;
                border-bottom: 1px solid #ddd; display: flex; flex-direction: column; justify-content: center; }
section.slide h1 { font-size: clamp(1.6rem, 4vw, 2.8rem); margin: 0 0 0.4em 0; }
section.slide h2 { font-size: clamp(1.3rem, 3.2vw, 2.4rem); margin: 0 0 0.6em 0; }
/* body text at least 28 px on a 1280-px projector */
section.slide li, section.slide p { font-size: clamp(1rem, 2.3vw, 1.85rem); line-height: 1.4; overflow-wrap: anywhere; }
section.slide ul, section.slide ol { padding-left: 1.4em; margin: 0.3em 0; }
section.slide li { margin: 0.35em 0; }
section.slide li::marker { color: #444; }
section.slide blockquote { margin: 0.4em 0; padding-left: 0.8em; border-left: 3px solid #ccc; }
.qkg-table { overflow-x: auto; max-width: 100%; }
.qkg-table table { border-collapse: collapse; font-size: clamp(0.7rem, 1.4vw, 1rem); }
.qkg-table th, .qkg-table td { padding: 0.2em 0.5em; border-bottom: 1px solid #ddd; text-align: left; }
section.slide table { border-collapse: collapse; }
/* a table written in the chapter's Markdown scrolls sideways in its own box on a phone */
section.slide > table { display: block; overflow-x: auto; max-width: 100%; }
section.slide th, section.slide td { padding: 0.2em 0.5em; border-bottom: 1px solid #ddd; text-align: left;
                                     font-size: clamp(0.75rem, 1.5vw, 1.05rem); }
section.slide figure { margin: 0; }
section.slide img { max-width: 100%; max-height: 72vh; width: auto; height: auto; display: block; margin: 0 auto; }
/* a figure slide: a short title, the figure at about 90% of the slide's height, the caption below */
section.slide.qkg-figure-slide { padding: 1.5vh 3vw; }
section.slide.qkg-figure-slide h2 { font-size: clamp(1.1rem, 2.2vw, 1.7rem); margin: 0 0 0.25em 0; }
section.slide.qkg-figure-slide img { max-height: 86vh; }
section.slide.qkg-figure-slide figcaption { margin-top: 0.3em; }
@media (max-width: 600px) {
  /* on a phone a figure keeps readable text and scrolls sideways inside its own box (the slide stays as wide as
     the screen); a tap opens it at full size */
  section.slide { padding: 3vh 4vw; }
  section.slide figure { overflow-x: auto; max-width: 100%; }
  section.slide img { max-width: none; max-height: none; width: calc(var(--qkg-natural, 640px) * 0.7); }
  section.slide.qkg-figure-slide { padding: 3vh 4vw; }
  section.slide.qkg-figure-slide img { max-height: none; }
  section.slide figure::before { content: "Scroll sideways to see the whole figure →"; display: block;
                                 font-size: 0.8rem; color: #555; position: sticky; left: 0; }
  section.slide figcaption { position: sticky; left: 0; max-width: 92vw; }
}
section.slide figcaption { font-size: clamp(0.85rem, 1.6vw, 1.3rem); color: #555; margin-top: 0.6em; }
.qkg-deck-note { color: #555; }
section.slide > * { min-width: 0; max-width: 100%; }
/* no overflow on list items: it would clip their markers */
mjx-container { max-width: 100%; overflow-x: auto; overflow-y: hidden; }
mjx-container[display="true"] { display: block; }
/* a long inline formula scrolls inside its own box instead of pushing the slide wider */
section.slide mjx-container:not([display="true"]) { display: inline-block; vertical-align: middle; }
section.slide .math.block { max-width: 100%; overflow-x: auto; }
"""

_SCRIPT = """
document.addEventListener('keydown', function (e) {
  var slides = Array.prototype.slice.call(document.querySelectorAll('section.slide'));
  var y = window.scrollY + 5, i = 0;
  slides.forEach(function (s, k) { if (s.offsetTop <= y) { i = k; } });
  var next = {ArrowDown: 1, ArrowRight: 1, PageDown: 1, ' ': 1, ArrowUp: -1, ArrowLeft: -1, PageUp: -1}[e.key];
  if (next) { e.preventDefault(); var t = slides[Math.max(0, Math.min(slides.length - 1, i + next))];
              window.scrollTo({top: t.offsetTop, behavior: 'smooth'}); }
});
"""


def deck_html(nb, session: Session, figure_files: list[str] | None = None,
              mathjax: str = "../_static/mathjax/tex-chtml.js", chapter_page: str | None = None,
              citations: dict[str, str] | None = None, labels: Labels | None = None) -> str:
    """The deck of ``session`` from its executed notebook ``nb`` (an ``nbformat`` node). ``figure_files``: the
    paths (relative to the deck) at which the chapter's figures are written, in order; None embeds none.
    ``labels``: the book's numbering (:func:`tools.numbering.chapter_labels`; by default this chapter's alone);
    ``citations``: ``key -> "Author et al. Year"`` (:func:`citation_names`). Every path is escaped into its
    attribute."""
    ctx = _chapter_context(nb, session, labels)
    for key, name in (citations or {}).items():
        m = re.match(r"^(.*?)\s+(\d{4})$", name)
        ctx.labels.citations.setdefault(key, (m.group(1), m.group(2)) if m else (name, ""))
    title = markdown_html(_md(_title(nb), ctx), inline=True)
    page = html.escape(chapter_page or f"../notebooks/{session.notebook}.html", quote=True)
    mathjax = html.escape(mathjax, quote=True)
    slides = [f'<section class="slide"><p class="qkg-deck-note">Course module, session {session.number}</p>'
              f"<h1>{html.escape(session.title)}</h1><p>Chapter {ctx.chapter.number}: {title}</p>"
              f'<p class="qkg-deck-note">The chapter, with its code: <a href="{page}">{title}</a></p></section>']
    if session.opening_poll:
        slides.append(f'<section class="slide qkg-poll"><h2>Poll</h2>{markdown_html(session.opening_poll)}</section>')
    results = _key_results(nb, ctx)
    results_slide = f'<section class="slide"><h2>Key results</h2>{results}</section>' if results else ""
    if session.predict:
        for title, body in _prediction_slides(nb, session.predict, ctx):
            slides.append(f'<section class="slide"><h2>Predict first: {html.escape(title)}</h2>{body}</section>')
        slides.append('<section class="slide"><h2>Poll</h2><p>Before any number: which of these hypotheses will '
                      "hold? Each group picks one it will defend, writes down the result it expects, and says what "
                      "result would change its mind.</p></section>")
    elif results_slide:
        slides.append(results_slide)
    for heading, body in _theory(nb, ctx):
        slides.append(f'<section class="slide"><h2>{heading}</h2>{body}</section>')
    figures = _figures(nb, ctx, session)[:MAX_FIGURES]
    for k, (png, number, heading, caption, alt) in enumerate(figures):
        if figure_files is None or k >= len(figure_files):
            break
        natural = f' style="--qkg-natural: {png_width(png) // 2}px"' if png_width(png) else ""
        src = html.escape(figure_files[k], quote=True)
        slides.append(f'<section class="slide qkg-figure-slide"><h2>{html.escape(number)}: {heading}</h2><figure>'
                      f'<a href="{src}"><img src="{src}" alt="{html.escape(alt, quote=True)}"{natural}></a>'
                      f"<figcaption>{caption}</figcaption></figure></section>")
    if session.results_table:
        caption, table = _table(nb, session.results_table, ctx)
        slides.append(f'<section class="slide"><h2>The results</h2><p class="qkg-deck-note">{caption}</p>'
                      f'<div class="qkg-table">{table}</div></section>')
    if session.predict and results_slide:
        slides.append(results_slide)
    for number, exercise in _exercises(nb, ctx):
        slides.append(f'<section class="slide"><h2>{html.escape(number)}</h2>{exercise}'
                      '<p class="qkg-deck-note">Work it in the chapter\'s notebook; the checker says what is '
                      "wrong.</p></section>")
    if session.opening_poll:
        slides.append(f'<section class="slide qkg-poll"><h2>Back to the poll</h2>{markdown_html(session.opening_poll)}'
                      "<p>Which answers survived?</p></section>")
    slides.append('<section class="slide"><h2>Answer keys</h2><p>Solutions, timings and rubrics are on the '
                  '<a href="../book/instructor.html">teachers\' page</a>.</p></section>')
    head = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Session {session.number}: {html.escape(session.title)}</title><style>{_STYLE}</style>"
            f'<script defer src="{mathjax}"></script></head><body>')
    return head + "".join(slides) + f"<script>{_SCRIPT}</script></body></html>\n"


def write_decks(executed: Path, out_dir: Path, sessions=SESSIONS) -> list[Path]:
    """Write one deck per session (``out_dir/session-N.html``, its figures in ``out_dir/session-N/``) from the
    executed notebooks in ``executed``; return the decks' paths. A session whose notebook was not executed (or is
    not a notebook), or a figure whose output is not an image, is a :class:`DeckError` that says which, in one
    line."""
    executed, out_dir = Path(executed), Path(out_dir)
    bib = Path(__file__).resolve().parents[1] / "book" / "references.bib"
    chapters = sorted(executed.glob("[0-9][0-9]_*.ipynb"))
    try:
        labels = chapter_labels(chapters, bib if bib.is_file() else None)
    except myst.NotebookError as e:
        raise DeckError(str(e)) from None
    citations = {k: f"{who} {year}".strip() for k, (who, year) in labels.citations.items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for session in sessions:
        source = executed / f"{session.notebook}.ipynb"
        if not source.is_file():
            raise DeckError(f"session {session.number}: no executed chapter at {source}; execute the chapters "
                            "first (python -m tools.notebooks execute).")
        try:
            nb = myst.read_notebook(source)
        except myst.NotebookError as e:
            raise DeckError(f"session {session.number}: {e}") from None
        ctx = _chapter_context(nb, session, labels)
        folder = out_dir / f"session-{session.number}"
        folder.mkdir(exist_ok=True)
        files = []
        for k, figure in enumerate(_figures(nb, ctx, session)[:MAX_FIGURES], 1):
            (folder / f"figure-{k}.png").write_bytes(figure[0])
            files.append(f"{folder.name}/figure-{k}.png")
        deck = out_dir / session.file_name
        try:
            text = deck_html(nb, session, files, citations=citations, labels=labels)
        except (KeyError, ValueError) as e:
            raise DeckError(f"session {session.number}: {str(e).strip(chr(34))}") from None
        deck.write_text(text, encoding="utf-8")
        written.append(deck)
    return written
