"""qkgeometry.recorded: the recorded experiments are package data, found by folder, and read without a checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import qkgeometry as qg
from qkgeometry import recorded_runs
from qkgeometry.recorded_runs import available


def test_the_chapters_experiments_are_installed_with_their_readmes():
    assert {"ch3-objectives", "expB-encoder-lr2e-4-10k"} <= set(available())
    for name in available():
        rec = qg.recorded(name)
        assert rec.path.is_dir() and rec.description.startswith("#")
        assert "qkgeometry" in str(rec.path) and "data" in rec.path.parts


def test_runs_are_found_by_folder(tmp_path, monkeypatch):
    """A run added to an experiment's folder is read with no change to the package (no list of runs)."""
    src = qg.recorded("expB-encoder-lr2e-4-10k").path
    root = tmp_path / "recorded"
    shutil.copytree(src, root / src.name)
    monkeypatch.setattr(recorded_runs, "recorded_root", lambda: root)
    before = set(qg.recorded(src.name).runs)
    shutil.copytree(root / src.name / "encoder-skew-s3", root / src.name / "encoder-skew-s99")
    (root / src.name / "not-a-run").mkdir()
    after = qg.recorded(src.name).runs
    assert set(after) == before | {"encoder-skew-s99"}
    # and a new experiment, the same way
    shutil.copytree(root / src.name, root / "expC-new")
    assert "expC-new" in available()


def test_logs_and_provenance():
    rec = qg.recorded("expB-encoder-lr2e-4-10k")
    logs = rec.logs(inits=("default", "symmetric"))
    assert set(logs["init"]) == {"default", "symmetric"} and set(logs["experiment"]) == {rec.name}
    assert set(logs["run"]) == {r for r in rec.runs if "-default-" in r or "-symmetric-" in r}
    assert set(rec.logs()["init"]) > {"default", "symmetric"}  # the controls too
    prov = rec.provenance("encoder-default-s0")
    assert prov["config"]["init"] == "default" and prov["config"]["seed"] == 0
    ch3 = qg.recorded("ch3-objectives")
    assert ch3.runs == {} and ch3.provenance()["runs_done"] > 0
    assert (ch3 / "scores.csv").is_file() and Path(os.fspath(ch3)) == ch3.path  # path-like


def test_unknown_names_fail_in_one_line_naming_what_is_there():
    with pytest.raises(FileNotFoundError) as err:
        qg.recorded("expZ-missing")
    msg = str(err.value)
    assert "'expZ-missing'" in msg and "ch3-objectives" in msg and "\n" not in msg
    for bad in ("", "../results", ".hidden", 3):
        with pytest.raises(ValueError, match=r"^name: "):
            qg.recorded(bad)
    with pytest.raises(ValueError, match="has no run 'nope'"):
        qg.recorded("ch3-objectives").provenance("nope")


def test_a_copy_without_package_data_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(recorded_runs, "recorded_root", lambda: tmp_path / "absent")
    assert available() == ()
    with pytest.raises(FileNotFoundError, match="no recorded experiments"):
        qg.recorded("ch3-objectives")


def test_read_from_another_folder_than_the_checkout(tmp_path):
    """The accessor reads from the package, not from the working directory."""
    code = ("import qkgeometry as qg; r = qg.recorded('expB-encoder-lr2e-4-10k'); "
            "print(len(r.runs), r.path.is_dir())")
    env = {**os.environ, "PYTHONPATH": str(Path(qg.__file__).parents[1])}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    n, ok = out.stdout.split()
    assert int(n) >= 12 and ok == "True"


# ------------------------------------------------------------------------------------------------ damaged records
def _copy(name: str, tmp_path: Path) -> recorded_runs.RecordedExperiment:
    folder = tmp_path / name
    shutil.copytree(recorded_runs.recorded_root() / name, folder)
    return recorded_runs.RecordedExperiment(name, folder)


@pytest.mark.parametrize("damage, needle", [
    (lambda run: (run / "provenance.json").write_text('{"config": {"init": "default"'), "not JSON text"),
    (lambda run: (run / "provenance.json").write_text('{"commit": "x"}'), "lacks 'config'"),
    (lambda run: (run / "provenance.json").write_text('{"config": {}}'), "lacks 'init'"),
    (lambda run: (run / "provenance.json").write_text('[1, 2]'), "a JSON list, not an object"),
    (lambda run: (run / "provenance.json").unlink(), "is missing"),
    (lambda run: (run / "log.csv").write_text(""), "is empty"),
    (lambda run: (run / "log.csv").write_bytes(b"step,loss\n1,\xff\xfe\n"), "not a readable CSV"),
    (lambda run: (run / "log.csv").write_text("step,loss\n"), "holds no rows"),
])
def test_damaged_recorded_data_is_one_clear_error_naming_the_file(tmp_path, damage, needle):
    from qkgeometry.errors import RecordError

    rec = _copy("expB-encoder-lr2e-4-10k", tmp_path)
    run = rec.runs["encoder-default-s0"]
    damage(run)
    with pytest.raises(RecordError, match=needle) as info:
        rec.logs(inits=("default", "symmetric"))
    line = str(info.value)
    assert "\n" not in line and str(run) in line and ("reinstall" in line or "permissions" in line), line


def test_damaged_training_records_are_one_clear_error_naming_the_file(tmp_path):
    from qkgeometry.errors import RecordError
    from qkgeometry.training.loop import read_log
    from qkgeometry.training.objective_runs import read_recorded

    (tmp_path / "log.csv").write_text("")
    with pytest.raises(RecordError, match=r"log\.csv' is empty"):
        read_log(tmp_path)
    rec = _copy("ch3-objectives", tmp_path)
    (rec.path / "provenance.json").write_text("{not json")
    with pytest.raises(RecordError, match=r"provenance\.json' is damaged \(not JSON"):
        read_recorded(rec.path)
    (rec.path / "provenance.json").write_text("{}")
    (rec.path / "scores.csv").write_text("")
    with pytest.raises(RecordError, match=r"scores\.csv' is empty"):
        read_recorded(rec.path)
