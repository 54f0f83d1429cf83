"""Training objectives on an equal footing: causal LM, masked LM, replaced-token detection, the authors' decoder
objective and the causal LM at the masked LM's loss density. Chapter 3.

Chapter 3, "A fair test", trains the same small Transformer from the same initialisation on the same sequences of
the offline Wikipedia leads, once per objective. This module gathers the experiment's names in one place
(``from qkgeometry.training import objectives as ob``); each job lives in its own module:

* :mod:`.config`: :class:`ObjectiveConfig` (sizes and schedule) and :data:`OBJECTIVES`;
* :mod:`.objective_model`: :class:`ObjectiveTransformer`, pre-LayerNorm blocks whose attention can be captured;
* :mod:`.objective_batches`: the three objectives' batches and losses (:func:`make_objective_batch`,
  :func:`objective_loss`, :func:`unigram_probs`);
* :mod:`.objective_gradients`: the exact logit gradients of every layer and their pairs
  (:func:`attention_gradients`, :func:`gradient_rows`);
* :mod:`qkgeometry.analyses.fair_test`: the recorded plan's family of contrasts, the mask-or-density decision and matched learning;
* :mod:`.objective_runs`: training, pairing by seed, summaries and recorded runs (:func:`compare_objectives`,
  :func:`run_medians`, :func:`seed_summaries`, :func:`record_runs`, :func:`read_recorded`).

``qkgeometry train-objectives --out FOLDER ...`` records the runs.
"""

from __future__ import annotations

from .config import ALL_OBJECTIVES, AUTHORS_DECODER, OBJECTIVES, SPARSE_CAUSAL, ObjectiveConfig
from .objective_batches import ObjectiveBatch, make_objective_batch, objective_loss, unigram_probs
from .objective_gradients import LayerGradient, attention_gradients, gradient_rows
from .objective_model import ObjectiveTransformer
from .objective_runs import (
    UNITS,
    compare_objectives,
    gradient_medians,
    median_null_band,
    read_recorded,
    record_runs,
    run_medians,
    score_rows,
    seed_summaries,
    train_with_objective,
    validation_loss,
    validation_set,
)

__all__ = [
    "ALL_OBJECTIVES",
    "AUTHORS_DECODER",
    "OBJECTIVES",
    "SPARSE_CAUSAL",
    "UNITS",
    "LayerGradient",
    "ObjectiveBatch",
    "ObjectiveConfig",
    "ObjectiveTransformer",
    "attention_gradients",
    "compare_objectives",
    "gradient_medians",
    "gradient_rows",
    "make_objective_batch",
    "median_null_band",
    "objective_loss",
    "read_recorded",
    "record_runs",
    "run_medians",
    "score_rows",
    "seed_summaries",
    "train_with_objective",
    "unigram_probs",
    "validation_loss",
    "validation_set",
]
