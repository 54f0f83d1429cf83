"""Score whole models into tidy pandas DataFrames: :func:`score_model` for one model, :func:`survey` for many.

One row per (model, component, layer, head) with the columns of :data:`COLUMNS`; ``head`` is ``<NA>`` on layer-level
rows (the layer matrix ``M_layer = Σ_h W_Q^h W_K^{g(h)ᵀ}``, the book's Notation page). Weights are streamed one
layer at a time and scored with the factored formulas, so no d × d matrix is ever formed. Chapters 2 and 4.

The module is called ``surveying`` (the act), so that ``qkgeometry.survey`` stays the function.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ._lazy import LazyModule
from .architectures import InputNorm
from .errors import first_line
from .model import RANDOM_PREFIX, QKLayer, QKModel
from .readers import load_qk
from .scores import layer_scores

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = LazyModule("pandas")  # imported when the first frame is built

__all__ = ["CACHE_KEY", "COLUMNS", "FORMULA_STARTS", "SURVEY_COLUMNS", "SurveyInterrupted", "first_line",
           "open_source", "read_cache", "score_layer", "score_layers", "score_model", "spreadsheet_safe",
           "spreadsheet_text", "summarize", "survey"]

COLUMNS = ["model", "family", "component", "layer", "head", "symmetry", "directionality", "d_model", "head_dim",
           "n_heads", "n_kv_heads"]

Per = Literal["layer", "head"]


def score_layer(layer: QKLayer, per: Per = "layer", num_std: float = 2.0) -> list[dict[str, Any]]:
    """Scores of one layer: one dict for ``per="layer"``, one per query head for ``per="head"``.

    All heads in a few batched float64 products (:func:`qkgeometry.scores.layer_scores`), on the layer's device;
    the KV heads are never expanded per query head. This is the only scoring path: :func:`score_model` and
    :func:`survey` both use it.
    """
    try:
        s = layer_scores(layer.wq, layer.wk_kv, num_std, heads=per == "head", layer=per == "layer")
    except ValueError as e:  # name the model's layer (the kernel counts within the stack it was given)
        raise ValueError(f"{layer.component} layer {layer.index}: {e}") from e
    if per == "layer":
        return [{"layer": layer.index, "head": pd.NA, "symmetry": s.layer.symmetry,
                 "directionality": s.layer.directionality}]
    sym, dirn = np.atleast_1d(s.heads.symmetry), np.atleast_1d(s.heads.directionality)
    return [{"layer": layer.index, "head": h, "symmetry": float(sym[h]), "directionality": float(dirn[h])}
            for h in range(layer.n_heads)]


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
    _check_args(per, num_std, input_norm)
    if isinstance(source, QKModel):  # the caller's model: scored on a view, neither moved nor closed
        return score_layers(_open(source, "folded", device, input_norm), per, float(num_std), progress, leave=True)
    with _open(source, "folded", device, input_norm) as model:
        return score_layers(model, per, float(num_std), progress, leave=True)


def _check_args(per: Any, num_std: Any, input_norm: Any = "raw") -> None:
    from ._validation import check_num_std

    if per not in ("layer", "head"):
        raise ValueError(f"`per` must be 'layer' or 'head'; got {per!r}.")
    if input_norm not in ("raw", "folded"):
        raise ValueError(f"`input_norm` must be 'raw' or 'folded'; got {input_norm!r}.")
    check_num_std(num_std)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and interquartile range of both scores per (model, family, component). Chapters 2 and 4.

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
    grouped = frame.groupby(["model", "family", "component"], sort=False)[["symmetry", "directionality"]]
    out = grouped.size().rename("n").to_frame()
    median, q25, q75 = grouped.median(), grouped.quantile(0.25), grouped.quantile(0.75)  # vectorised per group
    for score in ("symmetry", "directionality"):
        out[f"{score}_median"], out[f"{score}_q25"], out[f"{score}_q75"] = median[score], q25[score], q75[score]
    return out.reset_index()


# ------------------------------------------------------------------------------------------------ survey
#: Extra columns of a survey frame (after :data:`COLUMNS`): provenance of every row, and the cache key.
SURVEY_COLUMNS = [*COLUMNS, "init", "modality", "source", "revision", "qkgeometry_version", "per", "num_std",
                  "qk_norm", "input_norm"]
#: A cached model is reused only when all of these match.
CACHE_KEY = ["source", "revision", "qkgeometry_version", "per", "num_std", "qk_norm", "input_norm"]


def _open(source: Any, qk_norm: str, device: Any = None, input_norm: str = "raw") -> QKModel:
    """``load_qk`` plus ``random:<source>``, the random-init twin of ``source`` (:meth:`QKModel.randomized`; it has
    no normalisation gains, so it is the same for both ``input_norm`` values and is labelled ``raw``)."""
    from .scores import resolve_device

    if isinstance(source, QKModel):
        if input_norm == "folded" and source.input_norm != "folded":
            raise ValueError(f"`input_norm='folded'` was asked for, but the QKModel {source.name!r} was loaded with "
                             "input_norm='raw'; load it with qkgeometry.load_qk(..., input_norm='folded') or pass the "
                             "source itself.")
        if device is not None and resolve_device(device) != source.device:
            return source.with_device(resolve_device(device))  # the caller's model is unchanged
        return source
    if isinstance(source, str) and source.startswith(RANDOM_PREFIX):
        # the twin reads nothing of its source: the source's files are closed before the twin is used
        with load_qk(source[len(RANDOM_PREFIX):], qk_norm=qk_norm, device=device) as base:
            return base.randomized()
    return load_qk(source, qk_norm=qk_norm, input_norm=input_norm, device=device)


def open_source(source: Any, *, qk_norm: str = "folded", input_norm: InputNorm = "raw",
                device: Any = None) -> QKModel:
    """Open one survey source as :func:`survey` does: anything :func:`qkgeometry.load_qk` accepts, a QKModel (used
    as is; for another ``device``, a view of it on that device, the caller's model unchanged), or
    ``"random:<source>"`` for the random-init twin of ``source``. ``input_norm`` is checked."""
    _check_args("layer", 2.0, input_norm)
    return _open(source, qk_norm, device, input_norm)


def read_cache(path: str | Path | None) -> pd.DataFrame:
    """Read a survey CSV (the ``cache`` of :func:`survey`, the ``--out`` of ``qkgeometry survey``) as a tidy frame.

    Returns the columns of :data:`SURVEY_COLUMNS`; an absent path (or ``None``) or a 0-byte file gives an empty
    frame. Text cells were written formula-safe (:func:`spreadsheet_safe`: a leading apostrophe before ``=``,
    ``+``, ``-``, ``@``) and are read back as they were. Damage is repaired, not trusted: a last line without its newline (a write cut short) is dropped, and so
    are rows whose scores or key fields are missing or not finite; :func:`survey` then sees those models as
    incomplete and recomputes them. Anything that is not a survey CSV (wrong columns, not UTF-8 text, a folder or
    a pipe) raises ``ValueError`` naming the file.
    """
    import io
    import warnings

    from ._files import resolve_output

    if path is None:
        return _empty()
    path = Path(path)
    try:
        if not resolve_output(path).exists():
            return _empty()
        if not resolve_output(path).is_file():
            raise ValueError(f"survey file {str(path)!r} is not a regular file (a folder or a pipe?); pass a .csv "
                             "file.")
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read survey file {str(path)!r}: {e.strerror or e}; check its permissions.") from e
    if not data.strip():
        return _empty()
    try:
        text = data.decode("utf-8")
        if not text.endswith("\n"):
            warnings.warn(f"survey file {str(path)!r} ends in a partial line (a write cut short?); ignoring it.",
                          stacklevel=2)
            text = text[: text.rfind("\n") + 1]
        frame = pd.read_csv(io.StringIO(text), dtype={"revision": str, "qk_norm": str, "source": str,
                                                      "model": str, "input_norm": str}, keep_default_na=True)
    except UnicodeDecodeError as e:
        raise ValueError(f"survey file {str(path)!r} is not UTF-8 text (byte {e.start}: {e.reason}); it is not a "
                         "qkgeometry survey CSV. Pass another path or delete the file.") from e
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise ValueError(f"survey file {str(path)!r} is not a readable CSV ({first_line(e)}); pass "
                         "another path or delete the file.") from e
    spreadsheet_text(frame)  # cells written as '=... (formula-safe) read back as =...
    if "input_norm" not in frame.columns and len(frame.columns) > 1:  # written before the option: raw weights
        frame["input_norm"] = "raw"
    missing = sorted(set(SURVEY_COLUMNS) - set(frame.columns))
    if missing:
        raise ValueError(f"survey file {str(path)!r} is not a qkgeometry survey CSV (missing columns {missing}); "
                         "pass a new path or delete the file.")
    numeric = ["symmetry", "directionality", "layer", "num_std", "d_model", "head_dim", "n_heads", "n_kv_heads"]
    for col in [*numeric, "head"]:
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    values = frame[numeric].to_numpy(dtype=float)
    good = np.isfinite(values).all(axis=1) & frame[["model", "source", "per", "component"]].notna().all(axis=1)
    good &= frame["per"].ne("head") | frame["head"].notna()
    frame = frame.loc[good].reset_index(drop=True)
    frame["head"] = frame["head"].astype("Int64")
    frame["layer"] = frame["layer"].astype(int)
    frame["qk_norm"] = frame["qk_norm"].fillna("")
    frame["input_norm"] = frame["input_norm"].fillna("raw")
    frame["revision"] = frame["revision"].fillna("")
    return frame[SURVEY_COLUMNS]


#: a text cell that starts with one of these is run as a formula by spreadsheet programs (Excel, LibreOffice,
#: Google Sheets): a model folder named ``=cmd|' -C calc'!A0`` would be one
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells are safe to open in a spreadsheet: a cell that starts with ``=``,
    ``+``, ``-``, ``@``, a tab or a carriage return, or with an apostrophe, gets one leading apostrophe (``'``), the
    mark spreadsheet programs read as "this cell is text" (and do not show). Numbers are left as they are (−0.5
    stays a number). :func:`spreadsheet_text` undoes it exactly, and :func:`read_cache` undoes it on what it reads."""
    out = frame.copy()
    for column in out.columns:
        marked = _text_starting(out[column], (*FORMULA_STARTS, "'"))
        if marked.any():
            out[column] = out[column].astype(object)
            out.loc[marked, column] = "'" + out.loc[marked, column]
    return out


def spreadsheet_text(frame: pd.DataFrame) -> pd.DataFrame:
    """The inverse of :func:`spreadsheet_safe`: one leading apostrophe is removed from every text cell that has
    one (in place; returns ``frame``)."""
    for column in frame.columns:
        marked = _text_starting(frame[column], ("'",))
        if marked.any():
            frame.loc[marked, column] = frame.loc[marked, column].str[1:]
    return frame


def _text_starting(column: pd.Series, prefixes: tuple[str, ...]) -> pd.Series:
    """Boolean mask of the cells of ``column`` that are strings starting with one of ``prefixes``."""
    if not (column.dtype == object or pd.api.types.is_string_dtype(column.dtype)):
        return pd.Series(False, index=column.index)
    return column.map(lambda v: isinstance(v, str) and v.startswith(prefixes)).astype(bool)


def _empty() -> pd.DataFrame:
    frame = pd.DataFrame(columns=SURVEY_COLUMNS)
    frame["head"] = frame["head"].astype("Int64")
    return frame


class SurveyInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`survey`: ``saved`` lists the models written to the cache by this call (the model in
    progress is not saved); ``cache`` is the file."""

    def __init__(self, saved: list[str], cache: Path | None):
        super().__init__(f"interrupted after saving {len(saved)} model(s)")
        self.saved, self.cache = saved, cache


def survey(sources: Iterable[Any], per: Per = "layer", cache: str | Path | None = None, *, num_std: float = 2.0,
           qk_norm: str = "folded", input_norm: InputNorm = "raw", progress: bool = True,
           device: Any = None) -> pd.DataFrame:
    """Score many models, one layer at a time, with a resumable on-disk cache. Chapter 4 uses it.

    ``sources``: anything :func:`qkgeometry.load_qk` accepts, ``"random:<source>"`` for the random-init twin of a
    source, or :class:`qkgeometry.catalogue.PresetEntry` items (``qkgeometry.catalogue.preset("offline")``), whose ``name``
    labels the rows.

    Streaming: each model is opened lazily and scored layer by layer with the factored formulas (memory ~ one
    layer's Q/K weights; see ``benchmarks/bench_survey_memory.py``).

    Cache (``cache=path.csv``), built so that nothing is lost, stale or silently wrong:

    * **Atomic and concurrent.** After each model finishes, its rows are merged into the CSV under an exclusive
      lock (``<cache>.lock``, ``fcntl.flock``): the file is re-read, the model's old rows replaced, and the result
      written through a temporary file and an atomic rename. Killing the run loses at most the model in progress;
      two surveys writing one cache both land. A symlinked cache is written through (the link is kept).
    * **Keyed on content.** A model is reused only when a cached model has the same ``source``, ``revision``,
      ``qkgeometry_version``, ``per``, ``num_std``, ``qk_norm`` and ``input_norm`` (:data:`CACHE_KEY`). For local files the
      revision hashes config.json and the weights (in full up to 256 MiB, else the headers plus an even sample:
      see ``qkgeometry.readers.files.fingerprint``); for Hub models it is the commit.
    * **Complete.** Reused rows must be exactly the model's expected rows (every layer, and every head for
      ``per="head"``, with the model's current sizes) with finite scores; a truncated or damaged cache is
      recomputed for the models it lacks (:func:`read_cache` drops damaged rows).
    * The output file is checked for writability before any model is computed.
    * **Safe to open in a spreadsheet.** A text cell that starts with ``=``, ``+``, ``-`` or ``@`` (a model folder
      named ``=HYPERLINK(...)``) is written with a leading apostrophe, which spreadsheet programs read as "text, not
      a formula" (:func:`spreadsheet_safe`); :func:`read_cache` reads the original value back.

    ``input_norm``: ``"raw"`` (default) or ``"folded"`` (see :func:`qkgeometry.load_qk`); a model whose
    normalisation gain is not known fails (reported and skipped) under ``"folded"``.

    ``device`` (e.g. ``"cuda"``): where to compute, float64 everywhere; it does not change the numbers beyond
    round-off and is not part of the cache key.

    Failures: a model that cannot be opened or read, has no attention layers, or gives a non-finite score is
    reported (a warning and a line on the progress bar) and skipped; the run goes on. Failures are not cached, so
    the next run retries them. Ctrl-C raises :class:`SurveyInterrupted` (a ``KeyboardInterrupt``) that lists what
    was saved.

    Returns the tidy frame of every requested model that succeeded, with the columns of :data:`SURVEY_COLUMNS`
    (:data:`COLUMNS` first), in the order of ``sources``, plus two tables in ``frame.attrs``:

    * ``frame.attrs["failures"]``: DataFrame with columns ``source, name, error, message``, one row per failed model;
    * ``frame.attrs["computed"]``: names of the models computed in this call (the others came from the cache).

    A QKModel in ``sources`` is used as is and left open (and on its device) for the caller.
    """
    import contextlib
    import warnings

    from tqdm.auto import tqdm

    from ._files import check_writable_file
    from .catalogue import PresetEntry

    _check_args(per, num_std, input_norm)
    if isinstance(sources, (str, QKModel)) or not isinstance(sources, Iterable):
        raise TypeError("`sources` must be a list of sources (e.g. ['offline:minilm-l6']) or "
                        "qkgeometry.catalogue.preset(...); got a single " + type(sources).__name__ + ".")
    cache_path = None if cache is None else Path(cache)
    if cache_path is not None and cache_path.suffix != ".csv":
        raise ValueError(f"`cache` must be a .csv path; got {str(cache_path)!r}.")
    if cache_path is not None:
        check_writable_file(cache_path, "`cache`")
    if device is not None:
        from .scores import resolve_device

        resolve_device(device)  # a clear error now, not one skipped model after another
    num_std = float(num_std)
    from ._version import __version__ as version

    cache_file = None if cache_path is None else _CacheFile(cache_path)
    stored = _empty() if cache_file is None else cache_file.read()
    entries = list(sources)
    parts: list[pd.DataFrame] = []
    failures: list[dict[str, str]] = []
    computed: list[str] = []
    bar = tqdm(entries, desc="models", unit="model", disable=not progress)
    try:
        for entry in bar:
            meta = entry if isinstance(entry, PresetEntry) else None
            source = meta.source if meta else entry
            label = meta.name if meta else (source.name if isinstance(source, QKModel) else str(source))
            bar.set_postfix_str(label)
            try:
                model = _open(source, qk_norm, device, input_norm)
                with contextlib.nullcontext() if isinstance(source, QKModel) else model:  # the caller closes theirs
                    key = {"source": model.source if isinstance(source, QKModel) else str(source),
                           "revision": str(model.revision), "qkgeometry_version": version, "per": per,
                           "num_std": num_std, "qk_norm": model.qk_norm or "", "input_norm": model.input_norm}
                    hit = _complete_rows(stored, key, model, per)
                    if hit is None and cache_file is not None:  # another run may have written it meanwhile
                        stored = cache_file.read()
                        hit = _complete_rows(stored, key, model, per)
                    if hit is not None:
                        parts.append(hit)
                        continue
                    rows = score_layers(model, per, num_std, progress, label=label)
                    _check_result(rows, model, per)
                frame = rows.assign(model=meta.name if meta else model.name,
                                    init=meta.init if meta else ("random" if str(source).startswith("random:")
                                                                 else "pretrained"),
                                    modality=meta.modality if meta else "language", **key)[SURVEY_COLUMNS]
            except Exception as e:  # one bad model must not end a long survey: report, skip, go on
                from ._files import OutputError

                if isinstance(e, OutputError):  # the output itself broke: nothing later can be saved either
                    raise
                failures.append({"source": str(source), "name": label, "error": type(e).__name__,
                                 "message": first_line(e)})
                warnings.warn(f"survey: skipped {label!r}: {type(e).__name__}: {first_line(e)}", stacklevel=2)
                bar.write(f"failed: {label}: {type(e).__name__}: {first_line(e)}")
                continue
            if cache_file is not None:
                stored = cache_file.store(frame, key)
            parts.append(frame)
            computed.append(str(frame["model"].iloc[0]))
    except KeyboardInterrupt as e:
        raise SurveyInterrupted(computed, cache_path) from e
    finally:
        bar.close()
    out = pd.concat(parts, ignore_index=True) if parts else _empty()
    out["head"] = out["head"].astype("Int64")
    out.attrs["failures"] = pd.DataFrame(failures, columns=["source", "name", "error", "message"])
    out.attrs["computed"] = computed
    return out


class _CacheFile:
    """The survey CSV on disk, re-read only when it changed (inode, size or mtime differ from the last read or
    write), so checking for other processes' rows before each model costs a ``stat``, not a parse."""

    def __init__(self, path: Path):
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._frame = _empty()

    def _current_stamp(self) -> tuple[int, int, int] | None:
        import os

        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ValueError(f"cannot read survey file {str(self.path)!r}: {e.strerror or e}.") from e
        return st.st_ino, st.st_size, st.st_mtime_ns

    def read(self) -> pd.DataFrame:
        stamp = self._current_stamp()
        if stamp is None:
            self._stamp, self._frame = None, _empty()
        elif stamp != self._stamp:
            self._frame, self._stamp = read_cache(self.path), stamp
        return self._frame

    def store(self, frame: pd.DataFrame, key: dict[str, Any]) -> pd.DataFrame:
        """Merge one model's rows into the file under the lock; return what the file now holds.

        The file is re-read under the lock (when it changed), so rows written meanwhile by another process are
        kept; this model's previous rows (same key: an incomplete or damaged copy) are replaced.
        """
        from ._files import locked, write_csv_atomic

        with locked(self.path):
            disk = self.read()
            disk = disk.loc[~_matches(disk, key)]
            merged = pd.concat([disk, frame], ignore_index=True) if len(disk) else frame.reset_index(drop=True)
            merged["head"] = merged["head"].astype("Int64")
            write_csv_atomic(spreadsheet_safe(merged), self.path, "survey file")
            self._frame, self._stamp = merged, self._current_stamp()
        return merged


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
    hit = stored.loc[_matches(stored, key)]
    if not len(hit) or hit["model"].nunique() != 1:
        return None
    if _signature(hit) != _signature(_expected_rows(model, per)):
        return None
    return hit.reset_index(drop=True)


def _check_result(rows: pd.DataFrame, model: QKModel, per: Per) -> None:
    """A computed result must have every expected row and finite scores: never store a NaN as a result."""
    from .errors import SourceError

    if not len(rows):
        raise SourceError(f"{model.name!r} has no attention layers to score (0 layers in its config or "
                          "metadata); nothing to survey.")
    bad = rows[~np.isfinite(rows[["symmetry", "directionality"]].to_numpy(dtype=float)).all(axis=1)]
    if len(bad):
        first = bad.iloc[0]
        raise SourceError(f"{model.name!r} gave a non-finite score in {first['component']} layer "
                          f"{first['layer']}; its weights hold NaN/Inf or overflow. Not stored.")


def _matches(stored: pd.DataFrame, key: dict[str, Any]) -> pd.Series:
    """Rows of ``stored`` whose :data:`CACHE_KEY` equals ``key``."""
    mask = pd.Series(True, index=stored.index)
    for col in CACHE_KEY:
        if col == "num_std":
            mask &= stored[col].astype(float) == float(key[col])
        else:
            mask &= stored[col].fillna("").astype(str) == str(key[col])
    return mask


def score_layers(model: QKModel, per: Per = "layer", num_std: float = 2.0, progress: bool = False, *,
                 label: str | None = None, leave: bool = False) -> pd.DataFrame:
    """Rows of :data:`COLUMNS` for every layer of an opened QKModel, read one layer at a time with
    :func:`score_layer`. This is the step :func:`score_model` and :func:`survey` share once a model is open.

    ``progress`` shows a bar over layers labelled ``label`` (default: the model's name), kept on screen with
    ``leave=True``. Arguments are not checked here (:func:`score_model` checks them).
    """
    from tqdm.auto import tqdm

    label = model.name if label is None else label
    rows = []
    layers = model.iter_layers(convert=False)  # score_layer converts to float64 itself, once
    for layer in tqdm(layers, total=len(model), desc=label, unit="layer", leave=leave, disable=not progress):
        dims = model.dims(layer.component)
        for row in score_layer(layer, per, num_std):
            rows.append({"model": model.name, "family": model.family, "component": layer.component, **row,
                         "d_model": dims.d_model, "head_dim": dims.head_dim, "n_heads": dims.n_heads,
                         "n_kv_heads": dims.n_kv_heads})
        del layer
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["head"] = frame["head"].astype("Int64")
    return frame
