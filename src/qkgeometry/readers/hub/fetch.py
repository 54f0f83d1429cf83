"""Fetching a plan's tensors into the shared cache file by HTTP range requests, one layer group at a time, adjacent
ranges joined into one request, under the commit's lock; a stopped fetch keeps what it wrote."""

from __future__ import annotations

import os
import weakref
from collections import defaultdict

from ...errors import SourceError
from . import client
from .cache import HubCache, cache_layout, digest, read_header
from .plan import HubPlan, coalesce, format_bytes

__all__ = ["Fetcher"]


class Fetcher:
    """Fetches the plan's tensors one layer group at a time into the cache file (every model open on the same
    commit shares it), joining adjacent ranges; shows a byte-counting progress bar on a terminal. Each group is
    fetched with the commit's lock held: a tensor another reader (thread or process) has written meanwhile is
    not fetched again.

    The cache file is opened once, when the fetcher is made (under the commit's lock, right after the plan's
    cached tensors were counted on that same file), and every write goes through that descriptor: the open model
    reads the file it writes. When the file at the cache path is no longer that file (the cache was cleared, or
    another layout replaced it), its manifest describes another file: it is neither trusted nor written, and the
    tensors still missing here are fetched into this model's own file."""

    def __init__(self, files: client.HubFiles, plan: HubPlan, store: HubCache):
        self.files, self.repo, self.plan, self.store = files, files.repo, plan, store
        self.done = set(plan.cached)
        self.group_of: dict[str, int] = {}
        for k, g in enumerate(plan.groups):
            for n in g:
                self.group_of.setdefault(n, k)
        self.offsets = {n: e["data_offsets"][0] for n, e in cache_layout(plan).items()}
        path = store.file(plan.commit)
        try:
            self.fd = os.open(path, os.O_RDWR)
        except OSError as e:
            raise client.hub_error(e, plan.repo_id, plan.revision) from e
        self._closed = weakref.finalize(self, os.close, self.fd)
        st = os.fstat(self.fd)
        self.identity = (st.st_dev, st.st_ino)
        header = read_header(self.fd)
        if header is None:
            self.release()
            raise SourceError(f"the cache file {str(path)!r} of {plan.repo_id!r} cannot be read back (removed or "
                              "replaced while it was opened?); rerun.")
        self.data_start = header[2]
        self.bar = None

    def is_cache_file(self) -> bool:
        """The file at the cache path is still the one this fetcher writes (and its model reads)."""
        try:
            st = os.stat(self.store.file(self.plan.commit))
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.identity

    def ensure(self, name: str) -> None:
        k = self.group_of.get(name)
        if k is None or name in self.done:
            return
        try:
            with self.store.lock(self.plan.commit):
                shared = self.is_cache_file()  # else the manifest is another file's: neither read nor written
                recorded = self.store.recorded(self.plan.commit) if shared else {}
                self.done |= {n for n in self.plan.groups[k] if n in recorded
                              and recorded[n].get("pieces") == [list(p) for p in self.plan.spans[n].pieces]}
                missing = [n for n in self.plan.groups[k] if n not in self.done]
                if missing:
                    self._fetch(missing, shared)
        except KeyboardInterrupt:
            self.close()
            raise
        except Exception as e:
            self.close()
            n, total = len(self.done), len(self.plan.spans)
            have = format_bytes(sum(self.plan.spans[m].fetch_nbytes for m in self.done))
            cached = (f"; {n} of {total} tensors ({have}) are cached in {str(self.store.folder(self.plan.commit))!r}"
                      if n else "; nothing was cached yet")
            raise client.hub_error(e, self.repo.repo_id, self.repo.revision, cached=cached) from e

    def _fetch(self, names: list[str], shared: bool) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.plan.total_bytes, initial=self.plan.cached_bytes, unit="B", unit_scale=True,
                            desc=f"fetching Q/K of {self.repo.repo_id}", disable=None, leave=False)
        pieces: dict[str, dict[int, bytes]] = defaultdict(dict)
        for file, start, end, members in coalesce(self.plan.spans[n] for n in names):
            data = self.files.read(file, start, end)
            try:
                for s, a, b in members:
                    piece = data[s.start + a - start:s.start + b - start]
                    os.pwrite(self.fd, piece, self.data_start + self.offsets[s.name] + a)
                    pieces[s.name][a] = piece
                os.fsync(self.fd)  # on disk before the manifest says so: a crash never leaves zeros marked done
            except OSError as e:  # a full disk: name the file (a descriptor's error has no name)
                raise OSError(e.errno, e.strerror, str(self.store.file(self.plan.commit))) from e
            self.bar.update(end - start)
            whole = [s for s in dict.fromkeys(m[0] for m in members)
                     if s.name not in self.done and all(a in pieces[s.name] for a, _ in s.pieces)]
            if whole:
                if shared:
                    self.store.record(self.plan.commit, whole,
                                      {s.name: digest(pieces[s.name][a] for a, _ in s.pieces) for s in whole})
                self.done.update(s.name for s in whole)
        if self.done >= set(self.plan.spans):
            self.close()

    def close(self) -> None:
        """Close the progress bar (the file stays open for later layers)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def release(self) -> None:
        """Close the progress bar and the cache file (when the model is closed)."""
        self.close()
        self._closed()
