"""A chapter's MyST as plain Markdown (CommonMark), which Colab and Jupyter render: directives as headed blockquotes,
references resolved to the book's numbers, glued values written into the text; and the check that reads the result as
a CommonMark renderer does and reports every piece of MyST a reader would see (:func:`myst_leftovers`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import myst
from .numbering import Chapter, Labels
from .repository import COLAB, GITHUB, LEARNER_DIR

__all__ = ["MYST_PATTERNS", "Context", "markdown_to_commonmark", "myst_leftovers", "notebook_leftovers"]

#: MyST that a CommonMark renderer shows as raw text (the check looks for these outside code).
MYST_PATTERNS = (
    # roles: {glue:text}, {prf:ref}, {doc}, {numref}, ... (a bare "{glue" or "{prf:" too)
    re.compile(r"\{(?:glue[\w:]*|prf:[\w-]*|doc|numref|ref|eq|download|cite(?::\w+)?|term|abbr|sub|sup)\}?"),
    # directive options and targets, each a line of its own
    re.compile(r"^:(?:label|class|name|format|nonumber|dropdown|width|align|figclass|alt):", re.M),
    re.compile(r"^\([\w.:-]+\)=\s*$", re.M),
)


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

    if isinstance(nb, (str, Path)):
        nb = myst.read_notebook(nb)
    return [(k, token) for k, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
            for token in myst_leftovers(cell.source)]


# ------------------------------------------------------------------------------------------------- conversion
@dataclass
class Context:
    """Where a conversion is: the chapter, the book's numbering, the recorded values, the section level."""

    chapter: Chapter
    labels: Labels
    values: dict[str, dict]  # glue name -> the mime bundle the recorded build holds
    build: str  # "full" or "quick"
    exercise: int = 0
    heading: int = 2  # level of the last heading above
    used: set = field(default_factory=set)  # the glued values the text quotes
    links: str = "colab"  # where other chapters link to: their learners' notebooks ("colab") or pages ("book")


def _glue_text(name_spec: str, ctx: Context) -> str:
    """A ``{glue:text}`` value as the book writes it: the recorded build's value, through the number formatter."""
    from qkgeometry.formatting import format_number, true_minus

    name, _, spec = name_spec.partition(":")
    name = name.strip()
    bundle = ctx.values.get(name)
    ctx.used.add(name)
    if bundle is None:
        raise KeyError(f"{ctx.chapter.stem}: the text quotes the glued value {name!r}, which the recorded build "
                       "does not hold; execute the chapter first.")
    text = myst.plain(bundle)
    if spec:
        try:
            return format_number(float(text), spec=spec)
        except ValueError:
            return text
    if re.fullmatch(r"-?\d+", text):
        return format_number(int(text))
    return true_minus(text)


def _glue_markdown(name: str, ctx: Context) -> str:
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
    return "```text\n" + myst.plain(bundle) + "\n```"


def _link_doc(target: str, text: str | None, ctx: Context) -> str:
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


def _link_page(page: str, label: str, text: str, ctx: Context) -> str:
    """A link to a labelled section of one of the book's pages: its anchor on the built page, or on the page's
    source on GitHub (whose anchors are made from the heading)."""
    if ctx.links == "book":
        return f"[{text}](../{page}.html#{label})"
    heading = ctx.labels.pages[label][1]
    anchor = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
    return f"[{text}]({GITHUB}/{page}.md#{anchor})"


def _role(name: str, content: str, ctx: Context) -> str:
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


def _roles(markdown: str, ctx: Context) -> str:
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


def markdown_to_commonmark(markdown: str, ctx: Context) -> str:
    """One Markdown cell of a chapter as plain Markdown (see the module docstring); solutions are not handled here
    (:func:`_convert_cell` splits them out first)."""
    lines = markdown.split("\n")
    tokens = [t for t in myst.md_parser().parse(markdown) if t.level == 0 and t.map is not None]
    replaced: list[tuple[int, int, str]] = []
    for token in tokens:
        if token.type == "heading_open":
            ctx.heading = int(token.tag[1:])
        found = myst.directive(token)
        start, end = token.map
        if found:
            name, argument = found
            options, body = myst.options(token.content)
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


def _directive_markdown(name: str, argument: str, options: dict[str, str], body: str, ctx: Context) -> str:
    kind = name.split(":")[-1]
    inner = markdown_to_commonmark(body, ctx) if body.strip() else ""
    if name == "admonition" or name in ("note", "tip", "important", "warning", "caution", "seealso", "hint"):
        title = argument or name.capitalize()
        return _quote(f"**{_roles(title, ctx)}**\n\n{inner}")
    if name.startswith("prf:") and kind in myst.PROOF_KINDS:
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
