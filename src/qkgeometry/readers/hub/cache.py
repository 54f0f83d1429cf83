"""The local cache of a Hub model's fetched tensors: one safetensors file per (repo, commit) under
:func:`qkgeometry.catalogue.cache_dir`, written header first and filled tensor by tensor, shared by every open model
of that commit (in one process or several), with the sha256 of every tensor's fetched bytes beside it."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..._files import LOCK_TIMEOUT_S, locked, open_regular, read_regular, replacing, write_bytes_atomic
from ...errors import OutputError, SourceError
from ..safetensors_format import MAX_HEADER_BYTES
from . import client
from .plan import COMMIT_RE, HubPlan, Span, check_revision

__all__ = ["CACHE_FORMAT", "LOCK_TIMEOUT_S", "HubCache", "cache_layout", "read_header"]

#: the layout of a cache file, kept in its ``__metadata__``: a file another layout wrote (an older or newer
#: qkgeometry) is never trusted, it is prepared again
CACHE_FORMAT = "qkgeometry-hub-cache/2"
#: the last verification in this process: (file identity, size, times, manifest) -> (intact, changed)
_VERIFIED: dict[tuple, tuple[frozenset[str], tuple[str, ...]]] = {}
_VERIFIED_LOCK = threading.Lock()


class HubCache:
    """The fetched tensors of one Hub repo under ``cache_dir()/hub/models--ORG--NAME``: per commit a ``config.json``,
    a ``qk.safetensors`` whose header is written first (every tensor's place is known from the plan) and whose
    file is never replaced while its header matches the plan (open models read it through their own handles), a
    ``qk.sha256.json`` with the sha256 of each tensor's fetched byte ranges (a tensor is cached when its entry is
    there and its bytes still hash to it), a ``qk.lock`` that serialises writers across processes, and
    ``refs/REVISION`` files that remember which commit a branch or tag named (for ``HF_HUB_OFFLINE=1``)."""

    def __init__(self, repo_id: str, root: Path | None = None):
        self.repo_id = repo_id
        self._base = root

    @functools.cached_property
    def root(self) -> Path:
        """The repo's folder; the cache folder is created on first use (not before a refusal)."""
        from ...catalogue.offline import cache_dir

        return (self._base or cache_dir() / "hub") / ("models--" + self.repo_id.replace("/", "--"))

    def folder(self, commit: str) -> Path:
        if not COMMIT_RE.fullmatch(commit):  # a commit names a folder: nothing else may
            raise SourceError(f"{commit[:60]!r} is not a 40-digit hexadecimal commit id; nothing was written.")
        return self.root / commit

    def file(self, commit: str) -> Path:
        return self.folder(commit) / "qk.safetensors"

    def manifest(self, commit: str) -> Path:
        return self.folder(commit) / "qk.sha256.json"

    @contextlib.contextmanager
    def lock(self, commit: str) -> Iterator[None]:
        """Hold the commit's lock (:func:`qkgeometry._files.locked` on ``qk.lock``, waiting at most
        :data:`LOCK_TIMEOUT_S`); creates the folder."""
        folder = self.folder(commit)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            with locked(folder, lock_file=folder / "qk.lock", timeout=LOCK_TIMEOUT_S,
                        holder=f"another process fetching {self.repo_id!r} into {str(folder)!r}"):
                yield
        except OutputError as e:
            raise SourceError(str(e)) from e

    def remember(self, revision: str, commit: str) -> None:
        check_revision(revision)
        write_bytes_atomic(self.root / "refs" / quote(revision, safe=""), commit.encode())

    def commit_for(self, revision: str | None) -> str | None:
        rev = revision or "main"
        if COMMIT_RE.fullmatch(rev):
            return rev
        check_revision(rev)
        got = read_regular(self.root / "refs" / quote(rev, safe=""))
        commit = got.decode(errors="replace").strip() if got is not None else None
        return commit if commit and COMMIT_RE.fullmatch(commit) else None

    def config(self, files: client.HubFiles) -> Path:
        """config.json of the commit, fetched once (one request) into the commit's folder."""
        repo = files.repo
        path = self.folder(repo.commit) / "config.json"
        if read_regular(path) is None:
            try:
                data = files.small("config.json")
            except Exception as e:
                raise client.hub_error(e, repo.repo_id, repo.revision) from e
            write_bytes_atomic(path, data)
        return path

    # ------------------------------------------------------------------ what is cached
    def recorded(self, commit: str) -> dict[str, dict[str, Any]]:
        """The manifest as written (tensor -> ``{"sha256", "pieces"}``), unverified; empty when absent or damaged."""
        raw = read_regular(self.manifest(commit))
        try:
            data = json.loads(raw) if raw is not None else {}
        except ValueError:
            return {}
        return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}

    def verified(self, commit: str, layout: dict[str, Any] | None = None) -> tuple[set[str], list[str]]:
        """(tensors whose cached bytes hash to the manifest, tensors whose bytes do not: changed after the fetch).
        Nothing is cached when the file's header differs from ``layout`` (when given)."""
        f = self.file(commit)
        header = read_header(f)
        if header is None or (layout is not None and header[1] != layout) or f.stat().st_size != header[0]:
            return set(), []
        entries = self.recorded(commit)
        st = f.stat()
        key = (str(f), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, json.dumps(entries, sort_keys=True))
        with _VERIFIED_LOCK:  # the same file, unchanged since it was hashed in this process
            known = _VERIFIED.get(key)
        if known is not None:
            return set(known[0]), list(known[1])
        good, bad = set(), []
        data_start = header[2]
        with open(f, "rb") as fh:
            for name, e in entries.items():
                if name not in header[1]:
                    continue
                offset = header[1][name]["data_offsets"][0]
                pieces = e.get("pieces")
                ok = isinstance(pieces, list) and all(isinstance(p, list) and len(p) == 2 for p in pieces)
                if ok and digest(_pread_pieces(fh, data_start + offset, pieces)) == e.get("sha256"):
                    good.add(name)
                else:
                    bad.append(name)
        with _VERIFIED_LOCK:
            _VERIFIED.clear()  # one entry: the last file verified
            _VERIFIED[key] = (frozenset(good), tuple(sorted(bad)))
        return good, sorted(bad)

    def complete(self, commit: str) -> bool:
        """Every tensor of the cache file fetched and unchanged, and config.json there."""
        if read_regular(self.folder(commit) / "config.json") is None:
            return False
        header = read_header(self.file(commit))
        return header is not None and bool(header[1]) and self.verified(commit)[0] >= set(header[1])

    def done(self, commit: str, plan: HubPlan) -> set[str]:
        """Names of the plan's tensors already written with the plan's byte ranges and still intact."""
        good, _ = self.verified(commit, cache_layout(plan))
        recorded = self.recorded(commit)
        return {n for n in good if n in plan.spans and _same_pieces(recorded[n], plan.spans[n])}

    def prepare(self, plan: HubPlan) -> None:
        """Create the cache file for ``plan`` (header written, data zero-filled, sparse) unless one with the plan's
        header exists: that one is kept as it is (models opened on it read through their own handles). Call with
        the commit's lock held."""
        f = self.file(plan.commit)
        layout = cache_layout(plan)
        header = read_header(f)
        if header is not None and header[1] == layout and f.stat().st_size == header[0]:
            return
        f.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(self.manifest(plan.commit), b"{}")
        head = json.dumps({"__metadata__": {"format": CACHE_FORMAT, "repo": plan.repo_id, "commit": plan.commit},
                           **{n: {"dtype": s["dtype"], "shape": s["shape"], "data_offsets": s["data_offsets"]}
                              for n, s in layout.items()}}, separators=(",", ":")).encode()
        head += b" " * (-len(head) % 8)
        with replacing(f) as tmp, open(tmp, "wb") as fh:
            fh.write(len(head).to_bytes(8, "little") + head)
            fh.truncate(8 + len(head) + sum(s.nbytes for s in plan.spans.values()))

    def forget_changed(self, commit: str) -> list[str]:
        """Drop from the manifest the tensors whose cached bytes no longer hash to it (so that they are fetched
        again); returns their names. Call with the commit's lock held."""
        _, bad = self.verified(commit)
        if bad:
            entries = {k: v for k, v in self.recorded(commit).items() if k not in bad}
            write_bytes_atomic(self.manifest(commit), json.dumps(entries, sort_keys=True).encode())
        return bad

    def record(self, commit: str, spans: Iterable[Span], hashes: dict[str, str]) -> None:
        """Add the sha256 of freshly written tensors to the manifest (call with the commit's lock held)."""
        entries = self.recorded(commit)
        for s in spans:
            entries[s.name] = {"sha256": hashes[s.name], "pieces": [list(p) for p in s.pieces]}
        write_bytes_atomic(self.manifest(commit), json.dumps(entries, sort_keys=True).encode())


