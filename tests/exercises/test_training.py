"""Tests for qkgeometry.exercises.training: chapter 5's checkers accept solutions and reject mistakes."""

from __future__ import annotations

import numpy as np
import torch

from qkgeometry.training.models import self_attentions


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


def test_the_paired_interval_checker_accepts_pairing_and_rejects_independent_groups(capsys):
    from scipy import stats as sps

    from qkgeometry.exercises.training import check_paired_interval

    def paired(treated, baseline):
        d = treated - baseline
        half = sps.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        return d.mean(), d.mean() - half, d.mean() + half

    def unpaired(treated, baseline):  # Welch's interval: the seed effect stays in the noise
        m = treated.mean() - baseline.mean()
        se = np.sqrt(treated.var(ddof=1) / len(treated) + baseline.var(ddof=1) / len(baseline))
        return m, m - 1.96 * se, m + 1.96 * se

    def normal_quantile(treated, baseline):
        d = treated - baseline
        half = 1.96 * d.std(ddof=1) / np.sqrt(len(d))
        return d.mean(), d.mean() - half, d.mean() + half

    assert check_paired_interval(paired)
    assert not check_paired_interval(unpaired) and "Pair them by seed" in capsys.readouterr().out
    assert not check_paired_interval(normal_quantile) and "degrees of freedom" in capsys.readouterr().out
