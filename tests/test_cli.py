"""The `qkgeometry` command line, run as a user would (a subprocess) and in-process."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from qkgeometry.cli import main


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qkgeometry.cli", *args], capture_output=True, text=True,
                          timeout=300)


def test_score_prints_table_and_writes_csv(tmp_path):
    out = tmp_path / "sub" / "minilm.csv"
    res = run("score", "offline:minilm-l6", "--per", "head", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "symmetry" in res.stdout and "directionality" in res.stdout and "median [q25, q75]" in res.stdout
    frame = pd.read_csv(out)
    assert len(frame) == 72 and set(frame["head"]) == set(range(12))


def test_architectures_lists_adapters(capsys):
    assert main(["architectures"]) == 0
    text = capsys.readouterr().out
    for model_type in ("bert", "gpt2", "llama", "qwen2"):
        assert model_type in text


def test_errors_are_one_clear_line(capsys):
    assert main(["score", "./no/such/folder"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qkgeometry score: error: `source` './no/such/folder' does not exist")
    assert "Traceback" not in err


def test_score_and_survey_input_norm(capsys, tmp_path):
    assert main(["score", "offline:minilm-l6", "--input-norm", "folded", "--out", str(tmp_path / "f.csv")]) == 0
    assert "input-norm gains folded" in capsys.readouterr().out
    folded = pd.read_csv(tmp_path / "f.csv")
    assert main(["score", "offline:minilm-l6", "--out", str(tmp_path / "r.csv")]) == 0
    assert not folded["symmetry"].equals(pd.read_csv(tmp_path / "r.csv")["symmetry"])
    out = tmp_path / "s.csv"
    assert main(["survey", "offline:minilm-l6", "--input-norm", "folded", "--out", str(out)]) == 0
    survey = pd.read_csv(out)
    assert (survey["input_norm"] == "folded").all()
    assert survey["symmetry"].tolist() == pytest.approx(folded["symmetry"].tolist(), abs=1e-12)


def test_a_bug_is_not_reported_as_a_user_error(monkeypatch, capsys):
    """A KeyError (or IndexError, TypeError, RuntimeError) from inside the package is a bug: it is reported as
    unexpected (status 1), and QKGEOMETRY_DEBUG=1 shows its traceback."""
    import qkgeometry.surveying.scoring as scoring

    def broken(*args, **kwargs):
        raise KeyError("internal")

    monkeypatch.setattr(scoring, "score_model", broken)
    monkeypatch.delenv("QKGEOMETRY_DEBUG", raising=False)
    assert main(["score", "offline:minilm-l6"]) == 1
    assert "unexpected KeyError" in capsys.readouterr().err
    monkeypatch.setenv("QKGEOMETRY_DEBUG", "1")
    with pytest.raises(KeyError, match="internal"):
        main(["score", "offline:minilm-l6"])
