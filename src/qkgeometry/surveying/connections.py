"""The SQLite connections the survey store opens: read-only ones (a store the user may read but not write), and
statements retried while another process holds the database locked. Chapter 4."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["connect_readonly", "retry_locked"]


def retry_locked(step: Any, seconds: float = 60.0) -> Any:
    """Run ``step()``, again while SQLite says the database is locked (a statement that its busy handler does not
    wait for, such as switching the journal mode while another process opens the same new store)."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        try:
            return step()
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def connect_readonly(target: Path, what: str, shown: Path) -> sqlite3.Connection:
    """A connection that only reads ``target``: works on a store the user may read but not write (a read-only file
    or folder, where SQLite cannot create the write-ahead log's index); such a store is read as it is on disk."""
    uri = target.resolve().as_uri()
    last: sqlite3.Error | None = None
    for query in ("?mode=ro", "?mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(uri + query, uri=True, timeout=60, isolation_level=None, check_same_thread=False)
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.DatabaseError as e:
            last = e
            with contextlib.suppress(UnboundLocalError, sqlite3.Error):
                conn.close()
            if not isinstance(e, sqlite3.OperationalError):
                raise ValueError(f"{what} {str(shown)!r} is not a qkgeometry survey store ({e}); pass another path "
                                 "(the file is left as it is).") from e
    raise ValueError(f"cannot read {what} {str(shown)!r} ({last}); check that the file is readable, or pass "
                     "another path.") from last
