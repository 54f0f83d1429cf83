"""Single cells of the chapters, executed with stand-ins: the branches that a normal build never takes (no recorded
runs installed, a Hub survey where no model could be read) must end in one sentence, not in an exception."""

from __future__ import annotations

import types
from pathlib import Path

import nbformat
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
