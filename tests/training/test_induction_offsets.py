"""Chapter 8's copy offsets: a recorded run trained again, where its heads look, and each head zeroed."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from qkgeometry.training.config import InductionConfig
from qkgeometry.training.induction_model import build_model
from qkgeometry.training.induction_offsets import head_ablation_losses, retrain_offsets

TINY = dict(vocab_size=20, seq_len=12, min_segment=3, max_segment=5, d_model=16, n_heads=2, batch_size=4,
            steps=6, log_every=3, dense_until=0, eval_sequences=4)


def _trained_tiny():
    cfg = InductionConfig(**TINY)
    model = build_model(cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads, False, 0, 0.3)
    return cfg, model


def test_zeroing_a_head_is_zeroing_its_rows_of_the_output_projection():
    """The hook that zeroes a head's output gives the loss of the model whose output projection has that head's
    input rows set to zero (GPT-2's Conv1D weight is (d_in, d_out))."""
    from qkgeometry.training.induction_data import SegmentSpec, eval_batch

    cfg, model = _trained_tiny()
    spec = SegmentSpec(cfg.vocab_size, cfg.seq_len, cfg.min_segment, cfg.max_segment, cfg.skip)
    b = eval_batch(spec, 8, seed=1)
    ids, mask = torch.as_tensor(b.ids), torch.as_tensor(b.predictable)
    found = head_ablation_losses(model, ids, mask)
    assert len(found) == 1 + cfg.n_layers * cfg.n_heads and found["layer"].isna().iloc[0]
    d_head = cfg.d_model // cfg.n_heads
    for layer in range(cfg.n_layers):
        for head in range(cfg.n_heads):
            w = model.transformer.h[layer].attn.c_proj.weight
            kept = w.detach().clone()
            with torch.no_grad():
                w[head * d_head:(head + 1) * d_head] = 0.0
            want = head_ablation_losses(model, ids, mask).iloc[0]
            with torch.no_grad():
                w.copy_(kept)
            row = found[(found["layer"] == layer) & (found["head"] == head)].iloc[0]
            assert row["in_context_loss"] == pytest.approx(want["in_context_loss"], rel=1e-12)
            assert row["in_context_loss"] != pytest.approx(found["in_context_loss"].iloc[0], rel=1e-9)
    # the model is left as it was
    assert head_ablation_losses(model, ids, mask)["in_context_loss"].iloc[0] == found["in_context_loss"].iloc[0]


def test_the_run_trained_again_is_the_recorded_run():
    """The first steps of recorded run attn-repeat-s0 trained again give its recorded in-context loss (six
    significant digits), and the profiles hold every layer, head, offset and kind of input."""
    import qkgeometry as qg

    recorded = qg.recorded("ch8-induction").runs["attn-repeat-s0"]
    config = json.loads((recorded / "provenance.json").read_text())["config"]
    cfg = InductionConfig(**{**config, "steps": 40})  # constant learning rate: steps 0-40 as in the full run
    threads = torch.get_num_threads()
    try:
        found = retrain_offsets(cfg, every=20)
    finally:
        torch.set_num_threads(threads)
    then = pd.read_csv(recorded / "steps.csv").groupby("step")["in_context_loss"].first()
    losses = found["losses"].set_index("step")["in_context_loss"]
    assert losses.index.tolist() == [0, 20, 40]
    np.testing.assert_allclose(losses.to_numpy(), then.loc[[0, 20, 40]].to_numpy(), rtol=1e-5)
    offsets = found["offsets"]
    assert len(offsets) == 3 * 2 * cfg.n_layers * cfg.n_heads * 5
    assert set(offsets["offset"]) == {-1, 0, 1, 2, 3} and set(offsets["inputs"]) == {"copies", "repeat"}
    assert offsets["attention"].between(0, 1).all()
    ablation = found["ablation"]
    assert ablation["step"].eq(40).all()
    assert ablation["in_context_loss"].iloc[0] == pytest.approx(losses.loc[40], rel=1e-12)


def test_retrain_offsets_refuses_a_bad_interval():
    with pytest.raises(ValueError, match="every: must be a whole number"):
        retrain_offsets(InductionConfig(**TINY), every=0)
