"""qkgeometry.integrations.ScoreCallback: a transformers Trainer run scored while it trains gives exactly the scores
of the checkpoints it saves at those steps, logs the medians through the trainer's logging (ahead of its
reporters), stores rows that `plot --trajectory` draws, and scores on rank 0 only in a two-process DDP run. Each
start of training is a run of its own; resuming continues one; a callback serves many runs; nothing it meets
(NaN weights, a compiled or LoRA model) stops training; sharded training is refused before it starts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

import qkgeometry as qg
from qkgeometry.surveying.runs import RunId
from qkgeometry.surveying.trajectories import read_trajectory, trajectory

SRC = str(Path(__file__).resolve().parents[2] / "src")


class Tokens(torch.utils.data.Dataset):
    """Random token sequences for a causal LM (labels = inputs)."""

    def __init__(self, n: int = 64, length: int = 16, vocab: int = 50, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, vocab, (n, length), generator=gen)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _gpt2(seed: int = 0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=50, n_positions=16))


def _trainer(out: Path, callbacks: list, steps: int = 6, save_steps: int = 3, model=None, seed: int = 0, **kw):
    from transformers import Trainer, TrainingArguments

    model = _gpt2() if model is None else model
    args = TrainingArguments(output_dir=str(out), max_steps=steps, per_device_train_batch_size=8,
                             learning_rate=3e-2, save_steps=save_steps, logging_steps=100, report_to=[],
                             use_cpu=True, seed=seed, disable_tqdm=True, **kw)
    return Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=callbacks)


def _reporter():
    """Stands for a reporting callback (TensorBoard, W&B), which the trainer lists before the user's callbacks."""
    from transformers import TrainerCallback

    class Reporter(TrainerCallback):
        def __init__(self):
            self.seen: list[dict] = []

        def on_log(self, args, state, control, logs=None, **kw):
            self.seen.append(dict(logs or {}))

    return Reporter()


def _steps(store: Path) -> dict[str, list[int]]:
    live = read_trajectory(store)
    return {run: sorted(int(s) for s in part["step"].unique()) for run, part in live.groupby("run", sort=False)}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from qkgeometry.integrations import ScoreCallback

    out = tmp_path_factory.mktemp("train") / "out"
    store = out.parent / "live.sqlite"
    reporter = _reporter()
    callback = ScoreCallback(store=store, every=3)
    trainer = _trainer(out, [reporter, callback])
    trainer.train()
    return out, store, trainer, reporter, callback


def test_live_scores_equal_the_checkpoints_saved_at_those_steps(trained):
    out, store, _, _, callback = trained
    live = read_trajectory(store)
    assert sorted(live["step"].unique()) == [0, 3, 6]
    (run,) = set(live["run"])
    parsed = RunId.parse(run)
    assert parsed.name == str(out.resolve()) and parsed.seed == 0 and len(parsed.config) == 8
    for step in (3, 6):
        saved = qg.score_model(str(out / f"checkpoint-{step}"))
        got = live[live["step"] == step].reset_index(drop=True)
        assert got["symmetry"].tolist() == saved["symmetry"].tolist()  # exactly: the same weights, the same kernel
        assert got["directionality"].tolist() == saved["directionality"].tolist()
    after = trajectory(out)
    pd.testing.assert_series_equal(after["symmetry"], live[live["step"] > 0]["symmetry"].reset_index(drop=True))
    assert len(callback.scorer.trajectory()) == len(live) and len(callback.scorer.frames) == 1  # bounded: a store


def test_medians_are_logged_through_the_trainer_ahead_of_its_reporters(trained):
    _, store, trainer, reporter, _ = trained
    live = read_trajectory(store)
    logged = {h["step"]: h for h in trainer.state.log_history if "qkgeometry/symmetry_median" in h}
    assert sorted(logged) == [3, 6] and "loss" in logged[3]  # with the loss of that step
    for step, entry in logged.items():
        assert entry["qkgeometry/symmetry_median"] == live[live["step"] == step]["symmetry"].median()
    assert sum("qkgeometry/directionality_median" in logs for logs in reporter.seen) == 2


