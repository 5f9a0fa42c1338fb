"""A minimal Hugging Face Hub on 127.0.0.1 for download tests (a test double; never shipped).

It implements, for real, the routes huggingface_hub 2.x calls to download a model: the model-info API
(`/api/models/<repo>[/revision/<rev>]`, with `?blobs=true` file sizes), the recursive file listing
(`/api/models/<repo>/tree/<rev>`, read by snapshot_download), and file resolution
(`HEAD`/`GET /<repo>/resolve/<rev>/<path>` with ETag, X-Repo-Commit, Content-Length and Range requests).
Gated repositories answer file requests with 401 (no token) or 403 (token without access) and the
`X-Error-Code: GatedRepo` header, unknown repositories 401 + `X-Error-Code: RepoNotFound`, like the Hub.
`throttle` slows file bodies down (bytes per chunk, seconds per chunk) so tests can cancel mid-file, and
`fail_after` drops one transfer mid-body. `make_cached_repo` lays out an offline cache without any server.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FakeRepo:
    files: dict[str, bytes]
    gated: bool = False
    sha: str = ""
    allowed_tokens: set[str] = field(default_factory=set)

    def __post_init__(self):
        if not self.sha:
            digest = hashlib.sha1(json.dumps(sorted(self.files)).encode()
                                  + b"".join(self.files[k] for k in sorted(self.files)))
            self.sha = digest.hexdigest()


class FakeHub:
    def __init__(self):
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[tuple[str, str, dict]] = []  # (method, path, headers)
        self.throttle: tuple[int, float] | None = None  # (chunk bytes, delay seconds) for file bodies
        self.fail_after: dict[str, int] = {}  # path -> bytes sent before dropping the connection (once)
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeHub":
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- routes -------------------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        path = h.path.split("?", 1)[0]
        self.requests.append(("HEAD" if head else "GET", h.path, dict(h.headers)))
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)", path)
        if m:
            return self._tree(h, m.group(1))
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
        if m:
            return self._model_info(h, m.group(1), h.path)
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            return self._resolve(h, m.group(1), m.group(2), m.group(3), head)
        self._error(h, 404, "NotFound", "unknown route")

    def _repo_or_error(self, h, repo_id: str) -> FakeRepo | None:
        repo = self.repos.get(repo_id)
        if repo is None:
            self._error(h, 401, "RepoNotFound", "Repository not found")
        return repo

    def _model_info(self, h, repo_id: str, raw_path: str) -> None:
        repo = self._repo_or_error(h, repo_id)
        if repo is None:
            return
        siblings = [{"rfilename": name} for name in sorted(repo.files)]
        if "blobs=" in raw_path:
            for s in siblings:
                data = repo.files[s["rfilename"]]
                s.update(size=len(data), blobId=hashlib.sha1(data).hexdigest())
        body = json.dumps({"id": repo_id, "modelId": repo_id, "sha": repo.sha, "private": False,
                           "gated": "manual" if repo.gated else False, "siblings": siblings}).encode()
        self._send(h, 200, body, {"Content-Type": "application/json"}, head=False)

    def _tree(self, h, repo_id: str) -> None:
        """The recursive file listing (one page) that snapshot_download reads and caches."""
        repo = self._repo_or_error(h, repo_id)
        if repo is None:
            return
        items = [{"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
                 for name, data in sorted(repo.files.items())]
        self._send(h, 200, json.dumps(items).encode(), {"Content-Type": "application/json"}, head=False)

    def _resolve(self, h, repo_id: str, revision: str, filename: str, head: bool) -> None:
        repo = self._repo_or_error(h, repo_id)
        if repo is None:
            return
        if repo.gated:
            auth = h.headers.get("Authorization", "")
            token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
            if token is None:
                return self._error(h, 401, "GatedRepo", "Access to this model is restricted. You must be authenticated.")
            if token not in repo.allowed_tokens:
                return self._error(h, 403, "GatedRepo", "Access to this model is restricted and you are not in the authorized list.")
        if revision not in (repo.sha, "main"):
            return self._error(h, 404, "RevisionNotFound", "Invalid rev id")
        data = repo.files.get(filename)
        if data is None:
            return self._error(h, 404, "EntryNotFound", "Entry not found")
        headers = {"ETag": f'"{hashlib.sha1(data).hexdigest()}"', "X-Repo-Commit": repo.sha,
                   "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        start = 0
        rng = h.headers.get("Range")
        if rng and not head:
            start = int(re.match(r"bytes=(\d+)-", rng).group(1))
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        self._send(h, 206 if start else 200, data[start:], headers, head=head, file_key=f"{repo_id}/{filename}")

    # -- plumbing -----------------------------------------------------------------------------------------
    def _error(self, h, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self._send(h, status, body, {"X-Error-Code": code, "X-Error-Message": message,
                                     "Content-Type": "application/json"}, head=h.command == "HEAD")

    def _send(self, h, status: int, body: bytes, headers: dict, *, head: bool, file_key: str | None = None) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if head:
            return
        cut = self.fail_after.pop(file_key, None) if file_key else None
        chunk, delay = self.throttle or (len(body) or 1, 0.0)
        sent = 0
        try:
            while sent < len(body):
                if cut is not None and sent >= cut:
                    h.close_connection = True
                    return  # drop the connection mid-body
                piece = body[sent:min(sent + chunk, cut if cut is not None and cut > sent else len(body))]
                h.wfile.write(piece)
                h.wfile.flush()
                sent += len(piece)
                if delay:
                    time.sleep(delay)
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True


def make_cached_repo(cache, repo_id, files: dict[str, bytes], sha="a" * 40, ref="main"):
    """Lay out a repository exactly like huggingface_hub's cache: blobs, snapshot symlinks, refs."""
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = folder / "snapshots" / sha / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if ref:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / ref).write_text(sha)
    return folder
