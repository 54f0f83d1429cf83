"""The Hugging Face Hub reader: a repo id such as ``"gpt2"`` or ``"HuggingFaceTB/SmolLM2-135M-Instruct"`` (or
``"hf://org/name"``, ``"hf://org/name@revision"``), read without downloading the checkpoint.

How a Hub model is read (the default, ``fetch="remote"``):

1. one API call resolves the revision to a commit;
2. each weight file (``model.safetensors``, or the shards ``model.safetensors.index.json`` lists: a stale
   ``consolidated.safetensors`` next to the index is never touched) is resolved once and its safetensors header
   read by one range request; ``config.json`` is downloaded (one request);
3. the plan: which tensors scoring needs (Q and K, the query bias, the QK-norm gains and the input-norm gains, so
   that every ``qk_norm`` / ``input_norm`` choice reads from the same cache), grouped per layer;
4. while the layers are scored, each layer's tensors are fetched by HTTP range requests (adjacent ranges joined into
   one request) and written into a local safetensors file per (repo, commit) under
   :func:`qkgeometry.catalogue.cache_dir` (``hub/models--ORG--NAME/COMMIT/qk.safetensors``), read from the
   storage URL the file's one ``/resolve`` request gave (so ``/resolve`` requests per model are the shards + 2). Of a
   row-fused QKV weight (GPT-NeoX's ``query_key_value``, Phi-3's ``qkv_proj``, ModernBERT's ``Wqkv``) only the Q
   and K rows are fetched (V blocks of at most 1 MiB between them are read through); GPT-2's ``c_attn`` keeps
   Q, K and V side by side in columns and is fetched whole; :func:`hub_plan` says which.

Every header is checked as the local reader checks a file (the data starts after the header, tensors tile it
without gap or overlap, nothing trails), and the commit the Hub reports must be a 40-digit commit id. The cache
file is shared by every model open on that commit, in one process or several (a file lock serialises writers),
and the sha256 of every fetched tensor is kept beside it: a cached tensor whose bytes changed is fetched again
(or refused offline).

A fetch that stops (a dropped network, Ctrl-C, a range slower than a minimum rate) keeps every tensor already
written; the rerun fetches only the rest. A 429 answer is waited out as its ``Retry-After`` / ``RateLimit``
headers say. A rerun of a finished model sends no data request, and with ``HF_HUB_OFFLINE=1`` no request at all
(the revision is remembered per repo). ``fetch="snapshot"`` downloads the config and every ``*.safetensors`` file with
``snapshot_download`` instead (the huggingface_hub cache), for the rare checkpoint the remote path cannot read.
Chapter 4 ("Models from the Hub") shows the plan and what it costs.

The package reads like its pipeline:

==============  ==================================================================================================
module          step
==============  ==================================================================================================
``client``      resolve: the commit, each file's one ``/resolve``, range reads from the storage URL, every failure
                as one line (the HTTP client, through huggingface_hub)
``plan``        plan: the source names, which tensors and byte ranges scoring reads (:class:`HubPlan`)
``cache``       cache: the local safetensors file per (repo, commit), its manifest of sha256s and its lock
``fetch``       fetch: the plan's ranges into the cache file, one layer group at a time
``__init__``    open: :func:`open_hub` (what ``load_qk`` calls), :func:`hub_plan`, :func:`plan_table`
==============  ==================================================================================================
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...architectures import QKNorm, get_architecture
from ...errors import ConfigError, SourceError, first_line
from ...model import SourcePlans
from ..hf_config import read_config, resolve_plans
from ..safetensors_format import row_pieces
from . import client
from .cache import HubCache, read_header
from .fetch import Fetcher
from .plan import (
    HF_PREFIX,
    FetchMode,
    HubPlan,
    Span,
    format_bytes,
    is_hub_source,
    looks_like_path,
    parse_hub_source,
    record_plans,
)

__all__ = ["HF_PREFIX", "FetchMode", "HubPlan", "format_bytes", "hub_plan", "is_hub_source", "looks_like_path",
           "open_hub", "parse_hub_source", "plan_table", "plan_text"]


def hub_plan(source: str, revision: str | None = None) -> HubPlan:
    """The fetch plan of a Hub model, from its safetensors headers (a few small range requests; no weights).
    ``qkgeometry score ID --plan`` and ``qkgeometry survey --preset ... --plan`` print it."""
    repo_id, revision = parse_hub_source(source, revision)
    repo = client.open_remote(repo_id, revision)
    return _plan_remote(client.HubFiles(repo), HubCache(repo_id))[0]


def _plan_remote(files: client.HubFiles, store: HubCache) -> tuple[HubPlan, Path]:
    repo = files.repo
    headers, starts, weight_map = client.safetensors_headers(files)
    header_requests = files.requests + 1  # and config.json, read once (a cold start reads it)
    config_path = store.config(files)
    header_bytes = files.received  # the headers and config.json (none when config.json is already cached)
    config = read_config(config_path)
    arch = get_architecture(config.model_type)
    spans = {}
    for file, entries in headers.items():
        for name, t in entries.items():
            if weight_map.get(name, file) != file:
                continue
            begin, end = t["data_offsets"]
            spans[name] = Span(name, file, starts[file] + begin, starts[file] + end, t["dtype"], tuple(t["shape"]))
    try:
        groups, weights, fused, share, rows = record_plans(arch, config, spans)
    except ConfigError as e:
        raise ConfigError(f"config.json of Hub repo {repo.repo_id!r}: {e}") from e
    needed = {n for g in groups for n in g}
    for n, qk in rows.items():
        pieces = row_pieces(qk, spans[n].nbytes // spans[n].shape[0])
        if pieces != ((0, spans[n].nbytes),):
            spans[n] = replace(spans[n], rows=pieces)
    sizes = {f: files.sizes[f] for f in headers}
    plan = HubPlan(repo.repo_id, repo.revision, repo.commit, repo.gated, {n: spans[n] for n in sorted(needed)},
                   groups, frozenset(weights), frozenset(fused), share, sum(sizes.values()), len(sizes),
                   header_requests=header_requests, header_bytes=header_bytes)
    plan.cached = store.done(repo.commit, plan)
    return plan, config_path


def plan_table(sources: Iterable[Any]) -> Any:
    """One row per Hub model (bytes of the checkpoint, of its Q/K weights, still to fetch, already cached; the HTTP
    requests a fetch sends; gated or not; fused tensors fetched whole, or only their Q/K rows and the V bytes that
    saves) and a total row, as a pandas DataFrame; local sources get a row that says
    so. A source that cannot be planned (not found, a header that disagrees with its config, a dropped network)
    gets its one-line reason in ``note``; the other rows are planned all the same."""
    import pandas as pd

    rows = []
    for entry in sources:  # a source, or a catalogue PresetEntry (its .source and .name)
        src = getattr(entry, "source", entry)
        label = getattr(entry, "name", None) or str(src)
        if not isinstance(src, str) or not is_hub_source(src):
            rows.append({"model": label, "note": "local (nothing to fetch)"})
            continue
        try:
            row = _offline_row(src) if client.is_offline() else hub_plan(src).row()
            row["model"] = label
            rows.append(row)
        except SourceError as e:
            rows.append({"model": label, "note": str(e)})
        except ValueError as e:  # a header that disagrees with its config (a split refuses a shape)
            rows.append({"model": label, "note": client.scrub(f"cannot plan {src!r}: {first_line(e)}")})
        except Exception as e:  # one source's failure is its row's note, never the table's end
            rows.append({"model": label, "note": str(client.hub_error(e, str(src), None))})
    frame = pd.DataFrame(rows)
    sizes = ("checkpoint_bytes", "qk_bytes", "fetch_bytes", "cached_bytes", "header_bytes", "requests",
             "rows_saved_bytes")
    for col in sizes:
        if col not in frame:
            frame[col] = float("nan")
    if len(frame):
        total = {"model": "total", **{c: frame[c].sum(min_count=1) for c in sizes}}
        frame = pd.concat([frame, pd.DataFrame([total])], ignore_index=True)
    return frame


def plan_text(frame: Any) -> str:
    """The plan of :func:`plan_table` as the command line prints it: sizes in kB / MB / GB, empty columns left out,
    and a line that says what each column counts."""
    import pandas as pd

    headers = {"model": "model", "commit": "commit", "gated": "gated", "checkpoint_bytes": "checkpoint",
               "qk_bytes": "Q/K weights", "fetch_bytes": "to fetch", "header_bytes": "header probe",
               "cached_bytes": "cached", "requests": "requests", "fused_whole": "fetched whole (fused QKV)",
               "rows_only": "Q/K rows only (fused QKV)", "rows_saved_bytes": "V rows not fetched", "note": "note"}
    cols = [c for c in headers if c in frame]
    shown = frame[cols].rename(columns=headers)
    if "requests" in shown:
        shown["requests"] = shown["requests"].map(lambda v: "" if v != v else f"{int(v)}")
    if not frame.get("rows_saved_bytes", pd.Series(dtype=float)).fillna(0).any():
        shown = shown.drop(columns=["V rows not fetched", "Q/K rows only (fused QKV)"], errors="ignore")
    fused_whole = "fetched whole (fused QKV)" in shown and shown["fetched whole (fused QKV)"].fillna("").astype(
        bool).any()
    if not fused_whole:
        shown = shown.drop(columns=["fetched whole (fused QKV)"], errors="ignore")
    for c in ("checkpoint", "Q/K weights", "to fetch", "header probe", "cached", "V rows not fetched"):
        if c in shown:
            shown[c] = shown[c].map(lambda v: "" if v != v else format_bytes(v))
    if "gated" in shown:
        shown["gated"] = shown["gated"].map(lambda v: "yes" if v is True else "no" if v is False else "")
    lines = [shown.fillna("").to_string(index=False)]
    if shown.columns.isin(["to fetch", "header probe"]).any() and frame["fetch_bytes"].notna().any():
        fused = "; a fused QKV weight fetched whole brings its V rows too" if fused_whole else ""
        lines.append(f"Q/K weights: the query and key weights alone. to fetch: what a fetch still reads (those "
                     f"weights with their biases and norm gains{fused}). header probe: read first, once per revision, "
                     "to find the tensors (config.json and the start of each weight file). cached: already in the "
                     "qkgeometry cache. requests: HTTP requests a fetch sends.")
    return "\n".join(lines)


def _offline_row(source: str) -> dict[str, Any]:
    """The plan row of a Hub model with ``HF_HUB_OFFLINE`` set: what the qkgeometry cache holds (a run reads it
    from there), or a note that a run would fail. Nothing is asked of the Hub."""
    repo_id, revision = parse_hub_source(source)
    store = HubCache(repo_id)
    commit = store.commit_for(revision)
    if commit is None or not store.complete(commit):
        partly = commit is not None and store.file(commit).exists()
        return {"model": repo_id, "note": f"offline, and {'only partly' if partly else 'not'} in the qkgeometry "
                                          "cache: a run fails until HF_HUB_OFFLINE is unset"}
    header = read_header(store.file(commit))
    cached = sum(int(e["data_offsets"][1]) - int(e["data_offsets"][0]) for e in header[1].values()) if header else 0
    return {"model": repo_id, "commit": commit[:12], "fetch_bytes": 0, "cached_bytes": cached, "header_bytes": 0,
            "requests": 0, "note": "offline: in the qkgeometry cache, nothing to fetch"}


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
    if client.is_offline():
        commit = store.commit_for(revision)
        if commit is not None and not store.complete(commit):
            changed = store.verified(commit)[1]
            if changed:
                raise SourceError(f"the cached Q/K of {repo_id!r} in {str(store.file(commit))!r} changed after they "
                                  f"were fetched (tensor {changed[0]!r} no longer matches its sha256), and "
                                  "HF_HUB_OFFLINE is set; unset HF_HUB_OFFLINE to fetch them again.")
        if commit is None or not store.complete(commit):
            raise SourceError(f"HF_HUB_OFFLINE is set and {repo_id!r} (revision {revision or 'main'!r}) is not in the "
                              f"qkgeometry cache ({str(store.root)!r}"
                              f"{', partly fetched' if commit and store.file(commit).exists() else ''}); unset "
                              "HF_HUB_OFFLINE to fetch it, or pass a local model folder or an offline alias such as "
                              "'offline:minilm-l6'.")
        return _open_cached(store, commit, repo_id, label, qk_norm)
    repo = client.open_remote(repo_id, revision)
    store.remember(repo.revision, repo.commit)
    if store.complete(repo.commit):
        return _open_cached(store, repo.commit, repo_id, label, qk_norm)
    files = client.HubFiles(repo)
    plan, _config_path = _plan_remote(files, store)
    with store.lock(repo.commit):
        store.prepare(plan)
        store.forget_changed(repo.commit)
        plan.cached = store.done(repo.commit, plan)
        fetcher = Fetcher(files, plan, store)  # opens the file whose cached tensors were just counted
    try:
        opened = _open_cache_file(store, repo.commit, repo_id, label, qk_norm, fetcher.ensure, fetcher.release)
        if not fetcher.is_cache_file():  # replaced between the two opens: the model would read another file
            opened.close()
            raise SourceError(f"the cache file {str(store.file(repo.commit))!r} of {repo_id!r} was replaced while "
                              "it was being opened (another process cleared or rewrote the cache); rerun.")
    except BaseException:
        fetcher.release()
        raise
    return opened


def _open_cached(store: HubCache, commit: str, repo_id: str, label: str, qk_norm: QKNorm) -> SourcePlans:
    return _open_cache_file(store, commit, repo_id, label, qk_norm, None, None)


def _open_cache_file(store: HubCache, commit: str, repo_id: str, label: str, qk_norm: QKNorm,
                     ensure: Callable[[str], None] | None, on_close: Callable[[], None] | None) -> SourcePlans:
    from ..safetensors import SafetensorsIndex, check_quantization

    config_path = store.folder(commit) / "config.json"
    config = read_config(config_path)
    arch = get_architecture(config.model_type)
    index, handles = SafetensorsIndex.open([store.file(commit)])

    def get(tensor: str) -> Any:
        if ensure is not None:
            ensure(tensor)
        return index.get(tensor)

    try:  # a check that raises leaves no file open
        check_quantization(config_path, config, index)
        plans = resolve_plans(arch, config, index.names, get, qk_norm)
    except ConfigError as e:
        handles.clear()
        raise ConfigError(f"config.json of Hub repo {repo_id!r}: {e}") from e
    except BaseException:
        handles.clear()
        raise

    def close() -> None:
        handles.clear()
        if on_close is not None:
            on_close()

    return SourcePlans(label, arch, plans, repo_id, commit, close=close, config=config.data)


def _remember_ref(snapshot: Path, revision: str, commit: str) -> None:
    """Record in huggingface_hub's cache that ``revision`` (a branch or tag) names ``commit``
    (``refs/<revision>`` beside ``snapshots/<commit>``), as a download by branch does, so that an offline rerun that
    names the branch finds the snapshot."""
    from ..._files import write_bytes_atomic

    refs = snapshot.parent.parent / "refs"
    target = refs / revision
    if not target.resolve().is_relative_to(refs.resolve()):  # a revision such as "../x" names no ref
        return
    # a read-only cache keeps the snapshot complete: only an offline rerun must then name the commit
    with contextlib.suppress(OSError):
        write_bytes_atomic(target, commit.encode())


def open_snapshot(repo_id: str, revision: str | None, label: str, qk_norm: QKNorm = "folded") -> SourcePlans:
    """``snapshot_download`` of config.json and every ``*.safetensors`` file (the huggingface_hub cache), then the
    folder reader; the revision recorded is the snapshot's commit."""
    from huggingface_hub import snapshot_download

    from ..safetensors import open_folder

    # online, the commit the endpoint reports is checked before huggingface_hub names folders by it, and every file
    # is downloaded from that commit (a branch could move between the two calls); offline no endpoint is asked
    repo = None if client.is_offline() else client.open_remote(repo_id, revision)
    try:
        with client.quiet_retries():
            folder = snapshot_download(repo_id, revision=repo.commit if repo is not None else revision,
                                       allow_patterns=["config.json", "*.safetensors", "*.safetensors.index.json"])
    except Exception as e:
        raise client.hub_error(e, repo_id, revision) from e
    if repo is not None and repo.revision != repo.commit:
        _remember_ref(Path(folder), repo.revision, repo.commit)
    if not any(Path(folder).glob("*.safetensors")):
        raise client.no_safetensors_error(repo or client.open_remote(repo_id, revision))
    opened = open_folder(Path(folder), label, qk_norm)
    return replace(opened, source=repo_id, revision=Path(folder).name)  # the snapshot folder is the commit hash
