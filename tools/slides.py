"""One slide deck per session of the course module, made from the executed chapters when the book is built.

Each deck is one self-contained HTML page, ``slides/session-N.html`` next to the book's pages: a title slide, the
chapter's key results (its "Key results" box, with every number the chapter computed filled in), its theorems and
propositions, its numbered figures (each titled by its caption's first clause) with their captions, and its
exercises. Cross-references read as words ("Corollary 'Energies of the parts'", "Figure 2", "the notation page",
"Saponati et al. 2025"), never as raw labels, and a caption's sentences about what the page has around the figure
("the table above", "hover") are left out. The slides stack vertically and snap to the screen; the arrow keys,
Page Up/Down and the space bar step through them, and the deck works without JavaScript (it then scrolls). Math is
typeset by the book's own copy of MathJax, so nothing is loaded from the network.

The build calls :func:`write_decks` after rendering the book; the teachers' page links the decks.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SESSIONS", "Session", "citation_names", "deck_html", "glue_values", "slide_caption", "slide_title",
           "write_decks"]


@dataclass(frozen=True)
class Session:
    """One teaching session of the course module and the chapter it is built on."""

    number: int
    title: str
    notebook: str  # file stem in notebooks/

    @property
    def file_name(self) -> str:
        return f"session-{self.number}.html"


#: The sessions of the course module (``book/course_module.md``), in order.
SESSIONS = (
    Session(1, "The decomposition", "01_toeplitz_decomposition"),
    Session(2, "The scores", "02_scores"),
    Session(3, "Beyond the paper", "06_beyond_the_paper"),
    Session(4, "What a head's geometry says about its job", "07_head_behaviour"),
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
TITLE_CHARS = 70

_GLUE_ROLE = re.compile(r"\{glue:text\}`([^`:]+)(?::([^`]*))?`")
_ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")
_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.S | re.M)


def glue_values(nb) -> dict[str, str]:
    """Every value a notebook glued (``myst_nb.glue``), as the text its ``text/plain`` form shows."""
    values = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if not name:
                continue
            data = out.get("data", {})
            text = next((v for k, v in data.items() if k.endswith("text/plain")), None)
            if text is not None:
                values[name] = "".join(text) if isinstance(text, list) else str(text)
    return values


def _format(value: str, spec: str | None) -> str:
    text = value
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1].replace("\\'", "'")
    if spec:
        try:
            return format(float(text), spec)
        except ValueError:
            return text
    return text


def _reference(role: str, target: str, labels: dict[str, str], citations: dict[str, str]) -> str:
    """The words a cross-reference reads as on a slide (no raw label, no relative path)."""
    explicit = re.match(r"^(.*?)\s*<([^>]*)>$", target)
    if explicit and explicit.group(1).strip():
        return explicit.group(1).strip()
    target = explicit.group(2) if explicit else target
    if role.startswith("cite"):
        names = [citations.get(key.strip(), key.strip()) for key in target.split(",")]
        return "; ".join(names) if role == "cite:t" else f"({'; '.join(names)})"
    if role == "doc":
        stem = target.rstrip("/").rsplit("/", 1)[-1]
        chapter = re.match(r"^0?(\d+)_", stem)
        return f"chapter {chapter.group(1)}" if chapter else f"the {stem.replace('_', ' ')} page"
    return labels.get(target, "the chapter's text")


def _inline(text: str, glued: dict[str, str], labels: dict[str, str] | None = None,
            citations: dict[str, str] | None = None) -> str:
    """A line of the book's MyST as HTML: glued values filled in, cross-references as words, math for MathJax."""
    text = _GLUE_ROLE.sub(lambda m: _format(glued.get(m.group(1), "…"), m.group(2)), text)
    text = _ROLE.sub(lambda m: _reference(m.group(1), m.group(2), labels or {}, citations or {}), text)
    pieces = re.split(r"(\$\$.+?\$\$|\$[^$]+\$|`[^`]+`)", text)
    out = []
    for piece in pieces:
        if piece.startswith("$$"):
            out.append(r"\[" + html.escape(piece[2:-2]) + r"\]")
        elif piece.startswith("$") and len(piece) > 1:
            out.append(r"\(" + html.escape(piece[1:-1]) + r"\)")
        elif piece.startswith("`"):
            out.append(f"<code>{html.escape(piece[1:-1])}</code>")
        else:
            escaped = html.escape(piece)
            escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
            out.append(re.sub(r"(?<!\w)\*(?!\s)(.+?)(?<!\s)\*(?!\w)", r"<em>\1</em>", escaped))
    return "".join(out)


