"""The recorder: a loopback proxy in front of a real provider that writes fixtures.

Strategy: point a backend's base URL at :attr:`Recorder.url`; each request is
forwarded to the upstream (``http`` or ``https``, standard library ``http.client``
and ``ssl``), and the response is streamed back as it comes, one upstream transfer
chunk at a time, each flushed on its own, so the backend sees the provider's own
chunking. Each chunk goes to a spool file beside the fixtures as it arrives, so an
exchange holds no more than one chunk in memory however long it runs. When it ends,
one JSON fixture is written (:mod:`.fixture_format`): the request and the response,
every chunk with its offset and time, and the raw event log, with secrets removed at
write time (:mod:`.redact`). The proxy asks the upstream for ``accept-encoding:
identity`` so that the chunks are the events' own bytes, not a compressed stream; an
upstream that compresses anyway (gzip, deflate) is decoded before the fixture is
masked and written, and one in a coding that cannot be decoded is passed on but not
recorded (:attr:`Recorder.refused` says why). A request target in the absolute form an
HTTP proxy takes is refused with a 400.

Bounds, each ending the exchange with the fixture marked ``truncated`` (and not
``complete``) with what was kept: ``max_response_bytes`` (past it the recorder stops
reading the upstream and closes both sides), ``max_seconds`` for the whole exchange
beside ``timeout`` between two reads. A watcher sees the client go away while the
upstream is silent and closes the upstream at once, so the provider stops generating.
Fixture numbers are chosen when the file is written and taken with an exclusive
create, so recorders writing to one folder at once never overwrite one another.

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
import select
import socket
import ssl
import threading
import time
import zlib
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
#: The default cap on one response: far above any real LLM reply (a long stream is a few MB).
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: The default limit on one exchange, from the request to the response's last byte.
MAX_SECONDS = 600.0
#: How often the watcher looks for a client that went away, in seconds.
_WATCH_EVERY = 0.05
#: How many numbers a write tries past the highest in the folder before it gives up.
_NAME_TRIES = 10000


class Recorder:
    """A recording proxy for ``wire`` in front of ``upstream``, writing fixtures to ``folder``.

    ``ssl_context`` verifies an ``https`` upstream (the default context trusts the
    system's authorities); ``scenario`` stamps each fixture with the conformance
    scenario it was recorded for; ``run_id`` stamps it with the fixed
    :class:`~conformance.gate.GateToolset` run id an agent loop ran its tools with
    (its fixture ids are then the same on replay). ``timeout`` bounds each upstream read, in seconds;
    ``max_seconds`` the whole exchange; ``max_response_bytes`` the response's body.
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
        max_seconds: float = MAX_SECONDS,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
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
        for name, value in (("timeout", timeout), ("max_seconds", max_seconds)):
            if not value > 0:
                raise ProviderInputError(f"{name} must be a positive number of seconds, got {value!r}")
        cap = max_response_bytes
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ProviderInputError(f"max_response_bytes must be a positive whole number, got {cap!r}")
        self.timeout = timeout
        self.max_seconds = max_seconds
        self.max_response_bytes = max_response_bytes
        self._parts = parts
        self._context = ssl_context
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._seq = 0
        self._written: List[str] = []
        #: Why an exchange was passed on but not recorded (a response in a coding that
        #: cannot be searched for credentials), one line each.
        self.refused: List[str] = []
        self._sockets: Set[socket.socket] = set()
        os.makedirs(folder, exist_ok=True)
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
        watch = _Watch(handler.connection, connection, time.monotonic() + self.max_seconds)
        try:
            sent_at = time.monotonic()
            try:
                upstream_headers = self._upstream_headers(headers)
                connection.request(method, prefix + target, body=body, headers=upstream_headers)
                watch.start()
                response = connection.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                reason = watch.reason or f"{type(exc).__name__}: {exc}"
                handler.fail(502, f"the recorder could not reach {self.base_url}: {reason}")
                return
            with _Spool(self.folder) as spool:
                complete, truncated = self._relay(handler, response, sent_at, spool, watch)
                version = "HTTP/1.0" if response.version == 10 else "HTTP/1.1"
                self._write(method, target, headers, body, response, version, spool, complete, truncated)
        finally:
            watch.stop()
            connection.close()

    def _relay(
        self,
        handler: _Handler,
        response: http.client.HTTPResponse,
        sent_at: float,
        spool: _Spool,
        watch: _Watch,
    ) -> Tuple[bool, str]:
        """Pass the response on, one upstream chunk per write, each spooled as it comes.

        Returns whether it ended normally, and why it was cut short where the recorder cut it.
        """
        chunked = bool(response.chunked)
        head = [f"HTTP/1.1 {response.status} {response.reason}\r\n"]
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                head.append(f"{name}: {value}\r\n")
        if chunked:
            head.append("transfer-encoding: chunked\r\n")
        head.append("connection: close\r\n\r\n")
        handler.close_connection = True
        # The parts of one upstream chunk still coming: joined once, never added to in place.
        parts: List[bytes] = []
        size = 0
        try:
            handler.wfile.write("".join(head).encode("latin-1"))
            handler.wfile.flush()
            while True:
                data = response.read1(65536)
                if data:
                    room = self.max_response_bytes - spool.size - size
                    if len(data) > room:
                        parts.append(data[: max(0, room)])
                        self._pass_on(handler, spool, parts, sent_at, chunked)
                        watch.cut()
                        return False, f"the response passed max_response_bytes ({self.max_response_bytes})"
                    parts.append(data)
                    size += len(data)
                    # Within an HTTP chunk that has not all come yet: wait for the rest,
                    # so the chunk is recorded and passed on whole, as the upstream framed it.
                    if chunked and getattr(response, "chunk_left", None):
                        continue
                if parts:
                    self._pass_on(handler, spool, parts, sent_at, chunked)
                    parts, size = [], 0
                if not data:
                    break
            if chunked:
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
        except (OSError, http.client.HTTPException):
            if parts:
                spool.add(b"".join(parts), time.monotonic() - sent_at)
            # The client or the upstream left mid-way, or the watcher cut it.
            return False, watch.reason if watch.reason != _CLIENT_LEFT else ""
        if watch.reason:
            return False, watch.reason if watch.reason != _CLIENT_LEFT else ""
        return True, ""

    @staticmethod
    def _pass_on(handler: _Handler, spool: _Spool, parts: List[bytes], sent_at: float, chunked: bool) -> None:
        pending = b"".join(parts)
        if not pending:
            return
        spool.add(pending, time.monotonic() - sent_at)
        framed = b"%x\r\n%s\r\n" % (len(pending), pending) if chunked else pending
        handler.wfile.write(framed)
        handler.wfile.flush()

    def _write(
        self,
        method: str,
        target: str,
        headers: Dict[str, str],
        body: bytes,
        response: http.client.HTTPResponse,
        version: str,
        spool: _Spool,
        complete: bool,
        truncated: str,
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
        # The spool is read back once, here: the response is never in memory while it streams.
        chunks = spool.chunks()
        encoding = response_headers.pop("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            # Asked for identity, sent compressed anyway: stored decoded, so that what is masked
            # is what the client read and a replay serves bytes a client can read.
            try:
                chunks = decoded_chunks(chunks, encoding)
            except ValueError as exc:
                with self._lock:
                    self.refused.append(f"{method} {path}: not recorded: {exc}")
                    self._changed.notify_all()
                return
        with self._lock:
            first_seq = self._seq
            events = timed_events(
                response_headers.get("content-type", ""),
                [data for _, _, data in chunks], [at for _, at, _ in chunks], first_seq,
            )
            self._seq += len(events)
        fixture = Fixture.redacted_from(
            stamp, method, target, headers, body, response.status, version, response_headers,
            chunks, [e.as_dict() for e in events], complete and not truncated, bool(response.chunked),
            truncated,
        )
        del chunks, events
        destination = _write_exclusive(self.folder, _slug(method, path), fixture.dumps())
        with self._lock:
            self._written.append(destination)
            self._changed.notify_all()


_CLIENT_LEFT = "the client went away"


def decoded_chunks(chunks: List[Tuple[int, float, bytes]], encoding: str) -> List[Tuple[int, float, bytes]]:
    """A compressed response's chunks decoded, each to what its bytes decode to as they came.

    ``gzip`` and ``deflate`` (zlib-wrapped or raw) are read; any other coding is a
    :class:`ValueError` naming it, since its bytes cannot be searched for credentials.
    """
    if encoding in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        first = chunks[0][2][:1] if chunks else b""
        # RFC 9110 deflate is zlib-wrapped (0x78 first); some servers send it raw.
        decoder = zlib.decompressobj(zlib.MAX_WBITS if first == b"\x78" else -zlib.MAX_WBITS)
    else:
        raise ValueError(
            f"the upstream sent content-encoding {encoding!r} though the recorder asked for identity, "
            "and only gzip and deflate can be decoded to search it for credentials"
        )
    out: List[Tuple[int, float, bytes]] = []
    offset = 0
    try:
        for _, at, data in chunks:
            plain = decoder.decompress(data)
            if plain:
                out.append((offset, at, plain))
                offset += len(plain)
        rest = decoder.flush()
    except zlib.error as exc:
        raise ValueError(f"the {encoding} body does not decode ({exc})") from None
    if rest:
        at = chunks[-1][1] if chunks else 0.0
        out.append((offset, at, rest))
    return out


class _Watch:
    """Ends an exchange the moment its client goes away or its time runs out, by closing the upstream.

    A thread per exchange, bounded by it: it looks at the client's socket every
    :data:`_WATCH_EVERY` seconds (readable with nothing to read is a closed connection)
    and at the clock. Either way it shuts the upstream socket, which wakes the relay's
    blocked read, so the provider stops generating and no thread waits out ``timeout``.
    """

    def __init__(self, client: socket.socket, upstream: http.client.HTTPConnection, deadline: float) -> None:
        self.client = client
        self.upstream = upstream
        self.deadline = deadline
        self.reason = ""
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="conformance-recorder-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(1.0)

    def cut(self) -> None:
        """End the exchange now (the recorder's own bound was reached): close both sides."""
        self._close_upstream()
        try:
            self.client.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _close_upstream(self) -> None:
        sock = getattr(self.upstream, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.client], [], [], 0)
            if not readable:
                return False
            return self.client.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _run(self) -> None:
        while not self._done.wait(_WATCH_EVERY):
            if time.monotonic() >= self.deadline:
                self.reason = "the exchange passed max_seconds"
                self.cut()
                return
            if self._client_gone():
                self.reason = _CLIENT_LEFT
                self._close_upstream()
                return


class _Spool:
    """A response's chunks on disk as they arrive: their bytes in a temporary file, only offsets in memory."""

    def __init__(self, folder: str) -> None:
        import tempfile

        self._file = tempfile.TemporaryFile(dir=folder, prefix=".spool-")
        self._index: List[Tuple[int, float, int]] = []
        self.size = 0

    def add(self, data: bytes, at: float) -> None:
        self._file.write(data)
        self._index.append((self.size, at, len(data)))
        self.size += len(data)

    def chunks(self) -> List[Tuple[int, float, bytes]]:
        self._file.flush()
        self._file.seek(0)
        return [(offset, at, self._file.read(length)) for offset, at, length in self._index]

    def __enter__(self) -> _Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


def _write_exclusive(folder: str, slug: str, text: str) -> str:
    """Write ``text`` as the next numbered fixture in ``folder``, never over another; its path.

    The number is chosen now, from what the folder holds now, and taken with a hard link
    (which fails where the name exists): a file appears whole under its name or not at all,
    and two recorders, threads or processes writing at once each get a number of their own.
    """
    import tempfile

    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".partial-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        number = 1 + max((_number(n) for n in os.listdir(folder)), default=0)
        for _ in range(_NAME_TRIES):
            destination = os.path.join(folder, f"{number:04d}-{slug}.json")
            try:
                os.link(temporary, destination)
                return destination
            except FileExistsError:
                number += 1
            except OSError:
                # A file system without hard links: an exclusive create, then the content.
                try:
                    fd = os.open(destination, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                except FileExistsError:
                    number += 1
                    continue
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(text)
                return destination
        raise ProviderInputError(f"no free fixture number in {folder} after {_NAME_TRIES} tries")
    finally:
        try:
            os.unlink(temporary)
        except OSError:
            pass


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
        if not self.path.startswith("/"):
            # The absolute form (http://host/path) is what a client sends to an HTTP proxy;
            # taken as a path it would name another host and climb out of the fixture folder.
            form = "the absolute form an HTTP proxy takes" if "://" in self.path else "not a path"
            self.fail(
                400,
                f"the request target {self.path[:200]!r} is {form}: the recorder takes a path "
                "(/v1/...); point the client's base URL at the recorder rather than using it as a proxy",
            )
            return
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
