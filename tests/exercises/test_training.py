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


def test_the_power_checker_accepts_the_t_test_and_rejects_the_normal_approximation(capsys):
    import math

    from scipy import stats as sps

    from qkgeometry.exercises.training import check_seeds_for_power

    def by_t(effect, sd, power, alpha):
        n = 2
        while True:
            crit = sps.t.ppf(1 - alpha / 2, n - 1)
            nc = effect / sd * math.sqrt(n)
            if sps.nct.sf(crit, n - 1, nc) + sps.nct.cdf(-crit, n - 1, nc) >= power:
                return n
            n += 1

    def by_normal(effect, sd, power, alpha):
        z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
        return math.ceil((z * sd / effect) ** 2)

    assert check_seeds_for_power(by_t)
    assert not check_seeds_for_power(by_normal) and "normal approximation" in capsys.readouterr().out
