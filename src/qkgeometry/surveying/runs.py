"""What a training run is, for the rows scored while it trains: one start of training. Chapter 3.

A run is identified by its name (the training's output folder, or a name the user gives), the moment it started,
its seed and a fingerprint of its configuration (the model's config and the training settings), written as one
text in the store's ``run`` column (:class:`RunId`)::

    /data/out [started 2026-08-20T10:11:12.345Z, seed 0, config 3f2a9c1d]

Two starts into one folder are two runs, drawn apart, whatever their folders' names; resuming from a checkpoint
continues the run that wrote it (the training callbacks keep its identity in the checkpoint's trainer state).
:func:`run_labels` gives each run of a figure the shortest label that tells it from the others.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["RunId", "config_fingerprint", "run_labels"]

_TEXT = re.compile(r"^(?P<name>.+) \[started (?P<started>[^,\]]+), seed (?P<seed>[^,\]]+), "
                   r"config (?P<config>[^,\]]+)\]$")
_NO_SEED = "unknown"


@dataclasses.dataclass(frozen=True)
class RunId:
    """One start of training: ``name``, ``started`` (UTC, ISO 8601 to the millisecond), ``seed`` (None when the
    training does not say) and ``config`` (:func:`config_fingerprint`). ``str(run)`` is the text the store keeps;
    :meth:`parse` reads it back."""

    name: str
    started: str
    seed: int | None
    config: str

    @classmethod
    def start(cls, name: str, seed: int | None = None, config: str = "-") -> RunId:
        """A run that starts now."""
        from datetime import datetime, timezone

        now = datetime.now(timezone.utc)
        return cls(str(name), now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
                   None if seed is None else int(seed), str(config))

    def __str__(self) -> str:
        seed = _NO_SEED if self.seed is None else self.seed
        return f"{self.name} [started {self.started}, seed {seed}, config {self.config}]"

    @classmethod
    def parse(cls, text: str) -> RunId | None:
        """The run a ``run`` text names, or None when the text is not a run's identity (a checkpoint folder's
        path, a Hub repo id)."""
        found = _TEXT.match(str(text))
        if found is None:
            return None
        seed = found["seed"]
        return cls(found["name"], found["started"], None if seed == _NO_SEED or not seed.lstrip("-").isdigit()
                   else int(seed), found["config"])


def config_fingerprint(*parts: Any) -> str:
    """Eight hex digits that change when any of ``parts`` (plain data: dicts, lists, numbers, text; anything else
    by its text) changes."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _tails(names: Sequence[str]) -> dict[str, str]:
    """The shortest trailing path parts of each distinct name that are all different (whole names otherwise)."""
    names = list(dict.fromkeys(names))
    parts = [n.rstrip("/").split("/") for n in names]
    for k in range(1, max((len(p) for p in parts), default=1) + 1):
        tails = ["/".join(p[-k:]) for p in parts]
        if len(set(tails)) == len(tails):
            return dict(zip(names, tails))
    return {n: n for n in names}


def run_labels(runs: Sequence[str]) -> dict[str, str]:
    """A short label for each run identity: the shortest tail of its path (or repo id, or name) that tells it from
    the others (``expA/out``, ``expB/out``). Starts of one name are told apart by their seed, else by when they
    started: ``out (seed 1)``, ``out (started 2026-08-20T10:11:12.345Z)``."""
    runs = [str(r) for r in dict.fromkeys(runs)]
    parsed = {r: RunId.parse(r) for r in runs}
    names = {r: parsed[r].name if parsed[r] else r for r in runs}
    tails = _tails(list(names.values()))
    labels = {}
    for r in runs:
        label, same = tails[names[r]], [s for s in runs if names[s] == names[r]]
        if len(same) > 1 and parsed[r] is not None:
            seeds = [parsed[s].seed if parsed[s] else None for s in same]
            unique_seed = len(set(seeds)) == len(seeds)
            label += f" (seed {parsed[r].seed})" if unique_seed else f" (started {parsed[r].started})"
        labels[r] = label
    if len(set(labels.values())) < len(labels):  # nothing shorter tells them apart
        return {r: r for r in runs}
    return labels
