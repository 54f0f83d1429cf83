"""The local cache of a Hub model's fetched tensors: one safetensors file per (repo, commit) under
:func:`qkgeometry.catalogue.cache_dir`, written header first and filled tensor by tensor, with the list of tensors
written so far while a fetch is incomplete."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .._files import replacing, write_bytes_atomic
from . import remote
from .hub_plan import HubPlan

__all__ = ["HubCache", "cache_layout", "read_header"]


class HubCache:
    """The fetched tensors of one Hub repo under ``cache_dir()/hub/models--ORG--NAME``: per commit a
    ``config.json`` and a ``qk.safetensors`` whose header is written first (every tensor's place is known from the
    plan), a ``qk.fetching.json`` listing the tensors written so far while the fetch is incomplete, and
    ``refs/REVISION`` files that remember which commit a branch or tag named (for ``HF_HUB_OFFLINE=1``)."""

    def __init__(self, repo_id: str, root: Path | None = None):
        from ..catalogue.offline import cache_dir

        self.repo_id = repo_id
        self.root = (root or cache_dir() / "hub") / ("models--" + repo_id.replace("/", "--"))

    def folder(self, commit: str) -> Path:
        return self.root / commit

    def file(self, commit: str) -> Path:
        return self.folder(commit) / "qk.safetensors"

    def progress(self, commit: str) -> Path:
        return self.folder(commit) / "qk.fetching.json"

    def remember(self, revision: str, commit: str) -> None:
        write_bytes_atomic(self.root / "refs" / quote(revision, safe=""), commit.encode())

    def commit_for(self, revision: str | None) -> str | None:
        rev = revision or "main"
        if re.fullmatch(r"[0-9a-f]{40}", rev):
            return rev
        ref = self.root / "refs" / quote(rev, safe="")
        return ref.read_text().strip() if ref.is_file() else None

    def config(self, repo: remote.RemoteRepo) -> Path:
        """config.json of the commit, downloaded once (through huggingface_hub) into the commit's folder."""
        path = self.folder(repo.commit) / "config.json"
        if not path.is_file():
            from huggingface_hub import hf_hub_download

            try:
                with remote.quiet_retries():
                    got = hf_hub_download(repo.repo_id, "config.json", revision=repo.commit)
            except Exception as e:
                raise remote.hub_error(e, repo.repo_id, repo.revision) from e
            write_bytes_atomic(path, Path(got).read_bytes())
        return path

    def complete(self, commit: str) -> bool:
        """A finished cache: config.json, qk.safetensors of the size its header says, no fetch in progress."""
        f = self.file(commit)
        if not (f.is_file() and (self.folder(commit) / "config.json").is_file()) or self.progress(commit).exists():
            return False
        header = read_header(f)
        return header is not None and f.stat().st_size == header[0]

    def done(self, commit: str, plan: HubPlan) -> set[str]:
        """Names of the plan's tensors already written (none if the file does not match the plan: it is rebuilt)."""
        f = self.file(commit)
        header = read_header(f) if f.is_file() else None
        if header is None or header[1] != cache_layout(plan) or f.stat().st_size != header[0]:
            return set()
        if not self.progress(commit).exists():
            return set(plan.spans)
        try:
            names = json.loads(self.progress(commit).read_text())
        except (OSError, ValueError):
            return set()
        return {n for n in names if n in plan.spans} if isinstance(names, list) else set()

    def prepare(self, plan: HubPlan) -> None:
        """Create the cache file for ``plan`` (header written, data zero-filled, sparse) unless a matching one exists."""
        f = self.file(plan.commit)
        if plan.cached or (f.is_file() and not self.progress(plan.commit).exists() and self.done(plan.commit, plan)):
            return
        f.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(self.progress(plan.commit), b"[]")
        header = json.dumps({"__metadata__": {"repo": plan.repo_id, "commit": plan.commit},
                             **{n: {"dtype": s["dtype"], "shape": s["shape"], "data_offsets": s["data_offsets"]}
                                for n, s in cache_layout(plan).items()}}, separators=(",", ":")).encode()
        header += b" " * (-len(header) % 8)
        with replacing(f) as tmp, open(tmp, "wb") as fh:
            fh.write(len(header).to_bytes(8, "little") + header)
            fh.truncate(8 + len(header) + plan.total_bytes)


def cache_layout(plan: HubPlan) -> dict[str, dict[str, Any]]:
    out, offset = {}, 0
    for name in sorted(plan.spans):
        s = plan.spans[name]
        out[name] = {"dtype": s.dtype, "shape": list(s.shape), "data_offsets": [offset, offset + s.nbytes]}
        offset += s.nbytes
    return out


def read_header(path: Path) -> tuple[int, dict[str, Any]] | None:
    """(expected file size, tensor entries) of a safetensors file, or None if its header is unreadable."""
    try:
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if n <= 0 or n > 100 * 2**20:
                return None
            data = json.loads(fh.read(n))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    data.pop("__metadata__", None)
    try:
        end = max((int(v["data_offsets"][1]) for v in data.values()), default=0)
    except (TypeError, KeyError, ValueError, IndexError):
        return None
    return 8 + n + end, data
