"""Former home of the loader; kept so that ``from qkgeometry.loading import load_qk, QKModel`` keeps working.

The model lives in :mod:`qkgeometry.model`, the format readers and :func:`~qkgeometry.readers.load_qk` in
:mod:`qkgeometry.readers`, the errors in :mod:`qkgeometry.errors`.
"""

from __future__ import annotations

from .errors import SourceError
from .model import QKLayer, QKModel
from .readers import load_qk

__all__ = ["QKLayer", "QKModel", "SourceError", "load_qk"]
