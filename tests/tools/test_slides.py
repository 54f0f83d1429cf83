"""Slide decks from executed chapters: key results with the glued numbers, figures, exercises, no network."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import nbformat
import pytest

from tools import slides

ROOT = Path(__file__).resolve().parents[2]
PNG = base64.b64decode(  # a 1 x 1 white pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==")


def _glue(name: str, text: str):
    return nbformat.v4.new_output("display_data", data={"application/papermill.record/text/plain": text},
                                  metadata={"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}})


def _chapter() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    front = ("# Two scores, two axes\n\n```{admonition} Key results\n:class: tip qkg-front-door\n\n"
             "- The median layer scores {glue:text}`gap:.2f` above its twin ($W_{qk}$, see {numref}`fig-x`).\n"
             "- **Directionality** scatters: {glue:text}`verdict`\n```\n")
    code = nbformat.v4.new_code_cell("glue('gap', 0.123456)\nfig = plot()")
    code.outputs = [_glue("gap", "0.123456"), _glue("verdict", "'No detectable difference: d 0.1 (95% CI -0.2 to 0.3).'"),
                    nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(PNG).decode()})]
    code.metadata["mystnb"] = {"figure": {"name": "fig-x", "caption": "Scores of {glue:text}`gap:.1f` layers."},
                               "image": {"alt": "A scatter of the two scores"}}
    exercise = "```{exercise}\n:label: ex-x\n\nWrite `my_score(M)` for $M \\in \\mathbb R^{d\\times d}$.\n```\n"
    nb.cells = [nbformat.v4.new_markdown_cell(front), code, nbformat.v4.new_markdown_cell(exercise)]
    return nb


def test_deck_fills_in_the_chapters_numbers_and_shows_its_figures_and_exercises(tmp_path):
    executed = tmp_path / "executed"
    executed.mkdir()
    nbformat.write(_chapter(), str(executed / "02_scores.ipynb"))
    session = slides.Session(2, "The scores", "02_scores")
    (deck,) = slides.write_decks(executed, tmp_path / "slides", sessions=(session,))
    text = deck.read_text()
    assert "0.12 above its twin" in text and "No detectable difference: d 0.1 (95% CI \u22120.2 to 0.3)." in text
    assert r"\(W_{qk}\)" in text and "<strong>Directionality</strong>" in text and "{glue" not in text
    # a reference reads as the book numbers it, and the Key results are a list whose markers show
    assert "{numref}" not in text and "fig-x" not in text and "see Fig. 2.1)" in text
    assert "<ul>" in text and "overflow-x: auto; overflow-y: hidden; }\nsection.slide li" not in text
    assert 'src="session-2/figure-1.png" alt="A scatter of the two scores"' in text
    assert (tmp_path / "slides" / "session-2" / "figure-1.png").read_bytes() == PNG
    assert "Scores of 0.1 layers." in text
    assert "<code>my_score(M)</code>" in text and "<h2>Exercise 2.1</h2>" in text  # numbered as in the book
    assert "<h2>Fig. 2.1: Scores of 0.1 layers</h2>" in text  # titled by its caption, not "Fig. 2.1" alone
    assert not re.search(r"""(?:src|href)=["'](?:https?:)?//""", text)  # nothing from the network
    assert 'src="../_static/mathjax/tex-chtml.js"' in text and 'href="../book/instructor.html"' in text


def test_a_session_without_an_executed_chapter_or_with_a_broken_image_is_a_one_line_error(tmp_path):
    with pytest.raises(slides.DeckError, match="session 1: no executed chapter") as missing:
        slides.write_decks(tmp_path, tmp_path / "slides", sessions=slides.SESSIONS[:1])
    assert "\n" not in str(missing.value)
    nb = _chapter()
    nb.cells[1].outputs[2]["data"]["image/png"] = "bm90IGEgcG5n"  # base64 of "not a png"
    nbformat.write(nb, str(tmp_path / "02_scores.ipynb"))
    with pytest.raises(slides.DeckError, match="session 2: figure fig-x of 02_scores: its image/png output is not") as bad:
        slides.write_decks(tmp_path, tmp_path / "slides", sessions=(slides.Session(2, "The scores", "02_scores"),))
    assert "\n" not in str(bad.value)


def test_every_session_of_the_course_module_has_a_deck_linked_from_the_teachers_page():
    course = (ROOT / "book" / "course_module.md").read_text()
    teachers = (ROOT / "book" / "instructor.md").read_text()
    numbered = {int(n) for n in re.findall(r"^## Session (\d+)", course, re.M)}
    numbered |= {int(n) for n in re.findall(r"session (\d+) —", course)}
    assert numbered <= {s.number for s in slides.SESSIONS}
    for session in slides.SESSIONS:
        assert (ROOT / "notebooks" / f"{session.notebook}.ipynb").is_file()
        assert f'href="../slides/{session.file_name}"' in teachers


