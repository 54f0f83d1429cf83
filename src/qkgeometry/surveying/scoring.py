"""Score whole models into tidy pandas DataFrames: :func:`score_model` for one model, :func:`survey` for many.

One row per (model, component, layer, head) with the columns of :data:`COLUMNS`; ``head`` is ``<NA>`` on layer-level
rows (the layer matrix ``M_layer = Σ_h W_Q^h W_K^{g(h)ᵀ}``, the book's Notation page). Weights are streamed one
layer at a time and scored with the factored formulas, so no d × d matrix is ever formed. Chapters 2 and 4.

The package is called ``surveying`` (the act), so that ``qkgeometry.survey`` stays the function.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .._lazy import LazyModule
from .._threads import read_ahead
from ..architectures import InputNorm
from ..errors import NonFiniteWeights, SurveyInterrupted, ZeroWeights, first_line
from ..model import RANDOM_PREFIX, QKLayer, QKModel
from ..readers import open_model
from ..score_table import layer_rows
from .identity import distinct_labels, source_identity
from .store import (
    CACHE_KEY,
    COLUMNS,
    SURVEY_COLUMNS,
    empty_frame,
    rows_matching,
)

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = LazyModule("pandas")  # imported when the first frame is built

__all__ = ["check_score_args", "check_store_path", "open_source", "score_layer", "score_layers", "score_model",
           "summarize", "survey"]


Per = Literal["layer", "head"]


def score_layer(layer: QKLayer, per: Per = "layer", num_std: float = 2.0) -> list[dict[str, Any]]:
    """Scores of one layer: one dict for ``per="layer"``, one per query head for ``per="head"``.

    All heads in a few batched float64 products (:func:`qkgeometry.scores.layer_scores`), on the layer's device;
    the KV heads are never expanded per query head. This is the only scoring path
    (:func:`qkgeometry.score_table.layer_rows`, with ``<NA>`` for the head of a layer row): :func:`score_model`,
    :func:`survey` and ``qkgeometry score`` all use it.
    """
    return [{**row, "head": pd.NA if row["head"] is None else row["head"]} for row in layer_rows(layer, per, num_std)]


def score_model(source: Any, per: Per = "layer", num_std: float = 2.0, progress: bool = False, *,
                device: Any = None, input_norm: InputNorm = "raw") -> pd.DataFrame:
    """Score every attention block of ``source`` (anything :func:`qkgeometry.load_qk` accepts, or a QKModel).

    Returns the tidy frame described in the module docstring, reading one layer at a time. Chapter 2 ("Per head
    or per layer?") and chapter 4 use it. ``device`` (e.g. ``"cuda"``): where to compute, float64 everywhere
    (see :func:`qkgeometry.load_qk`). ``input_norm``: ``"raw"`` (default, the paper's form) or ``"folded"``
    (``diag(γ) W_qk diag(γ)`` with the gains of the normalisation before attention; see :func:`qkgeometry.load_qk`).
    A QKModel is scored in the form it was loaded with; asking ``"folded"`` of a raw one is an error. The caller's
    QKModel is left as it was: ``device`` applies to this call only, and the model is not closed.
    """
    check_score_args(per, num_std, input_norm)
    if isinstance(source, QKModel):  # the caller's model: scored on a view, neither moved nor closed
        return score_layers(_open(source, "folded", device, input_norm), per, float(num_std), progress, leave=True)
    with _open(source, "folded", device, input_norm) as model:
        return score_layers(model, per, float(num_std), progress, leave=True)


def check_score_args(per: Any, num_std: Any, input_norm: Any = "raw") -> None:
    """The scoring settings every entry point takes (:func:`score_model`, :func:`survey`, the training callbacks),
    checked in one place: ``per``, ``num_std`` and ``input_norm``, each refused by name."""
    from .._validation import check_num_std

    if per not in ("layer", "head"):
        raise ValueError(f"`per` must be 'layer' or 'head'; got {per!r}.")
    if input_norm not in ("raw", "folded"):
        raise ValueError(f"`input_norm` must be 'raw' or 'folded'; got {input_norm!r}.")
    check_num_std(num_std)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and interquartile range of both scores per (model, family, component). Chapters 2 and 4. Models of
    different sources that share a name are told apart (:func:`~qkgeometry.surveying.identity.distinct_labels`).

    ``frame``: a score or survey frame (at least the columns model, family, component, symmetry, directionality).
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"`frame` must be a pandas DataFrame of scores (qkgeometry.score_model or survey); got "
                        f"{type(frame).__name__}.")
    needed = ["model", "family", "component", "symmetry", "directionality"]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"`frame` lacks the column(s) {missing}; pass the frame of qkgeometry.score_model or "
                         "qkgeometry.survey (one row per layer or head, with both scores).")
    scores = {}
    for score in ("symmetry", "directionality"):
        try:  # an empty frame's columns are of dtype object, which pandas cannot take quantiles of
            scores[score] = pd.to_numeric(frame[score], errors="raise").astype(float)
        except (TypeError, ValueError) as e:
            raise ValueError(f"`frame` column {score!r} holds values that are not numbers ({first_line(e)}); pass "
                             "the frame of qkgeometry.score_model or qkgeometry.survey.") from e
    frame = frame.assign(**scores)
    grouped = distinct_labels(frame).groupby(["model", "family", "component"], sort=False)[["symmetry", "directionality"]]
    out = grouped.size().rename("n").to_frame()
    median, q25, q75 = grouped.median(), grouped.quantile(0.25), grouped.quantile(0.75)  # vectorised per group
    for score in ("symmetry", "directionality"):
        out[f"{score}_median"], out[f"{score}_q25"], out[f"{score}_q75"] = median[score], q25[score], q75[score]
    return out.reset_index()


# ------------------------------------------------------------------------------------------------ survey


def _open(source: Any, qk_norm: str, device: Any = None, input_norm: str = "raw") -> QKModel:
    """:func:`qkgeometry.readers.open_model`: ``load_qk`` plus a QKModel as it is and ``random:<source>`` twins."""
    return open_model(source, qk_norm=qk_norm, input_norm=input_norm, device=device)


def open_source(source: Any, *, qk_norm: str = "folded", input_norm: InputNorm = "raw",
                device: Any = None) -> QKModel:
    """Open one survey source as :func:`survey` does: anything :func:`qkgeometry.load_qk` accepts, a QKModel (used
    as is; for another ``device``, a view of it on that device, the caller's model unchanged), or
    ``"random:<source>"`` for the random-init twin of ``source``. ``input_norm`` is checked."""
    check_score_args("layer", 2.0, input_norm)
    return _open(source, qk_norm, device, input_norm)


def survey(sources: Iterable[Any], per: Per = "layer", cache: str | Path | None = None, *, num_std: float = 2.0,
           qk_norm: str = "folded", input_norm: InputNorm = "raw", progress: bool = True,
           device: Any = None, executor: Executor | None = None) -> pd.DataFrame:
    """Score many models, one layer at a time, into a resumable store. Chapter 4 uses it.

    ``sources``: anything :func:`qkgeometry.load_qk` accepts, ``"random:<source>"`` for the random-init twin of a
    source, or :class:`qkgeometry.catalogue.PresetEntry` items (``qkgeometry.catalogue.preset("offline")``), whose ``name``
    labels the rows, or :class:`qkgeometry.surveying.trajectories.Checkpoint` items, whose rows carry (and whose
    store keeps) where each sits in its training run (``run``, ``checkpoint``, ``stage``, ``step``, ``tokens``).
    A source given more than once is surveyed and returned once (``frame.attrs["repeated"]`` lists the repeats);
    two spellings of one local path count as one source.

    Streaming: each model is opened lazily and scored layer by layer with the factored formulas (memory ~ one
    layer's Q/K weights; see ``benchmarks/bench_survey_memory.py``).

    ``executor``: any :class:`concurrent.futures.Executor` (``None``: score in this process, one model after
    another). Each model becomes one task: the worker opens, checks and scores it and returns its frame, and only
    this process writes the store. A :class:`concurrent.futures.ProcessPoolExecutor` (``qkgeometry survey
    --workers N``, :func:`worker_pool`) uses the cores of one machine; ``dask.distributed.Client(address)
    .get_executor()`` (``--dask-scheduler ADDRESS``) the machines of a cluster, whose workers must be able to open
    the sources (a shared file system, or Hub ids). The result equals the serial one exactly and comes in the
    order of ``sources``, whatever the order the workers finish in. A QKModel in ``sources`` is scored in this
    process. A task whose worker dies (``kill -9``, out of memory) fails alone, as a failure of its model: the
    other models of the broken pool are scored again on a fresh one (:mod:`qkgeometry.surveying.workers`).

    Store (``cache=path``), built so that nothing is lost, stale or silently wrong
    (:mod:`qkgeometry.surveying.store`):

    * **Format by name.** ``.sqlite`` (or ``.sqlite3``, ``.db``): an SQLite store in WAL mode, where adding a model
      costs the same whatever the store holds (:class:`qkgeometry.surveying.store.SurveyStore`). ``.csv``: a tidy CSV,
      rewritten whole after each model through a temporary file and an atomic rename, under an exclusive lock
      (``<cache>.lock``); a symlinked CSV is written through. Use ``.sqlite`` beyond a few dozen models.
    * **Atomic.** Each model is written as soon as it finishes, in one step: killing the run (or this process)
      loses at most the models in progress, and the store reopens with every finished model.
    * **Keyed on content.** A model is reused only when a stored model has the same ``source``, ``revision``,
      ``qkgeometry_version``, ``per``, ``num_std``, ``qk_norm`` and ``input_norm`` (:data:`CACHE_KEY`). For local files the
      revision hashes config.json and the weights (in full up to 256 MiB, else the headers plus an even sample:
      see ``qkgeometry._files.fingerprint``); for Hub models it is the commit.
    * **One version per model.** A model whose revision or package version changed is recomputed, and its new
      rows replace the old ones as a unit (same ``source``, ``per``, ``num_std``, ``qk_norm``, ``input_norm``).
    * **Complete.** Reused rows must be exactly the model's expected rows (every layer, and every head for
      ``per="head"``, with the model's current sizes) with finite scores; a truncated or damaged cache is
      recomputed for the models it lacks (:func:`~qkgeometry.surveying.store.read_store` drops damaged rows).
    * The output file is checked for writability before any model is computed.
    * **Safe to open in a spreadsheet.** A CSV text cell that starts with ``=``, ``+``, ``-`` or ``@`` (a model
      folder named ``=HYPERLINK(...)``) is written with a leading apostrophe, which spreadsheet programs read as
      "text, not a formula" (:func:`spreadsheet_safe`); :func:`~qkgeometry.surveying.store.read_store` reads the original value back.

    ``input_norm``: ``"raw"`` (default) or ``"folded"`` (see :func:`qkgeometry.load_qk`); a model whose
    normalisation gain is not known fails (reported and skipped) under ``"folded"``.

    ``device`` (e.g. ``"cuda"``): where to compute, float64 everywhere; it does not change the numbers beyond
    round-off and is not part of the cache key.

    Progress (``progress=True``): a bar over models (and, serially, one over each model's layers; the Hub reader
    adds one over bytes while it fetches).

    Failures: a model that cannot be opened or read, has no attention layers, or gives a non-finite score is
    reported (a warning and a line on the progress bar) and skipped; the run goes on. Failures are not cached, so
    the next run retries them. Ctrl-C raises :class:`SurveyInterrupted` (a ``KeyboardInterrupt``) that lists what
    was saved; tasks not yet started are cancelled.

    Returns the tidy frame of every requested model that succeeded, with the columns of :data:`SURVEY_COLUMNS`
    (:data:`COLUMNS` first), in the order of ``sources``, plus tables in ``frame.attrs``:

    * ``frame.attrs["failures"]``: DataFrame with columns ``source, name, error, message``, one row per failed model;
    * ``frame.attrs["computed"]``: names of the models computed in this call (the others came from the cache);
    * ``frame.attrs["repeated"]``: the sources given more than once (each surveyed once).

    A QKModel in ``sources`` is used as is and left open (and on its device) for the caller.
    """
    import warnings

    from tqdm.auto import tqdm

    from ..errors import OutputError

    cache_path = _check_survey_args(sources, per, num_std, input_norm, cache, executor, device)
    settings = {"per": per, "num_std": float(num_std), "qk_norm": qk_norm, "input_norm": input_norm,
                "device": None if device is None else str(device)}
    entries, repeated = _distinct(list(sources))
    store = _open_checked_store(cache_path)
    outcomes: dict[int, dict[str, Any]] = {}
    computed_order: list[str] = []  # in the order they were saved (what an interruption reports)
    bar = tqdm(total=len(entries), desc="models", unit="model", disable=not progress)

    def stored_rows(entry: Any) -> pd.DataFrame:
        return empty_frame() if store is None else store.rows_for(_source_key(entry))

    def finish(i: int, outcome: dict[str, Any]) -> None:
        """The one writer: store a computed model at once, report a failure, advance the bar."""
        outcomes[i] = outcome
        if outcome["status"] == "failed":
            f = outcome["failure"]
            warnings.warn(f"survey: skipped {f['name']!r}: {f['error']}: {f['message']}", stacklevel=4)
            if progress:  # live, above the bar; without one, the caller reports failures (frame.attrs)
                bar.write(f"failed: {f['name']}: {f['error']}: {f['message']}")
        elif outcome["status"] == "computed":
            if store is not None:
                store.put(outcome["frame"], outcome["key"])
            computed_order.append(str(outcome["frame"]["model"].iloc[0]))
        elif outcome.get("place") and store is not None:  # a reused checkpoint: where it sits in its run
            store.place(outcome["key"], outcome["place"])
        bar.set_postfix_str(outcome["label"])
        bar.update(1)

    futures: dict[Any, int] = {}
    try:
        try:
            _dispatch(entries, settings, executor, progress, stored_rows, finish, futures, bar)
        except KeyboardInterrupt as e:
            for future in futures:
                future.cancel()
            raise SurveyInterrupted(computed_order, cache_path) from e
        except OutputError:
            for future in futures:
                future.cancel()
            raise
    finally:
        bar.close()
        if store is not None:
            store.close()
    return _assemble([outcomes[i] for i in range(len(entries))], repeated)


def _check_survey_args(sources: Any, per: Any, num_std: Any, input_norm: Any, cache: Any, executor: Any,
                       device: Any) -> Path | None:
    """Every argument of :func:`survey` checked before any model is opened; returns the cache path (or None)."""
    check_score_args(per, num_std, input_norm)
    if isinstance(sources, (str, QKModel)) or not isinstance(sources, Iterable):
        raise TypeError("`sources` must be a list of sources (e.g. ['offline:minilm-l6']) or "
                        "qkgeometry.catalogue.preset(...); got a single " + type(sources).__name__ + ".")
    cache_path = check_store_path(cache, "`cache`")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError("`executor` must be a concurrent.futures.Executor (e.g. ProcessPoolExecutor(4), or "
                        f"dask.distributed.Client(...).get_executor()); got {type(executor).__name__}.")
    if device is not None:
        from ..devices import resolve_device

        resolve_device(device)  # a clear error now, not one skipped model after another
    return cache_path


def check_store_path(path: str | Path | None, what: str) -> Path | None:
    """``path`` (None: no store) as a :class:`~pathlib.Path` to a ``.sqlite`` store or a ``.csv`` file that can be
    written; anything else is refused by ``what`` (the argument's name) before any model is scored."""
    from .._files import check_writable_file
    from .store import STORE_SUFFIXES

    if path is None:
        return None
    path = Path(path)
    if path.suffix.lower() not in (".csv", *STORE_SUFFIXES):
        raise ValueError(f"{what} must be a .sqlite store or a .csv file; got {str(path)!r}.")
    check_writable_file(path, what)
    return path


def _open_checked_store(cache_path: Path | None) -> Any:
    """The store at ``cache_path`` (None without one); a file that is not a survey store (or CSV) is refused
    before any model is opened."""
    from .store import open_store

    if cache_path is None:
        return None
    store = open_store(cache_path)
    try:
        store.counts()
    except BaseException:
        store.close()
        raise
    return store


def _dispatch(entries: list[Any], settings: dict[str, Any], executor: Executor | None, progress: bool,
              stored_rows: Any, finish: Any, futures: dict[Any, int], bar: Any) -> None:
    """Score every entry, serially or as one task per model on ``executor`` (the caller's open QKModels stay in
    this process), handing each outcome to ``finish`` (the one writer) as it arrives."""
    if executor is None:
        for i, entry in enumerate(entries):
            bar.set_postfix_str(_label(entry))
            finish(i, _survey_one(entry, settings, stored_rows(entry), progress))
        return
    from .workers import run_tasks

    local = [i for i, e in enumerate(entries) if isinstance(_source_of(e), QKModel)]
    for i in local:  # the caller's open models stay in this process
        finish(i, _survey_one(entries[i], settings, stored_rows(entries[i]), False))
    tasks = {i: (entry, settings, stored_rows(entry), False) for i, entry in enumerate(entries) if i not in local}
    run_tasks(executor, _survey_one, tasks, finish, lambda i, e: finish(i, _failed(entries[i], e)), futures)


def _assemble(outcomes: list[dict[str, Any]], repeated: list[str]) -> pd.DataFrame:
    """The frame :func:`survey` returns, in the order of its sources, with its failures, computed models and
    repeats in ``attrs``."""
    parts = [o["frame"] for o in outcomes if o["status"] != "failed"]
    out = distinct_labels(pd.concat(parts, ignore_index=True)) if parts else empty_frame()
    out["head"] = out["head"].astype("Int64")
    out.attrs["failures"] = pd.DataFrame([o["failure"] for o in outcomes if o["status"] == "failed"],
                                         columns=["source", "name", "error", "message"])
    label = dict(zip(out["source"], out["model"]))  # one label per source (distinct where names are shared)
    out.attrs["computed"] = [str(label[o["frame"]["source"].iloc[0]]) for o in outcomes if o["status"] == "computed"]
    out.attrs["repeated"] = repeated
    return out


def _source_of(entry: Any) -> Any:
    from ..catalogue import PresetEntry
    from .checkpoints import Checkpoint

    return entry.source if isinstance(entry, (PresetEntry, Checkpoint)) else entry


def _place(entry: Any) -> dict[str, Any] | None:
    """Where a :class:`~qkgeometry.surveying.trajectories.Checkpoint` entry sits in its run (the store's
    trajectory columns); None for any other entry."""
    from .checkpoints import Checkpoint

    return entry.columns() if isinstance(entry, Checkpoint) else None


def _label(entry: Any) -> str:
    from ..catalogue import PresetEntry
    from .checkpoints import Checkpoint

    if isinstance(entry, PresetEntry):
        return entry.name
    if isinstance(entry, Checkpoint):
        return entry.source
    return entry.name if isinstance(entry, QKModel) else str(entry)


def _source_key(entry: Any) -> str:
    """The ``source`` column a model's rows carry: its resolved identity (a local path made absolute)."""
    source = _source_of(entry)
    return source.source if isinstance(source, QKModel) else source_identity(source)


def _distinct(entries: list[Any]) -> tuple[list[Any], list[str]]:
    """``entries`` without repeats (the first of each kept, in order), and the repeated sources. Sources are
    compared by :func:`~qkgeometry.surveying.identity.source_identity` (``./m`` and ``m`` are one model), a QKModel
    by identity."""
    seen: set[Any] = set()
    kept, repeated = [], []
    for entry in entries:
        source = _source_of(entry)
        ident: Any = ("model", id(source)) if isinstance(source, QKModel) else source_identity(source)
        if ident in seen:
            repeated.append(_source_key(entry))
            continue
        seen.add(ident)
        kept.append(entry)
    return kept, repeated


def _failed(entry: Any, error: BaseException) -> dict[str, Any]:
    source = _source_of(entry)
    label = _label(entry)
    return {"status": "failed", "label": label, "frame": None, "key": None,
            "failure": {"source": str(source), "name": label, "error": type(error).__name__,
                        "message": first_line(error)}}


def _survey_one(entry: Any, settings: dict[str, Any], stored: pd.DataFrame, progress: bool) -> dict[str, Any]:
    """One model of a survey, as a worker runs it: open ``entry``, reuse its complete rows from ``stored`` (the
    stored rows of its source) or score it. Returns ``{"status": "hit" | "computed" | "failed", "label", "frame",
    "key", "failure"}``; a model's own failure is returned, never raised, so a worker never ends a survey."""

    from .._version import __version__ as version
    from ..catalogue import PresetEntry

    meta = entry if isinstance(entry, PresetEntry) else None
    source = _source_of(entry)
    label = _label(entry)
    per, num_std = settings["per"], settings["num_std"]
    try:
        model = _open(source, settings["qk_norm"], settings["device"], settings["input_norm"])
        with contextlib.nullcontext() if isinstance(source, QKModel) else model:  # the caller closes theirs
            key = {"source": _source_key(entry),
                   "revision": str(model.revision), "qkgeometry_version": version, "per": per,
                   "num_std": num_std, "qk_norm": model.qk_norm or "", "input_norm": model.input_norm}
            hit = _complete_rows(stored, key, model, per)
            if hit is not None:
                place = _place(entry)
                return {"status": "hit", "label": label, "frame": hit if place is None else hit.assign(**place),
                        "key": key, "failure": None, "place": place}
            rows = score_layers(model, per, num_std, progress, label=label)
            _check_result(rows, model, per)
        frame = rows.assign(model=meta.name if meta else model.name,
                            init=meta.init if meta else ("random" if str(source).startswith(RANDOM_PREFIX)
                                                         else "pretrained"),
                            modality=meta.modality if meta else "language", **key)[SURVEY_COLUMNS]
        if _place(entry) is not None:
            frame = frame.assign(**_place(entry))
    except Exception as e:  # one bad model must not end a long survey: report, skip, go on
        return _failed(entry, e)
    return {"status": "computed", "label": label, "frame": frame, "key": key, "failure": None}


def _expected_rows(model: QKModel, per: Per) -> pd.DataFrame:
    """The (component, layer, head) rows and sizes a complete result of ``model`` has."""
    rows = []
    for component in model.components:
        dims = model.dims(component)
        for layer in range(dims.n_layers):
            for head in (range(dims.n_heads) if per == "head" else [None]):
                rows.append((component, layer, -1 if head is None else head, dims.d_model, dims.head_dim,
                             dims.n_heads, dims.n_kv_heads))
    return pd.DataFrame(rows, columns=["component", "layer", "head", "d_model", "head_dim", "n_heads",
                                       "n_kv_heads"])


def _signature(frame: pd.DataFrame) -> list[tuple]:
    cols = ["component", "layer", "head", "d_model", "head_dim", "n_heads", "n_kv_heads"]
    f = frame[cols].copy()
    f["head"] = f["head"].astype("Int64").fillna(-1)
    return sorted(tuple(str(v) if c == "component" else int(v) for c, v in zip(cols, row))
                  for row in f.itertuples(index=False))


def _complete_rows(stored: pd.DataFrame, key: dict[str, Any], model: QKModel, per: Per) -> pd.DataFrame | None:
    """The cached rows of ``key`` if they are exactly the rows a complete result of ``model`` has, else None."""
    hit = stored.loc[rows_matching(stored, key, CACHE_KEY)]
    if not len(hit) or hit["model"].nunique() != 1:
        return None
    if _signature(hit) != _signature(_expected_rows(model, per)):
        return None
    return hit.reset_index(drop=True)


def _check_result(rows: pd.DataFrame, model: QKModel, per: Per) -> None:
    """A computed result must have every expected row and finite scores: never store a NaN as a result."""
    from ..errors import SourceError

    if not len(rows):
        raise SourceError(f"{model.name!r} has no attention layers to score (0 layers in its config or "
                          "metadata); nothing to survey.")
    bad = rows[~np.isfinite(rows[["symmetry", "directionality"]].to_numpy(dtype=float)).all(axis=1)]
    if len(bad):
        first = bad.iloc[0]
        raise SourceError(f"{model.name!r} gave a non-finite score in {first['component']} layer "
                          f"{first['layer']}; its weights hold NaN/Inf or overflow. Not stored.")


def score_layers(model: QKModel, per: Per = "layer", num_std: float = 2.0, progress: bool = False, *,
                 label: str | None = None, leave: bool = False,
                 on_undefined: Callable[[QKLayer, ValueError], None] | None = None) -> pd.DataFrame:
    """Rows of :data:`COLUMNS` for every layer of an opened QKModel, read one layer at a time with
    :func:`score_layer`. This is the step :func:`score_model`, :func:`survey` and the training callbacks
    (:mod:`qkgeometry.integrations`) share once a model is open.

    ``progress`` shows a bar over layers labelled ``label`` (default: the model's name), kept on screen with
    ``leave=True``. ``on_undefined``: by default a layer whose Q/K weights hold NaN or Inf, or whose W_qk is all
    zero, raises; with a function, that layer's rows get NaN scores and the function is called with the layer and
    the error (a model that is training: a diverging step must not end the run). Arguments are not checked here
    (:func:`score_model` checks them).
    """
    from tqdm.auto import tqdm

    label = model.name if label is None else label
    rows = []
    # score_layer converts to float64 itself, once; the next layer is read while this one is scored
    layers = read_ahead(model.iter_layers(convert=False))
    if progress:  # no bar object at all otherwise: tqdm's lock is a system semaphore, which a worker process
        # stopped mid-survey would leave behind
        layers = tqdm(layers, total=len(model), desc=label, unit="layer", leave=leave)
    for layer in layers:
        dims = model.dims(layer.component)
        try:
            scored = score_layer(layer, per, num_std)
        except (NonFiniteWeights, ZeroWeights) as e:
            if on_undefined is None:
                raise
            on_undefined(layer, e)
            scored = [{"layer": layer.index, "head": pd.NA if per == "layer" else h, "symmetry": np.nan,
                       "directionality": np.nan} for h in range(1 if per == "layer" else layer.n_heads)]
        for row in scored:
            rows.append({"model": model.name, "family": model.family, "component": layer.component, **row,
                         "d_model": dims.d_model, "head_dim": dims.head_dim, "n_heads": dims.n_heads,
                         "n_kv_heads": dims.n_kv_heads})
        del layer
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["head"] = frame["head"].astype("Int64")
    return frame
