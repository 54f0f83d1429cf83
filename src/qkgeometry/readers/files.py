"""File-system checks and content fingerprints shared by the local-file readers.

Every failure is one :class:`~qkgeometry.errors.SourceError` that says what happened and what to do: a missing
file, a broken link, a loop of links, permission denied, an I/O error, or a FIFO/device where a file belongs (opening
a FIFO blocks forever, so it is refused before any open).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import SourceError

__all__ = ["FULL_HASH_LIMIT", "check_regular_file", "fingerprint", "os_error", "path_exists", "read_bytes"]


def os_error(path: Path | str, e: OSError, what: str = "file") -> SourceError:
    """One clear :class:`SourceError` for an ``OSError`` met while touching ``path``: what happened and the fix."""
    import errno

    hints = {
        errno.EACCES: "permission denied; make it readable (chmod) or run as a user who can read it",
        errno.EPERM: "operation not permitted; make it readable (chmod) or run as a user who can read it",
        errno.ELOOP: "it is a loop of symbolic links; point the link at the real file or folder",
        errno.ENAMETOOLONG: "the name is too long for the file system; use a shorter path",
        errno.EIO: "the operating system reported an I/O error (a failing disk or a broken network mount); "
                   "copy the file to a healthy disk and retry",
        errno.ENOTDIR: "a part of the path is a file, not a folder; check the path",
        errno.ENOENT: "it does not exist; check the path",
    }
    hint = hints.get(e.errno, f"{e.strerror or type(e).__name__}; check the path and the disk")
    return SourceError(f"cannot read {what} {str(path)!r}: {hint}.")


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
    import stat

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
