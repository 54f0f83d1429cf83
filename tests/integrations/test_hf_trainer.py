"""qkgeometry.integrations.ScoreCallback: a transformers Trainer run scored while it trains gives exactly the scores
of the checkpoints it saves at those steps, logs the medians through the trainer's logging (ahead of its
reporters), stores rows that `plot --trajectory` draws, and scores on rank 0 only in a two-process DDP run."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import torch

import qkgeometry as qg
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


def _trainer(out: Path, callbacks: list, steps: int = 6, save_steps: int = 3, **kw):
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=50, n_positions=16))
    args = TrainingArguments(output_dir=str(out), max_steps=steps, per_device_train_batch_size=8,
                             learning_rate=3e-2, save_steps=save_steps, logging_steps=100, report_to=[],
                             use_cpu=True, seed=0, disable_tqdm=True, **kw)
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
    assert set(live["run"]) == {f"{out.resolve()} (live)"}
    for step in (3, 6):
        saved = qg.score_model(str(out / f"checkpoint-{step}"))
        got = live[live["step"] == step].reset_index(drop=True)
        assert got["symmetry"].tolist() == saved["symmetry"].tolist()  # exactly: the same weights, the same kernel
        assert got["directionality"].tolist() == saved["directionality"].tolist()
    after = trajectory(out)
    pd.testing.assert_series_equal(after["symmetry"], live[live["step"] > 0]["symmetry"].reset_index(drop=True))
    assert len(callback.scorer.trajectory()) == len(live)


def test_medians_are_logged_through_the_trainer_ahead_of_its_reporters(trained):
    _, store, trainer, reporter, _ = trained
    live = read_trajectory(store)
    logged = {h["step"]: h for h in trainer.state.log_history if "qkgeometry/symmetry_median" in h}
    assert sorted(logged) == [3, 6] and "loss" in logged[3]  # with the loss of that step
    for step, entry in logged.items():
        assert entry["qkgeometry/symmetry_median"] == live[live["step"] == step]["symmetry"].median()
    assert sum("qkgeometry/directionality_median" in logs for logs in reporter.seen) == 2


def test_the_live_store_is_drawn_by_plot_trajectory(trained, tmp_path):
    from qkgeometry.cli import main

    _, store, *_ = trained
    assert main(["plot", str(store), "--trajectory", "--out-dir", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.glob("*.png")] == ["trajectory-out-live-self.png"]


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
            json.dump({{"world": world, "scored": [int(fr["step"].iloc[0]) for fr in callback.scorer.frames],
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


def test_training_that_shards_the_weights_is_refused_when_it_starts(tmp_path):
    from types import SimpleNamespace

    from qkgeometry.integrations import ScoreCallback

    callback = ScoreCallback(store=tmp_path / "s.sqlite")
    args = SimpleNamespace(fsdp="full_shard", deepspeed=None, output_dir=str(tmp_path))
    state = SimpleNamespace(global_step=0, is_world_process_zero=True)
    with pytest.raises(ValueError, match=r"shards the weights across processes \(FSDP"):
        callback.on_train_begin(args, state, None, model=None)
    assert not (tmp_path / "s.sqlite").exists()
