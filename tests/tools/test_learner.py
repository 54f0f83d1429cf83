"""The learners' notebooks (tools/learner.py): plain Markdown that Colab renders, every number visible, every
reference resolved, and a check that reads them as a CommonMark renderer does."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tools import learner
from tools import notebooks as runner

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LEARNER = sorted((ROOT / learner.LEARNER_DIR).glob("*.ipynb"))


def test_check_finds_the_myst_a_commonmark_renderer_would_show():
    text = ("A share of {glue:text}`share:.0%`, see {numref}`fig-a` and {prf:ref}`thm-a`.\n\n"
            "```{exercise}\n:label: ex-a\n\nDo it.\n```\n\n(sec-x)=\n## Next\n\n:class: dropdown\n")
    found = learner.myst_leftovers(text)
    for token in ("{glue:text}", "{numref}", "{prf:ref}", "```{exercise}", ":label:", "(sec-x)=", ":class:"):
        assert token in found, (token, found)
    # code is code: roles in inline code and in a Python block are what a reader should see there
    assert learner.myst_leftovers("Write `{glue:text}` like this:\n\n```python\nx = '{doc}'\n```\n") == []


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem[:2] for p in SOURCES])
def test_check_fails_on_the_myst_sources(path: Path):
    """The check is not vacuous: every chapter as written (MyST) shows raw MyST to a CommonMark renderer."""
    assert len(learner.notebook_leftovers(path)) > 0


def _tiny_chapter(tmp_path: Path) -> tuple[Path, Path]:
    """A two-chapter book in miniature, with every construct the chapters use, and its executed copy."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    install = nbformat.v4.new_code_cell('import sys\nif "google.colab" in sys.modules:\n    pass')
    install.metadata["tags"] = ["remove-cell"]
    badge = nbformat.v4.new_markdown_cell("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
                                          "(https://colab.research.google.com/github/o/r/blob/main/notebooks/"
                                          "01_first.ipynb)")
    badge.metadata["tags"] = ["remove-cell"]
    head = nbformat.v4.new_markdown_cell(
        "# The first chapter\n\n```{admonition} Key results\n:class: tip qkg-front-door\n\n"
        "- The gap is {glue:text}`gap:.2f` ({glue:text}`n` heads).\n```\n\n"
        "```{prf:theorem} Split\n:label: thm-split\n\nIt splits.\n```\n\n```{prf:proof}\nTranspose.\n```\n\n"
        "$$\na = b\n$$ (eq-ab)\n\nBy {prf:ref}`thm-split` and {eq}`eq-ab`, see {numref}`fig-one`, {numref}`tbl-one`, "
        "{doc}`02_second`, {cite:t}`saponati2025` and {ref}`sec-later`.")
    code = nbformat.v4.new_code_cell("from myst_nb import glue\nglue('gap', -0.1234, display=False)\n"
                                     "glue('n', 12345, display=False)")
    code.metadata["tags"] = ["remove-cell"]
    fig = nbformat.v4.new_code_cell("plot()")
    fig.metadata["mystnb"] = {"figure": {"name": "fig-one", "caption": "A figure of {glue:text}`gap:.1f`."}}
    table = nbformat.v4.new_code_cell("table()")
    table.metadata["mystnb"] = {"figure": {"name": "tbl-one", "caption": "A table."}}
    exercises = nbformat.v4.new_markdown_cell(
        "(sec-later)=\n## Exercises\n\n```{exercise}\n:label: ex-one\n\nWrite `f`.\n```\n")
    stub = nbformat.v4.new_code_cell("def f():\n    raise NotImplementedError")
    solution = nbformat.v4.new_markdown_cell(
        "````{solution} ex-one\n:class: dropdown\n\n```python\ndef f():\n    return 1\n```\n\nBecause "
        "{prf:ref}`thm-split`.\n````\n\n```{exercise}\n:label: ex-two\n\nAnd `g`.\n```")
    first = nbformat.v4.new_notebook(cells=[install, badge, head, code, fig, table, exercises, stub, solution])
    second = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Second\n\n```{prf:theorem} Other\n"
                                                                           ":label: thm-other\n\nX.\n```")])
    nbformat.write(first, str(nbs / "01_first.ipynb"))
    nbformat.write(second, str(nbs / "02_second.ipynb"))
    executed = tmp_path / "executed"
    executed.mkdir()
    run = nbformat.read(str(nbs / "01_first.ipynb"), as_version=4)
    run.cells[3].outputs = [
        nbformat.v4.new_output("display_data", {"text/plain": "-0.1234"}, metadata={"scrapbook": {"name": "gap"}}),
        nbformat.v4.new_output("display_data", {"text/plain": "12345"}, metadata={"scrapbook": {"name": "n"}})]
    nbformat.write(run, str(executed / "01_first.ipynb"))
    nbformat.write(second, str(executed / "02_second.ipynb"))
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "references.bib").write_text(
        "@article{saponati2025,\n  author = {Saponati, Matteo and Sager, Pascal},\n  year = {2025},\n}\n")
    return tmp_path, executed


