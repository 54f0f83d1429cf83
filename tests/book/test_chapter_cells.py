"""Single cells of the chapters, executed with stand-ins: the branches that a normal build never takes (no recorded
runs installed, a Hub survey where no model could be read) must end in one sentence, not in an exception."""

from __future__ import annotations

import ast
import re
import types
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cells(name: str) -> dict[str, str]:
    nb = nbformat.read(str(ROOT / "notebooks" / name), as_version=4)
    return {c.get("id"): c.source for c in nb.cells if c.cell_type == "code"}


def _cells_using(name: str, needle: str) -> list[str]:
    return [s for s in _cells(name).values() if needle in s]


def test_chapter5_without_recorded_runs_skips_the_section(capsys):
    """Every cell that reads the recorded runs runs with RECORDED = None (formerly a NameError on ``enc_r``)."""
    glued = {}
    from IPython.display import Markdown

    ns = {"RECORDED": None, "glue": lambda k, v, display=True: glued.__setitem__(k, v), "pd": pd,
          "Markdown": Markdown}
    cells = _cells_using("05_symmetric_init.ipynb", "logs_r")
    assert len(cells) >= 5
    for source in cells:
        exec(compile(source, "<chapter 5 cell>", "exec"), ns)
    assert ns["logs_r"] is None and "No recorded runs" in capsys.readouterr().out
    assert glued["rec_verdict"] and glued["rec_outlook"]
    assert "not available without the recorded runs" in glued["gap_curve_key"]


def test_chapter5_reads_the_recorded_runs_from_the_package():
    setup = next(s for s in _cells("05_symmetric_init.ipynb").values() if "RECORDED =" in s)
    assert "../results" not in setup and 'recorded("expB-encoder-lr2e-4-10k")' in setup


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_no_chapter_reads_a_path_of_the_checkout(name):
    for source in _cells(name).values():
        assert "../results" not in source and '"../' not in source and "'../" not in source, name


def test_chapter4_hub_cell_with_no_readable_model_says_so(monkeypatch, capsys):
    from qkgeometry.readers import hub

    (source,) = _cells_using("04_model_survey.ipynb", "if USE_HUB:")
    failures = pd.DataFrame({"model": ["org/a", "org/b"], "error": ["RepoNotFound", "GatedRepo"]})
    empty = pd.DataFrame(columns=["model", "family", "init", "component", "layer", "head", "symmetry",
                                  "directionality"])
    empty.attrs["failures"] = failures
    monkeypatch.setattr(hub, "plan_table", lambda entries: pd.DataFrame())
    ns = {"USE_HUB": True, "Path": Path, "pd": pd, "display": lambda *a: None,
          "catalogue": types.SimpleNamespace(preset=lambda *a, **k: ["org/a", "org/b"]),
          "qg": types.SimpleNamespace(survey=lambda *a, **k: empty)}
    exec(compile(source, "<chapter 4 Hub cell>", "exec"), ns)
    out = capsys.readouterr().out
    assert ns["hub_layers"] is None and "No Hub model could be read" in out and "GatedRepo" in out


