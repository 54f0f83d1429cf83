"""Scores across training: one model's checkpoints, from the Hub's revisions or a folder of checkpoints. Chapter 3.

A *trajectory* is a survey whose models are the checkpoints of one training run, each with its place in the run:

* a Hub repo whose branches or tags are checkpoints (Pythia's ``step0`` … ``step143000``; OLMo's
  ``step1000-tokens4B``; OLMo 2's staged ``stage1-step1000-…``): each is read as ``hf://org/name@<branch>``, only
  its Q/K bytes (and the gains the form needs), cached per commit;
* a local folder in the ``transformers`` Trainer layout (``checkpoint-<step>/``, each a model folder);
* an explicit list of ``(source, step)`` pairs (any sources :func:`qkgeometry.load_qk` opens);
* a model as it trains (:mod:`qkgeometry.integrations`), scored in memory every N steps.

Every checkpoint is scored by :func:`qkgeometry.survey` (same readers, kernel, store, resumability and workers), so a
trajectory written to a store is also a survey: its rows are keyed by their source, which names the checkpoint
(the folder, or the repo and branch), and by the checkpoint's content (``revision``: the commit or the files' hash).
A re-run computes nothing; a changed checkpoint replaces its own rows only. Where a checkpoint sits in its run is
stored with its rows (:data:`~qkgeometry.surveying.store.TRAJECTORY_COLUMNS`: the run's full identity, the
checkpoint's name, the stage, the step and the tokens seen), as it was asked for, so a figure drawn from the store
later shows the steps that were given, never steps guessed back from names.

Order. Checkpoints are ordered by (stage, step): suites that restart the step count at each stage (OLMo 2's
``stage2-…-step10``) are not interleaved with the first stage. Two runs are never merged, even when their folders
share a name (``expA/out``, ``expB/out``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .checkpoints import LOCAL_CHECKPOINT, Checkpoint, checkpoint_of
from .runs import run_labels

__all__ = ["Checkpoint", "checkpoint_of", "find_checkpoints", "hub_checkpoints", "identical_checkpoints",
           "local_checkpoints", "order_rows", "read_trajectory", "run_labels", "select_checkpoints", "trajectory",
           "trajectory_plan", "with_steps"]

def local_checkpoints(folder: str | Path) -> list[Checkpoint]:
    """The ``checkpoint-<step>/`` folders inside ``folder`` (the Trainer layout), in step order. Raises
    ``ValueError`` naming ``folder`` when it holds none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"`source` {str(folder)!r} is not a folder; pass a folder of checkpoint-<step>/ folders, a "
                         "Hub id, or a list of (source, step) pairs.")
    found = [checkpoint_of(str(p)) for p in folder.iterdir() if p.is_dir() and LOCAL_CHECKPOINT.fullmatch(p.name)]
    if not found:
        raise ValueError(f"`source` {str(folder)!r} holds no checkpoint-<step>/ folders (the layout the transformers "
                         "Trainer writes); pass such a folder, a Hub id, or a list of (source, step) pairs.")
    return sorted(found, key=lambda c: c.order)


def hub_checkpoints(repo_id: str) -> list[Checkpoint]:
    """The branches and tags of a Hub repo that name a training step, in step order (listed through
    ``huggingface_hub``; ``main`` and other names without a step are left out). Needs the network."""
    from ..readers.hub.client import hub_error, is_offline, network_errors
    from ..readers.hub.plan import parse_hub_source

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
    return sorted(found, key=lambda c: (*c.order, c.name))


def find_checkpoints(source: Any, revisions: Sequence[str] | None = None) -> list[Checkpoint]:
    """The checkpoints ``source`` names: a ``Mapping`` or sequence of ``(source, step)`` pairs (the step given wins
    over the name's), a local folder of ``checkpoint-<step>/`` folders, or a Hub id (``revisions``: exactly the
    branches, tags or commits to read, in the order given; a revision whose name says no step, such as ``main``, is
    read with its step unknown; default: every branch or tag that names a step)."""
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
            out.append(Checkpoint(str(src), found.name, int(step), found.tokens, found.run, found.stage))
        return sorted(out, key=lambda c: c.order)
    from ..readers.hub.plan import is_hub_source

    text = str(source)
    if Path(text).is_dir() or not is_hub_source(text):
        if revisions:
            raise ValueError("`revisions` name Hub branches; a local folder's checkpoints are its checkpoint-<step>/ "
                             "folders (leave `revisions` out, or use `every=`/`log_spaced=`).")
        return local_checkpoints(text)
    if revisions is not None:
        from ..readers.hub.plan import parse_hub_source

        if isinstance(revisions, str):
            raise ValueError(f"`revisions` must be a list of branch or tag names; got the text {revisions!r} (pass "
                             f"[{revisions!r}]).")
        bad = [r for r in revisions if not isinstance(r, str) or not r.strip() or r != r.strip()]
        if bad:
            raise ValueError(f"`revisions`: {bad[0]!r} is not a branch or tag name; pass names such as 'step1000'.")
        if not revisions:
            raise ValueError("`revisions` is empty; name at least one branch or tag, or leave it out to read every "
                             "step branch.")
        repo, _ = parse_hub_source(text)
        return [checkpoint_of(f"hf://{repo}@{r}") for r in dict.fromkeys(revisions)]
    return hub_checkpoints(text)


