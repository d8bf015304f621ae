"""The recorder: a loopback proxy in front of a real provider that writes fixtures.

Strategy: point a backend's base URL at :attr:`Recorder.url`; each request is
forwarded to the upstream (``http`` or ``https``, standard library ``http.client``
and ``ssl``), and the response is streamed back as it comes, one upstream transfer
chunk at a time, each flushed on its own, so the backend sees the provider's own
chunking. When the exchange ends, one JSON fixture is written
(:mod:`.fixture_format`): the request and the response, every chunk with its offset
and time, and the raw event log, with secrets removed at write time. The proxy
asks the upstream for ``accept-encoding: identity`` so that the chunks are the
events' own bytes, not a compressed stream.

The proxy binds loopback only: it forwards whatever reaches it with the caller's
credentials.
"""

from __future__ import annotations

import datetime as _dt
import http.client
import http.server
import json
import os
import re
import socket
import ssl
import threading
import time
from types import TracebackType
from typing import Any, Dict, List, Optional, Set, Tuple, Type
from urllib.parse import urlsplit

from ..errors import ProviderInputError
from ..provider import RecordedRequest
from ..provider._server import is_loopback
from ..provider.events import timed_events
from ..wires._base import Wire
from .fixture_format import Fixture, Stamp, model_of, schema_hash, strip_url

__all__ = ["Recorder"]

#: Headers that belong to one connection, never forwarded either way (RFC 9110 7.6.1).
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te",
    "trailer", "proxy-authorization", "proxy-authenticate",
})
_MAX_BODY = 64 * 1024 * 1024


