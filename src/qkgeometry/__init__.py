"""qkgeometry: the symmetric / skew-symmetric structure of the query-key bilinear form W_qk = W_Q W_Kᵀ.

Conventions are stated once, on the book's Notation page; every public function's docstring names the chapter that
explains it.

>>> import qkgeometry as qg
>>> df = qg.score_model("offline:minilm-l6", per="layer")   # doctest: +SKIP

The names below are imported on first use, so that ``import qkgeometry`` (and ``qkgeometry --help``) does not pay
for torch and pandas until something needs them.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from ._version import __version__

#: public name -> submodule that defines it
_EXPORTS = {
    "Energies": "decomposition", "decompose": "decomposition", "energies": "decomposition", "FactoredQK": "model",
    "QKLayer": "model", "QKModel": "model", "SourceError": "errors", "load_qk": "readers",
    "LayerScores": "scores", "Scores": "scores", "directionality_score": "scores",
    "directionality_score_factored": "scores", "layer_scores": "scores", "scores_factored": "scores",
    "symmetry_score": "scores", "symmetry_score_factored": "scores",
    "recorded": "recorded_runs", "score_model": "surveying.scoring", "summarize": "surveying.scoring",
    "survey": "surveying.scoring", "trajectory": "surveying.trajectories",
}

__all__ = [
    "Energies",
    "FactoredQK",
    "LayerScores",
    "QKLayer",
    "QKModel",
    "Scores",
    "SourceError",
    "__version__",
    "decompose",
    "directionality_score",
    "directionality_score_factored",
    "energies",
    "layer_scores",
    "load_qk",
    "recorded",
    "score_model",
    "scores_factored",
    "summarize",
    "survey",
    "symmetry_score",
    "symmetry_score_factored",
    "trajectory",
]

if TYPE_CHECKING:  # pragma: no cover (static analysers and IDEs see the eager imports)
    from .decomposition import Energies, decompose, energies
    from .errors import SourceError
    from .model import FactoredQK, QKLayer, QKModel
    from .readers import load_qk
    from .recorded_runs import recorded
    from .scores import (
        LayerScores,
        Scores,
        directionality_score,
        directionality_score_factored,
        layer_scores,
        scores_factored,
        symmetry_score,
        symmetry_score_factored,
    )
    from .surveying.scoring import score_model, summarize, survey
    from .surveying.trajectories import trajectory


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f".{name}", __name__)  # a submodule, e.g. qkgeometry.catalogue
        raise AttributeError(f"module 'qkgeometry' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

