"""Files, in one place: atomic writes (one temporary-name scheme), a write-ahead writability check, an exclusive
lock with a bounded wait, the checks of the files a reader opens (a missing file, a broken link, permission denied,
a FIFO or device where a file belongs: refused before any open, since opening a FIFO blocks forever), one table of
what an ``OSError`` means, and the content fingerprints of model files.

Used by the survey cache, the command line, the Hub cache and the offline catalogue so that a killed,
interrupted or concurrent run never leaves a half-written or lost result, and a bad output path is reported
before any model is computed. Every atomic write goes through :func:`replacing`: the new content is written to
:func:`temp_path` beside the target (``.<name>.<pid>.<thread>.tmp``, so later runs can tell whether its writer is
still alive and :func:`remove_stale_temps` clears what dead ones left), then ``os.replace`` puts it in place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .errors import OutputError, SourceError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "FULL_HASH_LIMIT",
    "LOCK_TIMEOUT_S",
    "check_regular_file",
    "check_writable_dir",
    "check_writable_file",
    "describe_os_error",
    "discard",
    "fingerprint",
    "locked",
    "open_regular",
    "os_error",
    "path_exists",
    "read_bytes",
    "read_regular",
    "remove_stale_temps",
    "replacing",
    "resolve_output",
    "temp_path",
    "write_bytes_atomic",
    "write_csv_atomic",
]


def _causes() -> dict[int, str]:
    import errno

    return {errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
            errno.EROFS: "the file system is read-only", errno.ENOSPC: "the disk is full",
            errno.EDQUOT: "the disk quota is exceeded", errno.EFBIG: "the file would exceed the allowed file size",
            errno.ENAMETOOLONG: "the name is too long for the file system",
            errno.ENOTDIR: "a part of the path is a file, not a folder", errno.EISDIR: "it is a folder",
            errno.ELOOP: "it is a loop of symbolic links",
            errno.EIO: "the operating system reported an I/O error (a failing disk or a broken network mount)",
            errno.ENOENT: "it does not exist"}


def describe_os_error(e: OSError) -> str:
    """What an ``OSError`` of a local file means, in a few words (``the disk is full``, ``permission denied``...):
    the one table of causes, for reading and writing alike."""
    return _causes().get(e.errno, e.strerror or type(e).__name__)


def os_error(path: Path | str, e: OSError, what: str = "file") -> SourceError:
    """One clear :class:`SourceError` for an ``OSError`` met while reading ``path``: the cause
    (:func:`describe_os_error`) and the fix."""
    import errno

    fixes = {errno.EACCES: "make it readable (chmod) or run as a user who can read it",
             errno.EPERM: "make it readable (chmod) or run as a user who can read it",
             errno.ELOOP: "point the link at the real file or folder", errno.ENAMETOOLONG: "use a shorter path",
             errno.EIO: "copy the file to a healthy disk and retry"}
    return SourceError(f"cannot read {what} {str(path)!r}: {describe_os_error(e)}; "
                       f"{fixes.get(e.errno, 'check the path and the disk')}.")


def resolve_output(path: Path) -> Path:
    """The file that writing ``path`` replaces: symbolic links are followed (written through), so a linked
    output keeps its link and the link's target receives the new content."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def check_writable_file(path: Path, what: str, *, create: bool = True) -> Path:
    """Check, before any work, that ``path`` can be (re)written atomically; return the file that will be written.

    Creates missing parent folders, and writes and removes a small probe file next to the target (so a read-only
    folder or a full disk is reported now, not after an hour of computing). Raises :class:`OutputError` naming
    ``what`` (e.g. ``--out``), the path and the fix. ``create=False`` removes the folders it created once probed
    (for a caller with refusals still to make: it creates them when it writes).
    """
    path = Path(path)
    try:
        target = resolve_output(path)
    except OSError as e:
        raise OutputError(f"{what} {str(path)!r} cannot be used: {describe_os_error(e)}; pick another path.") from e
    if target.is_dir():
        raise OutputError(f"{what} {str(path)!r} is a folder; give a file name inside it, e.g. "
                          f"{str(path / 'results.csv')!r}.")
    if target.exists() and not target.is_file():
        raise OutputError(f"{what} {str(path)!r} exists and is not a regular file (a pipe or device?); pick "
                          "another path.")
    _probe_folder(target.parent, f"{what} {str(path)!r}", keep=create)
    return target