class Recorder:
    """A recording proxy for ``wire`` in front of ``upstream``, writing fixtures to ``folder``.

    ``ssl_context`` verifies an ``https`` upstream (the default context trusts the
    system's authorities); ``scenario`` stamps each fixture with the conformance
    scenario it was recorded for; ``run_id`` stamps it with the fixed
    :class:`~conformance.gate.GateToolset` run id an agent loop ran its tools with
    (its fixture ids are then the same on replay). ``timeout`` bounds each upstream read, in seconds.
    """

    def __init__(
        self,
        wire: Wire,
        upstream: str,
        folder: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: Optional[ssl.SSLContext] = None,
        scenario: Optional[str] = None,
        run_id: Optional[str] = None,
        timeout: float = 120.0,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ProviderInputError(f"upstream must be an http:// or https:// URL, got {upstream!r}")
        if not is_loopback(host):
            raise ProviderInputError(
                f"refusing to bind {host}: the recorder forwards with the caller's credentials; "
                "it listens on loopback only"
            )
        self.wire = wire
        self.upstream = upstream
        self.base_url = strip_url(upstream)
        self.folder = folder
        self.scenario = scenario
        self.run_id = run_id
        self.timeout = timeout
        self._parts = parts
        self._context = ssl_context
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._seq = 0
        self._written: List[str] = []
        self._sockets: Set[socket.socket] = set()
        os.makedirs(folder, exist_ok=True)
        self._next = 1 + max((_number(n) for n in os.listdir(folder)), default=0)
        self._server = _Server((host, port), _Handler, self)
        self._thread: Optional[threading.Thread] = None

    # -- life cycle ----------------------------------------------------------

    def start(self) -> Recorder:
        """Start serving in a daemon thread; returns ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                name="conformance-recorder", daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and close every connection still open."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5.0)
            self._thread = None
        with self._lock:
            open_sockets = list(self._sockets)
        for sock in open_sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(
        self, kind: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The proxy's base URL: ``http://127.0.0.1:PORT``."""
        host, port = self._server.server_address[:2]
        text = host.decode("ascii") if isinstance(host, bytes) else str(host)
        return f"http://[{text}]:{port}" if ":" in text else f"http://{text}:{port}"

    @property
    def written(self) -> List[str]:
        """The paths of the fixtures written so far, in order."""
        with self._lock:
            return list(self._written)

    def wait_written(self, count: int, timeout: float = 5.0) -> List[str]:
        """Wait until ``count`` fixtures are written (a fixture follows its response's last byte)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._written) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"{len(self._written)} of {count} fixtures written within {timeout:g} s"
                    )
                self._changed.wait(remaining)
            return list(self._written)

    # -- one exchange --------------------------------------------------------

    def _connect(self) -> http.client.HTTPConnection:
        parts = self._parts
        assert parts.hostname is not None
        if parts.scheme == "https":
            context = self._context or ssl.create_default_context()
            return http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=self.timeout, context=context
            )
        return http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)

    def _upstream_headers(self, headers: Dict[str, str]) -> Dict[str, str]:
        parts = self._parts
        host = parts.netloc.rpartition("@")[2]
        out = {k: v for k, v in headers.items() if k not in _HOP_BY_HOP and k != "content-length"}
        # SigV4 signs Host: a client that signed for the upstream host keeps its own.
        if out.get("host", "").lower() != host.lower():
            out["host"] = host
        out["accept-encoding"] = "identity"
        return out

    def exchange(
        self, handler: _Handler, method: str, target: str, headers: Dict[str, str], body: bytes
    ) -> None:
        """Forward one request, stream the response back, write the fixture."""
        prefix = self._parts.path.rstrip("/")
        connection = self._connect()
        try:
            sent_at = time.monotonic()
            try:
                upstream_headers = self._upstream_headers(headers)
                connection.request(method, prefix + target, body=body, headers=upstream_headers)
                response = connection.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                reason = f"{type(exc).__name__}: {exc}"
                handler.fail(502, f"the recorder could not reach {self.base_url}: {reason}")
                return
            chunks, complete = self._relay(handler, response, sent_at)
            version = "HTTP/1.0" if response.version == 10 else "HTTP/1.1"
            self._write(method, target, headers, body, response, version, chunks, complete)
        finally:
            connection.close()

    def _relay(
        self, handler: _Handler, response: http.client.HTTPResponse, sent_at: float
    ) -> Tuple[List[Tuple[int, float, bytes]], bool]:
        """Pass the response on, one upstream chunk per write; returns the chunks and whether it ended."""
        chunked = bool(response.chunked)
        head = [f"HTTP/1.1 {response.status} {response.reason}\r\n"]
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                head.append(f"{name}: {value}\r\n")
        if chunked:
            head.append("transfer-encoding: chunked\r\n")
        head.append("connection: close\r\n\r\n")
        handler.close_connection = True
        chunks: List[Tuple[int, float, bytes]] = []
        offset = 0
        pending = b""
        try:
            handler.wfile.write("".join(head).encode("latin-1"))
            handler.wfile.flush()
            while True:
                data = response.read1(65536)
                if data:
                    pending += data
                    # Within an HTTP chunk that has not all come yet: wait for the rest,
                    # so the chunk is recorded and passed on whole, as the upstream framed it.
                    if chunked and getattr(response, "chunk_left", None):
                        continue
                at = time.monotonic() - sent_at
                if pending:
                    framed = b"%x\r\n%s\r\n" % (len(pending), pending) if chunked else pending
                    handler.wfile.write(framed)
                    handler.wfile.flush()
                    chunks.append((offset, at, pending))
                    offset += len(pending)
                    pending = b""
                if not data:
                    break
            if chunked:
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
        except (OSError, http.client.HTTPException):
            return chunks, False  # the client or the upstream left mid-way
        return chunks, True

    def _write(
        self,
        method: str,
        target: str,
        headers: Dict[str, str],
        body: bytes,
        response: http.client.HTTPResponse,
        version: str,
        chunks: List[Tuple[int, float, bytes]],
        complete: bool,
    ) -> None:
        path, _, query = target.partition("?")
        request = RecordedRequest(method, path, query, headers, body, "HTTP/1.1")
        parsed = request.json
        response_headers = {name.lower(): value for name, value in response.getheaders()}
        stamp = Stamp(
            wire=self.wire.name,
            model=model_of(path, parsed),
            base_url=self.base_url,
            recorded_at=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            schema_hash=schema_hash(parsed),
            stream=bool(self.wire.wants_stream(request)),
            user_agent=headers.get("user-agent"),
            scenario=self.scenario,
            run_id=self.run_id,
        )
        with self._lock:
            first_seq = self._seq
            events = timed_events(
                response_headers.get("content-type", ""),
                [data for _, _, data in chunks], [at for _, at, _ in chunks], first_seq,
            )
            self._seq += len(events)
            number = self._next
            self._next += 1
        fixture = Fixture.redacted_from(
            stamp, method, target, headers, body, response.status, version, response_headers,
            chunks, [e.as_dict() for e in events], complete, bool(response.chunked),
        )
        name = f"{number:04d}-{_slug(method, path)}.json"
        destination = os.path.join(self.folder, name)
        temporary = destination + ".partial"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(fixture.dumps())
        os.replace(temporary, destination)
        with self._lock:
            self._written.append(destination)
            self._changed.notify_all()


def _number(name: str) -> int:
    found = re.match(r"(\d+)-.*\.json$", name)
    return int(found.group(1)) if found else 0


def _slug(method: str, path: str) -> str:
    text = re.sub(r"[^A-Za-z0-9]+", "-", f"{method}-{path}").strip("-").lower()
    return text[:60] or "request"


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: Tuple[str, int], handler: Any, recorder: Recorder) -> None:
        self.recorder = recorder
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    #: Bound on waiting for a client's next byte; a stuck client does not keep a thread.
    timeout = 60.0

    def setup(self) -> None:
        super().setup()
        recorder = self.server.recorder
        with recorder._lock:
            recorder._sockets.add(self.connection)

    def finish(self) -> None:
        recorder = self.server.recorder
        with recorder._lock:
            recorder._sockets.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # the fixtures are the log

    def fail(self, status: int, message: str) -> None:
        body = json.dumps({"error": {"message": message, "type": "conformance_recorder"}}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def _body(self) -> Optional[bytes]:
        headers = self.headers
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts: List[bytes] = []
            size = 0
            while True:
                length = int(self.rfile.readline(100).split(b";")[0], 16)
                if length == 0:
                    while self.rfile.readline(1000) not in (b"\r\n", b""):
                        pass
                    return b"".join(parts)
                size += length
                if size > _MAX_BODY:
                    return None
                parts.append(self.rfile.read(length))
                self.rfile.read(2)
        length = int(headers.get("content-length") or 0)
        if length > _MAX_BODY:
            return None
        return self.rfile.read(length) if length else b""

    def _proxy(self) -> None:
        try:
            body = self._body()
        except ValueError:
            self.fail(400, "the request body's framing could not be read")
            return
        if body is None:
            self.fail(413, f"the request body is larger than {_MAX_BODY} bytes")
            return
        headers: Dict[str, str] = {}
        for name, value in self.headers.items():
            lower = name.lower()
            headers[lower] = f"{headers[lower]}, {value}" if lower in headers else value
        self.server.recorder.exchange(self, self.command, self.path, headers, body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _proxy
