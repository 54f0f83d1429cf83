"""Talking to the Hugging Face Hub through huggingface_hub: a repo's commit and files, its safetensors headers (by
range request), byte ranges of its files, and every failure turned into one line a reader can act on.

Every request goes through huggingface_hub's own functions and session (``HfApi.model_info``,
``get_hf_file_metadata``, ``http_backoff`` / ``http_stream_backoff``), so tokens (``hf auth login`` or
``HF_TOKEN``), redirects, retries of 5xx answers and the wait a 429 asks for (``Retry-After``, ``RateLimit``) are the
library's business. What this module adds fits the Hub's rate limits: each file is resolved once (one ``/resolve``
request; the Hub allows 3,000 per 5 minutes per IP anonymously) and its ranges are read from the signed storage URL
that answer points to, resolved again when it expires; a range that drips in slower than a minimum rate is
abandoned and retried. The huggingface_hub internals it calls are imported in one place (:func:`_hub`).
:mod:`qkgeometry.readers.hub` builds on it.
"""

from __future__ import annotations

import calendar
import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ...errors import SourceError, first_line
from .plan import COMMIT_RE

__all__ = ["HubFiles", "RemoteRepo", "hub_error", "is_offline", "local_error", "open_remote", "safetensors_headers",
           "scrub"]

#: bytes read for a safetensors header (as huggingface_hub does: most headers fit, the rest take one more request)
HEADER_PROBE = 100_000
#: a range is abandoned (and retried) when it arrives slower than this many bytes per second, after a grace time
MIN_RATE = 50_000.0
RANGE_GRACE_S = 60.0
#: retries of one range after a dropped connection, a short body or a slow drip
RETRIES = 3
#: a signed URL without an ``Expires`` time is resolved again after this long (the Hub's last about an hour)
URL_MAX_AGE_S = 1800.0


