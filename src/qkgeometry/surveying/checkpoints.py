"""Where a checkpoint sits in its training run, read from its name or given: :class:`Checkpoint` and
:func:`checkpoint_of`. Chapter 3; :mod:`qkgeometry.surveying.trajectories` scores runs of them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LOCAL_CHECKPOINT", "Checkpoint", "checkpoint_of"]

#: the name of a checkpoint folder the transformers Trainer writes
LOCAL_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
_STEP = re.compile(r"(?:^|[^a-z])step[-_]?(\d+)", re.IGNORECASE)
_STAGE = re.compile(r"(?:^|[^a-z])stage[-_]?(\d+)", re.IGNORECASE)
_TOKENS = re.compile(r"tokens[-_]?(\d+(?:\.\d+)?)([KMBT]?)", re.IGNORECASE)
_SCALE = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a training run: ``source`` (what :func:`qkgeometry.load_qk` opens), ``name`` (the
    folder's or the branch's name), ``step`` (the training step, None when unknown), ``tokens`` (tokens seen, when
    known), ``run`` (the run's full identity: the repo id, or the resolved folder that holds the checkpoints) and
    ``stage`` (the training stage, for suites whose step count restarts at each stage; None otherwise).

    A list of them is a valid ``sources`` argument of :func:`qkgeometry.survey`: the rows of each carry
    :meth:`columns`, and a store keeps them."""

    source: str
    name: str
    step: int | None
    tokens: int | None = None
    run: str = ""
    stage: int | None = None

    def columns(self) -> dict[str, Any]:
        """The store's trajectory columns of this checkpoint (:data:`~qkgeometry.surveying.store.TRAJECTORY_COLUMNS`)."""
        return {"run": self.run or None, "checkpoint": self.name, "stage": self.stage, "step": self.step,
                "tokens": self.tokens}

    @property
    def order(self) -> tuple:
        """Sort key: (stage, step), checkpoints of unknown step last, in the order given."""
        return (self.stage or 0, self.step is None, self.step or 0)


def checkpoint_of(source: str, resolve: bool = True) -> Checkpoint:
    """The checkpoint a source names: ``…/checkpoint-500`` (step 500), ``hf://EleutherAI/pythia-160m@step1000``
    (step 1000), ``hf://allenai/OLMo-1B@step20000-tokens84B`` (step 20000, 84·10⁹ tokens), and OLMo 2's staged
    names such as ``stage1-step20000-tokens42B`` (stage 1, step 20000). A name
    that says no step gives ``step=None``. The run is the repo id, or the folder that holds a local checkpoint
    (resolved to its absolute path when it exists and ``resolve``, so that two runs whose folders share a name stay
    two runs).

    >>> checkpoint_of("runs/checkpoint-500").step, checkpoint_of("hf://org/m@step1000").step
    (500, 1000)
    >>> checkpoint_of("hf://org/m@stage1-step20000-tokens84B").tokens
    84000000000
    """
    from .identity import source_identity

    text = str(source)
    if "@" in text and not Path(text).exists():
        run, _, name = text.rpartition("@")
        run = run.removeprefix("hf://")
    else:
        path = Path(text.rstrip("/\\"))
        name = path.name
        run = source_identity(str(path.parent)) if resolve else str(path.parent)
    local = LOCAL_CHECKPOINT.fullmatch(name)
    step = _STEP.search(name)
    stage = _STAGE.search(name)
    tokens = _TOKENS.search(name)
    return Checkpoint(
        source=text, name=name,
        step=int(local.group(1)) if local else int(step.group(1)) if step else None,
        tokens=None if tokens is None else round(float(tokens.group(1)) * _SCALE[tokens.group(2).upper()]),
        run=run, stage=int(stage.group(1)) if stage else None)
