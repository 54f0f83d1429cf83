"""qkgeometry: the symmetric / skew-symmetric structure of the query-key bilinear form W_qk = W_Q W_Kᵀ.

Conventions are stated once, on the book's Notation page; every public function's docstring
names the chapter that explains it.

>>> import qkgeometry as qg
>>> df = qg.score_model("offline:minilm-l6", per="layer")   # doctest: +SKIP
"""

from ._version import __version__
from .decomposition import Energies, decompose, energies
from .loading import QKLayer, QKModel, SourceError, load_qk
from .scores import (
    Scores,
    directionality_score,
    directionality_score_factored,
    scores_factored,
    symmetry_score,
    symmetry_score_factored,
)
from .survey import score_model, summarize, survey

__all__ = [
    "Energies",
    "QKLayer",
    "QKModel",
    "Scores",
    "SourceError",
    "__version__",
    "decompose",
    "directionality_score",
    "directionality_score_factored",
    "energies",
    "load_qk",
    "score_model",
    "scores_factored",
    "summarize",
    "survey",
    "symmetry_score",
    "symmetry_score_factored",
]
