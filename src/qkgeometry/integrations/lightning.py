"""The PyTorch Lightning callback: score the model every N steps while it trains (needs ``pip install lightning``).
Chapters 3 and 5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .live import LiveScorer

try:
    import lightning.pytorch as pl
except ImportError:  # the older package name, or none
    try:
        import pytorch_lightning as pl
    except ImportError:
        pl = None

__all__ = ["ScoreLightningCallback"]

_MISSING = ("qkgeometry.integrations.ScoreLightningCallback needs PyTorch Lightning, which is not installed; run "
            "`pip install lightning`, or use ScoreCallback with a transformers Trainer.")


class ScoreLightningCallback(pl.Callback if pl is not None else object):
    """:class:`~qkgeometry.integrations.ScoreCallback` for a Lightning ``Trainer``: every ``every`` optimizer steps
    (and before the first), on global rank 0 only, the ``transformers`` model held by the LightningModule (its
    attribute ``attribute``, default ``model``) is scored in memory, the rows appended to ``store`` and the medians
    logged with ``LightningModule.log_dict`` (so the module's loggers show them). Other arguments as for
    :class:`~qkgeometry.integrations.LiveScorer`; the run defaults to the trainer's ``default_root_dir``."""

    def __init__(self, store: str | Path | None = None, every: int = 100, *, attribute: str = "model",
                 run: str | None = None, per: str = "layer", num_std: float = 2.0, input_norm: str = "raw"):
        if pl is None:
            raise ImportError(_MISSING)
        super().__init__()
        self.scorer = LiveScorer(store, every, run=run, per=per, num_std=num_std, input_norm=input_norm)
        self.attribute = attribute
        self._scored: set[int] = set()

    def _model(self, pl_module: Any) -> Any:
        model = getattr(pl_module, self.attribute, None)
        if model is None:
            raise ValueError(f"`attribute`: the LightningModule has no attribute {self.attribute!r} holding the "
                             "transformers model; pass ScoreLightningCallback(attribute=...) naming it.")
        return model

    def _score(self, trainer: Any, pl_module: Any) -> dict[str, float]:
        step = int(trainer.global_step)
        if not trainer.is_global_zero or step in self._scored:
            return {}
        self._scored.add(step)
        return self.scorer.score(self._model(pl_module), step, run=self.scorer.run_of(trainer.default_root_dir))

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._model(pl_module)  # a wrong attribute is reported before the first step
        if trainer.global_step == 0:
            self._score(trainer, pl_module)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.scorer.due(int(trainer.global_step)):
            medians = self._score(trainer, pl_module)
            if medians:
                pl_module.log_dict(medians, rank_zero_only=True)
