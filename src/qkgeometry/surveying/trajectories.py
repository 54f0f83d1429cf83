"""Scores across training: one model's checkpoints, from the Hub's revisions or a folder of checkpoints. Chapter 3.

A *trajectory* is a survey whose models are the checkpoints of one training run, each with its training step:

* a Hub repo whose branches or tags are checkpoints (Pythia's ``step0`` … ``step143000``; OLMo's
  ``stage1-step1000-tokens4B``): each is read as ``hf://org/name@<branch>``, only its Q/K bytes (and the gains the
  form needs), cached per commit;
* a local folder in the ``transformers`` Trainer layout (``checkpoint-<step>/``, each a model folder);
* an explicit list of ``(source, step)`` pairs (any sources :func:`qkgeometry.load_qk` opens).

Every checkpoint is scored by :func:`qkgeometry.survey` (same readers, kernel, store, resumability and workers), so a
trajectory written to a store is also a survey: its rows are keyed by their source, which names the checkpoint
(the folder, or the repo and branch), and by the checkpoint's content (``revision``: the commit or the files' hash).
A re-run computes nothing; a changed checkpoint replaces its own rows only. The step (and the tokens seen, when the
name says it) is read from the checkpoint's name by :func:`checkpoint_of`, so it travels with the rows' source.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Checkpoint", "checkpoint_of", "find_checkpoints", "hub_checkpoints", "identical_checkpoints",
           "local_checkpoints", "select_checkpoints", "trajectory", "with_steps"]

_LOCAL = re.compile(r"checkpoint-(\d+)")
_STEP = re.compile(r"(?:^|[^a-z])step[-_]?(\d+)", re.IGNORECASE)
_TOKENS = re.compile(r"tokens[-_]?(\d+(?:\.\d+)?)([KMBT]?)", re.IGNORECASE)
_SCALE = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a training run: ``source`` (what :func:`qkgeometry.load_qk` opens), ``name`` (the
    folder's or the branch's name), ``step`` (the training step, None when the name does not say it), ``tokens``
    (tokens seen, when the name says it) and ``run`` (the repo id, or the folder that holds the checkpoints)."""

    source: str
    name: str
    step: int | None
    tokens: int | None = None
    run: str = ""


def checkpoint_of(source: str) -> Checkpoint:
    """The checkpoint a source names: ``…/checkpoint-500`` (step 500), ``hf://EleutherAI/pythia-160m@step1000``
    (step 1000), ``hf://allenai/OLMo-1B@stage1-step20000-tokens84B`` (step 20000, 84·10⁹ tokens). A name that
    says no step gives ``step=None``.

    >>> checkpoint_of("runs/checkpoint-500").step, checkpoint_of("hf://org/m@step1000").step
    (500, 1000)
    >>> checkpoint_of("hf://org/m@stage1-step20000-tokens84B").tokens
    84000000000
    """
    text = str(source)
    if "@" in text and not Path(text).exists():
        run, _, name = text.rpartition("@")
        run = run.removeprefix("hf://")
    else:
        path = Path(text.rstrip("/\\"))
        name, run = path.name, path.parent.name
    local = _LOCAL.fullmatch(name)
    step = _STEP.search(name)
    tokens = _TOKENS.search(name)
    return Checkpoint(
        source=text, name=name,
        step=int(local.group(1)) if local else int(step.group(1)) if step else None,
        tokens=None if tokens is None else round(float(tokens.group(1)) * _SCALE[tokens.group(2).upper()]),
        run=run)


