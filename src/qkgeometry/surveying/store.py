"""Where :func:`qkgeometry.survey` keeps finished models: an embedded store with one writer. Chapter 4.

One store, :class:`SurveyStore`, an SQLite database in write-ahead-log (WAL) mode; CSV is its import and export
format. The file name of ``cache`` (``--out`` on the command line) says where the rows are kept:

* ``.sqlite`` (or ``.sqlite3``, ``.db``): in the database file itself. Adding a model writes that model's rows and
  nothing else, so the time to add the N-th model does not grow with N (``benchmarks/bench_survey_store.py``
  measures it). Use it for any survey larger than a handful of models.
* ``.csv``: in a database in memory, imported from the tidy CSV when the store opens (and again whenever another
  survey has changed the file) and exported back to it, whole and atomically, under a lock file, after every model
  (O(N) work per model). Existing caches and scripts go on working; ``qkgeometry export`` converts between the two
  (:func:`migrate_csv`, :func:`export_csv`).

Both hold the columns of :data:`SURVEY_COLUMNS`, and :func:`read_store`
(hence :func:`qkgeometry.summarize`, ``qkgeometry plot``) reads either one into the same frame. A checkpoint of a
training run also keeps where it sits in its run (:data:`TRAJECTORY_COLUMNS`: run, checkpoint name, stage, step,
tokens seen; ``read(trajectory=True)``), as it was given, once per model (store format 2; a format-1 store is
migrated when opened for writing).

Why SQLite in WAL mode rather than append-only Parquet parts with an index:

* **Appends in O(1).** A model is one transaction that inserts its rows at the end of a table (and of its index
  on the model): the work depends on the model's size, not on the store's.
* **Survives a kill mid-write.** A transaction is atomic: a process killed with ``kill -9`` in the middle of one
  leaves the store as it was before it, and the next open rolls the unfinished part of the log back. Nothing of
  ours has to detect or repair half-written parts, temporary files or a stale index.
* **One version per model.** When a model's fingerprint (its revision: the hash of its files or its Hub commit,
  and the package version) changes, the old rows are deleted and the new ones inserted in the same transaction:
  readers see the old version or the new one, never both. Parquet parts would need tombstones and compaction.
* **Standard library, everywhere.** ``sqlite3`` ships with Python (Colab included), needs no dependency, and
  any SQLite tool opens the file. WAL mode lets a notebook read the store while a survey appends to it, and
  several surveys on one machine may share one store (SQLite's locking lets one write at a time).

The store's layout on disk (schema, format version, migration, connections) is
:mod:`~qkgeometry.surveying.store_format`; its CSV side (parsing, writing) is
:mod:`~qkgeometry.surveying.store_csv`; the copies between the two (:func:`migrate_csv`, :func:`export_csv`) are
here.

Limits: keep the store on a local disk of the machine that runs :func:`qkgeometry.survey`. SQLite's locking is
not reliable on network file systems, and it does not need to be: workers (processes or the machines of a
``dask.distributed`` cluster) never open the store, they return their frames to the one process that writes.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._files import file_stamp
from .columns import (
    CACHE_KEY,
    COLUMNS,
    FINGERPRINT,
    FORMULA_STARTS,
    IDENTITY,
    SURVEY_COLUMNS,
    TRAJECTORY_COLUMNS,
    check_rows,
    empty_frame,
    spreadsheet_safe,
    spreadsheet_text,
    trajectory_dtypes,
    trajectory_of_sources,
    trajectory_values,
)
from .store_csv import parse_survey_csv, write_survey_csv
from .store_format import (
    APPLICATION_ID,
    MAGIC,
    ROW_COLUMNS,
    SCHEMA,
    STORE_FORMAT,
    STORE_SUFFIXES,
    connect_readonly,
    migrate,
    records,
    retry_locked,
)

__all__ = ["CACHE_KEY", "COLUMNS", "FINGERPRINT", "FORMULA_STARTS", "IDENTITY", "STORE_FORMAT", "STORE_SUFFIXES",
           "SURVEY_COLUMNS", "TRAJECTORY_COLUMNS", "SurveyStore", "empty_frame", "export_csv", "is_store_file",
           "migrate_csv", "open_store", "read_store", "rows_matching", "spreadsheet_safe", "spreadsheet_text"]


def is_store_file(path: str | Path) -> bool:
    """Whether ``path`` names an SQLite survey store: its name ends in one of :data:`STORE_SUFFIXES`, or the file
    starts with SQLite's header (a store renamed to another ending is still read as one)."""
    path = Path(path)
    if path.suffix.lower() in STORE_SUFFIXES:
        return True
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def open_store(path: str | Path, what: str = "`cache`") -> SurveyStore:
    """The :class:`SurveyStore` at ``path``: an SQLite file (:func:`is_store_file`) or a ``.csv`` file (its import
    and export). Anything else raises ``ValueError`` naming ``what`` and the path."""
    path = Path(path)
    if not is_store_file(path) and path.suffix.lower() != ".csv":
        raise ValueError(f"{what} must be a survey store (.sqlite) or a .csv file; got {str(path)!r}.")
    return SurveyStore(path, what=what)


