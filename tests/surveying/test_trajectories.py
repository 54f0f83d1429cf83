"""qkgeometry.surveying.trajectories: a folder of Trainer checkpoints scored as one trajectory equals scoring each
checkpoint alone, re-runs compute nothing, steps come from the names, and thinning keeps what it says."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

import qkgeometry as qg
from qkgeometry.surveying.trajectories import (
    Checkpoint,
    checkpoint_of,
    find_checkpoints,
    select_checkpoints,
    trajectory,
    trajectory_plan,
)
from tiny_models import tiny_model

STEPS = (0, 3, 6)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A real (tiny) training run in the Trainer layout: a BERT masked LM trained by AdamW on random tokens, saved
    as checkpoint-<step>/ at steps 0, 3 and 6, so that the checkpoints differ by training, not by seed."""
    from transformers import BertForMaskedLM

    root = tmp_path_factory.mktemp("run")
    model = tiny_model("bert", BertForMaskedLM, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=48, vocab_size=50).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-2)
    gen = torch.Generator().manual_seed(0)
    for step in range(STEPS[-1] + 1):
        if step in STEPS:
            model.save_pretrained(root / f"checkpoint-{step}")
        ids = torch.randint(0, 50, (8, 12), generator=gen)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    (root / "runs").mkdir()  # other folders of a Trainer output are ignored
    return root


def test_names_say_the_step_and_the_tokens():
    assert checkpoint_of("out/checkpoint-1200") == Checkpoint("out/checkpoint-1200", "checkpoint-1200", 1200, run="out")
    assert checkpoint_of("hf://EleutherAI/pythia-160m@step143000").step == 143000
    olmo = checkpoint_of("hf://allenai/OLMo-1B@stage1-step20000-tokens84B")
    assert (olmo.step, olmo.tokens, olmo.name) == (20000, 84 * 10**9, "stage1-step20000-tokens84B")
    assert checkpoint_of("hf://EleutherAI/pythia-160m@main").step is None


def test_a_folder_of_checkpoints_equals_scoring_each_alone(run_folder, tmp_path):
    store = tmp_path / "t.sqlite"
    frame = trajectory(run_folder, cache=store)
    assert list(frame["step"].unique()) == list(STEPS)
    assert len(frame) == len(STEPS) * 2  # one row per layer and checkpoint
    for step in STEPS:
        alone = qg.score_model(str(run_folder / f"checkpoint-{step}"))
        got = frame[frame["step"] == step].reset_index(drop=True)
        pd.testing.assert_series_equal(got["symmetry"], alone["symmetry"], check_names=False, rtol=0, atol=1e-12)
        pd.testing.assert_series_equal(got["directionality"], alone["directionality"], check_names=False, rtol=0,
                                       atol=1e-12)
    moved = frame.groupby("step")["symmetry"].mean()
    assert moved.nunique() == len(STEPS), "training changed W_qk, so the checkpoints must score differently"
    again = trajectory(run_folder, cache=store)
    assert again.attrs["computed"] == [] and again[frame.columns].equals(frame)


def test_explicit_pairs_and_thinning(run_folder):
    pairs = [(str(run_folder / f"checkpoint-{s}"), 10 * s) for s in STEPS]
    frame = trajectory(pairs, per="head")
    assert sorted(frame["step"].unique()) == [0, 30, 60] and len(frame) == 3 * 2 * 4
    cps = [Checkpoint(f"s{s}", f"s{s}", s) for s in (0, 1, 2, 4, 10, 100, 1000, 143000)]
    assert [c.step for c in select_checkpoints(cps, every=2)] == [0, 2, 4, 10, 100, 1000, 143000]
    spaced = [c.step for c in select_checkpoints(cps, log_spaced=4)]
    assert spaced[0] == 0 and spaced[-1] == 143000 and len(spaced) == 4 and spaced == sorted(spaced)