def test_the_medians_reach_the_reporters_through_a_callback_whose_hooks_are_wrapped(tmp_path):
    """The callback finds its place ahead of the reporters without reading the call stack: a subclass (or a
    profiler) that wraps its hooks changes nothing."""
    from qkgeometry.integrations import ScoreCallback

    class Wrapped(ScoreCallback):
        def on_init_end(self, *a, **k):
            return super().on_init_end(*a, **k)

        def on_train_begin(self, *a, **k):
            return super().on_train_begin(*a, **k)

    reporter = _reporter()
    _trainer(tmp_path / "out", [reporter, Wrapped(every=2)], steps=4, save_steps=100).train()
    assert [logs.get("qkgeometry/symmetry_median") is not None for logs in reporter.seen[:2]] == [True, True]


def test_the_live_store_is_drawn_by_plot_trajectory(trained, tmp_path, capsys):
    from qkgeometry.cli import main

    _, store, *_ = trained
    assert main(["plot", str(store), "--trajectory", "--out-dir", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.glob("*.png")] == ["trajectory-out-self.png"]
    assert main(["plot", str(store), "--out-dir", str(tmp_path / "survey")]) == 0  # not as a trajectory: said so
    said = capsys.readouterr().out
    assert "holds 3 training checkpoint(s) of 1 run(s); drawing each checkpoint as one model of a survey" in said
    assert "--trajectory" in said


def test_two_runs_into_one_folder_are_two_runs(tmp_path):
    """Seed 1 after seed 0 into the same folder and store: both runs keep every step, and are drawn apart."""
    from qkgeometry.integrations import ScoreCallback
    from qkgeometry.plotting import trajectory_figures

    store = tmp_path / "s.sqlite"
    for seed in (0, 1):
        _trainer(tmp_path / "out", [ScoreCallback(store=store, every=2)], steps=4, save_steps=100,
                 model=_gpt2(seed), seed=seed).train()
    runs = _steps(store)
    assert list(runs.values()) == [[0, 2, 4], [0, 2, 4]]
    assert sorted(RunId.parse(r).seed for r in runs) == [0, 1]
    figures = trajectory_figures(read_trajectory(store))
    assert sorted(figures) == ["trajectory-out-seed-0-self", "trajectory-out-seed-1-self"]


def test_a_callback_scores_every_run_it_is_given_and_the_last_step(tmp_path):
    """A second train() with the same callback is a second run, scored in full; max_steps that is not a multiple
    of `every` has its last step scored (and logged) too."""
    from qkgeometry.integrations import ScoreCallback

    store = tmp_path / "s.sqlite"
    callback = ScoreCallback(store=store, every=3)
    trainer = _trainer(tmp_path / "out", [callback], steps=7, save_steps=100)
    trainer.train()
    trainer.train()
    assert list(_steps(store).values()) == [[0, 3, 6, 7], [0, 3, 6, 7]]
    logged = [h["step"] for h in trainer.state.log_history if "qkgeometry/symmetry_median" in h]
    assert logged == [3, 6, 7]  # the second run's log (the trainer starts a new log per run)


def test_resuming_continues_the_run_of_the_checkpoint(tmp_path):
    """Train to step 6 (checkpoints at 3 and 6), then resume from checkpoint-3 with a fresh callback, as after a
    crash: one run, each step once, the steps the first start stored after step 3 reported in one line and
    replaced as training reaches them again."""
    from qkgeometry.integrations import ScoreCallback

    store, out = tmp_path / "s.sqlite", tmp_path / "out"
    _trainer(out, [ScoreCallback(store=store, every=2)], steps=6, save_steps=3).train()
    first = read_trajectory(store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _trainer(out, [ScoreCallback(store=store, every=2)], steps=6, save_steps=3).train(
            resume_from_checkpoint=str(out / "checkpoint-3"))
    said = [str(w.message) for w in caught if "later step(s)" in str(w.message)]
    assert len(said) == 1 and "2 later step(s)" in said[0] and "(4–6) than step 3" in said[0]
    assert "\n" not in said[0]
    runs = _steps(store)
    assert list(runs.values()) == [[0, 2, 4, 6]] and list(runs) == list(first["run"].unique())
    again = read_trajectory(store)
    assert again[again["step"] <= 2]["symmetry"].tolist() == first[first["step"] <= 2]["symmetry"].tolist()
    saved = qg.score_model(str(out / "checkpoint-6"))  # the resumed start's own step 6
    assert again[again["step"] == 6]["symmetry"].tolist() == saved["symmetry"].tolist()


def test_nan_weights_mid_training_are_stored_and_logged_as_nan_and_training_goes_on(tmp_path):
    from transformers import TrainerCallback

    from qkgeometry.integrations import ScoreCallback

    class Diverge(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step == 3:
                with torch.no_grad():
                    model.transformer.h[1].attn.c_attn.weight.fill_(float("nan"))

    store = tmp_path / "s.sqlite"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = _trainer(tmp_path / "out", [Diverge(), ScoreCallback(store=store, every=2)], steps=6,
                           save_steps=100)
        trainer.train()
    assert trainer.state.global_step == 6
    said = [str(w.message) for w in caught if "qkgeometry" in str(w.message)]
    assert len(said) == 1 and "at step 4, self layer 0 holds NaN or Inf" in said[0] and "learning rate" in said[0]
    live = read_trajectory(store)
    assert sorted(live["step"].unique()) == [0, 2, 4, 6]
    at = live.set_index(["step", "layer"])["symmetry"]
    assert pd.isna(at[(4, 1)]) and pd.isna(at[(6, 1)]) and not pd.isna(at[(2, 1)])
    logged = {h["step"]: h for h in trainer.state.log_history if "qkgeometry/symmetry_median" in h}
    assert pd.isna(logged[4]["qkgeometry/symmetry_median"]) and not pd.isna(logged[2]["qkgeometry/symmetry_median"])
    from qkgeometry.cli import main

    assert main(["plot", str(store), "--trajectory", "--out-dir", str(tmp_path / "figures")]) == 0  # gaps


def test_any_failure_to_score_is_a_warning_not_an_end_to_training(tmp_path, monkeypatch):
    from qkgeometry.integrations import ScoreCallback, live

    callback = ScoreCallback(every=2)

    def broken(*a, **k):
        raise RuntimeError("the disk went away")

    trainer = _trainer(tmp_path / "out", [callback], steps=4, save_steps=100)
    monkeypatch.setattr(live.LiveScorer, "medians", broken)
    with pytest.warns(UserWarning, match=r"step 0 was not scored \(RuntimeError: the disk went away\); training"):
        trainer.train()
    assert trainer.state.global_step == 4


def test_a_compiled_model_is_scored_as_the_model_it_compiles(tmp_path):
    from qkgeometry.integrations import ScoreCallback

    store, out = tmp_path / "s.sqlite", tmp_path / "out"
    compiled = torch.compile(_gpt2(), backend="eager")
    _trainer(out, [ScoreCallback(store=store, every=2)], steps=4, save_steps=4, model=compiled,
             remove_unused_columns=False).train()  # a compiled forward takes (*args, **kwargs): keep the columns
    live = read_trajectory(store)
    assert sorted(live["step"].unique()) == [0, 2, 4]
    saved = qg.score_model(str(out / "checkpoint-4"))
    assert live[live["step"] == 4]["symmetry"].tolist() == saved["symmetry"].tolist()


def test_a_lora_fine_tune_is_scored_with_its_adapters_deltas(tmp_path):
    """A PEFT model in the Trainer: each step scores W + (α/r)·B A, the weights the model computes with (equal
    to the merged model's), not the frozen base weights."""
    import copy

    from peft import LoraConfig, get_peft_model

    from qkgeometry.integrations import ScoreCallback

    base = _gpt2()
    frozen = qg.score_model(copy.deepcopy(base))
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True,
                                            init_lora_weights=False))
    callback = ScoreCallback(every=2)
    _trainer(tmp_path / "out", [callback], steps=4, save_steps=100, model=model).train()
    rows = callback.scorer.trajectory()
    merged = qg.score_model(copy.deepcopy(model).merge_and_unload())
    assert rows[rows["step"] == 4]["symmetry"].tolist() == merged["symmetry"].tolist()
    assert rows[rows["step"] == 0]["symmetry"].tolist() != frozen["symmetry"].tolist()


@pytest.mark.parametrize("kwargs, needle", [
    ({"every": 0}, "`every` must be a whole number of steps >= 1; got 0."),
    ({"store": "x.txt"}, "`store` must be a .sqlite store or a .csv file; got 'x.txt'."),
    ({"per": "block"}, "`per` must be 'layer' or 'head'; got 'block'."),
    ({"run": " "}, "`run` must be a non-empty name"),
])
def test_bad_arguments_are_refused_before_training(kwargs, needle, tmp_path, monkeypatch):
    from qkgeometry.integrations import ScoreCallback

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as e:
        ScoreCallback(**kwargs)
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert not list(tmp_path.iterdir())


_DDP = textwrap.dedent('''
    import json, os, sys
    import torch
    import torch.multiprocessing as mp

    sys.path[:0] = [{src!r}, {tests!r}]


    def run(rank, out, store, port):
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(port))
        from test_hf_trainer import _trainer
        from qkgeometry.integrations import ScoreCallback

        callback = ScoreCallback(store=store, every=2)
        trainer = _trainer(out, [callback], steps=4, save_steps=100, ddp_backend="gloo")
        trainer.train()
        world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
        with open(f"{{out}}-rank{{rank}}.json", "w") as f:
            json.dump({{"world": world, "scored": callback.scorer.scored,
                       "logged": [h["step"] for h in trainer.state.log_history if "qkgeometry/symmetry_median" in h]}}, f)


    if __name__ == "__main__":
        mp.spawn(run, args=(sys.argv[1], sys.argv[2], int(sys.argv[3])), nprocs=2, join=True)
''')


def test_a_two_process_ddp_run_scores_on_rank_0_only(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "ddp.py"
    script.write_text(_DDP.format(src=SRC, tests=str(Path(__file__).parent)))
    out, store = tmp_path / "out", tmp_path / "ddp.sqlite"
    done = subprocess.run([sys.executable, str(script), str(out), str(store), str(port)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads(Path(f"{out}-rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    assert ranks[0]["scored"] == [0, 2, 4] and ranks[1]["scored"] == []
    assert ranks[0]["logged"] == [2, 4]
    stored = read_trajectory(store)
    assert sorted(stored["step"].unique()) == [0, 2, 4] and stored.groupby("step")["source"].nunique().max() == 1


@pytest.mark.parametrize("args, env, needle", [
    ({"fsdp": "full_shard"}, {}, "FSDP, asked for with `fsdp`"),
    ({}, {"ACCELERATE_USE_FSDP": "true"}, "FSDP, set up through accelerate"),
    ({}, {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"},
     "DeepSpeed ZeRO-3, set up through accelerate"),
])
def test_training_that_shards_the_weights_is_refused_when_it_starts(args, env, needle, tmp_path, monkeypatch):
    from types import SimpleNamespace

    from qkgeometry.integrations import ScoreCallback

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    callback = ScoreCallback(store=tmp_path / "s.sqlite")
    args = SimpleNamespace(**{"fsdp": None, "deepspeed": None, "output_dir": str(tmp_path), **args})
    state = SimpleNamespace(global_step=0, is_world_process_zero=True, stateful_callbacks={})
    with pytest.raises(ValueError, match=rf"shards the weights across processes \({needle}\)") as e:
        callback.on_train_begin(args, state, None, model=_gpt2())
    assert "\n" not in str(e.value)
    assert not (tmp_path / "s.sqlite").exists()


def test_the_accelerate_state_of_a_sharded_run_is_read(monkeypatch):
    """What `accelerate launch` leaves in accelerate's state, as the transformers Trainer reads it."""
    from types import SimpleNamespace

    from accelerate.state import AcceleratorState

    from qkgeometry.integrations.guards import sharded_training

    assert sharded_training() is None
    monkeypatch.setitem(AcceleratorState._shared_state, "deepspeed_plugin", SimpleNamespace(zero_stage=3))
    assert sharded_training() == "DeepSpeed ZeRO-3, set up through accelerate"
    monkeypatch.setitem(AcceleratorState._shared_state, "deepspeed_plugin", SimpleNamespace(zero_stage=2))
    assert sharded_training() is None  # ZeRO-2 keeps whole weights on every process
