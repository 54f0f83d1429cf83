"""The house: packages by role, small modules, and one definition for each shared concept.

These tests read the source tree. Each concept below had several homes once; the test fails the day a second
definition comes back, and names the file to merge it into.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "qkgeometry"
SOURCES = {p: p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}
MAX_LINES = 600

#: The modules allowed at the root of the package: the core pipeline and its shared helpers, none of them a
#: single chapter's (``claims`` states the headlines of chapters 3, 4 and 5). A chapter's code lives in a package by
#: role (analyses, heads, surveying, training, ...). ``stats`` and ``power`` are the statistics every chapter reads.
ROOT_MODULES = {"__init__", "__main__", "_arrays", "_files", "_lazy", "_threads", "_validation", "_version", "claims",
                "cli", "decomposition", "devices", "errors", "formatting", "limits", "model", "power", "recorded_runs",
                "score_table", "scores", "source_names", "stats", "tables"}


def _where(pattern: str) -> list[str]:
    rx = re.compile(pattern, re.MULTILINE)
    return sorted(str(p.relative_to(PACKAGE)) for p, text in SOURCES.items() for _ in rx.finditer(text))


def test_no_module_is_over_the_line_limit():
    long = {str(p.relative_to(PACKAGE)): n for p, text in SOURCES.items() if (n := text.count("\n")) > MAX_LINES}
    assert not long, f"split these modules along their seams (at most {MAX_LINES} lines each): {long}"


def test_the_package_root_holds_only_the_core():
    root = {p.stem for p in PACKAGE.glob("*.py")}
    assert root <= ROOT_MODULES, f"move into a package by role: {sorted(root - ROOT_MODULES)}"
    assert not (PACKAGE / "loading.py").exists() and not (PACKAGE / "zoo.py").exists()


@pytest.mark.parametrize("pattern, home", [
    (r"^def is_torch_tensor\(", "_arrays.py"),
    (r"^def host_float64\(", "_arrays.py"),
    (r"^def as_float64\(", "_arrays.py"),
    (r"<<=? ?16\b", "_arrays.py"),  # bfloat16 widened one way (its codes shifted into a float32)
    (r"^def widened\(", "_arrays.py"),
    (r"^def default_device\(", "devices.py"),
    (r"^def resolve_device\(", "devices.py"),
    (r"^def format_interval\(", "stats.py"),
    (r"^def true_minus\(", "formatting.py"),  # the minus-sign rule (text, pages, learners' notebooks)
    (r"-\(\?=", "formatting.py"),  # ... and its one pattern: a "-" before a digit
    (r"^def format_number\(", "formatting.py"),  # the one number formatter
    (r"^def plural\(", "formatting.py"),  # "seed" -> "seeds", "family" -> "families"
    (r'"ies"', "formatting.py"),
    (r"^def judge\(", "stats.py"),
    (r"\bos\.replace\(", "_files.py"),  # every atomic write goes through _files.replacing
    (r"^def replacing\(", "_files.py"),
    (r"^def locked\(", "_files.py"),
    (r"FileLock\(", "_files.py"),  # one lock wrapper, with a bounded wait
    (r"^def check_regular_file\(", "_files.py"),  # one check of the files a reader opens
    (r"^def os_error\(", "_files.py"),
    (r"errno\.ENOSPC", "_files.py"),  # one table of what an OSError means
    (r"^def fingerprint\(", "_files.py"),
    (r"^def rows_matching\(", "surveying/store.py"),
    (r"^class \w*Store\b", "surveying/store.py"),
    (r"^CREATE TABLE IF NOT EXISTS models", "surveying/store_format.py"),  # the layout on disk, and its migration
    (r"^def migrate\(", "surveying/store_format.py"),
    (r"^def parse_survey_csv\(", "surveying/store_csv.py"),  # the store's CSV side
    (r"argparse\.ArgumentParser\(", "cli.py"),  # one command line
    (r"^def projection_names\(", "architectures/registry.py"),  # which modules are attention: the registry says
    (r"^def attention_paths\(", "readers/module.py"),
    (r"^def open_model\(", "readers/__init__.py"),  # a source, a QKModel or a random twin, opened one way
    (r"^def layer_rows\(", "score_table.py"),  # the one per-layer scoring path
])
def test_each_concept_has_one_definition(pattern, home):
    assert _where(pattern) == [home]


#: built-in exception bases a class may derive from (by name); any base spelled ``*Error``/``*Exception`` counts too,
#: bare or through a module (``errors.SourceError``)
EXCEPTION_BASES = {"Exception", "BaseException", "ValueError", "RuntimeError", "KeyError", "TypeError", "OSError",
                   "KeyboardInterrupt", "Warning", "UserWarning", "LimitExceeded", "NonFiniteWeights"}


def _base_name(node: ast.expr) -> str:
    """The last name of a class base: ``SourceError`` for ``SourceError``, ``errors.SourceError`` and
    ``qkgeometry.errors.SourceError``; the subscripted name of ``Generic[...]``-style bases."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def exception_classes(text: str) -> list[str]:
    """The classes of ``text`` (source code) that derive from an exception, however the base is spelled."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and any(
                (n := _base_name(b)) in EXCEPTION_BASES or n.endswith(("Error", "Exception")) for b in node.bases):
            found.append(node.name)
    return found


def test_every_exception_class_lives_in_errors():
    homes = {(str(path.relative_to(PACKAGE)), name) for path, text in SOURCES.items()
             for name in exception_classes(text)}
    assert {h for h, _ in homes} == {"errors.py"}, sorted(homes)


@pytest.mark.parametrize("code, classes", [
    ("class A(ValueError): pass", ["A"]),
    ("from . import errors\nclass B(errors.SourceError): pass", ["B"]),
    ("import qkgeometry\nclass C(qkgeometry.errors.ConfigError): pass", ["C"]),
    ("class D(Warning): pass\nclass E: pass\nclass F(dict): pass", ["D"]),
])
def test_the_exception_class_rule_sees_every_spelling_of_a_base(code, classes):
    assert exception_classes(code) == classes


#: methods that read an error's text to tell errors apart
TEXT_TESTS = {"startswith", "endswith", "partition", "rpartition", "split", "rsplit", "find", "rfind", "index",
              "rindex", "count", "removeprefix", "removesuffix", "casefold", "lower", "upper"}


def text_tests(text: str) -> list[int]:
    """Lines of ``text`` (source code) that tell errors apart by their text: inside an ``except ... as e`` handler,
    ``str(e)`` / ``e.args`` / ``repr(e)`` (or a name bound to one of them) tested with ``in`` / ``==``, or read
    with a string method such as ``startswith`` or ``partition``."""
    lines = []
    for handler in ast.walk(ast.parse(text)):
        if not isinstance(handler, ast.ExceptHandler) or handler.name is None:
            continue
        err = handler.name

        def of_error(node: ast.AST, names: set[str], err: str = err) -> bool:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr") \
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == err:
                return True
            if isinstance(node, ast.Attribute) and node.attr in ("args", "msg", "strerror") \
                    and isinstance(node.value, ast.Name) and node.value.id == err:
                return True
            if isinstance(node, ast.Subscript):
                return of_error(node.value, names)
            return isinstance(node, ast.Name) and node.id in names

        names: set[str] = set()
        body = ast.Module(body=handler.body, type_ignores=[])
        for node in ast.walk(body):  # names bound to the error's text: msg = str(e)
            if isinstance(node, ast.Assign) and of_error(node.value, names):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(body):
            if (isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn, ast.Eq, ast.NotEq))
                                                     for op in node.ops) \
                    and any(of_error(x, names) for x in (node.left, *node.comparators))) or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in TEXT_TESTS and of_error(node.func.value, names)):
                lines.append(node.lineno)
    return lines


def test_no_code_tells_errors_apart_by_their_text():
    found = {str(p.relative_to(PACKAGE)): lines for p, text in SOURCES.items() if (lines := text_tests(text))}
    assert not found, f"raise a subclass in errors.py and catch it instead (file: lines): {found}"


@pytest.mark.parametrize("code, caught", [
    ("try: f()\nexcept OSError as e:\n    msg = str(e)\n    if 'Permission denied' in msg: pass", True),
    ("try: f()\nexcept ValueError as e:\n    name, _, rest = str(e).partition(' ')", True),
    ("try: f()\nexcept ValueError as exc:\n    ok = str(exc).startswith('bad')", True),
    ("try: f()\nexcept ValueError as e:\n    ok = e.args[0] == 'bad'", True),
    ("try: f()\nexcept ValueError as e:\n    raise RuntimeError(str(e)) from e", False),
    ("try: f()\nexcept ValueError as e:\n    msg = str(e)\n    print(msg.replace('a', 'b'))", False),
])
def test_the_error_text_rule_sees_through_names_and_methods(code, caught):
    assert bool(text_tests(code)) is caught


def test_the_hub_reader_is_a_package_in_pipeline_order():
    hub = PACKAGE / "readers" / "hub"
    assert {p.stem for p in hub.glob("*.py")} == {"__init__", "client", "plan", "cache", "fetch"}
    former = ("hub", "hub_cache", "hub_fetch", "hub_plan", "remote")  # the flat modules it replaced
    assert not any((PACKAGE / "readers" / f"{m}.py").exists() for m in former)


@pytest.mark.parametrize("pattern", [
    r'"F8_E4M3": ',  # dtype tables (a tag as a key)
    r'"BF16": ',
    r"\.weight_scale_inv",  # the suffixes of quantisation scales
    r"^\w*GAP = ",  # how close two ranges must be to be read as one
    r"^def (join_ranges|row_ranges|row_pieces)\(",  # range coalescing
])
def test_the_safetensors_format_has_one_home(pattern):
    assert set(_where(pattern)) == {"readers/safetensors_format.py"}


# ------------------------------------------------------------------------------------------------ formatting
def _imports(text: str) -> set[str]:
    """The modules ``text`` imports, relative ones as written (``.tables``, ``..formatting``)."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found |= {base} if node.module else {base + a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_formatting_sits_below_the_modules_that_write_text():
    """stats (numbers) and tables (presentation) both format through formatting; stats never imports tables."""
    stats, tables = SOURCES[PACKAGE / "stats.py"], SOURCES[PACKAGE / "tables.py"]
    assert not {m for m in _imports(stats) if m.endswith("tables")}, "stats must not import from tables"
    assert ".formatting" in _imports(stats) and ".formatting" in _imports(tables)
    assert not {m for m in _imports(SOURCES[PACKAGE / "formatting.py"]) if m.startswith(".")}, \
        "formatting imports nothing of the package"


