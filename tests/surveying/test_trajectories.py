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
    olmo = checkpoint_of("hf://allenai/OLMo-1B@step20000-tokens84B")  # OLMo's branches
    assert (olmo.step, olmo.tokens, olmo.name) == (20000, 84 * 10**9, "step20000-tokens84B")
    olmo2 = checkpoint_of("hf://org/olmo2-like@stage1-step20000-tokens42B")  # OLMo 2's names carry a stage
    assert (olmo2.stage, olmo2.step, olmo2.tokens) == (1, 20000, 42 * 10**9)
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


# ------------------------------------------------------------------------------------------------ silent cases


def _copy_run(run_folder: Path, root: Path, steps=STEPS) -> Path:
    import shutil

    for step in steps:
        shutil.copytree(run_folder / f"checkpoint-{step}", root / f"checkpoint-{step}")
    return root


def test_revisions_are_scored_exactly_as_asked_with_main_and_a_typo(run_folder, tmp_path, monkeypatch, capsys):
    """`--revisions main step3` scores those two (main with its step unknown), not every step branch; a revision
    that does not exist fails alone, printed once, and the command exits non-zero."""
    from hub_emulator import HubEmulator, hub_env
    from qkgeometry.cli import main
    from qkgeometry.surveying.store import read_store

    with HubEmulator() as hub:
        for step in STEPS:
            hub.add_repo("org/run", run_folder / f"checkpoint-{step}", branch=f"step{step}")
        hub.add_repo("org/run", run_folder / f"checkpoint-{STEPS[-1]}", branch="main")
        hub_env(monkeypatch, hub, tmp_path)
        store = tmp_path / "r.sqlite"
        assert main(["trajectory", "org/run", "--revisions", "main", "step3", "--out", str(store)]) == 0
        out = capsys.readouterr().out
        assert "computed 2 checkpoint(s), reused 0" in out, out
        stored = read_store(store, trajectory=True).drop_duplicates("source").set_index("checkpoint")
        assert sorted(stored.index) == ["main", "step3"]
        assert stored.loc["step3", "step"] == 3 and pd.isna(stored.loc["main", "step"])
        assert set(stored["run"]) == {"org/run"}
        assert main(["trajectory", "org/run", "--revisions", "step3", "nosuch", "--out", str(store), "--figure",
                     str(tmp_path / "r.png")]) == 1  # the figure of what landed is still drawn
        captured = capsys.readouterr()
        assert "computed 0 checkpoint(s), reused 1" in captured.out
        assert captured.out.count("failed: hf://org/run@nosuch: SourceError: revision 'nosuch'") == 1, captured.out
        assert "1 of 2 checkpoint(s) failed" in captured.err and (tmp_path / "r.png").stat().st_size > 10_000
        with pytest.warns(UserWarning, match="step6, main have identical scores"):  # main holds step 6's weights
            frame = trajectory("org/run", revisions=["step6", "main"])
        assert list(frame.drop_duplicates("source")["checkpoint"]) == ["step6", "main"]  # unknown step last


def test_log_spaced_thinning_does_not_depend_on_the_typed_order():
    typed = [Checkpoint(f"s{s}", f"step{s}", s) for s in (1000, 1, 100000, 10, 500)]
    assert [c.step for c in select_checkpoints(typed, log_spaced=3)] == [1, 500, 100000]
    assert [c.step for c in select_checkpoints(typed, every=10)] == [10, 500, 1000, 100000]


def test_explicit_pairs_with_relative_paths_keep_their_steps_in_the_store(run_folder, tmp_path, monkeypatch):
    """Steps given as (source, step) pairs with relative paths come back, and are stored, as given: a figure drawn
    from the store later shows them, not the steps in the folders' names."""
    from qkgeometry.cli import main
    from qkgeometry.plotting import plt, trajectory_figures
    from qkgeometry.surveying.trajectories import read_trajectory

    monkeypatch.chdir(run_folder)
    store = tmp_path / "p.sqlite"
    pairs = [(f"checkpoint-{s}", 10 * s + 1) for s in STEPS]
    frame = trajectory(pairs, cache=store)
    assert list(frame["step"].unique()) == [1, 31, 61]
    stored = read_trajectory(store)
    assert list(stored["step"].unique()) == [1, 31, 61]
    assert set(stored["run"]) == {str(run_folder.resolve())}
    again = trajectory([(f"checkpoint-{s}", 100 + s) for s in STEPS], cache=store)  # reused rows, new places
    assert again.attrs["computed"] == [] and list(read_trajectory(store)["step"].unique()) == [100, 103, 106]
    assert main(["plot", str(store), "--trajectory", "--out-dir", str(tmp_path / "figs")]) == 0
    (fig,) = trajectory_figures(read_trajectory(store)).values()
    assert list(fig.axes[0].lines[0].get_xdata()) == [100, 103, 106]  # the steps given, not the names' 0, 3, 6
    plt.close(fig)