def test_builder_resolves_every_construct(tmp_path: Path):
    root, executed = _tiny_chapter(tmp_path)
    first, _second = learner.build_learner_notebooks(root, executed, tmp_path / "out", "full")
    nb = nbformat.read(str(first), as_version=4)
    nbformat.validate(nb)
    text = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert learner.notebook_leftovers(nb) == []
    assert "> **Key results**" in text and "The gap is \u22120.12 (12,345 heads)" in text  # true minus, separators
    assert "> **Theorem 1.1 (Split).**" in text and "> *Proof.*" in text
    assert "\\tag{1.1}" in text and "By Theorem 1.1 and (1.1), see Fig. 1.1, Table 1.1" in text
    assert "Saponati and Sager (2025)" in text and "the section ‘Exercises’ of chapter 1" in text
    assert "learner/02_second.ipynb" in text and "blob/main/learner/01_first.ipynb" in text
    assert "**Fig. 1.1.** A figure of \u22120.1." in text
    assert "### Exercise 1.1" in text and "### Exercise 1.2" in text and "### Solution to Exercise 1.1" in text
    # the table's caption sits above its cell, the figure's below
    kinds = [c.source.split(".")[0] if c.cell_type == "markdown" else c.source for c in nb.cells]
    assert kinds.index("**Table 1") < kinds.index("table()") and kinds.index("**Fig") > kinds.index("plot()")
    # the solution's code is a code cell of its own (running the notebook runs it), folded in Colab
    solution = [c for c in nb.cells if learner.SOLUTION_TAG in c.metadata.get("tags", [])]
    assert any(c.cell_type == "code" and "return 1" in c.source for c in solution)
    heading = next(c for c in solution if c.source.startswith("###"))
    assert nb.metadata["colab"]["collapsed_sections"] == [heading.metadata["id"]]
    # the glue cell shows what it computes; the hidden one is folded, not dropped
    glue_cell = next(c for c in nb.cells if c.cell_type == "code" and "glue('gap'" in c.source)
    assert learner.LEARNER_GLUE_IMPORT in glue_cell.source and glue_cell.metadata["cellView"] == "form"
    # the values are recorded: the notebook rebuilds from them alone, identically
    again = learner.build_learner_notebooks(root, None, tmp_path / "again", "full", values_from=tmp_path / "out")
    assert again[0].read_text() == first.read_text()
    # the students' copy: solutions out, exercises in
    (student,) = [p for p in runner.write_student_notebooks(root, tmp_path / "student", learner=tmp_path / "out")
                  if p.name == "01_first.ipynb"]
    copy = nbformat.read(str(student), as_version=4)
    assert not any("return 1" in c.source for c in copy.cells)
    assert sum(c.source == runner.SOLUTION_PLACEHOLDER for c in copy.cells) == 1
    assert "### Exercise 1.2" in "\n".join(c.source for c in copy.cells)


def test_builder_fails_on_a_value_the_build_lacks(tmp_path: Path):
    root, executed = _tiny_chapter(tmp_path)
    run = nbformat.read(str(executed / "01_first.ipynb"), as_version=4)
    run.cells[3].outputs = []
    nbformat.write(run, str(executed / "01_first.ipynb"))
    with pytest.raises(KeyError, match="gap"):
        learner.build_learner_notebooks(root, executed, tmp_path / "out", "full")


def test_every_chapter_has_a_learners_notebook():
    assert [p.name for p in LEARNER] == [p.name for p in SOURCES]


