"""Talking to the Hugging Face Hub through huggingface_hub: a repo's commit and files, its safetensors headers (by
range request), byte ranges of its files, and every failure turned into one line a reader can act on.

Every request goes through huggingface_hub's own session (``HfApi``, ``get_safetensors_metadata``,
``http_backoff``), so tokens (``hf auth login`` or ``HF_TOKEN``), redirects to the storage host, retries and
Xet-backed files are the library's business. :mod:`qkgeometry.readers.hub` builds on it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import SourceError

__all__ = ["RemoteRepo", "fetch_range", "hub_error", "is_offline", "open_remote"]

#: file names that hold pickled (or otherwise code-carrying) weights: never fetched, never loaded
PICKLED_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".h5", ".msgpack")


def is_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set, as huggingface_hub reads it."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


@dataclass(frozen=True)
class RemoteRepo:
    """One commit of a Hub model repo, as the API describes it."""

    repo_id: str
    revision: str  # what the caller asked for ("main", a tag, a commit)
    commit: str  # the 40-digit commit it resolved to
    files: tuple[str, ...]
    gated: bool | str

    def api(self) -> Any:
        from huggingface_hub import HfApi

        return HfApi()  # a fresh client: it reads HF_ENDPOINT and the token as they are now


def open_remote(repo_id: str, revision: str | None) -> RemoteRepo:
    """Resolve ``revision`` (default ``"main"``) of ``repo_id`` to a commit with one API call."""
    from huggingface_hub import HfApi

    rev = revision or "main"
    try:
        info = HfApi().model_info(repo_id, revision=rev)
    except Exception as e:
        raise hub_error(e, repo_id, rev) from e
    files = tuple(s.rfilename for s in (info.siblings or ()))
    return RemoteRepo(repo_id, rev, info.sha, files, info.gated or False)


def safetensors_headers(repo: RemoteRepo) -> Any:
    """``get_safetensors_metadata`` for the commit (one small range request per weight file; a stale
    ``consolidated.safetensors`` next to an index is never read), plus each file's size."""
    api = repo.api()
    try:
        meta = api.get_safetensors_metadata(repo.repo_id, revision=repo.commit)
    except Exception as e:
        from huggingface_hub.errors import NotASafetensorsRepoError

        if isinstance(e, NotASafetensorsRepoError):
            raise no_safetensors_error(repo) from e
        raise hub_error(e, repo.repo_id, repo.revision) from e
    try:
        infos = api.get_paths_info(repo.repo_id, sorted(meta.files_metadata), revision=repo.commit)
    except Exception as e:
        raise hub_error(e, repo.repo_id, repo.revision) from e
    sizes = {p.path: p.size for p in infos if getattr(p, "size", None) is not None}
    missing = sorted(set(meta.files_metadata) - set(sizes))
    if missing:
        raise SourceError(f"Hub repo {repo.repo_id!r} (commit {repo.commit[:12]}) lists {missing[0]!r} in its "
                          "safetensors index, but the file is not in the repo; pass another `revision`.")
    return meta, sizes


def no_safetensors_error(repo: RemoteRepo) -> SourceError:
    """A repo without safetensors weights: name what it has, and a revision that has safetensors if one exists."""
    ggufs = sorted(f for f in repo.files if f.endswith(".gguf"))
    if ggufs:
        return SourceError(f"Hub repo {repo.repo_id!r} holds GGUF files ({', '.join(ggufs[:3])}"
                           f"{' ...' if len(ggufs) > 3 else ''}), which are not read from the Hub directly: download "
                           f"the one you want (`hf download {repo.repo_id} {ggufs[0]}`) and pass its local path.")
    pickled = sorted(f for f in repo.files if f.endswith(PICKLED_SUFFIXES))
    has = f" It has {', '.join(pickled[:3])}{' ...' if len(pickled) > 3 else ''}." if pickled else ""
    alt = safetensors_revision(repo)
    hint = (f" Revision {alt!r} has safetensors weights: pass `revision={alt!r}`." if alt else
            " Convert a trusted copy once with transformers (`save_pretrained(dir, safe_serialization=True)`) and "
            "pass that folder.")
    return SourceError(f"Hub repo {repo.repo_id!r} (revision {repo.revision!r}) has no *.safetensors weights.{has} "
                       f"qkgeometry never loads pickled weights (they can run code).{hint}")


def safetensors_revision(repo: RemoteRepo, limit: int = 6) -> str | None:
    """A branch or open pull request (the Hub's safetensors conversions are ``refs/pr/N``) whose files include
    safetensors weights, looking at ``limit`` refs at most; None if none (or the API cannot say)."""
    api = repo.api()
    try:
        refs = api.list_repo_refs(repo.repo_id, include_pull_requests=True)
        names = [r.ref for r in (*refs.branches, *(refs.pull_requests or ()))]
    except Exception:
        return None
    for ref in names[:limit]:
        if ref in (repo.revision, f"refs/heads/{repo.revision}"):
            continue
        try:
            info = api.model_info(repo.repo_id, revision=ref)
        except Exception:
            continue
        if any(s.rfilename.endswith(".safetensors") for s in (info.siblings or ())):
            return ref.removeprefix("refs/heads/")
    return None


