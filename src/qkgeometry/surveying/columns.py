"""The columns a survey store holds, and the checks and conversions of its rows. Chapter 4.

:data:`COLUMNS` is a score frame's; :data:`SURVEY_COLUMNS` adds each row's provenance and cache key;
:data:`TRAJECTORY_COLUMNS` say where a checkpoint sits in its training run (chapter 3). The store
(:mod:`qkgeometry.surveying.store`) keeps them; CSV files carry them formula-safe (:func:`spreadsheet_safe`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["CACHE_KEY", "COLUMNS", "FINGERPRINT", "FORMULA_STARTS", "IDENTITY", "INTEGER_TRAJECTORY_COLUMNS",
           "SURVEY_COLUMNS", "TRAJECTORY_COLUMNS", "check_rows", "csv_columns", "empty_frame", "spreadsheet_safe",
           "spreadsheet_text", "trajectory_dtypes", "trajectory_of_sources", "trajectory_values"]

#: Columns of a score frame, one row per (model, component, layer, head); ``head`` is ``<NA>`` on layer rows.
COLUMNS = ["model", "family", "component", "layer", "head", "symmetry", "directionality", "d_model", "head_dim",
           "n_heads", "n_kv_heads"]
#: Extra columns of a survey frame (after :data:`COLUMNS`): provenance of every row, and the cache key.
SURVEY_COLUMNS = [*COLUMNS, "init", "modality", "source", "revision", "qkgeometry_version", "per", "num_std",
                  "qk_norm", "input_norm"]
#: A cached model is reused only when all of these match.
CACHE_KEY = ["source", "revision", "qkgeometry_version", "per", "num_std", "qk_norm", "input_norm"]
#: what makes two rows the same model's: a model is stored once per identity, whatever its fingerprint
IDENTITY = ["source", "per", "num_std", "qk_norm", "input_norm"]
#: what changes when a model's content or the scoring code changes; a new fingerprint replaces the old rows
FINGERPRINT = ["revision", "qkgeometry_version"]
#: Where a checkpoint sits in its training run, stored once per model (NULL for a model that is no checkpoint):
#: ``run`` (the run's full identity: the resolved folder that holds the checkpoints, the Hub repo id, or the name a
#: training callback was given), ``checkpoint`` (its name in the run), ``stage`` (the training stage, for suites
#: whose step count restarts at each stage), ``step`` (the training step) and ``tokens`` (tokens seen).
TRAJECTORY_COLUMNS = ["run", "checkpoint", "stage", "step", "tokens"]
INTEGER_TRAJECTORY_COLUMNS = ("stage", "step", "tokens")


def _shown(value: Any) -> str:
    """A cell's value as an error message quotes it: ``nan``, ``-2``, not ``np.float64(nan)``."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def check_rows(frame: pd.DataFrame) -> None:
    """Refuse a frame that the store cannot hold as it is: a missing column, a score that is not a finite number,
    a missing model, component, layer or key field (SQLite would refuse it mid-transaction with its own words)."""
    missing = [c for c in SURVEY_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"`frame` lacks the column(s) {missing}; pass a frame of qkgeometry.survey (the columns "
                         "of SURVEY_COLUMNS).")
    for col in ("symmetry", "directionality", "num_std"):
        values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            row = frame.iloc[bad[0]]
            raise ValueError(f"`frame`: {col} = {_shown(row[col])} in row {bad[0]} (model {row['model']!r}, layer "
                             f"{_shown(row['layer'])}) is not a finite number; a survey store holds finite scores only. "
                             "Rescore the model, or drop its rows.")
    for col in ("model", "component", "layer", "source", "per", "input_norm", "revision", "qkgeometry_version",
                "d_model", "head_dim", "n_heads", "n_kv_heads"):
        if frame[col].isna().any():
            i = int(np.flatnonzero(frame[col].isna().to_numpy())[0])
            raise ValueError(f"`frame`: {col} is missing in row {i} (model {frame.iloc[i]['model']!r}); a survey "
                             "store needs it on every row.")
    for col in ("layer", "d_model", "head_dim", "n_heads", "n_kv_heads"):
        values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)) | (values < 0))
        if bad.size:
            row = frame.iloc[bad[0]]
            raise ValueError(f"`frame`: {col} = {_shown(row[col])} in row {bad[0]} (model {row['model']!r}) is not a whole "
                             "number >= 0; pass the sizes the model was scored with.")
    for col in TRAJECTORY_COLUMNS:
        if col not in frame.columns:
            continue
        for _, part in frame.groupby(IDENTITY, sort=False, dropna=False):
            held = part[col].dropna().astype(str).unique()
            if len(held) > 1 or (len(held) == 1 and part[col].isna().any()):
                raise ValueError(f"`frame`: the rows of {str(part['source'].iloc[0])!r} hold {col} = "
                                 f"{', '.join(held)}{' and missing' if part[col].isna().any() else ''}; a model sits "
                                 "at one place of its run: give all its rows one value.")
            if col in INTEGER_TRAJECTORY_COLUMNS and len(held):
                value = pd.to_numeric(pd.Series([part[col].dropna().iloc[0]]), errors="coerce").iloc[0]
                if not (np.isfinite(value) and value == round(value) and value >= 0):
                    raise ValueError(f"`frame`: {col} = {_shown(part[col].dropna().iloc[0])} for "
                                     f"{str(part['source'].iloc[0])!r} is not a whole number >= 0.")