def local_checkpoints(folder: str | Path) -> list[Checkpoint]:
    """The ``checkpoint-<step>/`` folders inside ``folder`` (the Trainer layout), in step order. Raises
    ``ValueError`` naming ``folder`` when it holds none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"`source` {str(folder)!r} is not a folder; pass a folder of checkpoint-<step>/ folders, a "
                         "Hub id, or a list of (source, step) pairs.")
    found = [checkpoint_of(str(p)) for p in folder.iterdir() if p.is_dir() and _LOCAL.fullmatch(p.name)]
    if not found:
        raise ValueError(f"`source` {str(folder)!r} holds no checkpoint-<step>/ folders (the layout the transformers "
                         "Trainer writes); pass such a folder, a Hub id, or a list of (source, step) pairs.")
    return sorted(found, key=lambda c: c.step)


def hub_checkpoints(repo_id: str) -> list[Checkpoint]:
    """The branches and tags of a Hub repo that name a training step, in step order (listed through
    ``huggingface_hub``; ``main`` and other names without a step are left out). Needs the network."""
    from ..readers.hub_plan import parse_hub_source
    from ..readers.remote import hub_error, is_offline, network_errors

    repo, revision = parse_hub_source(repo_id)
    if revision is not None:
        raise ValueError(f"`source` {repo_id!r} names one revision; a trajectory reads many: pass the repo id alone "
                         "and choose revisions with `revisions=` (--revisions).")
    if is_offline():
        raise ValueError(f"`source` {repo!r}: listing its revisions needs the Hugging Face Hub, and this Python is "
                         "offline (HF_HUB_OFFLINE=1); unset it, or pass a local folder of checkpoints.")
    from huggingface_hub import HfApi

    try:
        refs = HfApi().list_repo_refs(repo)
    except network_errors() as e:
        raise hub_error(e, repo, None) from e
    names = [r.name for r in (*refs.branches, *refs.tags)]
    found = [checkpoint_of(f"hf://{repo}@{name}") for name in dict.fromkeys(names)]
    found = [c for c in found if c.step is not None]
    if not found:
        raise ValueError(f"`source` {repo!r} has no branch or tag that names a training step (such as 'step1000'); "
                         "pass its revisions with `revisions=` (--revisions) and their steps as (source, step) "
                         "pairs.")
    return sorted(found, key=lambda c: (c.step, c.name))


def find_checkpoints(source: Any, revisions: Sequence[str] | None = None) -> list[Checkpoint]:
    """The checkpoints ``source`` names: a ``Mapping`` or sequence of ``(source, step)`` pairs, a local folder of
    ``checkpoint-<step>/`` folders, or a Hub id (``revisions``: the branches or tags to read; default: every one
    that names a step)."""
    if isinstance(source, Mapping):
        source = list(source.items())
    if isinstance(source, (list, tuple)):
        out = []
        for i, pair in enumerate(source):
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
                raise ValueError(f"`source`[{i}] must be a (source, step) pair; got {pair!r}.")
            src, step = pair
            if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
                raise ValueError(f"`source`[{i}]: the step must be an integer >= 0; got {step!r}.")
            found = checkpoint_of(str(src))
            out.append(Checkpoint(str(src), found.name, int(step), found.tokens, found.run))
        return sorted(out, key=lambda c: c.step)
    from ..readers.hub_plan import is_hub_source

    text = str(source)
    if Path(text).is_dir() or not is_hub_source(text):
        if revisions:
            raise ValueError("`revisions` name Hub branches; a local folder's checkpoints are its checkpoint-<step>/ "
                             "folders (leave `revisions` out, or use `every=`/`log_spaced=`).")
        return local_checkpoints(text)
    if revisions:
        from ..readers.hub_plan import parse_hub_source

        repo, _ = parse_hub_source(text)
        return [checkpoint_of(f"hf://{repo}@{r}") for r in dict.fromkeys(revisions)]
    return hub_checkpoints(text)


def select_checkpoints(checkpoints: Sequence[Checkpoint], every: int | None = None,
                       log_spaced: int | None = None) -> list[Checkpoint]:
    """Thin a list of checkpoints: ``every=N`` keeps the steps that are multiples of N; ``log_spaced=K`` keeps the
    K checkpoints nearest to K targets evenly spaced in log(step) from the first positive step to the last (step 0,
    when present, is kept and counts as one of the K). Checkpoints without a step are refused by both."""
    if every is not None and log_spaced is not None:
        raise ValueError("give `every` or `log_spaced`, not both.")
    chosen = list(checkpoints)
    if every is None and log_spaced is None:
        return chosen
    if any(c.step is None for c in chosen):
        bad = next(c.name for c in chosen if c.step is None)
        raise ValueError(f"checkpoint {bad!r} names no step, so `every`/`log_spaced` cannot place it; pass "
                         "(source, step) pairs.")
    if every is not None:
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise ValueError(f"`every` (--every) must be an integer >= 1; got {every!r}.")
        return [c for c in chosen if c.step % every == 0]
    if isinstance(log_spaced, bool) or not isinstance(log_spaced, (int, np.integer)) or log_spaced < 2:
        raise ValueError(f"`log_spaced` (--log-spaced) must be an integer >= 2; got {log_spaced!r}.")
    zero = [c for c in chosen if c.step == 0][:1]
    positive = [c for c in chosen if c.step > 0]
    k = log_spaced - len(zero)
    if len(positive) <= k:
        return zero + positive
    logs = np.log([c.step for c in positive])
    keep: list[int] = []
    for target in np.linspace(logs[0], logs[-1], k):
        order = np.argsort(np.abs(logs - target), kind="stable")
        keep.append(next(int(i) for i in order if int(i) not in keep))
    return zero + [positive[i] for i in sorted(keep)]


def with_steps(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (rows of a survey or trajectory store) with the columns ``run``, ``checkpoint``, ``step`` and
    ``tokens`` read from each row's ``source`` (:func:`checkpoint_of`), sorted by step; rows whose source names no
    step keep ``<NA>``."""
    out = frame.copy()
    found = {s: checkpoint_of(s) for s in out["source"].astype(str).unique()}
    out["run"] = out["source"].astype(str).map(lambda s: found[s].run)
    out["checkpoint"] = out["source"].astype(str).map(lambda s: found[s].name)
    out["step"] = pd.array([found[s].step for s in out["source"].astype(str)], dtype="Int64")
    out["tokens"] = pd.array([found[s].tokens for s in out["source"].astype(str)], dtype="Int64")
    return out.sort_values(["step", "component", "layer", "head"], kind="stable", na_position="last") \
        .reset_index(drop=True)


