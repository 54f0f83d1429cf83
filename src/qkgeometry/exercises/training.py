"""Checkers for the exercises of chapter 5, "Symmetric initialisation".

* :func:`check_symmetric_init`: the learner's ``fn(model)`` must make every layer's ``W_qk`` symmetric *by copying the
  model's own initialised key weight into the query weight* (not by re-creating the layer, which changes the init
  distribution), and change nothing else.
* :func:`check_speedup`: the learner's ``fn(base_steps, base_losses, treated_steps, treated_losses)`` must return the
  paper's fraction of training saved, or ``None`` when the treated run never reaches the baseline's final loss.
* :func:`check_seeds_for_power`: the learner's ``fn(effect, sd, power, alpha)`` must return the fewest seeds at which
  the paired t-test detects a true mean difference ``effect`` (differences with standard deviation ``sd``) with
  probability ``power`` at level ``alpha``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from ..scores import symmetry_score_factored
from ..stats import seeds_for_power
from ..training.metrics import speedup
from ..training.models import ModelSpec, build_model, qk_factors, self_attentions
from . import report

__all__ = ["check_seeds_for_power", "check_speedup", "check_symmetric_init"]


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


#: (effect, sd, power, alpha) of Exercise 5.3's test cases: the chapter's own kind of numbers (nats), and one at
#: Holm's first step over eight contrasts
POWER_CASES = ((0.02, 0.01, 0.8, 0.05), (0.0195, 0.012, 0.8, 0.05 / 8), (0.01, 0.02, 0.9, 0.05), (0.05, 0.01, 0.8, 0.05))


def check_seeds_for_power(fn: Callable, seed: int = 0) -> bool:
    """Exercise 5.3: ``fn(effect, sd, power, alpha) -> int``, the fewest seeds for that power (paired t-test)."""
    name = "seeds for power"
    for effect, sd, power, alpha in POWER_CASES:
        want = seeds_for_power(effect, sd, power, alpha)
        try:
            got = fn(effect, sd, power, alpha)
        except Exception as e:
            return report(False, name, f"raised {type(e).__name__}: {e} for effect {effect}, sd {sd}")
        if got != want:
            hint = (" (too few: the t-test with n − 1 degrees of freedom has less power than the normal "
                    "approximation, most of all at a few seeds)" if isinstance(got, (int, np.integer)) and got < want
                    else " (the smallest n whose power reaches the target, not the first n above it)"
                    if isinstance(got, (int, np.integer)) and got == want + 1 else "")
            return report(False, name, f"effect {effect}, sd {sd}, power {power}, alpha {alpha:.4g}: got {got!r}, "
                                       f"expected {want}{hint}")
    return report(True, name, f"{len(POWER_CASES)} cases, one at Holm's first step over eight contrasts")
