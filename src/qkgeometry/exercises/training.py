"""Checkers for the exercises of chapter 5, "Symmetric initialisation".

* :func:`check_symmetric_init`: the learner's ``fn(model)`` must make every layer's ``W_qk`` symmetric *by copying the
  model's own initialised key weight into the query weight* (not by re-creating the layer, which changes the init
  distribution), and change nothing else.
* :func:`check_speedup`: the learner's ``fn(base_steps, base_losses, treated_steps, treated_losses)`` must return the
  paper's fraction of training saved, or ``None`` when the treated run never reaches the baseline's final loss.
* :func:`check_paired_interval`: the learner's ``fn(treated, baseline)`` must return the mean of the per-seed
  differences and its 95% Student-t interval, ``(mean, low, high)``: paired by seed, not two independent groups.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from ..scores import symmetry_score_factored
from ..stats import paired_difference
from ..training.metrics import speedup
from ..training.models import ModelSpec, build_model, qk_factors, self_attentions
from . import report

__all__ = ["check_paired_interval", "check_speedup", "check_symmetric_init"]


def check_symmetric_init(fn: Callable[[torch.nn.Module], object], seed: int = 0) -> bool:
    """Exercise 5.1: ``fn(model)`` edits a freshly built BERT in place so that ``W_Q := W_K`` in every layer."""
    name = "symmetric init"
    spec = ModelSpec(vocab_size=200, hidden=32, layers=3, heads=4, ffn=64, max_len=16)
    for arch in ("encoder", "decoder"):
        reference = build_model(spec, arch, "default", seed)
        model = build_model(spec, arch, "default", seed)
        try:
            with torch.no_grad():
                out = fn(model)
        except Exception as e:
            return report(False, name, f"raised {type(e).__name__}: {e}")
        if isinstance(out, torch.nn.Module) and out is not model:
            model = out
        ref_params = dict(reference.named_parameters())
        for i, (attn, ref) in enumerate(zip(self_attentions(model), self_attentions(reference))):
            if not torch.equal(attn.key.weight, ref.key.weight):
                return report(False, name, f"layer {i}: W_K changed; keep the key weight and copy it into W_Q")
            if not torch.equal(attn.query.weight, ref.key.weight):
                std = attn.query.weight.std().item()
                hint = (f" (its std is {std:.3f}, the model's init has std {spec.init_range}: was the layer "
                        f"re-created with PyTorch's default init?)") if abs(std - spec.init_range) > 0.005 else ""
                return report(False, name, f"layer {i} ({arch}): W_Q is not a copy of W_K{hint}")
            if attn.query.bias is not None and not torch.equal(attn.query.bias, ref.key.bias):
                return report(False, name, f"layer {i} ({arch}): the query bias is not the key bias (zero at init)")
        for pname, p in model.named_parameters():
            if ".attention.self.query." in pname or pname not in ref_params:
                continue
            if not torch.equal(p, ref_params[pname]):
                return report(False, name, f"{pname} changed; only the query projection should")
        s = np.atleast_1d(symmetry_score_factored(*qk_factors(model)))
        if not np.allclose(s, 1.0, atol=1e-9):
            return report(False, name, f"symmetry scores {np.round(s, 3)} (want all 1)")
    return report(True, name, "W_Q = W_K in every layer of an encoder and a decoder; nothing else changed")


def _cases() -> list[tuple]:
    rng = np.random.default_rng(0)
    steps = np.arange(0, 1001, 100)
    base = 9.0 - 3.0 * (1 - np.exp(-steps / 300))
    cases = [
        (steps, base, steps, base - 0.3),  # faster: reaches early
        (steps, base, steps, base + 0.2),  # never reaches: "not reached", not 100%
        (steps, base, steps, base.copy()),  # identical curves: reaches only at the end, saves 0
        (steps, base, steps, base + rng.normal(0, 0.05, len(steps))),  # noise
        (steps[:6], base[:6], steps, base - 0.05),  # shorter baseline horizon
    ]
    return cases


def check_speedup(fn: Callable, seed: int = 0) -> bool:
    """Exercise 5.2: ``fn(base_steps, base_losses, treated_steps, treated_losses) -> float | None``."""
    name = "speed-up"
    for i, (bs, bl, ts, tl) in enumerate(_cases()):
        want = speedup(pd.DataFrame({"step": bs, "val_loss": bl}), pd.DataFrame({"step": ts, "val_loss": tl}))
        try:
            got = fn(np.array(bs), np.array(bl), np.array(ts), np.array(tl))
        except Exception as e:
            return report(False, name, f"raised {type(e).__name__}: {e} on test case {i}")
        if want.fraction is None:
            if got is not None:
                return report(False, name, f"test case {i}: the treated run never reaches the baseline's final "
                                           f"loss, so the answer is None ('not reached'); got {got!r}")
        elif got is None or not np.isclose(float(got), want.fraction, atol=1e-9):
            return report(False, name, f"test case {i}: got {got!r}, expected {want.fraction:.4f}")
    return report(True, name, f"{len(_cases())} test cases, including 'not reached'")


def _paired_cases() -> list[tuple[np.ndarray, np.ndarray]]:
    """Final losses of six seeds: a seed effect much larger than the treatment's, so that only pairing finds it;
    one case with no effect, and one with three seeds."""
    rng = np.random.default_rng(5)
    seed_effect = rng.normal(0, 0.05, 6)
    base = 6.2 + seed_effect
    return [(base - 0.02 + rng.normal(0, 0.004, 6), base), (base + rng.normal(0, 0.01, 6), base),
            (base[:3] + 0.01 + rng.normal(0, 0.002, 3), base[:3])]


def check_paired_interval(fn: Callable, seed: int = 0) -> bool:
    """Exercise 5.3: ``fn(treated, baseline) -> (mean, low, high)``, the paired difference and its 95% t-interval."""
    name = "paired interval"
    for i, (treated, baseline) in enumerate(_paired_cases()):
        want = paired_difference(treated, baseline).interval
        try:
            got = tuple(float(v) for v in fn(treated.copy(), baseline.copy()))
        except Exception as e:
            return report(False, name, f"raised {type(e).__name__}: {e} on test case {i}")
        if len(got) != 3:
            return report(False, name, f"test case {i}: return (mean, low, high); got {len(got)} numbers")
        if not np.isclose(got[0], want.estimate, atol=1e-9):
            return report(False, name, f"test case {i}: mean {got[0]:.5f}, expected {want.estimate:.5f}: the mean "
                                       "of treated − baseline, seed by seed")
        if not np.allclose(got[1:], (want.low, want.high), atol=1e-9):
            wide = got[2] - got[1] > 2 * (want.high - want.low)
            hint = (" (much wider: were the two arms treated as independent groups? Pair them by seed)" if wide
                    else " (the t quantile has n − 1 degrees of freedom)")
            return report(False, name, f"test case {i}: interval [{got[1]:.5f}, {got[2]:.5f}], expected "
                                       f"[{want.low:.5f}, {want.high:.5f}]{hint}")
    return report(True, name, f"{len(_paired_cases())} test cases, with seed effects larger than the treatment's")