def test_two_runs_whose_folders_share_a_name_are_never_merged(run_folder, tmp_path, capsys):
    from qkgeometry.plotting import plt, trajectory_figures
    from qkgeometry.surveying.trajectories import read_trajectory

    a = _copy_run(run_folder, tmp_path / "expA" / "out")
    b = _copy_run(run_folder, tmp_path / "expB" / "out", steps=STEPS[:2])
    store = tmp_path / "two.sqlite"
    trajectory(a, cache=store)
    trajectory(b, cache=store)
    rows = read_trajectory(store)
    assert rows.groupby("run")["source"].nunique().to_dict() == {str(a.resolve()): 3, str(b.resolve()): 2}
    figures = trajectory_figures(rows)
    assert sorted(figures) == ["trajectory-expA-out-self", "trajectory-expB-out-self"]
    titles = sorted(f.axes[0].get_title(loc="left") for f in figures.values())
    assert titles == ["expA/out: 3 checkpoints", "expB/out: 2 checkpoints"]
    for fig in figures.values():
        plt.close(fig)


def test_stage_restarts_are_ordered_by_stage_and_drawn_by_tokens(run_folder, tmp_path, monkeypatch):
    """OLMo-style branches restart the step count at each stage: stage 2's step 10 comes after stage 1's step 20,
    the two step-20 checkpoints stay two points, and tokens seen is the x axis."""
    from hub_emulator import HubEmulator, hub_env
    from qkgeometry.plotting import plt, trajectory_curves

    branches = {"stage1-step10-tokens1B": 0, "stage2-step20-tokens4B": 6, "stage1-step20-tokens2B": 3,
                "stage2-step10-tokens3B": 3}
    with HubEmulator() as hub:
        for name, step in branches.items():
            hub.add_repo("org/olmo", run_folder / f"checkpoint-{step}", branch=name)
        hub_env(monkeypatch, hub, tmp_path)
        found = find_checkpoints("org/olmo")
        assert [c.name for c in found] == ["stage1-step10-tokens1B", "stage1-step20-tokens2B",
                                           "stage2-step10-tokens3B", "stage2-step20-tokens4B"]
        with pytest.warns(UserWarning, match="identical scores"):  # stage1 step 20 and stage2 step 10: one checkpoint
            frame = trajectory("org/olmo", cache=tmp_path / "o.sqlite")
    assert list(frame.drop_duplicates("source")["tokens"]) == [10**9, 2 * 10**9, 3 * 10**9, 4 * 10**9]
    assert list(frame.drop_duplicates("source")["stage"]) == [1, 1, 2, 2]
    fig = trajectory_curves(frame)
    xs = fig.axes[0].lines[0].get_xdata()
    assert list(xs) == [1e9, 2e9, 3e9, 4e9] and fig.axes[-1].get_xlabel() == "tokens seen"
    plt.close(fig)
    by_step = trajectory_curves(frame.assign(tokens=pd.NA))  # no tokens: one row of panels per stage
    assert len(by_step.axes) == 4 and [list(ax.lines[0].get_xdata()) for ax in by_step.axes[::2]] == [[10, 20]] * 2
    plt.close(by_step)
    assert [c.step for c in select_checkpoints(found, log_spaced=2)] == [10, 20]  # by tokens: first and last


