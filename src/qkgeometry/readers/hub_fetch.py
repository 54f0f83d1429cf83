"""Fetching a plan's tensors into the cache by HTTP range requests, one layer group at a time, adjacent ranges
joined into one request; a stopped fetch keeps what it wrote."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from .._files import write_bytes_atomic
from . import remote
from .hub_cache import HubCache, cache_layout
from .hub_plan import HubPlan, Span, format_bytes

__all__ = ["COALESCE_GAP", "Fetcher", "coalesce"]

#: ranges of one file closer than this are fetched in one request (the gap is read and dropped)
COALESCE_GAP = 4096


class Fetcher:
    """Fetches the plan's tensors one layer group at a time into the cache file, joining adjacent ranges; shows a
    byte-counting progress bar on a terminal."""

    def __init__(self, repo: remote.RemoteRepo, plan: HubPlan, store: HubCache):
        self.repo, self.plan, self.store = repo, plan, store
        self.done = set(plan.cached)
        self.group_of: dict[str, int] = {}
        for k, g in enumerate(plan.groups):
            for n in g:
                self.group_of.setdefault(n, k)
        self.offsets = {n: e["data_offsets"][0] for n, e in cache_layout(plan).items()}
        f = store.file(plan.commit)
        self.data_start = 8 + int.from_bytes(_head(f), "little")
        self.bar = None

    def ensure(self, name: str) -> None:
        k = self.group_of.get(name)
        if k is None or name in self.done:
            return
        missing = [n for n in self.plan.groups[k] if n not in self.done]
        try:
            self._fetch(missing)
        except KeyboardInterrupt:
            self.close()
            raise
        except Exception as e:
            self.close()
            n, total = len(self.done), len(self.plan.spans)
            cached = (f"; {n} of {total} tensors ({format_bytes(sum(self.plan.spans[m].nbytes for m in self.done))}) are "
                      f"cached in {str(self.store.folder(self.plan.commit))!r}" if n else "; nothing was cached yet")
            raise remote.hub_error(e, self.repo.repo_id, self.repo.revision, cached=cached) from e

    def _fetch(self, names: list[str]) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.plan.total_bytes, initial=self.plan.cached_bytes, unit="B", unit_scale=True,
                            desc=f"fetching Q/K of {self.repo.repo_id}", disable=None, leave=False)
        fd = os.open(self.store.file(self.plan.commit), os.O_RDWR)
        try:
            for file, start, end, spans in coalesce(self.plan.spans[n] for n in names):
                data = remote.fetch_range(self.repo, file, start, end)
                for s in spans:
                    os.pwrite(fd, data[s.start - start:s.end - start], self.data_start + self.offsets[s.name])
                os.fsync(fd)  # on disk before the progress file says so: a crash never leaves zeros marked done
                self.bar.update(end - start)
                self.done.update(s.name for s in spans)
                self._record()
        finally:
            os.close(fd)

    def _record(self) -> None:
        if self.done >= set(self.plan.spans):
            self.store.progress(self.plan.commit).unlink(missing_ok=True)
            self.close()
        else:
            write_bytes_atomic(self.store.progress(self.plan.commit), json.dumps(sorted(self.done)).encode())

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _head(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(8)


def coalesce(spans: Iterable[Span], gap: int = COALESCE_GAP) -> list[tuple[str, int, int, list[Span]]]:
    """Byte ranges to request: per file, spans sorted by offset, joined when they touch or lie within ``gap``."""
    out: list[tuple[str, int, int, list[Span]]] = []
    for s in sorted(spans, key=lambda s: (s.file, s.start)):
        if out and out[-1][0] == s.file and s.start - out[-1][2] <= gap:
            file, start, end, members = out[-1]
            out[-1] = (file, start, max(end, s.end), [*members, s])
        else:
            out.append((s.file, s.start, s.end, [s]))
    return out
