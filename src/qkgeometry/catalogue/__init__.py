"""The catalogue: every named model, corpus and data set the book uses.

* :mod:`~qkgeometry.catalogue.offline`: the offline models (one table, :data:`OFFLINE_MODELS`), the routine that
  makes and verifies their files, :func:`cache_dir`, :func:`model_source` and the Wikipedia corpus;
* :mod:`~qkgeometry.catalogue.presets`: the survey presets (:data:`PRESETS`, :func:`preset`);
* :mod:`~qkgeometry.catalogue.paper`: the paper's tables and per-layer scores (its files in ``data/``).
"""

from .offline import (
    NOT_SURVEYED,
    OFFLINE_MODELS,
    OFFLINE_PACKAGES,
    WIKIPEDIA_PACKAGE,
    OfflineModel,
    Part,
    PartError,
    assemble_parts,
    cache_dir,
    extract_zip,
    model_source,
    offline_path,
    on_colab,
    part_paths,
    wikipedia_articles,
)
from .paper import (
    LAYOUT_LIKE,
    PAPER_ALIASES,
    PAPER_FILE_STACKS,
    PAPER_GQA,
    PAPER_LINEAGES,
    PAPER_MODEL_TYPES,
    PAPER_RANDOM_WEIGHTS,
    fused_qkv_layout,
    paper_init_runs,
    paper_lineage,
    paper_model_type,
    paper_models,
    paper_per_layer,
    paper_scores,
)
from .presets import PRESETS, RANDOM_PREFIX, PresetEntry, preset

__all__ = [
    "LAYOUT_LIKE",
    "NOT_SURVEYED",
    "OFFLINE_MODELS",
    "OFFLINE_PACKAGES",
    "PAPER_ALIASES",
    "PAPER_FILE_STACKS",
    "PAPER_GQA",
    "PAPER_LINEAGES",
    "PAPER_MODEL_TYPES",
    "PAPER_RANDOM_WEIGHTS",
    "PRESETS",
    "RANDOM_PREFIX",
    "WIKIPEDIA_PACKAGE",
    "OfflineModel",
    "Part",
    "PartError",
    "PresetEntry",
    "assemble_parts",
    "cache_dir",
    "extract_zip",
    "fused_qkv_layout",
    "model_source",
    "offline_path",
    "on_colab",
    "paper_init_runs",
    "paper_lineage",
    "paper_model_type",
    "paper_models",
    "paper_per_layer",
    "paper_scores",
    "part_paths",
    "preset",
    "wikipedia_articles",
]