def test_the_command_line_draws_a_two_stage_hub_run_and_plans_it_offline_from_the_cache(run_folder, tmp_path,
                                                                                         monkeypatch, capsys):
    """`qkgeometry trajectory` on an OLMo-style two-stage repo of the loopback Hub draws the run in (stage, step)
    order; the plan labels what it counts (the header probe a cold fetch reads first, none once cached); offline,
    the plan reads the cache, so cached revisions say "nothing to fetch" and the run reuses them."""
    from huggingface_hub import constants

    from hub_emulator import HubEmulator, hub_env
    from qkgeometry.cli import main
    from qkgeometry.surveying.trajectories import read_trajectory

    branches = {"stage1-step10-tokens1B": 0, "stage2-step20-tokens4B": 6, "stage1-step20-tokens2B": 3,
                "stage2-step10-tokens3B": 1}
    saved = {0: run_folder / "checkpoint-0", 3: run_folder / "checkpoint-3", 6: run_folder / "checkpoint-6",
             1: _copy_run(run_folder, tmp_path / "other", steps=STEPS[:1]) / "checkpoint-0"}
    with torch.no_grad():  # stage 2's step 10: weights of its own, so that no two checkpoints are identical
        from transformers import BertForMaskedLM

        m = BertForMaskedLM.from_pretrained(saved[1])
        for p_ in m.parameters():
            p_.add_(0.01)
        m.save_pretrained(saved[1])
    store, figure = tmp_path / "olmo.sqlite", tmp_path / "olmo.png"
    with HubEmulator() as hub:
        for name, step in branches.items():
            hub.add_repo("org/olmo", saved[step], branch=name)
        hub_env(monkeypatch, hub, tmp_path)
        assert main(["trajectory", "org/olmo", "--plan"]) == 0
        cold = capsys.readouterr().out
        assert "header probe" in cold and "the start of each weight file" in cold
        assert main(["trajectory", "org/olmo", "--out", str(store), "--figure", str(figure)]) == 0
        capsys.readouterr()
        assert figure.stat().st_size > 0
        rows = read_trajectory(store).drop_duplicates("source")
        assert list(zip(rows["stage"], rows["step"])) == [(1, 10), (1, 20), (2, 10), (2, 20)]
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        assert main(["trajectory", "org/olmo", "--plan", "--revisions", "stage1-step20-tokens2B",
                     "stage2-step10-tokens3B"]) == 0
        offline = capsys.readouterr().out
        assert offline.count("in the qkgeometry cache, nothing to fetch") == 2 and "not fully" not in offline
        assert main(["trajectory", "org/olmo", "--out", str(tmp_path / "again.sqlite"), "--revisions",
                     "stage1-step20-tokens2B", "stage2-step10-tokens3B"]) == 0  # the run reuses what the plan says
        assert main(["score", "hf://org/olmo@never-fetched", "--plan"]) == 2
        assert "not in the qkgeometry cache" in capsys.readouterr().err
    assert len(hub.log) > 0


def test_the_plan_needs_no_out(run_folder, capsys):
    from qkgeometry.cli import main

    assert main(["trajectory", str(run_folder), "--plan"]) == 0
    assert "checkpoint-3" in capsys.readouterr().out
    assert main(["trajectory", str(run_folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out is needed" in err


def test_rows_are_ordered_by_run_as_first_seen_then_stage_then_step_unknown_last():
    from qkgeometry.surveying.trajectories import order_rows

    frame = pd.DataFrame({"run": ["b", "a", "b", "b", "a", "b"], "stage": [1, 0, 0, 0, 0, None],
                          "step": [5, 2, None, 10, 1, 3], "source": list("uvwxyz"), "component": "self",
                          "layer": [0, 0, 0, 0, 0, 0], "head": pd.array([pd.NA] * 6, dtype="Int64")})
    ordered = order_rows(frame)
    assert ordered["source"].tolist() == ["z", "x", "w", "u", "y", "v"]  # run b first (first seen), a after
    assert order_rows(frame.iloc[:0]).empty


def test_each_run_is_labelled_by_the_shortest_tail_that_tells_it_apart():
    from qkgeometry.surveying.trajectories import run_labels

    assert run_labels(["/x/expA/out", "/x/expB/out", "/x/expA/out"]) == {"/x/expA/out": "expA/out",
                                                                         "/x/expB/out": "expB/out"}
    assert run_labels(["org/pythia-160m"]) == {"org/pythia-160m": "pythia-160m"}
    assert run_labels(["/runs/a/", "/runs/b"]) == {"/runs/a/": "a", "/runs/b": "b"}