def _hub() -> SimpleNamespace:
    """The huggingface_hub functions this module calls, imported in this one place (their homes differ across
    huggingface_hub versions)."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_backoff, http_stream_backoff

    return SimpleNamespace(constants=constants, get_hf_file_metadata=get_hf_file_metadata, hf_hub_url=hf_hub_url,
                           build_hf_headers=build_hf_headers, hf_raise_for_status=hf_raise_for_status,
                           http_backoff=http_backoff, http_stream_backoff=http_stream_backoff,
                           transport_errors=transport_errors())


def transport_errors() -> tuple[type[BaseException], ...]:
    """The transport error of the HTTP library huggingface_hub sends its requests with: ``httpx2`` from
    huggingface_hub 2 on, ``httpx`` before (1.x, the one Colab ships); each that is installed is caught."""
    import importlib

    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except ImportError:
            continue
    return tuple(found)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def _expires(url: str) -> float:
    """When a signed URL should be resolved again: a minute before its ``Expires`` (CloudFront) or
    ``X-Amz-Date`` + ``X-Amz-Expires`` time, else :data:`URL_MAX_AGE_S` from now."""
    q = {k.lower(): v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    with contextlib.suppress(ValueError, KeyError):
        if "expires" in q:
            return float(q["expires"]) - 60
        if "x-amz-expires" in q:
            t = calendar.timegm(time.strptime(q["x-amz-date"], "%Y%m%dT%H%M%SZ"))
            return t + float(q["x-amz-expires"]) - 60
    return time.time() + URL_MAX_AGE_S

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
    """Resolve ``revision`` (default ``"main"``) of ``repo_id`` to a commit with one API call. The commit the
    endpoint reports names a cache folder, so anything but 40 hexadecimal digits is refused before it is used."""
    from huggingface_hub import HfApi

    rev = revision or "main"
    try:
        info = HfApi().model_info(repo_id, revision=rev)
    except Exception as e:
        raise hub_error(e, repo_id, rev) from e
    if not isinstance(info.sha, str) or not COMMIT_RE.fullmatch(info.sha):
        raise SourceError(f"the Hub endpoint answered commit {str(info.sha)[:60]!r} for {repo_id!r} (revision "
                          f"{rev!r}), which is not a 40-digit hexadecimal commit id; nothing was written. Check "
                          "HF_ENDPOINT (it should be https://huggingface.co or a mirror you trust).")
    files = tuple(s.rfilename for s in (info.siblings or ()))
    return RemoteRepo(repo_id, rev, info.sha, files, info.gated or False)


class HubFiles:
    """The files of one commit, read by range: each file is resolved once (one ``/resolve`` request, which answers
    with a signed storage URL for large files) and every range of it is then read from that URL, re-resolved when it
    expires (a 403 from the storage host, or its ``Expires`` time). ``resolves`` counts the ``/resolve`` requests,
    ``requests`` every request sent (retries by huggingface_hub aside)."""

    def __init__(self, repo: RemoteRepo):
        self.repo = repo
        self._urls: dict[str, tuple[str, float, bool]] = {}  # file -> (url, re-resolve after, signed?)
        self.sizes: dict[str, int] = {}
        self.resolves = 0
        self.requests = 0
        self.received = 0  # body bytes of every small file and range read

    # ------------------------------------------------------------------ resolving
    def url(self, file: str, *, fresh: bool = False) -> tuple[str, bool]:
        """(URL to read ``file`` from, whether it is a signed storage URL); one ``/resolve`` per file and expiry."""
        got = self._urls.get(file)
        if got is not None and not fresh and time.time() < got[1]:
            return got[0], got[2]
        hub = _hub()
        url = hub.hf_hub_url(self.repo.repo_id, file, revision=self.repo.commit)
        self.resolves += 1
        self.requests += 1
        with quiet_retries():
            meta = hub.get_hf_file_metadata(url, timeout=hub.constants.HF_HUB_ETAG_TIMEOUT, retry_on_errors=True)
        location = meta.location or url
        signed = _origin(location) != _origin(url)
        if meta.size is not None:
            self.sizes[file] = int(meta.size)
        self._urls[file] = (location, _expires(location), signed)
        return location, signed

    # ------------------------------------------------------------------ reading
    def small(self, file: str) -> bytes:
        """A small file (``config.json``, the shard index) in one GET of its ``/resolve`` URL."""
        hub = _hub()
        url = hub.hf_hub_url(self.repo.repo_id, file, revision=self.repo.commit)
        self.resolves += 1
        self.requests += 1
        with quiet_retries():
            r = hub.http_backoff("GET", url, headers=hub.build_hf_headers(), follow_redirects=True,
                                 timeout=hub.constants.HF_HUB_DOWNLOAD_TIMEOUT, max_retries=3, base_wait_time=0.5,
                                 max_wait_time=4)
        hub.hf_raise_for_status(r)
        self.requests += len(r.history)  # a redirect to the storage host is one more request
        self.received += len(r.content)
        return r.content

    def read(self, file: str, start: int, end: int, *, retries: int = RETRIES) -> bytes:
        """Bytes ``[start, end)`` of ``file``. A dropped connection, a short body or a range slower than
        :data:`MIN_RATE` (after :data:`RANGE_GRACE_S`) is retried here, ``retries`` times, then raised; 429 and 5xx
        answers are retried by huggingface_hub (waiting out ``Retry-After`` / ``RateLimit``), :data:`RETRIES`
        times per attempt. So a range that drips in gives up after ``retries + 1`` attempts of ``RANGE_GRACE_S +
        size / MIN_RATE`` each (about four minutes at the defaults), and the error says how long it tried."""
        attempt, renewed, began = 0, False, time.monotonic()
        while True:
            url, signed = self.url(file)
            try:
                data = self._get(url, signed, file, start, end)
            except (*_hub().transport_errors, TimeoutError) as e:
                attempt += 1
                if attempt > retries:
                    raise type(e)(f"{first_line(e)} ({attempt} attempts over "
                                  f"{time.monotonic() - began:.0f} s)") from e
                time.sleep(min(4.0, 0.5 * 2 ** (attempt - 1)))
                continue
            if data is not None:
                self.received += len(data)
                return data
            if renewed:  # a fresh URL refused too: that is not expiry
                raise SourceError(f"the Hub's storage host refused a freshly signed URL for {file!r} of "
                                  f"{self.repo.repo_id!r} (403); check the clock of this machine, then rerun.")
            renewed = True
            self.url(file, fresh=True)

    def _get(self, url: str, signed: bool, file: str, start: int, end: int) -> bytes | None:
        """One range request; None when a signed URL is refused (expired). The answer must be the range asked for:
        a 206 whose ``Content-Range`` names other bytes, or that sends more than asked, is refused, and so is a
        200 (a server that ignores ``Range`` sends the whole file) for a range that does not start the file; a 200
        for one that does is read up to the range's end only. Nothing beyond the range is ever buffered."""
        hub = _hub()
        headers = {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}
        if not signed:  # the token goes to the Hub only, never to the storage host
            headers.update(hub.build_hf_headers())
        self.requests += 1
        want = end - start
        deadline = time.monotonic() + RANGE_GRACE_S + want / MIN_RATE
        where = f"{file!r} of Hub repo {self.repo.repo_id!r}"
        # transport errors are retried by read() alone (one count, not one inside another); 429 and 5xx here
        with quiet_retries(), hub.http_stream_backoff(
                "GET", url, headers=headers, timeout=hub.constants.HF_HUB_DOWNLOAD_TIMEOUT, max_retries=RETRIES,
                base_wait_time=0.5, max_wait_time=4, follow_redirects=True, retry_on_exceptions=()) as r:
            if signed and r.status_code in (401, 403):
                return None
            if r.status_code == 416:
                raise SourceError(range_error(self.repo, file, start, end, self.sizes.get(file)))
            if r.status_code >= 400:
                r.read()
                hub.hf_raise_for_status(r)
            if r.status_code == 200 and start > 0:
                raise SourceError(f"the server behind HF_ENDPOINT ignored the Range header for {where} (it answered "
                                  f"200 with the whole file where bytes {start}-{end - 1} were asked for); "
                                  "qkgeometry reads byte ranges only: use a Hub or mirror that serves them, or "
                                  "pass fetch='snapshot'.")
            if r.status_code == 206:
                _check_content_range(r.headers.get("Content-Range"), start, end, where)
                if r.headers.get("Content-Length", str(want)).strip() != str(want):
                    raise SourceError(f"the Hub announced {r.headers['Content-Length'][:20]} bytes for bytes "
                                      f"{start}-{end - 1} of {where} ({want} bytes); rerun, and check HF_ENDPOINT if "
                                      "it persists.")
            buf, failure = bytearray(), None
            try:  # a failure while reading the body leaves the block normally (huggingface_hub's retry loop
                # would otherwise take it for a failed request), then is raised below
                for chunk in r.iter_bytes():
                    room = want - len(buf)
                    if len(chunk) > room and r.status_code == 206:
                        raise SourceError(f"the Hub sent more than bytes {start}-{end - 1} of {where} for that range; "
                                          "rerun, and check HF_ENDPOINT if it persists.")
                    buf += chunk[:room]
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"bytes {start}-{end - 1} of {file!r} came slower than "
                                           f"{MIN_RATE:.0f} B/s")
                    if len(buf) >= want and r.status_code == 200:  # a 200 for a range that starts the file:
                        break  # stop at its end; a 206 is read to its end, so that bytes past the range are seen
            except (*hub.transport_errors, TimeoutError) as e:
                failure = e
        if failure is not None:
            raise failure
        data = bytes(buf)
        if len(data) != want:
            raise SourceError(f"the Hub sent {len(data)} bytes of {file!r} in {self.repo.repo_id!r} where "
                              f"{want} were asked for (bytes {start}-{end - 1}); rerun to fetch them again.")
        return data