def rows_matching(stored: pd.DataFrame, key: dict[str, Any], columns: list[str] = IDENTITY) -> pd.Series:
    """Mask of the rows of ``stored`` whose ``columns`` equal ``key``'s (:data:`IDENTITY` by default; numbers
    compared as numbers, everything else as text, a missing value as the empty string)."""
    mask = pd.Series(True, index=stored.index)
    for col in columns:
        if col == "num_std":
            mask &= stored[col].astype(float) == float(key[col])
        else:
            mask &= stored[col].fillna("").astype(str) == str(key[col])
    return mask


class SurveyStore:
    """An SQLite survey store in WAL mode (see the module docstring for why). Chapter 4.

    ``SurveyStore(path)`` opens the store, creating it when the file is absent or empty; a file that is not a
    qkgeometry survey store raises ``ValueError`` naming it. Use it as a context manager, or call :meth:`close`.
    With a ``.csv`` path the rows live in memory and the CSV is their import and export (see the module docstring).

    * :meth:`put` adds one model's rows, replacing the rows of the same model (same :data:`IDENTITY`) in the same
      transaction: a store never holds two versions of one model.
    * :meth:`read` returns every row (the columns of :data:`SURVEY_COLUMNS`, in the order the
      models were added), :meth:`rows_for` those of one source, :meth:`counts` the numbers of models and rows.
    """

    def __init__(self, path: str | Path, *, what: str = "survey store", readonly: bool = False):
        from .._files import resolve_output
        from ..errors import OutputError

        self.path = Path(path)
        self._what = what
        self._csv = self.path.suffix.lower() == ".csv" and not is_store_file(self.path)
        if self._csv:  # the CSV is import and export: the rows live in a database in memory
            from .._files import remove_stale_temps

            remove_stale_temps(resolve_output(self.path))  # a survey killed mid-export leaves its temporary file
            self._stamp: tuple[int, int, int] | None = None
            self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            self._conn.executescript(SCHEMA)
            return
        target = resolve_output(self.path)  # a symlinked store is opened through its link
        if target.exists() and not target.is_file():
            raise ValueError(f"{what} {str(self.path)!r} is not a regular file (a folder or a pipe?); pass a "
                             ".sqlite file.")
        if readonly:
            self._conn = connect_readonly(target, what, self.path)
            try:
                self._check()
            except BaseException:
                self._conn.close()
                raise
            return
        try:
            # autocommit mode: transactions are opened explicitly (BEGIN IMMEDIATE) around each model
            self._conn = sqlite3.connect(str(target), timeout=60, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise ValueError(f"cannot open {what} {str(self.path)!r}: {e}; check the path and its "
                             "permissions.") from e
        try:
            self._create_or_check()
            retry_locked(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
            self._conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a killed process loses nothing committed
        except sqlite3.OperationalError as e:
            self._conn.close()
            raise OutputError(f"cannot open {what} {str(self.path)!r} for writing ({e}); check its permissions, "
                              "or pass another path.") from e
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise ValueError(f"{what} {str(self.path)!r} is not a qkgeometry survey store ({e}); pass another "
                             "path (the file is left as it is).") from e
        except BaseException:
            self._conn.close()
            raise

    def _create_or_check(self) -> None:
        """In one write transaction: lay out a new store in an empty database, or check an existing one. Many
        processes opening one new store at the same instant each wait their turn (SQLite's lock), and every one
        but the first finds the store made."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            empty = conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
            if empty and conn.execute("PRAGMA application_id").fetchone()[0] == 0:
                for statement in filter(str.strip, SCHEMA.split(";")):
                    conn.execute(statement)
            else:
                self._check()
                if self._version < STORE_FORMAT:
                    migrate(conn, self._version)
            self._version = STORE_FORMAT
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _check(self) -> None:
        app = self._conn.execute("PRAGMA application_id").fetchone()[0]
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if app != APPLICATION_ID:
            raise ValueError(f"{self._what} {str(self.path)!r} is an SQLite database but not a qkgeometry survey "
                             "store; pass another path (the file is left as it is).")
        if version > STORE_FORMAT:
            raise ValueError(f"{self._what} {str(self.path)!r} was written by a newer qkgeometry (store format "
                             f"{version}, this one reads {STORE_FORMAT}); upgrade qkgeometry.")
        self._version = int(version)

    # -------------------------------------------------------------------------------------------- context
    def close(self) -> None:
        """Close the connection (the store stays on disk; its log is folded into the file)."""
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()

    def __enter__(self) -> SurveyStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SurveyStore({str(self.path)!r})"

    # -------------------------------------------------------------------------------------------- reading
    _version = STORE_FORMAT

    @property
    def _select(self) -> str:
        trajectory = ", ".join(f"m.{c}" if self._version >= 2 else f"NULL AS {c}" for c in TRAJECTORY_COLUMNS)
        return ("SELECT " + ", ".join(f"r.{c}" for c in ROW_COLUMNS) + ", " +
                ", ".join(f"m.{c}" for c in [*IDENTITY, *FINGERPRINT]) + ", " + trajectory +
                " FROM rows r JOIN models m ON m.id = r.model_id")

    def _frame(self, sql: str, params: tuple = (), trajectory: bool = False) -> pd.DataFrame:
        try:
            records = self._conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as e:
            raise ValueError(f"cannot read {self._what} {str(self.path)!r}: {e}; pass another path (the file is "
                             "left as it is).") from e
        columns = [*SURVEY_COLUMNS, *TRAJECTORY_COLUMNS] if trajectory else SURVEY_COLUMNS
        if not records:
            return empty_frame(trajectory)
        frame = pd.DataFrame.from_records(records, columns=[*ROW_COLUMNS, *IDENTITY, *FINGERPRINT,
                                                            *TRAJECTORY_COLUMNS])
        frame["head"] = pd.to_numeric(frame["head"]).astype("Int64")  # NULL (a layer row) is <NA>
        for col in ("layer", "d_model", "head_dim", "n_heads", "n_kv_heads"):
            frame[col] = frame[col].astype(np.int64)
        for col in ("symmetry", "directionality", "num_std"):
            frame[col] = frame[col].astype(float)
        if trajectory and self._version < 2:  # a version-1 store read without migrating: as the migration fills it
            filled = trajectory_of_sources(frame["source"].astype(str).unique())
            for col in TRAJECTORY_COLUMNS:
                frame[col] = frame["source"].astype(str).map(lambda s, c=col: filled[s][c])
        trajectory_dtypes(frame)
        return frame[columns]

    def read(self, trajectory: bool = False) -> pd.DataFrame:
        """Every row of the store, in the order the models were added (a replaced model moves to the end): the
        columns of :data:`SURVEY_COLUMNS`, and with ``trajectory=True`` also those of :data:`TRAJECTORY_COLUMNS`."""
        self._import_csv()
        return self._frame(self._select + " ORDER BY r.rowid", trajectory=trajectory)

    def rows_for(self, source: str, trajectory: bool = False) -> pd.DataFrame:
        """The rows of every stored model whose ``source`` is ``source`` (any ``per``, ``num_std``, form)."""
        self._import_csv()
        return self._frame(self._select + " WHERE m.source = ? ORDER BY r.rowid", (str(source),), trajectory)

    def place(self, key: dict[str, Any], columns: dict[str, Any]) -> None:
        """Set the :data:`TRAJECTORY_COLUMNS` of the stored model of ``key`` (its :data:`IDENTITY`): where a
        checkpoint whose rows were reused sits in its run. Nothing happens when no such model is stored."""
        values = trajectory_values(columns)
        ident = tuple(float(key[c]) if c == "num_std" else str(key[c]) for c in IDENTITY)
        sets = ", ".join(f"{c} = ?" for c in TRAJECTORY_COLUMNS)
        self._write([], (f"UPDATE models SET {sets} WHERE source = ? AND per = ? AND num_std = ? AND qk_norm = ? AND "
                          "input_norm = ?", (*values, *ident)))

    def steps_of(self, run: str) -> list[int]:
        """The steps stored for the training run ``run`` (the ``run`` of :data:`TRAJECTORY_COLUMNS`), in order."""
        self._import_csv()
        found = self._conn.execute("SELECT DISTINCT step FROM models WHERE run = ? AND step IS NOT NULL ORDER BY "
                                   "step", (str(run),))
        return [int(s) for (s,) in found]

    def counts(self) -> tuple[int, int]:
        """``(models, rows)`` held by the store."""
        self._import_csv()
        models = self._conn.execute("SELECT COUNT(*), COALESCE(SUM(n_rows), 0) FROM models").fetchone()
        return int(models[0]), int(models[1])

    # -------------------------------------------------------------------------------------------- writing
    def put(self, frame: pd.DataFrame, key: dict[str, Any] | None = None) -> None:
        """Add one model's rows (a frame of :data:`SURVEY_COLUMNS` for a single identity), in one transaction that
        first deletes the rows of any stored version of the same model. ``key`` (the model's :data:`IDENTITY` and
        :data:`FINGERPRINT`) defaults to the frame's first row. A frame that lacks a column, or whose scores are not
        finite numbers (or whose model, component or layer is missing), raises ``ValueError`` naming the row and
        column, and nothing is written."""
        if len(frame):
            check_rows(frame)
            models = frame[IDENTITY].drop_duplicates()
            if len(models) > 1:
                sources = ", ".join(repr(str(s)) for s in dict.fromkeys(models["source"]))
                raise ValueError(f"`frame` holds the rows of {len(models)} models (sources {sources}); put() stores "
                                 "one model: pass each model's rows alone, or call put_many(frame).")
            self._write([_prepared(frame, key)])

    def append(self, rows: pd.DataFrame, key: dict[str, Any]) -> None:
        """Add one model's rows as :meth:`put` does, for a model scored while it trains (one step at a time, through
        a store held open for the run): ``rows`` has the columns of :data:`COLUMNS` (the frame of
        :func:`~qkgeometry.surveying.scoring.score_layers`), ``key`` the model's other columns (:data:`IDENTITY`,
        :data:`FINGERPRINT`, ``init``, ``modality`` and its place in the run, :data:`TRAJECTORY_COLUMNS`). The
        frame is not checked as :meth:`put` checks it, and a score may be NaN (a step whose weights were not
        finite), stored as missing."""
        if len(rows):
            place = {c: key.get(c) for c in TRAJECTORY_COLUMNS}
            self._write([({**key, "model": rows["model"].iloc[0]}, place,
                          records(rows, {"init": key["init"], "modality": key["modality"]}))])

    def put_many(self, frame: pd.DataFrame) -> int:
        """:meth:`put` every model of a survey frame (grouped by :data:`IDENTITY`, in the frame's order; a model
        whose rows carry two fingerprints keeps the last one's), all in one transaction. Returns the number of
        models written."""
        if not len(frame):
            return 0
        check_rows(frame)
        parts = []
        for _, part in frame.groupby(IDENTITY, sort=False, dropna=False):
            last = part.iloc[-1]
            parts.append(_prepared(part[(part["revision"] == last["revision"]) &
                                        (part["qkgeometry_version"] == last["qkgeometry_version"])], None))
        self._write(parts)
        return len(parts)

    # -------------------------------------------------------------------------------------------- CSV
    def _write(self, parts: list[tuple[dict[str, Any], dict[str, Any], list[tuple]]],
               statement: tuple[str, tuple] | None = None) -> None:
        """One transaction (models, a statement); with a CSV, under its lock: import what another survey wrote,
        write, export the whole store to the file (:mod:`~qkgeometry.surveying.store_csv`)."""
        if not self._csv:
            self._transaction(parts, statement=statement)
            return
        from .._files import locked

        with locked(self.path):
            self._import_csv()
            self._transaction(parts, statement=statement)
            write_survey_csv(self._frame(self._select + " ORDER BY r.rowid", trajectory=True), self.path)
            self._stamp = file_stamp(self.path)

    def _import_csv(self) -> None:
        """With a CSV: (re)load it into memory when it changed since the last import or export (inode, size or
        modification time differ); nothing for a database file."""
        if not self._csv:
            return
        stamp = file_stamp(self.path)
        if stamp == self._stamp:
            return
        frame = read_store(self.path, trajectory=True)
        parts = [_prepared(part, None) for _, part in frame.groupby(IDENTITY, sort=False, dropna=False)] \
            if len(frame) else []
        self._transaction(parts, clear=True)
        self._stamp = stamp

    def _transaction(self, parts: list[tuple[dict[str, Any], dict[str, Any], list[tuple]]], clear: bool = False,
                     statement: tuple[str, tuple] | None = None) -> None:
        from ..errors import OutputError

        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if clear:
                    conn.execute("DELETE FROM rows")
                    conn.execute("DELETE FROM models")
                for part in parts:
                    self._replace(*part)
                if statement is not None:
                    conn.execute(*statement)
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as e:  # disk full, read-only, locked past the timeout...
            raise OutputError(f"could not write {self._what} {str(self.path)!r}: {e}. The models stored before "
                              "are unchanged; free space or pick another path.") from e

    def _replace(self, key: dict[str, Any], place: dict[str, Any], values: list[tuple]) -> None:
        """Inside a transaction: delete the stored version of a model (``key``: its :data:`IDENTITY`,
        :data:`FINGERPRINT` and ``model``), insert its rows (``values``, from
        :func:`~qkgeometry.surveying.store_format.records`) and its place in its run."""
        conn = self._conn
        ident = tuple(float(key[c]) if c == "num_std" else str(key[c]) for c in IDENTITY)
        found = conn.execute("SELECT id FROM models WHERE source = ? AND per = ? AND num_std = ? AND qk_norm = ? AND "
                             "input_norm = ?", ident).fetchone()
        fingerprint = (str(key["revision"]), str(key["qkgeometry_version"]), str(key["model"]), len(values),
                       *trajectory_values(place))
        if found is None:
            model_id = conn.execute("INSERT INTO models (source, per, num_std, qk_norm, input_norm, revision, "
                                    "qkgeometry_version, model, n_rows, " + ", ".join(TRAJECTORY_COLUMNS) +
                                    f") VALUES ({', '.join('?' * (9 + len(TRAJECTORY_COLUMNS)))})",
                                    ident + fingerprint).lastrowid
        else:
            model_id = found[0]
            conn.execute("DELETE FROM rows WHERE model_id = ?", (model_id,))
            conn.execute("UPDATE models SET revision = ?, qkgeometry_version = ?, model = ?, n_rows = ?, " +
                         ", ".join(f"{c} = ?" for c in TRAJECTORY_COLUMNS) + " WHERE id = ?",
                         (*fingerprint, model_id))
        conn.executemany(f"INSERT INTO rows (model_id, {', '.join(ROW_COLUMNS)}) VALUES "
                         f"({', '.join('?' * (len(ROW_COLUMNS) + 1))})", [(model_id, *r) for r in values])


def _prepared(frame: pd.DataFrame, key: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any], list[tuple]]:
    """One model's frame as :meth:`SurveyStore._replace` takes it: its key (``key``, default its first row's
    :data:`IDENTITY` and :data:`FINGERPRINT`, with its model name), its place in its run and its records."""
    first = frame.iloc[0]
    key = {c: first[c] for c in [*IDENTITY, *FINGERPRINT]} if key is None else key
    place = {c: first[c] for c in TRAJECTORY_COLUMNS if c in frame.columns}
    return {**key, "model": first["model"]}, place, records(frame)


def read_store(path: str | Path | None, trajectory: bool = False) -> pd.DataFrame:
    """Read a survey store or CSV (the ``cache`` of :func:`qkgeometry.survey`, the ``--out`` of ``qkgeometry
    survey``) as a tidy frame: the columns of :data:`SURVEY_COLUMNS`, with ``trajectory=True`` also those of
    :data:`TRAJECTORY_COLUMNS` (missing where a model is no checkpoint of a run). An absent path (or ``None``) or a
    0-byte file gives an empty frame; a store is read in the order its models were added. CSV text cells were
    written formula-safe (:func:`spreadsheet_safe`) and are read back as they were. Damage is repaired, not
    trusted: a last line cut short, and rows whose scores or key fields are missing or not finite, are dropped, so
    :func:`qkgeometry.survey` recomputes those models. A file that is not a survey store or CSV (SQLite of another
    kind, wrong columns, not UTF-8 text, a folder or a pipe) raises ``ValueError`` naming it."""
    from .._files import resolve_output

    if path is None:
        return empty_frame(trajectory)
    path = Path(path)
    try:
        if not resolve_output(path).exists():
            return empty_frame(trajectory)
        if not resolve_output(path).is_file():
            raise ValueError(f"survey file {str(path)!r} is not a regular file (a folder or a pipe?); pass a .csv "
                             "file.")
        if is_store_file(path):
            if not resolve_output(path).stat().st_size:
                return empty_frame(trajectory)
            with SurveyStore(path, what="survey store", readonly=True) as store:
                return store.read(trajectory)
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read survey file {str(path)!r}: {e.strerror or e}; check its permissions.") from e
    return parse_survey_csv(data, path, trajectory)


def migrate_csv(csv: str | Path, store: str | Path) -> int:
    """Copy a survey CSV (``qkgeometry survey --out results.csv``) into the SQLite store ``store`` (created when
    absent; models it already holds are replaced by the CSV's). Damaged rows are dropped as
    :func:`~qkgeometry.surveying.store.read_store` drops them. Returns the number of models copied. Chapter 4."""
    frame = read_store(csv, trajectory=True)
    with SurveyStore(store, what="--store") as target:
        return target.put_many(frame)


def export_csv(store: str | Path, csv: str | Path) -> int:
    """Write every row of a survey store (or survey CSV) as a tidy, spreadsheet-safe CSV at ``csv``, atomically.
    Returns the number of rows written. ``qkgeometry export STORE --csv FILE`` runs it."""
    from .._files import check_writable_file

    check_writable_file(Path(csv), "--csv")
    frame = read_store(store, trajectory=True)
    write_survey_csv(frame, Path(csv), "--csv")
    return len(frame)