def _bullets(body: str, glued: dict[str, str], labels=None, citations=None) -> list[str]:
    items, current = [], []
    for line in body.splitlines():
        if line.startswith(":"):
            continue
        if re.match(r"^\s*[-*] ", line):
            if current:
                items.append(" ".join(current))
            current = [re.sub(r"^\s*[-*] ", "", line)]
        elif line.strip() and current:
            current.append(line.strip())
    if current:
        items.append(" ".join(current))
    return [_inline(item, glued, labels, citations) for item in items]


def _paragraphs(body: str, glued: dict[str, str], labels=None, citations=None) -> list[str]:
    lines = [line for line in body.splitlines() if not line.startswith(":")]
    return [_inline(" ".join(p.split()), glued, labels, citations) for p in "\n".join(lines).split("\n\n")
            if p.strip()]


def citation_names(bib_text: str) -> dict[str, str]:
    """``key -> "Author et al. Year"`` (or "Author Year", "A and B Year") for every entry of a BibTeX file."""
    names = {}
    for m in re.finditer(r"@\w+\{([^,\s]+),(.*?)\n\}", bib_text, re.S):
        author = re.search(r"\bauthor\s*=\s*\{(.*?)\}\s*,?\s*\n", m.group(2), re.S)
        year = re.search(r"\byear\s*=\s*\{?(\d{4})", m.group(2))
        if not author:
            continue
        people = [a.strip() for a in re.split(r"\s+and\s+", " ".join(author.group(1).split()))]
        last = [re.sub(r"[{}]", "", a.split(",")[0] if "," in a else a.split()[-1]) for a in people]
        who = last[0] if len(last) == 1 else f"{last[0]} and {last[1]}" if len(last) == 2 else f"{last[0]} et al."
        names[m.group(1)] = f"{who} {year.group(1)}" if year else who
    return names


def _labels(nb) -> dict[str, str]:
    """What each label of the chapter reads as on its deck: "Figure k" for the deck's figures, "Exercise k",
    "Theorem 'Title'"; other figures and tables are "a figure (table) of the chapter"."""
    labels, figures, exercises = {}, 0, 0
    for cell in nb.cells:
        name = str(cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name", ""))
        if cell.cell_type == "code" and name.startswith("fig-"):
            figures += 1
            labels[name] = f"Figure {figures}" if figures <= MAX_FIGURES else "a figure of the chapter"
        elif cell.cell_type == "code" and name.startswith("tbl-"):
            labels[name] = "a table of the chapter"
        if cell.cell_type != "markdown":
            continue
        for m in _FENCE.finditer(cell.source):
            label = re.search(r"^:label:\s*(\S+)", m.group("body"), re.M)
            if not label:
                continue
            kind = m.group("name").split(":")[-1]
            if kind == "exercise":
                exercises += 1
                labels[label.group(1)] = f"Exercise {exercises}"
            else:
                title = m.group(0).split("\n", 1)[0].split("}", 1)[1].strip()
                labels[label.group(1)] = f"{kind.capitalize()} ‘{title}’" if title else kind.capitalize()
    for cell in nb.cells:  # equations: "$$ ... $$ (label)"
        if cell.cell_type == "markdown":
            for label in re.findall(r"\$\$\s*\((eq-[\w-]+)\)", cell.source):
                labels.setdefault(label, "the equation")
    return labels


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "remove-cell" not in cell.get("metadata", {}).get("tags", []):
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return "Untitled chapter"


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


def slide_title(caption: str) -> str:
    """A figure slide's title: its caption's first clause, cut at a word after ``TITLE_CHARS`` characters.

    >>> slide_title("Symmetry against directionality for every layer: encoders right, decoders left.")
    'Symmetry against directionality for every layer'
    """
    first = re.split(r"(?<=[.;:])\s|:\s", caption.strip(), maxsplit=1)[0].rstrip(".;:")
    if len(first) <= TITLE_CHARS:
        return first
    return first[:TITLE_CHARS].rsplit(" ", 1)[0].rstrip(",;") + " …"


def _blocks(body: str, glued: dict[str, str], labels=None, citations=None) -> str:
    """A statement's body as HTML: paragraphs, and numbered items ("1. ...") as an ordered list."""
    lines = [line for line in body.splitlines() if not line.startswith(":")]
    out = []
    for block in "\n".join(lines).split("\n\n"):
        if not block.strip():
            continue
        items = re.split(r"(?m)^\s*\d+\.\s+", block)
        if len(items) > 2 and not items[0].strip():
            out.append("<ol>" + "".join(f"<li>{_inline(' '.join(i.split()), glued, labels, citations)}</li>"
                                        for i in items[1:]) + "</ol>")
        else:
            out.append(f"<p>{_inline(' '.join(block.split()), glued, labels, citations)}</p>")
    return "".join(out)


def _theory(nb, glued: dict[str, str], labels, citations) -> list[tuple[str, str]]:
    """(title, body HTML) of the chapter's first :data:`MAX_THEORY` theorems, propositions and corollaries."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for m in _FENCE.finditer(cell.source):
            kind = m.group("name").split(":")[-1]
            if not m.group("name").startswith("prf:") or kind not in THEORY_KINDS:
                continue
            title = m.group(0).split("\n", 1)[0].split("}", 1)[1].strip()
            heading = f"{kind.capitalize()}: {title}" if title else kind.capitalize()
            body = _blocks(m.group("body"), glued, labels, citations)
            found.append((_inline(heading, glued, labels, citations), body))
    return found[:MAX_THEORY]


def _figures(nb, glued: dict[str, str], labels=None, citations=None) -> list[tuple[bytes, str, str]]:
    """(PNG bytes, caption HTML, alt text) of the chapter's numbered figures, in order."""
    found = []
    for cell in nb.cells:
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
        if cell.cell_type != "code" or not str(figure.get("name", "")).startswith("fig-"):
            continue
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png:
                caption = str(figure.get("caption", ""))
                alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt") or re.sub(
                    r"[{}`$\\]", "", caption.split(". ")[0])
                found.append((base64.b64decode("".join(png)), _inline(slide_caption(caption), glued, labels, citations),
                              alt))
                break
    return found