def _check_content_range(value: str | None, start: int, end: int, where: str) -> None:
    """A 206's ``Content-Range`` must name exactly bytes ``start``..``end - 1``."""
    m = re.fullmatch(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", value or "")
    if m is None or (int(m.group(1)), int(m.group(2))) != (start, end - 1):
        raise SourceError(f"the Hub answered the range request for bytes {start}-{end - 1} of {where} with "
                          f"Content-Range {str(value)[:60]!r}, other bytes than asked; rerun, and check HF_ENDPOINT "
                          "if it persists.")


def range_error(repo: RemoteRepo, file: str, start: int, end: int, size: int | None) -> str:
    """A range past the end of a file: the header lies about the file, so retrying cannot help."""
    return (f"Hub repo {repo.repo_id!r} (commit {repo.commit[:12]}): the safetensors header of {file!r} places "
            f"tensor data at bytes {start}-{end - 1}, past the end of the file ({size if size is not None else '?'} "
            "bytes); the file is damaged on the Hub: pass another `revision`, or tell the repo's owners.")


def safetensors_headers(files: HubFiles) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, int], dict[str,
                                                                                                              str]]:
    """The checked safetensors headers of the commit's weight files (``model.safetensors``, or the shards the
    ``model.safetensors.index.json`` lists: a stale ``consolidated.safetensors`` next to it is never read), each read
    by one range request from the file's resolved URL. Returns (file -> tensor entries, file -> data start
    ``8 + N``, tensor -> file)."""
    from ..safetensors_format import header_length, parse_header

    repo = files.repo
    if "model.safetensors" in repo.files:
        weight_files, weight_map = ["model.safetensors"], {}
    elif "model.safetensors.index.json" in repo.files:
        try:
            index = json.loads(files.small("model.safetensors.index.json"))
            weight_map = dict(index["weight_map"])
        except SourceError:
            raise
        except (ValueError, KeyError, TypeError) as e:
            raise SourceError(f"Hub repo {repo.repo_id!r} (commit {repo.commit[:12]}): model.safetensors.index.json "
                              f"has no valid 'weight_map' ({type(e).__name__}); pass another `revision`.") from e
        except Exception as e:
            raise hub_error(e, repo.repo_id, repo.revision) from e
        if not all(isinstance(v, str) for v in weight_map.values()):
            raise SourceError(f"Hub repo {repo.repo_id!r} (commit {repo.commit[:12]}): model.safetensors.index.json "
                              "maps tensors to something other than file names; pass another `revision`.")
        weight_files = sorted(set(weight_map.values()))
        missing = [f for f in weight_files if f not in repo.files]
        if missing:
            raise SourceError(f"Hub repo {repo.repo_id!r} (commit {repo.commit[:12]}) lists {missing[0]!r} in its "
                              "safetensors index, but the file is not in the repo; pass another `revision`.")
    else:
        raise no_safetensors_error(repo)
    headers, starts = {}, {}
    for file in weight_files:
        where = f"Hub repo {repo.repo_id!r} (commit {repo.commit[:12]}) file {file!r}"
        try:
            files.url(file)
            size = files.sizes.get(file)
            head = files.read(file, 0, min(HEADER_PROBE, size) if size else HEADER_PROBE)
            if size is None:
                raise SourceError(f"{where}: the Hub did not say how large the file is; rerun, or pass another "
                                  "`revision`.")
            n = header_length(head, size, where)
            raw = head[8:8 + n] if 8 + n <= len(head) else head[8:] + files.read(file, len(head), 8 + n)
        except SourceError:
            raise
        except Exception as e:
            raise hub_error(e, repo.repo_id, repo.revision) from e
        headers[file] = parse_header(raw, size, where)
        starts[file] = 8 + n
    return headers, starts, weight_map


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