def digest(pieces: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for p in pieces:
        h.update(p)
    return h.hexdigest()


def _same_pieces(entry: dict[str, Any], span: Span) -> bool:
    return entry.get("pieces") == [list(p) for p in span.pieces]


def _pread_pieces(fh: Any, base: int, pieces: list[list[int]], step: int = 16 * 2**20) -> Iterable[bytes]:
    for a, b in pieces:
        at = a
        while at < b:
            chunk = os.pread(fh.fileno(), min(step, b - at), base + at)
            if not chunk:
                return
            yield chunk
            at += len(chunk)


def cache_layout(plan: HubPlan) -> dict[str, dict[str, Any]]:
    out, offset = {}, 0
    for name in sorted(plan.spans):
        s = plan.spans[name]
        out[name] = {"dtype": s.dtype, "shape": list(s.shape), "data_offsets": [offset, offset + s.nbytes]}
        offset += s.nbytes
    return out


def read_header(path: Path | int) -> tuple[int, dict[str, Any], int] | None:
    """(expected file size, tensor entries, data start) of a regular cache file (a path, or a descriptor open on
    one), or None if it is absent, not a regular file, its header is unreadable or it was written in another
    layout than :data:`CACHE_FORMAT`."""
    try:
        if isinstance(path, int):
            head = os.pread(path, 8, 0)
            n = int.from_bytes(head, "little")
            raw = os.pread(path, n, 8) if 0 < n <= MAX_HEADER_BYTES else b""
        else:
            fh = open_regular(path)
            if fh is None:
                return None
            with fh:
                n = int.from_bytes(fh.read(8), "little")
                raw = fh.read(n) if 0 < n <= MAX_HEADER_BYTES else b""
        data = json.loads(raw) if raw else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    meta = data.pop("__metadata__", None)
    if not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT:
        return None
    try:
        end = max((int(v["data_offsets"][1]) for v in data.values()), default=0)
    except (TypeError, KeyError, ValueError, IndexError):
        return None
    return 8 + n + end, data, 8 + n
