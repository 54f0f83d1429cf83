"""Execute the book's notebooks with papermill and render the book with Jupyter Book 1.x.

This is the build pipeline behind ``make book`` and ``make test`` (the book's "How to run" page explains it)::

    python -m tools.notebooks execute [--quick] [NOTEBOOK ...]   # papermill -> _build/executed/{full,quick}/
    python -m tools.notebooks build   [--quick]                  # render those copies -> _build/html
    python -m tools.notebooks book    [--quick]                  # both

* Each notebook is run with the parameter ``QUICK`` injected into its ``parameters``-tagged cell, in its own folder
  (so relative paths such as ``../results`` work). A failing cell fails the run (non-zero exit, the cell and its
  traceback are printed); the other notebooks still run so that one report lists every failure.
* Papermill's injected-parameters cell is tagged ``remove-cell`` so that readers do not see it.
* The book is rendered from a staged copy of the sources (``_config.yml``, ``_toc.yml``, ``book/`` and the
  *executed* notebooks) with ``execute_notebooks: "off"``, ``-W -n --keep-going`` and a clean output folder, so a
  warning or a broken cross-reference fails the build. The build step also draws the intro's headline figure
  (computed from the offline models, never hand-made) and checks that no page loads a script or a stylesheet from
  the network, writes the learners' notebooks of the build (plain Markdown with the build's numbers,
  ``tools/learner.py``; the pages' Colab buttons open them) and the students' copies of them
  (:func:`write_student_notebooks`: solutions removed, no outputs), which the course module offers for download,
  and one slide deck per course session
  (``tools/slides.py``, ``write_decks``, ``<html>/slides/``), which the teachers' page links.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qkgeometry.formatting import MINUS, MINUS_SIGN

__all__ = [
    "ExecutionResult",
    "NotebookFailure",
    "build_book",
    "execute_all",
    "execute_notebook",
    "executed_dir",
    "external_resources",
    "main",
    "student_notebook",
    "write_student_notebooks",
]

#: Papermill tags the cell it injects with this tag.
INJECTED_TAG = "injected-parameters"
#: Tag that hides a cell (input and output) in the rendered book.
REMOVE_TAG = "remove-cell"


class NotebookFailure(RuntimeError):
    """One or more notebooks failed to execute, or the book failed to build."""


@dataclass
class ExecutionResult:
    """Outcome of executing one notebook."""

    notebook: Path
    output: Path
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def executed_dir(build_dir: Path, quick: bool) -> Path:
    """Folder holding the executed copies for one mode: ``<build_dir>/executed/{quick,full}``."""
    return Path(build_dir) / "executed" / ("quick" if quick else "full")


def tag_injected_cell(path: Path) -> bool:
    """Add ``remove-cell`` to papermill's injected-parameters cell of the notebook at ``path``.

    Returns True when such a cell was found.
    """
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    found = False
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if INJECTED_TAG in tags:
            found = True
            if REMOVE_TAG not in tags:
                cell.metadata["tags"] = [*tags, REMOVE_TAG]
    if found:
        nbformat.write(nb, str(path))
    return found


def execute_notebook(src: Path, dst: Path, quick: bool, kernel_name: str = "python3",
                     timeout: int | None = 1800) -> float:
    """Execute ``src`` with ``QUICK=quick`` into ``dst`` and return the wall time in seconds.

    Raises ``papermill.PapermillExecutionError`` when a cell fails (``dst`` then holds the partial output) and
    ``ValueError`` when the notebook has no ``parameters``-tagged cell.
    """
    import nbformat
    import papermill as pm

    src, dst = Path(src).resolve(), Path(dst).resolve()
    nb = nbformat.read(str(src), as_version=4)
    if not any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb.cells):
        raise ValueError(f"{src.name}: no cell is tagged `parameters`; add one that sets `QUICK = False` so the "
                         f"runner can switch the notebook to quick mode.")
    dst.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    # The kernel inherits our environment. A non-interactive MPLBACKEND (e.g. Agg, which the Makefile and many build
    # setups export) would stop ipykernel from installing its inline backend, and every figure would silently vanish
    # from the book. Force the inline backend for the kernel only.
    saved = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = INLINE_BACKEND
    try:
        pm.execute_notebook(str(src), str(dst), parameters={"QUICK": bool(quick)}, cwd=str(src.parent),
                            kernel_name=kernel_name, progress_bar=False, log_output=False,
                            execution_timeout=timeout)
    finally:
        if saved is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = saved
        if dst.exists():
            tag_injected_cell(dst)
    check_figures(dst)
    return time.perf_counter() - start


INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


def check_figures(path: Path) -> None:
    """Fail when a notebook that draws figures (calls ``plotting.*``) carries no image output at all.

    Catches the silent failure mode where figures are created but never rendered (a wrong matplotlib backend).
    """
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    draws = any(re.search(r"\bplotting\.(?!use_style)\w+\(", c.source) for c in code)
    images = sum(1 for c in code for o in c.get("outputs", []) for k in o.get("data", {}) if k.startswith("image/"))
    if draws and images == 0:
        raise ValueError(f"{Path(path).name}: cells call qkgeometry.plotting but the executed notebook holds no image; "
                         "figures were drawn but not rendered (is MPLBACKEND set to a non-inline backend?).")


def execute_all(notebooks: Sequence[Path], out_dir: Path, quick: bool, kernel_name: str = "python3",
                stream=None) -> list[ExecutionResult]:
    """Execute every notebook into ``out_dir``, printing one timing line each. Raises :class:`NotebookFailure`
    after running all of them if any failed."""
    stream = stream or sys.stdout
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    mode = "quick" if quick else "full"
    results: list[ExecutionResult] = []
    print(f"Executing {len(notebooks)} notebook(s) in {mode} mode -> {out_dir}", file=stream, flush=True)
    for nb_path in notebooks:
        nb_path = Path(nb_path)
        dst = out_dir / nb_path.name
        start = time.perf_counter()
        try:
            seconds = execute_notebook(nb_path, dst, quick, kernel_name)
            results.append(ExecutionResult(nb_path, dst, seconds))
            print(f"  {seconds:7.1f} s  ok      {nb_path.name}", file=stream, flush=True)
        except Exception as e:
            seconds = time.perf_counter() - start
            results.append(ExecutionResult(nb_path, dst, seconds, error=_describe(e)))
            print(f"  {seconds:7.1f} s  FAILED  {nb_path.name}", file=stream, flush=True)
    total = sum(r.seconds for r in results)
    print(f"  {total:7.1f} s  total ({mode})", file=stream, flush=True)
    failed = [r for r in results if not r.ok]
    if failed:
        details = "\n\n".join(f"--- {r.notebook.name} (partial output: {r.output})\n{r.error}" for r in failed)
        raise NotebookFailure(f"{len(failed)} of {len(results)} notebook(s) failed:\n\n{details}")
    return results


def _describe(e: Exception) -> str:
    text = str(e)
    # Strip ANSI colours from IPython tracebacks so that build logs stay readable.
    return re.sub(r"\x1b\[[0-9;]*m", "", text) or type(e).__name__


# --------------------------------------------------------------------------------------------------- build
_EXTERNAL = re.compile(
    r"""<(script|link)\b[^>]*?\b(src|href)\s*=\s*["']((?:https?:)?//[^"']+)["'][^>]*>""", re.IGNORECASE)
_REL = re.compile(r"""\brel\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
#: ``<link rel=...>`` kinds that make the browser fetch something (canonical/alternate links do not).
_FETCHING_RELS = {"stylesheet", "preload", "modulepreload", "prefetch", "icon", "shortcut", "manifest", "import"}


