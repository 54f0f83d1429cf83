"""head_behaviour: the detectors on hand-built attention patterns with known answers, the labels' thresholds and
nulls, the geometric scores against the package's own score functions, and the AUC test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoConfig, AutoModel

import qkgeometry as qg
from qkgeometry import head_behaviour as hb

T = 12


def _causal_rows(weights: np.ndarray) -> np.ndarray:
    """Normalise rows of a (T, T) weight matrix."""
    return weights / weights.sum(-1, keepdims=True)


def _previous(t=T):
    a = np.zeros((t, t))
    a[0, 0] = 1
    a[np.arange(1, t), np.arange(t - 1)] = 1
    return a


def _sink(t=T):
    a = np.zeros((t, t))
    a[:, 0] = 1
    return a


def _uniform_causal(t=T):
    return _causal_rows(np.tril(np.ones((t, t))))


def _stack(*patterns):
    return np.stack(patterns)[None]  # (1 sequence, heads, T, T)


def test_positional_detectors_on_known_patterns():
    cur = np.eye(T)
    scores = hb.pattern_scores(_stack(_previous(), _sink(), cur, _uniform_causal()), causal=True)
    assert list(scores["head"]) == [0, 1, 2, 3]
    np.testing.assert_allclose(scores["previous"], [1, 0, 0, np.mean(1 / (np.arange(4, T) + 1))])
    np.testing.assert_allclose(scores["first"][:3], [0, 1, 0])
    np.testing.assert_allclose(scores["current"][:3], [0, 0, 1])
    np.testing.assert_allclose(scores["local"][:3], [1, 0, 0])
    np.testing.assert_allclose(scores["broad"], [0, 0, 0, 1], atol=1e-12)
    assert "next" not in scores  # a decoder cannot look ahead


def test_encoder_detectors_see_next_and_sep():
    nxt = np.zeros((T, T))
    nxt[np.arange(T - 1), np.arange(1, T)] = 1
    nxt[T - 1, T - 1] = 1
    sep = np.zeros((T, T))
    sep[:, T - 1] = 1
    scores = hb.pattern_scores(_stack(nxt, sep, np.full((T, T), 1 / T)), causal=False)
    np.testing.assert_allclose(scores["next"], [1, 1 / (T - 5), 1 / T])  # row T-2's next token is [SEP]
    np.testing.assert_allclose(scores["sep"], [1 / (T - 5), 1, 1 / T])
    np.testing.assert_allclose(scores["broad"][2], 1)
    moved = hb.pattern_scores(_stack(sep), causal=False, sep_positions=[3])
    assert moved["sep"][0] == 0


def test_uniform_scores_are_the_chance_levels():
    chance = hb.uniform_scores(T, causal=True)
    direct = hb.pattern_scores(_stack(_uniform_causal()), causal=True).iloc[0]
    for k, v in chance.items():
        assert v == pytest.approx(direct[k])
    assert chance["broad"] == pytest.approx(1)
    assert hb.uniform_scores(T, causal=False)["previous"] == pytest.approx(1 / T)


def test_duplicate_and_induction_on_repeated_sequences():
    half, offset = 5, 1
    t = offset + 2 * half
    dup, ind = np.zeros((t, t)), np.zeros((t, t))
    dup[:, 0] = ind[:, 0] = 1  # rows that have nothing to copy rest on the first token
    for i in range(offset + half, t):
        dup[i] = 0
        dup[i, i - half] = 1
        if i > offset + half:
            ind[i] = 0
            ind[i, i - half + 1] = 1
    scores = hb.repeat_scores(_stack(dup, ind, _uniform_causal(t)), half, offset)
    np.testing.assert_allclose(scores["duplicate"][:2], [1, 0])
    np.testing.assert_allclose(scores["induction"][:2], [0, 1])
    with pytest.raises(ValueError, match="does not match"):
        hb.repeat_scores(_stack(dup), half + 1, offset)


def test_repeated_random_tokens_repeat_and_the_control_does_not():
    rep = hb.repeated_random_tokens(5000, 3, 10, seed=1, prefix=[7])
    ctl = hb.repeated_random_tokens(5000, 3, 10, seed=1, prefix=[7], repeat=False)
    assert rep.shape == ctl.shape == (3, 21)
    assert torch.equal(rep[:, 1:11], rep[:, 11:]) and torch.all(rep[:, 0] == 7)
    assert torch.equal(ctl[:, 1:11], rep[:, 1:11]) and not torch.equal(ctl[:, 11:], rep[:, 11:])
    with pytest.raises(ValueError, match="vocab_size"):
        hb.repeated_random_tokens(1005, 1, 10)


def _scores_frame(**columns):
    n = len(next(iter(columns.values())))
    base = {name: np.zeros(n) for name in hb.DECODER_LABELS}
    base.update(duplicate_null=np.zeros(n), induction_null=np.zeros(n))
    base.update({k: np.asarray(v, dtype=float) for k, v in columns.items()})
    return pd.DataFrame({"layer": 0, "head": np.arange(n), **base})


def test_labels_need_the_threshold_and_the_null():
    chance = hb.uniform_scores(64, causal=True)
    frame = _scores_frame(previous=[0.9, 0.35, 0.9], local=[0.95, 0.4, 0.9], duplicate=[0.5, 0.5, 0.0],
                          duplicate_null=[0.01, 0.3, 0.0], broad=[0.2, 0.9, 0.1])
    out = hb.label_heads(frame, chance, causal=True)
    assert list(out["labels"]) == ["previous+local+duplicate", "broad", "previous+local"]
    # a chance level above a third of the score withholds the label even above the threshold
    strict = hb.label_heads(frame, {**chance, "previous": 0.5}, causal=True)
    assert not strict["is_previous"].any()
    assert hb.label_heads(frame, chance, causal=True, thresholds={"broad": 0.95})["is_broad"].sum() == 0
    with pytest.raises(ValueError, match="missing the column 'induction'"):
        hb.label_heads(frame.drop(columns="induction"), chance, causal=True)


def test_separation_auc_interval_and_permutation():
    perfect = hb.separation([5, 6, 7, 8, 9, 10, 1, 2, 3, 4], [1] * 6 + [0] * 4, n_resamples=500)
    assert perfect.auc == 1 and perfect.low == 1 and perfect.p_value < 0.05
    assert perfect.n_label == 6 and perfect.n_rest == 4
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = rng.random(200) < 0.3
    null = hb.separation(x, y, n_resamples=500)
    assert null.low < 0.5 < null.high and null.p_value > 0.05
    assert "no detectable difference" in hb.separation_verdict(null, "higher", "lower")
    assert hb.separation_verdict(perfect, "higher", "lower").startswith("higher")
    assert hb.separation([1, 2, 3], [1, 0, 0]) is None
    # pooled over strata: a per-model offset alone separates nothing
    strata = np.repeat(["a", "b"], 100)
    shifted = np.concatenate([x[:100], x[100:] + 50])
    lab = np.concatenate([np.zeros(100, bool), np.ones(100, bool)]) & (rng.random(200) < 0.5)
    lab[:10] = True
    assert hb.separation(shifted, lab, n_resamples=200).auc > 0.7
    assert abs(hb.separation(shifted, lab, n_resamples=200, strata=strata).auc - 0.5) < 0.15
    with pytest.raises(ValueError, match="same length"):
        hb.separation([1, 2], [1])


def _tiny(model_type, **extra):
    torch.manual_seed(0)
    cfg = AutoConfig.for_model(model_type, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=64, vocab_size=60, max_position_embeddings=64, **extra)
    return AutoModel.from_config(cfg, attn_implementation="eager").eval()


def test_head_geometry_matches_the_score_functions():
    model = _tiny("llama", num_key_value_heads=2)
    geo = hb.head_geometry(model)
    assert len(geo) == 8
    att = model.layers[1].self_attn
    wq = att.q_proj.weight[8:16].detach().double().numpy().T  # head 1
    wk = att.k_proj.weight[0:8].detach().double().numpy().T  # its KV head 0 (h // 2)
    row = geo[(geo["layer"] == 1) & (geo["head"] == 1)].iloc[0]
    assert row.symmetry == pytest.approx(qg.symmetry_score(wq @ wk.T), abs=1e-12)
    assert row.directionality == pytest.approx(qg.directionality_score(wq @ wk.T), abs=1e-12)
    assert np.isfinite(geo["trace_z_m1"]).all() and geo["key_bias"].isna().all()
    # a tied head W_Q = W_K is symmetric positive semi-definite
    with torch.no_grad():
        att.q_proj.weight[8:16] = att.k_proj.weight[0:8]
    tied = hb.head_geometry(model)
    row = tied[(tied["layer"] == 1) & (tied["head"] == 1)].iloc[0]
    assert row.symmetry == pytest.approx(1) and row.positive_share == pytest.approx(1) and row.trace_z > 0
    bert = hb.head_geometry(_tiny("bert"))
    assert np.isfinite(bert["key_bias"]).all() and bert["trace_z_m1"].isna().all()


def test_hypotheses_are_all_reported():
    rng = np.random.default_rng(2)
    rows = []
    for model in ("a", "b"):
        for h in range(40):
            first = h < 10
            rows.append({"model": model, "is_first": first, "is_previous": 10 <= h < 20, "is_current": h >= 34,
                         "is_duplicate": h >= 30, "is_induction": False, "directionality": rng.normal() - first,
                         "symmetry": rng.normal(), "positive_share": rng.random(), "trace_z": rng.normal(),
                         "trace_gain_m1": rng.normal(), "key_bias": rng.random(), "rotary": model == "a",
                         "has_bias": model == "b"})
    out = hb.run_hypotheses(pd.DataFrame(rows), n_resamples=200)
    assert set(out["hypothesis"]) == {h.key for h in hb.HYPOTHESES}
    h7 = out[(out.hypothesis == "H7") & (out.model == "pooled")].iloc[0]
    assert h7.auc < 0.5 and h7.verdict.startswith("confirmed (lower)")
    assert set(out[out.hypothesis == "H5"]["model"]) == {"a"}  # rotary only


def test_hypotheses_are_split_into_identities_and_empirical_ones():
    kinds = {h.key: h.kind for h in hb.HYPOTHESES}
    assert {k for k, v in kinds.items() if v == "identity"} == {"H1", "H2", "H3", "H4"}
    h4 = next(h for h in hb.HYPOTHESES if h.key == "H4")
    assert h4.label == "current" and "Current-token heads" in h4.statement and "duplicate" not in h4.statement.lower()


def _hyp_results(p_values, kinds, aucs, expected):
    return pd.DataFrame({"hypothesis": [f"H{i}" for i in range(len(p_values))], "kind": kinds, "model": "pooled",
                         "p_value": p_values, "auc": aucs, "expected": expected})


def test_holm_is_applied_within_each_kind_and_decides_what_holds():
    res = _hyp_results([0.001, 0.04, 0.001, 0.02, 0.05], ["identity", "identity", "empirical", "empirical",
                                                           "empirical"], [0.8, 0.7, 0.8, 0.3, 0.6],
                       ["higher", "higher", "higher", "lower", "higher"])
    fam = hb.hypothesis_family(res)
    np.testing.assert_allclose(fam["p_holm"], [0.002, 0.04, 0.003, 0.04, 0.05])
    assert fam["holds"].tolist() == [True, True, True, True, False]
    wrong_side = hb.hypothesis_family(_hyp_results([0.001], ["empirical"], [0.3], ["higher"]))
    assert not wrong_side["holds"].iloc[0]  # significant, but the other way round


def test_relabel_at_factor_one_reproduces_the_labels_and_larger_thresholds_label_fewer():
    rng = np.random.default_rng(0)
    scores = pd.DataFrame({"layer": 0, "head": range(40), **{n: rng.random(40) for n in hb.DECODER_LABELS},
                           "duplicate_null": 0.01, "induction_null": 0.01})
    nulls = dict.fromkeys(hb.DECODER_LABELS, 0.05)
    labelled = hb.label_heads(scores, nulls, causal=True)
    table = labelled.assign(model="m", **{f"{n}_chance": 0.05 for n in hb.DECODER_LABELS})
    again = hb.relabel(table, 1.0)
    assert (again["labels"].to_numpy() == labelled["labels"].to_numpy()).all()
    for n in hb.DECODER_LABELS:
        assert hb.relabel(table, 1.5)[f"is_{n}"].sum() <= labelled[f"is_{n}"].sum() <= \
            hb.relabel(table, 0.5)[f"is_{n}"].sum()


def test_split_half_agreement_is_perfect_for_identical_halves_and_near_chance_for_unrelated_ones():
    rng = np.random.default_rng(1)
    a = pd.DataFrame({"previous": rng.random(400)})
    a["is_previous"] = a["previous"] > 0.7
    same = hb.split_half_agreement(a, a, ["previous"]).iloc[0]
    assert same.kappa == pytest.approx(1) and same.score_rho == pytest.approx(1) and same.n_both == a.is_previous.sum()
    b = pd.DataFrame({"previous": rng.random(400)})
    b["is_previous"] = b["previous"] > 0.7
    other = hb.split_half_agreement(a, b, ["previous"]).iloc[0]
    assert abs(other.kappa) < 0.2 and abs(other.score_rho) < 0.2


def test_skew_effective_rank_from_factors_equals_the_dense_computation():
    rng = np.random.default_rng(3)
    wq, wk = rng.standard_normal((20, 4)), rng.standard_normal((20, 4))
    m = wq @ wk.T
    sv = np.linalg.svd((m - m.T) / 2, compute_uv=False)
    sv = sv[sv > 1e-10 * sv.max()]
    p = sv / sv.sum()
    assert hb.skew_effective_rank(wq, wk) == pytest.approx(np.exp(-(p * np.log(p)).sum()), rel=1e-9)
    # a rank-2 skew part (one rotation plane with equal singular values) has effective rank 2
    e = np.eye(20)
    assert hb.skew_effective_rank(e[:, :1], e[:, 1:2]) == pytest.approx(2.0)
    assert hb.skew_effective_rank(wq, wq) == 0.0  # a tied head has no skew part


def test_input_geometry_scores_the_form_on_the_layers_real_inputs():
    model = _tiny("llama", num_key_value_heads=2)
    ids = torch.randint(0, 60, (3, 9), generator=torch.Generator().manual_seed(0))
    geo = hb.input_geometry(model, ids)
    assert len(geo) == 8 and geo["input_symmetry"].between(-1, 1).all()
    captured = []
    hook = model.layers[1].self_attn.register_forward_pre_hook(
        lambda _m, a, k: captured.append(k.get("hidden_states", a[0] if a else None).detach().double()),
        with_kwargs=True)
    with torch.no_grad():
        model(ids)
    hook.remove()
    att = model.layers[1].self_attn
    wq = att.q_proj.weight[8:16].detach().double().numpy().T
    wk = att.k_proj.weight[0:8].detach().double().numpy().T
    x = captured[0].numpy()
    s = x @ wq @ wk.T @ np.swapaxes(x, 1, 2)
    eta = float((s * np.swapaxes(s, 1, 2)).sum() / (s * s).sum())
    row = geo[(geo["layer"] == 1) & (geo["head"] == 1)].iloc[0]
    assert row.input_symmetry == pytest.approx(eta, rel=1e-9)
    assert row.skew_effective_rank == pytest.approx(hb.skew_effective_rank(wq, wk))
    # a tied head has a symmetric form on any inputs
    with torch.no_grad():
        att.q_proj.weight[8:16] = att.k_proj.weight[0:8]
    tied = hb.input_geometry(model, ids)
    assert tied[(tied["layer"] == 1) & (tied["head"] == 1)].iloc[0].input_symmetry == pytest.approx(1)


def test_rank_correlation_interval_covers_the_estimate_and_detects_a_monotone_relation():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(200)
    ci = hb.rank_correlation(x, np.exp(x) + 0.1 * rng.standard_normal(200), n_resamples=300)
    assert ci.low <= ci.estimate <= ci.high and ci.low > 0.8
    null = hb.rank_correlation(x, rng.standard_normal(200), n_resamples=300)
    assert null.low < 0 < null.high
    with pytest.raises(ValueError, match="at least 4"):
        hb.rank_correlation([1, 2, 3], [1, 2, 3])
