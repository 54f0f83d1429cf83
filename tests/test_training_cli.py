"""`qkgeometry train` is derived from TrainConfig and refuses bad settings with one clear line (exit status 2)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from qkgeometry.cli import main as qkgeometry_main
from qkgeometry.training.cli import GRID_FIELDS, _configure, configs_from_args, flag
from qkgeometry.training.cli import main as train_main
from qkgeometry.training.loop import TrainConfig


def _parser():
    import argparse

    return _configure(argparse.ArgumentParser(prog="qkgeometry train"))


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
])
def test_bad_settings_are_one_line_and_exit_2(bad, message, capsys, tmp_path):
    out = ["--out", str(tmp_path / "run")]
    assert train_main([*out, *bad]) == 2
    assert capsys.readouterr().err == f"qkgeometry train: error: {message}\n"
    assert qkgeometry_main(["train", *out, *bad]) == 2
    assert capsys.readouterr().err == f"qkgeometry train: error: {message}\n"
    assert not (tmp_path / "run").exists(), "nothing may be written before the settings are checked"


@pytest.mark.parametrize("module", [["qkgeometry"], ["qkgeometry.training.cli"]])
def test_the_documented_torchrun_entry_points_run(module):
    """`torchrun -m qkgeometry train ...` and `torchrun -m qkgeometry.training.cli ...` run these modules."""
    args = ["train", "--help"] if module == ["qkgeometry"] else ["--help"]
    res = subprocess.run([sys.executable, "-m", *module, *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "--schedule" in res.stdout and "--vocab-size" in res.stdout
