"""One slide deck per session of the course module, made from the executed chapters when the book is built.

Each deck is one self-contained HTML page, ``slides/session-N.html`` next to the book's pages: a title slide, the
chapter's key results (its "Key results" box, with every number the chapter computed filled in), its numbered
figures with their captions, and its exercises. The slides stack vertically and snap to the screen; the arrow keys,
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

__all__ = ["SESSIONS", "Session", "deck_html", "glue_values", "write_decks"]


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

_GLUE_ROLE = re.compile(r"\{glue:text\}`([^`:]+)(?::([^`]*))?`")
_ROLE = re.compile(r"\{[\w:-]+\}`([^`]*)`")
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


def _inline(text: str, glued: dict[str, str]) -> str:
    """A line of the book's MyST as HTML: glued values filled in, roles as their text, math for MathJax."""
    text = _GLUE_ROLE.sub(lambda m: _format(glued.get(m.group(1), "…"), m.group(2)), text)
    text = _ROLE.sub(lambda m: re.sub(r"\s*<[^>]*>$", "", m.group(1)), text)
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


def _bullets(body: str, glued: dict[str, str]) -> list[str]:
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
    return [_inline(item, glued) for item in items]


def _paragraphs(body: str, glued: dict[str, str]) -> list[str]:
    lines = [line for line in body.splitlines() if not line.startswith(":")]
    return [_inline(" ".join(p.split()), glued) for p in "\n".join(lines).split("\n\n") if p.strip()]


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "remove-cell" not in cell.get("metadata", {}).get("tags", []):
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return "Untitled chapter"


def _figures(nb, glued: dict[str, str]) -> list[tuple[bytes, str, str]]:
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
                found.append((base64.b64decode("".join(png)), _inline(caption, glued), alt))
                break
    return found


def _exercises(nb, glued: dict[str, str]) -> list[str]:
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for m in _FENCE.finditer(cell.source):
            if m.group("name") == "exercise":
                found.append("".join(f"<p>{p}</p>" for p in _paragraphs(m.group("body"), glued)))
    return found


def _key_results(nb, glued: dict[str, str]) -> list[str]:
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for m in _FENCE.finditer(cell.source):
            if m.group("name") == "admonition" and "qkg-front-door" in m.group(0):
                return _bullets(m.group("body"), glued)
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
section.slide img { max-width: 100%; max-height: 62vh; width: auto; height: auto; display: block; margin: 0 auto; }
section.slide figcaption { font-size: clamp(0.8rem, 1.5vw, 1rem); color: #555; margin-top: 0.6em; }
.qkg-deck-note { color: #555; }
mjx-container { max-width: 100%; overflow-x: auto; overflow-y: hidden; }
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
              mathjax: str = "../_static/mathjax/tex-chtml.js", chapter_page: str | None = None) -> str:
    """The deck of ``session`` from its executed notebook ``nb`` (an ``nbformat`` node). ``figure_files``: the
    paths (relative to the deck) at which the chapter's figures are written, in order; None embeds none."""
    glued = glue_values(nb)
    title = _inline(_title(nb), glued)
    page = chapter_page or f"../notebooks/{session.notebook}.html"
    slides = [f'<section class="slide"><p class="qkg-deck-note">Course module, session {session.number}</p>'
              f"<h1>{html.escape(session.title)}</h1><p>{title}</p>"
              f'<p class="qkg-deck-note">The chapter, with its code: <a href="{page}">{title}</a></p></section>']
    results = _key_results(nb, glued)
    if results:
        slides.append('<section class="slide"><h2>Key results</h2><ul>'
                      + "".join(f"<li>{r}</li>" for r in results) + "</ul></section>")
    for k, (_, caption, alt) in enumerate(_figures(nb, glued)[:MAX_FIGURES]):
        if figure_files is None or k >= len(figure_files):
            break
        slides.append(f'<section class="slide"><h2>Figure {k + 1}</h2><figure><img src="{figure_files[k]}" '
                      f'alt="{html.escape(alt, quote=True)}"><figcaption>{caption}</figcaption></figure></section>')
    for k, exercise in enumerate(_exercises(nb, glued), 1):
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
        deck.write_text(deck_html(nb, session, files), encoding="utf-8")
        written.append(deck)
    return written
