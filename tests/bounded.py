"""Shared assertions for adversarial tests: a time bound on anything that could hang, and the CLI's one-line error
contract (exit status, one line on stderr naming the file or field, no traceback)."""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager


@contextmanager
def no_hang(seconds: int = 30):
    """Raise TimeoutError inside the block when it runs longer than ``seconds`` (SIGALRM; main thread only)."""
    def boom(*_):
        raise TimeoutError(f"hung for {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def import_distributed():
    """``dask.distributed``, or skip the test where it is not installed; where ``QKG_REQUIRE_DASK`` is set (the
    floors and Colab-versions runs install the ``cluster`` extra), a missing one fails the test instead of
    skipping it silently."""
    import pytest

    if os.environ.get("QKG_REQUIRE_DASK"):
        import distributed

        return distributed
    return pytest.importorskip("distributed")


def one_line_error(capsys, rc: int, *needles: str, status: int = 2) -> str:
    """Assert the CLI's error contract on captured stderr and return the line."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == status, err
    assert len(lines) == 1, f"expected one line on stderr, got {err!r}"
    assert "Traceback" not in err and "unexpected" not in err, err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def unprivileged() -> list[str]:
    """A command prefix under which file permissions apply: nothing for an ordinary user; for root, ``setpriv``
    without the capabilities that let root read and write any file (skips the test where there is no setpriv)."""
    import os
    import shutil

    import pytest

    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file permissions cannot be made to apply")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