class _QuietRetries(logging.Filter):
    """Drops huggingface_hub's per-retry warnings logged by a thread inside :func:`quiet_retries` (other threads,
    and errors, pass): a filter on the loggers instead of a change of their level, so overlapping calls from
    several threads never leave the library's logging switched off."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not getattr(self.depth, "n", 0)


_QUIET = _QuietRetries()
#: the loggers huggingface_hub reports retries on (its HTTP helpers, and the package logger itself)
_QUIET_LOGGERS = ("huggingface_hub", "huggingface_hub.utils._http", "huggingface_hub.file_download")


@contextlib.contextmanager
def quiet_retries() -> Iterator[None]:
    """huggingface_hub logs one warning per retry (a dropped network printed eleven lines); the failure, if it
    persists, is reported once by :func:`hub_error` instead. Thread-safe: only this thread's warnings are dropped."""
    for name in _QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if _QUIET not in logger.filters:
            logger.addFilter(_QUIET)
    _QUIET.depth.n = getattr(_QUIET.depth, "n", 0) + 1
    try:
        yield
    finally:
        _QUIET.depth.n -= 1


def network_errors() -> tuple[type[BaseException], ...]:
    """The errors of a failed connection (not of a local file: see :func:`local_error`)."""
    import socket

    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    return (*transport_errors(), ConnectionError, socket.gaierror, OfflineModeIsEnabled, LocalEntryNotFoundError,
            TimeoutError)


