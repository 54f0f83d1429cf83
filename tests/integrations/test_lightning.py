"""qkgeometry.integrations.ScoreLightningCallback: without Lightning, asking for it says how to install it; with
Lightning, a run scored live equals its weights scored afterwards, its medians reach the loggers at exactly the
scored steps (metrics.csv), each fit is a run of its own, and a fit resumed from a checkpoint continues its run."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest
import torch

HAS_LIGHTNING = any(importlib.util.find_spec(m) is not None for m in ("lightning", "pytorch_lightning"))
MEDIAN = "qkgeometry/symmetry_median"


@pytest.mark.skipif(HAS_LIGHTNING, reason="Lightning is installed")
def test_without_lightning_the_callback_says_how_to_install_it():
    import qkgeometry.integrations as integrations

    with pytest.raises(ImportError, match=r"needs PyTorch Lightning, which is not installed; run `pip install "
                                          r"lightning`"):
        integrations.ScoreLightningCallback(every=10)
    assert integrations.ScoreCallback.__name__ == "ScoreCallback"  # the transformers callback does not need it


def _fit(root, callback, steps: int, *, seed: int = 0, ckpt_path=None, every_checkpoint: int | None = None):
    """Fit a tiny GPT-2 for ``steps`` optimizer steps with a CSV logger under ``root`` (the loss logged at every
    step); returns (trainer, module)."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger
    from transformers import GPT2Config, GPT2LMHeadModel

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(seed)
            self.model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=50, n_positions=16))

        def training_step(self, batch, batch_idx):
            loss = self.model(input_ids=batch[0], labels=batch[0]).loss
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=3e-2)

    ids = torch.randint(0, 50, (64, 16), generator=torch.Generator().manual_seed(0))
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(ids), batch_size=8)
    callbacks = [callback]
    if every_checkpoint:
        callbacks.append(ModelCheckpoint(dirpath=root / "ckpt", every_n_train_steps=every_checkpoint,
                                         save_top_k=-1, filename="{step}"))
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=CSVLogger(root, name="logs"),
                         log_every_n_steps=1, enable_checkpointing=bool(every_checkpoint),
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=root,
                         callbacks=callbacks)
    module = Module()
    trainer.fit(module, data, ckpt_path=ckpt_path)
    return trainer, module


@pytest.mark.skipif(not HAS_LIGHTNING, reason="Lightning is not installed (optional)")
def test_a_lightning_run_is_scored_and_logged_at_exactly_its_scored_steps(tmp_path):
    """Not through LightningModule.log (which carries a value forward to every later step, and reaches the
    loggers only every log_every_n_steps): each scored step once, at its own step, step 0 and the last included."""
    import qkgeometry as qg
    from qkgeometry.integrations import ScoreLightningCallback
    from qkgeometry.surveying.runs import RunId
    from qkgeometry.surveying.trajectories import read_trajectory

    store = tmp_path / "l.sqlite"
    callback = ScoreLightningCallback(store=store, every=2, tokens=lambda batch: batch[0].numel())
    trainer, module = _fit(tmp_path, callback, steps=5)
    live = read_trajectory(store)
    assert sorted(live["step"].unique()) == [0, 2, 4, 5]
    tokens = live.drop_duplicates("step").set_index("step")["tokens"]
    assert [int(tokens[s]) for s in (2, 4, 5)] == [2 * 128, 4 * 128, 5 * 128]
    assert RunId.parse(live["run"].iloc[0]).name == str(tmp_path.resolve())
    module.model.save_pretrained(tmp_path / "final")
    after = qg.score_model(str(tmp_path / "final"))
    assert live[live["step"] == 5]["symmetry"].tolist() == after["symmetry"].tolist()
    metrics = pd.read_csv(trainer.logger.log_dir + "/metrics.csv")
    logged = metrics[metrics[MEDIAN].notna()]
    assert logged["step"].tolist() == [0, 2, 4, 5]  # once each: no stale copies at the steps in between
    for step, value in zip(logged["step"], logged[MEDIAN]):
        assert value == pytest.approx(live[live["step"] == step]["symmetry"].median(), abs=1e-12)
    assert metrics["train_loss"].notna().sum() >= 4  # the module's own logging, untouched


@pytest.mark.skipif(not HAS_LIGHTNING, reason="Lightning is not installed (optional)")
def test_two_fits_from_one_folder_are_two_runs_and_a_resumed_fit_continues_its_run(tmp_path):
    from qkgeometry.integrations import ScoreLightningCallback
    from qkgeometry.surveying.trajectories import read_trajectory

    store = tmp_path / "l.sqlite"
    callback = ScoreLightningCallback(store=store, every=2, log=False)
    _fit(tmp_path, callback, steps=4, every_checkpoint=2)
    _fit(tmp_path, callback, steps=4, seed=1)  # the same callback, a new fit: a second run, scored in full
    runs = read_trajectory(store).groupby("run", sort=False)["step"].unique()
    assert [sorted(s) for s in runs] == [[0, 2, 4], [0, 2, 4]]
    first = runs.index[0]
    with pytest.warns(UserWarning, match=r"already holds 1 later step\(s\) of run .* \(4–4\) than step 2"):
        _fit(tmp_path, ScoreLightningCallback(store=store, every=2, log=False), steps=6,
             ckpt_path=tmp_path / "ckpt" / "step=2.ckpt")
    again = read_trajectory(store).groupby("run", sort=False)["step"].unique()
    assert list(again.index) == list(runs.index) and sorted(again[first]) == [0, 2, 4, 6]
