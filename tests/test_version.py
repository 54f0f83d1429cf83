"""The version is written once, in the package, and the package metadata reads it from there."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import qkgeometry

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_reads_the_version_from_the_package():
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "qkgeometry._version.__version__"


def test_built_metadata_has_the_package_version(tmp_path):
    """What `pip install .` would record, built from this tree's pyproject.toml (offline, no build isolation)."""
    code = ("import sys; from setuptools import build_meta as b; "
            "print(b.prepare_metadata_for_build_wheel(sys.argv[1]))")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    metadata = (tmp_path / res.stdout.split()[-1] / "METADATA").read_text()
    assert f"\nVersion: {qkgeometry.__version__}\n" in metadata


def test_installed_metadata_has_the_package_version():
    try:
        dist = importlib.metadata.distribution("qkgeometry")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("qkgeometry is not installed (imported from a source tree)")
    url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    if url.startswith("file://") and Path(url[len("file://"):]).resolve() != ROOT:
        pytest.skip(f"the installed qkgeometry comes from another tree ({url})")
    assert dist.version == qkgeometry.__version__