def external_resources(html_dir: Path) -> list[tuple[str, str]]:
    """``(page, url)`` for every ``<script src>`` or fetching ``<link href>`` that points to the network."""
    found = []
    for page in sorted(Path(html_dir).rglob("*.html")):
        text = page.read_text(encoding="utf-8", errors="replace")
        for match in _EXTERNAL.finditer(text):
            tag, _, url = match.groups()
            if tag.lower() == "link":
                rel = _REL.search(match.group(0))
                rels = set(rel.group(1).lower().split()) if rel else {"stylesheet"}
                if not rels & _FETCHING_RELS:
                    continue
            found.append((str(page.relative_to(html_dir)), url))
    return found


def stage_sources(root: Path, executed: Path, stage: Path) -> list[Path]:
    """Copy the book sources into ``stage`` with the executed notebooks in place of ``notebooks/``.

    Every ``notebooks/*.ipynb`` of ``root`` must have an executed copy in ``executed`` that is newer than it.
    """
    root, executed, stage = Path(root), Path(executed), Path(stage)
    sources = sorted((root / "notebooks").glob("*.ipynb"))
    missing = [p.name for p in sources if not (executed / p.name).exists()]
    stale = [p.name for p in sources if (executed / p.name).exists()
             and (executed / p.name).stat().st_mtime < p.stat().st_mtime]
    if missing or stale:
        raise NotebookFailure(
            f"executed copies in {executed} are missing ({', '.join(missing) or 'none'}) or older than their "
            f"source ({', '.join(stale) or 'none'}); run `python -m tools.notebooks execute` first.")
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(root / name, stage / name)
    shutil.copytree(root / "book", stage / "book", ignore=shutil.ignore_patterns("__pycache__", "_generated"))
    (stage / "notebooks").mkdir()
    for src in sources:
        shutil.copy2(executed / src.name, stage / "notebooks" / src.name)
    return sources