#: Numeric format specifications of f-strings: the type letters that write a number.
_NUMBER_SPEC = re.compile(r"[eEfFgG%n]$|^[+\- ]|,")

#: Modules whose text reaches a terminal or an error, never a page (their f-strings may format numbers freely):
#: the readers' and installers' messages, the command lines and progress lines, the exercise checkers' feedback.
NOT_BOOK_TEXT = ("readers/", "catalogue/", "exercises/", "cli.py", "score_table.py", "_files.py", "training/cli.py",
                 "training/objective_runs.py", "training/loop.py", "formatting.py")

#: Formats in book-text modules that write no text a reader sees (a key, a CSS length) or only values that cannot be
#: negative (a p-value, an effect-size floor): file -> the formatted expressions.
NOT_TEXT = {
    "stats.py": {"p", "floor", "self.floor"},  # p-values and floors are >= 0
    "analyses/nulls.py": {"level"},  # column names "q0.05"
    "plotting/interactive.py": {"2 * length"},  # a CSS dash length
    "heads/hypotheses.py": {"self.auc", "self.low", "self.high"},  # an AUC and its interval lie in [0, 1]
}


def hand_formatted(text: str) -> list[tuple[int, str, str]]:
    """``(line, expression, spec)`` of every f-string field of ``text`` (source code) that formats a number with a
    format specification (``{x:+.3f}``, ``{share:.0%}``, ``{n:,}``), outside ``raise``, ``print`` and warnings."""
    tree = ast.parse(text)
    skip: set[int] = set()
    for node in ast.walk(tree):
        inside = isinstance(node, ast.Raise) or (
            isinstance(node, ast.Call) and (getattr(node.func, "id", "") == "print"
                                            or getattr(node.func, "attr", "") in ("warn", "info", "debug",
                                                                                   "warning")))
        if inside:
            skip |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None and id(node) not in skip:
            spec = "".join(v.value for v in node.format_spec.values if isinstance(v, ast.Constant))
            if _NUMBER_SPEC.search(spec):
                found.append((node.lineno, ast.unparse(node.value), spec))
    return found


