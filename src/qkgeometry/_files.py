"""Safe output files: atomic CSV writes, a write-ahead writability check, and an exclusive lock.

Used by the survey cache and the command line so that a killed, interrupted or concurrent run never leaves a
half-written or lost result, and a bad output path is reported before any model is computed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from .errors import OutputError


def _describe(e: OSError) -> str:
    import errno

    return {errno.EACCES: "permission denied (read-only folder?)", errno.EROFS: "the file system is read-only",
            errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EFBIG: "the file would exceed the allowed file size", errno.ENAMETOOLONG: "the name is too long",
            errno.ENOTDIR: "a part of the path is a file, not a folder", errno.EISDIR: "it is a folder",
            errno.ELOOP: "it is a loop of symbolic links", errno.EIO: "an I/O error (failing disk?)"
            }.get(e.errno, e.strerror or type(e).__name__)


def resolve_output(path: Path) -> Path:
    """The file that writing ``path`` replaces: symbolic links are followed (written through), so a linked
    output keeps its link and the link's target receives the new content."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def check_writable_file(path: Path, what: str) -> Path:
    """Check, before any work, that ``path`` can be (re)written atomically; return the file that will be written.

    Creates missing parent folders, and writes and removes a small probe file next to the target (so a read-only
    folder or a full disk is reported now, not after an hour of computing). Raises :class:`OutputError` naming
    ``what`` (e.g. ``--out``), the path and the fix.
    """
    path = Path(path)
    try:
        target = resolve_output(path)
    except OSError as e:
        raise OutputError(f"{what} {str(path)!r} cannot be used: {_describe(e)}; pick another path.") from e
    if target.is_dir():
        raise OutputError(f"{what} {str(path)!r} is a folder; give a file name inside it, e.g. "
                          f"{str(path / 'results.csv')!r}.")
    if target.exists() and not target.is_file():
        raise OutputError(f"{what} {str(path)!r} exists and is not a regular file (a pipe or device?); pick "
                          "another path.")
    _probe_folder(target.parent, f"{what} {str(path)!r}")
    return target


def check_writable_dir(folder: Path, what: str) -> Path:
    """Check that ``folder`` is (or can be created as) a writable folder, before any work."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{what} {str(folder)!r} is a file, not a folder; pass a folder path (it is created if "
                          "missing).")
    _probe_folder(folder, f"{what} {str(folder)!r}")
    return folder


def _probe_folder(folder: Path, label: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as e:
        raise OutputError(f"{label} cannot be created: {str(Path(e.filename or folder))!r} or a folder above it "
                          "is a file; pick another path.") from e
    except OSError as e:
        raise OutputError(f"{label} cannot be created: {_describe(e)}; pick another path.") from e
    probe = folder / f".qkgeometry-probe-{os.getpid()}"
    try:
        with open(probe, "wb") as f:
            f.write(b"probe\n" * 128)  # a few hundred bytes: a full disk or a tiny size limit shows up here
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise OutputError(f"{label} is not writable: {_describe(e)}; pick another path or free space.") from e
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


def write_csv_atomic(frame: pd.DataFrame, path: Path, what: str = "output") -> None:
    """Write ``frame`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    A killed run, a full disk or a size limit leaves either the old file or the new one, never half of one.
    A symbolic link at ``path`` is written through: the link stays and its target is replaced.
    """
    target = resolve_output(Path(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        frame.to_csv(tmp, index=False)
        os.replace(tmp, target)
    except OSError as e:
        raise OutputError(f"could not write {what} {str(path)!r}: {_describe(e)}. The previous file, if any, is "
                          "unchanged; free space or pick another path.") from e
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for ``path`` (``fcntl.flock`` on the sidecar file ``<path>.lock``).

    Concurrent surveys that share one cache serialise their read-merge-write steps through it, so both land.
    The sidecar file stays (an empty file; deleting it between runs is harmless). Where ``fcntl`` does not exist
    (Windows), no lock is taken.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover (Windows)
        yield
        return
    target = resolve_output(Path(path))
    lock = target.with_name(target.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise OutputError(f"could not create the lock file {str(lock)!r}: {_describe(e)}; pick a writable path."
                          ) from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
