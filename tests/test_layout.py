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
                "cli", "decomposition", "devices", "errors", "limits", "model", "recorded_runs", "scores", "source_names",
                "power", "stats", "tables"}


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
    (r"^def default_device\(", "devices.py"),
    (r"^def resolve_device\(", "devices.py"),
    (r"^def format_interval\(", "stats.py"),
    (r"^def _true_minus\(", "tables.py"),  # the "no -0.000" rule and the true minus sign
    (r"^def format_number\(", "tables.py"),  # the one number formatter
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
    (r"argparse\.ArgumentParser\(", "cli.py"),  # one command line
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