def _book_text_findings(path: Path) -> list[tuple[int, str, str]]:
    name = str(path.relative_to(PACKAGE))
    allowed = NOT_TEXT.get(name, set())
    return [f for f in hand_formatted(SOURCES[path]) if f[1] not in allowed]


def test_book_text_formats_numbers_through_the_one_formatter():
    """A number a page shows goes through :func:`qkgeometry.formatting.format_number` (``spec=`` for a format
    string's ``+.3f`` or ``.0%``): a hand-written ``f"{x:+.3f}"`` prints a hyphen-minus and ``−0.000``."""
    found = {str(p.relative_to(PACKAGE)): f for p in SOURCES
             if not str(p.relative_to(PACKAGE)).startswith(NOT_BOOK_TEXT) and (f := _book_text_findings(p))}
    assert not found, f"write these numbers with format_number(value, spec=...) (file: line, expression, spec): {found}"


@pytest.mark.parametrize("code, found", [
    ('s = f"{v.interval.estimate:+.3f} nats"', [(1, "v.interval.estimate", "+.3f")]),
    ('s = f"{share:.0%} of {n:,} heads"', [(1, "share", ".0%"), (1, "n", ",")]),
    ('s = f"{name!r}: {x}, {label:>6}"', []),
    ('raise ValueError(f"got {x:.3f}")', []),
    ('print(f"{seconds:.0f} s")', []),
])
def test_the_formatter_rule_sees_format_strings(code, found):
    assert hand_formatted(code) == found


