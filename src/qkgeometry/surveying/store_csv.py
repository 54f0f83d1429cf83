"""The survey store's CSV side: a ``.csv`` cache parsed (its damage repaired, not trusted) and written whole and
atomically. Chapter 4.

A :class:`~qkgeometry.surveying.store.SurveyStore` opened on a ``.csv`` path keeps its rows in memory and uses this
module to import the file (again whenever another survey changed it: ``_files.file_stamp``) and to export it after
every model (:func:`write_survey_csv`); ``qkgeometry export`` copies between the two kinds of file with
:func:`~qkgeometry.surveying.store.migrate_csv` and :func:`~qkgeometry.surveying.store.export_csv`. This module
knows nothing of the store itself.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .columns import (
    SURVEY_COLUMNS,
    TRAJECTORY_COLUMNS,
    csv_columns,
    empty_frame,
    spreadsheet_safe,
    spreadsheet_text,
    trajectory_dtypes,
)

__all__ = ["parse_survey_csv", "write_survey_csv"]


def parse_survey_csv(data: bytes, path: Path, trajectory: bool = False) -> pd.DataFrame:
    """The rows of a survey CSV (the bytes ``data`` of the file at ``path``) as
    :func:`~qkgeometry.surveying.store.read_store` returns them: a last line cut short and rows whose scores or key
    fields are missing or not finite are dropped; text that is not a survey CSV raises ``ValueError`` naming
    ``path``."""
    from ..errors import first_line

    if not data.strip():
        return empty_frame(trajectory)
    try:
        text = data.decode("utf-8")
        if not text.endswith("\n"):
            warnings.warn(f"survey file {str(path)!r} ends in a partial line (a write cut short?); ignoring it.",
                          stacklevel=4)
            text = text[: text.rfind("\n") + 1]
        # pandas 2's default parser can miss a float's last bit: ask it for round-trip parsing; pandas 3 parses
        # exactly by default and deprecates the option
        exact = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
        frame = pd.read_csv(io.StringIO(text), dtype={"revision": str, "qk_norm": str, "source": str,
                                                      "model": str, "input_norm": str}, keep_default_na=True, **exact)
    except UnicodeDecodeError as e:
        raise ValueError(f"survey file {str(path)!r} is not UTF-8 text (byte {e.start}: {e.reason}); it is not a "
                         "qkgeometry survey CSV. Pass another path (the file is left as it is).") from e
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise ValueError(f"survey file {str(path)!r} is not a readable CSV ({first_line(e)}); pass "
                         "another path (the file is left as it is).") from e
    spreadsheet_text(frame)  # cells written as '=... (formula-safe) read back as =...
    if "input_norm" not in frame.columns and len(frame.columns) > 1:  # written before the option: raw weights
        frame["input_norm"] = "raw"
    missing = sorted(set(SURVEY_COLUMNS) - set(frame.columns))
    if missing:
        raise ValueError(f"survey file {str(path)!r} is not a qkgeometry survey CSV (missing columns {missing}); "
                         "pass another path (the file is left as it is).")
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
    if not trajectory:
        return frame[SURVEY_COLUMNS]
    for col in TRAJECTORY_COLUMNS:
        if col not in frame.columns:
            frame[col] = None
    return trajectory_dtypes(frame[[*SURVEY_COLUMNS, *TRAJECTORY_COLUMNS]].copy())


def write_survey_csv(frame: pd.DataFrame, path: Path, what: str = "survey file") -> None:
    """Write ``frame`` (survey rows, with their trajectory columns) to ``path`` as the tidy, spreadsheet-safe CSV
    that :func:`parse_survey_csv` reads back, atomically."""
    from .._files import write_csv_atomic

    write_csv_atomic(spreadsheet_safe(csv_columns(frame)), path, what)
