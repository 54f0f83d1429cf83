"""Surveys: score many models into one tidy frame and keep the rows in one store (chapters 2 and 4).

* :mod:`~qkgeometry.surveying.scoring` — :func:`score_model`, :func:`survey`, :func:`summarize` and the worker pool;
* :mod:`~qkgeometry.surveying.identity` — what makes rows one model's (resolved sources, distinct labels), one view;
* :mod:`~qkgeometry.surveying.forms` — the raw and the γ-folded forms of the same models side by side;
* :mod:`~qkgeometry.surveying.workers` — models scored on worker processes (a dead worker fails its model only);
* :mod:`~qkgeometry.surveying.store` — the survey store (SQLite, or a tidy CSV); its layout on disk in
  :mod:`~qkgeometry.surveying.store_format`, its CSV side (parsing, import and export) in
  :mod:`~qkgeometry.surveying.store_csv`.
* :mod:`~qkgeometry.surveying.trajectories` and :mod:`~qkgeometry.surveying.runs` — scores across training, and
  what a training run is.

The package is called ``surveying`` (the act), so that ``qkgeometry.survey`` stays the function.
"""

from __future__ import annotations

from ..errors import SurveyInterrupted
from .forms import input_norm_comparison
from .scoring import open_source, score_layer, score_layers, score_model, summarize, survey
from .store import (
    CACHE_KEY,
    COLUMNS,
    SURVEY_COLUMNS,
    SurveyStore,
    export_csv,
    is_store_file,
    migrate_csv,
    open_store,
    read_store,
    spreadsheet_safe,
    spreadsheet_text,
)
from .workers import worker_pool

__all__ = [
    "CACHE_KEY", "COLUMNS", "SURVEY_COLUMNS", "SurveyInterrupted", "SurveyStore", "export_csv", "input_norm_comparison",
    "is_store_file", "migrate_csv", "open_source", "open_store", "read_store", "score_layer", "score_layers",
    "score_model", "spreadsheet_safe", "spreadsheet_text", "summarize", "survey", "worker_pool",
]