def test_a_prediction_session_shows_the_hypotheses_and_a_poll_before_any_result():
    nb = _chapter()
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(
        "### The hypotheses\n\nWhy these, at length.\n\n*Predictions of the algebra:*\n\n| | heads | expected |\n"
        "|---|---|---|\n| H1 | sink | lower |\n\n*Empirical hypotheses:*\n\n| | heads | expected |\n|---|---|---|\n"
        "| H2 | previous | lower |\n\n### Next\n"))
    table = nbformat.v4.new_code_cell("table")
    table.metadata["mystnb"] = {"figure": {"name": "tbl-results", "caption": "Every hypothesis."}}
    table.outputs = [nbformat.v4.new_output("display_data", data={"text/html": "<table><tr><td>H1</td></tr></table>"})]
    nb.cells.append(table)
    session = slides.Session(4, "Heads", "07_heads", predict="The hypotheses", results_table="tbl-results")
    text = slides.deck_html(nb, session, ["f.png"])
    order = [text.index(s) for s in ("Predict first: Predictions of the algebra</h2>", "<td>H1</td>",
                                     "Predict first: Empirical hypotheses</h2>", "<td>H2</td>", "<h2>Poll</h2>",
                                     "<h2>Fig. 7.1", "<h2>The results</h2>", "<h2>Key results</h2>")]
    assert order == sorted(order), order
    assert "at length" not in text  # the chapter's prose about the hypotheses stays on its page
    assert "Table 7.1." in text


def test_deck_reads_references_as_words_shows_theory_and_escapes_paths():
    nb = _chapter()
    theory = ("```{prf:corollary} Energies of the parts\n:label: cor-energies\n\n$\\|M\\|^2 = \\|M_s\\|^2 + "
              "\\|M_n\\|^2$.\n```\n\nBy {prf:ref}`cor-energies` and {cite:t}`saponati2025`, see "
              "{doc}`../book/notation` and {doc}`chapter two <02_scores>`.")
    theory += "\n\n```{exercise}\n:label: ex-y\n\nAs {cite:t}`saponati2025` in {doc}`chapter two <02_scores>`.\n```\n"
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(theory))
    nb.cells[0].source = nb.cells[0].source.replace("{numref}`fig-x`", "{prf:ref}`cor-energies`; {doc}`../book/notation`")
    nb.cells[2].metadata["mystnb"]["figure"]["caption"] = "Scores per layer. Hover over a point; the table above lists them."
    session = slides.Session(1, "The decomposition", "01_toeplitz_decomposition")
    text = slides.deck_html(nb, session, ['a"><script>x</script>.png'], chapter_page='p.html"><script>y</script>',
                            citations={"saponati2025": "Saponati et al. 2025"})
    assert "<script>x</script>" not in text and "<script>y</script>" not in text
    assert "&quot;&gt;&lt;script&gt;" in text
    assert "cor-energies" not in text and "{doc}" not in text and "saponati2025" not in text
    assert "see Corollary 1.1; " in text  # in the Key results
    assert '<a href="../book/notation.html">the book\'s notation page</a>' in text
    assert '<a href="../notebooks/02_scores.html">chapter two</a>' in text and "As Saponati et al. (2025)" in text
    assert "<h2>Corollary 1.1: Energies of the parts</h2>" in text  # a theory slide
    assert "Hover" not in text and "table above" not in text and "Scores per layer." in text
    bib = (ROOT / "book" / "references.bib").read_text()
    assert slides.citation_names(bib)["saponati2025"] == "Saponati et al. 2025"


@pytest.mark.parametrize("text", ['{"cells": [\n', "not json\nat all", '{"a": 1}'])
def test_a_chapter_that_is_not_a_notebook_is_a_one_line_error_naming_it(tmp_path, text):
    """An executed chapter cut short (or any file that is not a notebook) fails its deck in one line that names the
    file, not with nbformat's NotJSONError quoting the file's first characters."""
    (tmp_path / "02_scores.ipynb").write_text(text)
    with pytest.raises(slides.DeckError, match=r"02_scores\.ipynb: not a notebook") as bad:
        slides.write_decks(tmp_path, tmp_path / "slides", sessions=(slides.Session(2, "The scores", "02_scores"),))
    assert "\n" not in str(bad.value)


def _css_px(rule: str, width: int = 1280, root_px: float = 16.0) -> float:
    """The font size in px of a ``font-size: clamp(a rem, b vw, c rem)`` rule at a screen ``width`` px wide."""
    low, fluid, high = re.search(r"font-size: clamp\(([\d.]+)rem, ([\d.]+)vw, ([\d.]+)rem\)", rule).groups()
    return min(max(float(low) * root_px, float(fluid) * width / 100), float(high) * root_px)


def test_decks_project_text_at_28_px_and_figures_at_about_90_percent_of_the_slide():
    style = slides._STYLE
    body = next(line for line in style.splitlines() if line.startswith("section.slide li, section.slide p {"))
    assert _css_px(body) >= 28, body
    assert _css_px(body, width=390) >= 16  # and stays readable on a phone
    figure = re.search(r"section\.slide\.qkg-figure-slide img \{ max-height: (\d+)vh; \}", style)
    assert figure and int(figure.group(1)) >= 85, "a figure slide's figure should fill about 90% of its height"
    phone = style[style.index("@media (max-width: 600px)"):]
    assert "section.slide.qkg-figure-slide img { max-height: none; }" in phone  # a phone scrolls it sideways


def test_a_session_opens_with_its_poll_and_comes_back_to_it():
    session = next(s for s in slides.SESSIONS if s.number == 4)
    assert session.opening_poll and "previous-token head" in session.opening_poll
    text = slides.deck_html(_chapter(), slides.Session(4, "Heads", "07_heads", opening_poll="Which part, $M_s$?"),
                            ["f.png"])
    sections = re.findall(r"<section class=\"slide[^\"]*\">(.*?)</section>", text, flags=re.S)
    assert "<h2>Poll</h2>" in sections[1] and "Which part" in sections[1]  # right after the title
    assert "<h2>Back to the poll</h2>" in sections[-2] and "Which answers survived?" in sections[-2]
