"""The landing page's answers at a glance (tools/glance.py): each chapter's line quotes the chapter's own values."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from tools import glance

ROOT = Path(__file__).resolve().parents[2]
GLUE = re.compile(r"\{glue:text\}`([^`:]+)")


def test_every_chapter_has_a_line_and_every_line_a_chapter():
    stems = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    listed = [g.stem for g in glance.GLANCES]
    assert set(listed) <= set(stems)
    assert listed == sorted(listed)


@pytest.mark.parametrize("line", glance.GLANCES, ids=[g.stem[:2] for g in glance.GLANCES])
def test_each_quoted_value_is_one_its_chapter_quotes_itself(line: glance.Glance):
    source = (ROOT / "notebooks" / f"{line.stem}.ipynb").read_text(encoding="utf-8")
    for name in GLUE.findall(line.answer + line.evidence + line.caveat):
        assert re.search(r"\{glue:text\}`" + re.escape(name) + r"[`:]", source), f"{line.stem} never quotes {name!r}"


def _executed(tmp_path: Path, values: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    (root / "book").mkdir()
    shutil.copy(ROOT / "book" / "references.bib", root / "book" / "references.bib")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Survey")]
    nbformat.write(nb, str(root / "notebooks" / "04_model_survey.ipynb"))
    run = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.from_dict({"output_type": "display_data", "metadata": {"scrapbook": {"name": k}},
                                        "data": {"application/papermill.record/text/plain": v}})
                    for k, v in values.items()]
    run.cells = [nbformat.v4.new_markdown_cell("# Survey"), cell]
    executed = tmp_path / "executed"
    executed.mkdir()
    nbformat.write(run, str(executed / "04_model_survey.ipynb"))
    return root, executed


def test_a_line_writes_the_chapters_values_in_and_skips_chapters_not_executed(tmp_path: Path):
    values = {"sym_strength": "'separates the stacks'", "dir_strength": "'does not'",
              "paper_sym_n_encoder": "1234", "paper_sym_n_decoder": "69"}
    root, executed = _executed(tmp_path, values)
    text = glance.glance_table(root, executed)
    assert text.count("\n") == 1  # one chapter executed, one line
    assert "Symmetry separates the stacks; directionality does not." in text
    assert "The authors' 1,234 encoder and 69 decoder stacks" in text
    assert "{doc}`Chapter 4 <../notebooks/04_model_survey>`" in text


def test_a_missing_value_names_the_chapter_and_the_value(tmp_path: Path):
    root, executed = _executed(tmp_path, {"sym_strength": "'x'"})
    with pytest.raises(KeyError, match=r"04_model_survey.*dir_strength"):
        glance.glance_table(root, executed)
