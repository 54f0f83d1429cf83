"""Tests for qkgeometry.training.objectives (chapter 3): exact logit gradients in multi-layer models, pairs counted
by the gradient, equal footing of the three objectives."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import qkgeometry as qg
from qkgeometry.analyses import gradients as gr
from qkgeometry.training import objectives as ob
from qkgeometry.training.data import MASK_ID, TokenData

VOCAB = 40


def _cfg(**kw) -> ob.ObjectiveConfig:
    base = {"d_model": 16, "n_heads": 2, "n_layers": 3, "d_mlp": 32, "seq_len": 10, "batch_size": 3, "steps": 4,
            "log_every": 2, "init_std": 0.3}
    return ob.ObjectiveConfig(**{**base, **kw})


def _stream(n: int = 600, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(5, VOCAB, size=n)


def _data() -> TokenData:
    return TokenData("synthetic", VOCAB, _stream(), _stream(200, 1), None, "test")


def _model(cfg: ob.ObjectiveConfig, seed: int = 0) -> ob.ObjectiveTransformer:
    torch.manual_seed(seed)
    return ob.ObjectiveTransformer(VOCAB, cfg).double()


def _batch(objective: str, cfg: ob.ObjectiveConfig, step: int = 0) -> ob.ObjectiveBatch:
    ids = torch.from_numpy(_stream()[step * 30:step * 30 + cfg.batch_size * cfg.seq_len]
                           .reshape(cfg.batch_size, cfg.seq_len).astype(np.int64))
    return ob.make_objective_batch(ids, objective, VOCAB, seed=0, step=step, mask_prob=0.3,
                                   unigram=ob.unigram_probs(_stream(), VOCAB))


def _one_masked_batch(cfg: ob.ObjectiveConfig) -> ob.ObjectiveBatch:
    """MLM batch with exactly one masked position per sequence: the loss reads one row per sequence."""
    ids = torch.from_numpy(_stream()[: cfg.batch_size * cfg.seq_len].reshape(cfg.batch_size, cfg.seq_len)
                           .astype(np.int64))
    selected = torch.zeros_like(ids, dtype=torch.bool)
    selected[torch.arange(cfg.batch_size), torch.tensor([2, 5, 7])[: cfg.batch_size]] = True
    return ob.ObjectiveBatch("mlm", ids.masked_fill(selected, MASK_ID), ids, selected, None)


@pytest.mark.parametrize("objective", ob.ALL_OBJECTIVES)
def test_rank1_gradient_matches_autograd_in_every_layer(objective):
    cfg = _cfg()
    model = _model(cfg)
    model.zero_grad()
    _, layers = ob.attention_gradients(model, _batch(objective, cfg))
    assert len(layers) == cfg.n_layers
    for block, lg in zip(model.blocks, layers):
        grad_q, grad_k = gr.factor_gradients(lg.grad_w, block.wq.detach(), block.wk.detach())
        for ours, auto in ((grad_q, block.wq.grad), (grad_k, block.wk.grad)):
            assert float((ours - auto).abs().max() / auto.abs().max()) < 1e-12


def test_the_authors_decoder_objective_is_a_causal_model_fed_by_the_masked_lm_collator():
    cfg = _cfg()
    model = _model(cfg)
    batch, mlm = _batch(ob.AUTHORS_DECODER, cfg), _batch("mlm", cfg)
    # the same corrupted input and chosen positions as masked LM for a seed and step
    assert torch.equal(batch.inputs, mlm.inputs) and torch.equal(batch.selected, mlm.selected)
    assert batch.selected[:, 1:].any()
    # the loss of a causal LM head with labels -100 outside the chosen positions, shifted by one (as a causal
    # BERT computes it from the collator's labels)
    logits = model.lm_logits(model.hidden(batch.inputs, causal=True))
    labels = torch.where(batch.selected, batch.targets, torch.full_like(batch.targets, -100))
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1),
                                                 ignore_index=-100)
    assert float(ob.objective_loss(model, batch)) == pytest.approx(float(expected), rel=1e-12)
    # causal: the last input token is never read
    changed = batch._replace(inputs=batch.inputs.clone())
    changed.inputs[:, -1] = (changed.inputs[:, -1] + 1) % VOCAB
    assert float(ob.objective_loss(model, changed)) == pytest.approx(float(expected), rel=1e-12)
    mlm_changed = mlm._replace(inputs=changed.inputs)
    assert float(ob.objective_loss(model, mlm_changed)) != pytest.approx(float(ob.objective_loss(model, mlm)))


def test_sparse_causal_objective_reads_clean_input_at_the_masked_lm_positions():
    cfg = _cfg()
    model = _model(cfg)
    batch, mlm, causal = _batch("causal-sparse", cfg), _batch("mlm", cfg), _batch("causal", cfg)
    assert torch.equal(batch.selected, mlm.selected)  # the masked LM's positions for this seed and step
    assert torch.equal(batch.inputs, causal.inputs) and not torch.equal(batch.inputs, mlm.inputs)  # clean input
    chosen = batch.selected[:, 1:]
    assert 0 < int(chosen.sum()) < chosen.numel()
    logits = model.lm_logits(model.hidden(batch.inputs, causal=True))[:, :-1]
    expected = torch.nn.functional.cross_entropy(logits[chosen], batch.targets[:, 1:][chosen])
    assert float(ob.objective_loss(model, batch)) == pytest.approx(float(expected), rel=1e-12)
    dense = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch.targets[:, 1:].reshape(-1))
    assert float(ob.objective_loss(model, causal)) == pytest.approx(float(dense), rel=1e-12)
    assert float(expected) != pytest.approx(float(dense))


def test_exactness_check_detects_a_wrong_gradient():
    cfg = _cfg()
    model = _model(cfg)
    _, layers = ob.attention_gradients(model, _batch("rtd", cfg))
    lg, block = layers[0], model.blocks[0]
    wrong = gr.rank1_gradient(lg.x[:, None], lg.g.transpose(-1, -2), block.head_dim).sum(0)  # G transposed
    grad_q, _ = gr.factor_gradients(wrong, block.wq.detach(), block.wk.detach())
    assert float((grad_q - block.wq.grad).abs().max() / block.wq.grad.abs().max()) > 1e-3


def test_effective_pairs_zero_with_one_layer_positive_with_two():
    """Masked-rows-only loss: one layer never pairs; a second layer carries gradient back to unmasked queries."""
    one = _cfg(n_layers=1)
    rows = ob.gradient_rows(_model(one), _one_masked_batch(one))
    assert all(r["effective_paired"] == 0.0 for r in rows)
    assert all(r["mask_paired"] > 0.5 for r in rows)  # what the mask-based split would call "paired"
    assert all(r["active_rows"] == pytest.approx(1 / one.seq_len) for r in rows)

    two = _cfg(n_layers=2)
    rows = ob.gradient_rows(_model(two), _one_masked_batch(two))
    first = [r for r in rows if r["layer"] == 0]
    last = [r for r in rows if r["layer"] == 1]
    assert all(r["effective_paired"] > 0.5 for r in first)
    assert all(r["active_rows"] == 1.0 for r in first)
    assert all(r["effective_paired"] == 0.0 for r in last)  # the last layer still reads only the masked rows


def test_causal_and_rtd_gradients():
    cfg = _cfg()
    model = _model(cfg)
    causal = ob.gradient_rows(model, _batch("causal", cfg))
    assert all(r["mask_paired"] == 0.0 and r["effective_paired"] == 0.0 for r in causal)
    rtd = ob.gradient_rows(model, _batch("rtd", cfg))
    assert all(r["effective_paired"] > 0.5 and r["active_rows"] == 1.0 for r in rtd)
    assert all(p.grad is None for p in model.parameters())  # gradient_rows leaves no gradients behind


def test_batches_are_paired_and_objectives_differ_only_in_their_corruption():
    cfg = _cfg()
    b = {o: _batch(o, cfg) for o in ob.OBJECTIVES}
    for o in ob.OBJECTIVES:
        assert torch.equal(b[o].targets, b["causal"].targets)  # equal token budget: the same sequences
    assert torch.equal(b["causal"].inputs, b["causal"].targets)
    rtd = b["rtd"]
    assert torch.equal(rtd.labels.bool(), rtd.inputs != rtd.targets)
    assert not bool((rtd.labels.bool() & ~rtd.selected).any())
    again = _batch("rtd", cfg)
    assert torch.equal(again.inputs, rtd.inputs)  # a pure function of (seed, step)
    with pytest.raises(ValueError, match="unigram"):
        ob.make_objective_batch(rtd.targets, "rtd", VOCAB, 0, 0)
    with pytest.raises(ValueError, match="objective"):
        ob.make_objective_batch(rtd.targets, "lm", VOCAB, 0, 0)


def test_compare_objectives_same_init_logs_and_scores():
    cfg = _cfg(n_layers=2, init_std=0.02)
    data = _data()
    model = ob.ObjectiveTransformer(VOCAB, cfg)
    torch.testing.assert_close(model.w_qk(), torch.einsum("lhdk,lhek->lhde",
                                                          torch.stack([b.wq for b in model.blocks]).double(),
                                                          torch.stack([b.wk for b in model.blocks]).double()))
    scores, grads = ob.compare_objectives(data, cfg, seeds=[0, 1])
    assert set(scores["objective"]) == set(ob.OBJECTIVES) and set(scores["seed"]) == {0, 1}
    one = scores.query("seed == 0 and objective == 'mlm' and layer == 0 and head == -1")
    assert list(one["step"]) == [0, 2, 4] and one["loss"].iloc[1:].notna().all()
    start = scores[scores.step == 0]
    for _, grp in start.groupby(["seed", "layer", "head"]):  # same initialisation for every objective of a seed
        assert grp["symmetry"].nunique() == 1
    assert scores[["symmetry", "directionality"]].abs().max().max() <= 1
    assert set(grads["step"]) == {0, cfg.steps}
    assert len(grads) == 2 * 3 * 2 * cfg.n_layers * cfg.n_heads


def test_bad_inputs_have_clear_messages():
    with pytest.raises(ValueError, match="divisible"):
        ob.ObjectiveConfig(d_model=10, n_heads=3)
    with pytest.raises(ValueError, match="`n_layers`"):
        ob.ObjectiveConfig(n_layers=0)
    with pytest.raises(ValueError, match="`mask_prob`"):
        ob.ObjectiveConfig(mask_prob=1.5)
    with pytest.raises(ValueError, match="`vocab_size`"):
        ob.ObjectiveTransformer(3, _cfg())
    with pytest.raises(ValueError, match="position embeddings"):
        _model(_cfg()).hidden(torch.zeros(1, 11, dtype=torch.long), causal=True)
    from qkgeometry.cli import main

    assert main(["train-objectives", "--out", "x", "--layers", "0"]) == 2  # one line, exit status 2


def test_summaries_and_null_band():
    import pandas as pd

    scores = pd.DataFrame([{"objective": o, "seed": s, "step": t, "layer": li, "head": h, "loss": 1.0,
                            "symmetry": 0.1 * li + 0.01 * h, "directionality": -0.1 * li}
                           for o in ("causal", "mlm") for s in (0, 1) for t in (0, 5) for li in (0, 1)
                           for h in (-1, 0, 1, 2)])
    med = ob.run_medians(scores)
    assert len(med) == 2 * 2 * 2
    assert med["symmetry"].iloc[0] == pytest.approx(np.median([0.0, 0.01, 0.02, 0.1, 0.11, 0.12]))
    last = ob.run_medians(scores, layers="last")
    assert last["symmetry"].iloc[0] == pytest.approx(0.11) and last["directionality"].iloc[0] == pytest.approx(-0.1)
    with pytest.raises(ValueError, match="`layers`"):
        ob.run_medians(scores, layers="middle")
    band = ob.median_null_band(32, 8, n_matrices=4, n_draws=200)
    lo, hi = band["directionality"]
    assert lo < 0 < hi  # the Gaussian law of d is symmetric about 0
    lo, hi = band["symmetry"]
    assert lo < 1 / 32 < hi
    wide = ob.median_null_band(32, 8, n_matrices=1, n_draws=200)["directionality"]
    assert wide[1] - wide[0] > hi - lo  # a median of one matrix scatters more than a median of four


def test_seed_summaries_measure_the_change_from_the_shared_initialisation():
    import pandas as pd

    # symmetry at step t of (layer li, head h): 0.1·li + 0.01·h + 0.2·t/10 for the causal runs, unchanged for mlm
    rows = [{"objective": o, "seed": s, "step": t, "layer": li, "head": h, "loss": 2.0 - t / 10,
             "symmetry": 0.1 * li + 0.01 * h + (0.2 * t / 10 if o == "causal" else 0.0),
             "directionality": -0.1 * li - (0.05 * h * t / 10 if o == "causal" else 0.0)}
            for o in ("causal", "mlm") for s in (0, 1) for t in (0, 5, 10) for li in (0, 1) for h in (-1, 0, 1, 2)]
    scores = pd.DataFrame(rows)
    per_layer = ob.seed_summaries(scores, "layer").set_index(["objective", "seed"])
    assert (per_layer["step"] == 10).all() and per_layer.loc[("causal", 0), "loss"] == pytest.approx(1.0)
    assert per_layer.loc[("causal", 0), "symmetry_change"] == pytest.approx(0.2)
    assert per_layer.loc[("mlm", 1), "symmetry_change"] == pytest.approx(0.0)
    assert per_layer.loc[("causal", 0), "symmetry"] == pytest.approx(np.median([-0.01 + 0.2, 0.09 + 0.2]))
    # the layer rows (head −1) change by +0.05 in d, the heads by −0.05·h: median over heads 0, 1, 2 is −0.05
    assert per_layer.loc[("causal", 1), "directionality_change"] == pytest.approx(0.05)
    per_head = ob.seed_summaries(scores, "head").set_index(["objective", "seed"])
    assert per_head.loc[("causal", 1), "directionality_change"] == pytest.approx(-0.05)
    midway = ob.seed_summaries(scores, "head", step=5).set_index(["objective", "seed"])
    assert midway.loc[("causal", 0), "symmetry_change"] == pytest.approx(0.1)
    every = ob.seed_summaries(scores, "layer", step="all")
    assert len(every) == 2 * 2 * 3 and (every[every.step == 0]["symmetry_change"] == 0).all()
    with pytest.raises(ValueError, match="`unit`"):
        ob.seed_summaries(scores, "model")
    with pytest.raises(ValueError, match="step 7"):
        ob.seed_summaries(scores, step=7)
    with pytest.raises(ValueError, match="step-0"):
        ob.seed_summaries(scores[scores.step > 0])


def test_the_null_band_of_a_mean_over_seeds_is_narrower_by_about_root_n():
    one = ob.median_null_band(32, 8, n_matrices=4, n_draws=400, seed=5)["directionality"]
    five = ob.median_null_band(32, 8, n_matrices=4, n_draws=400, seed=5, n_seeds=5)["directionality"]
    ratio = (one[1] - one[0]) / (five[1] - five[0])
    assert 1.8 < ratio < 2.7  # √5 ≈ 2.24
    with pytest.raises(ValueError, match="`n_seeds`"):
        ob.median_null_band(32, 8, n_matrices=4, n_seeds=0)


def test_record_runs_writes_readable_logs(tmp_path, monkeypatch):
    import qkgeometry.training.data as data_module

    monkeypatch.setattr(data_module, "prepare_data", lambda *a, **k: _data())
    cfg = _cfg(n_layers=2, steps=2, log_every=1)
    out = ob.record_runs(tmp_path / "runs", cfg, seeds=[0, 1], objectives=("causal", "rtd"), vocab_size=VOCAB,
                         gradient_batches=1, progress=False)
    scores, grads, prov = ob.read_recorded(out)
    assert prov["runs_done"] == prov["runs_total"] == 4 and prov["config"] == cfg.to_dict()
    assert set(zip(scores["seed"], scores["objective"])) == {(s, o) for s in (0, 1) for o in ("causal", "rtd")}
    assert scores["step"].max() == cfg.steps and set(grads["step"]) == {0, cfg.steps}
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="provenance"):
        ob.read_recorded(tmp_path / "empty")


def test_read_recorded_merges_one_folder_per_seed(tmp_path, monkeypatch):
    import json

    import qkgeometry.training.data as data_module

    monkeypatch.setattr(data_module, "prepare_data", lambda *a, **k: _data())
    cfg = _cfg(n_layers=2, steps=2, log_every=1)
    for seed in (0, 1):
        ob.record_runs(tmp_path / "series" / f"s{seed}", cfg, seeds=[seed], objectives=("causal", "mlm"),
                       vocab_size=VOCAB, gradient_batches=1, progress=False)
    scores, grads, prov = ob.read_recorded(tmp_path / "series")
    assert prov["seeds"] == [0, 1] and prov["runs_done"] == prov["runs_total"] == 4
    assert [p["folder"] for p in prov["parts"]] == ["s0", "s1"] and prov["config"] == cfg.to_dict()
    assert set(zip(scores["seed"], scores["objective"])) == {(s, o) for s in (0, 1) for o in ("causal", "mlm")}
    assert set(grads["seed"]) == {0, 1}
    # the same seed twice, or another configuration, is not one recording
    ob.record_runs(tmp_path / "series" / "s1-again", cfg, seeds=[1], objectives=("causal", "mlm"),
                   vocab_size=VOCAB, gradient_batches=1, progress=False)
    with pytest.raises(ValueError, match="more than one sub-folder"):
        ob.read_recorded(tmp_path / "series")
    prov_path = tmp_path / "series" / "s1-again" / "provenance.json"
    other = json.loads(prov_path.read_text())
    other["seeds"], other["config"]["steps"] = [2], 99
    prov_path.write_text(json.dumps(other))
    with pytest.raises(ValueError, match="disagree on `config`"):
        ob.read_recorded(tmp_path / "series")


def test_read_recorded_names_the_folder_in_its_advice(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        ob.read_recorded(tmp_path / "missing")
    assert f"--out {tmp_path / 'missing'}`" in str(err.value) and "{folder}" not in str(err.value)


def test_every_name_chapter_3_uses_is_exported():
    names = ["OBJECTIVES", "run_medians", "median_null_band", "make_objective_batch", "gradient_medians",
             "attention_gradients", "ObjectiveConfig", "unigram_probs", "read_recorded", "compare_objectives",
             "ObjectiveTransformer"]
    assert set(names) <= set(ob.__all__) and all(hasattr(ob, n) for n in names)
    assert ob.OBJECTIVES == ("causal", "mlm", "rtd")


RECORDED = qg.recorded("ch3-objectives")  # path-like


def test_recorded_runs_match_their_provenance():
    scores, grads, prov = ob.read_recorded(RECORDED)
    cfg = ob.ObjectiveConfig(**prov["config"])  # a valid configuration
    done = scores.groupby(["seed", "objective"])["step"].max()
    assert len(done) == prov["runs_done"] <= prov["runs_total"] == len(prov["seeds"]) * len(prov["objectives"])
    assert (done == cfg.steps).all()
    assert set(grads["step"]) <= {0, cfg.steps}
    assert scores["layer"].nunique() == cfg.n_layers and scores["head"].nunique() == cfg.n_heads + 1


def test_the_longer_recording_reads_as_one_and_every_seed_is_complete():
    """The 4,000-step fair test, recorded one seed per folder: one configuration, every run to its last step."""
    rec = qg.recorded("ch3-objectives-4k")
    scores, grads, prov = ob.read_recorded(rec)
    cfg = ob.ObjectiveConfig(**prov["config"])
    assert cfg.steps == 4000 and cfg.n_layers == 4 and prov["objectives"] == ["causal", "mlm", "rtd", ob.AUTHORS_DECODER]
    done = scores.groupby(["seed", "objective"])["step"].max()
    assert (done == cfg.steps).all() and len(done) == prov["runs_done"] == prov["runs_total"]
    assert sorted(scores["seed"].unique()) == prov["seeds"] == [p["seeds"][0] for p in prov["parts"]]
    assert set(grads["step"]) == {0, cfg.steps}


def test_the_sparse_loss_arm_is_complete_and_shares_the_initialisation_of_the_four_arms():
    """The fifth arm, recorded one seed per folder: every run to step 4,000 from a clean source tree, the same
    configuration and data as the four recorded arms, and (checked by read_fair_test) the same step-0 scores, seed by
    seed; its notes list exactly the seeds it holds."""
    import re

    from qkgeometry.analyses import fair_test as ft

    sparse = qg.recorded("ch3-objectives-4k-sparse")
    scores, _, prov = ob.read_recorded(sparse)
    assert prov["objectives"] == [ob.SPARSE_CAUSAL]
    done = scores.groupby("seed")["step"].max()
    assert (done == 4000).all() and len(done) == prov["runs_done"] == prov["runs_total"]
    parts = prov.get("parts") or [prov]
    assert all(part.get("commit") for part in parts)
    assert not any(json.loads((sparse / p["folder"] / "provenance.json").read_text())["src_dirty"]
                   for p in prov.get("parts", []))
    _, _, both = ft.read_fair_test(qg.recorded("ch3-objectives-4k"), sparse)
    assert both["seeds"] == sorted(done.index) and ob.SPARSE_CAUSAL in both["objectives"]
    listed = re.search(r"Seeds recorded so far[^:]*:\s*([0-9, ]+)\.", (sparse / "README.md").read_text())
    assert listed and [int(v) for v in listed.group(1).split(",")] == sorted(done.index)


def test_the_supervision_arm_is_the_planned_batch_cut_and_shares_the_initialisation_of_every_arm():
    """The sixth arm, recorded one seed per folder: the causal objective at a batch of 2 with a held-out loss, every
    run to step 4,000 from a clean source tree, the fair test's configuration otherwise, and (checked by
    read_supervision_arm) the same step-0 scores as the other arms, seed by seed; its notes list exactly the seeds it
    holds, all of them from the planned 0-11."""
    import re

    from qkgeometry.analyses import fair_test as ft

    folder = qg.recorded("ch3-objectives-4k-supervision")
    listed = re.search(r"Seeds recorded so far[^:]*:\s*([0-9, ]+|none yet)\.", (folder / "README.md").read_text())
    assert listed
    if listed.group(1) == "none yet":
        assert not list(folder.glob("*/provenance.json"))
        return
    scores, _, prov = ob.read_recorded(folder)
    assert prov["objectives"] == ["causal"] and prov["config"]["batch_size"] == ft.SUPERVISION_BATCH
    assert prov["eval_sequences"] == 128
    done = scores.groupby("seed")["step"].max()
    assert (done == 4000).all() and len(done) == prov["runs_done"] == prov["runs_total"]
    assert scores["val_loss"].notna().all()
    assert not any(json.loads((folder / p["folder"] / "provenance.json").read_text())["src_dirty"]
                   for p in prov["parts"])
    others, _, others_prov = ft.read_fair_test(qg.recorded("ch3-objectives-4k"), qg.recorded("ch3-objectives-4k-sparse"))
    _, _, arm_prov = ft.read_supervision_arm(folder, others, others_prov)
    assert arm_prov["seeds"] == sorted(done.index) and set(done.index) <= set(range(12))
    assert [int(v) for v in listed.group(1).split(",")] == sorted(done.index)


def test_validation_loss_is_the_mean_over_every_held_out_target_and_a_batch_size_cannot_move_it():
    import pandas as pd

    data = TokenData("synthetic", VOCAB, _stream(), _stream(400, 1), None, "test")
    cfg = _cfg(n_layers=2, steps=2, log_every=1, seq_len=10)
    model = _model(cfg)
    for objective in ("causal", "causal-sparse", "mlm"):
        held = ob.validation_set(data, objective, cfg, 33)  # 33 sequences: a full chunk of 32 and a chunk of one
        assert [len(b.inputs) for b in held] == [32, 1]
        # the loss per target over all 33 sequences, computed in one piece
        whole = ob.make_objective_batch(torch.cat([b.targets for b in held]), objective, VOCAB, 0, 0, cfg.mask_prob)
        whole = whole._replace(inputs=torch.cat([b.inputs for b in held]),
                               selected=None if held[0].selected is None else torch.cat([b.selected for b in held]))
        expected = float(ob.objective_loss(model, whole))
        assert ob.validation_loss(model, held) == pytest.approx(expected, rel=1e-9)
        assert model.training  # restored
        assert torch.equal(held[0].targets, ob.validation_set(data, objective, dataclasses.replace(cfg, batch_size=1), 33)[0].targets)
    with pytest.raises(ValueError, match="eval_sequences"):
        ob.validation_set(data, "causal", cfg, 41)  # 400 tokens hold 40 sequences of 10
    scores, _ = ob.train_with_objective(_model(cfg), data, "causal", cfg, eval_sequences=8)
    assert isinstance(scores, pd.DataFrame) and scores["val_loss"].notna().all()
    assert scores.groupby("step")["val_loss"].nunique().eq(1).all()  # one value per logged step
    plain, _ = ob.train_with_objective(_model(cfg), data, "causal", cfg)
    assert "val_loss" not in plain
    # validating leaves training untouched: the same scores with and without it
    pd.testing.assert_frame_equal(scores.drop(columns="val_loss"), plain)
