"""What dlmcost lets the Hub (or whatever answers at HF_ENDPOINT) do: a guard around the client.

`huggingface_hub` trusts its server. dlmcost installs, for the duration of one of its Hub calls,
an HTTP client whose transport checks every answer before the library sees it:

- a total time budget for the whole call (default 30 s; `--hub-timeout`, `DLMCOST_HUB_TIMEOUT`):
  every socket operation (connect, each read and write) waits at most what is left of it, so an
  answer whose headers or body drip one byte at a time ends when the budget does, though each
  single read gets its byte in time (the client's own timeouts are per read);
- a `Retry-After` longer than what is left of the budget ends the call at once instead of sleeping;
- the ETag and commit headers of a file answer must be plain hex (the client builds cache paths
  from them: `"../../x"` would write outside HF_HOME);
- a body may not grow past a size limit, after decompression too (a gzip bomb), and only gzip or
  deflate encodings are accepted.

Every refusal is a `dlmcost.errors` exception, which the client does not catch or retry.
"""

from __future__ import annotations

import re
import time
import zlib
from contextlib import contextmanager
from typing import Iterator

from .. import files
from ...errors import HubUnreachable
from ...safe_text import shown

# Hub ETags are git blob ids (40 hex) or LFS sha256 (64 hex); a mirror may use another hex digest
# (md5, 32) or a multipart "<hex>-<parts>". Nothing else reaches a file name.
_ETAG = re.compile(r"^[0-9a-fA-F]{16,128}(-[0-9]{1,6})?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
CHUNK = 64 << 10


class HostileAnswer(HubUnreachable):
    """An answer no Hub gives (a path in an ETag...): refused, never replaced by the cache."""


class BudgetSpent(HubUnreachable):
    """The call's total time budget ran out."""


def normalise_etag(value: str) -> str:
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"')


def check_headers(url: str, headers) -> None:
    """Refuse a file answer whose ETag or commit could not be a Hub's."""
    for name in ("x-linked-etag", "etag"):
        value = headers.get(name)
        if value is not None and not _ETAG.fullmatch(normalise_etag(value)):
            raise HostileAnswer(f"{shown(url)} answered with ETag {shown(value, 80)!s}, which is not a plain hex "
                                f"digest; refusing it (a Hub ETag names a file in the cache)")
    commit = headers.get("x-repo-commit")
    if commit is not None and not _COMMIT.fullmatch(commit.strip()):
        raise HostileAnswer(f"{shown(url)} answered with commit {shown(commit, 80)}, which is not a 40-hex commit "
                            f"hash; refusing it")


_RATELIMIT_RESET = re.compile(r"(?:^|;)\s*t=(\d+)")


def _retry_after(headers) -> float | None:
    """The wait the client would sleep before retrying: Retry-After, or the IETF RateLimit header's
    reset time (`"api";r=0;t=55`), which the client reads first."""
    reset = _RATELIMIT_RESET.search(headers.get("ratelimit", ""))
    if reset:
        return float(reset.group(1))
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class Deadline:
    def __init__(self, budget_s: float, endpoint: str):
        self.budget_s = budget_s
        self.endpoint = endpoint
        self.end = time.monotonic() + budget_s

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise BudgetSpent(
                f"the Hub ({shown(self.endpoint)}) did not finish within the {self.budget_s:g} s time budget: "
                f"retry, raise --hub-timeout (or DLMCOST_HUB_TIMEOUT), or set HF_HUB_OFFLINE=1 to use the cache")
        return left


def _body_limit(path: str) -> int:
    return files.INDEX_LIMIT if path.endswith((".index.json", ".safetensors")) else files.CONFIG_LIMIT


class _Body:
    """The response stream, decompressed here (so the limit counts real bytes) and cut off at the
    deadline or the size limit."""

    def __init__(self, stream, deadline: Deadline, limit: int, encoding: str | None, url: str):
        self.stream, self.deadline, self.limit, self.url = stream, deadline, limit, url
        self.decoder = zlib.decompressobj(47 if encoding == "gzip" else -15) if encoding else None
        self.seen = 0

    def _count(self, data: bytes) -> bytes:
        self.seen += len(data)
        if self.seen > self.limit:
            raise HostileAnswer(f"{shown(self.url)} sent more than {self.limit >> 20} MiB (after decompression); "
                                f"refusing it")
        return data

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.stream:
            self.deadline.left()
            if self.decoder is None:
                yield self._count(chunk)
                continue
            data = chunk
            while data:
                out = self.decoder.decompress(data, CHUNK)
                yield self._count(out)
                data = self.decoder.unconsumed_tail
        if self.decoder is not None:
            yield self._count(self.decoder.flush())

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close:
            close()


class _DeadlineStream:
    """A connection whose every wait is cut to what is left of the budget; a wait that the budget
    ends raises `BudgetSpent` (not a read timeout, which the client would retry or blame on
    HF_HUB_ETAG_TIMEOUT)."""

    def __init__(self, inner, deadline: Deadline):
        self.inner, self.deadline = inner, deadline

    def _within(self, call, timeout: float | None, *args):
        left = self.deadline.left()
        try:
            return call(*args, timeout=left if timeout is None else min(timeout, left))
        except BudgetSpent:
            raise
        except Exception:
            self.deadline.left()  # the budget ended the wait: say so
            raise

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._within(self.inner.read, timeout, max_bytes)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        return self._within(self.inner.write, timeout, buffer)

    def start_tls(self, ssl_context, server_hostname=None, timeout: float | None = None):
        tls = self._within(self.inner.start_tls, timeout, ssl_context, server_hostname)
        return _DeadlineStream(tls, self.deadline)

    def close(self) -> None:
        self.inner.close()

    def get_extra_info(self, info: str):
        return self.inner.get_extra_info(info)


class _DeadlineBackend:
    """The connection pool's network backend, handing out `_DeadlineStream`s."""

    def __init__(self, inner, deadline: Deadline):
        self.inner, self.deadline = inner, deadline

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        left = self.deadline.left()
        stream = self.inner.connect_tcp(host, port, timeout=left if timeout is None else min(timeout, left),
                                        local_address=local_address, socket_options=socket_options)
        return _DeadlineStream(stream, self.deadline)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        left = self.deadline.left()
        stream = self.inner.connect_unix_socket(path, timeout=left if timeout is None else min(timeout, left),
                                                socket_options=socket_options)
        return _DeadlineStream(stream, self.deadline)

    def sleep(self, seconds: float) -> None:
        time.sleep(min(seconds, self.deadline.left()))


def _with_deadline(transport, deadline: Deadline):
    """The transport, its connection pool's sockets under the deadline (a fresh client: no
    connection made yet). httpx2 keeps the pool in `_pool`, httpcore2 its backend in `_network_backend`;
    tests/test_hub_hostile.py's dripping-header case fails if either moves."""
    pool = getattr(transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = _DeadlineBackend(pool._network_backend, deadline)
    return transport


def _transport_class():
    import httpx2

    class GuardedTransport(httpx2.BaseTransport):
        def __init__(self, inner, deadline: Deadline):
            self.inner, self.deadline = _with_deadline(inner, deadline), deadline

        def handle_request(self, request):
            left = self.deadline.left()
            timeouts = dict(request.extensions.get("timeout") or {})
            request.extensions["timeout"] = {k: min(timeouts.get(k) or left, left)
                                             for k in ("connect", "read", "write", "pool")}
            request.headers["Accept-Encoding"] = "gzip, deflate"
            response = self.inner.handle_request(request)
            url = str(request.url)
            try:
                wait = _retry_after(response.headers) if response.status_code in (429, 503) else None
                if wait is not None and wait + 1 > self.deadline.left():  # the client sleeps 1 s more
                    raise HubUnreachable(
                        f"the Hub ({shown(self.deadline.endpoint)}) is rate-limiting requests (HTTP "
                        f"{response.status_code}) and asks to wait {wait:g} s, more than the "
                        f"{self.deadline.budget_s:g} s time budget: retry later, set HF_TOKEN for a higher limit, "
                        f"or HF_HUB_OFFLINE=1 to use the cache")
                if "/resolve/" in request.url.path:
                    check_headers(url, response.headers)
                encoding = response.headers.get("content-encoding", "").strip().lower() or None
                if encoding == "identity":
                    encoding = None
                if encoding not in (None, "gzip", "deflate"):
                    raise HostileAnswer(f"{shown(url)} sent a body in the {shown(encoding, 40)} encoding, "
                                        f"which was not asked for")
            except BaseException:
                response.close()
                raise
            headers = [(k, v) for k, v in response.headers.multi_items()
                       if not (encoding and k.lower() in ("content-encoding", "content-length"))]
            body = _Body(response.stream, self.deadline, _body_limit(request.url.path), encoding, url)
            return httpx2.Response(response.status_code, headers=headers, stream=_SyncStream(body),
                                   extensions=response.extensions, request=request)

        def close(self):
            self.inner.close()

    class _SyncStream(httpx2.SyncByteStream):
        def __init__(self, body: _Body):
            self.body = body

        def __iter__(self):
            return iter(self.body)

        def close(self):
            self.body.close()

    return GuardedTransport


@contextmanager
def guarded(budget_s: float, endpoint: str) -> Iterator[Deadline]:
    """huggingface_hub's shared HTTP client, guarded, for the duration of the block."""
    from huggingface_hub.utils import _http as hf_http

    deadline = Deadline(budget_s, endpoint)
    guard = _transport_class()
    previous = hf_http._GLOBAL_CLIENT_FACTORY

    def factory():
        client = previous()
        client._transport = guard(client._transport, deadline)
        client._mounts = {pattern: guard(t, deadline) if t is not None else t for pattern, t in client._mounts.items()}
        return client

    hf_http.set_client_factory(factory)
    try:
        yield deadline
    finally:
        hf_http.set_client_factory(previous)
