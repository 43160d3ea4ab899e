"""A fake Hugging Face hub on 127.0.0.1 that answers the requests huggingface_hub really makes.

Two HTTP servers share one state: the "hub" (``HF_ENDPOINT``) and a "CDN" on another port, so
that, as on the real hub, ``HEAD /resolve`` for an LFS file answers 302 with the metadata headers
(``X-Repo-Commit``, ``X-Linked-Etag``, ``X-Linked-Size``) and a ``Location`` on another origin,
which huggingface_hub does not follow for metadata.  Endpoints:

- ``HEAD|GET /{repo}/resolve/{rev}/{file}``: 302 to the CDN for LFS files, 200 (with ``Range``)
  for small git files; 401/403 with ``X-Error-Code: GatedRepo`` for a gated repo without the
  right token; 404 with ``RepoNotFound`` / ``EntryNotFound``.
- ``GET /cdn/{sha256}``: the bytes, with ``Range`` -> 206 ``Content-Range``.
- ``GET /api/models`` (``filter`` = tags, all must match), ``GET /api/models/{repo}[/revision/{rev}]``
  (``blobs=true`` adds sizes and LFS info), ``POST /api/models/{repo}/paths-info/{rev}``.

Faults are switched per test on ``FakeHub``: drop the connection after N bytes, stall after N
bytes, flip a byte of what is served, ignore ``Range``.  Every request is logged with its headers
so tests can assert on ``range`` and ``authorization`` (names lower-cased).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    lfs: set[str] = field(default_factory=set)
    gated_token: str | None = None
    tags: list[str] = field(default_factory=list)
    base_model: str | None = None
    downloads: int = 0

    def sha256(self, name: str) -> str:
        return _digest("sha256", self.files[name])

    def git_sha1(self, name: str) -> str:
        return _digest("git", self.files[name])


_DIGESTS: dict[tuple[str, int], tuple[bytes, str]] = {}


def _digest(kind: str, data: bytes) -> str:
    """Hashes cached per bytes object, so that serving a big file does not re-hash it per request."""
    cached = _DIGESTS.get((kind, id(data)))
    if cached is not None and cached[0] is data:
        return cached[1]
    if kind == "sha256":
        value = hashlib.sha256(data).hexdigest()
    else:
        value = hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()
    _DIGESTS[(kind, id(data))] = (data, value)
    return value


@dataclass
class Logged:
    server: str
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Faults:
    drop_after: int | None = None
    """Close the connection after this many body bytes, on this many responses (``drops``)."""
    drops: int = 1
    stall_after: int | None = None
    """Stop sending at this offset of the file (every response), until the test ends."""
    corrupt_at: int | None = None
    ignore_range: bool = False
    fail_status: int = 503
    failures: int = 0
    """Answer this many CDN requests with ``fail_status`` before serving."""


class FakeHub:
    """Start with ``start()``; ``url`` is the hub endpoint; stop with ``stop()``."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.log: list[Logged] = []
        self.faults = Faults()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._hub = _Server(self, "hub")
        self._cdn = _Server(self, "cdn")

    @property
    def url(self) -> str:
        return self._hub.url

    @property
    def cdn_url(self) -> str:
        return self._cdn.url

    def add(self, repo: FakeRepo) -> FakeRepo:
        self.repos[repo.repo_id] = repo
        return repo

    def start(self) -> FakeHub:
        self._hub.start()
        self._cdn.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._hub.stop()
        self._cdn.stop()

    def requests(self, server: str | None = None, method: str | None = None) -> list[Logged]:
        with self._lock:
            return [
                r
                for r in self.log
                if (server is None or r.server == server) and (method is None or r.method == method)
            ]

    def record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)

    def take_drop(self) -> int | None:
        """The drop point for this response, if a drop is still due."""
        with self._lock:
            if self.faults.drop_after is None or self.faults.drops <= 0:
                return None
            self.faults.drops -= 1
            return self.faults.drop_after

    def take_failure(self) -> bool:
        with self._lock:
            if self.faults.failures <= 0:
                return False
            self.faults.failures -= 1
            return True

    def blob(self, sha: str) -> bytes | None:
        for repo in self.repos.values():
            for name in repo.lfs:
                if repo.sha256(name) == sha:
                    return repo.files[name]
        return None


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-request (a cancelled download, a retry) is what the tests make
    happen: not a traceback in the test run's output."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class _Server:
    def __init__(self, hub: FakeHub, role: str) -> None:
        self.hub = hub
        self.role = role
        handler = type(f"{role}Handler", (_Handler,), {"hub": hub, "role": role})
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, args=(0.05,), name=f"fakehub-{role}", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_API_MODEL = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
_PATHS_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/paths-info/(?P<rev>[^/]+)$")


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    role: str
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        return

    # --- dispatch -------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        parsed = urlparse(self.path)
        path = unquote(parsed.path)
        headers = {k.lower(): v for k, v in self.headers.items()}  # HTTP names are case-insensitive
        self.hub.record(Logged(self.role, method, self.path, headers))
        query = parse_qs(parsed.query)
        if self.role == "cdn":
            if path.startswith("/cdn/"):
                return self._serve_blob(method, path[len("/cdn/") :])
            return self._error(404, "EntryNotFound")
        if match := _RESOLVE.match(path):
            return self._resolve(method, match["repo"], match["rev"], match["file"])
        if method == "POST" and (match := _PATHS_INFO.match(path)):
            return self._paths_info(match["repo"], match["rev"])
        if path == "/api/models":
            return self._list_models(query)
        if match := _API_MODEL.match(path):
            return self._model_info(match["repo"], query)
        self._error(404, "EntryNotFound")

    # --- helpers --------------------------------------------------------------------------
    def _repo(self, repo_id: str) -> FakeRepo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound")
            return None
        if repo.gated_token is not None:
            auth = self.headers.get("Authorization")
            if auth is None:
                self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted. Please log in.")
                return None
            if auth != f"Bearer {repo.gated_token}":
                self._error(403, "GatedRepo", f"Access to model {repo_id} is restricted.")
                return None
        return repo

    def _error(self, status: int, code: str, message: str = "error") -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body_length(self) -> int:
        return int(self.headers.get("Content-Length") or 0)

    # --- endpoints ------------------------------------------------------------------------
    def _resolve(self, method: str, repo_id: str, rev: str, name: str) -> None:
        repo = self._repo(repo_id)
        if repo is None:
            return
        if rev not in ("main", repo.commit):
            return self._error(404, "RevisionNotFound")
        if name not in repo.files:
            return self._error(404, "EntryNotFound")
        data = repo.files[name]
        if name in repo.lfs:
            sha = repo.sha256(name)
            self.send_response(302)
            self.send_header("Location", f"{self.hub.cdn_url}/cdn/{sha}")
            self.send_header("X-Repo-Commit", repo.commit)
            self.send_header("X-Linked-Etag", f'"{sha}"')
            self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("ETag", f'"{repo.git_sha1(name)}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        extra = {"X-Repo-Commit": repo.commit, "ETag": f'"{repo.git_sha1(name)}"'}
        self._send_bytes(method, data, extra)

    def _serve_blob(self, method: str, sha: str) -> None:
        if self.hub.take_failure():
            return self._error(self.hub.faults.fail_status, "ServiceUnavailable", "try later")
        data = self.hub.blob(sha)
        if data is None:
            return self._error(404, "EntryNotFound")
        self._send_bytes(method, data, {"ETag": f'"{sha}"'})

    def _send_bytes(self, method: str, data: bytes, extra: dict[str, str]) -> None:
        faults = self.hub.faults
        if faults.corrupt_at is not None and faults.corrupt_at < len(data):
            i = faults.corrupt_at
            data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]
        start = 0
        range_header = self.headers.get("Range")
        if range_header and not faults.ignore_range:
            match = re.match(r"bytes=(\d+)-$", range_header)
            if match is None or int(match[1]) >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(match[1])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        if method == "HEAD":
            return
        drop = self.hub.take_drop()
        if drop is not None and drop < len(body):
            self.wfile.write(body[:drop])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        stall = faults.stall_after
        if stall is not None and stall < len(data):
            self.wfile.write(body[: max(stall - start, 0)])
            self.wfile.flush()
            self.hub.release.wait(30)
            self.close_connection = True
            return
        self.wfile.write(body)

    def _list_models(self, query: dict[str, list[str]]) -> None:
        wanted = set(query.get("filter", []))
        limit = int(query.get("limit", ["1000"])[0])
        hits = [r for r in self.hub.repos.values() if wanted <= {*r.tags, *(f"base_model:{r.base_model}",)}]
        hits.sort(key=lambda r: -r.downloads)
        self._json(
            [{"id": r.repo_id, "modelId": r.repo_id, "tags": r.tags, "downloads": r.downloads} for r in hits][
                :limit
            ]
        )

    def _model_info(self, repo_id: str, query: dict[str, list[str]]) -> None:
        repo = self._repo(repo_id)
        if repo is None:
            return
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        siblings: list[dict[str, Any]] = []
        for name, data in repo.files.items():
            entry: dict[str, Any] = {"rfilename": name}
            if blobs:
                entry["size"] = len(data)
                entry["blobId"] = repo.git_sha1(name)
                if name in repo.lfs:
                    entry["lfs"] = {"sha256": repo.sha256(name), "size": len(data), "pointerSize": 134}
            siblings.append(entry)
        card = {"base_model": repo.base_model} if repo.base_model else {}
        self._json(
            {
                "id": repo.repo_id,
                "modelId": repo.repo_id,
                "sha": repo.commit,
                "tags": repo.tags,
                "siblings": siblings,
                "cardData": card,
                "private": False,
                "gated": "manual" if repo.gated_token else False,
            }
        )

    def _paths_info(self, repo_id: str, rev: str) -> None:
        body = self.rfile.read(self._body_length()).decode()
        repo = self._repo(repo_id)
        if repo is None:
            return
        if rev not in ("main", repo.commit):
            return self._error(404, "RevisionNotFound")
        form = parse_qs(body)
        out: list[dict[str, Any]] = []
        for name in form.get("paths", []):
            if name not in repo.files:
                continue
            data = repo.files[name]
            entry: dict[str, Any] = {
                "type": "file",
                "path": name,
                "size": len(data),
                "oid": repo.git_sha1(name),
            }
            if name in repo.lfs:
                entry["lfs"] = {"oid": repo.sha256(name), "size": len(data), "pointerSize": 134}
            out.append(entry)
        self._json(out)
