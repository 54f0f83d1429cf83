"""The rendered book works offline: local MathJax, no network scripts or stylesheets, warnings fail the build.

A tiny book (one page with math, a theorem, an exercise with a dropdown solution, a citation, and one executed
notebook) is built with the real configuration and the real pipeline. If the full book has been built
(``_build/html``), it is checked too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from tools import notebooks as runner

ROOT = Path(__file__).resolve().parents[2]

PAGE = r"""# Tiny

Inline $a^\top M b$ and display math

$$
\|M\|^2 = \|M_s\|^2 + \|M_n\|^2 .
$$

```{prf:theorem} Tiny theorem
:label: thm-tiny

$1 + 1 = 2$.
```

See {prf:ref}`thm-tiny`, {cite}`saponati2025` and {doc}`../notebooks/01_tiny`.

```{exercise}
:label: ex-tiny

Compute $1 + 1$.
```

````{solution} ex-tiny
:class: dropdown

Two.
````

```{bibliography}
```
"""


def _tiny_project(root: Path, page: str = PAGE) -> Path:
    (root / "book").mkdir(parents=True)
    (root / "notebooks").mkdir()
    shutil.copy2(ROOT / "_config.yml", root / "_config.yml")
    shutil.copy2(ROOT / "book" / "references.bib", root / "book" / "references.bib")
    shutil.copytree(ROOT / "book" / "_ext", root / "book" / "_ext", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "book" / "index.md").write_text(page)
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/index\nchapters:\n  - glob: notebooks/*\n")
    cells = [nbformat.v4.new_code_cell("QUICK = False", metadata={"tags": ["parameters"]}),
             nbformat.v4.new_markdown_cell("# Tiny notebook"),
             nbformat.v4.new_code_cell("print('QUICK is', QUICK)"),
             nbformat.v4.new_code_cell(
                 "import pandas as pd\npd.DataFrame({'width': [64, 384], 'mean': [0.016, 0.003]}).style.hide(axis='index')",
                 metadata={"mystnb": {"figure": {"name": "tbl-tiny", "caption": "A numbered table"}}})]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, str(root / "notebooks" / "01_tiny.ipynb"))
    return root


@pytest.fixture(scope="module")
def tiny_html(tmp_path_factory) -> Path:
    root = _tiny_project(tmp_path_factory.mktemp("tiny") / "proj")
    executed = root / "_build" / "executed" / "quick"
    runner.execute_all(sorted((root / "notebooks").glob("*.ipynb")), executed, quick=True)
    index = runner.build_book(root, executed, root / "_build", quick=True, headline=False)
    return index.parent


def _html_dirs(tiny_html: Path) -> list[Path]:
    built = ROOT / "_build" / "html"
    return [tiny_html] + ([built] if (built / "index.html").exists() else [])


@pytest.mark.slow
def test_no_page_loads_network_assets(tiny_html: Path):
    for html in _html_dirs(tiny_html):
        assert list(html.rglob("*.html")), f"no pages in {html}"
        assert runner.external_resources(html) == [], f"{html} loads assets from the network"


@pytest.mark.slow
def test_mathjax_is_local(tiny_html: Path):
    for html in _html_dirs(tiny_html):
        assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file(), f"{html}: MathJax was not copied"
        assert (html / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()
    page = (tiny_html / "book" / "index.html").read_text()
    assert 'src="../_static/mathjax/tex-chtml.js' in page
    assert "mathjax@3" not in page and "cdn.jsdelivr" not in page


@pytest.mark.slow
def test_directives_rendered(tiny_html: Path):
    page = (tiny_html / "book" / "index.html").read_text()
    assert "Tiny theorem" in page and "proof" in page.lower()
    assert "dropdown" in page and "solution" in page.lower()
    assert "Saponati" in page  # the citation resolved against book/references.bib
    assert "\\|M\\|^2" in page  # math left for MathJax


@pytest.mark.slow
def test_injected_parameters_are_hidden(tiny_html: Path):
    page = (tiny_html / "notebooks" / "01_tiny.html").read_text()
    assert "QUICK is True" in page  # executed with the injected value
    assert "Injected parameters" not in page and "# Parameters" not in page


def test_detector_flags_cdn_and_ignores_plain_links(tmp_path: Path):
    (tmp_path / "a.html").write_text(
        '<script src="https://cdn.example.org/x.js"></script>'
        '<link rel="stylesheet" href="//fonts.example.org/f.css">'
        '<link rel="canonical" href="https://example.org/page.html">'
        '<a href="https://example.org">link</a><script src="_static/local.js"></script>')
    found = runner.external_resources(tmp_path)
    assert [url for _, url in found] == ["https://cdn.example.org/x.js", "//fonts.example.org/f.css"]


@pytest.mark.slow
def test_broken_cross_reference_fails_the_build(tmp_path: Path):
    root = _tiny_project(tmp_path / "proj", page="# Broken\n\nSee {ref}`no-such-label`.\n")
    executed = root / "_build" / "executed" / "quick"
    runner.execute_all(sorted((root / "notebooks").glob("*.ipynb")), executed, quick=True)
    with pytest.raises(runner.NotebookFailure, match="no-such-label"):
        runner.build_book(root, executed, root / "_build", quick=True, headline=False)


# ----------------------------------------------------------------- book/_ext/presentation.py (how pages read)
def test_tab_title_is_plain_text(tmp_path: Path):
    page = "# Why $W_{qk}$ is directional\n\nText.\n"
    root = _tiny_project(tmp_path / "proj", page=page)
    executed = root / "_build" / "executed" / "quick"
    runner.execute_all(sorted((root / "notebooks").glob("*.ipynb")), executed, quick=True)
    html = runner.build_book(root, executed, root / "_build", quick=True, headline=False).parent
    title = (html / "book" / "index.html").read_text().split("<title>")[1].split("</title>")[0]
    assert "W_qk" in title and "\\(" not in title and "$" not in title


@pytest.mark.slow
def test_mathjax_is_loaded_on_pages_without_math(tiny_html: Path):
    # the sidebar can show chapter titles with math on any page, so every page loads MathJax
    for page in ("search.html", "genindex.html", "notebooks/01_tiny.html"):
        assert "_static/mathjax/tex-chtml.js" in (tiny_html / page).read_text(), page


@pytest.mark.slow
def test_numbered_table_renders_beside_its_caption_not_inside_it(tiny_html: Path):
    """A numbered table's caption comes first; the table must not render as caption text (inside <figcaption>)."""
    page = (tiny_html / "notebooks" / "01_tiny.html").read_text()
    start = page.index('id="tbl-tiny"')
    caption = page[page.index("<figcaption>", start):page.index("</figcaption>", start)]
    assert "Table 1" in caption and "A numbered table" in caption
    assert "<table" not in caption
    assert "<table" in page[page.index("</figcaption>", start):page.index("</figure>", start)]