def local_error(e: BaseException) -> bool:
    """An ``OSError`` of this machine's files (a full disk, permission denied, a removed cache file), not of the
    network."""
    import socket

    return isinstance(e, OSError) and not isinstance(e, (ConnectionError, TimeoutError, socket.gaierror,
                                                         socket.herror))


#: what a message must never show: the query of a signed URL (its signature), an ``Authorization`` value, a token
_SECRETS = (re.compile(r"(https?://[^\s?'\"]+)\?[^\s'\"]*"), re.compile(r"(Bearer\s+)\S+", re.IGNORECASE),
            re.compile(r"\bhf_[A-Za-z0-9]{6,}"))


def scrub(text: str) -> str:
    """``text`` without secrets: a URL keeps its host and path but loses its query (``?…``), a bearer token and
    an ``hf_…`` token become ``…``.

    >>> scrub("GET https://cdn/x.safetensors?Expires=1&Signature=abc failed; Bearer hf_abcdefgh")
    'GET https://cdn/x.safetensors?… failed; Bearer …'
    """
    url, bearer, token = _SECRETS
    return token.sub("hf_…", bearer.sub(r"\1…", url.sub(r"\1?…", text))).replace("Bearer hf_…", "Bearer …")


def hub_error(e: BaseException, repo_id: str, revision: str | None, *, cached: str = "") -> SourceError:
    """One line for a failed Hub call: what happened, with the Hub's own words where they help, and what to do.
    ``cached`` says what is already on disk (for network failures). A local file's failure (a full disk, a cache
    folder that cannot be written) names the file and the cause, not the network; no message shows a signed URL's
    query or a token (:func:`scrub`)."""
    if isinstance(e, SourceError):
        return e
    error = _hub_error(e, repo_id, revision, cached)
    return type(error)(scrub(str(error)))


def _hub_error(e: BaseException, repo_id: str, revision: str | None, cached: str) -> SourceError:
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

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
    if isinstance(e, HfHubHTTPError) and status == 416:
        return SourceError(f"the Hub answered 416 (range not satisfiable) for {repo_id!r}: a safetensors header "
                           "places data past the end of its file, so retrying cannot help; pass another `revision`, "
                           "or tell the repo's owners.")
    if isinstance(e, HfHubHTTPError):
        return SourceError(f"the Hub answered {status} for {repo_id!r}{hub_says}; retry later.")
    if local_error(e):
        from ..._files import describe_os_error

        where = f"file {str(e.filename)!r}" if getattr(e, "filename", None) else "a local file"
        return SourceError(f"reading {repo_id!r} from the Hub failed on this machine: {where}: "
                           f"{describe_os_error(e)}{cached}; free space or fix the permissions of the qkgeometry "
                           "cache (QKGEOMETRY_CACHE picks another folder), then rerun.")
    if isinstance(e, network_errors()):
        from ...errors import first_line

        what = f"{type(e).__name__}: {first_line(e)}"
        if is_offline():
            return SourceError(f"HF_HUB_OFFLINE is set and {repo_id!r} (revision {revision or 'main'!r}) is not "
                               f"fully in the qkgeometry cache{cached}; unset HF_HUB_OFFLINE to fetch it, or pass a "
                               "local model folder or an offline alias such as 'offline:minilm-l6'.")
        return SourceError(f"could not reach the Hugging Face Hub for {repo_id!r} ({what}){cached}; check the "
                           "network and rerun: the fetch resumes where it stopped.")
    from ...errors import first_line

    return SourceError(f"reading {repo_id!r} from the Hub failed ({type(e).__name__}: {first_line(e)}){cached}; "
                       "rerun, and report it if it persists.")
