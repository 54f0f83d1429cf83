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
  :func:`qkgeometry.formatting.format_number`), and shown again, recomputed, as the output of the cell that computes it
  (the cell's ``glue`` is :func:`qkgeometry.tables.show_value`, which displays what it is given);
* figure and table captions become Markdown cells next to their cells; cells the book hides stay, folded.

The conversion of a chapter's Markdown is :mod:`tools.commonmark`, which reads the chapters through
:mod:`tools.myst` and numbers them by :mod:`tools.numbering`; this module builds the notebooks and is their command
line.

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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from . import myst
from .commonmark import Context, markdown_to_commonmark, myst_leftovers, notebook_leftovers
from .learner_outputs import outputs_by_cell
from .myst import glued_outputs
from .numbering import Chapter, Labels, chapter_labels
from .repository import COLAB, LEARNER_DIR

__all__ = ["LEARNER_DIR", "Chapter", "Labels", "build_learner_notebooks", "chapter_labels", "learner_notebook",
           "main", "markdown_to_commonmark", "myst_leftovers", "notebook_leftovers"]

ROOT = Path(__file__).resolve().parents[1]
#: The tag of every cell that belongs to a solution (the students' copy drops them).
SOLUTION_TAG = "solution"


_SOLUTION_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{solution\}(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$\n?",
                             re.S | re.M)
_CODE_FENCE = re.compile(r"^(?P<fence>`{3,})(?P<lang>python|py|ipython3?)[ \t]*\n(?P<code>.*?)^(?P=fence)[ \t]*$\n?",
                         re.S | re.M)


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


def _convert_cell(cell, ctx: Context) -> list:
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
        _, body = myst.options(body)
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


def learner_notebook(source, executed, labels: Labels, build: str = "full",
                     outputs: Mapping[str, list] | None = None):
    """The learner's notebook of chapter ``source`` (a notebook node with its path in ``source.metadata`` or a
    path), its values read from ``executed`` (the recorded build of the same chapter), numbered by ``labels``.

    Each code cell carries the outputs its cell had in ``executed`` (:mod:`tools.learner_outputs`), or, when
    ``executed`` is the values alone, those of ``outputs`` (by the chapter's cell id)."""
    import nbformat

    src_path = Path(source) if isinstance(source, (str, Path)) else None
    nb = myst.read_notebook(source) if src_path else copy.deepcopy(source)
    if isinstance(executed, dict) and "cells" not in executed:  # the values alone (as a learner's notebook records them)
        values = executed
        stored = dict(outputs or {})
    else:
        run = myst.read_notebook(executed) if isinstance(executed, (str, Path)) else executed
        values = glued_outputs(run)
        stored = outputs_by_cell(run)
    stem = src_path.stem if src_path else str(nb.metadata.get("qkgeometry", {}).get("stem", ""))
    chapter = labels.chapters.get(stem) or Chapter(int(stem[:2]) if stem[:2].isdigit() else 0, stem, stem)
    ctx = Context(chapter, labels, values, build)
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
        source_id = str(cell.get("id", ""))
        if source_id:
            code.metadata["qkgeometry"] = {"cell": source_id}
            code.outputs = [nbformat.from_dict(o) for o in stored.get(source_id, [])]
        figure = myst.cell_figure(cell)
        name = str(figure.get("name", ""))
        caption_cell = None
        if myst.FIGURE_NAME.match(name):
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
    where = ("the book's own run of this chapter" if build == "full" else
             "a short run of this chapter (small random baselines, short runs), not the book's own")
    note = (f"This is chapter {chapter.number} of the book *The geometry of query–key attention*, in plain Markdown. "
            f"The numbers in the text, and the tables and figures under the cells, come from {where}, so the "
            "chapter can be read before it is run. Running the cells recomputes them: each cell that computes a "
            "number the text quotes shows it.")
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

    meta = myst.read_notebook(learner).metadata.get("qkgeometry", {})
    return dict(meta.get("values", {})), str(meta.get("build", "full"))


def recorded_outputs(learner: Path) -> dict[str, list]:
    """The outputs a learner's notebook stores, by the id of the chapter's cell they belong to."""
    nb = myst.read_notebook(learner)
    return {str(c.metadata["qkgeometry"]["cell"]): [dict(o) for o in c.get("outputs", [])]
            for c in nb.cells if c.cell_type == "code" and "cell" in c.metadata.get("qkgeometry", {})}


def build_learner_notebooks(root: Path, executed: Path | None, out_dir: Path, build: str,
                            notebooks: Iterable[Path] | None = None, values_from: Path | None = None) -> list[Path]:
    """Write the learner's notebook of every chapter (``notebooks/NN_*.ipynb`` of ``root``) into ``out_dir``, with
    the values of the executed copies in ``executed`` (or, with ``values_from``, the values the learners' notebooks
    in that folder recorded, and their stored outputs); return their paths."""
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
        outputs = None
        if values_from is not None:
            run, build = recorded_values(Path(values_from) / src.name)
            outputs = recorded_outputs(Path(values_from) / src.name)
        else:
            run = Path(executed) / src.name
            if not run.is_file():
                raise FileNotFoundError(f"{src.name}: no executed copy at {run}; execute the chapters first "
                                        "(python -m tools.notebooks execute).")
        nb = learner_notebook(src, run, labels, build, outputs)
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
