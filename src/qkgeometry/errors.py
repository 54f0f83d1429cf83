"""The package's error for a model source that cannot be read. A leaf module, so that every reader (safetensors,
GGUF, CTranslate2, ONNX) can raise it without importing :mod:`qkgeometry.loading`."""
from __future__ import annotations

__all__ = ["SourceError"]


class SourceError(ValueError):
    """A model source could not be read (missing, truncated, unsupported or unreachable)."""