def _exercises(nb, glued: dict[str, str], labels=None, citations=None) -> list[str]:
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for m in _FENCE.finditer(cell.source):
            if m.group("name") == "exercise":
                found.append("".join(f"<p>{p}</p>" for p in _paragraphs(m.group("body"), glued, labels, citations)))
    return found


def _key_results(nb, glued: dict[str, str], labels=None, citations=None) -> list[str]:
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for m in _FENCE.finditer(cell.source):
            if m.group("name") == "admonition" and "qkg-front-door" in m.group(0):
                return _bullets(m.group("body"), glued, labels, citations)
    return []


_STYLE = """
html { scroll-snap-type: y mandatory; }
body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; }
section.slide { box-sizing: border-box; min-height: 100vh; padding: 4vh 6vw; scroll-snap-align: start;
                border-bottom: 1px solid #ddd; display: flex; flex-direction: column; justify-content: center; }
section.slide h1 { font-size: clamp(1.6rem, 4vw, 2.8rem); margin: 0 0 0.4em 0; }
section.slide h2 { font-size: clamp(1.2rem, 3vw, 2rem); margin: 0 0 0.6em 0; }
section.slide li, section.slide p { font-size: clamp(0.95rem, 2vw, 1.3rem); line-height: 1.45; overflow-wrap: anywhere; }
section.slide figure { margin: 0; }
section.slide img { max-width: 100%; max-height: 72vh; width: auto; height: auto; display: block; margin: 0 auto; }
@media (max-width: 600px) {
  /* on a phone a figure keeps readable text (a share of its natural size) and scrolls sideways */
  section.slide figure { overflow-x: auto; }
  section.slide img { max-width: none; max-height: none; width: calc(var(--qkg-natural) * 0.55); }
  section.slide figure::before { content: "Scroll sideways to see the whole figure →"; display: block;
                                 font-size: 0.8rem; color: #555; position: sticky; left: 0; }
  section.slide figcaption { position: sticky; left: 0; max-width: calc(100vw - 12vw); }
}
section.slide figcaption { font-size: clamp(0.8rem, 1.5vw, 1rem); color: #555; margin-top: 0.6em; }
.qkg-deck-note { color: #555; }
section.slide > * { min-width: 0; max-width: 100%; }
section.slide p, section.slide li { overflow-x: auto; overflow-y: hidden; }
mjx-container { max-width: 100%; overflow-x: auto; overflow-y: hidden; }
mjx-container[display="true"] { display: block; }
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
              citations: dict[str, str] | None = None) -> str:
    """The deck of ``session`` from its executed notebook ``nb`` (an ``nbformat`` node). ``figure_files``: the
    paths (relative to the deck) at which the chapter's figures are written, in order; None embeds none.
    ``citations``: ``key -> "Author et al. Year"`` (:func:`citation_names`). Every path is escaped into its
    attribute."""
    glued = glue_values(nb)
    labels, citations = _labels(nb), dict(citations or {})
    title = _inline(_title(nb), glued)
    page = html.escape(chapter_page or f"../notebooks/{session.notebook}.html", quote=True)
    mathjax = html.escape(mathjax, quote=True)
    slides = [f'<section class="slide"><p class="qkg-deck-note">Course module, session {session.number}</p>'
              f"<h1>{html.escape(session.title)}</h1><p>{title}</p>"
              f'<p class="qkg-deck-note">The chapter, with its code: <a href="{page}">{title}</a></p></section>']
    results = _key_results(nb, glued, labels, citations)
    if results:
        slides.append('<section class="slide"><h2>Key results</h2><ul>'
                      + "".join(f"<li>{r}</li>" for r in results) + "</ul></section>")
    for heading, body in _theory(nb, glued, labels, citations):
        slides.append(f'<section class="slide"><h2>{heading}</h2>{body}</section>')
    figures = _figures(nb, glued, labels, citations)[:MAX_FIGURES]
    raw_captions = [str(c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption", ""))
                    for c in nb.cells if c.cell_type == "code"
                    and str(c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name", "")).startswith("fig-")
                    and any(o.get("data", {}).get("image/png") for o in c.get("outputs", []))]
    for k, (png, caption, alt) in enumerate(figures):
        if figure_files is None or k >= len(figure_files):
            break
        heading = _inline(slide_title(raw_captions[k]), glued, labels, citations) if k < len(raw_captions) else ""
        natural = f' style="--qkg-natural: {png_width(png) // 2}px"' if png_width(png) else ""
        slides.append(f'<section class="slide"><h2>Figure {k + 1}: {heading}</h2><figure>'
                      f'<img src="{html.escape(figure_files[k], quote=True)}" alt="{html.escape(alt, quote=True)}"'
                      f"{natural}><figcaption>{caption}</figcaption></figure></section>")
    for k, exercise in enumerate(_exercises(nb, glued, labels, citations), 1):
        slides.append(f'<section class="slide"><h2>Exercise {k}</h2>{exercise}'
                      '<p class="qkg-deck-note">Work it in the chapter\'s notebook; the checker says what is '
                      "wrong.</p></section>")
    slides.append('<section class="slide"><h2>Answer keys</h2><p>Solutions, timings and rubrics are on the '
                  '<a href="../book/instructor.html">teachers\' page</a>.</p></section>')
    head = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Session {session.number}: {html.escape(session.title)}</title><style>{_STYLE}</style>"
            f'<script defer src="{mathjax}"></script></head><body>')
    return head + "".join(slides) + f"<script>{_SCRIPT}</script></body></html>\n"


def write_decks(executed: Path, out_dir: Path, sessions=SESSIONS) -> list[Path]:
    """Write one deck per session (``out_dir/session-N.html``, its figures in ``out_dir/session-N/``) from the
    executed notebooks in ``executed``; return the decks' paths. A session whose notebook was not executed is an
    error."""
    import nbformat

    executed, out_dir = Path(executed), Path(out_dir)
    bib = Path(__file__).resolve().parents[1] / "book" / "references.bib"
    citations = citation_names(bib.read_text(encoding="utf-8")) if bib.is_file() else {}
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for session in sessions:
        source = executed / f"{session.notebook}.ipynb"
        if not source.is_file():
            raise FileNotFoundError(f"session {session.number}: no executed notebook at {source}; execute the "
                                    "chapters first.")
        nb = nbformat.read(str(source), as_version=4)
        folder = out_dir / f"session-{session.number}"
        folder.mkdir(exist_ok=True)
        files = []
        for k, (png, _, _) in enumerate(_figures(nb, glue_values(nb))[:MAX_FIGURES], 1):
            (folder / f"figure-{k}.png").write_bytes(png)
            files.append(f"{folder.name}/figure-{k}.png")
        deck = out_dir / session.file_name
        deck.write_text(deck_html(nb, session, files, citations=citations), encoding="utf-8")
        written.append(deck)
    return written
