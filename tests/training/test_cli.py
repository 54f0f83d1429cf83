"""Tests for qkgeometry.training.cli: `qkgeometry train` is derived from TrainConfig, `qkgeometry train-objectives`
from ObjectiveConfig, and both refuse bad settings with one clear line (exit status 2) before any work."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import qkgeometry as qg
from qkgeometry.cli import main as qkgeometry_main
from qkgeometry.training.cli import (
    GRID_FIELDS,
    check_out_folders,
    configs_from_args,
    configure_objectives_parser,
    configure_train_parser,
    flag,
    objective_config_from_args,
)
from qkgeometry.training.config import ObjectiveConfig, TrainConfig
from qkgeometry.training.objective_runs import objectives_command

RECORDED = qg.recorded("ch3-objectives")  # path-like


def _parser():
    import argparse

    return configure_train_parser(argparse.ArgumentParser(prog="qkgeometry train"))


def test_every_trainconfig_field_is_an_option_with_the_same_default_help_and_choices():
    parser = _parser()
    actions = {a.dest: a for a in parser._actions}
    for f in dataclasses.fields(TrainConfig):
        action = actions[f.name]
        assert flag(f.name) in action.option_strings
        expected = [f.default] if f.name in GRID_FIELDS else f.default
        assert action.default == expected, f.name
        assert f.metadata["help"] in action.help, f.name
        assert action.choices == f.metadata.get("choices"), f.name
    args = parser.parse_args(["--out", "x"])
    (name, config), = configs_from_args(args).items()
    assert name == "encoder-default-s0" and config == TrainConfig()


def test_options_reach_the_config_and_a_grid_gives_one_config_per_combination():
    args = _parser().parse_args(["--out", "x", "--schedule", "constant", "--hidden", "64", "--init", "default",
                                 "symmetric", "--seed", "0", "1"])
    configs = configs_from_args(args)
    assert sorted(configs) == ["encoder-default-s0", "encoder-default-s1", "encoder-symmetric-s0",
                               "encoder-symmetric-s1"]
    assert {(c.schedule, c.hidden) for c in configs.values()} == {("constant", 64)}


@pytest.mark.parametrize("bad, message", [
    (["--chunk", "0"], "--chunk must be a positive number of steps; got 0."),
    (["--chunk", "-1"], "--chunk must be a positive number of steps; got -1."),
    (["--hidden", "0"], "--hidden must be a positive integer; got 0."),
    (["--threads", "-3"], "--threads must be a positive number of CPU threads; got -3."),
    (["--layers", "0"], "--layers must be a positive integer; got 0."),
    (["--vocab-size", "3"], "--vocab-size must be larger than the 5 special tokens; got 3."),
    (["--hidden", "130"], "--hidden must be a multiple of heads; got hidden 130 and heads 4."),
    (["--lr", "inf"], "--lr must be a finite positive number; got inf."),
    (["--lr", "nan"], "--lr must be a finite positive number; got nan."),
    (["--weight-decay", "nan"], "--weight-decay must be a finite number >= 0; got nan."),
    (["--weight-decay", "inf"], "--weight-decay must be a finite number >= 0; got inf."),
    (["--vocab-size", "10000000000"], "--vocab-size must be at most 1,000,000; got 10,000,000,000."),
    (["--threads", "100000"], f"--threads must be at most the number of CPUs of this machine ({os.cpu_count()}); "
                              "got 100000."),
])
def test_bad_settings_are_one_line_and_exit_2(bad, message, capsys, tmp_path):
    out = ["--out", str(tmp_path / "run")]
    assert qkgeometry_main(["train", *out, *bad]) == 2
    assert capsys.readouterr().err == f"qkgeometry train: error: {message}\n"
    assert not (tmp_path / "run").exists(), "nothing may be written before the settings are checked"


def test_the_documented_torchrun_entry_point_runs():
    """`torchrun -m qkgeometry train ...` runs this module: the one command line, with its subcommand."""
    res = subprocess.run([sys.executable, "-m", "qkgeometry", "train", "--help"], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert "--schedule" in res.stdout and "--vocab-size" in res.stdout
def test_cli_trains_a_grid(tiny_data, tmp_path, monkeypatch, capsys):
    from qkgeometry.cli import main

    monkeypatch.setattr("qkgeometry.training.loop.prepare_data", lambda *a, **k: tiny_data)
    rc = main(["train", "--init", "default", "symmetric", "--steps", "2", "--log-every", "1", "--hidden", "32",
               "--layers", "1", "--heads", "2", "--ffn", "32", "--seq-len", "16", "--batch-size", "4",
               "--eval-batches", "1", "--vocab-size", str(tiny_data.vocab_size), "--out", str(tmp_path / "g"),
               "--cache", str(tmp_path), "--no-progress"])
    assert rc == 0
    assert (tmp_path / "g" / "encoder-symmetric-s0" / "log.csv").is_file()
    assert "encoder-default-s0" in capsys.readouterr().out




# ------------------------------------------------------------------------------------------------ --out
def test_an_empty_out_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log.csv").write_text("step\n0\n")
    assert qkgeometry_main(["train", "--out", ""]) == 2
    assert capsys.readouterr().err == ("qkgeometry train: error: --out must name a folder for the run's files; got "
                                       "an empty path.\n")
    assert (tmp_path / "log.csv").read_text() == "step\n0\n"


def _recorded_run(folder: Path, config: TrainConfig | None) -> None:
    folder.mkdir(parents=True)
    (folder / "log.csv").write_text("step,train_loss\n0,\n")
    if config is not None:
        (folder / "provenance.json").write_text(json.dumps({"config": config.to_dict()}))


@pytest.mark.parametrize("grid", [False, True])
def test_an_out_holding_another_runs_log_is_refused(grid, capsys, tmp_path):
    run = tmp_path / "run" / ("encoder-default-s0" if grid else "")
    _recorded_run(run, TrainConfig(steps=500))
    seeds = ["--seed", "0", "1"] if grid else []
    assert qkgeometry_main(["train", "--out", str(tmp_path / "run"), "--steps", "20", *seeds]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds the log of another run (steps 500 there, 20 here)" in err
    assert (run / "log.csv").is_file()


def test_a_log_without_provenance_is_refused_and_the_same_run_is_resumed(tmp_path):
    _recorded_run(tmp_path / "orphan", None)
    with pytest.raises(ValueError, match="without a readable provenance"):
        check_out_folders({"r": TrainConfig()}, tmp_path / "orphan")
    _recorded_run(tmp_path / "same", TrainConfig(steps=20))
    assert check_out_folders({"r": TrainConfig(steps=20)}, tmp_path / "same") == {"r": tmp_path / "same"}
    configs = {"a": TrainConfig(seed=0), "b": TrainConfig(seed=1)}
    assert check_out_folders(configs, tmp_path / "new") == {"a": tmp_path / "new" / "a", "b": tmp_path / "new" / "b"}


# ------------------------------------------------------------------------------------------ train-objectives
def _objectives_parser():
    import argparse

    return configure_objectives_parser(argparse.ArgumentParser(prog="qkgeometry train-objectives"))


def test_every_objectiveconfig_field_is_an_option_with_the_same_default_and_help():
    parser = _objectives_parser()
    actions = {a.dest: a for a in parser._actions}
    for f in dataclasses.fields(ObjectiveConfig):
        assert actions[f.name].default == f.default and f.metadata["help"] in actions[f.name].help, f.name
    args = parser.parse_args(["--out", "x"])
    assert objective_config_from_args(args) == ObjectiveConfig()
    assert args.seeds == [0, 1, 2, 3, 4] and args.vocab_size == 8000 and args.gradient_batches == 2


def test_the_recorded_command_still_parses_to_its_config():
    prov = json.loads((RECORDED / "provenance.json").read_text())
    words = prov["command"].split()
    assert words[:3] == ["python", "-m", "qkgeometry.training.objectives"]  # its former name; the options still parse
    args = _objectives_parser().parse_args([*words[3:-2], "--out", "x"])
    cfg = objective_config_from_args(args)
    assert cfg == ObjectiveConfig(**prov["config"])
    assert (args.seeds, args.objectives, args.vocab_size) == (prov["seeds"], prov["objectives"], prov["vocab_size"])
    again = objectives_command(cfg, args.seeds, args.objectives, args.vocab_size, args.gradient_batches, 1).split()
    assert again[:2] == ["qkgeometry", "train-objectives"]
    args2 = _objectives_parser().parse_args([*again[2:-2], "--out", "x"])
    assert objective_config_from_args(args2) == cfg and args2.seeds == args.seeds and args2.threads == 1


@pytest.mark.parametrize("bad, message", [
    (["--layers", "0"], "--layers must be a positive integer; got 0."),
    (["--d-model", "10", "--heads", "3"], "--d-model (10) must be divisible by --heads (3)."),
    (["--lr", "inf"], "--lr must be a finite number > 0, --warmup-steps and --weight-decay finite and >= 0; got inf, "
                      "20, 0.01."),
    (["--vocab-size", "10000000000"], "--vocab-size must be larger than the 5 special tokens and at most 1,000,000; "
                                      "got 10,000,000,000."),
    (["--threads", "100000"], f"--threads must be at most the number of CPUs of this machine ({os.cpu_count()}); "
                              "got 100000."),
    (["--gradient-batches", "0"], "--gradient-batches must be a positive integer; got 0."),
])
def test_bad_objective_settings_are_one_line_and_exit_2(bad, message, capsys, tmp_path):
    out = ["--out", str(tmp_path / "runs")]
    assert qkgeometry_main(["train-objectives", *out, *bad]) == 2
    assert capsys.readouterr().err == f"qkgeometry train-objectives: error: {message}\n"
    assert not (tmp_path / "runs").exists(), "nothing may be written before the settings are checked"


def test_train_objectives_records_runs(tmp_path, monkeypatch, capsys):
    import numpy as np

    import qkgeometry.training.data as data_module
    from qkgeometry.training import objectives as ob
    from qkgeometry.training.data import TokenData

    stream = np.random.default_rng(0).integers(5, 40, size=600)
    monkeypatch.setattr(data_module, "prepare_data", lambda *a, **k: TokenData("synthetic", 40, stream, stream,
                                                                               None, "test"))
    rc = qkgeometry_main(["train-objectives", "--out", str(tmp_path / "r"), "--seeds", "0", "--objectives", "mlm",
                          "--steps", "2", "--log-every", "1", "--layers", "2", "--d-model", "16", "--heads", "2",
                          "--d-mlp", "0", "--seq-len", "8", "--batch-size", "2", "--vocab-size", "40",
                          "--gradient-batches", "1"])
    assert rc == 0 and "[1/1] seed 0 mlm" in capsys.readouterr().out
    scores, _, prov = ob.read_recorded(tmp_path / "r")
    assert prov["config"]["d_mlp"] == 0 and prov["command"].startswith("qkgeometry train-objectives --seeds 0 ")
    assert scores["step"].max() == 2


@pytest.mark.parametrize("command", ["train", "train-objectives", "train-induction"])
def test_a_batch_too_large_for_one_step_is_refused_at_once(tmp_path, capsys, command):
    import time

    from bounded import no_hang, one_line_error

    out = tmp_path / "run"
    start = time.perf_counter()
    with no_hang(60):
        rc = qkgeometry_main([command, "--batch-size", "100000000", "--out", str(out)])
    elapsed = time.perf_counter() - start
    one_line_error(capsys, rc, "batch", "100,000,000", "over the bound of 4,194,304", "smaller batch_size")
    assert elapsed < 10, f"refused after {elapsed:.1f} s"
    assert not out.exists()


def test_a_model_too_large_for_this_machine_is_refused_before_anything_is_built(capsys, tmp_path, monkeypatch):
    import torch

    def no_build(*_, **__):
        raise AssertionError("a model was built")

    monkeypatch.setattr(torch.nn.Linear, "__init__", no_build)
    assert qkgeometry_main(["train", "--out", str(tmp_path / "run"), "--hidden", "1000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--hidden 1000000" in err and "more than this machine's" in err
    assert "choose a smaller --hidden" in err and not (tmp_path / "run").exists()