def identical_checkpoints(frame: pd.DataFrame) -> list[list[str]]:
    """Groups of checkpoints (by name, in step order) whose scores are identical in every row: the same Q/K weights
    served under different steps. Published suites have had such mislabelled revisions (a step branch that holds
    the final weights); a trajectory through them would show a flat stretch that training did not make."""
    if not len(frame):
        return []
    keyed = frame.sort_values(["component", "layer", "head"], kind="stable", na_position="first")
    signature = keyed.groupby("checkpoint", sort=False)[["symmetry", "directionality"]] \
        .apply(lambda g: g.to_numpy().tobytes())
    order = frame.drop_duplicates("checkpoint").sort_values("step", kind="stable")["checkpoint"].tolist()
    groups: dict[bytes, list[str]] = {}
    for name in order:
        groups.setdefault(signature[name], []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def trajectory(source: Any, *, revisions: Sequence[str] | None = None, every: int | None = None,
               log_spaced: int | None = None, per: str = "layer", cache: str | Path | None = None,
               num_std: float = 2.0, input_norm: str = "raw", executor: Any = None, device: Any = None,
               progress: bool = False) -> pd.DataFrame:
    """Score every checkpoint of one training run: the survey of :func:`find_checkpoints` (thinned by
    :func:`select_checkpoints`), with ``checkpoint``, ``step`` and ``tokens`` columns, in step order.

    ``per``, ``cache`` (a store: re-runs compute nothing), ``num_std``, ``input_norm``, ``executor``, ``device``
    and ``progress`` are those of :func:`qkgeometry.survey`; a checkpoint that fails is reported there
    (``frame.attrs["failures"]``) while the others land. ``frame.attrs["checkpoints"]`` lists what was asked for;
    ``frame.attrs["identical"]`` the groups of :func:`identical_checkpoints`, each also reported by a warning.
    """
    import warnings

    from .scoring import survey

    chosen = select_checkpoints(find_checkpoints(source, revisions), every, log_spaced)
    frame = survey([c.source for c in chosen], per=per, cache=cache, num_std=num_std, input_norm=input_norm,
                   executor=executor, device=device, progress=progress)
    attrs = dict(frame.attrs)
    steps = {c.source: c for c in chosen}
    out = with_steps(frame) if len(frame) else frame.assign(run=pd.Series(dtype=object),
                                                           checkpoint=pd.Series(dtype=object),
                                                           step=pd.array([], dtype="Int64"),
                                                           tokens=pd.array([], dtype="Int64"))
    if len(out) and any(c.step is not None for c in chosen):  # explicit (source, step) pairs win over the name
        out["step"] = pd.array([steps[s].step if s in steps else st for s, st in zip(out["source"], out["step"])],
                               dtype="Int64")
        out = out.sort_values(["step", "component", "layer", "head"], kind="stable").reset_index(drop=True)
    identical = identical_checkpoints(out)
    for group in identical:
        warnings.warn(f"trajectory: checkpoints {', '.join(group)} have identical scores in every layer, so they "
                      "hold the same Q/K weights; check that these revisions really are different steps.",
                      stacklevel=2)
    out.attrs = {**attrs, "checkpoints": pd.DataFrame([vars(c) for c in chosen]), "identical": identical}
    return out