#: The intro's two models: offline alias -> the name a reader knows them by.
HEADLINE_MODELS = {"minilm-l6": "all-MiniLM-L6-v2", "smollm2-135m": "SmolLM2-135M-Instruct"}


def draw_headline(out_dir: Path, quick: bool) -> list[Path]:
    """Draw the intro's headline figure and its summary table into ``out_dir`` (see ``book/intro.md``).

    Both offline models are scored per layer next to a random-Gaussian null cloud of the same shapes.
    """
    import matplotlib

    matplotlib.use("Agg")
    from qkgeometry import plotting
    from qkgeometry.analyses.baselines import random_factor_scores
    from qkgeometry.catalogue import model_source
    from qkgeometry.surveying import score_model, summarize

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = {alias: score_model(model_source(alias), per="layer").assign(model=name)
              for alias, name in HEADLINE_MODELS.items()}
    nulls = []
    for frame in frames.values():
        row = frame.iloc[0]
        rank = int(row["n_kv_heads"] * row["head_dim"])
        nulls.append(random_factor_scores(int(row["d_model"]), rank, 60 if quick else 300, seed=0))
    import pandas as pd

    fig = plotting.score_plane(pd.concat(frames.values()), null=pd.concat(nulls),
                               title="Every layer of two real models, and random matrices")
    figure = out_dir / "headline.svg"
    fig.savefig(figure, bbox_inches="tight")
    summary = summarize(pd.concat(frames.values()))
    table = out_dir / "headline_summary.md"
    lines = ["| model | family | layers | symmetry, median [IQR] | directionality, median [IQR] |",
             "|---|---|---:|---|---|"]
    for _, r in summary.iterrows():
        lines.append(f"| {r['model']} | {r['family']} | {r['n']} | {r['symmetry_median']:.2f} "
                     f"[{r['symmetry_q25']:.2f}, {r['symmetry_q75']:.2f}] | {r['directionality_median']:.2f} "
                     f"[{r['directionality_q25']:.2f}, {r['directionality_q75']:.2f}] |")
    table.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [figure, table]


#: A ``{solution}`` directive in a markdown cell, fence to matching fence (the book writes solutions this way).
_SOLUTION = re.compile(r"^(?P<fence>`{3,}|:{3,})\{solution\}[^\n]*\n.*?^(?P=fence)[ \t]*$\n?", re.S | re.M)
#: What a student's copy shows where a solution was.
SOLUTION_PLACEHOLDER = "*Your solution here: write it in the code cell below and run the checker.*"


def student_notebook(nb):
    """A copy of notebook ``nb`` (an ``nbformat`` node) for students: every ``{solution}`` block replaced by a short
    placeholder and an empty code cell (the text around it stays, exercises included), cells tagged ``solution``
    dropped, and every output cleared. Returns ``(copy, number of solutions removed)``.
    """
    import copy

    import nbformat

    out = copy.deepcopy(nb)
    cells, removed = [], 0
    for cell in out.cells:
        if "solution" in cell.get("metadata", {}).get("tags", []):
            # a learner's notebook (tools/learner.py): a solution is a headed section of tagged cells
            if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
                removed += 1
                cells.append(nbformat.v4.new_markdown_cell(SOLUTION_PLACEHOLDER))
                cells.append(nbformat.v4.new_code_cell(""))
            continue
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if cell.cell_type != "markdown" or not _SOLUTION.search(cell.source):
            cells.append(cell)
            continue
        parts = _SOLUTION.split(cell.source)  # text, fence, text, fence, ..., text
        texts = parts[::2]
        for k, text in enumerate(texts):
            if text.strip():
                cells.append(nbformat.v4.new_markdown_cell(text.strip("\n"), metadata=dict(cell.metadata)))
            if k < len(texts) - 1:
                removed += 1
                cells.append(nbformat.v4.new_markdown_cell(SOLUTION_PLACEHOLDER))
                cells.append(nbformat.v4.new_code_cell(""))
    out.cells = cells
    return out, removed


