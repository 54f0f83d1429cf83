"""Chapter 8's recorded runs: what a run writes, its command line and its provenance."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

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


def _kernel_scores(model, n_heads):
    """Each head's and each layer's symmetry and directionality from GPT-2's fused weights, read here by hand
    (``c_attn.weight`` is (d, 3d), blocked [Q | K | V]) and scored by the dense kernel."""
    import qkgeometry as qg

    heads, layers = [], []
    for layer, block in enumerate(model.transformer.h):
        w = block.attn.c_attn.weight.detach().to(torch.float64).numpy()
        d = w.shape[0]
        dh = d // n_heads
        forms = [w[:, h * dh:(h + 1) * dh] @ w[:, d + h * dh:d + (h + 1) * dh].T for h in range(n_heads)]
        heads += [(layer, h, qg.symmetry_score(m), qg.directionality_score(m)) for h, m in enumerate(forms)]
        total = sum(forms)
        layers.append((layer, qg.symmetry_score(total), qg.directionality_score(total)))
    return (pd.DataFrame(heads, columns=["layer", "head", "symmetry", "directionality"]),
            pd.DataFrame(layers, columns=["layer", "symmetry", "directionality"]))


def test_measured_geometry_is_the_kernels_scores_of_the_same_weights():
    """What a run records as a head's (and a layer's) geometry is the symmetry and directionality of its form, as
    the package's scores define them, whichever way the live scorer reads the weights."""
    from qkgeometry.integrations import LiveScorer
    from qkgeometry.training.induction_model import build_model
    from qkgeometry.training.induction_runs import make_probes, measure

    cfg = InductionConfig(**TINY)
    model = build_model(cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads, False, cfg.seed,
                        cfg.init_std)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.randint(0, cfg.vocab_size, (4, cfg.seq_len), generator=torch.Generator().manual_seed(0))
    for _ in range(3):
        loss = model(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    scorers = (LiveScorer(None, 1, per="head", run="t"), LiveScorer(None, 1, per="layer", run="t"))
    heads, layers = measure(model, make_probes(cfg), 3, scorers)
    want_heads, want_layers = _kernel_scores(model, cfg.n_heads)
    for found, want in ((heads, want_heads), (layers, want_layers)):
        np.testing.assert_allclose(found[["symmetry", "directionality"]].to_numpy(dtype=float),
                                   want[["symmetry", "directionality"]].to_numpy(), rtol=1e-9, atol=1e-12)
        assert found["layer"].tolist() == want["layer"].tolist()
    assert heads["head"].tolist() == want_heads["head"].tolist()


def test_a_run_measured_again_gives_the_recorded_numbers(tmp_path):
    """The first logged steps of a recorded run, trained and measured again with today's code, give the numbers
    its log holds (recorded with the code of the time, to the six significant digits the files keep)."""
    import qkgeometry as qg

    recorded = qg.recorded("ch8-induction").runs["attn-repeat-s0"]
    config = json.loads((recorded / "provenance.json").read_text())["config"]
    cfg = InductionConfig(**{**config, "steps": 10})  # constant learning rate: steps 0-10 as in the full run
    threads = torch.get_num_threads()
    try:
        train_induction(cfg, tmp_path)
    finally:
        torch.set_num_threads(threads)
    for name in ("log.csv", "steps.csv"):
        again = pd.read_csv(tmp_path / name)
        then = pd.read_csv(recorded / name)
        then = then[then["step"].isin(again["step"])].reset_index(drop=True)
        assert again["step"].unique().tolist() == [0, 5, 10] and list(again.columns) == list(then.columns)
        columns = [c for c in again.columns if c != "seconds"]
        pd.testing.assert_frame_equal(again[columns], then[columns], check_exact=False, rtol=1e-5, atol=1e-7)


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
