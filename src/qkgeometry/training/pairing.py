"""Runs compared as a pair must have read the same data: the check every paired analysis runs first. Chapters 3
and 5.

A contrast "paired by seed" (symmetric − default final loss, a control − default, one objective − another) removes
the variation between seeds only if the two runs of a seed differ in the one thing compared. Two facts of a run's
record show whether they read the same data:

* its **data fingerprint** (``provenance.json``, ``data``): the corpus split, the tokenizer's SHA-256 and the
  SHA-256 of the train and validation token streams it read (recorded where the run records them; a key missing
  on either side cannot be compared and is not counted against the pair);
* its **start**: before any update, a run's validation loss depends only on its init and the tokens it reads.
  Different inits of one seed on the same tokens agree to within :data:`STEP0_LOSS_TOLERANCE` (the largest spread
  among the recorded inits of a seed on the same streams is 5·10⁻⁵ nats), while another tokenization of the same
  text moves it by 3.7·10⁻⁴ nats or more. Runs that share their init (chapter 3's objectives) must start with the
  same scores in every layer and head.

:func:`data_groups` sorts the runs of each seed into groups that read the same data; :func:`paired_seeds` says for
which seeds two inits may be compared. A pair that fails is never averaged in silently: the analyses drop it and the
page says so (:func:`unpaired_note`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import RecordError
from ..formatting import format_number

__all__ = ["DATA_KEYS", "STEP0_LOSS_TOLERANCE", "RunStart", "data_groups", "mismatch", "paired_seeds",
           "read_starts", "unpaired_note"]

#: Keys of a run's ``data`` record that must agree between runs compared as a pair (where both record them).
DATA_KEYS = ("corpus", "fingerprint", "tokenizer_sha256", "train_stream_sha256", "val_stream_sha256")
#: Two runs of one seed read the same tokens only if their step-0 validation losses agree to within this (nats).
STEP0_LOSS_TOLERANCE = 1e-4
#: Two runs that share their init start with scores equal to within this (float rounding of the stored values).
STEP0_SCORE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class RunStart:
    """What a run's record says about the data it read: ``data`` (the provenance's ``data`` keys of
    :data:`DATA_KEYS`), ``loss`` (validation loss before any update, or None) and ``scores`` (the step-0 scores in a
    fixed order, or None), for the run ``name`` of ``seed`` and ``arm`` (its init or objective)."""

    name: str
    seed: int
    arm: str
    data: Mapping[str, str]
    loss: float | None = None
    scores: tuple[float, ...] | None = None


def mismatch(a: RunStart, b: RunStart) -> str | None:
    """Why ``a`` and ``b`` did not read the same data, in words, or None when nothing recorded says so.

    >>> x = RunStart("x", 3, "default", {"fingerprint": "f"}, 9.02633)
    >>> mismatch(x, RunStart("y", 3, "skew", {"fingerprint": "f"}, 9.02896))
    'their step-0 validation losses differ by 0.00263 nats (more than 0.0001)'
    >>> mismatch(x, RunStart("y", 3, "symmetric", {"fingerprint": "f"}, 9.02633)) is None
    True
    """
    for key in DATA_KEYS:
        va, vb = a.data.get(key), b.data.get(key)
        if va is not None and vb is not None and va != vb:
            return f"their {key.replace('_', ' ')} differs ({str(va)[:12]} against {str(vb)[:12]})"
    if a.loss is not None and b.loss is not None and abs(a.loss - b.loss) > STEP0_LOSS_TOLERANCE:
        return (f"their step-0 validation losses differ by {format_number(abs(a.loss - b.loss), decimals=5)} nats "
                f"(more than {format_number(STEP0_LOSS_TOLERANCE, decimals=4)})")
    if a.scores is not None and b.scores is not None:
        if len(a.scores) != len(b.scores):
            return "their step-0 scores cover different layers or heads"
        gap = float(np.max(np.abs(np.subtract(a.scores, b.scores)))) if a.scores else 0.0
        if gap > STEP0_SCORE_TOLERANCE:
            return f"they start from different weights (step-0 scores differ by up to {format_number(gap, decimals=6)})"
    return None


def data_groups(starts: Iterable[RunStart]) -> pd.DataFrame:
    """One row per run: ``seed, arm, run, group, reason``. Within a seed, runs whose records agree
    (:func:`mismatch` is None) share a ``group`` (0 for the group of the first run of that training seed, in the
    order given, then 1, ...); ``reason`` says why a run is not in group 0 ("" for those that are)."""
    rows = []
    by_seed: dict[int, list[RunStart]] = {}
    for start in starts:
        by_seed.setdefault(int(start.seed), []).append(start)
    for seed, runs in sorted(by_seed.items()):
        heads: list[RunStart] = []  # the first run of each group
        for run in runs:
            group = next((g for g, head in enumerate(heads) if mismatch(head, run) is None), None)
            if group is None:
                group = len(heads)
                heads.append(run)
            reason = "" if group == 0 else f"against {heads[0].name}: {mismatch(heads[0], run)}"
            rows.append({"seed": seed, "arm": run.arm, "run": run.name, "group": group, "reason": reason})
    return pd.DataFrame(rows, columns=["seed", "arm", "run", "group", "reason"])


def paired_seeds(groups: pd.DataFrame, a: str, b: str) -> list[int]:
    """The training seeds at which arms ``a`` and ``b`` both ran and read the same data (the same group of
    :func:`data_groups`): the training seeds over which ``a − b`` may be paired."""
    out = []
    for seed, part in groups.groupby("seed"):
        ga, gb = set(part.loc[part["arm"] == a, "group"]), set(part.loc[part["arm"] == b, "group"])
        if ga and gb and len(ga) == len(gb) == 1 and ga == gb:
            out.append(int(seed))
    return out


def unpaired_note(groups: pd.DataFrame, arms: Iterable[str], against: Iterable[str]) -> str:
    """A sentence naming the training seeds at which an arm of ``arms`` cannot be paired with one of ``against`` (they read
    other data), or "" when every such pair holds. For the page that reports the paired contrasts."""
    arms, against = list(arms), list(against)
    lost: dict[int, set[str]] = {}
    for x in arms:
        for y in against:
            both = set(groups.loc[groups["arm"] == x, "seed"]) & set(groups.loc[groups["arm"] == y, "seed"])
            for seed in sorted(both - set(paired_seeds(groups, x, y))):
                lost.setdefault(int(seed), set()).add(y)
    if not lost:
        return ""
    seeds = sorted(lost)
    named = ", ".join(str(s) for s in seeds[:-1]) + (" and " if len(seeds) > 1 else "") + str(seeds[-1])
    baselines = sorted(set().union(*lost.values()))
    return (f"At seed{'s' if len(seeds) > 1 else ''} {named} the {' and '.join(baselines)} "
            f"run{'s' if len(baselines) > 1 or len(seeds) > 1 else ''} read other token ids than the controls (their "
            f"step-0 validation losses differ by more than {format_number(STEP0_LOSS_TOLERANCE, decimals=4)} nats), "
            f"so {'those seeds are' if len(seeds) > 1 else 'that seed is'} left out of every control contrast.")


def read_starts(folders: Mapping[str, Path], arm_key: str = "init") -> list[RunStart]:
    """The :class:`RunStart` of each run folder (a ``provenance.json`` with ``config`` and ``data``, and a
    ``log.csv`` whose first row is step 0 with ``val_loss``; or a ``scores.csv`` whose step-0 rows hold the
    scores of every arm trained from that folder's init). ``arm_key``: the config field that names the arm."""
    starts = []
    for name, folder in folders.items():
        folder = Path(folder)
        try:
            prov = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise RecordError(f"{str(folder / 'provenance.json')!r} cannot be read ({e}).") from None
        data = {k: v for k, v in (prov.get("data") or {}).items() if k in DATA_KEYS}
        seed = prov.get("config", {}).get("seed", prov.get("seeds", [None])[0])
        if (folder / "log.csv").is_file():
            log = pd.read_csv(folder / "log.csv", nrows=1)
            loss = float(log["val_loss"].iloc[0]) if int(log["step"].iloc[0]) == 0 else None
            starts.append(RunStart(name, int(seed), str(prov["config"][arm_key]), data, loss))
        elif (folder / "scores.csv").is_file():
            scores = pd.read_csv(folder / "scores.csv")
            first = scores[scores["step"] == 0].sort_values(["objective", "layer", "head"])
            for arm, part in first.groupby("objective"):
                values = tuple(part[["symmetry", "directionality"]].to_numpy().ravel().tolist())
                starts.append(RunStart(f"{name}/{arm}", int(part["seed"].iloc[0]), str(arm), data, None, values))
    return starts
