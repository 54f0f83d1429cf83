"""What a learner's notebook shows before it is run (tools/learner_outputs.py): the book's own outputs, as the
learner's cells would show them, and nothing about the build."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from tools.learner_outputs import GLUE_PREFIX, learner_outputs, outputs_by_cell, shown_texts

from tools import learner

ROOT = Path(__file__).resolve().parents[2]
LEARNER = sorted((ROOT / learner.LEARNER_DIR).glob("*.ipynb"))
PNG = "iVBORw0KGgo="


def _glue(name: str, mime: str, value) -> dict:
    return {"output_type": "display_data", "data": {GLUE_PREFIX + mime: value},
            "metadata": {"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}}}


def test_glued_values_show_as_the_learners_glue_shows_them():
    shown = learner_outputs([_glue("share", "text/plain", "-0.12345"), _glue("n", "text/plain", "10033"),
                             _glue("verdict", "text/plain", "'no detectable difference'")])
    assert [o["text"] for o in shown] == ["share: −0.123\n", "n: 10,033\n", "verdict: no detectable difference\n"]


def test_a_glued_sentence_in_markdown_keeps_its_markdown_under_its_name():
    shown = learner_outputs([_glue("curve", "text/markdown", "- **holds** across the curve")])
    assert shown[0] == {"output_type": "stream", "name": "stdout", "text": "curve:\n"}
    assert shown[1]["data"] == {"text/markdown": "- **holds** across the curve"}


def test_an_interactive_figure_keeps_its_picture_and_loses_its_script():
    html = '<div class="qkg-interactive"><script>Plotly.newPlot()</script></div>'
    shown = learner_outputs([{"output_type": "display_data", "metadata": {"image/png": {"width": 600}},
                              "data": {"text/html": html, "image/png": PNG, "text/plain": "<Figure>"}}])
    assert shown == [{"output_type": "display_data", "data": {"image/png": PNG},
                      "metadata": {"image/png": {"width": 600}}}]


def test_build_notes_warnings_and_errors_do_not_reach_the_learner():
    note = '<div class="admonition note qkg-mode-note" data-mode="quick"><p>small runs</p></div>'
    shown = learner_outputs([
        {"output_type": "display_data", "data": {"text/html": note, "text/plain": "note"}, "metadata": {}},
        {"output_type": "stream", "name": "stderr", "text": "UserWarning: something\n"},
        {"output_type": "error", "ename": "ValueError", "evalue": "x", "traceback": []},
        {"output_type": "stream", "name": "stdout", "text": "printed line\n"},
        {"output_type": "execute_result", "execution_count": 3, "metadata": {},
         "data": {"text/html": "<table><tr><td>1</td></tr></table>", "text/plain": "table",
                  "application/vnd.plotly.v1+json": {}}},
    ])
    assert [o["output_type"] for o in shown] == ["stream", "display_data"]
    assert shown[0]["text"] == "printed line\n"
    assert set(shown[1]["data"]) == {"text/html", "text/plain"}


def test_a_learners_notebook_carries_the_outputs_of_its_executed_chapter(tmp_path: Path):
    src = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('hi')")
    src.cells = [nbformat.v4.new_markdown_cell("# Chapter"), cell]
    path = tmp_path / "01_first.ipynb"
    nbformat.write(src, str(path))
    run = json.loads(path.read_text())
    run["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hi\n"},
                                  {"output_type": "display_data", "metadata": {}, "data": {"image/png": PNG}}]
    run = nbformat.from_dict(run)
    nb = learner.learner_notebook(path, run, learner.chapter_labels([path]))
    (code,) = [c for c in nb.cells if c.cell_type == "code"]
    assert code.outputs == outputs_by_cell(run)[cell.id]
    assert shown_texts(code) == ["hi\n"]
    nbformat.validate(nb)


def _figure_name(cell) -> str:
    return str(cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name", ""))


@pytest.mark.parametrize("path", LEARNER, ids=[p.stem[:2] for p in LEARNER])
def test_the_learners_notebook_can_be_read_before_it_is_run(path: Path):
    """Every figure of the chapter is a picture under its cell, every table is shown, and every sentence the
    chapter glues in as Markdown is in the notebook, in its text or under the cell that computes it."""
    source = nbformat.read(str(ROOT / "notebooks" / path.name), as_version=4)
    nb = nbformat.read(str(path), as_version=4)
    by_source = {c.metadata.get("qkgeometry", {}).get("cell"): c for c in nb.cells if c.cell_type == "code"}
    for cell in source.cells:
        name = _figure_name(cell)
        if cell.cell_type != "code" or not name:
            continue
        outputs = by_source[cell.id].get("outputs", [])
        kinds = {m for o in outputs for m in o.get("data", {})}
        if name.startswith("fig-"):
            assert kinds & {"image/png", "image/svg+xml"}, f"{path.name}: {name} has no picture under its cell"
        else:
            assert kinds & {"text/html", "text/markdown", "image/png"}, f"{path.name}: {name} shows no table"
    text = "\n".join([c.source for c in nb.cells if c.cell_type == "markdown"]
                     + [t for c in nb.cells if c.cell_type == "code" for t in shown_texts(c)])
    values = nb.metadata["qkgeometry"]["values"]
    for key, value in values.items():
        if "text/markdown" in value:
            first = next((line.strip(" -*") for line in str(value["text/markdown"]).splitlines() if line.strip()), "")
            assert first[:40] in text, f"{path.name}: the glued sentence {key!r} does not reach the learner"
