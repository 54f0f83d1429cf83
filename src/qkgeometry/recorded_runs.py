"""Recorded experiments that ship with the package: the training logs that chapters 3 and 5 read.

Each recorded experiment is one folder of package data, ``qkgeometry/data/recorded/<name>/``, with a ``README.md``
that says what ran and the command that reproduces it. Its runs are found by folder: every sub-folder that holds a
``log.csv`` is one run (chapter 5's experiment B: ``encoder-default-s0``, ``encoder-skew-s3``, ...), so a run added
to the folder is read without any change here. An experiment without run folders (chapter 3's fair test) keeps its
tables and ``provenance.json`` at the top.

>>> import qkgeometry as qg
>>> rec = qg.recorded("expB-encoder-lr2e-4-10k")
>>> "encoder-default-s0" in rec.runs
True
>>> rec.provenance("encoder-default-s0")["config"]["init"]
'default'

The chapters read them with :func:`recorded` and never re-run them: each experiment's notes give the command (about an
hour of one CPU core per chapter-5 run, 43 minutes for chapter 3's fair test).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["RecordedExperiment", "available", "read_record_csv", "read_record_json", "recorded", "recorded_root"]

#: what to do about a damaged record: the files come with the package or from a training run
_FIX = ("reinstall qkgeometry with its package data, or record the run again (the experiment's notes give the "
        "command)")


def read_record_json(path: str | os.PathLike, needs: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object in ``path`` (a ``provenance.json`` or ``state.json``), which must hold the keys ``needs``.
    A missing, unreadable, non-JSON or incomplete file raises :class:`~qkgeometry.errors.RecordError` naming it."""
    from .errors import RecordError

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{str(path)!r} is missing; {_FIX}.") from None
    except OSError as e:
        raise RecordError(f"cannot read {str(path)!r}: {e.strerror or e}; check its permissions.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"{str(path)!r} is damaged (not JSON text: {e}); {_FIX}.") from None
    if not isinstance(data, dict):
        raise RecordError(f"{str(path)!r} is damaged (a JSON {type(data).__name__}, not an object); {_FIX}.")
    missing = [k for k in needs if k not in data]
    if missing:
        raise RecordError(f"{str(path)!r} is damaged (it lacks {', '.join(repr(k) for k in missing)}); {_FIX}.")
    return data


def read_record_csv(path: str | os.PathLike, rows: bool = True) -> pd.DataFrame:
    """The table in ``path`` (a ``log.csv`` or ``scores.csv``). A missing, empty or unreadable file raises
    :class:`~qkgeometry.errors.RecordError` naming it, and so does a header without rows unless ``rows`` is False
    (the log of a run that has not logged a step yet)."""
    import pandas as pd

    from .errors import RecordError, first_line

    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise RecordError(f"{str(path)!r} is missing; {_FIX}.") from None
    except pd.errors.EmptyDataError:
        raise RecordError(f"{str(path)!r} is empty; {_FIX}.") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise RecordError(f"{str(path)!r} is damaged (not a readable CSV table: {first_line(e)}); {_FIX}.") from None
    except OSError as e:
        raise RecordError(f"cannot read {str(path)!r}: {e.strerror or e}; check its permissions.") from None
    if not len(frame.columns) or (rows and not len(frame)):
        raise RecordError(f"{str(path)!r} holds no rows; {_FIX}.")
    return frame


def recorded_root() -> Path:
    """The folder of the recorded experiments inside the installed package (it may be absent in a copy of the
    package installed without its data files)."""
    return Path(str(resources.files("qkgeometry") / "data" / "recorded"))


def available() -> tuple[str, ...]:
    """Names of the recorded experiments that this installed copy of qkgeometry holds, sorted."""
    root = recorded_root()
    if not root.is_dir():
        return ()
    return tuple(sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "README.md").is_file()))


@dataclass(frozen=True)
class RecordedExperiment:
    """One recorded experiment: its folder and the runs in it. It is path-like (``open``, ``Path(rec)`` and
    ``rec / "scores.csv"`` all work), so readers that take a folder take it too."""

    name: str
    path: Path

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __truediv__(self, other: str) -> Path:
        return self.path / other

    @property
    def description(self) -> str:
        """The experiment's notes, in Markdown: what ran, on what, and the command that reproduces it."""
        return (self.path / "README.md").read_text(encoding="utf-8")

    @property
    def runs(self) -> dict[str, Path]:
        """Run name -> folder, for every sub-folder holding a ``log.csv``, sorted by name (empty for an experiment
        that keeps its tables at the top)."""
        return {p.parent.name: p.parent for p in sorted(self.path.glob("*/log.csv")) if p.is_file()}

    def provenance(self, run: str | None = None) -> dict[str, Any]:
        """The ``provenance.json`` of ``run`` (config, commit, versions, hardware, steps done), or of the experiment
        itself when ``run`` is None."""
        if run is None:
            folder = self.path
        elif run in self.runs:
            folder = self.runs[run]
        else:
            raise ValueError(f"run: {self.name!r} has no run {run!r}; its runs are: {', '.join(self.runs) or 'none'}.")
        return read_record_json(folder / "provenance.json")

    def logs(self, inits: tuple[str, ...] | list[str] | None = None) -> pd.DataFrame:
        """Every run's ``log.csv`` in one frame, with ``experiment`` and ``run`` columns added; ``inits`` keeps only
        the runs whose configured init is one of them (e.g. ``("default", "symmetric")``)."""
        import pandas as pd

        frames = []
        for run, folder in self.runs.items():
            if inits is not None and _configured_init(folder) not in inits:
                continue
            frames.append(read_record_csv(folder / "log.csv").assign(experiment=self.name, run=run))
        if not frames:
            raise ValueError(f"{self.name!r} has no runs" + (f" with init in {list(inits)}." if inits else "."))
        return pd.concat(frames, ignore_index=True)


def _configured_init(folder: Path) -> Any:
    """The ``config.init`` of a run's provenance (a damaged file raises RecordError naming it)."""
    from .errors import RecordError

    config = read_record_json(folder / "provenance.json", needs=("config",))["config"]
    if not isinstance(config, dict) or "init" not in config:
        raise RecordError(f"{str(folder / 'provenance.json')!r} is damaged (its 'config' lacks 'init'); {_FIX}.")
    return config["init"]


def recorded(name: str) -> RecordedExperiment:
    """The recorded experiment ``name`` (e.g. ``"ch3-objectives"``, ``"expB-encoder-lr2e-4-10k"``), read from the
    installed package: no checkout and no network needed. Chapters 3 and 5.

    Raises FileNotFoundError, in one line naming what this copy holds, when there is no such experiment.
    """
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"name: expected the name of a recorded experiment (one of {', '.join(available())}); "
                         f"got {name!r}.")
    folder = recorded_root() / name
    if not (folder / "README.md").is_file():
        have = available()
        raise FileNotFoundError(
            f"recorded experiment {name!r} is not in this copy of qkgeometry (it holds: "
            f"{', '.join(have) if have else 'no recorded experiments'}); reinstall qkgeometry with its package data.")
    return RecordedExperiment(name, folder)
