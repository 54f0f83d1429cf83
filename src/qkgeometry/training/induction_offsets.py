"""Where the copying heads of chapter 8 look: a recorded run trained again, with the attention of its heads measured
at several offsets from the earlier occurrence of the query's token, and the in-context loss with each head
zeroed. Chapter 8, an exploratory addition written after the recorded analysis.

:func:`retrain_offsets` trains the run of an :class:`~qkgeometry.training.config.InductionConfig` again (the same
initialisation and training batches as :func:`qkgeometry.training.induction_runs.train_induction`, which only
reads the model between steps) and every ``every`` steps records, per layer and head, the copy-offset profile
(:func:`qkgeometry.heads.behaviour.copy_offset_profile`) on the run's held-out sequences with a copy and the probe
version on ``r r`` (:func:`qkgeometry.heads.behaviour.repeat_offset_profile`), and the in-context loss on the same
held-out sequences as the recorded run. At the last step it records the in-context loss with each head's output
zeroed, one head at a time (:func:`head_ablation_losses`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from .config import InductionConfig
from .induction_data import SegmentSpec, eval_batch

__all__ = ["head_ablation_losses", "offset_profiles", "retrain_offsets"]


def _held_out(cfg: InductionConfig):
    """The held-out sequences with a copy of the recorded runs (the probes' stream), with their copy positions."""
    spec = SegmentSpec(cfg.vocab_size, cfg.seq_len, cfg.min_segment, cfg.max_segment, cfg.skip)
    return eval_batch(spec, cfg.eval_sequences, seed=8, repeat=True)


def _in_context_loss(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    with torch.no_grad():
        logits = model(ids).logits[:, :-1]
        nll = -torch.log_softmax(logits.double(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    m = mask[:, 1:]
    return {"in_context_loss": float(nll[m].mean()), "other_loss": float(nll[~m].mean())}


def offset_profiles(model: Any, held_ids: torch.Tensor, copies: np.ndarray, repeat_ids: torch.Tensor, half: int,
                    offsets: Sequence[int]) -> pd.DataFrame:
    """Per layer, head and offset, the mean attention of copy queries at ``src + r``: on held-out sequences with a
    copy (``inputs = "copies"``) and on ``r r`` (``inputs = "repeat"``). Chapter 8."""
    from ..heads.behaviour import attention_patterns, copy_offset_profile, repeat_offset_profile

    was_training = model.training
    model.eval()
    held = attention_patterns(model, held_ids, batch_size=len(held_ids))
    rep = attention_patterns(model, repeat_ids, batch_size=len(repeat_ids))
    if was_training:
        model.train()
    frames = []
    for layer in sorted(held):
        frames.append(copy_offset_profile(held[layer], copies, offsets).assign(layer=layer, inputs="copies"))
        frames.append(repeat_offset_profile(rep[layer], half, offsets).assign(layer=layer, inputs="repeat"))
    out = pd.concat(frames, ignore_index=True)
    return out[["inputs", "layer", "head", "offset", "attention", "chance", "queries"]]


def head_ablation_losses(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> pd.DataFrame:
    """The in-context loss (and the loss on the other tokens) of ``model`` on ``ids`` with the output of one head
    zeroed at a time (its slice of the input of the block's output projection), and with none (``layer`` and
    ``head`` ``<NA>``). ``mask``: the predictable positions (:class:`~qkgeometry.training.induction_data.RepeatBatch`).
    Chapter 8."""
    blocks = model.transformer.h
    n_heads = model.config.n_head
    d_head = model.config.n_embd // n_heads
    was_training = model.training
    model.eval()
    rows = [{"layer": pd.NA, "head": pd.NA, **_in_context_loss(model, ids, mask)}]
    for layer, block in enumerate(blocks):
        for head in range(n_heads):
            def zero(_module, inputs, head=head):
                z = inputs[0].clone()
                z[..., head * d_head:(head + 1) * d_head] = 0.0
                return (z, *inputs[1:])

            handle = block.attn.c_proj.register_forward_pre_hook(zero)
            try:
                rows.append({"layer": layer, "head": head, **_in_context_loss(model, ids, mask)})
            finally:
                handle.remove()
    if was_training:
        model.train()
    return pd.DataFrame(rows).astype({"layer": "Int64", "head": "Int64"})


def retrain_offsets(cfg: InductionConfig, every: int = 100, offsets: Sequence[int] | None = None, threads: int = 1,
                    progress: bool = False) -> dict[str, pd.DataFrame]:
    """Train the run of ``cfg`` again and measure where its heads look (see the module's notes). Returns frames
    ``offsets`` (step, inputs, layer, head, offset, attention, chance, queries), ``losses`` (step, in_context_loss,
    other_loss; at every measured step) and ``ablation`` (the last step, each head zeroed). Chapter 8."""
    from ..heads.behaviour import COPY_OFFSETS
    from .induction_model import build_model
    from .induction_runs import make_probes, training_step

    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"every: must be a whole number of steps >= 1; got {every!r}.")
    offsets = tuple(COPY_OFFSETS if offsets is None else offsets)
    torch.set_num_threads(threads)
    spec = SegmentSpec(cfg.vocab_size, cfg.seq_len, cfg.min_segment, cfg.max_segment, cfg.skip)
    model = build_model(cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads, bool(cfg.d_mlp),
                        cfg.seed, cfg.init_std)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    probes = make_probes(cfg)
    held = _held_out(cfg)
    if not np.array_equal(held.ids, probes.held_out_ids.numpy()):
        raise RuntimeError("the held-out sequences differ from the recorded runs' probes.")
    held_ids, mask = torch.as_tensor(held.ids), torch.as_tensor(held.predictable)
    profiles, losses = [], []
    for step in range(cfg.steps + 1):
        if step % every == 0 or step == cfg.steps:
            profiles.append(offset_profiles(model, held_ids, held.copies, probes.repeat, probes.half, offsets)
                            .assign(step=step))
            losses.append({"step": step, **_in_context_loss(model, held_ids, mask)})
            model.train()
            if progress:
                print(f"{cfg.name} step {step}: in-context loss {losses[-1]['in_context_loss']:.4f}", flush=True)
        if step == cfg.steps:
            break
        training_step(model, opt, spec, cfg, step)
    ablation = head_ablation_losses(model, held_ids, mask)
    ablation.insert(0, "step", cfg.steps)
    frame = pd.concat(profiles, ignore_index=True)
    frame = frame[["step", *[c for c in frame.columns if c != "step"]]]
    return {"offsets": frame, "losses": pd.DataFrame(losses), "ablation": ablation}
