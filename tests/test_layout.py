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
#: single chapter's. A chapter's code lives in a package by role (analyses, heads, surveying, training, ...).
ROOT_MODULES = {"__init__", "__main__", "_arrays", "_files", "_lazy", "_threads", "_validation", "_version", "cli",
                "decomposition", "devices", "errors", "limits", "model", "recorded_runs", "scores", "source_names",
                "stats", "tables"}


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
    (r"^def format_fixed\(", "stats.py"),
    (r"^def _true_minus\(", "tables.py"),  # the "no -0.000" rule and the true minus sign
    (r"^def format_number\(", "tables.py"),  # the one number formatter
    (r"^def judge\(", "stats.py"),
    (r"\bos\.replace\(", "_files.py"),  # every atomic write goes through _files.replacing
    (r"^def replacing\(", "_files.py"),
    (r"^def locked\(", "_files.py"),
    (r"^def rows_matching\(", "surveying/store.py"),
    (r"^class \w*Store\b", "surveying/store.py"),
    (r"argparse\.ArgumentParser\(", "cli.py"),  # one command line
])
def test_each_concept_has_one_definition(pattern, home):
    assert _where(pattern) == [home]


def test_every_exception_class_lives_in_errors():
    bases = {"Exception", "ValueError", "RuntimeError", "KeyError", "TypeError", "OSError", "KeyboardInterrupt"}
    homes = set()
    for path, text in SOURCES.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and any(
                    (isinstance(b, ast.Name) and (b.id in bases or b.id.endswith("Error"))) for b in node.bases):
                homes.add((str(path.relative_to(PACKAGE)), node.name))
    assert {h for h, _ in homes} == {"errors.py"}, sorted(homes)


def test_no_code_tells_errors_apart_by_their_text():
    found = _where(r"str\(e\)\.startswith\(|str\(exc\)\.startswith\(|in str\(e\)")
    assert not found, f"raise a subclass in errors.py and catch it instead: {found}"
