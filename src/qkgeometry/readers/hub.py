"""The Hugging Face Hub reader: a repo id such as ``"gpt2"`` or ``"HuggingFaceTB/SmolLM2-135M-Instruct"`` (or
``"hf://org/name"``, ``"hf://org/name@revision"``), read without downloading the checkpoint.

How a Hub model is read (the default, ``fetch="remote"``):

1. one API call resolves the revision to a commit;
2. the safetensors headers are read by range request (``get_safetensors_metadata``; a stale
   ``consolidated.safetensors`` next to the shard index is never touched), and ``config.json`` is downloaded;
3. the plan: which tensors scoring needs (Q and K, the query bias, the QK-norm gains and the input-norm gains, so
   that every ``qk_norm`` / ``input_norm`` choice reads from the same cache), grouped per layer;
4. while the layers are scored, each layer's tensors are fetched by HTTP range requests (adjacent ranges joined into
   one request) and written into a local safetensors file per (repo, commit) under
   :func:`qkgeometry.catalogue.cache_dir` (``hub/models--ORG--NAME/COMMIT/qk.safetensors``). Fused QKV tensors
   whose Q/K part is not a contiguous byte range (GPT-2's ``c_attn``, GPT-NeoX's ``query_key_value``, ModernBERT's
   ``Wqkv``) are fetched whole; :func:`hub_plan` says which.

A fetch that stops (a dropped network, Ctrl-C) keeps every tensor already written; the rerun fetches only the rest.
A rerun of a finished model sends no data request, and with ``HF_HUB_OFFLINE=1`` no request at all (the revision is
remembered per repo). ``fetch="snapshot"`` downloads the config and every ``*.safetensors`` file with
``snapshot_download`` instead (the huggingface_hub cache), for the rare checkpoint the remote path cannot read.
Chapter 4 ("Models from the Hub") shows the plan and what it costs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from ..architectures import QKNorm, get_architecture
from ..errors import SourceError
from ..model import SourcePlans
from . import remote
from .hf_config import read_config, resolve_plans

__all__ = ["FetchMode", "HubPlan", "format_bytes", "hub_plan", "looks_like_path", "open_hub", "parse_hub_source",
           "plan_table"]

FetchMode = Literal["remote", "snapshot"]

HF_PREFIX = "hf://"
#: ranges of one file closer than this are fetched in one request (the gap is read and dropped)
COALESCE_GAP = 4096

#: safetensors dtype tags -> torch dtype names, for the shape-only (meta) tensors a fetch plan is recorded with
_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
           "F8_E5M2": "float8_e5m2", "I8": "int8", "U8": "uint8", "I16": "int16", "I32": "int32", "I64": "int64",
           "BOOL": "bool"}
_SCALE_SUFFIXES = (".SCB", ".weight.SCB", ".weight_scale", ".weight_scale_inv", ".scales", ".weight.absmax")


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
    if not re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", source):
        raise SourceError(f"`source` {source!r} is not a Hub repo id ('name' or 'org/name', letters, digits, '-', "
                          "'_', '.'); pass an existing local path or a Hub id such as 'gpt2'.")
    return source, revision


# ------------------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class Span:
    """One tensor of a remote file: its absolute byte range, dtype tag and shape."""

    name: str
    file: str
    start: int
    end: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return self.end - self.start


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

    @property
    def total_bytes(self) -> int:
        """Bytes of every tensor the plan reads (Q/K weights, biases and gains)."""
        return sum(s.nbytes for s in self.spans.values())

    @property
    def qk_bytes(self) -> int:
        """Bytes of the Q and K weights alone (for a fused QKV tensor, its Q/K share)."""
        return round(sum(s.nbytes * (self.fused_share if n in self.fused else 1.0)
                         for n, s in self.spans.items() if n in self.weights))

    @property
    def cached_bytes(self) -> int:
        return sum(self.spans[n].nbytes for n in self.cached if n in self.spans)

    @property
    def fetch_bytes(self) -> int:
        """Bytes still to fetch (0 once cached)."""
        return self.total_bytes - self.cached_bytes

    def row(self) -> dict[str, Any]:
        return {"model": self.repo_id, "commit": self.commit[:12], "gated": bool(self.gated),
                "checkpoint_bytes": self.checkpoint_bytes, "qk_bytes": self.qk_bytes,
                "fetch_bytes": self.fetch_bytes, "cached_bytes": self.cached_bytes,
                "fused_whole": ", ".join(sorted({_template(n) for n in self.fused})) or ""}


def _template(name: str) -> str:
    return re.sub(r"\.\d+\.", ".{i}.", name)


def _record_plans(arch, config, infos: dict[str, Any]) -> tuple[list[tuple[str, ...]], set[str], set[str], float]:
    """Run every layer's split against shape-only tensors and record which tensors it reads: per-layer groups, the
    Q/K weight names, the fused names, and the Q/K share of a fused tensor. (Shapes without memory: torch's meta
    tensors, so recording a Hub model's fetch plan imports torch; reading the fetched tensors does not.)"""
    import torch

    def fake(name: str) -> Any:
        info = infos[name]
        touched.append(name)
        dtype = _DTYPES.get(info.dtype)
        if dtype is None:
            raise SourceError(f"tensor {name!r} is stored as {info.dtype}, which this reader cannot turn into real "
                              "values; score the unquantised checkpoint or a GGUF export.")
        return torch.zeros(tuple(info.shape), dtype=getattr(torch, dtype), device="meta")

    plans = resolve_plans(arch, config, set(infos), fake, "folded")
    groups, weights, fused, share = [], set(), set(), 1.0
    for plan in plans:
        variants = [plan]
        if plan.block.input_norm is not None:
            with contextlib.suppress(SourceError):
                variants.append(plan.with_input_norm_folded(arch.model_type))
        d = plan.dims
        for i in range(d.n_layers):
            touched: list[str] = []
            for v in variants:
                v.split(i)  # on meta tensors: shapes are checked, nothing is computed
            q = plan.block.q.format(i=i)
            k = plan.block.k.format(i=i) if plan.block.k else None
            names = list(dict.fromkeys(touched))
            for n in list(names):  # a quantised weight's scale travels with it
                for s in _SCALE_SUFFIXES:
                    if n.removesuffix(".weight") + s in infos:
                        names.append(n.removesuffix(".weight") + s)
            for n in names:
                if n.endswith("." + q) or n == q or (k and (n.endswith("." + k) or n == k)):
                    weights.add(n)
                    if k is None:
                        fused.add(n)
                        share = (d.n_heads + d.n_kv_heads) / (d.n_heads + 2 * d.n_kv_heads)
            groups.append(tuple(dict.fromkeys(names)))
    return groups, weights, fused, share


def hub_plan(source: str, revision: str | None = None) -> HubPlan:
    """The fetch plan of a Hub model, from its safetensors headers (a few small range requests; no weights).
    ``qkgeometry score ID --plan`` and ``qkgeometry survey --preset ... --plan`` print it."""
    repo_id, revision = parse_hub_source(source, revision)
    repo = remote.open_remote(repo_id, revision)
    return _plan_remote(repo, HubCache(repo_id))[0]


def _plan_remote(repo: remote.RemoteRepo, store: HubCache) -> tuple[HubPlan, Path]:
    meta, sizes = remote.safetensors_headers(repo)
    config_path = store.config(repo)
    config = read_config(config_path)
    arch = get_architecture(config.model_type)
    spans, infos = {}, {}
    for file, fmeta in meta.files_metadata.items():
        data_len = max((t.data_offsets[1] for t in fmeta.tensors.values()), default=0)
        base = sizes[file] - data_len  # 8 + header length: safetensors data has no holes and ends the file
        for name, t in fmeta.tensors.items():
            if meta.weight_map.get(name, file) != file:
                continue
            infos[name] = t
            spans[name] = Span(name, file, base + t.data_offsets[0], base + t.data_offsets[1], t.dtype,
                               tuple(t.shape))
    try:
        groups, weights, fused, share = _record_plans(arch, config, infos)
    except SourceError as e:
        if str(e).startswith(f"the {arch.model_type} config"):
            raise SourceError(f"config.json of Hub repo {repo.repo_id!r}: {e}") from e
        raise
    needed = {n for g in groups for n in g}
    plan = HubPlan(repo.repo_id, repo.revision, repo.commit, repo.gated, {n: spans[n] for n in sorted(needed)},
                   groups, frozenset(weights), frozenset(fused), share, sum(sizes.values()), len(sizes))
    plan.cached = store.done(repo.commit, plan)
    return plan, config_path


def plan_table(sources: Iterable[Any]) -> Any:
    """One row per Hub model (bytes of the checkpoint, of its Q/K weights, still to fetch, already cached; gated or
    not; fused tensors fetched whole) and a total row, as a pandas DataFrame; local sources get a row that says
    so. A source that cannot be planned gets its one-line reason in ``note``."""
    import pandas as pd

    rows = []
    for entry in sources:  # a source, or a catalogue PresetEntry (its .source and .name)
        src = getattr(entry, "source", entry)
        label = getattr(entry, "name", None) or str(src)
        if not isinstance(src, str) or not is_hub_source(src):
            rows.append({"model": label, "note": "local (nothing to fetch)"})
            continue
        try:
            row = hub_plan(src).row()
            row["model"] = label
            rows.append(row)
        except SourceError as e:
            rows.append({"model": label, "note": str(e)})
    frame = pd.DataFrame(rows)
    sizes = ("checkpoint_bytes", "qk_bytes", "fetch_bytes", "cached_bytes")
    for col in sizes:
        if col not in frame:
            frame[col] = float("nan")
    if len(frame):
        total = {"model": "total", **{c: frame[c].sum() for c in sizes}}
        frame = pd.concat([frame, pd.DataFrame([total])], ignore_index=True)
    return frame


def is_hub_source(source: str) -> bool:
    """A string that load_qk would send to the Hub (not a path, an alias or a random twin)."""
    from ..source_names import OFFLINE_PREFIX

    if source.startswith(HF_PREFIX):
        return True
    if source.startswith((OFFLINE_PREFIX, "random:")) or looks_like_path(source):
        return False
    return not Path(source).expanduser().exists()


# ------------------------------------------------------------------------------------------------ the cache
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
        _write_atomic(self.root / "refs" / quote(revision, safe=""), commit.encode())

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
            _write_atomic(path, Path(got).read_bytes())
        return path

    def complete(self, commit: str) -> bool:
        """A finished cache: config.json, qk.safetensors of the size its header says, no fetch in progress."""
        f = self.file(commit)
        if not (f.is_file() and (self.folder(commit) / "config.json").is_file()) or self.progress(commit).exists():
            return False
        header = _read_header(f)
        return header is not None and f.stat().st_size == header[0]

    def done(self, commit: str, plan: HubPlan) -> set[str]:
        """Names of the plan's tensors already written (none if the file does not match the plan: it is rebuilt)."""
        f = self.file(commit)
        header = _read_header(f) if f.is_file() else None
        if header is None or header[1] != _layout(plan) or f.stat().st_size != header[0]:
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
        _write_atomic(self.progress(plan.commit), b"[]")
        header = json.dumps({"__metadata__": {"repo": plan.repo_id, "commit": plan.commit},
                             **{n: {"dtype": s["dtype"], "shape": s["shape"], "data_offsets": s["data_offsets"]}
                                for n, s in _layout(plan).items()}}, separators=(",", ":")).encode()
        header += b" " * (-len(header) % 8)
        tmp = f.with_name(f.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(len(header).to_bytes(8, "little") + header)
            fh.truncate(8 + len(header) + plan.total_bytes)
        os.replace(tmp, f)


def _layout(plan: HubPlan) -> dict[str, dict[str, Any]]:
    out, offset = {}, 0
    for name in sorted(plan.spans):
        s = plan.spans[name]
        out[name] = {"dtype": s.dtype, "shape": list(s.shape), "data_offsets": [offset, offset + s.nbytes]}
        offset += s.nbytes
    return out


def _read_header(path: Path) -> tuple[int, dict[str, Any]] | None:
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


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------ fetching
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
        self.offsets = {n: e["data_offsets"][0] for n, e in _layout(plan).items()}
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
            _write_atomic(self.store.progress(self.plan.commit), json.dumps(sorted(self.done)).encode())

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _head(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(8)


def format_bytes(n: float) -> str:
    """A byte count for people: ``1.23 GB``, ``45.6 MB``, ``789 kB``."""
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


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


# ------------------------------------------------------------------------------------------------ opening
def open_hub(source: str, revision: str | None, name: str | None, qk_norm: QKNorm = "folded",
             fetch: FetchMode = "remote") -> SourcePlans:
    """The plans of a Hub model; ``fetch="remote"`` (default) reads only the tensors scoring needs (see the module
    docstring), ``fetch="snapshot"`` downloads every safetensors file first. The revision recorded is the commit."""
    if fetch not in ("remote", "snapshot"):
        raise ValueError(f"`fetch` must be 'remote' or 'snapshot'; got {fetch!r}.")
    repo_id, revision = parse_hub_source(source, revision)
    label = name or repo_id
    if fetch == "snapshot":
        return open_snapshot(repo_id, revision, label, qk_norm)
    store = HubCache(repo_id)
    if remote.is_offline():
        commit = store.commit_for(revision)
        if commit is None or not store.complete(commit):
            raise SourceError(f"HF_HUB_OFFLINE is set and {repo_id!r} (revision {revision or 'main'!r}) is not in the "
                              f"qkgeometry cache ({str(store.root)!r}"
                              f"{', partly fetched' if commit and store.file(commit).exists() else ''}); unset "
                              "HF_HUB_OFFLINE to fetch it, or pass a local model folder or an offline alias such as "
                              "'offline:minilm-l6'.")
        return _open_cached(store, commit, repo_id, label, qk_norm)
    repo = remote.open_remote(repo_id, revision)
    store.remember(repo.revision, repo.commit)
    if store.complete(repo.commit):
        return _open_cached(store, repo.commit, repo_id, label, qk_norm)
    plan, _config_path = _plan_remote(repo, store)
    store.prepare(plan)
    plan.cached = store.done(repo.commit, plan)
    fetcher = Fetcher(repo, plan, store)
    return _open_cache_file(store, repo.commit, repo_id, label, qk_norm, fetcher.ensure, fetcher.close)


def _open_cached(store: HubCache, commit: str, repo_id: str, label: str, qk_norm: QKNorm) -> SourcePlans:
    return _open_cache_file(store, commit, repo_id, label, qk_norm, None, None)


def _open_cache_file(store: HubCache, commit: str, repo_id: str, label: str, qk_norm: QKNorm,
                     ensure: Callable[[str], None] | None, on_close: Callable[[], None] | None) -> SourcePlans:
    from .safetensors import SafetensorsIndex, check_quantization

    config_path = store.folder(commit) / "config.json"
    config = read_config(config_path)
    arch = get_architecture(config.model_type)
    index, handles = SafetensorsIndex.open([store.file(commit)])
    check_quantization(config_path, config, index)

    def get(tensor: str) -> Any:
        if ensure is not None:
            ensure(tensor)
        return index.get(tensor)

    try:
        plans = resolve_plans(arch, config, index.names, get, qk_norm)
    except SourceError as e:
        if not str(e).startswith(f"the {arch.model_type} config"):
            raise
        raise SourceError(f"config.json of Hub repo {repo_id!r}: {e}") from e

    def close() -> None:
        handles.clear()
        if on_close is not None:
            on_close()

    return SourcePlans(label, arch, plans, repo_id, commit, close=close)


def open_snapshot(repo_id: str, revision: str | None, label: str, qk_norm: QKNorm = "folded") -> SourcePlans:
    """``snapshot_download`` of config.json and every ``*.safetensors`` file (the huggingface_hub cache), then the
    folder reader; the revision recorded is the snapshot's commit."""
    from huggingface_hub import snapshot_download

    from .safetensors import open_folder

    try:
        with remote.quiet_retries():
            folder = snapshot_download(repo_id, revision=revision,
                                       allow_patterns=["config.json", "*.safetensors", "*.safetensors.index.json"])
    except Exception as e:
        raise remote.hub_error(e, repo_id, revision) from e
    if not any(Path(folder).glob("*.safetensors")):
        raise remote.no_safetensors_error(remote.open_remote(repo_id, revision))
    opened = open_folder(Path(folder), label, qk_norm)
    return replace(opened, source=repo_id, revision=Path(folder).name)  # the snapshot folder is the commit hash
