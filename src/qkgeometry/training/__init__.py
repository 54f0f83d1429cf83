"""Training small Transformers: the initialisation experiments (chapter 5) and the objectives comparison (chapter 3).

* :mod:`.config`: the runs' configurations (:class:`TrainConfig`, :class:`~.config.ObjectiveConfig`), torch-free.
* :mod:`.data`: corpora (Wikipedia leads, State of the Union), cached WordPiece tokenizer, seeded batches.
* :mod:`.models`: BERT encoder (MLM) / causal decoder, the initialisations, per-layer Q/K scores.
* :mod:`.loop`: a seeded, resumable, CSV-logging training loop (and round-robin grids).
* :mod:`.metrics`: speed-up (with "not reached"), steps to a threshold, paired differences over seeds (intervals
  and verdicts from :mod:`qkgeometry.stats`).
* :mod:`.objectives`: chapter 3's names in one place, from :mod:`.objective_model`, :mod:`.objective_batches`,
  :mod:`.objective_gradients` and :mod:`.objective_runs`.
* :mod:`.cli`: ``qkgeometry train`` and ``qkgeometry train-objectives``.

Needs the ``train`` extra (``pip install "qkgeometry[train]"``: tokenizers, accelerate) and torch.

Bitwise reproducibility on CPU: without Conditional Numerical Reproducibility, MKL's sgemm may pick a code path by
memory alignment, so two runs with the same seed can differ in the last bits. Importing this package sets
``MKL_CBWR=AUTO`` (unless already set), before any of its modules lets torch make its first MKL call.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover (static analysers see the eager imports)
    from .config import ARCHES, INITS, TrainConfig
    from .data import TokenData, load_corpus, prepare_data, sotu_speeches
    from .loop import Run, read_log, train, train_round_robin
    from .metrics import (
        SpeedUp,
        final_loss,
        paired_differences,
        seed_interval,
        speedup,
        speedup_table,
        steps_to_threshold,
    )
    from .models import ModelSpec, apply_init, build_model, qk_scores

os.environ.setdefault("MKL_CBWR", "AUTO")

# Imported on first use: `qkgeometry --help` registers the `train` subcommand without importing torch.
_EXPORTS = {
    **dict.fromkeys(["TokenData", "load_corpus", "prepare_data", "sotu_speeches"], "data"),
    **dict.fromkeys(["Run", "read_log", "train", "train_round_robin"], "loop"),
    **dict.fromkeys(["ARCHES", "INITS", "TrainConfig"], "config"),
    **dict.fromkeys(["SpeedUp", "final_loss", "paired_differences", "seed_interval", "speedup",
                     "speedup_table", "steps_to_threshold"], "metrics"),
    **dict.fromkeys(["ModelSpec", "apply_init", "build_model", "qk_scores"], "models"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'qkgeometry.training' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ARCHES", "INITS", "ModelSpec", "Run", "SpeedUp", "TokenData", "TrainConfig", "apply_init", "build_model",
    "final_loss", "load_corpus", "paired_differences", "prepare_data", "qk_scores", "read_log", "seed_interval",
    "sotu_speeches", "speedup", "speedup_table", "steps_to_threshold", "train", "train_round_robin",
]
