"""Chapter 8's "Real checkpoints" part offline: a branch-serving repo of small trained chapter-8 models on the
loopback Hub, scored head by head as Pythia's step branches would be."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

import qkgeometry as qg
from qkgeometry.analyses.emergence import named_heads
from qkgeometry.training.induction_model import build_model

STEPS = (0, 3, 6)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("induction-run")
    model = build_model(vocab_size=20, seq_len=12, d_model=16, n_layers=2, n_heads=2, mlp=False, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-2)
    gen = torch.Generator().manual_seed(0)
    for step in range(STEPS[-1] + 1):
        if step in STEPS:
            model.save_pretrained(root / f"checkpoint-{step}")
        ids = torch.randint(0, 20, (4, 12), generator=gen)
        loss = model(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return root


def test_named_heads_over_step_branches_equal_each_checkpoint_scored_alone(run_folder, tmp_path, monkeypatch):
    from hub_emulator import HubEmulator, hub_env
    from qkgeometry.surveying.trajectories import trajectory_plan

    with HubEmulator() as hub:
        for step in STEPS:
            hub.add_repo("org/induction", run_folder / f"checkpoint-{step}", branch=f"step{step}")
        hub.add_repo("org/induction", run_folder / f"checkpoint-{STEPS[-1]}", branch="main")
        hub_env(monkeypatch, hub, tmp_path)
        plan = trajectory_plan("org/induction")
        assert list(plan["model"])[-1] == "total" and len(plan) == len(STEPS) + 1
        run = qg.trajectory("org/induction", per="head")
        frame = named_heads(run, heads=((1, 0), (1, 1)))
        assert list(frame["step"].unique()) == list(STEPS) and set(frame["layer"]) == {1}
        for step in STEPS:
            alone = qg.score_model(str(run_folder / f"checkpoint-{step}"), per="head")
            alone = alone[alone["layer"] == 1].set_index("head")["symmetry"]
            got = frame[frame["step"] == step].set_index("head")["symmetry"]
            assert (got - alone.loc[got.index]).abs().max() < 1e-12
        assert frame.groupby("head")["symmetry"].nunique().min() == len(STEPS)   # training moved every head
        with pytest.raises(ValueError, match=r"\(5, 0\)"):
            named_heads(run, heads=((5, 0),))
    assert isinstance(frame, pd.DataFrame)
