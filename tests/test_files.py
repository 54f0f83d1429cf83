"""qkgeometry._files: the one lock waits a bounded time and names the lock file."""

from __future__ import annotations

import pytest
from filelock import FileLock

from bounded import no_hang
from qkgeometry import _files
from qkgeometry.errors import OutputError


def test_a_lock_held_by_another_process_is_waited_for_a_bounded_time(tmp_path, monkeypatch):
    target = tmp_path / "results.sqlite"
    monkeypatch.setattr(_files, "LOCK_TIMEOUT_S", 0.2)
    with no_hang(30), FileLock(str(tmp_path / "results.sqlite.lock")), \
            pytest.raises(OutputError, match=r"another process has held '.*results.sqlite.lock' for 0 s; wait"), \
            _files.locked(target):
        pass
    with _files.locked(target):  # free again
        pass
