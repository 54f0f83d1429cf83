"""heads.behaviour: the detectors on hand-built attention patterns with known answers, the labels' thresholds and
nulls, relabelling and split-half agreement."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from qkgeometry.heads import behaviour

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
    scores = behaviour.pattern_scores(_stack(_previous(), _sink(), cur, _uniform_causal()), causal=True)
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
    scores = behaviour.pattern_scores(_stack(nxt, sep, np.full((T, T), 1 / T)), causal=False)
    np.testing.assert_allclose(scores["next"], [1, 1 / (T - 5), 1 / T])  # row T-2's next token is [SEP]
    np.testing.assert_allclose(scores["sep"], [1 / (T - 5), 1, 1 / T])
    np.testing.assert_allclose(scores["broad"][2], 1)
    moved = behaviour.pattern_scores(_stack(sep), causal=False, sep_positions=[3])
    assert moved["sep"][0] == 0


def test_uniform_scores_are_the_chance_levels():
    chance = behaviour.uniform_scores(T, causal=True)
    direct = behaviour.pattern_scores(_stack(_uniform_causal()), causal=True).iloc[0]
    for k, v in chance.items():
        assert v == pytest.approx(direct[k])
    assert chance["broad"] == pytest.approx(1)
    assert behaviour.uniform_scores(T, causal=False)["previous"] == pytest.approx(1 / T)


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
    scores = behaviour.repeat_scores(_stack(dup, ind, _uniform_causal(t)), half, offset)
    np.testing.assert_allclose(scores["duplicate"][:2], [1, 0])
    np.testing.assert_allclose(scores["induction"][:2], [0, 1])
    with pytest.raises(ValueError, match="does not match"):
        behaviour.repeat_scores(_stack(dup), half + 1, offset)


def test_repeated_random_tokens_repeat_and_the_control_does_not():
    rep = behaviour.repeated_random_tokens(5000, 3, 10, seed=1, prefix=[7])
    ctl = behaviour.repeated_random_tokens(5000, 3, 10, seed=1, prefix=[7], repeat=False)
    assert rep.shape == ctl.shape == (3, 21)
    assert torch.equal(rep[:, 1:11], rep[:, 11:]) and torch.all(rep[:, 0] == 7)
    assert torch.equal(ctl[:, 1:11], rep[:, 1:11]) and not torch.equal(ctl[:, 11:], rep[:, 11:])
    with pytest.raises(ValueError, match="vocab_size"):
        behaviour.repeated_random_tokens(1005, 1, 10)


def _scores_frame(**columns):
    n = len(next(iter(columns.values())))
    base = {name: np.zeros(n) for name in behaviour.DECODER_LABELS}
    base.update(duplicate_null=np.zeros(n), induction_null=np.zeros(n))
    base.update({k: np.asarray(v, dtype=float) for k, v in columns.items()})
    return pd.DataFrame({"layer": 0, "head": np.arange(n), **base})


def test_labels_need_the_threshold_and_the_null():
    chance = behaviour.uniform_scores(64, causal=True)
    frame = _scores_frame(previous=[0.9, 0.35, 0.9], local=[0.95, 0.4, 0.9], duplicate=[0.5, 0.5, 0.0],
                          duplicate_null=[0.01, 0.3, 0.0], broad=[0.2, 0.9, 0.1])
    out = behaviour.label_heads(frame, chance, causal=True)
    assert list(out["labels"]) == ["previous+local+duplicate", "broad", "previous+local"]
    # a chance level above a third of the score withholds the label even above the threshold
    strict = behaviour.label_heads(frame, {**chance, "previous": 0.5}, causal=True)
    assert not strict["is_previous"].any()
    assert behaviour.label_heads(frame, chance, causal=True, thresholds={"broad": 0.95})["is_broad"].sum() == 0
    with pytest.raises(ValueError, match="missing the column 'induction'"):
        behaviour.label_heads(frame.drop(columns="induction"), chance, causal=True)



def test_relabel_at_factor_one_reproduces_the_labels_and_larger_thresholds_label_fewer():
    rng = np.random.default_rng(0)
    scores = pd.DataFrame({"layer": 0, "head": range(40), **{n: rng.random(40) for n in behaviour.DECODER_LABELS},
                           "duplicate_null": 0.01, "induction_null": 0.01})
    nulls = dict.fromkeys(behaviour.DECODER_LABELS, 0.05)
    labelled = behaviour.label_heads(scores, nulls, causal=True)
    table = labelled.assign(model="m", **{f"{n}_chance": 0.05 for n in behaviour.DECODER_LABELS})
    again = behaviour.relabel(table, 1.0)
    assert (again["labels"].to_numpy() == labelled["labels"].to_numpy()).all()
    for n in behaviour.DECODER_LABELS:
        assert behaviour.relabel(table, 1.5)[f"is_{n}"].sum() <= labelled[f"is_{n}"].sum() <= \
            behaviour.relabel(table, 0.5)[f"is_{n}"].sum()


def test_split_half_agreement_is_perfect_for_identical_halves_and_near_chance_for_unrelated_ones():
    rng = np.random.default_rng(1)
    a = pd.DataFrame({"previous": rng.random(400)})
    a["is_previous"] = a["previous"] > 0.7
    same = behaviour.split_half_agreement(a, a, ["previous"]).iloc[0]
    assert same.kappa == pytest.approx(1) and same.score_rho == pytest.approx(1) and same.n_both == a.is_previous.sum()
    b = pd.DataFrame({"previous": rng.random(400)})
    b["is_previous"] = b["previous"] > 0.7
    other = behaviour.split_half_agreement(a, b, ["previous"]).iloc[0]
    assert abs(other.kappa) < 0.2 and abs(other.score_rho) < 0.2




@pytest.mark.parametrize("kwargs, needle", [
    ({"n_sequences": 0}, "n_sequences: must be a whole number >= 1; got 0"),
    ({"n_sequences": -2}, "n_sequences: must be a whole number >= 1"),
    ({"n_sequences": 2.5}, "n_sequences: must be a whole number"),
    ({"half": 0}, "half: must be a whole number >= 1; got 0"),
    ({"half": True}, "half: must be a whole number"),
    ({"low": -1}, "low: must be a whole number >= 0"),
    ({"prefix": (5000,)}, r"prefix: token ids must be whole numbers in \[0, 2000\)"),
])
def test_repeated_random_tokens_refuses_counts_that_make_no_sequences(kwargs, needle):
    args = {"vocab_size": 2000, "n_sequences": 3, "half": 5, "low": 100, **kwargs}
    with pytest.raises(ValueError, match=needle):
        behaviour.repeated_random_tokens(**args)


@pytest.mark.parametrize("kw", [{"window": -1}, {"window": 0}, {"window": T}, {"window": 1.5}, {"window": True},
                                {"skip": -1}, {"skip": T - 2}, {"skip": 2.0}])
def test_a_bad_window_or_skip_is_refused_naming_it(kw):
    patterns = _causal_rows(np.tril(np.ones((T, T))))[None, None]
    with pytest.raises(ValueError, match=rf"^{next(iter(kw))}: must be a whole number between"):
        behaviour.pattern_scores(patterns, causal=True, **kw)


def _looking_at(offset: int, copies, t=T, n_heads=1):
    """Patterns (sequences, heads, T, T) whose copy queries put all their attention on ``src + offset`` (every other
    row uniform over the visible keys)."""
    a = np.repeat(np.repeat(_uniform_causal(t)[None, None], len(copies), 0), n_heads, 1).copy()
    for k, (length, u, v) in enumerate(copies):
        for i in range(v + 1, v + length - 1):
            a[k, :, i] = 0.0
            a[k, :, i, i - (v - u) + offset] = 1.0
    return a


def test_copy_offset_profile_finds_the_offset_a_head_looks_at():
    copies = np.array([[4, 1, 6], [3, 0, 8]])          # queries 7, 8 (src 2, 3) and 9 (src 1)
    two = _looking_at(2, copies)
    one = _looking_at(1, copies)
    f = behaviour.copy_offset_profile(np.concatenate([two, one], axis=1), copies, offsets=(0, 1, 2))
    got = f.pivot(index="head", columns="offset", values="attention").to_numpy()
    np.testing.assert_allclose(got, [[0, 0, 1], [0, 1, 0]])
    assert set(f["queries"]) == {3}
    # only the copy queries count: the uniform rows elsewhere leave the profile unchanged
    uniform = np.repeat(_uniform_causal()[None, None], 2, 0)
    g = behaviour.copy_offset_profile(uniform, copies, offsets=(0,))
    # uniform rows: query i spreads 1/(i + 1) on each key; the mean over queries 7, 8, 9
    assert g["attention"].iloc[0] == pytest.approx(np.mean([1 / 8, 1 / 9, 1 / 10]))
    assert g["chance"].iloc[0] == pytest.approx(np.mean([1 / 8, 1 / 9, 1 / 10]))
    assert (f["chance"] == g["chance"].iloc[0]).all()


def test_repeat_offset_profile_at_zero_and_one_is_the_duplicate_and_induction_score():
    rng = np.random.default_rng(0)
    w = np.tril(rng.random((3, 2, T, T)))
    a = w / w.sum(-1, keepdims=True)
    half = T // 2
    f = behaviour.repeat_offset_profile(a, half, offsets=(-1, 0, 1, 2))
    s = behaviour.repeat_scores(a, half)
    wide = f.pivot(index="head", columns="offset", values="attention")
    np.testing.assert_allclose(wide[0].to_numpy(), s["duplicate"].to_numpy())
    np.testing.assert_allclose(wide[1].to_numpy(), s["induction"].to_numpy())
    i = np.arange(half + 1, T)
    np.testing.assert_allclose(wide[2].to_numpy(), a[:, :, i, i - half + 2].mean((0, 2)))


@pytest.mark.parametrize("call, needle", [
    (lambda a: behaviour.copy_offset_profile(a, np.array([[4, 1, 6]])), "copies: expected whole numbers of shape"),
    (lambda a: behaviour.copy_offset_profile(a, np.array([[4.0, 1, 6], [3, 0, 8]])), "copies: expected whole"),
    (lambda a: behaviour.copy_offset_profile(a, np.array([[4, 3, 6], [3, 0, 8]])), "copies: need L >= 3"),
    (lambda a: behaviour.copy_offset_profile(a, np.array([[4, 1, 10], [3, 0, 8]])), "copies: need L >= 3"),
    (lambda a: behaviour.copy_offset_profile(a, np.array([[4, 1, 6], [3, 0, 8]]), offsets=(0, 6)), "offsets: the key"),
    (lambda a: behaviour.copy_offset_profile(a, np.array([[4, 1, 6], [3, 0, 8]]), offsets=(-3,)), "offsets: the key"),
    (lambda a: behaviour.copy_offset_profile(a, np.array([[4, 1, 6], [3, 0, 8]]), offsets=()), "offsets: must be"),
    (lambda a: behaviour.copy_offset_profile(a, np.array([[4, 1, 6], [3, 0, 8]]), offsets=(1, 1)), "offsets: must"),
    (lambda a: behaviour.copy_offset_profile(a, np.array([[4, 1, 6], [3, 0, 8]]), offsets=(1.0,)), "offsets: must"),
    (lambda a: behaviour.repeat_offset_profile(a, 5), "patterns: T = 12 does not match"),
    (lambda a: behaviour.repeat_offset_profile(a, 6, offsets=(7,)), "offsets: the key"),
    (lambda a: behaviour.repeat_offset_profile(a, 0), "half: must be a whole number >= 1"),
    (lambda a: behaviour.copy_offset_profile(a[0, 0], np.array([[4, 1, 6]])), "patterns: expected"),
])
def test_offset_profiles_refuse_bad_input_naming_it(call, needle):
    a = np.repeat(_uniform_causal()[None, None], 2, 0)
    with pytest.raises(ValueError, match=needle):
        call(a)