# ------------------------------------------------------------------------------------------------- exercises
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
_EXERCISE = re.compile(r"^(?:`{3,}|:{3,})\{exercise\}[^\n]*\n:label: ([\w-]+)", re.M)
_SOLUTION = re.compile(r"^(?P<fence>`{3,}|:{3,})\{solution\}[ \t]*(?P<label>[\w-]+)[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                       re.M | re.S)
_PYTHON = re.compile(r"^(?P<fence>`{3,})(?:python|py|ipython3?)[ \t]*\n(?P<code>.*?)^(?P=fence)[ \t]*$", re.M | re.S)
_CHECKER = re.compile(r"\b(check_\w+)\(")


@dataclass
class Exercise:
    """One exercise of a chapter: where its statement and its solution are (cell, place in the cell), the stub
    cells between them, and the Python of its solution."""

    label: str
    at: tuple[int, int]
    solution_at: tuple[int, int] | None = None
    stubs: list[str] = field(default_factory=list)
    solution_code: str = ""


def exercises(path: Path) -> list[Exercise]:
    nb = nbformat.read(str(path), as_version=4)
    found: dict[str, Exercise] = {}
    code: list[tuple[tuple[int, int], str]] = []
    for k, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            code.append(((k, 0), cell.source))
            continue
        if cell.cell_type != "markdown":
            continue
        for m in _EXERCISE.finditer(cell.source):
            found[m.group(1)] = Exercise(m.group(1), (k, m.start() + 1))
        for m in _SOLUTION.finditer(cell.source):
            ex = found.get(m.group("label"))
            assert ex is not None, f"{path.name}: a solution to {m.group('label')} before its exercise"
            ex.solution_at = (k, m.start() + 1)
            ex.solution_code = "\n".join(c.group("code") for c in _PYTHON.finditer(m.group("body")))
    for ex in found.values():
        end = ex.solution_at or (len(nb.cells), 0)
        ex.stubs = [source for at, source in code if ex.at < at < end]
    return list(found.values())


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_every_stub_comes_before_its_solution(path):
    """The learner meets the exercise, then the cell to fill in, then the collapsed solution."""
    found = exercises(path)
    assert found, f"{path.name}: no exercises"
    for ex in found:
        assert ex.solution_at is not None, f"{path.name}: {ex.label} has no solution"
        assert ex.stubs, f"{path.name}: {ex.label}'s cell to fill in comes after its solution (or there is none)"


def _placeholder(body: list[ast.stmt]) -> bool:
    """A stub's body that returns a fixed placeholder answer (``return (0, 0, 0)``), for a stub called inline."""
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return False
    try:
        ast.literal_eval(body[0].value)
    except ValueError:
        return False
    return True


def _raises_not_implemented(body: list[ast.stmt]) -> bool:
    return any(isinstance(node, ast.Raise) and node.exc is not None
               and "NotImplementedError" in ast.unparse(node.exc) for stmt in body for node in ast.walk(stmt))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_function_stubs_raise_not_implemented_error(path):
    """A function left to the learner says so (``NotImplementedError``, which its checker reports as "not yet");
    a body of ``...`` returns None, and the checker then fails somewhere inside with an error that looks like a bug
    of the package."""
    for ex in exercises(path):
        for source in ex.stubs:
            for node in ast.walk(ast.parse(source)):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                assert _raises_not_implemented(body) or _placeholder(body), (
                    f"{path.name}: {ex.label}'s stub {node.name}() neither raises NotImplementedError nor returns a "
                    "placeholder answer")


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_every_solution_calls_its_checker(path):
    """Running a solution shows its checker's verdict, as running the learner's own answer does."""
    for ex in exercises(path):
        wanted = {name for source in ex.stubs for name in _CHECKER.findall(source)}
        called = set(_CHECKER.findall(ex.solution_code))
        assert wanted <= called, f"{path.name}: the solution to {ex.label} does not call {sorted(wanted - called)}"


def test_chapter7_stubs_report_not_yet(capsys):
    """Chapter 7's stubs, run as they stand, reach their checkers' "not yet" with NotImplementedError."""
    from qkgeometry.exercises import head_behaviour

    path = next(p for p in CHAPTERS if p.name.startswith("07_"))
    ran = 0
    for ex in exercises(path):
        for source in ex.stubs:
            if "def " not in source:
                continue
            ns = {"np": np, **{name: getattr(head_behaviour, name) for name in head_behaviour.__all__}}
            exec(compile(source, f"<{ex.label}>", "exec"), ns)
            out = capsys.readouterr().out
            assert "not yet" in out and "NotImplementedError" in out, (ex.label, out)
            ran += 1
    assert ran >= 4
