"""Score whole models into tidy pandas DataFrames.

One row per (model, component, layer, head) with the columns of :data:`COLUMNS`; ``head`` is ``<NA>`` on
layer-level rows (the layer matrix ``M_layer = Σ_h W_Q^h W_K^{g(h)ᵀ}``, DESIGN.md §1). Weights are streamed one
layer at a time and scored with the factored formulas, so no d × d matrix is ever formed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from .loading import QKLayer, QKModel, load_qk
from .scores import layer_scores

__all__ = ["CACHE_KEY", "COLUMNS", "SURVEY_COLUMNS", "score_layer", "score_model", "summarize", "survey"]

COLUMNS = ["model", "family", "component", "layer", "head", "symmetry", "directionality", "d_model", "head_dim",
           "n_heads", "n_kv_heads"]

Per = Literal["layer", "head"]


def score_layer(layer: QKLayer, per: Per = "layer", num_std: float = 2.0) -> list[dict[str, Any]]:
    """Scores of one layer: one dict for ``per="layer"``, one per query head for ``per="head"``.

    All heads in a few batched float64 products (:func:`qkgeometry.scores.layer_scores`), on the layer's device."""
    s = layer_scores(layer.wq, layer.wk_kv, num_std, heads=per == "head", layer=per == "layer")
    if per == "layer":
        return [{"layer": layer.index, "head": pd.NA, "symmetry": s.layer.symmetry,
                 "directionality": s.layer.directionality}]
    sym, dirn = np.atleast_1d(s.heads.symmetry), np.atleast_1d(s.heads.directionality)
    return [{"layer": layer.index, "head": h, "symmetry": float(sym[h]), "directionality": float(dirn[h])}
            for h in range(layer.n_heads)]