@pytest.mark.parametrize("kwargs, needle", [
    ({"every": 0}, "`every` (--every) must be an integer >= 1"),
    ({"log_spaced": 1}, "`log_spaced` (--log-spaced) must be an integer >= 2"),
    ({"every": 2, "log_spaced": 3}, "give `every` or `log_spaced`, not both"),
])
def test_bad_thinning_is_refused(kwargs, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        select_checkpoints([Checkpoint("a", "a", 1)], **kwargs)


def test_bad_sources_are_refused(tmp_path):
    with pytest.raises(ValueError, match="holds no checkpoint-<step>/ folders"):
        find_checkpoints(tmp_path)
    with pytest.raises(ValueError, match=r"`source`\[0\] must be a \(source, step\) pair"):
        find_checkpoints([("a",)])
    with pytest.raises(ValueError, match=r"the step must be an integer >= 0"):
        find_checkpoints([("a", -1)])
    with pytest.raises(ValueError, match="`revisions` name Hub branches"):
        find_checkpoints(tmp_path, revisions=["step1"])


def test_the_command_line_writes_resumes_plots_and_refuses(run_folder, tmp_path, capsys):
    from qkgeometry.cli import main

    store, figure = tmp_path / "t.sqlite", tmp_path / "t.png"
    assert main(["trajectory", str(run_folder), "--out", str(store), "--figure", str(figure),
                 "--event", "warm-up ends=3"]) == 0
    out = capsys.readouterr().out
    assert "computed 3 checkpoint(s), reused 0" in out and figure.stat().st_size > 10_000
    assert main(["trajectory", str(run_folder), "--out", str(store)]) == 0
    assert "computed 0 checkpoint(s), reused 3" in capsys.readouterr().out
    assert main(["plot", str(store), "--trajectory", "--out-dir", str(tmp_path / "figs")]) == 0
    assert len(list((tmp_path / "figs").glob("trajectory-*.png"))) == 1
    capsys.readouterr()
    for args, needle in [(["--event", "x"], "--event must be NAME=STEP"), (["--every", "0"], "--every"),
                         (["--out", str(tmp_path / "t.txt")], "--out must be a .sqlite store or a .csv file")]:
        argv = ["trajectory", str(run_folder), "--out", str(store), *args]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "t.txt").exists()


def test_a_hub_repo_with_step_branches_scores_each_revision_once(run_folder, tmp_path, monkeypatch):
    """Branches step0/step3/step6 of one repo (the checkpoints of the training run above), served by the loopback
    Hub: the trajectory equals scoring each revision alone, fetches once per revision, and a re-run fetches
    nothing; a revision that does not exist fails alone, in one line, while the others land."""
    from hub_emulator import HubEmulator, hub_env

    with HubEmulator() as hub:
        for step in STEPS:
            hub.add_repo("org/run", run_folder / f"checkpoint-{step}", branch=f"step{step}")
        hub.add_repo("org/run", run_folder / f"checkpoint-{STEPS[-1]}", branch="main")
        hub_env(monkeypatch, hub, tmp_path)
        found = find_checkpoints("org/run")
        assert [(c.name, c.step) for c in found] == [(f"step{s}", s) for s in STEPS]  # "main" names no step
        hub.reset_log()
        plan = trajectory_plan("org/run")
        beyond_headers = [r for r in hub.data_requests() if not r.path.endswith(".json")
                          and not (r.range or "").startswith("bytes=0-")]
        assert not beyond_headers, "planning reads headers only"
        assert list(plan["model"]) == [*(f"hf://org/run@step{s}" for s in STEPS), "total"]
        assert plan["requests"].iloc[-1] == plan["requests"].iloc[:-1].sum() > 0
        store = tmp_path / "t.sqlite"
        hub.reset_log()
        frame = trajectory("org/run", cache=store)
        assert list(frame["step"].unique()) == list(STEPS) and set(frame["run"]) == {"org/run"}
        fetched = {r.path.split("/resolve/")[1].split("/")[0] for r in hub.data_requests() if "/resolve/" in r.path}
        assert fetched <= {f"step{s}" for s in STEPS} | {hub.repos["org/run"].branches[f"step{s}"] for s in STEPS}
        for step in STEPS:
            alone = qg.score_model(f"hf://org/run@step{step}")
            got = frame[frame["step"] == step].reset_index(drop=True)
            assert (got["symmetry"] - alone["symmetry"]).abs().max() < 1e-12
            local = qg.score_model(str(run_folder / f"checkpoint-{step}"))
            assert (got["symmetry"] - local["symmetry"]).abs().max() < 1e-12
        hub.reset_log()
        again = trajectory("org/run", cache=store)
        assert again.attrs["computed"] == [] and not hub.data_requests()
        with pytest.warns(UserWarning, match="step99"):
            partial = trajectory("org/run", revisions=["step0", "step99", "step6"], cache=store)
        failures = partial.attrs["failures"]
        assert list(partial["step"].unique()) == [0, 6] and len(failures) == 1
        assert "step99" in failures["source"].iloc[0] and "\n" not in failures["message"].iloc[0]


def test_revisions_that_hold_the_same_weights_are_reported(run_folder, tmp_path):
    """A suite that serves one checkpoint under two steps (a mislabelled revision) is flagged, not drawn as a
    plateau of training."""
    import shutil

    root = tmp_path / "run"
    for step in STEPS:
        shutil.copytree(run_folder / f"checkpoint-{step}", root / f"checkpoint-{step}")
    shutil.copytree(run_folder / f"checkpoint-{STEPS[-1]}", root / "checkpoint-9")
    with pytest.warns(UserWarning, match="checkpoint-6, checkpoint-9 have identical scores"):
        frame = trajectory(root)
    assert frame.attrs["identical"] == [["checkpoint-6", "checkpoint-9"]]
    assert trajectory(run_folder).attrs["identical"] == []
