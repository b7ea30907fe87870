"""A small stand-in for the Hugging Face Hub, for driving the real `huggingface_hub` client in tests.

It answers the routes that `hf_hub_download`, `get_hf_file_metadata`, `HfApi.model_info` and
`HfApi.get_safetensors_metadata` (huggingface_hub 2.x, httpx2) use, the way the Hub does:

    HEAD/GET /{namespace}/{name}/resolve/{revision}/{path}
        200 with ETag, X-Repo-Commit and Content-Length (HEAD: headers only); a `Range: bytes=a-b`
        GET answers 206 with Content-Range (how safetensors headers are read).
    GET /api/models/{namespace}/{name}[/revision/{revision}]
        the model-info JSON (id, sha, siblings, gated, safetensors totals).

and fails the way the Hub does, with the `X-Error-Code` header the client maps to its exceptions:
`RepoNotFound` (404; 401 for repos under `private/`, as the Hub answers anonymous callers),
`GatedRepo` (401 without the repo's token), `RevisionNotFound` (404), `EntryNotFound` (404, with
X-Repo-Commit so the client caches the miss). A repo may also fail every request with a status (500)
or sleep before answering (to exceed the client's timeout), or answer its model info with any bytes.

And it misbehaves the ways a hostile or broken server can (`Misbehaviour`): an ETag or commit
that is a path (`"../../../../x"`), from the first HEAD or only from a later one; a HEAD without
ETag; a 429 with a long Retry-After on downloads; a body dripped one byte at a time; a gzip bomb
under a small announced size; a body longer than the size the HEAD announced; a HEAD announcing
a huge file.

Usage:

    with FakeHub() as hub:                 # 127.0.0.1, a free port, a background thread
        env = {"HF_ENDPOINT": hub.url, ...}
        ...
        hub.requests                       # [(method, path), ...] seen so far

The server stops (and closes open connections, waking sleeping handlers) when the block ends.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import threading
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
LLADA_CONFIG = ROOT / "dlmcost" / "inputs" / "models" / "configs" / "GSAI-ML__LLaDA-8B-Instruct.json"

GATED_TOKEN = "hf_dlmcost_test_token"
MAX_RANGE = 1 << 20  # a range answer is at most 1 MiB: the server never builds big bodies


def commit_of(name: str) -> str:
    """A stable, fake 40-hex commit id for a repo."""
    return hashlib.sha1(f"commit:{name}".encode()).hexdigest()


def git_blob_etag(data: bytes) -> str:
    """What the Hub sends as the ETag of a non-LFS file: the git blob id."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# --- safetensors ---------------------------------------------------------------------------------

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I64": 8}