def select_checkpoints(checkpoints: Sequence[Checkpoint], every: int | None = None,
                       log_spaced: int | None = None) -> list[Checkpoint]:
    """Thin a list of checkpoints (in any order): ``every=N`` keeps the steps that are multiples of N; ``log_spaced=K``
    keeps the K checkpoints nearest to K targets evenly spaced in log(step) from the first positive step to the
    last (step 0, when present, is kept and counts as one of the K; with several stages, in log(tokens)). The
    result is in (stage, step) order. Checkpoints without a step are refused by both."""
    if every is not None and log_spaced is not None:
        raise ValueError("give `every` or `log_spaced`, not both.")
    chosen = list(checkpoints)
    if every is None and log_spaced is None:
        return chosen
    if any(c.step is None for c in chosen):
        bad = next(c.name for c in chosen if c.step is None)
        raise ValueError(f"checkpoint {bad!r} names no step, so `every`/`log_spaced` cannot place it; pass "
                         "(source, step) pairs.")
    chosen = sorted(chosen, key=lambda c: c.order)
    if every is not None:
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise ValueError(f"`every` (--every) must be an integer >= 1; got {every!r}.")
        return [c for c in chosen if c.step % every == 0]
    if isinstance(log_spaced, bool) or not isinstance(log_spaced, (int, np.integer)) or log_spaced < 2:
        raise ValueError(f"`log_spaced` (--log-spaced) must be an integer >= 2; got {log_spaced!r}.")
    stages = {c.stage for c in chosen}
    if len(stages) > 1 and any(c.tokens is None for c in chosen):
        raise ValueError(f"`log_spaced` (--log-spaced): the checkpoints span {len(stages)} stages whose step counts "
                         "restart, and not every one names its tokens seen; pick revisions with `revisions=` "
                         "(--revisions) instead.")
    where = (lambda c: c.tokens) if len(stages) > 1 else (lambda c: c.step)
    zero = [c for c in chosen if where(c) == 0][:1]
    positive = [c for c in chosen if where(c) > 0]
    k = log_spaced - len(zero)
    if len(positive) <= k:
        return zero + positive
    logs = np.log([where(c) for c in positive])
    keep: list[int] = []
    for target in np.linspace(logs.min(), logs.max(), k):
        order = np.argsort(np.abs(logs - target), kind="stable")
        keep.append(next(int(i) for i in order if int(i) not in keep))
    return zero + [positive[i] for i in sorted(keep)]


def order_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Trajectory rows in run order: by run (first seen first), stage, step (unknown steps last), then component,
    layer and head."""
    if not len(frame):
        return frame.reset_index(drop=True)
    out = frame.copy()
    runs = {r: i for i, r in enumerate(dict.fromkeys(out["run"].astype(str)))}
    key = pd.DataFrame({"run": out["run"].astype(str).map(runs),
                        "stage": pd.to_numeric(out["stage"]).fillna(0).astype(float),
                        "unknown": out["step"].isna(), "step": pd.to_numeric(out["step"]).fillna(0).astype(float),
                        "source": out["source"].astype(str), "component": out["component"].astype(str),
                        "layer": out["layer"].astype(int),
                        "head": pd.to_numeric(out["head"]).astype(float).fillna(-1)}, index=out.index)
    order = key.sort_values(["run", "stage", "unknown", "step", "source", "component", "layer", "head"],
                            kind="stable").index
    return out.loc[order].reset_index(drop=True)


def with_steps(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (rows of a survey or trajectory store) with the columns ``run``, ``checkpoint``, ``stage``,
    ``step`` and ``tokens``, in run order (:func:`order_rows`). A frame that has them (a trajectory, or a store read
    with :func:`read_trajectory`) keeps its own; for any other, they are read from each row's ``source``
    (:func:`checkpoint_of`), and rows whose source names no step keep ``<NA>``."""
    from .columns import TRAJECTORY_COLUMNS, trajectory_dtypes

    out = frame.copy()
    if not all(c in out.columns for c in TRAJECTORY_COLUMNS):
        found = {s: checkpoint_of(s) for s in out["source"].astype(str).unique()}
        for col in TRAJECTORY_COLUMNS:
            out[col] = out["source"].astype(str).map(lambda s, c=col: found[s].columns()[c])
    return order_rows(trajectory_dtypes(out))