# ----------------------------------------------------------------------------------------------------- tools
TOOLS = PACKAGE.parents[1] / "tools"
TOOL_SOURCES = {p: p.read_text() for p in sorted(TOOLS.rglob("*.py"))}


def test_no_tool_is_over_the_line_limit():
    long = {str(p.relative_to(TOOLS)): n for p, text in TOOL_SOURCES.items() if (n := text.count("\n")) > MAX_LINES}
    assert not long, f"split these tools along their seams (at most {MAX_LINES} lines each): {long}"


def test_the_tools_write_minus_signs_by_the_packages_rule():
    """The book's tooling (learners' notebooks, built pages) and the page check use formatting's minus-sign rule,
    never a pattern of their own."""
    pages = PACKAGE.parents[1] / "tests" / "book" / "test_rendered_pages.py"
    texts = {**{str(p.relative_to(TOOLS)): t for p, t in TOOL_SOURCES.items()}, "page check": pages.read_text()}
    own = sorted(name for name, text in texts.items() if "-(?=" in text)
    assert not own, f"use qkgeometry.formatting.true_minus / MINUS_SIGN in: {own}"


def test_the_tools_import_in_one_direction():
    """No two tools import each other (the slide maker and the learners' notebooks share their citation code
    through a module both import)."""
    edges = {(p.stem, m.lstrip(".").split(".")[0]) for p, text in TOOL_SOURCES.items() for m in _imports(text)
             if m.startswith(".")}
    cycles = sorted((a, b) for a, b in edges if (b, a) in edges and a < b)
    assert not cycles, f"these tools import each other: {cycles}"


