"""Tests for qkgeometry.training.loop (chapter 5): seeded, bitwise-reproducible, resumable runs with provenance."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry.training.config import INITS
from qkgeometry.training.loop import Run, train
from qkgeometry.training.models import self_attentions


# -------------------------------------------------------------------------------------------------- loop
@pytest.mark.parametrize("arch", ["encoder", "decoder"])
def test_same_seed_gives_identical_first_10_step_losses(tiny_data, tmp_path, arch, tiny_config):
    cfg = tiny_config(tiny_data, arch=arch, init="symmetric")
    a = train(cfg, tmp_path / "a", cache=tmp_path, data=tiny_data, progress=False)
    b = train(cfg, tmp_path / "b", cache=tmp_path, data=tiny_data, progress=False)
    la, lb = a["train_loss"].to_numpy()[1:], b["train_loss"].to_numpy()[1:]
    assert len(la) == 10 and np.array_equal(la, lb)
    c = train(tiny_config(tiny_data, arch=arch, init="symmetric", seed=1), tmp_path / "c", cache=tmp_path,
              data=tiny_data, progress=False)
    assert not np.array_equal(la, c["train_loss"].to_numpy()[1:])
    # It learns: lower loss on the same fixed validation batches (a single training batch's loss is too noisy to
    # compare two steps of a 10-step run).
    val = a["val_loss"].to_numpy()
    assert val[-1] < val[0]


def test_resume_continues_exactly(tiny_data, tmp_path, tiny_config):
    cfg = tiny_config(tiny_data, init="shared", log_every=3, steps=9)
    whole = train(cfg, tmp_path / "whole", cache=tmp_path, data=tiny_data, progress=False)
    Run(cfg, tmp_path / "parts", cache=tmp_path, data=tiny_data).advance(4)  # checkpoint at 3, rows to 4
    run = Run(cfg, tmp_path / "parts", cache=tmp_path, data=tiny_data)
    assert run.step == 3
    for a in self_attentions(run.model):
        assert a.query.weight is a.key.weight  # still tied after loading
    parts = run.advance().log()
    cols = ["step", "train_loss", "val_loss", "symmetry_mean", "qk_change"]
    pd.testing.assert_frame_equal(whole[cols], parts[cols])
    with pytest.raises(ValueError, match="another config"):
        Run(tiny_config(tiny_data, init="shared", log_every=3, steps=9, lr=1e-4), tmp_path / "parts",
            cache=tmp_path, data=tiny_data)


def test_log_has_scores_and_provenance(tiny_data, tmp_path, tiny_config):
    import json

    log = train(tiny_config(tiny_data, init="symmetric", steps=4, log_every=2), tmp_path / "r", cache=tmp_path,
                data=tiny_data, progress=False)
    assert list(log["step"]) == [0, 2, 4]
    assert log.loc[0, "symmetry_mean"] == pytest.approx(1.0) and log.loc[0, "qk_change"] == 0
    assert {"symmetry_L0", "symmetry_L1", "directionality_L1", "val_loss", "seconds", "lr"} <= set(log.columns)
    prov = json.loads((tmp_path / "r" / "provenance.json").read_text())
    assert prov["config"]["init"] == "symmetric" and prov["steps_done"] == 4
    assert {"torch", "transformers", "python"} <= set(prov["versions"]) and "cpu_count" in prov["hardware"]


@pytest.mark.parametrize("init", INITS)
def test_every_init_trains_and_records_its_note(init, tiny_data, tmp_path, tiny_config):
    import json

    train(tiny_config(tiny_data, init=init, steps=2, log_every=2), tmp_path / "r", cache=tmp_path, data=tiny_data,
          progress=False)
    prov = json.loads((tmp_path / "r" / "provenance.json").read_text())
    assert prov["config"]["init"] == init and prov["init_note"] and prov["steps_done"] == 2




def test_runs_without_checkpoints_write_no_model_files(tiny_data, tmp_path, tiny_config):
    from qkgeometry.training.loop import train_round_robin

    log = train_round_robin({"a": tiny_config(tiny_data, steps=2)}, tmp_path / "runs", cache=tmp_path,
                            data=tiny_data, progress=False, checkpoints=False)
    assert list(log["step"]) == [0, 1, 2]
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").rglob("*.safetensors"))