def write_student_notebooks(root: Path, out_dir: Path, learner: Path | None = None) -> list[Path]:
    """Write the students' copy (:func:`student_notebook`) of every learner's notebook (``learner/*.ipynb`` of
    ``root``, plain Markdown, see ``tools/learner.py``; or those in ``learner``) into ``out_dir``; return their
    paths."""
    import nbformat

    from .learner import LEARNER_DIR

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for src in sorted(Path(learner or Path(root) / LEARNER_DIR).glob("*.ipynb")):
        nb = nbformat.read(str(src), as_version=4)
        copy, _ = student_notebook(nb)
        dst = out_dir / src.name
        nbformat.write(copy, str(dst))
        written.append(dst)
    return written


def jupyter_book_command() -> list[str]:
    """The ``jupyter-book`` executable next to this Python, else on PATH."""
    local = Path(sys.executable).parent / "jupyter-book"
    if local.exists():
        return [str(local)]
    found = shutil.which("jupyter-book")
    if found is None:
        raise NotebookFailure("`jupyter-book` is not installed; install the book extra: pip install -e '.[book]'")
    return [found]


def build_book(root: Path, executed: Path, build_dir: Path, quick: bool, headline: bool = True,
               stream=None) -> Path:
    """Render the executed notebooks and ``book/`` into ``<build_dir>/html`` and return its ``index.html``.

    Raises :class:`NotebookFailure` on any Sphinx warning, broken reference, or network-loaded asset.
    """
    stream = stream or sys.stdout
    root, build_dir = Path(root).resolve(), Path(build_dir).resolve()
    stage = build_dir / "stage"
    stage_sources(root, Path(executed).resolve(), stage)
    if headline:
        start = time.perf_counter()
        draw_headline(stage / "book" / "_generated", quick)
        print(f"  {time.perf_counter() - start:7.1f} s  headline figure", file=stream, flush=True)
    # the landing page's answers at a glance, from the chapters' own glued values (tools/glance.py)
    from .glance import write_glance

    write_glance(root, Path(executed).resolve(), stage / "book" / "_generated")
    # the learners' notebooks of this build (plain Markdown, its values; tools/learner.py), and the students' copies
    from .learner import build_learner_notebooks

    try:
        learner = build_learner_notebooks(root, Path(executed).resolve(), stage / "book" / "_generated" / "learner",
                                          "quick" if quick else "full")
    except (KeyError, ValueError, FileNotFoundError) as e:
        raise NotebookFailure(f"the learners' notebooks: {e}") from None
    write_student_notebooks(root, stage / "book" / "_generated" / "student", learner=learner[0].parent)
    # jupyter-book writes to <path-output>/_build/{html,.doctrees}; start from a clean output folder.
    out_root = build_dir / "book"
    if out_root.exists():
        shutil.rmtree(out_root)
    start = time.perf_counter()
    cmd = [*jupyter_book_command(), "build", str(stage), "--path-output", str(out_root), "--all",
           "-W", "-n", "--keep-going"]
    # The pages say how their notebooks were run (a <meta> tag, book/_ext/presentation.py), so that a "quick mode"
    # note can be checked against the build it sits in.
    env = {**os.environ, "QKG_BUILD_MODE": "quick" if quick else "full"}
    proc = subprocess.run(cmd, cwd=stage, text=True, capture_output=True, check=False, env=env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise NotebookFailure(f"jupyter-book build failed after {seconds:.1f} s:\n{proc.stdout[-6000:]}\n"
                              f"{proc.stderr[-6000:]}")
    built = out_root / "_build" / "html"
    html = build_dir / "html"
    if html.exists():
        shutil.rmtree(html)
    shutil.move(str(built), str(html))
    from .slides import SESSIONS, DeckError, write_decks

    start = time.perf_counter()
    # one deck per course session whose chapter this project has (a project without them gets none)
    sessions = [s for s in SESSIONS if (root / "notebooks" / f"{s.notebook}.ipynb").is_file()]
    try:
        decks = write_decks(Path(executed).resolve(), html / "slides", sessions=sessions)
    except DeckError as e:
        raise NotebookFailure(f"slide decks: {e}") from None
    print(f"  {time.perf_counter() - start:7.1f} s  {len(decks)} slide decks", file=stream, flush=True)
    retarget_colab_links(html)
    minus = true_minus_signs(html)
    print(f"  {sum(minus.values()):7d}    hyphen-minus numbers written with a true minus sign on {len(minus)} page(s)",
          file=stream, flush=True)
    external = external_resources(html)
    if external:
        listing = "\n".join(f"  {page}: {url}" for page, url in external[:20])
        raise NotebookFailure(f"the built book loads {len(external)} asset(s) from the network:\n{listing}")
    print(f"  {seconds:7.1f} s  jupyter-book build", file=stream, flush=True)
    return html / "index.html"


def retarget_colab_links(html_dir: Path) -> int:
    """Point every "Open in Colab" link of the built pages (the launch button) at the chapter's learner's notebook
    (``learner/``, plain Markdown) instead of its MyST source; return how many links changed."""
    from .learner import LEARNER_DIR

    pattern = re.compile(r"(https://colab\.research\.google\.com/github/[^\"'\s]*?/blob/[^/\"']+/)notebooks/")
    changed = 0
    for page in Path(html_dir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        new, n = pattern.subn(lambda m: m.group(1) + LEARNER_DIR + "/", text)
        if n:
            page.write_text(new, encoding="utf-8")
            changed += n
    return changed


#: A number written with a hyphen-minus: the package's one minus-sign rule (:data:`qkgeometry.formatting.MINUS_SIGN`).
HYPHEN_MINUS_NUMBER = MINUS_SIGN
#: Elements whose text is code, math or machinery: their hyphens stay.
_VERBATIM = {"code", "pre", "kbd", "samp", "script", "style", "textarea", "svg", "math"}


def _verbatim(tag) -> bool:
    classes = set(tag.get("class") or ())
    return tag.name in _VERBATIM or tag.name.startswith("mjx-") or bool(
        classes & {"math", "highlight", "MathJax", "notranslate"})


def true_minus_signs(html_dir: Path, count_only: bool = False) -> dict[str, int]:
    """Write every negative number of the built pages' prose, tables and text outputs with a true minus sign
    (U+2212) instead of a hyphen-minus, outside code and math; return, per page, how many there were (with
    ``count_only``, count and change nothing). Numbers the package writes already have one
    (:func:`qkgeometry.formatting.format_number`); this catches values that a chapter's own format string or a glued
    role wrote, by the same rule (:func:`qkgeometry.formatting.true_minus`)."""
    from bs4 import BeautifulSoup
    from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

    changed: dict[str, int] = {}
    for page in sorted(Path(html_dir).rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        if "-" not in text:
            continue
        soup = BeautifulSoup(text, "html.parser")
        body = soup.body or soup
        count = 0
        for node in list(body.find_all(string=HYPHEN_MINUS_NUMBER)):
            if isinstance(node, (Comment, Declaration, Doctype, ProcessingInstruction)) or node.parent is None:
                continue
            if any(_verbatim(a) for a in node.parents if getattr(a, "name", None)):
                continue
            new, n = HYPHEN_MINUS_NUMBER.subn(MINUS, str(node))
            if n and not count_only:
                node.replace_with(new)
            count += n
        if count:
            changed[str(page.relative_to(html_dir))] = count
            if not count_only:
                page.write_text(str(soup), encoding="utf-8")
    return changed


# ----------------------------------------------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.notebooks", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("execute", "build", "book"))
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to execute (default: every notebooks/*.ipynb)")
    parser.add_argument("--quick", action="store_true", help="run with QUICK=True (small, fast version)")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project root (default: current folder)")
    parser.add_argument("--build-dir", type=Path, default=None, help="default: <root>/_build")
    parser.add_argument("--out", type=Path, default=None,
                        help="where executed copies go (default: <build-dir>/executed/{quick,full})")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (default: python3)")
    parser.add_argument("--no-headline", action="store_true", help="skip drawing the intro's headline figure")
    args = parser.parse_intermixed_args(argv)

    root = args.root.resolve()
    build_dir = (args.build_dir or root / "_build").resolve()
    out = (args.out or executed_dir(build_dir, args.quick)).resolve()
    try:
        if args.command in ("execute", "book"):
            notebooks = args.notebooks or sorted((root / "notebooks").glob("*.ipynb"))
            if not notebooks:
                raise NotebookFailure(f"no notebooks found in {root / 'notebooks'}")
            execute_all(notebooks, out, args.quick, args.kernel)
        if args.command in ("build", "book"):
            index = build_book(root, out, build_dir, args.quick, headline=not args.no_headline)
            print(f"Book built: {index}")
    except NotebookFailure as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