@pytest.mark.parametrize("path", LEARNER, ids=[p.stem[:2] for p in LEARNER])
def test_learners_notebook_shows_no_myst(path: Path):
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    assert learner.notebook_leftovers(nb) == []
    badge = next(c.source for c in nb.cells[:3] if "colab-badge" in c.source)
    assert f"blob/main/{learner.LEARNER_DIR}/{path.name}" in badge


@pytest.mark.parametrize("path", LEARNER, ids=[p.stem[:2] for p in LEARNER])
def test_learners_notebook_is_up_to_date_with_its_chapter(path: Path, tmp_path: Path):
    """Rebuilt from the chapter as it is now and the values it recorded, it is the same file: a chapter edited
    without `python -m tools.learner build` fails here."""
    (again,) = learner.build_learner_notebooks(ROOT, None, tmp_path, "full", notebooks=[path],
                                               values_from=path.parent)
    assert again.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
        f"{path.name} is out of date: run `python -m tools.learner build --values-from learner` (or rebuild it from "
        "an executed build)")


@pytest.mark.parametrize("path", LEARNER, ids=[p.stem[:2] for p in LEARNER])
def test_every_exercise_has_its_solution_as_code(path: Path):
    source = nbformat.read(str(ROOT / "notebooks" / path.name), as_version=4)
    n = sum(len(re.findall(r"^(?:`{3,}|:{3,})\{solution\}", c.source, flags=re.M))
            for c in source.cells if c.cell_type == "markdown")
    nb = nbformat.read(str(path), as_version=4)
    heads = [c for c in nb.cells if learner.SOLUTION_TAG in c.metadata.get("tags", [])
             and c.source.startswith("#")]
    assert len(heads) == n
    assert len(nb.metadata["colab"]["collapsed_sections"]) == n


def test_built_pages_get_true_minus_signs_outside_code_and_math_and_colab_opens_the_learners_notebook(tmp_path):
    page = tmp_path / "notebooks" / "02_scores.html"
    page.parent.mkdir()
    page.write_text(
        '<html><body><a href="https://colab.research.google.com/github/o/r/blob/main/notebooks/02_scores.ipynb">'
        "Colab</a><p>A gap of -0.05 [-0.1, 0.2] in layer-3, 2-3 times.</p><table><tr><td>-1.5</td></tr></table>"
        '<pre>x = -1</pre><code>-2</code><span class="math notranslate nohighlight">\\(-3\\)</span></body></html>',
        encoding="utf-8")
    assert runner.true_minus_signs(tmp_path, count_only=True) == {"notebooks/02_scores.html": 3}
    assert runner.true_minus_signs(tmp_path) == {"notebooks/02_scores.html": 3}
    text = page.read_text(encoding="utf-8")
    assert "\u22120.05 [\u22120.1, 0.2] in layer-3, 2-3" in text and "<td>\u22121.5</td>" in text
    assert "<pre>x = -1</pre>" in text and "<code>-2</code>" in text and "\\(-3\\)" in text
    assert runner.true_minus_signs(tmp_path) == {}
    assert runner.retarget_colab_links(tmp_path) == 1
    assert "blob/main/learner/02_scores.ipynb" in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("raw", ["-.5", '"-6"', "|-7", "a gap of -0.05 in layer-3"])
def test_glued_text_and_built_pages_write_minus_signs_by_the_packages_rule(raw, tmp_path):
    """The learners' notebooks and the built pages write a minus sign where the package's formatter would: one
    rule (qkgeometry.formatting.true_minus), so that a value reads the same in the book, on Colab and on a slide."""
    from qkgeometry.formatting import true_minus
    from tools import commonmark

    ctx = commonmark.Context(learner.Chapter(1, "01_x", "x"), learner.Labels(), {"v": {"text/plain": repr(raw)}}, "full")
    assert commonmark._glue_text("v", ctx) == true_minus(raw)
    page = tmp_path / "p.html"
    page.write_text(f"<html><body><p>{raw}</p></body></html>", encoding="utf-8")
    runner.true_minus_signs(tmp_path)
    assert f"<p>{true_minus(raw)}</p>" in page.read_text(encoding="utf-8").replace("&quot;", '"')