def read_trajectory(path: str | Path) -> pd.DataFrame:
    """The rows of the store (or CSV) at ``path`` that are checkpoints of a training run (those with a step), with
    the store's trajectory columns, in run order. Chapter 3; ``qkgeometry plot --trajectory`` draws them."""
    from .store import read_store

    frame = read_store(path, trajectory=True)
    return order_rows(frame[frame["step"].notna()])


def trajectory_plan(source: Any, *, revisions: Sequence[str] | None = None, every: int | None = None,
                    log_spaced: int | None = None) -> pd.DataFrame:
    """What a trajectory costs before any tensor is fetched: one row per checkpoint with the bytes of its checkpoint,
    of its Q/K weights and still to fetch, and the HTTP requests a cold fetch sends, plus a total row
    (:func:`qkgeometry.readers.hub.plan_table`, from each revision's safetensors header; local checkpoints cost
    nothing). Arguments as for :func:`trajectory`."""
    from ..readers.hub import plan_table

    chosen = select_checkpoints(find_checkpoints(source, revisions), every, log_spaced)
    return plan_table([c.source for c in chosen])


def identical_checkpoints(frame: pd.DataFrame) -> list[list[str]]:
    """Groups of checkpoints (by name, in run order) whose scores are identical in every row: the same Q/K weights
    served under different steps. Published suites have had such mislabelled revisions (a step branch that holds
    the final weights); a trajectory through them would show a flat stretch that training did not make."""
    if not len(frame):
        return []
    frame = with_steps(frame) if "checkpoint" not in frame.columns else frame
    keyed = frame.sort_values(["component", "layer", "head"], kind="stable", na_position="first")
    signature = keyed.groupby("source", sort=False)[["symmetry", "directionality"]] \
        .apply(lambda g: g.to_numpy().tobytes())
    firsts = order_rows(frame).drop_duplicates("source")
    groups: dict[bytes, list[str]] = {}
    for source, name in zip(firsts["source"], firsts["checkpoint"].fillna(firsts["source"])):
        groups.setdefault(signature[source], []).append(str(name))
    return [g for g in groups.values() if len(g) > 1]


def trajectory(source: Any, *, revisions: Sequence[str] | None = None, every: int | None = None,
               log_spaced: int | None = None, per: str = "layer", cache: str | Path | None = None,
               num_std: float = 2.0, input_norm: str = "raw", executor: Any = None, device: Any = None,
               progress: bool = False) -> pd.DataFrame:
    """Score every checkpoint of one training run: the survey of :func:`find_checkpoints` (thinned by
    :func:`select_checkpoints`), with ``run``, ``checkpoint``, ``stage``, ``step`` and ``tokens`` columns (also kept
    in the store), in (stage, step) order.

    ``source``: a folder of ``checkpoint-<step>/`` folders, a Hub id, a list of ``(source, step)`` pairs, or a list
    of :class:`Checkpoint`. ``revisions`` (a Hub id only): exactly these branches or tags. ``per``, ``cache`` (a
    store: re-runs compute nothing), ``num_std``, ``input_norm``, ``executor``, ``device`` and ``progress`` are those
    of :func:`qkgeometry.survey`; a checkpoint that fails is reported there (``frame.attrs["failures"]``) while the
    others land. ``frame.attrs["checkpoints"]`` lists what was asked for; ``frame.attrs["identical"]`` the groups of
    :func:`identical_checkpoints`, each also reported by a warning.
    """
    import warnings

    from .columns import TRAJECTORY_COLUMNS, trajectory_dtypes
    from .scoring import survey

    if isinstance(source, (list, tuple)) and source and all(isinstance(c, Checkpoint) for c in source):
        found = list(source)
    else:
        found = find_checkpoints(source, revisions)
    chosen = select_checkpoints(found, every, log_spaced)
    if not chosen:
        raise ValueError("no checkpoint is left after `every`/`log_spaced`; choose fewer.")
    frame = survey(chosen, per=per, cache=cache, num_std=num_std, input_norm=input_norm, executor=executor,
                   device=device, progress=progress)
    attrs = dict(frame.attrs)
    for col in TRAJECTORY_COLUMNS:
        if col not in frame.columns:
            frame[col] = None
    out = order_rows(trajectory_dtypes(frame))
    identical = identical_checkpoints(out)
    for group in identical:
        warnings.warn(f"trajectory: checkpoints {', '.join(group)} have identical scores in every layer, so they "
                      "hold the same Q/K weights; check that these revisions really are different steps.",
                      stacklevel=2)
    out.attrs = {**attrs, "checkpoints": pd.DataFrame([vars(c) for c in chosen]), "identical": identical}
    return out
