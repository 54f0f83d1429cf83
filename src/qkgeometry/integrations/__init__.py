"""Score a model while it trains: callbacks for training loops. Chapters 3 and 5.

* :class:`ScoreCallback` — a ``transformers.TrainerCallback``: every ``every`` optimizer steps (and before the
  first, and at the last) it scores the model in memory, logs the medians through the trainer's own logging (so
  TensorBoard, W&B or trackio show them) and appends the per-layer (or per-head) rows to a trajectory store that
  ``qkgeometry plot STORE --trajectory`` draws;
* :class:`ScoreLightningCallback` — the same for PyTorch Lightning (when Lightning is installed), logging through
  the trainer's loggers at exactly the scored steps;
* :class:`LiveScorer` — the part they share, for any other training loop: ``scorer.score(model, step)``.

Each start of training is one run (:mod:`qkgeometry.surveying.runs`), stored apart from every other; resuming from
a checkpoint continues its run. Scoring reads the weights the model already holds (no copy of the model, one
layer's Q/K in float64 at a time; the wrappers people train with are read through:
:mod:`qkgeometry.readers.module`) with the factored kernel, on the model's own CUDA device or on the CPU; in a
multi-process (DDP) run only the main process scores and writes. It never stops training: a failure is a warning,
and undefined scores (a diverging run) are stored and logged as NaN. ``benchmarks/bench_callback.py`` measures what
it costs.

``transformers`` (or Lightning) is imported when the callback is first used, not with this package.
"""

from __future__ import annotations

from typing import Any

from .live import LIVE_PREFIX, LiveScorer

__all__ = ["LIVE_PREFIX", "LiveScorer", "ScoreCallback", "ScoreLightningCallback"]


def __getattr__(name: str) -> Any:
    if name == "ScoreCallback":
        from .hf_trainer import ScoreCallback

        return ScoreCallback
    if name == "ScoreLightningCallback":
        from .lightning import ScoreLightningCallback

        return ScoreLightningCallback
    raise AttributeError(f"module 'qkgeometry.integrations' has no attribute {name!r}")
