"""Chapter 8's recorded runs: what a run writes, its command line and its provenance."""
import json

import numpy as np
import pandas as pd
import pytest

from qkgeometry.cli import main
from qkgeometry.training.config import InductionConfig
from qkgeometry.training.induction_runs import induction_command, snapshots, train_induction

TINY = dict(vocab_size=20, seq_len=12, min_segment=3, max_segment=5, d_model=16, n_heads=2, batch_size=4,
            steps=6, log_every=3, dense_until=0, eval_sequences=4)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    cfg = InductionConfig(**TINY)
    train_induction(cfg, out)
    return cfg, out


def test_a_run_writes_its_logs_and_provenance(run):
    cfg, out = run
    log, steps = pd.read_csv(out / "log.csv"), pd.read_csv(out / "steps.csv")
    assert sorted(log["step"].unique()) == [0, 3, 6]
    assert len(log) == 3 * 2 * 2 and len(steps) == 3 * 2
    for column in ("symmetry", "directionality", "energy_skew", "position_contrast", "previous", "induction",
                   "induction_null", "previous_chance"):
        assert log[column].notna().all(), column
    assert {"in_context_loss", "other_loss", "symmetry"} <= set(steps.columns)
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["config"] == cfg.to_dict() and prov["steps_done"] == 6
    assert len(prov["data"]["training_batches_sha256"]) == 64
    assert prov["command"] == induction_command(cfg, 1)


def test_snapshots_reproduce_the_recorded_run(run):
    cfg, out = run
    log = pd.read_csv(out / "log.csv")
    found = snapshots(cfg, [0, 6], layer=1, head=0)
    recorded = log[(log["layer"] == 1) & (log["head"] == 0)].set_index("step")["symmetry"]
    assert np.allclose(found["symmetry"], recorded.loc[[0, 6]].to_numpy(), atol=1e-6)
    assert found["pattern"].shape == (2, 12, 12) and found["sym"].shape == found["skew"].shape
    assert np.allclose(found["skew"][1], -found["skew"][1].T)


def test_logging_steps_are_dense_early():
    cfg = InductionConfig(steps=100, log_every=20, dense_until=30, dense_every=5)
    assert [s for s in range(101) if cfg.logged(s)] == [0, 5, 10, 15, 20, 25, 40, 60, 80, 100]


def test_command_line_refuses_a_used_folder_and_bad_options(run, capsys):
    _, out = run
    assert main(["train-induction", "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main(["train-induction", "--out", str(out / "x"), "--max-segment", "40"]) == 2
    assert "--max-segment" in capsys.readouterr().err


@pytest.mark.parametrize("kw, match", [({"d_mlp": 7}, "d_mlp"), ({"data": "other"}, "data"),
                                       ({"skip": 1.5}, "skip"), ({"vocab_size": 10}, "vocab_size")])
def test_config_refuses_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        InductionConfig(**kw)
