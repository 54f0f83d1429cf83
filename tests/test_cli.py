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
    import qkgeometry.score_table as score_table

    def broken(*args, **kwargs):
        raise KeyError("internal")

    monkeypatch.setattr(score_table, "layer_rows", broken)
    monkeypatch.delenv("QKGEOMETRY_DEBUG", raising=False)
    assert main(["score", "offline:minilm-l6"]) == 1
    assert "unexpected KeyError" in capsys.readouterr().err
    monkeypatch.setenv("QKGEOMETRY_DEBUG", "1")
    with pytest.raises(KeyError, match="internal"):
        main(["score", "offline:minilm-l6"])


# ------------------------------------------------------------------------------------------------ options refused
def _tiny_folder(folder) -> str:
    import json

    import torch
    from safetensors.torch import save_file

    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
         "num_key_value_heads": 2, "intermediate_size": 16, "vocab_size": 20}))
    gen = torch.Generator().manual_seed(0)
    save_file({f"model.layers.0.self_attn.{p}_proj.weight": torch.randn(8, 8, generator=gen) for p in "qk"},
              str(folder / "model.safetensors"))
    return str(folder)


@pytest.mark.parametrize("options, needle", [
    (["--num-std", "nan"], "--num-std must be a finite number"),
    (["--num-std", "-1"], "--num-std must be a finite number"),
    (["--device", "bogus"], "--device must be 'cpu', 'cuda', 'cuda:N'"),
    (["--dask-scheduler", ""], "--dask-scheduler '' is not a scheduler address"),
    (["--dask-scheduler", "tcp://"], "--dask-scheduler 'tcp://' is not a scheduler address"),
    (["--dask-scheduler", "localhost"], "--dask-scheduler 'localhost' is not a scheduler address"),
    (["--dask-scheduler", "tcp://host:99999"], "--dask-scheduler 'tcp://host:99999' is not a scheduler address"),
    (["--dask-scheduler", "http://host:8786"], "--dask-scheduler 'http://host:8786' is not a scheduler address"),
    (["--dask-scheduler", "tcp://a b:1"], "is not a scheduler address"),
    (["--dask-scheduler", "ucx://10.0.0.5:8786"], "the ucx:// protocol is not supported"),
])
def test_bad_survey_options_are_refused_naming_the_option_before_the_store_is_created(tmp_path, capsys, options,
                                                                                        needle):
    from bounded import no_hang, one_line_error

    source = _tiny_folder(tmp_path / "m")
    for out in ("r.sqlite", "r.csv"):
        with no_hang(60):
            rc = main(["survey", source, *options, "--out", str(tmp_path / out)])
        one_line_error(capsys, rc, needle)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["m"], "a file was left behind"
    if options[0] != "--dask-scheduler":
        one_line_error(capsys, main(["score", source, *options, "--out", str(tmp_path / "s.csv")]), needle)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


@pytest.mark.parametrize("options, needle", [
    ([], "--out must be a .sqlite store or a .csv file"),
    (["--workers", "0"], "--workers must be 1 or more"),
])
def test_a_refused_survey_leaves_no_folder_it_would_have_written_into(tmp_path, capsys, options, needle):
    from bounded import one_line_error

    source = _tiny_folder(tmp_path / "m")
    out = "results.txt" if not options else "results.sqlite"
    one_line_error(capsys, main(["survey", source, *options, "--out", str(tmp_path / "new" / "dir" / out)]), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"], "a folder was left behind"


def test_an_unreachable_scheduler_is_refused_before_the_store_is_created(tmp_path, capsys, monkeypatch):
    import socket

    from bounded import import_distributed, no_hang, one_line_error

    import_distributed()
    source = _tiny_folder(tmp_path / "m")
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("QKGEOMETRY_DASK_TIMEOUT", "3s")
    with no_hang(90):
        rc = main(["survey", source, "--dask-scheduler", f"tcp://127.0.0.1:{port}", "--out",
                   str(tmp_path / "r.sqlite")])
    one_line_error(capsys, rc, f"--dask-scheduler 'tcp://127.0.0.1:{port}': cannot reach the scheduler")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    with no_hang(90):  # nor the folder of a store in a new folder
        rc = main(["survey", source, "--dask-scheduler", f"tcp://127.0.0.1:{port}", "--out",
                   str(tmp_path / "new" / "r.sqlite")])
    one_line_error(capsys, rc, "cannot reach the scheduler")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_max_params_that_selects_nothing_is_refused(tmp_path, capsys, value):
    from bounded import one_line_error

    one_line_error(capsys, main(["survey", "--preset", "offline", "--max-params", value, "--plan"]), "--max-params",
                   "above 0")
    one_line_error(capsys, main(["survey", "--preset", "offline", "--max-params", value, "--out",
                                 str(tmp_path / "r.sqlite")]), "--max-params")
    assert not any(tmp_path.iterdir())
    import qkgeometry as qg

    with pytest.raises(ValueError, match="`max_params_b` must be"):
        qg.catalogue.preset("offline", max_params_b=float(value))


@pytest.mark.parametrize("options, needle", [
    (["--num-std", "nan"], "--num-std must be a finite number"),
    (["--device", "bogus"], "--device must be 'cpu', 'cuda', 'cuda:N'"),
    (["--dask-scheduler", ""], "--dask-scheduler '' is not a scheduler address"),
])
def test_bad_trajectory_options_are_refused_before_the_store_is_created(tmp_path, capsys, options, needle):
    from bounded import one_line_error

    run = tmp_path / "run"
    run.mkdir()
    _tiny_folder(run / "checkpoint-10")
    one_line_error(capsys, main(["trajectory", str(run), *options, "--out", str(tmp_path / "t.sqlite")]), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
