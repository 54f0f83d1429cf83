"""The package's one error family for model sources that cannot be read. A leaf module: every reader raises from
here without importing any other part of the package.

* :class:`SourceError` — a source is missing, truncated, unsupported or unreachable (a ``ValueError``);
* its format subclasses :class:`GGUFFormatError`, :class:`CTranslate2FormatError` and :class:`ONNXGraphError`, so
  that a caller can tell which reader refused a file, and every caller that catches ``SourceError`` catches them.
"""
from __future__ import annotations

__all__ = ["CTranslate2FormatError", "ConfigError", "GGUFFormatError", "ONNXGraphError", "SourceError", "first_line"]


class SourceError(ValueError):
    """A model source could not be read (missing, truncated, unsupported or unreachable)."""


class ConfigError(SourceError):
    """A model's config gives sizes that cannot be used (missing, not positive, heads that do not group). Its
    message starts with the config it names, so that a reader can prefix the file it came from."""


class GGUFFormatError(SourceError):
    """The file is not a readable GGUF file (bad magic, unsupported version, truncated header or data)."""


class CTranslate2FormatError(SourceError):
    """The file is not a readable CTranslate2 model (bad header, unsupported version, truncated table or data)."""


class ONNXGraphError(SourceError):
    """An ONNX graph whose attention cannot be read from its structure."""


def first_line(error: BaseException) -> str:
    """The first non-empty line of ``error``'s message, or its type name when the message is empty (so that a
    one-line report never hides an error behind an ``IndexError`` of its own).

    >>> first_line(ValueError("bad header\\nline 2")), first_line(RuntimeError())
    ('bad header', 'RuntimeError')
    """
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__
