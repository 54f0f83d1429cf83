"""What the training callbacks check when training starts: training that shards the weights across processes
(refused, on every process, before any step), and the configuration that goes into a run's identity. Chapters 3
and 5."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["refuse_sharded", "run_config", "sharded_training"]


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def sharded_training(args: Any = None, strategy: Any = None) -> str | None:
    """How this training shards the weights themselves across processes, or None: FSDP or DeepSpeed ZeRO-3, asked
    for in the transformers ``TrainingArguments`` (``args``), set up through accelerate (``accelerate launch``:
    its state, as the transformers Trainer reads it, or its environment), or a Lightning ``strategy``."""
    if args is not None and getattr(args, "fsdp", None):
        return "FSDP, asked for with `fsdp`"
    module = sys.modules.get("accelerate.state")  # accelerate's state exists only once accelerate is in use
    state = dict(module.AcceleratorState._shared_state) if module is not None else {}
    if state.get("fsdp_plugin") is not None or _flag("ACCELERATE_USE_FSDP"):
        return "FSDP, set up through accelerate"
    plugin = state.get("deepspeed_plugin")
    if (plugin is not None and getattr(plugin, "zero_stage", None) == 3) or (
            _flag("ACCELERATE_USE_DEEPSPEED") and os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3"):
        return "DeepSpeed ZeRO-3, set up through accelerate"
    if args is not None and getattr(args, "deepspeed", None):
        from transformers.integrations import is_deepspeed_zero3_enabled

        if is_deepspeed_zero3_enabled():
            return "DeepSpeed ZeRO-3, asked for with `deepspeed`"
    if strategy is not None:
        name = type(strategy).__name__
        if "FSDP" in name:
            return f"FSDP, the Lightning strategy {name}"
        if "DeepSpeed" in name and getattr(strategy, "zero_stage_3", False):
            return f"DeepSpeed ZeRO-3, the Lightning strategy {name}"
    return None


def refuse_sharded(who: str, args: Any = None, strategy: Any = None) -> None:
    """Raise ``ValueError`` (one line, naming ``who``) when :func:`sharded_training` finds sharded weights: scoring
    on the main process would read a shard, or wait forever for the others to gather the weights."""
    sharded = sharded_training(args, strategy)
    if sharded:
        raise ValueError(f"{who}: this training shards the weights across processes ({sharded}), so no process "
                         "holds whole Q/K weights to score; score the saved checkpoints afterwards with "
                         "`qkgeometry trajectory OUTPUT_DIR --out STORE` instead.")


def run_config(model: Any, *settings: Any) -> str:
    """The configuration fingerprint of a run (:func:`~qkgeometry.surveying.runs.config_fingerprint`): the model's
    config (what differs from its class's defaults, less what saving it writes) and the training ``settings``."""
    from ..readers.module import unwrap
    from ..surveying.runs import config_fingerprint

    config = getattr(unwrap(model), "config", None)
    described = config.to_diff_dict() if hasattr(config, "to_diff_dict") else {}
    for written in _WRITTEN_ON_SAVE:
        described.pop(written, None)
    return config_fingerprint(described, *settings)


#: config fields that saving a model fills in or updates, which do not change what the model is
_WRITTEN_ON_SAVE = ("_name_or_path", "architectures", "dtype", "torch_dtype", "transformers_version")
