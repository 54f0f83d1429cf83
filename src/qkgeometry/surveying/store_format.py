"""The survey store's layout on disk: its SQLite schema and format version, the migration of an older store, and
the connections the store opens (a writer that waits out a lock, a reader that needs no write access). Chapter 4.

:class:`qkgeometry.surveying.store.SurveyStore` is the only code that opens these files; this module says what
they hold.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .columns import INTEGER_TRAJECTORY_COLUMNS, TRAJECTORY_COLUMNS, trajectory_of_sources, trajectory_values

__all__ = ["APPLICATION_ID", "MAGIC", "ROW_COLUMNS", "SCHEMA", "STORE_FORMAT", "STORE_SUFFIXES", "connect_readonly",
           "migrate", "records", "retry_locked"]

#: file name endings that select the SQLite store (anything else must be ``.csv``)
STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
MAGIC = b"SQLite format 3\x00"
APPLICATION_ID = 0x716B6731  # "qkg1": marks the file as a qkgeometry survey store
#: the store's layout version (``PRAGMA user_version``): 1 had no :data:`TRAJECTORY_COLUMNS`; 2 keeps them in
#: ``models``; 3 lets a row's scores be missing (a training step whose weights were not finite, stored as NaN by
#: :meth:`~qkgeometry.surveying.store.SurveyStore.append`; surveys never store one). An older store is migrated in
#: place when it is opened for writing (version 1's trajectory columns filled from the checkpoint names its sources
#: carry, as version 1 read them), and read as the current version when opened read-only.
STORE_FORMAT = 3
#: the per-row columns kept in the ``rows`` table; the identity and fingerprint live once per model in ``models``
ROW_COLUMNS = ["model", "family", "component", "layer", "head", "symmetry", "directionality", "d_model", "head_dim",
                "n_heads", "n_kv_heads", "init", "modality"]
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS models (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL, per TEXT NOT NULL, num_std REAL NOT NULL, qk_norm TEXT NOT NULL, input_norm TEXT NOT NULL,
    revision TEXT NOT NULL, qkgeometry_version TEXT NOT NULL, model TEXT NOT NULL, n_rows INTEGER NOT NULL,
    run TEXT, checkpoint TEXT, stage INTEGER, step INTEGER, tokens INTEGER,
    UNIQUE (source, per, num_std, qk_norm, input_norm));
CREATE TABLE IF NOT EXISTS rows (
    model_id INTEGER NOT NULL REFERENCES models(id),
    model TEXT NOT NULL, family TEXT, component TEXT NOT NULL, layer INTEGER NOT NULL, head INTEGER,
    symmetry REAL, directionality REAL, d_model INTEGER, head_dim INTEGER, n_heads INTEGER,
    n_kv_heads INTEGER, init TEXT, modality TEXT);
CREATE INDEX IF NOT EXISTS rows_by_model ON rows (model_id);
CREATE INDEX IF NOT EXISTS models_by_source ON models (source);
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {STORE_FORMAT};
"""


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """Inside a write transaction: lay an older store out as the current version and mark it so. From version 1:
    add :data:`TRAJECTORY_COLUMNS` to ``models``, filled from the checkpoint names of its sources. From version 2:
    rebuild ``rows`` with scores that may be missing (SQLite cannot drop a NOT NULL constraint in place)."""
    if version < 3:
        rows = next(s for s in SCHEMA.split(";") if "TABLE IF NOT EXISTS rows" in s)
        conn.execute("ALTER TABLE rows RENAME TO rows_before")
        conn.execute(rows)
        conn.execute("INSERT INTO rows SELECT * FROM rows_before")
        conn.execute("DROP TABLE rows_before")
        conn.execute("CREATE INDEX IF NOT EXISTS rows_by_model ON rows (model_id)")
    if version >= 2:
        conn.execute(f"PRAGMA user_version = {STORE_FORMAT}")
        return
    have = {row[1] for row in conn.execute("PRAGMA table_info(models)")}
    for col in TRAJECTORY_COLUMNS:
        if col not in have:
            conn.execute(f"ALTER TABLE models ADD COLUMN {col} {'INTEGER' if col in INTEGER_TRAJECTORY_COLUMNS else 'TEXT'}")
    sources = [row[0] for row in conn.execute("SELECT DISTINCT source FROM models")]
    for source, cols in trajectory_of_sources(sources).items():
        conn.execute("UPDATE models SET " + ", ".join(f"{c} = ?" for c in TRAJECTORY_COLUMNS) + " WHERE source = ?",
                     (*trajectory_values(cols), source))
    conn.execute(f"PRAGMA user_version = {STORE_FORMAT}")


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


def records(frame: pd.DataFrame, constants: dict[str, Any] | None = None) -> list[tuple]:
    """The ``rows`` columns of ``frame`` (or of ``constants``, the same for every row) as plain Python values
    (``None`` for a missing head or score)."""
    out = []
    constants = constants or {}
    columns = [[constants[c]] * len(frame) if c in constants else frame[c].tolist() for c in ROW_COLUMNS]
    for values in zip(*columns):
        out.append(tuple(None if v is None or v is pd.NA or (isinstance(v, float) and v != v)
                         else int(v) if isinstance(v, (np.integer, bool)) else
                         float(v) if isinstance(v, np.floating) else v
                         for c, v in zip(ROW_COLUMNS, values)))
    return out
