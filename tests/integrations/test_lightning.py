"""qkgeometry.integrations.ScoreLightningCallback: optional. Without Lightning, asking for it says how to install
it; with Lightning, a tiny run scored live equals its weights scored afterwards."""

from __future__ import annotations

import importlib.util

import pytest
import torch

HAS_LIGHTNING = any(importlib.util.find_spec(m) is not None for m in ("lightning", "pytorch_lightning"))


@pytest.mark.skipif(HAS_LIGHTNING, reason="Lightning is installed")
def test_without_lightning_the_callback_says_how_to_install_it():
    import qkgeometry.integrations as integrations

    with pytest.raises(ImportError, match=r"needs PyTorch Lightning, which is not installed; run `pip install "
                                          r"lightning`"):
        integrations.ScoreLightningCallback(every=10)
    assert integrations.ScoreCallback.__name__ == "ScoreCallback"  # the transformers callback does not need it


@pytest.mark.skipif(not HAS_LIGHTNING, reason="Lightning is not installed (optional)")
def test_a_lightning_run_is_scored_on_its_steps(tmp_path):
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    from transformers import GPT2Config, GPT2LMHeadModel

    import qkgeometry as qg
    from qkgeometry.integrations import ScoreLightningCallback
    from qkgeometry.surveying.trajectories import read_trajectory

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=50, n_positions=16))

        def training_step(self, batch, batch_idx):
            return self.model(input_ids=batch[0], labels=batch[0]).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=3e-2)

    ids = torch.randint(0, 50, (32, 16), generator=torch.Generator().manual_seed(0))
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(ids), batch_size=8)
    module = Module()
    store = tmp_path / "l.sqlite"
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, default_root_dir=tmp_path,
                         callbacks=[ScoreLightningCallback(store=store, every=2)])
    trainer.fit(module, data)
    live = read_trajectory(store)
    assert sorted(live["step"].unique()) == [0, 2, 4]
    module.model.save_pretrained(tmp_path / "final")
    after = qg.score_model(str(tmp_path / "final"))
    assert live[live["step"] == 4]["symmetry"].tolist() == after["symmetry"].tolist()
