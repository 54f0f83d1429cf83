"""What makes survey rows one model's, and one view of a results file. Chapter 4.

* **The identity of a source** (:func:`source_identity`): a local file or folder is keyed by its resolved absolute
  path, so that ``m0``, ``./m0`` and ``/abs/m0`` are one model, and the same relative name typed in two working
  folders is two; a Hub model by its repo id in lower case with its revision unless ``main`` (``hf://org/m``,
  ``org/m``, ``hf://org/m@main`` and ``ORG/M`` are one model), the Hub commit being part of the stored revision;
  anything else (an ``offline:`` alias) by its text. A ``random:`` twin keeps its prefix. The store keys its models by this identity together with the
  scoring settings (``per``, ``num_std``, ``qk_norm``, ``input_norm``).
* **Distinct labels** (:func:`distinct_labels`): two models may share a folder name (``x/m`` and ``y/m``). Tables
  and figures group rows by the model label, so rows of different sources under one label would be averaged into
  one model; each such label is lengthened to the shortest tail of its source that tells the models apart.
* **One view** (:func:`one_view`): a results file may hold several levels (per layer, per head) and forms (raw or
  folded input-norm gains) of the same models. A figure shows one level and one form; a file that mixes them is
  refused unless the level and the form are named.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..source_names import RANDOM_PREFIX

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["VIEW_OPTIONS", "distinct_labels", "one_view", "source_identity"]


def source_identity(source: Any) -> str:
    """The text that identifies ``source`` in a survey store: a local path resolved (symbolic links followed, made
    absolute), a Hub model as its repo id in lower case (the Hub's ids ignore case) with ``@revision`` unless the
    revision is ``main`` (so ``hf://org/m``, ``org/m``, ``hf://org/m@main``, ``hf://models/org/m`` and ``ORG/M`` are
    one model, as they are one model in the Hub cache), a ``random:`` twin with its source resolved, anything else
    (an ``offline:`` alias) as written.

    >>> {source_identity(s) for s in ("hf://Org/M", "org/m", "hf://org/m@main", "hf://models/org/m")}
    {'org/m'}
    >>> source_identity("hf://org/m@v1.0"), source_identity("random:GPT2")
    ('org/m@v1.0', 'random:gpt2')
    """
    text = str(source)
    prefix = RANDOM_PREFIX if text.startswith(RANDOM_PREFIX) else ""
    rest = text[len(prefix):]
    try:
        local = bool(rest) and "\0" not in rest and os.path.exists(os.path.expanduser(rest))
    except (OSError, ValueError):
        local = False
    if local:
        return prefix + os.path.realpath(os.path.expanduser(rest))
    return prefix + _hub_identity(rest)


def _hub_identity(text: str) -> str:
    """``org/name[@revision]`` of a Hub source, in lower case without a ``main`` revision; ``text`` itself when it
    is not one (an ``offline:`` alias, a path that does not exist)."""
    from ..errors import SourceError
    from ..readers.hub.plan import is_hub_source, parse_hub_source

    if not text or not is_hub_source(text):
        return text
    try:
        repo_id, revision = parse_hub_source(text)
    except SourceError:
        return text
    return repo_id.lower() + (f"@{revision}" if revision not in (None, "main") else "")


def distinct_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (a copy) where each ``model`` label that rows of two or more sources share is replaced, per source,
    by the shortest tail of the source's path (``x/m``, ``y/m``) that differs from the others' (the whole source
    when no tail does). A frame without a ``source`` column, or without shared labels, is returned unchanged."""
    if "source" not in frame.columns or "model" not in frame.columns or not len(frame):
        return frame
    sources = frame.groupby("model", sort=False)["source"].unique()
    shared = {name: list(srcs) for name, srcs in sources.items() if len(srcs) > 1}
    if not shared:
        return frame
    out = frame.copy()
    out["model"] = out["model"].astype(object)
    for name, srcs in shared.items():
        labels = _tails([str(s) for s in srcs])
        for src, label in zip(srcs, labels):
            out.loc[(frame["model"] == name) & (frame["source"] == src), "model"] = label
    return out


def _tails(sources: list[str]) -> list[str]:
    """The shortest trailing path parts of each of ``sources`` that are all different (whole texts otherwise)."""
    parts = [s.rstrip("/").split("/") for s in sources]
    for k in range(1, max(len(p) for p in parts) + 1):
        tails = ["/".join(p[-k:]) for p in parts]
        if len(set(tails)) == len(tails):
            return tails
    return sources


#: the columns that split a results file into views, with the ``qkgeometry plot`` option that picks one
VIEW_OPTIONS = {"per": "--per", "input_norm": "--input-norm", "qk_norm": "--qk-norm"}


def one_view(frame: pd.DataFrame, what: str, chosen: dict[str, str | None] | None = None, *,
             cli: bool = True) -> pd.DataFrame:
    """The rows of ``frame`` at one level (``per``: "layer" or "head") and one form (``input_norm``, ``qk_norm``:
    "raw" or "folded"). ``chosen`` maps those columns to the value to keep; a column not chosen must hold one value,
    else ``ValueError`` names ``what`` (the file or argument) and how to pick one (the ``qkgeometry plot`` option of
    :data:`VIEW_OPTIONS` when ``cli``, a row selection otherwise); so does a choice the frame lacks."""
    chosen = chosen or {}
    for column, option in VIEW_OPTIONS.items():
        if column not in frame.columns:
            continue
        held = sorted(v for v in frame[column].dropna().astype(str).unique() if v)
        value = chosen.get(column)

        def pick(v: str, option: str = option, column: str = column) -> str:
            return f"{option} {v}" if cli else f"frame[frame[{column!r}] == {v!r}]"

        if value is None and len(held) > 1:
            raise ValueError(f"{what} holds rows of {column} = {' and '.join(held)}, which one figure cannot show "
                             f"together (it would average them); pass {pick(held[0])} or {pick(held[-1])}.")
        if value is not None:
            if value not in held:
                raise ValueError(f"{what} holds no rows of {column} = {value} (only {', '.join(held) or 'none'}); "
                                 f"pass {pick(held[0]) if held else 'another file'}.")
            cells = frame[column].fillna("").astype(str)
            frame = frame[(cells == value) | (cells == "")].reset_index(drop=True)  # "": the model has no such gain
    return frame