@dataclass
class Safetensors:
    """A safetensors file of which only the header exists: the tensor data is virtual (zeros)."""

    header: bytes  # 8-byte little-endian length + JSON header
    size: int  # the size the whole file would have

    @classmethod
    def build(cls, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> "Safetensors":
        meta: dict = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name, (dtype, shape) in tensors.items():
            n = 1
            for dim in shape:
                n *= dim
            nbytes = n * DTYPE_BYTES[dtype]
            meta[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
        body = json.dumps(meta, separators=(",", ":")).encode()
        body += b" " * (-len(body) % 8)  # the format pads the header to 8 bytes
        return cls(header=struct.pack("<Q", len(body)) + body, size=8 + len(body) + offset)

    def read(self, start: int, end: int) -> bytes:
        """Bytes [start, end] (inclusive) of the file: header bytes, then zeros."""
        end = min(end, self.size - 1, start + MAX_RANGE - 1)
        out = self.header[start:end + 1]
        return out + b"\0" * (end + 1 - start - len(out))

    @property
    def etag(self) -> str:
        return hashlib.sha256(self.header + str(self.size).encode()).hexdigest()


def llada_tensors(cfg: dict) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The tensor names and shapes of the LLaDA-8B checkpoint (model.transformer.*), from its config."""
    d, f, v, n = cfg["d_model"], cfg["mlp_hidden_size"], cfg["embedding_size"], cfg["n_layers"]
    out: dict[str, tuple[str, tuple[int, ...]]] = {"model.transformer.wte.weight": ("BF16", (v, d))}
    for i in range(n):
        p = f"model.transformer.blocks.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "attn_out"):
            out[p + proj + ".weight"] = ("BF16", (d, d))
        out[p + "ff_proj.weight"] = ("BF16", (f, d))
        out[p + "up_proj.weight"] = ("BF16", (f, d))
        out[p + "ff_out.weight"] = ("BF16", (d, f))
        out[p + "attn_norm.weight"] = ("BF16", (d,))
        out[p + "ff_norm.weight"] = ("BF16", (d,))
    out["model.transformer.ln_f.weight"] = ("BF16", (d,))
    out["model.transformer.ff_out.weight"] = ("BF16", (v, d))
    return out


def param_count(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    total = 0
    for _, shape in tensors.values():
        n = 1
        for dim in shape:
            n *= dim
        total += n
    return total


def sharded(tensors: dict[str, tuple[str, tuple[int, ...]]], shards: int) -> dict[str, bytes | Safetensors]:
    """model-0000i-of-0000n.safetensors files plus model.safetensors.index.json."""
    names = list(tensors)
    per = -(-len(names) // shards)
    files: dict[str, bytes | Safetensors] = {}
    weight_map: dict[str, str] = {}
    total_size = 0
    for i in range(shards):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: tensors[k] for k in names[i * per:(i + 1) * per]}
        st = Safetensors.build(part)
        files[fname] = st
        total_size += st.size
        weight_map.update(dict.fromkeys(part, fname))
    index = {"metadata": {"total_size": total_size}, "weight_map": weight_map}
    files["model.safetensors.index.json"] = json.dumps(index, indent=2).encode()
    return files


def gzip_bomb(size: int) -> bytes:
    """gzip of `size` zero bytes (built in 1 MiB steps: about 1 KB per MiB)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1 << 20)
    parts = [comp.compress(zeros) for _ in range(size >> 20)]
    return b"".join(parts) + comp.flush()


def raw_safetensors(header_json: str, size: int = 1 << 20) -> Safetensors:
    """A safetensors file from a header written by hand (for shapes json.dumps cannot write)."""
    body = header_json.encode()
    body += b" " * (-len(body) % 8)
    return Safetensors(header=struct.pack("<Q", len(body)) + body, size=max(size, 8 + len(body)))


@dataclass
class Misbehaviour:
    """Ways a file answer can go wrong (all off by default)."""

    etag: str | None = None  # ETag header instead of the real one
    commit: str | None = None  # X-Repo-Commit header instead of the real one
    after_heads: int = 0  # misbehave only from this many HEADs on (a first good answer, then a bad one)
    no_etag: bool = False  # HEAD without ETag
    retry_after: int | None = None  # GET answers 429 with this Retry-After
    ratelimit: str | None = None  # GET answers 429 with this RateLimit header ('"api";r=0;t=3600')
    drip_s: float = 0.0  # GET sends its body one byte every drip_s seconds
    drip_headers_s: float = 0.0  # every answer (HEAD too) sends its headers one byte every drip_headers_s seconds, without end
    gzip_size: int = 0  # GET sends a gzip bomb of this many bytes (Content-Encoding: gzip)
    extra_bytes: int = 0  # GET sends this many bytes more than the HEAD announced
    announce_size: int | None = None  # HEAD announces this Content-Length


# --- repos ---------------------------------------------------------------------------------------


@dataclass
class FakeRepo:
    files: dict[str, bytes | Safetensors]
    commit: str = ""
    branches: dict[str, str] = field(default_factory=dict)  # name -> commit; "main" by default
    token: str | None = None  # gated: resolve requests need "Authorization: Bearer <token>"
    fail_status: int | None = None  # every request answers this status (e.g. 500)
    delay_s: float = 0.0  # sleep this long before answering (a slow Hub)
    params: int | None = None  # the Hub's safetensors parameter total (model_info)
    misbehave: Misbehaviour | None = None
    info_body: bytes | None = None  # the model-info answer instead of the real one (a list, nesting without end)
    heads: int = 0  # HEADs answered so far

    def resolve(self, revision: str) -> str | None:
        if revision in self.branches:
            return self.branches[revision]
        return self.commit if revision == self.commit else None


def default_repos() -> dict[str, FakeRepo]:
    cfg_bytes = LLADA_CONFIG.read_bytes()
    cfg = json.loads(cfg_bytes)
    tensors = llada_tensors(cfg)
    params = param_count(tensors)
    readme = b"---\nlicense: mit\n---\n# test repo\n"
    broken = dict(cfg)
    del broken["n_layers"], broken["n_heads"]
    return {
        # The LLaDA-8B-Instruct config under an id that is not bundled, with a sharded checkpoint.
        "acme/llada-clone": FakeRepo({"config.json": cfg_bytes, "README.md": readme, **sharded(tensors, 2)},
                                     params=params),
        # Same model, one model.safetensors file.
        "acme/llada-single": FakeRepo({"config.json": cfg_bytes, "model.safetensors": Safetensors.build(tensors)},
                                      params=params),
        "acme/gated": FakeRepo({"config.json": cfg_bytes}, token=GATED_TOKEN),
        "acme/no-config": FakeRepo({"README.md": readme}),
        "acme/no-weights": FakeRepo({"config.json": cfg_bytes}),
        "acme/broken": FakeRepo({"config.json": cfg_bytes}, fail_status=500),
        "acme/slow": FakeRepo({"config.json": cfg_bytes}, delay_s=4.0),
        "acme/slow-too": FakeRepo({"config.json": cfg_bytes}, delay_s=4.0),  # a second client's, counted apart
        "acme/bad-json": FakeRepo({"config.json": b'{"model_type": "llada", "d_model": 4096,,}\n'}),
        "acme/missing-fields": FakeRepo({"config.json": json.dumps(broken, indent=2).encode()}),
    }


# --- server --------------------------------------------------------------------------------------

_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?/?$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx2 expects; every answer has Content-Length
    timeout = 10  # an idle keep-alive connection ends after this

    server: "_Server"

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    def setup(self):
        super().setup()
        self.server.track(self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    # -- answers --
    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if "Content-Length" not in (headers or {}):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD" and body:
                self.wfile.write(body)
        except OSError:  # the client gave up (timed out) and closed the connection
            self.close_connection = True

    def _error(self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> None:
        headers = {"X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), headers)

    # -- routing --
    def do_HEAD(self):
        self._route()

    def do_GET(self):
        self._route()

    def _route(self) -> None:
        path = urlsplit(self.path).path
        self.server.log(self.command, path)
        if m := _API.match(path):
            return self._model_info(unquote(m["repo"]), unquote(m["rev"]) if m["rev"] else "main")
        if m := _RESOLVE.match(path):
            return self._resolve(unquote(m["repo"]), unquote(m["rev"]), unquote(m["path"]))
        self._error(404, None, "Sorry, we can't find the page you are looking for.")

    def _repo(self, repo_id: str, *, files: bool) -> FakeRepo | None:
        """The repo, after its failure modes; None when an error has been answered."""
        repo = self.server.repos.get(repo_id)
        if repo is None:
            # The Hub answers 401 to anonymous callers for private (or missing) repos, 404 otherwise.
            status = 401 if repo_id.startswith("private/") else 404
            self._error(status, "RepoNotFound", "Repository not found")
            return None
        if repo.delay_s and self.server.stopping.wait(repo.delay_s):
            self.close_connection = True
            return None
        if repo.fail_status:
            self._send(repo.fail_status, b"Internal Error - We're working hard to fix this as soon as possible!",
                       content_type="text/plain")
            return None
        if files and repo.token and self.headers.get("Authorization") != f"Bearer {repo.token}":
            self._error(401, "GatedRepo",
                        f"Access to model {repo_id} is restricted. You must have access to it and be "
                        f"authenticated to access it. Please log in.")
            return None
        return repo

    def _model_info(self, repo_id: str, revision: str) -> None:
        repo = self._repo(repo_id, files=False)  # metadata of gated repos is public, as on the Hub
        if repo is None:
            return
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        if repo.info_body is not None:
            self._send(200, repo.info_body)
            return
        info = {
            "_id": hashlib.md5(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "modelId": repo_id,
            "author": repo_id.split("/")[0],
            "sha": commit,
            "lastModified": "2025-01-01T00:00:00.000Z",
            "createdAt": "2025-01-01T00:00:00.000Z",
            "private": False,
            "gated": "manual" if repo.token else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": ["safetensors"] if repo.params else [],
            "siblings": [{"rfilename": name} for name in sorted(repo.files)],
        }
        if repo.params:
            info["safetensors"] = {"parameters": {"BF16": repo.params}, "total": repo.params}
        self._send(200, json.dumps(info).encode())

    def _resolve(self, repo_id: str, revision: str, path: str) -> None:
        repo = self._repo(repo_id, files=True)
        if repo is None:
            return
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        content = repo.files.get(path)
        if content is None:
            self._error(404, "EntryNotFound", f"{path} does not exist on \"{revision}\"",
                        {"X-Repo-Commit": commit})
            return
        if isinstance(content, Safetensors):
            size, etag = content.size, content.etag
            reader = content.read
        else:
            size, etag = len(content), git_blob_etag(content)

            def reader(a: int, b: int, data: bytes = content) -> bytes:
                return data[a:b + 1]

        headers = {"ETag": f'"{etag}"', "X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        ctype = "application/json" if path.endswith(".json") else "application/octet-stream"
        bad = repo.misbehave
        if self.command == "HEAD":
            repo.heads += 1
        if bad and bad.drip_headers_s:
            return self._drip_headers(bad.drip_headers_s)
        if bad and repo.heads > bad.after_heads:
            if bad.etag is not None:
                headers["ETag"] = bad.etag
            if bad.commit is not None:
                headers["X-Repo-Commit"] = bad.commit
            if bad.no_etag:
                del headers["ETag"]
            if self.command == "HEAD" and bad.announce_size is not None:
                size = bad.announce_size
            if self.command == "GET" and self._misbehave_get(bad, reader(0, size - 1) if size <= MAX_RANGE else b"",
                                                           headers, ctype):
                return
        m = _RANGE.match(self.headers.get("Range", "").strip())
        if self.command == "GET" and m:
            start = int(m[1])
            end = int(m[2]) if m[2] else size - 1
            if start >= size:
                self._error(416, None, "Requested Range Not Satisfiable", {"Content-Range": f"bytes */{size}"})
                return
            body = reader(start, min(end, size - 1))
            headers["Content-Range"] = f"bytes {start}-{start + len(body) - 1}/{size}"
            self._send(206, body, headers, ctype)
            return
        if self.command == "HEAD":
            headers["Content-Length"] = str(size)
            self._send(200, b"", headers, ctype)
            return
        if size > MAX_RANGE:  # only headers of weight files exist; nobody downloads them whole
            self._error(500, None, "test server: whole-file download of a weight file")
            return
        self._send(200, reader(0, size - 1), headers, ctype)


    def _drip_headers(self, every_s: float) -> None:
        """A status line, then one header that never ends, one byte every `every_s` seconds: each
        read gets its byte in time, so only a deadline for the whole request ends it."""
        try:
            for byte in b"HTTP/1.1 200 OK\r\nX-Drip: " + b"a" * (1 << 20):
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                if self.server.stopping.wait(every_s):
                    break
        except OSError:
            pass
        self.close_connection = True

    def _misbehave_get(self, bad: Misbehaviour, body: bytes, headers: dict[str, str], ctype: str) -> bool:
        """Answer a file GET badly; False if this misbehaviour leaves GETs alone."""
        if bad.retry_after is not None:
            self._error(429, None, "Too Many Requests", {"Retry-After": str(bad.retry_after)})
            return True
        if bad.ratelimit is not None:
            self._error(429, None, "Too Many Requests", {"RateLimit": bad.ratelimit,
                                                         "RateLimit-Policy": '"api";q=1000;w=300'})
            return True
        if bad.gzip_size:
            bomb = gzip_bomb(bad.gzip_size)
            self._send(200, bomb, {**headers, "Content-Encoding": "gzip", "Content-Length": str(len(bomb))}, ctype)
            return True
        if bad.extra_bytes:
            body = body + b" " * bad.extra_bytes
            self._send(200, body, {**headers, "Content-Length": str(len(body))}, ctype)
            return True
        if bad.drip_s:
            try:
                self.send_response(200)
                for k, v in {**headers, "Content-Type": ctype, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    if self.server.stopping.wait(bad.drip_s):
                        break
            except OSError:
                pass
            self.close_connection = True
            return True
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, repos: dict[str, FakeRepo]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos = repos
        self.stopping = threading.Event()
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()

    def log(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    def track(self, conn: socket.socket, alive: bool) -> None:
        with self._lock:
            (self._conns.add if alive else self._conns.discard)(conn)

    def close_connections(self) -> None:
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address):  # a client that hung up: not worth a traceback
        pass


class FakeHub:
    """Context manager: a FakeRepo-serving Hub on 127.0.0.1:<free port> in a background thread."""

    def __init__(self, repos: dict[str, FakeRepo] | None = None):
        self.repos = default_repos() if repos is None else repos
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._requests: list[tuple[str, str]] = []
        self.url = ""  # http://127.0.0.1:<port>; kept after stop (a dead endpoint to point a client at)

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request so far, in arrival order."""
        return list(self._server.requests if self._server else self._requests)

    def start(self) -> "FakeHub":
        for name, repo in self.repos.items():  # repos may be added or changed until here (and after)
            repo.commit = repo.commit or commit_of(name)
            repo.branches = repo.branches or {"main": repo.commit}
        self._server = _Server(self.repos)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-hub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.stopping.set()  # wake handlers sleeping in a slow repo
        server.shutdown()  # ends serve_forever (bounded by poll_interval)
        server.close_connections()  # ends keep-alive handlers waiting for a next request
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._requests = list(server.requests)

    def __enter__(self) -> "FakeHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
