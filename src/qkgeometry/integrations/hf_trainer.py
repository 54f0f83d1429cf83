"""The ``transformers.Trainer`` callback: score the model every N steps while it trains. Chapters 3 and 5."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from .live import LiveScorer

__all__ = ["ScoreCallback"]


class ScoreCallback(TrainerCallback):
    """Score the model in memory every ``every`` optimizer steps, and once before the first step (step 0).

    >>> trainer = Trainer(model, args, train_dataset=data,
    ...                   callbacks=[ScoreCallback(store="run.sqlite", every=50)])  # doctest: +SKIP

    At each scored step, on the main process only (a DDP run scores once, on rank 0):

    * the rows (one per layer, or per head with ``per="head"``) are appended to ``store``, keyed by the run and the
      step (the tokens seen too, when the trainer counts them: ``include_num_input_tokens_seen``);
      ``qkgeometry plot STORE --trajectory`` draws them, and :attr:`scorer` keeps them in memory
      (``callback.scorer.trajectory()``);
    * the medians over layers of both scores are logged through the trainer's own logging
      (``qkgeometry/symmetry_median``, ``qkgeometry/directionality_median``): they reach TensorBoard, W&B or
      trackio, and ``trainer.state.log_history``, with the loss of that step (the trainer logs every scored step,
      whatever ``logging_steps`` says; ``log=False`` leaves its logging alone and only stores the rows).

    The weights are read where they are (no copy of the model; one layer's Q/K in float64 at a time, on the
    model's device) with the factored kernel. Training that shards the weights themselves across processes (FSDP,
    DeepSpeed ZeRO-3) holds no whole Q/K on any one of them and is refused when training starts; DDP and ZeRO-1/2
    are fine. ``store``, ``every``, ``run``, ``per``, ``num_std``, ``input_norm``:
    see :class:`~qkgeometry.integrations.LiveScorer`; they are checked when the callback is made, before training.
    """

    def __init__(self, store: str | Path | None = None, every: int = 100, *, run: str | None = None,
                 per: str = "layer", num_std: float = 2.0, input_norm: str = "raw", log: bool = True):
        self.scorer = LiveScorer(store, every, run=run, per=per, num_std=num_std, input_norm=input_norm)
        self.log = log
        self._pending: dict[str, float] = {}
        self._scored: set[int] = set()

    # ------------------------------------------------------------------------------------------ trainer events
    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        _log_before_reporters(self)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        _log_before_reporters(self)
        _check_whole_weights(args)
        if state.global_step == 0:  # the initial weights, where the trajectory starts: stored, not logged (the
            self._score(args, state, model, log=False)  # trainer logs no step 0)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> Any:
        if self.scorer.due(state.global_step):
            self._score(args, state, model)
            if self.log:  # the trainer logs this step, with the medians (on_log). On every process: logging
                control.should_log = True  # gathers the loss across processes, so all must log the same steps
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if not self._pending or logs is None:
            return
        logs.update(self._pending)  # the reporters after this callback (TensorBoard, W&B...) see them
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(self._pending)
        self._pending = {}

    # ------------------------------------------------------------------------------------------ scoring
    def _score(self, args: Any, state: Any, model: Any, log: bool = True) -> bool:
        """Score on the main process only; True when it scored."""
        if not state.is_world_process_zero or model is None or state.global_step in self._scored:
            return False
        counted = getattr(args, "include_num_input_tokens_seen", "no") not in ("no", False, None)
        tokens = int(getattr(state, "num_input_tokens_seen", 0)) if counted else None
        medians = self.scorer.score(model, state.global_step, run=self.scorer.run_of(args.output_dir),
                                    tokens=tokens)
        self._scored.add(state.global_step)
        if self.log and log:
            self._pending = {**self._pending, **medians}
        return True


def _log_before_reporters(callback: TrainerCallback) -> None:
    """Move ``callback`` ahead of the trainer's reporting callbacks (TensorBoard, W&B...), which the trainer lists
    first, so that the medians it adds to a step's logs reach them. The trainer's callback list is found from the
    event being dispatched; where it cannot be, the medians still reach ``trainer.state.log_history``."""
    frame = sys._getframe(2)  # CallbackHandler.call_event -> on_<event> -> here
    handler = frame.f_locals.get("self")
    callbacks = getattr(handler, "callbacks", None)
    if not isinstance(callbacks, list) or callback not in callbacks:
        return
    from transformers.trainer_callback import DefaultFlowCallback

    callbacks.remove(callback)
    flow = [i for i, c in enumerate(callbacks) if isinstance(c, DefaultFlowCallback)]
    callbacks.insert(flow[0] + 1 if flow else 0, callback)


def _check_whole_weights(args: Any) -> None:
    """Refuse training whose processes each hold a shard of the weights (FSDP, DeepSpeed ZeRO-3): scoring on the
    main process would read a shard, or wait forever for the others to gather the weights."""
    sharded = "FSDP (`fsdp`)" if getattr(args, "fsdp", None) else None
    if sharded is None and getattr(args, "deepspeed", None):
        from transformers.integrations import is_deepspeed_zero3_enabled

        sharded = "DeepSpeed ZeRO-3" if is_deepspeed_zero3_enabled() else None
    if sharded:
        raise ValueError(f"ScoreCallback: this training shards the weights across processes ({sharded}), so no "
                         "process holds whole Q/K weights to score; score the saved checkpoints afterwards with "
                         "`qkgeometry trajectory OUTPUT_DIR --out STORE` instead.")
