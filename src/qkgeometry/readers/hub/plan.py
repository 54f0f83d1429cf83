"""What reading a Hub model costs, before any weight is fetched: the source names (``org/name``, ``hf://org/name@rev``)
and the fetch plan (:class:`HubPlan`: which tensors, which byte ranges, how many bytes), recorded by running every
layer's split on shape-only tensors. Chapter 4 ("Models from the Hub")."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...errors import SourceError
from ...source_names import HF_PREFIX
from ..hf_config import resolve_plans
from ..safetensors_format import RANGE_GAP, SCALE_SUFFIXES, join_ranges, returned_dtype

__all__ = [
    "COMMIT_RE",
    "HF_PREFIX",
    "FetchMode",
    "HubPlan",
    "Span",
    "check_revision",
    "coalesce",
    "format_bytes",
    "is_hub_source",
    "looks_like_path",
    "name_template",
    "parse_hub_source",
    "record_plans",
]

FetchMode = Literal["remote", "snapshot"]


#: a commit id: 40 hexadecimal digits (it names cache folders, so nothing else is accepted where one is expected)
COMMIT_RE = re.compile(r"[0-9a-f]{40}")

def looks_like_path(source: str) -> bool:
    """True for strings that name a file or folder (so a missing one is reported as such, not sent to the Hub)."""
    if source.startswith(HF_PREFIX):
        return False
    return (source.startswith((".", "/", "~"))
            or source.endswith((".gguf", ".onnx", ".safetensors", ".json", ".bin", "/"))
            or source.count("/") > 1 or "\\" in source)


def parse_hub_source(source: str, revision: str | None = None) -> tuple[str, str | None]:
    """``"org/name"``, ``"hf://org/name"`` or ``"hf://org/name@rev"`` -> (repo id, revision)."""
    if source.startswith(HF_PREFIX):
        source = source[len(HF_PREFIX):].removeprefix("models/").rstrip("/")
        if "@" in source:
            source, _, rev = source.partition("@")
            if revision is not None and revision != rev:
                raise SourceError(f"`source` names revision {rev!r} but `revision` is {revision!r}; give one.")
            revision = rev
    if revision is not None:
        check_revision(revision)
    if not re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", source):
        raise SourceError(f"`source` {source!r} is not a Hub repo id ('name' or 'org/name', letters, digits, '-', "
                          "'_', '.'); pass an existing local path or a Hub id such as 'gpt2'.")
    return source, revision


def check_revision(revision: str) -> None:
    """Refuse a revision that is not a branch, tag or commit name: path syntax (``.``, ``..``, a leading or trailing
    ``/``, ``//``, a backslash) or characters git forbids in ref names. A revision names files in the caches, so this
    runs before anything is written."""
    if not isinstance(revision, str):
        raise SourceError(f"`revision` must be a string (a branch, tag or commit such as 'main', 'v1.0' or a "
                          f"40-digit commit); got {type(revision).__name__} {revision!r}.")
    parts = revision.split("/")
    if (not revision or revision.startswith("/") or revision.endswith(("/", ".lock"))
            or any(p in ("", ".", "..") or p.startswith(".") for p in parts) or ".." in revision or "@{" in revision
            or re.search(r"[\x00-\x20\x7f~^:?*\[\\%]", revision)):
        raise SourceError(f"`revision` {revision!r} is not a branch, tag or commit name (no '.', '..', leading or "
                          "trailing '/', spaces or ~^:?*[\\); pass a name such as 'main', 'v1.0', 'refs/pr/1' or a "
                          "40-digit commit.")


def is_hub_source(source: str) -> bool:
    """A string that load_qk would send to the Hub (not a path, an alias or a random twin)."""
    from ...source_names import OFFLINE_PREFIX

    if source.startswith(HF_PREFIX):
        return True
    if source.startswith((OFFLINE_PREFIX, "random:")) or looks_like_path(source):
        return False
    return not Path(source).expanduser().exists()


def format_bytes(n: float) -> str:
    """A byte count for people: ``1.23 GB``, ``45.6 MB``, ``789 kB``."""
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


@dataclass(frozen=True)
class Span:
    """One tensor of a remote file: its absolute byte range, dtype tag and shape, and ``rows``: the byte ranges
    (relative to ``start``) that scoring reads, when that is not the whole tensor (the Q and K rows of a row-fused
    QKV weight; its V rows are never fetched)."""

    name: str
    file: str
    start: int
    end: int
    dtype: str
    shape: tuple[int, ...]
    rows: tuple[tuple[int, int], ...] = ()

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    @property
    def pieces(self) -> tuple[tuple[int, int], ...]:
        """Byte ranges to fetch, relative to ``start``."""
        return self.rows or ((0, self.nbytes),)

    @property
    def fetch_nbytes(self) -> int:
        return sum(b - a for a, b in self.pieces)


def coalesce(spans: Iterable[Span], gap: int | None = None
             ) -> list[tuple[str, int, int, list[tuple[Span, int, int]]]]:
    """Byte ranges to request: per file, the spans' pieces joined by :func:`join_ranges` (default gap
    :data:`RANGE_GAP`). Each range lists its (span, piece start, piece end) members, pieces relative to the span's
    start."""
    gap = RANGE_GAP if gap is None else gap
    by_file: dict[str, list[tuple[int, int, tuple[Span, int, int]]]] = {}
    for s in spans:
        for a, b in s.pieces:
            by_file.setdefault(s.file, []).append((s.start + a, s.start + b, (s, a, b)))
    return [(file, start, end, members) for file in sorted(by_file)
            for start, end, members in join_ranges(by_file[file], gap)]


@dataclass
class HubPlan:
    """What scoring a Hub model fetches, from its headers alone (:func:`hub_plan`).

    ``spans``: every tensor to fetch; ``groups``: their names per layer, in reading order; ``weights``: the names
    that are Q/K weights (the rest are biases and gains); ``fused``: fused QKV tensors fetched whole (their Q/K
    share is ``fused_share``); ``checkpoint_bytes``: the size of the safetensors files a snapshot would download;
    ``cached``: names already in the local cache.
    """

    repo_id: str
    revision: str
    commit: str
    gated: bool | str
    spans: dict[str, Span]
    groups: list[tuple[str, ...]]
    weights: frozenset[str]
    fused: frozenset[str]
    fused_share: float
    checkpoint_bytes: int
    header_files: int
    cached: set[str] = field(default_factory=set)

    #: requests made to read the headers (``/resolve`` of the index, config and weight files; header ranges)
    header_requests: int = 0
    #: bytes those requests read: config.json, the shard index and the header probe of each weight file
    #: (:data:`~qkgeometry.readers.hub.client.HEADER_PROBE` bytes, or the whole header when it is longer)
    header_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        """Bytes of every tensor the plan reads (Q/K weights, biases and gains; of a row-fused QKV weight, only its
        Q and K rows)."""
        return sum(s.fetch_nbytes for s in self.spans.values())

    @property
    def row_fused(self) -> frozenset[str]:
        """Fused QKV weights of which only the Q and K rows are fetched."""
        return frozenset(n for n, s in self.spans.items() if s.rows)

    @property
    def rows_saved_bytes(self) -> int:
        """Bytes of V rows that fetching row-fused weights whole would add."""
        return sum(s.nbytes - s.fetch_nbytes for s in self.spans.values())

    @property
    def qk_bytes(self) -> int:
        """Bytes of the Q and K weights alone (for a fused QKV tensor fetched whole, its Q/K share)."""
        return round(sum(s.fetch_nbytes * (self.fused_share if n in self.fused and not s.rows else 1.0)
                         for n, s in self.spans.items() if n in self.weights))

    @property
    def cached_bytes(self) -> int:
        return sum(self.spans[n].fetch_nbytes for n in self.cached if n in self.spans)

    @property
    def fetch_bytes(self) -> int:
        """Bytes still to fetch (0 once cached)."""
        return self.total_bytes - self.cached_bytes

    @property
    def fetch_ranges(self) -> int:
        """Range requests still to send: the missing tensors of each layer group, adjacent ranges joined."""
        seen: set[str] = set(self.cached)
        n = 0
        for group in self.groups:
            todo = [self.spans[m] for m in group if m not in seen and m in self.spans]
            seen.update(group)
            n += len(coalesce(todo))
        return n

    @property
    def requests(self) -> int:
        """HTTP requests a fetch of this model sends from a cold start (the commit lookup, the headers, the data
        ranges); one (the commit lookup) once it is cached."""
        return 1 if self.fetch_bytes == 0 else 1 + self.header_requests + self.fetch_ranges

    def row(self) -> dict[str, Any]:
        return {"model": self.repo_id, "commit": self.commit[:12], "gated": bool(self.gated),
                "checkpoint_bytes": self.checkpoint_bytes, "qk_bytes": self.qk_bytes,
                "fetch_bytes": self.fetch_bytes, "cached_bytes": self.cached_bytes,
                "header_bytes": self.header_bytes if self.fetch_bytes else 0, "requests": self.requests,
                "fused_whole": ", ".join(sorted({name_template(n) for n in self.fused - self.row_fused})) or "",
                "rows_only": ", ".join(sorted({name_template(n) for n in self.row_fused})) or "",
                "rows_saved_bytes": self.rows_saved_bytes}


def name_template(name: str) -> str:
    return re.sub(r"\.\d+\.", ".{i}.", name)


#: Q/K weight entries (all layers) up to which a plan is recorded on numpy views (folding gains into them costs
#: about 10 ns an entry: 3·10⁸ entries, a 3B model, take about as long as importing torch)
NUMPY_PLAN_LIMIT = 300_000_000
#: "numpy" or "torch" to force the stand-ins a plan is recorded with; None chooses as :func:`record_plans` says
PLAN_BACKEND: str | None = None


def record_plans(arch, config, infos: dict[str, Any]
                 ) -> tuple[list[tuple[str, ...]], set[str], set[str], float, dict[str, list[tuple[int, int]]]]:
    """Run every layer's split against shape-only tensors and record which tensors it reads: per-layer groups, the
    Q/K weight names, the fused names, the Q/K share of a fused tensor, and for row-fused weights (blocked
    ``[Q; K; V]`` or per-head interleaved ``(n_heads, 3, head_dim)`` along the output axis, as the converters in
    :mod:`qkgeometry.architectures.layouts` read them) the row ranges that hold Q and K.

    Shapes without weights: numpy views of one zero with every stride 0, so that planning imports no torch; a split
    that folds gains into them does compute on full-size arrays, though, so when that would cost more than
    importing torch (above :data:`NUMPY_PLAN_LIMIT` Q/K entries in all) or torch is already imported, torch's
    ``meta`` tensors stand in (shapes only, no computing)."""
    import sys

    import numpy as np

    backend = {"torch": PLAN_BACKEND == "torch" or (PLAN_BACKEND is None and "torch" in sys.modules)}

    def fake(name: str) -> Any:
        info = infos[name]  # anything with .dtype (a safetensors tag) and .shape
        touched.append(name)
        dtype = returned_dtype(info.dtype)
        if dtype is None:
            raise SourceError(f"tensor {name!r} is stored as {info.dtype}, which this reader cannot turn into real "
                              "values; score the unquantised checkpoint or a GGUF export.")
        if backend["torch"]:
            import torch

            return torch.zeros(tuple(info.shape), dtype=getattr(torch, dtype), device="meta")
        return np.broadcast_to(np.zeros((), dtype=dtype), tuple(info.shape))

    plans = resolve_plans(arch, config, set(infos), fake, "folded")
    entries = sum(p.dims.n_layers * (p.dims.n_heads + p.dims.n_kv_heads) * p.dims.head_dim * p.dims.d_model
                  for p in plans)
    if PLAN_BACKEND is None:
        backend["torch"] = backend["torch"] or entries > NUMPY_PLAN_LIMIT
    groups, weights, fused, share, rows = [], set(), set(), 1.0, {}
    for plan in plans:
        variants = [plan]
        if plan.block.input_norm is not None:
            with contextlib.suppress(SourceError):
                variants.append(plan.with_input_norm_folded(arch.model_type))
        d = plan.dims
        for i in range(d.n_layers):
            touched: list[str] = []
            for v in variants:
                v.split(i)  # on shape-only tensors: shapes are checked
            q = plan.block.q.format(i=i)
            k = plan.block.k.format(i=i) if plan.block.k else None
            names = list(dict.fromkeys(touched))
            for n in list(names):  # a quantised weight's scale travels with it
                for s in SCALE_SUFFIXES:
                    if n.removesuffix(".weight") + s in infos:
                        names.append(n.removesuffix(".weight") + s)
            for n in names:
                if n.endswith("." + q) or n == q or (k and (n.endswith("." + k) or n == k)):
                    weights.add(n)
                    if k is None:
                        fused.add(n)
                        share = (d.n_heads + d.n_kv_heads) / (d.n_heads + 2 * d.n_kv_heads)
                        qk = qk_rows(plan.block.layout, d, tuple(infos[n].shape))
                        if qk is not None:
                            rows[n] = qk
            groups.append(tuple(dict.fromkeys(names)))
    return groups, weights, fused, share, rows


def qk_rows(layout: str, d: Any, shape: tuple[int, ...]) -> list[tuple[int, int]] | None:
    """The rows of a fused QKV weight (output axis first) that hold Q and K, or None when they are not whole rows
    (GPT-2's Conv1D keeps Q, K, V side by side in columns) or the shape is not the one the layout expects."""
    hd = d.head_dim
    if layout == "fused_blocked" and len(shape) == 2 and shape[0] == (d.n_heads + 2 * d.n_kv_heads) * hd:
        return [(0, (d.n_heads + d.n_kv_heads) * hd)]
    if layout == "fused_interleaved" and len(shape) == 2 and shape[0] == 3 * d.n_heads * hd:
        return [(3 * h * hd, 3 * h * hd + 2 * hd) for h in range(d.n_heads)]
    return None
