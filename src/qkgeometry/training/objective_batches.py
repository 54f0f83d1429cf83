"""The three objectives of chapter 3: their batches and their losses. Chapter 3, "A fair test".

* ``"causal"``: causal attention, next-token cross-entropy at every position (a decoder);
* ``"mlm"``: bidirectional attention, BERT's masked LM: a fraction ``mask_prob`` of the positions is chosen (80%
  replaced by [MASK], 10% by a random token, 10% kept) and the loss reads **only** the chosen positions (an encoder);
* ``"rtd"``: bidirectional attention, replaced-token detection in the style of ELECTRA: a fraction ``mask_prob`` of
  the positions is replaced by tokens drawn from the corpus' unigram distribution (a fixed generator instead of
  ELECTRA's small trained one) and a binary head predicts, **at every position**, whether the token was replaced.
* ``"causal-masked"``: the paper's decoders as their training script builds them (a causal BERT fed by the masked-LM
  collator): causal attention over the MLM-corrupted input (the same chosen positions as ``"mlm"`` for a seed and
  step), and the cross-entropy of position t predicting the original token t + 1, only where t + 1 was chosen.
* ``"causal-sparse"``: causal attention over the **clean** input, and the next-token cross-entropy read only where
  t + 1 was chosen by the masked-LM draw (the same positions as ``"mlm"``): the causal LM at the masked LM's loss
  density, so that the mask and the number of supervised positions can be told apart.

Every objective sees the same (batch × sequence) input tokens at every step: equal token budgets. The masks are
pure functions of (seed, step), so runs are paired by seed.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from .config import ALL_OBJECTIVES, CAUSAL_OBJECTIVES, OBJECTIVES
from .data import SPECIAL_TOKENS, keyed_generator, mlm_mask
from .objective_model import ObjectiveTransformer

__all__ = ["ALL_OBJECTIVES", "OBJECTIVES", "ObjectiveBatch", "check_objective", "make_objective_batch", "objective_loss",
           "unigram_probs"]

Tensor = torch.Tensor


class ObjectiveBatch(NamedTuple):
    """One batch of one objective. ``inputs``/``targets`` int64 (B, T). ``selected`` bool (B, T): the MLM positions
    to predict, or the RTD positions that were corrupted (None for causal). ``labels``: RTD float (B, T), 1 where
    the input token differs from the original (None otherwise)."""

    objective: str
    inputs: Tensor
    targets: Tensor
    selected: Tensor | None
    labels: Tensor | None


def check_objective(objective: str) -> None:
    """Raise ValueError unless ``objective`` is one of :data:`ALL_OBJECTIVES`."""
    if objective not in ALL_OBJECTIVES:
        raise ValueError(f"`objective` must be one of {', '.join(ALL_OBJECTIVES)}; got {objective!r}.")


def unigram_probs(stream: np.ndarray, vocab_size: int) -> Tensor:
    """Unigram distribution of ``stream`` over the vocabulary, special tokens excluded: RTD's fixed generator."""
    counts = np.bincount(np.asarray(stream, dtype=np.int64), minlength=vocab_size).astype(np.float64)[:vocab_size]
    counts[: len(SPECIAL_TOKENS)] = 0.0
    if counts.sum() == 0:
        raise ValueError("`stream` holds no ordinary tokens (only special ones); cannot build a unigram generator.")
    return torch.from_numpy(counts / counts.sum())


def make_objective_batch(ids: Tensor, objective: str, vocab_size: int, seed: int, step: int,
                         mask_prob: float = 0.15, unigram: Tensor | None = None) -> ObjectiveBatch:
    """The batch of ``objective`` built from the clean sequences ``ids`` (B, T), a pure function of (seed, step).

    MLM masks come from :func:`qkgeometry.training.data.mlm_mask` (BERT's 80/10/10 rule). RTD needs ``unigram``
    (:func:`unigram_probs`): chosen positions get a token drawn from it; a draw equal to the original is not a
    replacement (label 0), as in ELECTRA.
    """
    check_objective(objective)
    if objective == "causal":
        return ObjectiveBatch(objective, ids, ids, None, None)
    if objective in ("mlm", "causal-masked", "causal-sparse"):  # the same chosen positions, paired by (seed, step)
        inputs, selected = mlm_mask(ids, vocab_size, keyed_generator(seed, step, 2), prob=mask_prob)
        return ObjectiveBatch(objective, ids if objective == "causal-sparse" else inputs, ids, selected, None)
    if unigram is None:
        raise ValueError("objective='rtd' needs `unigram`, the replacement distribution (see unigram_probs).")
    gen = keyed_generator(seed, step, 3)
    eligible = ids >= len(SPECIAL_TOKENS)
    selected = (torch.rand(ids.shape, generator=gen) < mask_prob) & eligible
    draws = torch.multinomial(unigram.float(), ids.numel(), replacement=True, generator=gen).view(ids.shape)
    inputs = torch.where(selected, draws, ids)
    return ObjectiveBatch(objective, inputs, ids, selected, (inputs != ids).float())


def objective_loss(model: ObjectiveTransformer, batch: ObjectiveBatch, capture: list | None = None) -> Tensor:
    """The scalar loss of ``batch`` (mean over the positions the objective reads). Chapter 3, "A fair test".

    causal: cross-entropy of position t predicting token t + 1, every t < T − 1; mlm: cross-entropy on the selected
    positions only; rtd: binary cross-entropy of "replaced?" at every position; causal-masked and causal-sparse:
    cross-entropy of position t predicting the original token t + 1 where t + 1 was selected.
    """
    check_objective(batch.objective)
    h = model.hidden(batch.inputs, causal=batch.objective in CAUSAL_OBJECTIVES, capture=capture)
    if batch.objective == "causal":
        logits = model.lm_logits(h[:, :-1])
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets[:, 1:].reshape(-1))
    if batch.objective in ("causal-masked", "causal-sparse"):
        chosen = batch.selected[:, 1:]
        return nn.functional.cross_entropy(model.lm_logits(h[:, :-1][chosen]), batch.targets[:, 1:][chosen])
    if batch.objective == "mlm":
        return nn.functional.cross_entropy(model.lm_logits(h[batch.selected]), batch.targets[batch.selected])
    return nn.functional.binary_cross_entropy_with_logits(model.rtd_head(h).squeeze(-1), batch.labels)
