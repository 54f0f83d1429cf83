"""Reading the book's chapters: the MyST block grammar (directives, their options, targets, labelled equations), the
figure and table names of code cells, and the values an executed chapter glued. The learners' notebooks
(:mod:`tools.learner`), the slide decks (:mod:`tools.slides`) and the numbering (:mod:`tools.numbering`) read the
chapters through it.
"""

from __future__ import annotations

import re

__all__ = ["FIGURE_NAME", "PROOF_KINDS", "NotebookError", "cell_figure", "directive", "glued_outputs", "md_parser",
           "options", "plain", "read_notebook", "walk_blocks"]

class NotebookError(ValueError):
    """A file that should be a chapter's notebook is not one (not JSON, or JSON that is no notebook)."""


def read_notebook(path):
    """The notebook at ``path`` (nbformat 4). A file that is not a notebook raises :class:`NotebookError`, one line
    that names the file (nbformat's own error quotes the file's first characters, line breaks included)."""
    import nbformat
    from nbformat.reader import NotJSONError

    try:
        return nbformat.read(str(path), as_version=4)
    except NotJSONError:
        raise NotebookError(f"{path}: not a notebook (its text is not JSON: a write cut short?); execute or copy the "
                            "chapter again.") from None
    except nbformat.ValidationError as e:
        reason = " ".join(str(getattr(e, "message", e)).split())[:160]
        raise NotebookError(f"{path}: not a notebook ({reason}); execute or copy the chapter again.") from None


#: Kinds of statement of sphinx-proof (each numbered on its own, "Theorem 1.2", "Proposition 1.1").
PROOF_KINDS = ("theorem", "proposition", "corollary", "lemma", "definition", "conjecture", "remark", "example",
               "property", "observation", "axiom", "criterion", "algorithm", "assumption", "notation")
#: The name of a numbered figure (``fig-...``) or table (``tbl-...``) in a code cell's ``mystnb.figure``.
FIGURE_NAME = re.compile(r"^(fig|tbl)-")


def cell_figure(cell) -> dict:
    """A code cell's figure options (``metadata.mystnb.figure``: name, caption), empty when it has none."""
    return dict(cell.get("metadata", {}).get("mystnb", {}).get("figure", {}) or {})


def md_parser():
    """The MyST block grammar (fences, ``(target)=``, labelled ``$$`` blocks) as markdown-it-py sees it."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.colon_fence import colon_fence_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.myst_blocks import myst_block_plugin
    from mdit_py_plugins.myst_role import myst_role_plugin

    return (MarkdownIt("commonmark").use(myst_block_plugin).use(myst_role_plugin).use(colon_fence_plugin)
            .use(dollarmath_plugin, double_inline=True).use(amsmath_plugin))


def directive(token) -> tuple[str, str] | None:
    """``(name, argument)`` of a directive fence token (```` ```{name} argument ````), else None."""
    if token.type not in ("fence", "colon_fence"):
        return None
    m = re.match(r"^\{([\w:-]+)\}\s*(.*)$", token.info.strip())
    return (m.group(1), m.group(2).strip()) if m else None


def options(body: str) -> tuple[dict[str, str], str]:
    """A directive body's ``:key: value`` lines (at its top) and the rest."""
    found, lines = {}, body.split("\n")
    while lines and re.match(r"^:[\w-]+:", lines[0]):
        key, _, value = lines.pop(0)[1:].partition(":")
        found[key.strip()] = value.strip()
    return found, "\n".join(lines).strip("\n")


def walk_blocks(markdown: str):
    """Every directive ``(name, argument, options, body)`` in ``markdown``, nested ones included, in order."""
    for token in md_parser().parse(markdown):
        found = directive(token)
        if found:
            options_, body = options(token.content)
            yield (*found, options_, body, token)
            yield from walk_blocks(body)
        elif token.type == "myst_target":
            yield ("target", token.content, {}, "", token)
        elif token.type == "math_block_label":
            yield ("equation", token.info, {}, token.content, token)


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


def plain(bundle: dict) -> str:
    """The text form of a glued value's mime bundle (a quoted string unquoted)."""
    text = next((v for k, v in bundle.items() if k.endswith("text/plain")), "")
    text = str(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1].replace("\\'", "'").replace('\\"', '"')
    return text
