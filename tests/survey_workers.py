"""Worker-process helpers for the survey executor tests: a pool initializer that makes one model's scoring hang
(after writing the worker's pid to a file), so that a test can kill exactly the worker that holds it."""

from __future__ import annotations

import os
import time
from pathlib import Path


def hang_on(name: str, marker_dir: str, others_s: float = 0.0) -> None:
    """Make ``score_layers`` hang on the model called ``name`` in this worker, after writing ``<pid>`` into
    ``marker_dir``; every other model takes ``others_s`` seconds longer (so that it is still running, or queued,
    when the test kills the hanging worker)."""
    import qkgeometry.surveying.scoring as s

    real = s.score_layers

    def maybe_hang(model, *args, **kwargs):
        if model.name == name:
            (Path(marker_dir) / str(os.getpid())).write_text(name)
            time.sleep(300)  # the test kills this process long before
        time.sleep(others_s)
        return real(model, *args, **kwargs)

    s.score_layers = maybe_hang


def hang_on_after(name: str, marker_dir: str, initializer=None, initargs: tuple = ()) -> None:
    """:func:`hang_on` after the pool's own ``initializer`` (so that a test pool keeps what the package sets up)."""
    if initializer is not None:
        initializer(*initargs)
    hang_on(name, marker_dir)


def slow_on(name: str, marker_dir: str, seconds: float) -> None:
    """Make ``score_layers`` take ``seconds`` longer on the model called ``name`` in this worker, after writing
    ``<pid>`` into ``marker_dir`` (so a test knows which worker is busy); other models run as usual."""
    import qkgeometry.surveying.scoring as s

    real = s.score_layers

    def maybe_slow(model, *args, **kwargs):
        if model.name == name:
            (Path(marker_dir) / str(os.getpid())).write_text(name)
            time.sleep(seconds)
        return real(model, *args, **kwargs)

    s.score_layers = maybe_slow


def exit_on(i: int) -> int:
    """A task that calls ``sys.exit(3)`` for 1 and returns ``i`` otherwise."""
    if i == 1:
        raise SystemExit(3)
    return i


def omp_wait_policy() -> str | None:
    """The worker's own OMP_WAIT_POLICY."""
    import os

    return os.environ.get("OMP_WAIT_POLICY")
