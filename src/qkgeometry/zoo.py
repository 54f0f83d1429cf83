"""The former home of the catalogue, kept so that ``from qkgeometry import zoo`` keeps working: every name lives in
:mod:`qkgeometry.catalogue` (offline models, presets, the paper's data) and is re-exported here."""

from .catalogue import *  # noqa: F403
from .catalogue import __all__  # noqa: F401
