"""The notebooks a learner opens: the book's chapters in plain Markdown, with their numbers, for Colab and Jupyter.

The chapters are written in MyST (directives, roles, glued values), which Jupyter Book renders and Colab does not:
Colab renders notebook Markdown as CommonMark. This module builds, from each chapter and its executed copy (the
recorded build), the notebook that the "Open in Colab" badges, the course module and the students open::

    python -m tools.learner build [--executed DIR] [--out DIR]   # -> learner/NN_*.ipynb (committed; badges)
    python -m tools.learner check [NOTEBOOK ...]                 # the MyST a CommonMark renderer would show

What the build does to a chapter (:func:`learner_notebook`):

* directives become Markdown that any renderer shows: admonitions (the Key results box) and theorems, proofs and
  exercises as headed blockquotes with their numbers ("Theorem 1.2 (The parts are orthogonal)", "Exercise 3.2");
  each solution becomes a section of its own ("Solution to Exercise 1.1", collapsed in Colab) whose code blocks are
  code cells, so that running the notebook runs every solution;
* references are resolved to the numbers the book gives them ("Theorem 3.1", "Fig. 3.4", "Table 6.1", "(2.3)"),
  citations to "Author et al. (Year)", other chapters and pages to links;
* every glued value is visible: written into the text from the recorded build (with the book's number formatter,
  :func:`qkgeometry.stats.format_number`), and shown again, recomputed, as the output of the cell that computes it
  (the cell's ``glue`` is :func:`qkgeometry.tables.show_value`, which displays what it is given);
* figure and table captions become Markdown cells next to their cells; cells the book hides stay, folded.

The check (:func:`myst_leftovers`) renders each Markdown cell with ``markdown-it-py``'s CommonMark parser and
reports every MyST token left in what a reader would see (outside code): ``{glue``, ``{prf:``, ``{doc}``,
``{numref}``, ``{ref}``, ``{cite``, ``{eq}``, a ```` ```{directive} ```` fence, ``:label:`` or ``:class:`` lines, a
``(target)=`` line.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LEARNER_DIR", "Chapter", "Labels", "build_learner_notebooks", "chapter_labels", "learner_notebook",
           "main", "markdown_to_commonmark", "myst_leftovers", "notebook_leftovers", "page_labels"]

ROOT = Path(__file__).resolve().parents[1]
#: Where the learners' notebooks are written (committed: the Colab badges open them from the repository).
LEARNER_DIR = "learner"
#: The repository the badges and links point at (``_config.yml``'s ``repository``).
REPOSITORY = "qkgeometry/qkgeometry"
BRANCH = "main"
COLAB = f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}"
GITHUB = f"https://github.com/{REPOSITORY}/blob/{BRANCH}"

#: MyST that a CommonMark renderer shows as raw text (the check looks for these outside code).
MYST_PATTERNS = (
    # roles: {glue:text}, {prf:ref}, {doc}, {numref}, ... (a bare "{glue" or "{prf:" too)
    re.compile(r"\{(?:glue[\w:]*|prf:[\w-]*|doc|numref|ref|eq|download|cite(?::\w+)?|term|abbr|sub|sup)\}?"),
    # directive options and targets, each a line of its own
    re.compile(r"^:(?:label|class|name|format|nonumber|dropdown|width|align|figclass|alt):", re.M),
    re.compile(r"^\([\w.:-]+\)=\s*$", re.M),
)
#: Kinds of statement of sphinx-proof (each numbered on its own, "Theorem 1.2", "Proposition 1.1").
PROOF_KINDS = ("theorem", "proposition", "corollary", "lemma", "definition", "conjecture", "remark", "example",
               "property", "observation", "axiom", "criterion", "algorithm", "assumption", "notation")
#: The tag of every cell that belongs to a solution (the students' copy drops them).
SOLUTION_TAG = "solution"


# --------------------------------------------------------------------------------------------------- the check
def _markdown_it():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def myst_leftovers(markdown: str) -> list[str]:
    """Every piece of MyST that a CommonMark renderer (``markdown-it-py``) would show a reader of ``markdown``:
    directive fences (```` ```{exercise} ````), roles (``{glue:text}``), option lines (``:label:``) and targets
    (``(sec-x)=``) in text, never in code.

    >>> myst_leftovers("The share is {glue:text}`share:.0%`.\\n\\n```{exercise}\\n:label: ex-a\\n```\\n")
    ['{glue:text}', '```{exercise}', ':label:']
    >>> myst_leftovers("Plain **Markdown**, `{glue:text}` in code, and $x$.")
    []
    """
    found: list[str] = []

    def scan(text: str) -> None:
        for pattern in MYST_PATTERNS:
            found.extend(m.group(0).strip() for m in pattern.finditer(text))

    for token in _markdown_it().parse(markdown):
        if token.type == "fence":
            if token.info.strip().startswith("{"):  # a directive shows as a code block, its MyST included
                found.append("```" + token.info.strip().split()[0])
                scan(token.content)
        elif token.type == "code_block":
            # an indented block: MyST option lines left in a blockquote or a list can end up here
            if MYST_PATTERNS[1].search(token.content):
                scan(token.content)
        elif token.type == "html_block":
            scan(re.sub(r"<(code|pre)\b.*?</\1>", "", token.content, flags=re.S))
        for child in token.children or ():
            if child.type in ("text", "html_inline"):
                scan(child.content)
    return found


def notebook_leftovers(nb) -> list[tuple[int, str]]:
    """``(cell index, token)`` for every MyST token a learner would see in the Markdown cells of ``nb`` (a notebook
    node or a path), in the figure captions this module writes included."""
    import nbformat

    if isinstance(nb, (str, Path)):
        nb = nbformat.read(str(nb), as_version=4)
    return [(k, token) for k, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
            for token in myst_leftovers(cell.source)]


# ------------------------------------------------------------------------------------------------- numbering
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


_FIGURE_NAME = re.compile(r"^(fig|tbl)-")


def _cell_figure(cell) -> dict:
    return dict(cell.get("metadata", {}).get("mystnb", {}).get("figure", {}) or {})


def _md_parser():
    """The MyST block grammar (fences, ``(target)=``, labelled ``$$`` blocks) as markdown-it-py sees it."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.colon_fence import colon_fence_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.myst_blocks import myst_block_plugin
    from mdit_py_plugins.myst_role import myst_role_plugin

    return (MarkdownIt("commonmark").use(myst_block_plugin).use(myst_role_plugin).use(colon_fence_plugin)
            .use(dollarmath_plugin, double_inline=True).use(amsmath_plugin))


def _directive(token) -> tuple[str, str] | None:
    """``(name, argument)`` of a directive fence token (```` ```{name} argument ````), else None."""
    if token.type not in ("fence", "colon_fence"):
        return None
    m = re.match(r"^\{([\w:-]+)\}\s*(.*)$", token.info.strip())
    return (m.group(1), m.group(2).strip()) if m else None


def _options(body: str) -> tuple[dict[str, str], str]:
    """A directive body's ``:key: value`` lines (at its top) and the rest."""
    options, lines = {}, body.split("\n")
    while lines and re.match(r"^:[\w-]+:", lines[0]):
        key, _, value = lines.pop(0)[1:].partition(":")
        options[key.strip()] = value.strip()
    return options, "\n".join(lines).strip("\n")


def _walk_blocks(markdown: str):
    """Every directive ``(name, argument, options, body)`` in ``markdown``, nested ones included, in order."""
    for token in _md_parser().parse(markdown):
        found = _directive(token)
        if found:
            options, body = _options(token.content)
            yield (*found, options, body, token)
            yield from _walk_blocks(body)
        elif token.type == "myst_target":
            yield ("target", token.content, {}, "", token)
        elif token.type == "math_block_label":
            yield ("equation", token.info, {}, token.content, token)


def chapter_labels(notebooks: Sequence, bib: Path | None = None, pages: Path | None = ROOT / "book") -> Labels:
    """Number every figure, table, statement, exercise and labelled equation of the chapters as the book does
    (per chapter and per kind: "Fig. 3.4", "Table 6.1", "Theorem 1.2", "Exercise 3.2", "(2.1)"), and read the
    chapters' titles, the bibliography and the labelled sections of the book's pages (``pages``: their folder).
    ``notebooks``: paths, or ``(file stem, notebook node)`` pairs."""
    import nbformat

    labels = Labels()
    items = [(Path(x).stem, None) if isinstance(x, (str, Path)) else x for x in notebooks]
    paths = {Path(x).stem: Path(x) for x in notebooks if isinstance(x, (str, Path))}
    for stem, nb in sorted(items, key=lambda item: item[0]):
        m = re.match(r"^(\d+)_", stem)
        if not m:
            continue
        n = int(m.group(1))
        if nb is None:
            nb = nbformat.read(str(paths[stem]), as_version=4)
        counts: Counter = Counter()
        pending_target = None
        title = None
        for cell in nb.cells:
            figure = _cell_figure(cell)
            name = str(figure.get("name", ""))
            if cell.cell_type == "code" and _FIGURE_NAME.match(name):
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
            for name_, argument, options, _body, _tok in _walk_blocks(cell.source):
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
                elif name_.startswith("prf:") and kind in PROOF_KINDS:
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
        labels.citations = _citations(Path(bib).read_text(encoding="utf-8"))
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


def _citations(bib_text: str) -> dict[str, tuple[str, str]]:
    """``key -> (authors as cited, year)`` for every entry of a BibTeX file ("Saponati et al.", "2025")."""
    from .slides import citation_names

    out = {}
    for key, name in citation_names(bib_text).items():
        m = re.match(r"^(.*?)\s+(\d{4})$", name)
        out[key] = (m.group(1), m.group(2)) if m else (name, "")
    return out


# ------------------------------------------------------------------------------------------------- conversion
@dataclass
class _Context:
    chapter: Chapter
    labels: Labels
    values: dict[str, dict]  # glue name -> the mime bundle the recorded build holds
    build: str  # "full" or "quick"
    exercise: int = 0
    heading: int = 2  # level of the last heading above
    used: set = field(default_factory=set)  # the glued values the text quotes
    links: str = "colab"  # where other chapters link to: their learners' notebooks ("colab") or pages ("book")


def glued_outputs(nb) -> dict[str, dict]:
    """Every value the executed notebook ``nb`` glued (``myst_nb.glue``): name -> its output's mime bundle."""
    values = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:  # papermill records the mime types under a prefix of its own
                values[name] = {k.split("papermill.record/")[-1]: ("".join(v) if isinstance(v, list) else v)
                                for k, v in out.get("data", {}).items()}
    return values


def _plain(bundle: dict) -> str:
    text = next((v for k, v in bundle.items() if k.endswith("text/plain")), "")
    text = str(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1].replace("\\'", "'").replace('\\"', '"')
    return text


def _glue_text(name_spec: str, ctx: _Context) -> str:
    """A ``{glue:text}`` value as the book writes it: the recorded build's value, through the number formatter."""
    from qkgeometry.stats import format_number

    name, _, spec = name_spec.partition(":")
    name = name.strip()
    bundle = ctx.values.get(name)
    ctx.used.add(name)
    if bundle is None:
        raise KeyError(f"{ctx.chapter.stem}: the text quotes the glued value {name!r}, which the recorded build "
                       "does not hold; execute the chapter first.")
    text = _plain(bundle)
    if spec:
        try:
            return format_number(float(text), spec=spec)
        except ValueError:
            return text
    if re.fullmatch(r"-?\d+", text):
        return format_number(int(text))
    return re.sub(r"(?<![\w.])-(?=\d)", "\u2212", text)


def _glue_markdown(name: str, ctx: _Context) -> str:
    """A glued object (a verdict, a statistics box, a note) as Markdown: its Markdown form, else its HTML on one
    block, else its text."""
    bundle = ctx.values.get(name)
    ctx.used.add(name)
    if bundle is None:
        raise KeyError(f"{ctx.chapter.stem}: the text shows the glued object {name!r}, which the recorded build "
                       "does not hold; execute the chapter first.")
    if "text/markdown" in bundle:
        return markdown_to_commonmark(str(bundle["text/markdown"]), ctx)
    if "text/html" in bundle:
        html = re.sub(r"\n\s*\n+", "\n", str(bundle["text/html"]).strip())
        return html
    return "```text\n" + _plain(bundle) + "\n```"


def _link_doc(target: str, text: str | None, ctx: _Context) -> str:
    stem = target.rstrip("/").rsplit("/", 1)[-1]
    chapter = ctx.labels.chapters.get(stem) or (
        Chapter(int(stem[:2]), stem, stem) if re.match(r"^\d\d_", stem) else None)
    if chapter is not None:
        words = text or (f"chapter {chapter.number} ({chapter.title})" if chapter.title != stem
                         else f"chapter {chapter.number}")
        url = (f"../notebooks/{stem}.html" if ctx.links == "book" else f"{COLAB}/{LEARNER_DIR}/{stem}.ipynb")
        return f"[{words}]({url})"
    page = target.replace("../", "").lstrip("/")
    words = text or f"the book's {stem.replace('_', ' ')} page"
    return f"[{words}]({'../' + page + '.html' if ctx.links == 'book' else GITHUB + '/' + page + '.md'})"


def _link_page(page: str, label: str, text: str, ctx: _Context) -> str:
    """A link to a labelled section of one of the book's pages: its anchor on the built page, or on the page's
    source on GitHub (whose anchors are made from the heading)."""
    if ctx.links == "book":
        return f"[{text}](../{page}.html#{label})"
    heading = ctx.labels.pages[label][1]
    anchor = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
    return f"[{text}]({GITHUB}/{page}.md#{anchor})"


def _role(name: str, content: str, ctx: _Context) -> str:
    """The Markdown a MyST role reads as in a learner's notebook."""
    explicit = re.match(r"^(.*?)\s*<([^>]*)>$", content, re.S)
    text, target = (explicit.group(1).strip() or None, explicit.group(2)) if explicit else (None, content)
    if name == "glue:text" or name == "glue":
        return _glue_text(content, ctx)
    if name in ("glue:md", "glue:any"):
        return _glue_markdown(content.split(":")[0], ctx).strip()
    if name == "doc":
        return _link_doc(target, text, ctx)
    if name == "ref" and target not in ctx.labels.text and target in ctx.labels.pages:
        page, heading = ctx.labels.pages[target]
        return _link_page(page, target, text or heading, ctx)
    if name in ("numref", "prf:ref", "ref", "eq"):
        resolved = ctx.labels.text.get(target)
        if resolved is None:
            raise KeyError(f"{ctx.chapter.stem}: the reference {{{name}}}`{content}` names no label of the book.")
        if text and "%s" in text:
            number = resolved.split(" ", 1)[-1]
            return text.replace("%s", number)
        return text or resolved
    if name.startswith("cite"):
        keys = [k.strip() for k in target.split(",")]
        cited = [ctx.labels.citations.get(k, (k, "")) for k in keys]
        if name == "cite:t":
            return "; ".join(f"{who} ({year})" if year else who for who, year in cited)
        return "(" + "; ".join(f"{who} {year}".strip() for who, year in cited) + ")"
    if name == "download":
        return text or target
    if name in ("math",):
        return f"${content}$"
    raise ValueError(f"{ctx.chapter.stem}: no plain-Markdown form for the role {{{name}}}.")


_ROLE = re.compile(r"\{([\w:+-]+)\}(`+)(.+?)\2", re.S)


def _roles(markdown: str, ctx: _Context) -> str:
    """Resolve every role in ``markdown`` (outside code fences)."""
    parts = re.split(r"(^(?P<f>`{3,}|~{3,})[^\n]*\n.*?^(?P=f)[ \t]*$)", markdown, flags=re.S | re.M)
    out = []
    k = 0
    while k < len(parts):
        piece = parts[k]
        if k % 3 == 1:  # a fenced code block (group 1), then its fence (group 2)
            out.append(piece)
            k += 2
            continue
        out.append(_ROLE.sub(lambda m: _role(m.group(1), m.group(3), ctx), piece))
        k += 1
    return "".join(out)


def _quote(markdown: str) -> str:
    return "\n".join(("> " + line) if line.strip() else ">" for line in markdown.strip("\n").split("\n"))


def markdown_to_commonmark(markdown: str, ctx: _Context) -> str:
    """One Markdown cell of a chapter as plain Markdown (see the module docstring); solutions are not handled here
    (:func:`_convert_cell` splits them out first)."""
    lines = markdown.split("\n")
    tokens = [t for t in _md_parser().parse(markdown) if t.level == 0 and t.map is not None]
    replaced: list[tuple[int, int, str]] = []
    for token in tokens:
        if token.type == "heading_open":
            ctx.heading = int(token.tag[1:])
        found = _directive(token)
        start, end = token.map
        if found:
            name, argument = found
            options, body = _options(token.content)
            replaced.append((start, end, _directive_markdown(name, argument, options, body, ctx)))
        elif token.type in ("myst_target", "myst_line_comment"):
            replaced.append((start, end, ""))
        elif token.type == "math_block_label":
            number = ctx.labels.text.get(token.info, "")
            tag = f" \\tag{{{number.strip('()')}}}" if number else ""
            replaced.append((start, end, f"$$\n{token.content.strip()}{tag}\n$$"))
    for start, end, text in reversed(replaced):
        lines[start:end] = text.split("\n") if text else []
    return _roles("\n".join(lines), ctx)


def _directive_markdown(name: str, argument: str, options: dict[str, str], body: str, ctx: _Context) -> str:
    kind = name.split(":")[-1]
    inner = markdown_to_commonmark(body, ctx) if body.strip() else ""
    if name == "admonition" or name in ("note", "tip", "important", "warning", "caution", "seealso", "hint"):
        title = argument or name.capitalize()
        return _quote(f"**{_roles(title, ctx)}**\n\n{inner}")
    if name.startswith("prf:") and kind in PROOF_KINDS:
        number = ctx.labels.text.get(options.get("label", ""), kind.capitalize())
        title = f" ({_roles(argument, ctx)})" if argument else ""
        return _quote(f"**{number}{title}.**\n\n{inner}")
    if name == "prf:proof":
        return _quote(f"*Proof.*\n\n{inner}\n\n∎")
    if name == "exercise":
        # a heading of its own, so that Colab folds the solution that follows and nothing else
        ctx.exercise += 1
        number = ctx.labels.text.get(options.get("label", ""), f"Exercise {ctx.chapter.number}.{ctx.exercise}")
        title = f" ({_roles(argument, ctx)})" if argument else ""
        return f"{'#' * min(6, ctx.heading + 1)} {number}{title}\n\n{inner}"
    if name in ("glue", "glue:figure", "glue:md", "glue:any"):
        return _glue_markdown(argument.split()[0], ctx)
    if name in ("math",):
        return f"$$\n{body.strip()}\n$$"
    raise ValueError(f"{ctx.chapter.stem}: no plain-Markdown form for the directive {{{name}}}.")


_SOLUTION_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{solution\}(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$\n?",
                             re.S | re.M)
_CODE_FENCE = re.compile(r"^(?P<fence>`{3,})(?P<lang>python|py|ipython3?)[ \t]*\n(?P<code>.*?)^(?P=fence)[ \t]*$\n?",
                         re.S | re.M)


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


def _convert_cell(cell, ctx: _Context) -> list:
    """One Markdown cell of a chapter as the learner's cells: its text converted, each solution split into a
    headed section whose Python blocks are code cells (tagged :data:`SOLUTION_TAG`)."""
    import nbformat

    out = []
    pieces = _SOLUTION_FENCE.split(cell.source)  # text, fence, arg, body, text, ...
    for k in range(0, len(pieces), 4):
        text = pieces[k]
        if text.strip():
            md = nbformat.v4.new_markdown_cell(markdown_to_commonmark(text.strip("\n"), ctx))
            out.append(md)
        if k + 3 >= len(pieces):
            break
        argument, body = pieces[k + 2].strip(), pieces[k + 3]
        _, body = _options(body)
        target = argument.split()[0] if argument else ""
        number = ctx.labels.text.get(target, "the exercise above")
        level = "#" * min(6, ctx.heading + 1)  # the exercise's own level
        head = nbformat.v4.new_markdown_cell(f"{level} Solution to {number}\n\nTry the exercise first: the "
                                             "reference solution below replaces your answer when it runs.")
        head.metadata["tags"] = [SOLUTION_TAG]
        out.append(head)
        cursor = 0
        for m in _CODE_FENCE.finditer(body):
            before = body[cursor:m.start()]
            if before.strip():
                c = nbformat.v4.new_markdown_cell(markdown_to_commonmark(before.strip("\n"), ctx))
                c.metadata["tags"] = [SOLUTION_TAG]
                out.append(c)
            code = nbformat.v4.new_code_cell(m.group("code").rstrip("\n"))
            code.metadata["tags"] = [SOLUTION_TAG]
            out.append(code)
            cursor = m.end()
        after = body[cursor:]
        if after.strip():
            c = nbformat.v4.new_markdown_cell(markdown_to_commonmark(after.strip("\n"), ctx))
            c.metadata["tags"] = [SOLUTION_TAG]
            out.append(c)
        # the text after a solution starts a section of its own (an exercise is one), so that folding the
        # solution folds only it
        nxt = pieces[k + 4] if k + 4 < len(pieces) else ""
        if nxt.strip() and not re.match(r"^\s*(#{1,6} |`{3,}\{exercise\}|:{3,}\{exercise\})", nxt):
            pieces[k + 4] = f"{level} Continued\n\n{nxt.lstrip()}"
    return out


#: The line each chapter imports ``glue`` with, and what a learner's notebook imports instead.
GLUE_IMPORT = "from myst_nb import glue"
LEARNER_GLUE_IMPORT = "from qkgeometry.tables import show_value as glue  # shows every value the text quotes"
#: the project's requirement in a first cell's ``pip install`` line, with its extras
_PROJECT_EXTRAS = re.compile(r"qkgeometry\[([^\]]*)\]")


def learner_install(source: str) -> str:
    """A chapter's code as its learner's notebook runs it: ``glue`` shown by the package (no myst-nb), so the
    project installs without its ``book`` extra (the book's build tools, which Colab lacks and the learner's
    notebook never uses).

    >>> learner_install('%pip install "qkgeometry[book,train] @ git+https://x"\\nfrom myst_nb import glue')
    '%pip install "qkgeometry[train] @ git+https://x"\\nfrom qkgeometry.tables import show_value as glue  # shows every value the text quotes'
    """
    def extras(m: re.Match) -> str:
        kept = [e.strip() for e in m.group(1).split(",") if e.strip() and e.strip() != "book"]
        return f"qkgeometry[{','.join(kept)}]" if kept else "qkgeometry"

    return _PROJECT_EXTRAS.sub(extras, source.replace(GLUE_IMPORT, LEARNER_GLUE_IMPORT))


_BADGE = re.compile(r"\(https://colab\.research\.google\.com/github/[^)]*?/(?:notebooks|learner)/([\w.-]+\.ipynb)\)")


def learner_notebook(source, executed, labels: Labels, build: str = "full"):
    """The learner's notebook of chapter ``source`` (a notebook node with its path in ``source.metadata`` or a
    path), its values read from ``executed`` (the recorded build of the same chapter), numbered by ``labels``."""
    import nbformat

    src_path = Path(source) if isinstance(source, (str, Path)) else None
    nb = nbformat.read(str(source), as_version=4) if src_path else copy.deepcopy(source)
    if isinstance(executed, dict):  # the values themselves (as recorded in a learner's notebook)
        values = executed
    else:
        run = nbformat.read(str(executed), as_version=4) if isinstance(executed, (str, Path)) else executed
        values = glued_outputs(run)
    stem = src_path.stem if src_path else str(nb.metadata.get("qkgeometry", {}).get("stem", ""))
    chapter = labels.chapters.get(stem) or Chapter(int(stem[:2]) if stem[:2].isdigit() else 0, stem, stem)
    ctx = _Context(chapter, labels, values, build)
    cells = []
    for cell in nb.cells:
        tags = list(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type == "markdown":
            if _BADGE.search(cell.source):
                cells.append(_badge_cell(cell, chapter, build))
                continue
            for c in _convert_cell(cell, ctx):
                c.metadata.setdefault("id", _new_id())
                cells.append(c)
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        code = nbformat.v4.new_code_cell(learner_install(cell.source))
        keep = [t for t in tags if t in ("parameters",)]
        if keep:
            code.metadata["tags"] = keep
        if {"remove-cell", "remove-input", "hide-input"} & set(tags):
            code.metadata["cellView"] = "form"  # Colab: code folded, output shown
            code.metadata["jupyter"] = {"source_hidden": True}
        code.metadata["id"] = _new_id()
        figure = _cell_figure(cell)
        name = str(figure.get("name", ""))
        caption_cell = None
        if _FIGURE_NAME.match(name):
            caption = markdown_to_commonmark(str(figure.get("caption", "")), ctx).strip()
            caption_cell = nbformat.v4.new_markdown_cell(f"**{labels.text.get(name, '')}.** {caption}".strip())
            caption_cell.metadata["id"] = _new_id()
        if caption_cell is not None and name.startswith("tbl-"):
            cells.append(caption_cell)  # a table's caption sits above it, as in the book
        cells.append(code)
        if caption_cell is not None and not name.startswith("tbl-"):
            cells.append(caption_cell)
    if (len(cells) > 1 and cells[0].cell_type == "code" and cells[1].cell_type == "markdown"
            and "colab-badge" in cells[1].source):
        cells[:2] = cells[1::-1]  # the badge's cell, which ends by saying to run the install cell, comes first
    out = nbformat.v4.new_notebook()
    out.metadata = copy.deepcopy(nb.metadata)
    out.metadata["colab"] = {"provenance": [], "toc_visible": True,
                             "collapsed_sections": [c.metadata["id"] for c in cells if c.cell_type == "markdown"
                                                    and SOLUTION_TAG in c.metadata.get("tags", [])
                                                    and c.source.lstrip().startswith("#")]}
    # the recorded values the text quotes, kept so that the notebook can be rebuilt from an edited chapter without
    # executing it again (``python -m tools.learner build --values-from learner``)
    used = sorted(ctx.used)
    out.metadata["qkgeometry"] = {"chapter": chapter.number, "source": f"notebooks/{stem}.ipynb", "build": build,
                                  "values": {k: {m: v for m, v in values[k].items() if not m.startswith("image/")}
                                             for k in used}}
    out.cells = cells
    return out


def _badge_cell(cell, chapter: Chapter, build: str):
    import nbformat

    badge, _, run_line = _BADGE.sub(lambda m: f"({COLAB}/{LEARNER_DIR}/{m.group(1)})", cell.source).partition("\n")
    where = ("the book's full build" if build == "full" else
             "the book's quick build (small random baselines, short runs), not its full one")
    note = (f"This is chapter {chapter.number} of the book *The geometry of query–key attention*, in plain Markdown. "
            f"The numbers in the text come from {where}. Running the cells recomputes them: each cell that "
            "computes a number the text quotes shows it.")
    out = nbformat.v4.new_markdown_cell("\n\n".join(p for p in (badge.strip(), note, run_line.strip()) if p))
    out.metadata["id"] = _new_id()
    return out


def _stable_ids(nb, stem: str) -> None:
    """Replace random cell ids by ids derived from the chapter and the cell's place, so that a rebuild of unchanged
    sources gives the same file."""
    mapping = {}
    for k, cell in enumerate(nb.cells):
        new = f"{stem[:2]}-{k:03d}"
        mapping[cell.metadata.get("id")] = new
        cell.metadata["id"] = new
        cell["id"] = new
    colab = nb.metadata.get("colab", {})
    colab["collapsed_sections"] = [mapping.get(i, i) for i in colab.get("collapsed_sections", [])]


def recorded_values(learner: Path) -> tuple[dict[str, dict], str]:
    """The values a learner's notebook quotes and the build they come from, as it recorded them."""
    import nbformat

    meta = nbformat.read(str(learner), as_version=4).metadata.get("qkgeometry", {})
    return dict(meta.get("values", {})), str(meta.get("build", "full"))


def build_learner_notebooks(root: Path, executed: Path | None, out_dir: Path, build: str,
                            notebooks: Iterable[Path] | None = None, values_from: Path | None = None) -> list[Path]:
    """Write the learner's notebook of every chapter (``notebooks/NN_*.ipynb`` of ``root``) into ``out_dir``, with
    the values of the executed copies in ``executed`` (or, with ``values_from``, the values the learners' notebooks
    in that folder recorded); return their paths. Outputs are not stored."""
    import nbformat

    root, out_dir = Path(root), Path(out_dir)
    sources = sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    labels = chapter_labels(sources, root / "book" / "references.bib")
    wanted = {Path(p).name for p in notebooks} if notebooks else None
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for src in sources:
        if wanted is not None and src.name not in wanted:
            continue
        if values_from is not None:
            run, build = recorded_values(Path(values_from) / src.name)
        else:
            run = Path(executed) / src.name
            if not run.is_file():
                raise FileNotFoundError(f"{src.name}: no executed copy at {run}; execute the chapters first "
                                        "(python -m tools.notebooks execute).")
        nb = learner_notebook(src, run, labels, build)
        _stable_ids(nb, src.stem)
        dst = out_dir / src.name
        nbformat.write(nb, str(dst))
        written.append(dst)
    return written


# ------------------------------------------------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.learner", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the learners' notebooks from the executed chapters")
    b.add_argument("notebooks", nargs="*", type=Path, help="chapters to build (default: all)")
    b.add_argument("--root", type=Path, default=Path.cwd())
    b.add_argument("--executed", type=Path, default=None,
                   help="executed copies (default: _build/executed/full, else _build/executed/quick)")
    b.add_argument("--out", type=Path, default=None, help=f"default: <root>/{LEARNER_DIR}")
    b.add_argument("--values-from", type=Path, default=None,
                   help="rebuild with the values recorded in these learners' notebooks (no execution)")
    c = sub.add_parser("check", help="list the MyST a CommonMark renderer would show in notebooks")
    c.add_argument("notebooks", nargs="*", type=Path, help=f"default: <root>/{LEARNER_DIR}/*.ipynb")
    c.add_argument("--root", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.command == "build":
        executed = args.executed
        if executed is None:
            full, quick = root / "_build" / "executed" / "full", root / "_build" / "executed" / "quick"
            executed = full if full.is_dir() and any(full.glob("*.ipynb")) else quick
        build = "quick" if executed.name == "quick" else "full"
        try:
            written = build_learner_notebooks(root, executed, args.out or root / LEARNER_DIR, build, args.notebooks,
                                              values_from=args.values_from)
        except (FileNotFoundError, KeyError, ValueError) as e:
            print(f"ERROR: {e}", file=sys.stderr)
            return 1
        for path in written:
            print(f"wrote {path}")
        return 0
    paths = args.notebooks or sorted((root / LEARNER_DIR).glob("*.ipynb"))
    total = 0
    for path in paths:
        found = notebook_leftovers(path)
        total += len(found)
        summary = Counter(token for _, token in found)
        print(f"{len(found):5d}  {path.name}  " + json.dumps(dict(summary.most_common(8)), ensure_ascii=False))
    print(f"{total:5d}  MyST token(s) a CommonMark renderer would show")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
