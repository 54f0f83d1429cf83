"""A loopback emulator of the Hugging Face Hub's HTTP file API, for tests (binds 127.0.0.1 only).

It serves what the installed huggingface_hub asks for (read from its source: ``hf_api.model_info`` /
``get_paths_info`` / ``parse_safetensors_file_metadata``, ``file_download.get_hf_file_metadata`` /
``hf_hub_download``, ``utils._http.hf_raise_for_status``):

* ``GET /api/models/{id}[/revision/{rev}]``: sha, siblings (sizes with ``?blobs=true``), gated, private;
* ``POST /api/models/{id}/paths-info/{rev}``: type, path, size, oid, lfs for each path asked;
* ``HEAD``/``GET /{id}/resolve/{rev}/{file}``: ETag (git blob sha1) or, for large files, a 302 to a second
  "CDN" path with ``X-Linked-Etag`` / ``X-Linked-Size``; ``X-Repo-Commit``, ``Content-Length``; ``Range`` -> 206;
* the Hub's error codes and headers: ``X-Error-Code: RepoNotFound`` (401 without a token, as the Hub does),
  ``GatedRepo`` (401 without a token, 403 with a token that has not accepted the licence), ``EntryNotFound``,
  ``RevisionNotFound`` (404);
* signed storage URLs (``?Expires=...``) that the "CDN" refuses with 403 once expired (``url_lifetime``);
* injected faults on data requests: a connection cut after some bytes, a stall, a 503, a 429 with ``Retry-After``
  and ``RateLimit`` headers (also on ``/resolve``), an expired signed URL, a slow drip of one byte at a time;
* synthetic checkpoints (``add_synthetic``): real safetensors headers of any shapes over zero data generated as it
  is served, for counting the requests a full-size model costs.

Every request is logged (method, path, range, status, body bytes sent), so tests can count data requests and bytes.

Usage::

    with HubEmulator() as hub:
        hub.add_repo("org/tiny", folder)            # every file of a local folder, as one commit on "main"
        monkeypatch.setenv("HF_ENDPOINT", hub.url)   # read by huggingface_hub at call time (see ``hub_env``)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

#: files at least this large are "LFS" files: their resolve answers 302 to the CDN path, as on the Hub (text files
#: such as config.json and the shard index are kept in git and served by the Hub itself)
LFS_THRESHOLD = 1024
TEXT_SUFFIXES = (".json", ".md", ".txt")


def is_lfs(name: str, blob: Blob) -> bool:
    return blob.size >= LFS_THRESHOLD and not name.endswith(TEXT_SUFFIXES)


class Blob:
    """A served file: bytes in memory, or a file on disk read by range (large synthetic checkpoints; their hashes
    are of the path and size, not the content, so that serving 13 GB does not mean hashing it)."""

    def __init__(self, data: bytes | Path, *, zeros: int = 0):
        self.data = data
        self.zeros = zeros  # synthetic files: ``data`` (a header) followed by this many zero bytes, never stored
        self.size = (len(data) + zeros) if isinstance(data, bytes) else Path(data).stat().st_size
        key = (data + f":{zeros}".encode() if zeros else data) if isinstance(data, bytes) \
            else f"{data}:{self.size}".encode()
        self.sha256 = hashlib.sha256(key).hexdigest()
        self.sha1 = hashlib.sha1(b"blob %d\0" % self.size + key).hexdigest()

    def chunks(self, start: int, end: int, step: int = 8 * 2**20):
        """Bytes [start, end) in pieces of at most ``step``."""
        if isinstance(self.data, bytes) and self.zeros:
            n = len(self.data)
            if start < n:
                yield self.data[start:min(end, n)]
                start = n
            while start < end:
                k = min(step, end - start)
                yield bytes(k)
                start += k
            return
        if isinstance(self.data, bytes):
            yield self.data[start:end]
            return
        with open(self.data, "rb") as fh:
            fh.seek(start)
            while start < end:
                piece = fh.read(min(step, end - start))
                if not piece:
                    return
                start += len(piece)
                yield piece


@dataclass
class Repo:
    repo_id: str
    commits: dict[str, dict[str, Blob]]  # sha -> file name -> content
    branches: dict[str, str]  # branch -> sha
    gated: str | bool = False  # False, "auto" or "manual"
    private: bool = False
    #: what the API reports as the commit, when a test makes the endpoint lie (None: the real sha)
    api_sha: str | None = None


@dataclass
class Fault:
    #: "cut" (close the connection after `after` body bytes), "stall" (sleep `seconds`), "503", "429" (with
    #: ``Retry-After: seconds`` and a ``RateLimit`` header; also on ``/resolve``), "expire" (a signed storage URL
    #: refused as expired, 403), "drip" (the body one byte every `seconds`), "norange" (``Range`` ignored: a 200
    #: with the whole file), "shifted" (a 206 of the bytes `after` further on, its ``Content-Range`` saying so),
    #: "overlong" (a 206 whose body runs `after` bytes past the range, ``Content-Range`` and length unchanged)
    kind: str
    match: str  # substring of the file name the fault applies to
    times: int = 1
    after: int = 0
    seconds: float = 30.0
    #: also hit header reads (ranges from byte 0; huggingface_hub reads headers without retries)
    headers: bool = False
    #: matching requests let through before the fault starts
    skip: int = 0
    #: "data" (file content, on either host) or "resolve" (``/resolve`` requests; "429" only)
    where: str = "data"
    #: a "429" sends ``Retry-After`` (else only the ``RateLimit`` headers say when to come back)
    retry_after: bool = True


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    status: int
    sent: int  # body bytes written
    at: float = 0.0  # time.monotonic() when the answer was sent
    #: the request's headers (lower-case names), so tests can check what each host was sent
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def to_storage(self) -> bool:
        """Sent to the storage ("CDN") host that signed URLs point to, not to the Hub."""
        return self.path.startswith("/_cdn/")

    @property
    def is_data(self) -> bool:
        """A request for file content (not an API call, not a HEAD)."""
        return self.method == "GET" and ("/resolve/" in self.path or self.path.startswith("/_cdn/"))


@dataclass
class HubEmulator:
    repos: dict[str, Repo] = field(default_factory=dict)
    #: token -> repo ids whose licence that token's user accepted (gated repos)
    tokens: dict[str, set[str]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    log: list[Request] = field(default_factory=list)
    #: seconds a signed storage URL stays valid (its ``Expires`` query parameter; the Hub's last about an hour)
    url_lifetime: float = 3600.0

    def __post_init__(self):
        self._lock = threading.Lock()
        emulator = self

        class Handler(_Handler):
            hub = emulator

        # two origins: the Hub, and the "CDN" that large files redirect to (huggingface_hub treats another host
        # as storage: it stops following the HEAD there and keeps the auth header on the Hub)
        self._servers = []
        for _ in range(2):
            server = _QuietServer(("127.0.0.1", 0), Handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self._servers.append(server)
        self.url, self.cdn_url = (f"http://127.0.0.1:{s.server_address[1]}" for s in self._servers)

    # ------------------------------------------------------------------ set-up
    def add_repo(self, repo_id: str, source: Path | dict[str, bytes], *, gated: str | bool = False,
                 private: bool = False, branch: str = "main", on_disk: bool = False) -> str:
        """Serve ``source`` (a folder, or name -> bytes) as a commit of ``repo_id`` on ``branch``; returns the sha.
        Adding to an existing repo makes a new commit on that branch (older commits stay reachable by sha).
        ``on_disk``: serve the folder's files from disk by range instead of holding them in memory."""
        if isinstance(source, dict):
            files = {k: v if isinstance(v, Blob) else Blob(v) for k, v in source.items()}
        else:
            files = {p.relative_to(source).as_posix(): Blob(p if on_disk else p.read_bytes())
                     for p in sorted(Path(source).rglob("*")) if p.is_file()}
        sha = hashlib.sha1(repo_id.encode() + b"\0" + b"".join(
            k.encode() + bytes.fromhex(v.sha256) for k, v in sorted(files.items()))).hexdigest()
        old = self.repos.get(repo_id)
        repo = old if old is not None else Repo(repo_id, {}, {}, gated, private)
        repo.commits[sha] = files
        repo.branches[branch] = sha
        self.repos[repo_id] = repo
        return sha

    def fault(self, kind: str, match: str, **kw) -> Fault:
        f = Fault(kind, match, **kw)
        self.faults.append(f)
        return f

    # ------------------------------------------------------------------ inspection
    def data_requests(self) -> list[Request]:
        return [r for r in self.log if r.is_data]

    def resolves(self) -> list[Request]:
        """Requests to ``/resolve`` URLs (the ones the Hub rate-limits hardest), HEAD or GET."""
        return [r for r in self.log if "/resolve/" in r.path]

    def add_synthetic(self, repo_id: str, shards: dict[str, dict[str, tuple[str, tuple[int, ...]]]],
                      files: dict[str, bytes], branch: str = "main") -> str:
        """A repo of synthetic safetensors shards (file -> tensor -> (dtype, shape)): real headers, zero data that is
        generated as it is served (a 13 GB checkpoint costs no memory), plus the small ``files`` (config.json ...),
        as a commit on ``branch``."""
        sizes = {"F32": 4, "F16": 2, "BF16": 2}
        blobs: dict[str, Blob] = {k: Blob(v) for k, v in files.items()}
        for file, tensors in shards.items():
            header, offset = {}, 0
            for name, (dtype, shape) in tensors.items():
                n = sizes[dtype]
                for d in shape:
                    n *= d
                header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
                offset += n
            raw = json.dumps(header).encode()
            raw += b" " * (-len(raw) % 8)
            blobs[file] = Blob(len(raw).to_bytes(8, "little") + raw, zeros=offset)
        return self.add_repo(repo_id, blobs, branch=branch)

    def bytes_served(self, *, data_only: bool = True) -> int:
        return sum(r.sent for r in self.log if r.is_data or not data_only)

    def reset_log(self) -> None:
        with self._lock:
            self.log.clear()

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> HubEmulator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def take_fault(self, name: str, range_header: str | None, where: str = "data") -> Fault | None:
        header_read = (range_header or "").replace(" ", "").startswith("bytes=0-")
        with self._lock:
            for f in self.faults:
                if f.times > 0 and f.where == where and f.match in name and (f.headers or not header_read):
                    if f.skip > 0:
                        f.skip -= 1
                        return None
                    f.times -= 1
                    return f
        return None


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (as a reader that refuses a body does) is no error of the emulator's."""

    def handle_error(self, request, client_address) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    hub: HubEmulator
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    # ------------------------------------------------------------------ plumbing
    def _send(self, status: int, body: bytes | tuple[Blob, int, int] = b"", headers: dict[str, str] | None = None,
              *, head: bool = False, fault: Fault | None = None) -> None:
        blob, start, end = body if isinstance(body, tuple) else (Blob(body), 0, len(body))
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        sent = 0
        if not head and end > start:
            if fault is not None and fault.kind == "drip":
                self.close_connection = True
                with contextlib.suppress(OSError):
                    for piece in blob.chunks(start, end):
                        for k in range(len(piece)):
                            self.wfile.write(piece[k:k + 1])
                            self.wfile.flush()
                            sent += 1
                            time.sleep(fault.seconds)
            elif fault is not None and fault.kind in ("cut", "stall"):
                piece = b"".join(blob.chunks(start, min(end, start + fault.after)))
                self.wfile.write(piece)
                self.wfile.flush()
                sent = len(piece)
                self.close_connection = True
                if fault.kind == "stall":
                    time.sleep(fault.seconds)
                else:
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
            else:
                try:
                    for piece in blob.chunks(start, end):
                        self.wfile.write(piece)
                        sent += len(piece)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
        with self.hub._lock:
            self.hub.log.append(Request(self.command, self.path, self.headers.get("Range"), status, sent,
                                        time.monotonic(), {k.lower(): v for k, v in self.headers.items()}))

    def _error(self, status: int, code: str | None, message: str, head: bool = False) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, b"" if head else json.dumps({"error": message}).encode(), headers, head=head)

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else None

    def _repo(self, repo_id: str, head: bool = False) -> Repo | None:
        """The repo, or None after answering the Hub's error for a missing / private / gated one."""
        repo = self.hub.repos.get(repo_id)
        token = self._token()
        if repo is None or (repo.private and token not in self.hub.tokens):
            if token is None:  # the Hub answers 401 to anonymous requests for missing repos
                self._error(401, "RepoNotFound", "Repository not found", head)
            else:
                self._error(404, "RepoNotFound", "Repository not found", head)
            return None
        return repo

    def _gate(self, repo: Repo, head: bool) -> bool:
        """False after answering the Hub's GatedRepo error (401 anonymous, 403 licence not accepted)."""
        if not repo.gated:
            return True
        token = self._token()
        if token is None:
            self._error(401, "GatedRepo", f"Access to model {repo.repo_id} is restricted. You must have access to "
                        "it and be authenticated to access it. Please log in.", head)
            return False
        if repo.repo_id not in self.hub.tokens.get(token, set()):
            self._error(403, "GatedRepo", f"Access to model {repo.repo_id} is restricted and you are not in the "
                        f"authorized list. Visit https://huggingface.co/{repo.repo_id} to ask for access.", head)
            return False
        return True

    def _commit(self, repo: Repo, rev: str, head: bool = False) -> tuple[str, dict[str, bytes]] | None:
        rev = unquote(rev)
        sha = repo.branches.get(rev, rev)
        files = repo.commits.get(sha)
        if files is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            return None
        return sha, files

    # ------------------------------------------------------------------ routes
    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        m = re.fullmatch(r"/api/models/(.+)/paths-info/([^/]+)", path)
        if m is None:
            return self._error(404, None, f"no route {path}")
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode())
        repo = self._repo(m.group(1))
        if repo is None:
            return
        commit = self._commit(repo, m.group(2))
        if commit is None:
            return
        _, files = commit
        out = []
        for p in form.get("paths", []):
            if p in files:
                out.append(_entry(p, files[p]))
        self._send(200, json.dumps(out).encode(), {"Content-Type": "application/json"})

    def _route(self, head: bool) -> None:
        url = urlsplit(self.path)
        path = url.path
        if path.startswith("/api/models/"):
            return self._model_info(path[len("/api/models/"):], parse_qs(url.query), head)
        if path.startswith("/_cdn/"):
            return self._cdn(path, parse_qs(url.query), head)
        if "/resolve/" in path:
            repo_id, rest = path[1:].split("/resolve/", 1)
            rev, _, filename = rest.partition("/")
            return self._resolve(unquote(repo_id), rev, unquote(filename), head)
        self._error(404, None, f"no route {path}", head)

    def _model_info(self, rest: str, query: dict, head: bool) -> None:
        m = re.fullmatch(r"(.+)/(tree|refs)(?:/([^/]+)(?:/(.*))?)?", rest)
        if m is not None and m.group(1) in self.hub.repos:
            return self._tree(m.group(1), m.group(3), m.group(4)) if m.group(2) == "tree" else self._refs(m.group(1))
        repo_id, _, rev = rest.partition("/revision/")
        repo = self._repo(repo_id, head)
        if repo is None:
            return
        commit = self._commit(repo, rev or "main", head)
        if commit is None:
            return
        sha, files = commit
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        siblings = []
        for name, blob in sorted(files.items()):
            s: dict = {"rfilename": name}
            if blobs:
                s.update(size=blob.size, blobId=blob.sha1)
                if is_lfs(name, blob):
                    s["lfs"] = {"sha256": blob.sha256, "size": blob.size, "pointerSize": 134}
            siblings.append(s)
        body = {"_id": sha[:24], "id": repo.repo_id, "modelId": repo.repo_id, "sha": repo.api_sha or sha, "private": repo.private,
                "gated": repo.gated, "disabled": False, "downloads": 0, "likes": 0, "tags": [], "siblings": siblings,
                "lastModified": "2025-01-01T00:00:00.000Z", "createdAt": "2025-01-01T00:00:00.000Z"}
        self._send(200, b"" if head else json.dumps(body).encode(), {"Content-Type": "application/json"},
                   head=head)

    def _tree(self, repo_id: str, rev: str | None, prefix: str | None) -> None:
        """``GET /api/models/{id}/tree/{rev}[/{path}]`` (snapshot_download lists files with it); flat repos only."""
        repo = self._repo(repo_id)
        if repo is None:
            return
        commit = self._commit(repo, rev or "main")
        if commit is None:
            return
        out = []
        for p, blob in sorted(commit[1].items()):
            if prefix and not p.startswith(unquote(prefix).rstrip("/") + "/"):
                continue
            out.append(_entry(p, blob))
        self._send(200, json.dumps(out).encode(), {"Content-Type": "application/json"})

    def _refs(self, repo_id: str) -> None:
        """``GET /api/models/{id}/refs``: branches, and ``refs/pr/N`` branches as pull requests."""
        repo = self._repo(repo_id)
        if repo is None:
            return
        branches, prs = [], []
        for name, sha in sorted(repo.branches.items()):
            if name.startswith("refs/pr/"):
                prs.append({"name": name, "ref": name, "targetCommit": sha})
            else:
                branches.append({"name": name, "ref": f"refs/heads/{name}", "targetCommit": sha})
        body = {"branches": branches, "converts": [], "tags": [], "pullRequests": prs}
        self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def _resolve(self, repo_id: str, rev: str, filename: str, head: bool) -> None:
        repo = self._repo(repo_id, head)
        if repo is None or not self._gate(repo, head):
            return
        commit = self._commit(repo, rev, head)
        if commit is None:
            return
        sha, files = commit
        if filename not in files:
            return self._error(404, "EntryNotFound", "Entry not found", head)
        fault = self.hub.take_fault(filename, None, "resolve")
        if fault is not None and fault.kind == "429":
            return self._too_many(fault, head)
        blob = files[filename]
        if is_lfs(filename, blob):  # large files live on the CDN host: 302 there, as the Hub does
            expires = int(time.time() + self.hub.url_lifetime)
            location = f"{self.hub.cdn_url}/_cdn/{repo_id}/{sha}/{filename}?Expires={expires}&Signature=emulated"
            return self._send(302, b"", {"Location": location, "X-Repo-Commit": sha,
                                         "X-Linked-Etag": f'"{blob.sha256}"', "X-Linked-Size": str(blob.size),
                                         "ETag": f'"{blob.sha1}"'}, head=head)
        self._body(blob, filename, head, {"ETag": f'"{blob.sha1}"', "X-Repo-Commit": sha})

    def _too_many(self, fault: Fault, head: bool) -> None:
        """The Hub's 429: ``Retry-After`` and the IETF ``RateLimit`` headers (nothing left, reset in `seconds`)."""
        wait = int(fault.seconds)
        self._send(429, b"" if head else b'{"error": "rate limited"}',
                   {**({"Retry-After": str(wait)} if fault.retry_after else {}),
                    "RateLimit": f'"resolvers";r=0;t={wait}',
                    "RateLimit-Policy": '"fixed window";"resolvers";q=3000;w=300',
                    "X-Error-Message": "You have been rate-limited", "Content-Type": "application/json"}, head=head)

    def _cdn(self, path: str, query: dict, head: bool) -> None:
        expires = query.get("Expires", [""])[0]
        if expires and float(expires) < time.time():
            return self._send(403, b"" if head else b"<Error><Code>AccessDenied</Code><Message>Request has expired"
                              b"</Message></Error>", {"Content-Type": "application/xml"}, head=head)
        parts = unquote(path[len("/_cdn/"):]).split("/")
        # repo ids have one slash at most; the commit is 40 hex digits
        k = next((i for i, p in enumerate(parts) if re.fullmatch(r"[0-9a-f]{40}", p)), None)
        repo = self.hub.repos.get("/".join(parts[:k])) if k else None
        files = repo.commits.get(parts[k]) if repo is not None else None
        name = "/".join(parts[k + 1:]) if k else ""
        if files is None or name not in files:
            return self._error(404, None, "NoSuchKey", head)
        self._body(files[name], name, head, {"ETag": f'"{files[name].sha256}"'})

    def _body(self, blob: Blob, name: str, head: bool, headers: dict[str, str]) -> None:
        headers = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        fault = None if head else self.hub.take_fault(name, self.headers.get("Range"))
        if fault is not None and fault.kind == "503":
            return self._error(503, None, "Service Unavailable", head)
        if fault is not None and fault.kind == "429":
            return self._too_many(fault, head)
        if fault is not None and fault.kind == "expire":
            return self._send(403, b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>",
                              {"Content-Type": "application/xml"}, head=head)
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", rng)
            if m is None or (not m.group(1) and not m.group(2)):
                return self._error(416, None, "Range Not Satisfiable", head)
            size = blob.size
            if m.group(1):
                start = int(m.group(1))
                end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            else:  # suffix range: the last N bytes
                start, end = max(0, size - int(m.group(2))), size - 1
            if start >= size or end < start:
                return self._send(416, b"", {"Content-Range": f"bytes */{size}"}, head=head)
            if fault is not None and fault.kind == "norange":
                return self._send(200, (blob, 0, blob.size), headers, head=head)
            if fault is not None and fault.kind == "shifted":
                start, end = min(start + fault.after, size - 1), min(end + fault.after, size - 1)
            if fault is not None and fault.kind == "overlong":
                return self._overlong(blob, start, end + 1, min(end + 1 + fault.after, size), headers)
            return self._send(206, (blob, start, end + 1), {**headers, "Content-Range": f"bytes {start}-{end}/{size}"},
                              head=head, fault=fault)
        self._send(200, (blob, 0, blob.size), headers, head=head, fault=fault)


    def _overlong(self, blob: Blob, start: int, end: int, past: int, headers: dict[str, str]) -> None:
        """A 206 that announces bytes [start, end) and sends [start, past): a server that streams more than asked."""
        self.send_response(206)
        for k, v in {**headers, "Content-Range": f"bytes {start}-{end - 1}/{blob.size}"}.items():
            self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        sent = 0
        with contextlib.suppress(OSError):
            for piece in blob.chunks(start, end):
                self.wfile.write(piece)
                sent += len(piece)
            self.wfile.flush()  # the announced bytes arrive whole first, the surplus a moment later: a client
            time.sleep(0.05)  # that stops reading at the range's end never sees it
            for piece in blob.chunks(end, past):
                self.wfile.write(piece)
                sent += len(piece)
        with self.hub._lock:
            self.hub.log.append(Request(self.command, self.path, self.headers.get("Range"), 206, sent,
                                        time.monotonic(), {k.lower(): v for k, v in self.headers.items()}))


def hub_env(monkeypatch, hub: HubEmulator, home: Path) -> None:
    """Point huggingface_hub at ``hub`` for one test: ``HF_ENDPOINT`` (and the constants huggingface_hub derived
    from it when it was imported), the offline switches off, and fresh caches under ``home``."""
    from huggingface_hub import constants

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(home / "qkgeometry"))
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hf" / "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "hf" / "token"))
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 2)
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 2)


def go_offline(monkeypatch) -> None:
    """``HF_HUB_OFFLINE=1`` for the rest of a test (as a user would set it before a rerun)."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def _entry(path: str, blob: Blob) -> dict:
    """A paths-info / tree entry, as the Hub writes it."""
    entry = {"type": "file", "oid": blob.sha1, "size": blob.size, "path": path}
    if is_lfs(path, blob):
        entry["lfs"] = {"oid": blob.sha256, "size": blob.size, "pointerSize": 134}
    return entry