def score_model(source: Any, per: Per = "layer", num_std: float = 2.0, progress: bool = False, *,
                device: Any = None) -> pd.DataFrame:
    """Score every attention block of ``source`` (anything :func:`qkgeometry.load_qk` accepts, or a QKModel).

    Returns the tidy frame described in the module docstring. Chapter 2 ("Per head or per layer?") and
    chapter 4 use it. ``device`` (e.g. ``"cuda"``): where to compute, float64 everywhere (see :func:`load_qk`).
    """
    if per not in ("layer", "head"):
        raise ValueError(f"`per` must be 'layer' or 'head'; got {per!r}.")
    model = _open(source, "folded", device)
    rows = []
    layers: Iterable[QKLayer] = model.iter_layers(convert=False)  # score_layer converts to float64 itself
    if progress:
        from tqdm.auto import tqdm

        layers = tqdm(layers, total=len(model), desc=model.name, unit="layer")
    for layer in layers:
        dims = model.dims(layer.component)
        for row in score_layer(layer, per, num_std):
            rows.append({"model": model.name, "family": model.family, "component": layer.component, **row,
                         "d_model": dims.d_model, "head_dim": dims.head_dim, "n_heads": dims.n_heads,
                         "n_kv_heads": dims.n_kv_heads})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["head"] = frame["head"].astype("Int64")
    return frame


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and interquartile range of both scores per (model, family, component)."""
    def q(p: float):
        return lambda s: s.quantile(p)

    grouped = frame.groupby(["model", "family", "component"], sort=False)
    out = grouped.agg(n=("symmetry", "size"),
                      symmetry_median=("symmetry", "median"), symmetry_q25=("symmetry", q(0.25)),
                      symmetry_q75=("symmetry", q(0.75)),
                      directionality_median=("directionality", "median"),
                      directionality_q25=("directionality", q(0.25)), directionality_q75=("directionality", q(0.75)))
    return out.reset_index()


# ------------------------------------------------------------------------------------------------ survey
#: Extra columns of a survey frame (after :data:`COLUMNS`): provenance of every row, and the cache key.
SURVEY_COLUMNS = COLUMNS + ["init", "modality", "source", "revision", "qkgeometry_version", "per", "num_std",
                            "qk_norm"]
#: A cached model is reused only when all of these match.
CACHE_KEY = ["source", "revision", "qkgeometry_version", "per", "num_std", "qk_norm"]


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("qkgeometry")
    except PackageNotFoundError:  # pragma: no cover (running from a source tree without install)
        from . import __version__

        return __version__


def _open(source: Any, qk_norm: str, device: Any = None) -> QKModel:
    """``load_qk`` plus ``random:<source>``, the random-init twin of ``source`` (:func:`qkgeometry.zoo.random_twin`)."""
    from .scores import resolve_device
    from .zoo import RANDOM_PREFIX, random_twin

    if isinstance(source, QKModel):
        if device is not None:
            source.device = resolve_device(device)
        return source
    if isinstance(source, str) and source.startswith(RANDOM_PREFIX):
        model = random_twin(load_qk(source[len(RANDOM_PREFIX):], qk_norm=qk_norm))
        model.device = resolve_device(device)
        return model
    return load_qk(source, qk_norm=qk_norm, device=device)


def _read_cache(cache: Path | None) -> pd.DataFrame:
    if cache is None or not cache.is_file():
        return pd.DataFrame(columns=SURVEY_COLUMNS)
    frame = pd.read_csv(cache, dtype={"revision": str, "qk_norm": str, "source": str})
    missing = sorted(set(SURVEY_COLUMNS) - set(frame.columns))
    if missing:
        raise ValueError(f"`cache` file {str(cache)!r} is not a qkgeometry survey cache (missing columns {missing}); "
                         "pass a new path or delete the file.")
    frame["head"] = frame["head"].astype("Int64")
    frame["qk_norm"] = frame["qk_norm"].fillna("")
    return frame[SURVEY_COLUMNS]


def _write_atomic(frame: pd.DataFrame, cache: Path) -> None:
    """Write ``frame`` to ``cache`` through a temporary file and ``os.replace``: a killed run leaves either the old
    file or the new one, never half of one."""
    import os

    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
    try:
        frame.to_csv(tmp, index=False)
        os.replace(tmp, cache)
    finally:
        tmp.unlink(missing_ok=True)


def survey(sources: Iterable[Any], per: Per = "layer", cache: str | Path | None = None, *, num_std: float = 2.0,
           qk_norm: str = "folded", progress: bool = True, device: Any = None) -> pd.DataFrame:
    """Score many models, one layer at a time, with a resumable on-disk cache. Chapter 4 uses it.

    ``sources``: anything :func:`qkgeometry.load_qk` accepts, ``"random:<source>"`` for the random-init twin of a
    source, or :class:`qkgeometry.zoo.PresetEntry` items (``qkgeometry.zoo.preset("offline")``), whose ``name``
    labels the rows.

    Streaming: each model is opened lazily and scored layer by layer with the factored formulas (memory ~ one
    layer's Q/K weights; see ``benchmarks/bench_survey_memory.py``).

    Cache (``cache=path.csv``): after each model finishes, its rows are added to the CSV through a temporary file and
    an atomic rename, so killing the run loses at most the model in progress. A model is reused, not recomputed, when
    a cached model has the same ``source``, ``revision`` (content fingerprint of local files, Hub commit),
    ``qkgeometry_version``, ``per``, ``num_std`` and ``qk_norm`` (:data:`CACHE_KEY`). Rows of other keys stay in the
    file untouched.

    ``device`` (e.g. ``"cuda"``): where to compute, float64 everywhere; it does not change the numbers beyond
    round-off and is not part of the cache key.

    Failures: a model that cannot be opened or read is reported (a warning and a line on the progress bar) and
    skipped; the run goes on. Failures are not cached, so the next run retries them.

    Returns the tidy frame of every requested model that succeeded, with the columns of :data:`SURVEY_COLUMNS`
    (:data:`COLUMNS` first), in the order of ``sources``, plus two tables in ``frame.attrs``:

    * ``frame.attrs["failures"]``: DataFrame with columns ``source, name, error, message``, one row per failed model;
    * ``frame.attrs["computed"]``: names of the models computed in this call (the others came from the cache).
    """
    import warnings

    from tqdm.auto import tqdm

    from .zoo import PresetEntry

    if per not in ("layer", "head"):
        raise ValueError(f"`per` must be 'layer' or 'head'; got {per!r}.")
    if isinstance(sources, (str, QKModel)) or not isinstance(sources, Iterable):
        raise TypeError("`sources` must be a list of sources (e.g. ['offline:minilm-l6']) or "
                        "qkgeometry.zoo.preset(...); got a single " + type(sources).__name__ + ".")
    cache_path = None if cache is None else Path(cache)
    if cache_path is not None and cache_path.suffix != ".csv":
        raise ValueError(f"`cache` must be a .csv path; got {str(cache_path)!r}.")
    if device is not None:
        from .scores import resolve_device

        resolve_device(device)  # a clear error now, not one skipped model after another
    version = _package_version()
    stored = _read_cache(cache_path)
    entries = list(sources)
    parts: list[pd.DataFrame] = []
    failures: list[dict[str, str]] = []
    computed: list[str] = []
    bar = tqdm(entries, desc="models", unit="model", disable=not progress)
    for entry in bar:
        meta = entry if isinstance(entry, PresetEntry) else None
        source = meta.source if meta else entry
        label = meta.name if meta else (source.name if isinstance(source, QKModel) else str(source))
        bar.set_postfix_str(label)
        try:
            model = _open(source, qk_norm, device)
            key = {"source": model.source if isinstance(source, QKModel) else str(source),
                   "revision": str(model.revision), "qkgeometry_version": version, "per": per,
                   "num_std": float(num_std), "qk_norm": model.qk_norm or ""}
            hit = stored.loc[_matches(stored, key)]
            if len(hit):
                parts.append(hit.reset_index(drop=True))
                model.close()
                continue
            with model:
                rows = _score_streaming(model, per, num_std, progress, label)
            frame = rows.assign(model=meta.name if meta else model.name,
                                init=meta.init if meta else ("random" if str(source).startswith("random:")
                                                             else "pretrained"),
                                modality=meta.modality if meta else "language", **key)[SURVEY_COLUMNS]
        except Exception as e:  # one bad model must not end a long survey: report, skip, go on
            failures.append({"source": str(source), "name": label, "error": type(e).__name__,
                             "message": str(e).splitlines()[0] if str(e) else ""})
            warnings.warn(f"survey: skipped {label!r}: {type(e).__name__}: {e}", stacklevel=2)
            bar.write(f"failed: {label}: {type(e).__name__}: {e}")
            continue
        parts.append(frame)
        computed.append(str(frame["model"].iloc[0]))
        if cache_path is not None:
            stored = pd.concat([stored, frame], ignore_index=True) if len(stored) else frame
            _write_atomic(stored, cache_path)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=SURVEY_COLUMNS)
    out["head"] = out["head"].astype("Int64")
    out.attrs["failures"] = pd.DataFrame(failures, columns=["source", "name", "error", "message"])
    out.attrs["computed"] = computed
    return out


def _score_layer_lean(layer: QKLayer, per: Per, num_std: float, heads_per_chunk: int = 8) -> list[dict[str, Any]]:
    """:func:`score_layer` with bounded memory: per head, the heads are scored ``heads_per_chunk`` at a time and the
    KV heads are indexed per chunk instead of expanded for the whole layer, so the float64 temporaries of the
    factored formulas stay at a few (heads_per_chunk, d_model, head_dim) arrays. Same numbers as score_layer."""
    return score_layer(layer, per, num_std)  # the batched kernel never expands K; its temporaries are ~ 2 layers


def _matches(stored: pd.DataFrame, key: dict[str, Any]) -> pd.Series:
    """Rows of ``stored`` whose :data:`CACHE_KEY` equals ``key``."""
    mask = pd.Series(True, index=stored.index)
    for col in CACHE_KEY:
        if col == "num_std":
            mask &= stored[col].astype(float) == float(key[col])
        else:
            mask &= stored[col].fillna("").astype(str) == str(key[col])
    return mask


def _score_streaming(model: QKModel, per: Per, num_std: float, progress: bool, label: str) -> pd.DataFrame:
    """Rows of :data:`COLUMNS` for one model, reading one layer at a time (a tqdm bar over layers)."""
    from tqdm.auto import tqdm

    rows = []
    for layer in tqdm(model.iter_layers(convert=False), total=len(model), desc=label, unit="layer", leave=False,
                      disable=not progress):
        dims = model.dims(layer.component)
        for row in _score_layer_lean(layer, per, num_std):
            rows.append({"model": model.name, "family": model.family, "component": layer.component, **row,
                         "d_model": dims.d_model, "head_dim": dims.head_dim, "n_heads": dims.n_heads,
                         "n_kv_heads": dims.n_kv_heads})
        del layer
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["head"] = frame["head"].astype("Int64")
    return frame
