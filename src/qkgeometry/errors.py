"""Every error the package raises on purpose, in one family. A leaf module: every reader raises from here without
importing any other part of the package.

* :class:`SourceError` — a source is missing, truncated, unsupported or unreachable (a ``ValueError``);
* its subclasses :class:`ConfigError` (a config with unusable sizes), :class:`PartError` (an offline model's
  package missing or corrupt) and the format errors :class:`GGUFFormatError`, :class:`CTranslate2FormatError` and
  :class:`ONNXGraphError`, so that a caller can tell which reader refused a file, and every caller that catches
  ``SourceError`` catches them;
* :class:`LimitExceeded` — a declared size over the bounds of :mod:`qkgeometry.limits` (readers turn it into their
  format error);
* :class:`NonFiniteWeights` — NaN or Inf in a weight that is being scored;
* :class:`ZeroWeights` — an all-zero W_qk, whose scores are undefined;
* :class:`OutputError` — an output path that cannot be written;
* :class:`RecordError` — a recorded experiment's or a training run's file that is damaged;
* :class:`SurveyInterrupted` — Ctrl-C during a survey, carrying what was saved.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["CTranslate2FormatError", "ConfigError", "GGUFFormatError", "LimitExceeded", "NonFiniteWeights",
           "ONNXGraphError", "OutputError", "PartError", "RecordError", "SourceError", "SurveyInterrupted",
           "ZeroWeights", "first_line"]


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


class PartError(SourceError):
    """An offline model's package is missing, or one of its files is missing, not a regular file, truncated or
    corrupt. The message names the package to (re)install. Not a ``FileNotFoundError``: a declared offline part
    that is absent or damaged is an error to fix, never a reason to skip quietly."""


class LimitExceeded(ValueError):
    """A declared size is over one of the bounds of :mod:`qkgeometry.limits` (readers turn it into their own
    format error)."""


class NonFiniteWeights(ValueError):
    """NaN or Inf in a Gram diagonal: a non-finite weight, or (before rescaling) a finite one too large to square."""


class ZeroWeights(ValueError):
    """An all-zero W_qk (‖M‖_F = 0): a head or a layer matrix whose scores are undefined (missing weights, or a
    query or key projection initialised to zero)."""


class OutputError(ValueError):
    """An output path cannot be written (a folder, under a file, read-only, full disk, size limit...)."""


class RecordError(ValueError):
    """A file of a recorded experiment or of a training run (``provenance.json``, ``state.json``, ``log.csv``,
    ``scores.csv``...) that cannot be used: not JSON, not an object, missing a field, an empty or unreadable table.
    The message names the file and what it lacks."""


class SurveyInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`qkgeometry.survey`: ``saved`` lists the models written to the cache by this call (the models in
    progress are not saved); ``cache`` is the file."""

    def __init__(self, saved: list[str], cache: Path | None):
        super().__init__(f"interrupted after saving {len(saved)} model(s)")
        self.saved, self.cache = saved, cache


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
