"""The ``transformers.Trainer`` callback: score the model every N steps while it trains. Chapters 3 and 5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from .guards import refuse_sharded, run_config
from .live import LiveScorer

__all__ = ["ScoreCallback"]


class ScoreCallback(TrainerCallback, ExportableState):
    """Score the model in memory every ``every`` optimizer steps, before the first (step 0) and at the last.

    >>> trainer = Trainer(model, args, train_dataset=data,
    ...                   callbacks=[ScoreCallback(store="run.sqlite", every=50)])  # doctest: +SKIP

    Each ``trainer.train()`` is one run (:class:`~qkgeometry.surveying.runs.RunId`: named after ``args.output_dir``,
    or ``run``, with the time it started, ``args.seed`` and a fingerprint of the model's config and the training
    arguments), stored apart from every other run, also from the runs of the same folder; a callback can be used
    for many runs (another ``train()``, each trial of ``hyperparameter_search``). Training resumed from a checkpoint
    (``train(resume_from_checkpoint=...)``) continues the run that saved it: the run's identity is kept in the
    checkpoint's trainer state, and the steps after the checkpoint are scored once.

    At each scored step, on the main process only (a DDP run scores once, on rank 0):

    * the rows (one per layer, or per head with ``per="head"``) are appended to ``store`` (the tokens seen too,
      when the trainer counts them: ``include_num_input_tokens_seen``); ``qkgeometry plot STORE --trajectory``
      draws them, and ``callback.scorer.trajectory()`` returns them;
    * the medians over layers of both scores are logged through the trainer's own logging as
      ``qkgeometry/symmetry_median`` and ``qkgeometry/directionality_median``, with the loss of that step: in
      ``trainer.state.log_history`` under those names, and in TensorBoard and W&B, which put the trainer's training
      metrics under ``train/``, as ``train/qkgeometry/...``. The trainer logs every scored step but step 0, whatever
      ``logging_steps`` says; step 0 (the initial weights, where the trajectory starts) is stored, not logged, as
      the trainer logs no step 0. ``log=False`` leaves the trainer's logging alone and only stores the rows.

    Scoring never stops training: a step whose weights hold NaN or Inf (a diverging run) or give an all-zero W_qk
    is stored and logged as NaN, with one warning that names the step and the layer, and any other failure to
    score a step is a warning. What can never be scored is refused when training starts, on every process: a
    model that is not a ``transformers`` model (wrappers are read through: ``torch.compile``, PEFT/LoRA with its
    adapters' deltas, :mod:`qkgeometry.readers.module`), and training that shards the weights themselves across
    processes (FSDP, DeepSpeed ZeRO-3, also when set up through ``accelerate launch``), where no process holds
    whole Q/K weights; DDP and ZeRO-1/2 are fine.

    ``store``, ``every``, ``run``, ``per``, ``num_std``, ``input_norm``: see
    :class:`~qkgeometry.integrations.LiveScorer`; they are checked when the callback is made, before training.
    """

    def __init__(self, store: str | Path | None = None, every: int = 100, *, run: str | None = None,
                 per: str = "layer", num_std: float = 2.0, input_norm: str = "raw", log: bool = True):
        self.scorer = LiveScorer(store, every, run=run, per=per, num_std=num_std, input_norm=input_norm)
        self.log = log
        self._args = {"store": None if store is None else str(store), "every": every, "run": run, "per": per,
                      "num_std": float(num_std), "input_norm": input_norm, "log": log}
        self._pending: dict[str, float] = {}

    def state(self) -> dict:
        """What a checkpoint keeps of this callback (``ExportableState``): its arguments and the run it scores."""
        return {"args": dict(self._args), "attributes": {"resumed_run": None if self.scorer.run is None
                                                          else str(self.scorer.run)}}

    # ------------------------------------------------------------------------------------------ trainer events
    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        _ahead_of_reporters(self)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        _ahead_of_reporters(self)
        refuse_sharded("ScoreCallback", args)  # on every process, before any step
        if model is not None:
            self.scorer.check(model, "ScoreCallback")
        self._pending = {}
        resumed = self._saved_run(state) if state.global_step > 0 else None
        slots = state.stateful_callbacks
        if isinstance(slots, dict):  # a checkpoint saved without this callback: give it a slot the trainer fills
            slots.setdefault(type(self).__name__, self.state())
        if not state.is_world_process_zero:
            return

        def begin() -> None:  # a run of its own, or the run a resumed checkpoint was saved in
            config = run_config(model, _training_settings(args), getattr(state, "trial_params", None))
            self.scorer.start(args.output_dir, seed=getattr(args, "seed", None), config=config, resume=resumed,
                              step=state.global_step)

        self.scorer.safely(state.global_step, begin)
        if state.global_step == 0:  # the initial weights, where the trajectory starts: stored, not logged (the
            self._score(args, state, model, log=False)  # trainer logs no step 0)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> Any:
        step = state.global_step
        if self.scorer.due(step) or (state.max_steps and step >= state.max_steps):
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

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._score(args, state, model, log=False)  # a run stopped early: its last step, stored (nothing logs now)
        self.scorer.close()

    # ------------------------------------------------------------------------------------------ scoring
    def _score(self, args: Any, state: Any, model: Any, log: bool = True) -> None:
        """Score the current step on the main process, once per run; any failure is a warning."""
        step = state.global_step
        if not state.is_world_process_zero or model is None or self.scorer.run is None or step in self.scorer.scored:
            return
        counted = getattr(args, "include_num_input_tokens_seen", "no") not in ("no", False, None)
        tokens = int(getattr(state, "num_input_tokens_seen", 0)) if counted else None
        medians = self.scorer.safely(step, lambda: self.scorer.score(model, step, tokens=tokens))
        if medians and self.log and log:
            self._pending = {**self._pending, **medians}

    def _saved_run(self, state: Any) -> str | None:
        """The run a resumed checkpoint was scored under: this callback's entry in its trainer state."""
        slots = state.stateful_callbacks if isinstance(state.stateful_callbacks, dict) else {}
        saved = slots.get(type(self).__name__)
        for entry in saved if isinstance(saved, list) else [saved]:
            if isinstance(entry, dict) and {k: entry.get("args", {}).get(k) for k in ("store", "run")} == \
                    {k: self._args[k] for k in ("store", "run")}:
                return entry.get("attributes", {}).get("resumed_run")
        return None


def _training_settings(args: Any) -> dict[str, Any]:
    """The training arguments that make a run what it is (learning rate, batch, schedule, seed...), without those
    that only say where its files and logs go."""
    skip = ("dir", "hub", "token", "report", "logging", "save", "tqdm", "resume", "run_name", "push")
    settings = args.to_dict() if hasattr(args, "to_dict") else dict(vars(args))
    return {k: v for k, v in settings.items() if not any(s in k for s in skip)}


def _ahead_of_reporters(callback: TrainerCallback) -> None:
    """Move ``callback`` right after the trainer's ``DefaultFlowCallback``, ahead of its reporting callbacks
    (TensorBoard, W&B, trackio), which the trainer lists before the callbacks it is given: the medians that
    ``callback`` adds to a step's logs then reach them. The trainer's callback list is the list that holds both
    ``callback`` and a ``DefaultFlowCallback``, found among the objects that refer to ``callback`` (so the move
    does not depend on how the event reached it). Where there is none, the medians still reach
    ``trainer.state.log_history`` and the reporters listed after ``callback``."""
    import gc

    from transformers.trainer_callback import DefaultFlowCallback

    for holder in gc.get_referrers(callback):
        if not isinstance(holder, list) or not any(isinstance(c, DefaultFlowCallback) for c in holder):
            continue
        flow = min(i for i, c in enumerate(holder) if isinstance(c, DefaultFlowCallback))
        if holder.index(callback) > flow + 1:  # moved only forward: an event going through the list still meets
            holder.remove(callback)  # every callback once (those it met, and this one, shift by one place)
            holder.insert(flow + 1, callback)