def test_the_repository_and_colabs_list_each_have_one_home():
    """The repository's URL is _config.yml's (tools/repository.py reads it); the path of Colab's list is
    tools/floors.py's: no other code spells either."""
    import yaml

    root = PACKAGE.parents[1]
    url = yaml.safe_load((root / "_config.yml").read_text())["repository"]["url"].rstrip("/")
    code = {p: p.read_text() for p in [*PACKAGE.rglob("*.py"), *TOOLS.rglob("*.py"), *(root / "tests").rglob("*.py")]}
    spelled = sorted(str(p.relative_to(root)) for p, text in code.items() if url.split("//", 1)[1] in text)
    assert not spelled, f"read the repository from tools.repository (_config.yml), not: {spelled}"
    colab = sorted(str(p.relative_to(root)) for p, text in code.items() if '"colab" / "pip-' + 'freeze.txt"' in text)
    assert colab == ["tools/floors.py"], colab
    from tools import repository

    assert url == repository.REPOSITORY_URL and f"git+{url}" == repository.PIP_REQUIREMENT


# ------------------------------------------------------------------------------------------------ layers
def _imports_outside_getattr(text: str) -> set[str]:
    """The modules ``text`` imports, leaving out those a module-level ``__getattr__`` imports (a moved name's
    redirect)."""
    tree = ast.parse(text)
    redirect = {id(n) for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "__getattr__"
                for n in ast.walk(f)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and id(node) not in redirect:
            found.add("." * node.level + (node.module or ""))
    return found


@pytest.mark.parametrize("path", sorted((PACKAGE / "analyses").glob("*.py")), ids=lambda p: p.stem)
def test_analyses_take_what_they_need_from_the_layer_below(path):
    """An analysis reads models (QKModel, load_qk/open_model), never a file format itself (the rotary settings come
    through the model) and never runs a survey (surveying sits beside the analyses, not below them)."""
    text = SOURCES[path]
    imported = _imports_outside_getattr(text)
    assert not {m for m in imported if m.startswith("..surveying")}, f"{path.name} runs surveys: {imported}"
    formats = {m for m in imported if m.startswith("..readers.")}
    assert not formats, f"{path.name} reads a file format itself: {formats}"
    assert "json.loads" not in text and ".read_text(" not in text, f"{path.name} reads files itself"


def test_tests_import_no_private_name_of_the_package():
    """A test reaches the package through its public names: a private one (``_name``) may change at any time."""
    root = PACKAGE.parents[1] / "tests"
    found = {}
    for path in sorted(root.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("qkgeometry"):
                base = PACKAGE.parent.joinpath(*node.module.split("."))
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                           and not (base / f"{a.name}.py").exists()]  # a private module a test mirrors is fine
                if private:
                    found.setdefault(str(path.relative_to(root)), []).extend(private)
    assert not found, f"import these through public names: {found}"


def test_every_test_that_needs_a_gpu_carries_the_device_mark():
    """A test skipped where CUDA is absent is marked ``device``, so that ``pytest -m device`` on a GPU machine runs
    every one of them (and only them)."""
    root = PACKAGE.parents[1] / "tests"
    found = []
    for path in sorted(root.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            marks = [ast.unparse(d) for d in node.decorator_list]
            needs_gpu = any("skipif(not torch.cuda.is_available()" in m for m in marks)
            if needs_gpu and "pytest.mark.device" not in marks:
                found.append(f"{path.relative_to(root)}::{node.name}")
    assert not found, f"mark these @pytest.mark.device: {found}"