def trajectory_values(columns: dict[str, Any]) -> tuple:
    """The :data:`TRAJECTORY_COLUMNS` of one model as SQLite values (None where missing)."""
    out = []
    for col in TRAJECTORY_COLUMNS:
        v = columns.get(col)
        if v is None or v is pd.NA or (isinstance(v, float) and v != v):
            out.append(None)
        elif col in INTEGER_TRAJECTORY_COLUMNS:
            out.append(int(v))
        else:
            out.append(str(v))
    return tuple(out)


def trajectory_dtypes(frame: pd.DataFrame) -> pd.DataFrame:
    """The :data:`TRAJECTORY_COLUMNS` of ``frame`` (those present) as text and nullable integers (in place)."""
    for col in TRAJECTORY_COLUMNS:
        if col not in frame.columns:
            continue
        if col in INTEGER_TRAJECTORY_COLUMNS:
            frame[col] = pd.array(pd.to_numeric(frame[col], errors="coerce"), dtype="Int64")
        else:
            frame[col] = frame[col].astype(object).where(frame[col].notna(), None)
    return frame


def trajectory_of_sources(sources: Any) -> dict[str, dict[str, Any]]:
    """What a version-1 store knew of each source's place in a run: its checkpoint name (read once, when the store
    is migrated; version 2 stores it as written)."""
    from .checkpoints import checkpoint_of

    out = {}
    for source in sources:
        found = checkpoint_of(str(source), resolve=False)
        named = found.step is not None
        out[str(source)] = {"run": found.run if named else None, "checkpoint": found.name if named else None,
                            "stage": found.stage if named else None, "step": found.step,
                            "tokens": found.tokens if named else None}
    return out


def csv_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """What a CSV store writes: :data:`SURVEY_COLUMNS`, plus :data:`TRAJECTORY_COLUMNS` when any model has them."""
    if all(c in frame.columns for c in TRAJECTORY_COLUMNS) and frame[TRAJECTORY_COLUMNS].notna().any(axis=None):
        return frame[[*SURVEY_COLUMNS, *TRAJECTORY_COLUMNS]]
    return frame[SURVEY_COLUMNS]


#: a text cell that starts with one of these is run as a formula by spreadsheet programs (Excel, LibreOffice,
#: Google Sheets): a model folder named ``=cmd|' -C calc'!A0`` would be one
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells are safe to open in a spreadsheet: a cell that starts with ``=``,
    ``+``, ``-``, ``@``, a tab or a carriage return, or with an apostrophe, gets one leading apostrophe (``'``), the
    mark spreadsheet programs read as "this cell is text" (and do not show). Numbers are left as they are (−0.5
    stays a number). :func:`spreadsheet_text` undoes it exactly, and :func:`qkgeometry.surveying.store.read_store` undoes it on
    what it reads."""
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


def empty_frame(trajectory: bool = False) -> pd.DataFrame:
    """A survey frame with no rows: the columns of :data:`SURVEY_COLUMNS` (and of :data:`TRAJECTORY_COLUMNS` with
    ``trajectory=True``), ``head`` as ``Int64``."""
    frame = pd.DataFrame(columns=[*SURVEY_COLUMNS, *TRAJECTORY_COLUMNS] if trajectory else SURVEY_COLUMNS)
    frame["head"] = frame["head"].astype("Int64")
    return trajectory_dtypes(frame)