def check_writable_dir(folder: Path, what: str) -> Path:
    """Check that ``folder`` is (or can be created as) a writable folder, before any work."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{what} {str(folder)!r} is a file, not a folder; pass a folder path (it is created if "
                          "missing).")
    _probe_folder(folder, f"{what} {str(folder)!r}")
    return folder


def _probe_folder(folder: Path, label: str, keep: bool = True) -> None:
    """Create ``folder`` (and missing parents) and write a probe file in it; ``keep=False`` removes the folders it
    created afterwards, so that a later refusal leaves nothing behind."""
    missing = [f for f in (folder, *folder.parents) if not f.exists()]
    try:
        _probe_created(folder, label)
    finally:
        if not keep:
            for f in missing:  # innermost first
                with contextlib.suppress(OSError):
                    f.rmdir()


def _probe_created(folder: Path, label: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as e:
        raise OutputError(f"{label} cannot be created: {str(Path(e.filename or folder))!r} or a folder above it "
                          "is a file; pick another path.") from e
    except OSError as e:
        raise OutputError(f"{label} cannot be created: {describe_os_error(e)}; pick another path.") from e
    probe = folder / f".qkgeometry-probe-{os.getpid()}"
    try:
        with open(probe, "wb") as f:
            f.write(b"probe\n" * 128)  # a few hundred bytes: a full disk or a tiny size limit shows up here
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise OutputError(f"{label} is not writable: {describe_os_error(e)}; pick another path or free space.") from e
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


def write_csv_atomic(frame: pd.DataFrame, path: Path, what: str = "output") -> None:
    """Write ``frame`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    A killed run, a full disk or a size limit leaves either the old file or the new one, never half of one.
    A symbolic link at ``path`` is written through: the link stays and its target is replaced. The temporary files
    of earlier writers that were killed are removed first (:func:`remove_stale_temps`). Every text cell is
    quoted (numbers are not): a carriage return inside a name stays inside its cell, where a spreadsheet program
    would otherwise start a new row at it (and run what follows as a formula).
    """
    import csv

    target = resolve_output(Path(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)  # what a killed writer of this file left
    try:
        with replacing(target) as tmp:
            frame.to_csv(tmp, index=False, quoting=csv.QUOTE_NONNUMERIC)
    except OSError as e:
        raise OutputError(f"could not write {what} {str(path)!r}: {describe_os_error(e)}. The previous file, if any, is "
                          "unchanged; free space or pick another path.") from e


def temp_path(target: Path) -> Path:
    """The temporary file (or folder) in which this thread writes ``target``: ``.<name>.<pid>.<thread>.tmp`` beside
    it (the process id tells later runs whether its writer is still alive)."""
    return target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def discard(path: Path) -> None:
    """Remove a file, link, FIFO or folder, whatever it is (nothing when it is already gone)."""
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """``with replacing(target) as tmp:`` write ``tmp`` (a file or a folder); when the block ends without an
    error, ``tmp`` replaces ``target`` in one step (``os.replace``). The temporary never outlives the block."""
    tmp = temp_path(target)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            discard(tmp)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (parent folders created): readers see the old content or the new."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # another user's process, or a platform without signals: keep its files
        return True
    return True


def remove_stale_temps(target: Path) -> None:
    """Remove the temporary files (and folders) that runs which are no longer alive left beside ``target``."""
    prefix = f".{target.name}."
    with contextlib.suppress(OSError):
        for path in target.parent.iterdir():
            pid = path.name[len(prefix):-len(".tmp")].split(".")[0]
            if path.name.startswith(prefix) and path.name.endswith(".tmp") and pid.isdigit() and not _alive(int(pid)):
                discard(path)


#: how long a process waits for a lock another process holds before it gives up with one line
LOCK_TIMEOUT_S = 900.0


@contextlib.contextmanager
def locked(path: Path, *, lock_file: Path | None = None, timeout: float | None = None,
           holder: str = "another process") -> Iterator[None]:
    """Hold an exclusive lock for ``path`` (a ``filelock`` lock on the sidecar file ``<path>.lock``, or
    ``lock_file``; an OS lock, released when the process dies, on every platform).

    Concurrent surveys that share one cache serialise their read-merge-write steps through it, so both land; Hub
    fetches of one commit share the commit's lock. The wait is bounded (``timeout``, default
    :data:`LOCK_TIMEOUT_S`, read when called): a stuck process makes the others fail with one line naming the lock
    file (``holder`` says what holds it), never wait forever. The sidecar file may stay (deleting it between runs
    is harmless).
    """
    from filelock import FileLock, Timeout

    target = resolve_output(Path(path))
    wait = LOCK_TIMEOUT_S if timeout is None else timeout
    lock = FileLock(str(lock_file or target.with_name(target.name + ".lock")), timeout=wait)
    try:
        lock.acquire()
    except Timeout as e:
        raise OutputError(f"{holder} has held {lock.lock_file!r} for {wait:.0f} s; wait for it to finish, or stop "
                          "it, then rerun.") from e
    except OSError as e:
        raise OutputError(f"could not create the lock file {lock.lock_file!r}: {describe_os_error(e)}; pick a "
                          "writable path.") from e
    try:
        yield
    finally:
        lock.release()


def open_regular(path: Path) -> BinaryIO | None:
    """``path`` opened for reading when it is a regular file, else None (absent, a FIFO, a folder, a device...).

    The file is opened non-blocking and checked with ``fstat`` before anything is read, so a FIFO planted where a
    cache file should be never blocks the reader."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
    except OSError:
        os.close(fd)
        return None
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of ``path`` (at most ``limit``) when it is a regular file, else None (see :func:`open_regular`)."""
    fh = open_regular(path)
    if fh is None:
        return None
    with fh:
        try:
            return fh.read() if limit is None else fh.read(limit)
        except OSError:
            return None


def path_exists(path: Path, what: str) -> bool:
    """``path.exists()`` that reports broken links, loops, long names and I/O errors instead of hiding them."""
    try:
        os.stat(path)
        return True
    except FileNotFoundError:
        if os.path.islink(path):
            raise SourceError(f"{what} {str(path)!r} is a symbolic link to {os.readlink(path)!r}, which does not "
                              "exist; fix or remove the link.") from None
        return False
    except OSError as e:
        raise os_error(path, e, what) from e


def check_regular_file(path: Path | str, what: str = "file") -> os.stat_result:
    """Refuse ``path`` unless it is a regular file (following links), *before* opening it.

    Opening a FIFO blocks until someone writes to it, so a FIFO named ``model.safetensors`` would hang the run;
    devices and sockets are no better. Returns the ``os.stat`` result.
    """

    try:
        st = os.stat(path)
    except OSError as e:
        raise os_error(path, e, what) from e
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise SourceError(f"{what} {str(path)!r} is {kind}, not a regular file; pass a real file (reading a "
                          "pipe or device could block forever).")
    return st


def read_bytes(path: Path, what: str = "file") -> bytes:
    check_regular_file(path, what)
    try:
        return path.read_bytes()
    except OSError as e:
        raise os_error(path, e, what) from e


FULL_HASH_LIMIT = 256 * 2**20
_SAMPLES, _SAMPLE_BYTES, _HEAD_BYTES = 64, 64 * 2**10, 16 * 2**20


def fingerprint(files: list[Path], meta: list[Path] = ()) -> str:
    """Content key of a model on disk, used as the survey cache's ``revision``.

    * ``meta`` files (config.json, the shard index) are hashed in full: changing ``num_attention_heads`` changes
      the key.
    * Weight files totalling at most :data:`FULL_HASH_LIMIT` (256 MiB) are hashed in full (BLAKE2b), so any change
      of content changes the key, whatever the sizes and modification times say.
    * Larger weight files are keyed by name, size, modification time in nanoseconds, their head (a safetensors
      file's whole JSON header, exactly; the first 16 MiB of any other format, which holds GGUF metadata) and 64
      samples of 64 KiB spread evenly through the file plus its last 64 KiB: a re-trained or re-quantised
      checkpoint differs in every sample, while an edit of a few weights that keeps the size and the nanosecond
      mtime (a deliberate ``cp -p`` of a hand-patched file) can go unnoticed. Hashing 14 GB on every survey
      would cost more than scoring it.
    """
    import hashlib

    h = hashlib.blake2b(digest_size=12)
    for f in meta:
        h.update(f.name.encode() + b"\0" + read_bytes(f, "file") + b"\0")
    sizes = [check_regular_file(f, "weight file").st_size for f in files]
    full = sum(sizes) <= FULL_HASH_LIMIT
    for f, size in zip(files, sizes):
        h.update(f"{f.name}\0{size}\0".encode())
        try:
            with open(f, "rb") as fh:
                if full:
                    while block := fh.read(1 << 22):
                        h.update(block)
                    continue
                h.update(str(os.stat(f).st_mtime_ns).encode())
                head = _HEAD_BYTES
                if f.suffix == ".safetensors":  # the whole JSON header (tensor names, dtypes, offsets), however long
                    import struct

                    head = 8 + struct.unpack("<Q", fh.read(8).ljust(8, b"\0"))[0]
                    fh.seek(0)
                h.update(fh.read(head))
                for k in range(_SAMPLES + 1):
                    fh.seek(min(size - _SAMPLE_BYTES, k * size // _SAMPLES) if size > _SAMPLE_BYTES else 0)
                    h.update(fh.read(_SAMPLE_BYTES))
        except OSError as e:
            raise os_error(f, e, "weight file") from e
    return h.hexdigest()


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """``(inode, size, mtime)`` of ``path``, or None when it does not exist: tells whether a file changed."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(f"cannot read survey file {str(path)!r}: {e.strerror or e}.") from e
    return st.st_ino, st.st_size, st.st_mtime_ns