@contextlib.contextmanager
def quiet_retries() -> Iterator[None]:
    """huggingface_hub logs one warning per retry (a dropped network printed eleven lines); the failure, if it
    persists, is reported once by :func:`hub_error` instead."""
    log = logging.getLogger("huggingface_hub")
    old = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(old)


def fetch_range(repo: RemoteRepo, filename: str, start: int, end: int, *, retries: int = 3) -> bytes:
    """Bytes ``[start, end)`` of ``filename`` at the repo's commit: one HTTP range request through huggingface_hub
    (token, redirect to the storage host, retries on 429/5xx, timeouts and dropped connections)."""
    from huggingface_hub import constants, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_backoff

    url = hf_hub_url(repo.repo_id, filename, revision=repo.commit)
    headers = {**build_hf_headers(), "Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}
    with quiet_retries():
        r = http_backoff("GET", url, headers=headers, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
                         max_retries=retries, base_wait_time=0.5, max_wait_time=4)
    hf_raise_for_status(r)
    data = r.content
    if r.status_code == 200 and len(data) > end - start:  # a server that ignores Range sends the whole file
        data = data[start:end]
    if len(data) != end - start:
        raise SourceError(f"the Hub sent {len(data)} bytes of {filename!r} in {repo.repo_id!r} where {end - start} "
                          f"were asked for (bytes {start}-{end - 1}); rerun to fetch them again.")
    return data


def network_errors() -> tuple[type[BaseException], ...]:
    import httpx2
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    return (httpx2.TransportError, OSError, OfflineModeIsEnabled, LocalEntryNotFoundError, TimeoutError)


def hub_error(e: BaseException, repo_id: str, revision: str | None, *, cached: str = "") -> SourceError:
    """One line for a failed Hub call: what happened, with the Hub's own words where they help, and what to do.
    ``cached`` says what is already on disk (for network failures)."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(e, SourceError):
        return e
    hub_says = ""
    if isinstance(e, HfHubHTTPError):
        msg = getattr(e, "server_message", None) or ""
        hub_says = f" (the Hub says: {' '.join(msg.split())})" if msg.strip() else ""
    status = getattr(getattr(e, "response", None), "status_code", None)
    page = f"https://huggingface.co/{repo_id}"
    if isinstance(e, GatedRepoError):  # before RepositoryNotFoundError, its base class
        if status == 403:
            return SourceError(f"Hub repo {repo_id!r} is gated and your account has not been granted access"
                               f"{hub_says}: accept the licence on the model's Hub page ({page}), then retry.")
        return SourceError(f"Hub repo {repo_id!r} is gated: log in with `hf auth login` or set HF_TOKEN (a token "
                           f"of an account that accepted the licence on {page}), then retry{hub_says}.")
    if isinstance(e, RepositoryNotFoundError):
        return SourceError(f"Hub repo {repo_id!r} was not found ({status} Repository Not Found): check the "
                           "spelling, or the model is private (then log in with `hf auth login` or set HF_TOKEN).")
    if isinstance(e, RevisionNotFoundError):
        return SourceError(f"revision {revision!r} of Hub repo {repo_id!r} was not found{hub_says}: pass an "
                           "existing branch, tag or commit as `revision`, or leave it out for 'main'.")
    if isinstance(e, RemoteEntryNotFoundError):
        return SourceError(f"Hub repo {repo_id!r} (revision {revision!r}) lacks a file qkgeometry needs"
                           f"{hub_says}: it needs config.json next to *.safetensors weights.")
    if isinstance(e, HfHubHTTPError):
        return SourceError(f"the Hub answered {status} for {repo_id!r}{hub_says}; retry later.")
    if isinstance(e, network_errors()):
        from ..errors import first_line

        what = f"{type(e).__name__}: {first_line(e)}"
        if is_offline():
            return SourceError(f"HF_HUB_OFFLINE is set and {repo_id!r} (revision {revision or 'main'!r}) is not "
                               f"fully in the qkgeometry cache{cached}; unset HF_HUB_OFFLINE to fetch it, or pass a "
                               "local model folder or an offline alias such as 'offline:minilm-l6'.")
        return SourceError(f"could not reach the Hugging Face Hub for {repo_id!r} ({what}){cached}; check the "
                           "network and rerun: the fetch resumes where it stopped.")
    from ..errors import first_line

    return SourceError(f"reading {repo_id!r} from the Hub failed ({type(e).__name__}: {first_line(e)}){cached}; "
                       "rerun, and report it if it persists.")
