"""The PyTorch Lightning callback: score the model every N steps while it trains (needs ``pip install lightning``).
Chapters 3 and 5."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .guards import refuse_sharded, run_config
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
    """:class:`~qkgeometry.integrations.ScoreCallback` for a Lightning ``Trainer``: every ``every`` optimizer steps,
    before the first (step 0) and at the last, on global rank 0 only, the ``transformers`` model held by the
    LightningModule (its attribute ``attribute``, default ``model``; wrappers are read through) is scored in memory
    and its rows appended to ``store``.

    The medians (``qkgeometry/symmetry_median``, ``qkgeometry/directionality_median``) are logged at exactly the
    scored steps, step 0 included, through each of the trainer's loggers (``logger.log_metrics(..., step=...)``, as
    Lightning's own ``LearningRateMonitor`` does), not through ``LightningModule.log``, which would carry a value
    forward to later steps; ``log=False`` only stores the rows. ``tokens``: a function of a training batch giving
    its number of tokens (e.g. ``lambda batch: batch["attention_mask"].sum()``), summed over the batches and the
    processes: each scored step then stores the tokens seen.

    Each ``fit`` is one run, named after the trainer's ``default_root_dir`` (or ``run``), with the time it started,
    Lightning's global seed (``seed_everything``) and a fingerprint of the model's config and the module's
    hyperparameters; ``fit(ckpt_path=...)`` continues the run its checkpoint was saved in. Scoring never stops
    training (failures are warnings; undefined scores are stored and logged as NaN); a model that can never be
    scored, and FSDP or DeepSpeed ZeRO-3 strategies, are refused when fitting starts, on every process. Other
    arguments as for :class:`~qkgeometry.integrations.LiveScorer`.
    """

    def __init__(self, store: str | Path | None = None, every: int = 100, *, attribute: str = "model",
                 run: str | None = None, per: str = "layer", num_std: float = 2.0, input_norm: str = "raw",
                 log: bool = True, tokens: Callable[[Any], Any] | None = None):
        if pl is None:
            raise ImportError(_MISSING)
        super().__init__()
        self.scorer = LiveScorer(store, every, run=run, per=per, num_std=num_std, input_norm=input_norm)
        self.attribute, self.log, self.tokens = attribute, log, tokens
        self._key = self._generate_state_key(store=None if store is None else str(store), run=run)
        self._resumed: str | None = None
        self._seen = self._last = self._resumed_tokens = 0

    @property
    def state_key(self) -> str:
        return self._key

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of this callback: the run it scores, and the tokens counted so far."""
        return {"run": None if self.scorer.run is None else str(self.scorer.run), "tokens": self._seen}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._resumed, self._resumed_tokens = state_dict.get("run"), int(state_dict.get("tokens") or 0)

    def _model(self, pl_module: Any) -> Any:
        model = getattr(pl_module, self.attribute, None)
        if model is None:
            raise ValueError(f"`attribute`: the LightningModule has no attribute {self.attribute!r} holding the "
                             "transformers model; pass ScoreLightningCallback(attribute=...) naming it.")
        return model

    # ------------------------------------------------------------------------------------------ trainer events
    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        refuse_sharded("ScoreLightningCallback", strategy=trainer.strategy)  # on every process, before any step
        self.scorer.check(self._model(pl_module), "ScoreLightningCallback")

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        step = self._last = int(trainer.global_step)
        self._seen = self._resumed_tokens if step > 0 else 0
        resumed, self._resumed, self._resumed_tokens = (self._resumed if step > 0 else None), None, 0
        if not trainer.is_global_zero:
            return

        def begin() -> None:  # a run of its own, or the run a resumed checkpoint was saved in
            hparams = dict(getattr(pl_module, "hparams", {}) or {})
            config = run_config(self._model(pl_module), hparams, {"max_steps": trainer.max_steps,
                                                                  "max_epochs": trainer.max_epochs})
            seed = os.environ.get("PL_GLOBAL_SEED")  # what seed_everything sets
            self.scorer.start(trainer.default_root_dir, config=config, resume=resumed, step=step,
                              seed=int(seed) if seed and seed.lstrip("-").isdigit() else None)

        self.scorer.safely(step, begin)
        if step == 0:
            self._score(trainer, pl_module, step, None)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.tokens is not None:
            self._seen += int(self.tokens(batch))
        step = int(trainer.global_step)
        final = trainer.max_steps is not None and 0 < trainer.max_steps <= step
        if step == self._last or not (self.scorer.due(step) or final):
            return  # the optimizer did not step since (gradient accumulation), or this step is not scored
        self._last = step
        tokens = None
        if self.tokens is not None:  # every process sums its batches: a collective, so all of them take part
            import torch

            seen = torch.tensor(float(self._seen), device=pl_module.device)  # where the collective runs (NCCL: GPU)
            tokens = int(trainer.strategy.reduce(seen, reduce_op="sum"))
        self._score(trainer, pl_module, step, tokens)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._score(trainer, pl_module, int(trainer.global_step), None)  # a run stopped early: its last step
        self.scorer.close()

    def _score(self, trainer: Any, pl_module: Any, step: int, tokens: int | None) -> None:
        """Score ``step`` on global rank 0, once per run, and log the medians at that step."""
        if not trainer.is_global_zero or self.scorer.run is None or step in self.scorer.scored:
            return
        medians = self.scorer.safely(step, lambda: self.scorer.score(self._model(pl_module), step, tokens=tokens))
        if medians and self.log:
            for logger in trainer.loggers:
                logger.log_metrics(medians, step=step)