@pytest.mark.slow
def test_proof_index_lists_titles_not_labels(tiny_html: Path):
    index = (tiny_html / "prf-prf.html").read_text()
    assert "Tiny theorem" in index and "Theorem" in index


@pytest.mark.slow
def test_bibliography_labels_are_author_year(tiny_html: Path):
    page = (tiny_html / "book" / "index.html").read_text()
    assert "Saponati et al. 2025" in page


@pytest.mark.slow
def test_code_wraps_instead_of_scrolling(tiny_html: Path):
    css = (tiny_html / "_static" / "qkgeometry.css").read_text()
    assert "pre-wrap" in css
    assert "qkgeometry.css" in (tiny_html / "book" / "index.html").read_text()


def test_tex_to_text():
    import importlib.util

    spec = importlib.util.spec_from_file_location("presentation", ROOT / "book" / "_ext" / "presentation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.tex_to_text(r"W_{qk}") == "W_qk"
    assert module.tex_to_text(r"W_Q R(\Delta) W_K^\top") == "W_Q R(Δ) W_Kᵀ"
    assert module.plain_title(r"Why \(W_{qk}\) is directional") == "Why W_qk is directional"
    assert module.plain_title("Does $W_Q = W_K$ help?") == "Does W_Q = W_K help?"


def test_presentation_keeps_figures_at_their_true_shape_and_wraps_inline_math():
    """The pure parts of book/_ext/presentation.py: the image size fix, the formula split, the reading time."""
    import sys

    from docutils import nodes

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import presentation
    finally:
        sys.path.pop(0)
    doc = nodes.paragraph()
    doc += nodes.image(uri="a.png", width="1091px", height="341px")
    doc += nodes.image(uri="b.png", width="50%")
    assert presentation.keep_true_shape(doc) == 1
    assert [dict(i.attributes).get("height") for i in doc.findall(nodes.image)] == [None, None]
    assert [i["width"] for i in doc.findall(nodes.image)] == ["1091px", "50%"]  # the width still caps the figure
    pieces = presentation.split_inline_math(r"x_i^\top M_s x_j = (x_i^\top M_s x_j)^\top = x_j^\top M_s x_i")
    assert len(pieces) == 3 and all(p.startswith("{}=") for p in pieces[1:])
    assert presentation.split_inline_math(r"\left( a = b \right) + \{x = 1\} + c_{i=1}") == [
        r"\left( a = b \right) + \{x = 1\} + c_{i=1}"]  # nothing inside a group is split
    assert presentation.reading_minutes(0, 0) == 1 and presentation.reading_minutes(1800, 4) == 12
    table = nodes.figure("", nodes.container("", nodes.paragraph(text="cells")), nodes.caption(text="What to read"),
                         ids=["tbl-x"])
    figure = nodes.figure("", nodes.image(uri="c.png"), nodes.caption(text="A figure"), ids=["fig-y"])
    page = nodes.section("", table, figure)
    assert presentation.tables_from_outputs(page) == 1
    first, second = page.children
    assert isinstance(first, presentation.numbered_table) and isinstance(first.children[0], nodes.caption)
    assert type(second) is nodes.figure  # figures stay figures


def test_presentation_sets_glued_sentences_in_the_texts_weight():
    import sys

    from docutils import nodes

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import presentation
    finally:
        sys.path.pop(0)
    verdict = nodes.inline(text="Encoders are more symmetric: gap 0.32 (95% CI 0.25 to 0.39).", classes=["pasted-text"])
    number = nodes.inline(text="0.32", classes=["pasted-text"])
    other = nodes.inline(text="a long phrase that is not glued at all here", classes=["other"])
    page = nodes.paragraph("", "", verdict, number, other)
    assert presentation.plain_glued_sentences(page) == 1
    assert "qkg-glued-sentence" in verdict["classes"] and number["classes"] == ["pasted-text"]
    assert "qkg-glued-sentence" not in other["classes"]
    assert "span.pasted-text.qkg-glued-sentence" in (ROOT / "book" / "_ext" / "static" / "qkgeometry.css").read_text()
