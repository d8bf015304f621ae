"""A minimal async HTTP client for the reference backends: HTTP/1.1 and h2c.

Strategy: one connection per request, no pooling. A single :class:`asyncio.Protocol`
(``_Connection``) owns the socket, a receive buffer and one waiter; every wait in
the client goes through ``_Connection.wait()``, so the three things that may end a
wait early are handled in one place:

- the caller's :class:`~conformance.contract.AbortSignal` fires (from any thread):
  the connection is closed at once (``transport.abort()`` over HTTP/1.1; over h2 a
  RST_STREAM(CANCEL) is written first) and ``signal.reason``, that very object, is
  raised from the pending call;
- the awaiting task is cancelled: the connection is closed and ``CancelledError``
  propagates unchanged;
- no byte arrives for ``timeout`` seconds: :class:`TransportError`.

The two protocols are small exchanges over that connection: ``_H1Exchange`` parses
the status line, headers and the body framing (Content-Length, chunked, or until
close); ``_H2Exchange`` drives the ``h2`` state machine (imported only when h2c is
asked for) for one stream, acknowledging received data so flow control never
stalls. :func:`request` returns as soon as the headers arrived; the body is read
lazily through :class:`Response`.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from ..contract import AbortSignal

__all__ = ["Response", "TransportError", "request"]

#: The most header bytes a response may send before its body.
MAX_HEADER_BYTES = 64 * 1024
#: The most bytes of a chunk-size line or a trailer line.
MAX_LINE_BYTES = 8 * 1024
#: Bytes read from the socket per h2 event batch are whatever arrived; this bounds
#: how much response data may sit unread before the window is re-opened anyway.
READ_CHUNK = 64 * 1024

# Headers that belong to one HTTP/1.1 connection and are forbidden in h2 (RFC 9113 8.2.2).
_CONNECTION_HEADERS = frozenset(
    {"connection", "host", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
)
# Headers this client writes itself; a caller's copy would be a duplicate.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


class TransportError(ConnectionError):
    """The connection failed: refused, cut by the server mid-body, reset, or timed out."""


# --- the connection ----------------------------------------------------------------------------


class _Connection(asyncio.Protocol):
    """The socket, what it received, and the one place that waits for it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, authority: str, timeout: float) -> None:
        self.loop = loop
        self.authority = authority
        self.timeout = timeout
        self.transport: Optional[asyncio.Transport] = None
        self.buffer = bytearray()
        self.eof = False  # the peer closed, or the connection was lost
        self.lost_error: Optional[BaseException] = None
        self.abort_reason: Optional[BaseException] = None
        self.closed = False  # closed by this side
        self.finished = False  # the exchange is over; aborts no longer matter
        #: Bytes to send just before closing early (h2: RST_STREAM CANCEL).
        self.farewell: Callable[[], bytes] = lambda: b""
        self._waiter: Optional[asyncio.Future[bool]] = None
        self._connecting: Optional[asyncio.Future[Any]] = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.closed:  # aborted while the connect completed
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # Small request writes and streamed reads must not wait on Nagle.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # let the transport close itself

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.eof = True
        self.lost_error = exc
        self._wake()

    # waiting

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(True)

    def _time_out(self, waiter: asyncio.Future[bool]) -> None:
        if not waiter.done():
            waiter.set_result(False)

    def check(self) -> None:
        """Raise the abort reason, or an error if this side already closed."""
        if self.abort_reason is not None:
            raise self.abort_reason
        if self.closed:
            raise TransportError(f"the connection to {self.authority} was closed by the client")

    async def wait(self, what: str) -> None:
        """Wait until something happens on the connection; call only with nothing to do."""
        self.check()
        waiter: asyncio.Future[bool] = self.loop.create_future()
        self._waiter = waiter
        timer = self.loop.call_later(self.timeout, self._time_out, waiter)
        try:
            happened = await waiter
        except asyncio.CancelledError:
            self.close_now()
            raise
        finally:
            timer.cancel()
            self._waiter = None
        self.check()
        if not happened:
            self.close_now()
            raise TransportError(
                f"no data from {self.authority} for {self.timeout:g} s (the timeout) while {what}"
            )

    async def connect(self, host: str, port: int) -> None:
        """Open the TCP connection, abortable and bounded by the timeout."""
        connecting = asyncio.ensure_future(self.loop.create_connection(lambda: self, host, port))
        self._connecting = connecting
        connecting.add_done_callback(self._connected)
        try:
            while not connecting.done():
                await self.wait(f"connecting to {self.authority}")
        except BaseException:
            connecting.cancel()
            raise
        finally:
            self._connecting = None
        try:
            connecting.result()
        except OSError as exc:
            raise TransportError(f"cannot connect to {self.authority}: {exc}") from exc

    def _connected(self, connecting: asyncio.Future[Any]) -> None:
        # Retrieve the outcome even when nobody awaits it any more (after an abort),
        # so asyncio never logs "exception was never retrieved".
        if not connecting.cancelled():
            connecting.exception()
        self._wake()

    # closing

    def on_abort(self, reason: BaseException) -> None:
        """The signal fired: remember why and close now; runs on the loop."""
        if self.finished or self.abort_reason is not None:
            return
        self.abort_reason = reason
        self.close_now()
        self._wake()

    def close_now(self) -> None:
        """Close the connection at once, without waiting for the peer."""
        if self.closed:
            return
        self.closed = True
        if self._connecting is not None:
            self._connecting.cancel()
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        farewell = b""
        try:
            farewell = self.farewell()
        except Exception:  # a protocol that cannot say goodbye still gets closed
            farewell = b""
        if farewell:
            transport.write(farewell)
        if farewell and transport.get_write_buffer_size() == 0:
            transport.close()  # nothing is buffered, so this closes at once too
        else:
            transport.abort()

    def close_quietly(self) -> None:
        """Close after a complete exchange."""
        self.closed = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def write(self, data: bytes) -> None:
        self.check()
        assert self.transport is not None
        self.transport.write(data)

    def take(self, size: Optional[int] = None) -> bytes:
        """Remove and return up to ``size`` buffered bytes (all by default)."""
        if size is None or size >= len(self.buffer):
            data = bytes(self.buffer)
            self.buffer.clear()
        else:
            data = bytes(self.buffer[:size])
            del self.buffer[:size]
        return data

    def cut_error(self, what: str) -> TransportError:
        """The error for a connection the server closed before ``what`` was complete."""
        how = f" ({self.lost_error})" if self.lost_error is not None else ""
        return TransportError(f"{self.authority} closed the connection {what}{how}")


# --- HTTP/1.1 ------------------------------------------------------------------------------------


class _H1Exchange:
    """One HTTP/1.1 request and response over a fresh connection."""

    http_version = "HTTP/1.1"

    def __init__(self, conn: _Connection) -> None:
        self.conn = conn
        self.done = False
        self._mode = "close"  # "length", "chunked" or "close"
        self._remaining = 0  # bytes left in the body (length) or in the chunk (chunked)
        self._chunk_state = "size"  # "size", "data", "data-end", "trailers"

    async def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> None:
        lines = [
            f"{method} {target} HTTP/1.1",
            f"Host: {self.conn.authority}",
            f"Content-Length: {len(body)}",
            # One connection per request: say so, and the server need not keep it alive.
            "Connection: close",
        ]
        lines.extend(f"{name}: {value}" for name, value in headers if name.lower() not in _OWN_HEADERS)
        self.conn.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    async def receive_headers(self, method: str) -> tuple[int, dict[str, str]]:
        conn = self.conn
        while True:
            end = conn.buffer.find(b"\r\n\r\n")
            if end == -1:
                if len(conn.buffer) > MAX_HEADER_BYTES:
                    conn.close_now()
                    raise TransportError(
                        f"{conn.authority} sent more than {MAX_HEADER_BYTES} bytes of response headers"
                    )
                if conn.eof:
                    raise conn.cut_error("before the response headers")
                await conn.wait("waiting for the response headers")
                continue
            head = conn.take(end + 4)[:-4].decode("latin-1")
            status, headers = self._parse_head(head)
            if 100 <= status < 200 and status != 101:
                continue  # 100 Continue and other interim responses
            break
        self._choose_framing(method, status, headers)
        return status, headers

    def _parse_head(self, head: str) -> tuple[int, dict[str, str]]:
        status_line, *header_lines = head.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            self.conn.close_now()
            raise TransportError(f"{self.conn.authority} sent a malformed status line: {status_line!r}")
        self.http_version = parts[0]
        headers: dict[str, str] = {}
        for line in header_lines:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                self.conn.close_now()
                raise TransportError(f"{self.conn.authority} sent a malformed header line: {line!r}")
            key, value = name.lower(), value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        return int(parts[1]), headers

    def _choose_framing(self, method: str, status: int, headers: dict[str, str]) -> None:
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self.done = True
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode = "chunked"
        elif "content-length" in headers:
            try:
                self._remaining = int(headers["content-length"].split(",")[0])
            except ValueError:
                self.conn.close_now()
                raise TransportError(
                    f"{self.conn.authority} sent a bad Content-Length: {headers['content-length']!r}"
                ) from None
            self._mode = "length"
            self.done = self._remaining == 0

    async def next_chunk(self) -> Optional[bytes]:
        """The next piece of the body as it arrives, or ``None`` at its end."""
        conn = self.conn
        while not self.done:
            conn.check()
            if self._mode == "length":
                if conn.buffer:
                    data = conn.take(self._remaining)
                    self._remaining -= len(data)
                    self.done = self._remaining == 0
                    return data
                if conn.eof:
                    raise conn.cut_error(f"with {self._remaining} bytes of the body still to come")
            elif self._mode == "close":
                if conn.buffer:
                    return conn.take()
                if conn.eof:
                    if conn.lost_error is not None:
                        raise conn.cut_error("in the middle of the body")
                    self.done = True
                    return None
            else:
                data = self._chunked()
                if data:
                    return data
                if self.done:
                    return None
                if conn.eof:
                    raise conn.cut_error("in the middle of a chunked body (no terminating chunk)")
            await conn.wait("reading the response body")
        return None

    def _chunked(self) -> bytes:
        """Advance the chunked decoder over the buffer; return body bytes, if any."""
        conn = self.conn
        while True:
            if self._chunk_state == "data":
                if not conn.buffer:
                    return b""
                data = conn.take(self._remaining)
                self._remaining -= len(data)
                if self._remaining == 0:
                    self._chunk_state = "data-end"
                return data
            end = conn.buffer.find(b"\r\n")
            if end == -1:
                if len(conn.buffer) > MAX_LINE_BYTES:
                    conn.close_now()
                    raise TransportError(f"{conn.authority} sent a chunk line longer than {MAX_LINE_BYTES}")
                return b""
            line = conn.take(end + 2)[:-2]
            if self._chunk_state == "data-end":
                if line:
                    conn.close_now()
                    raise TransportError(f"{conn.authority} sent chunk data longer than its size")
                self._chunk_state = "size"
            elif self._chunk_state == "size":
                size_text = line.split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    conn.close_now()
                    raise TransportError(f"{conn.authority} sent a bad chunk size: {line!r}") from None
                if size == 0:
                    self._chunk_state = "trailers"
                else:
                    self._remaining = size
                    self._chunk_state = "data"
            elif not line:  # the blank line after the trailers ends the body
                self.done = True
                return b""

    def exhausted(self) -> bool:
        """Whether the body is over and nothing of it is left to hand out."""
        return self.done


# --- h2c -------------------------------------------------------------------------------------------


class _H2Exchange:
    """One stream over a fresh h2c connection (prior knowledge)."""

    http_version = "HTTP/2"

    def __init__(self, conn: _Connection) -> None:
        import h2.config
        import h2.connection

        self.conn = conn
        self.h2 = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        self.stream_id = 0
        self.done = False
        self._status: Optional[int] = None
        self._headers: dict[str, str] = {}
        self._data: deque[bytes] = deque()
        self._stream_open = False
        #: Why the stream ended short, once the response headers are in: raised after
        #: the data that came before it has been handed out.
        self._failed: Optional[TransportError] = None

    async def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> None:
        h2, conn = self.h2, self.conn
        h2.initiate_connection()
        self.stream_id = h2.get_next_available_stream_id()
        fields = [
            (":method", method),
            (":scheme", "http"),
            (":authority", conn.authority),
            (":path", target),
        ]
        fields.extend(
            (name.lower(), value)
            for name, value in headers
            if name.lower() not in _CONNECTION_HEADERS and name.lower() not in _OWN_HEADERS
        )
        fields.append(("content-length", str(len(body))))
        h2.send_headers(self.stream_id, fields, end_stream=not body)
        self._stream_open = True
        conn.farewell = self.cancel_bytes
        self._flush()
        view = memoryview(body)
        while view:
            window = min(h2.local_flow_control_window(self.stream_id), h2.max_outbound_frame_size)
            if window <= 0:
                await self._receive("waiting for flow-control window to send the request body")
                continue
            piece, view = view[:window], view[window:]
            h2.send_data(self.stream_id, bytes(piece), end_stream=not view)
            self._flush()

    def _flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.conn.write(data)

    async def _receive(self, what: str) -> None:
        """Feed what arrived to h2 and handle its events; wait if nothing did."""
        conn = self.conn
        conn.check()
        if not conn.buffer:
            if conn.eof:
                raise conn.cut_error("before the h2 stream ended")
            await conn.wait(what)
            if not conn.buffer:
                return
        import h2.events
        import h2.exceptions

        try:
            events = self.h2.receive_data(conn.take())
        except h2.exceptions.ProtocolError as exc:
            conn.close_now()
            raise TransportError(f"{conn.authority} broke the h2 protocol: {exc}") from exc
        received = 0
        for event in events:
            if isinstance(event, h2.events.ResponseReceived) and event.stream_id == self.stream_id:
                for name, value in event.headers:
                    key, text = _text(name), _text(value)
                    if key == ":status":
                        self._status = int(text)
                    elif not key.startswith(":"):
                        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text
            elif isinstance(event, h2.events.DataReceived) and event.stream_id == self.stream_id:
                if event.data:
                    self._data.append(event.data)
                received += event.flow_controlled_length
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id == self.stream_id:
                self._stream_open = False
                self.done = True
            elif isinstance(event, h2.events.StreamReset) and event.stream_id == self.stream_id:
                self._stream_open = False
                conn.close_now()
                self._fail(
                    TransportError(
                        f"{conn.authority} reset the h2 stream (error code {_error_name(event.error_code)})"
                    )
                )
                return
            elif isinstance(event, h2.events.ConnectionTerminated):
                if not self.done and (
                    event.error_code != 0 or (event.last_stream_id or 0) < self.stream_id
                ):
                    self._stream_open = False
                    conn.close_now()
                    self._fail(
                        TransportError(
                            f"{conn.authority} ended the h2 connection with GOAWAY "
                            f"({_error_name(event.error_code)}) before the stream ended"
                        )
                    )
                    return
        if received:
            # Acknowledged on receipt: the caller reads lazily, and a window left closed
            # would stall the server with no one to reopen it. Once for all the frames
            # of one read: a stream comes in many small frames, and h2 counts each.
            self.h2.acknowledge_received_data(received, self.stream_id)
        self._flush()

    def _fail(self, error: TransportError) -> None:
        """The stream ended short: raise now if no response came yet, else after its data."""
        if self._status is None:
            raise error
        self._failed = error

    async def receive_headers(self, method: str) -> tuple[int, dict[str, str]]:
        while self._status is None:
            if self.done:
                raise TransportError(f"{self.conn.authority} ended the h2 stream without response headers")
            await self._receive("waiting for the response headers")
        return self._status, self._headers

    async def next_chunk(self) -> Optional[bytes]:
        while True:
            # An abort comes first; the reset that closed the connection only after its data.
            if self._failed is None or self.conn.abort_reason is not None:
                self.conn.check()
            if self._data:
                return self._data.popleft()
            if self._failed is not None:
                raise self._failed
            if self.done:
                return None
            await self._receive("reading the response body")

    def exhausted(self) -> bool:
        """Whether the body is over and nothing of it is left to hand out."""
        return self.done and not self._data and self._failed is None

    def cancel_bytes(self) -> bytes:
        """RST_STREAM(CANCEL) for a stream still open, so the server stops at once."""
        if not self._stream_open:
            return b""
        import h2.errors

        self._stream_open = False
        self.h2.reset_stream(self.stream_id, h2.errors.ErrorCodes.CANCEL)
        return bytes(self.h2.data_to_send())


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)


def _error_name(code: Any) -> str:
    return getattr(code, "name", None) or str(code)


# --- the response ------------------------------------------------------------------------------------


class Response:
    """A response whose headers arrived; the body is read lazily.

    Read it whole with :meth:`read` or chunk by chunk with ``async for``. The
    connection closes when the body is complete, on any error, on abort, or on
    :meth:`aclose`; a caller that stops early must call :meth:`aclose` (or use
    ``async with``).
    """

    def __init__(
        self,
        status: int,
        headers: dict[str, str],
        http_version: str,
        exchange: _H1Exchange | _H2Exchange,
        conn: _Connection,
        unregister: Callable[[], None],
    ) -> None:
        self.status = status
        self.headers = headers
        self.http_version = http_version
        self._exchange = exchange
        self._conn = conn
        self._unregister = unregister
        self._complete = False
        #: What a failure while reading the body is raised as: the transport's own
        #: error by default; a backend translates it into its error type here.
        self.on_error: Callable[[TransportError], BaseException] = lambda error: error
        if exchange.exhausted():
            self._finish(complete=True)

    async def read(self) -> bytes:
        """The whole body (what is left of it)."""
        return b"".join([chunk async for chunk in self])

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self._complete:
            raise StopAsyncIteration
        try:
            chunk = await self._exchange.next_chunk()
        except TransportError as error:
            self._finish(complete=False)
            translated = self.on_error(error)
            if translated is error:
                raise
            raise translated from error
        except BaseException:
            self._finish(complete=False)
            raise
        if chunk is None:
            self._finish(complete=True)
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        """Close the connection at once (h2: RST_STREAM CANCEL first)."""
        self._finish(complete=False)

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _finish(self, *, complete: bool) -> None:
        conn = self._conn
        if complete:
            self._complete = True
            conn.finished = True
            conn.close_quietly()
        else:
            conn.close_now()
            conn.finished = True
        self._unregister()

    def __repr__(self) -> str:
        return f"<Response [{self.status} {self.http_version}]>"


# --- the entry point ---------------------------------------------------------------------------------


def _split_url(url: str) -> tuple[str, int, str, str]:
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"only http:// URLs are supported, got {url!r}")
    if not parts.hostname:
        raise ValueError(f"the URL has no host: {url!r}")
    port = parts.port or 80
    authority = parts.netloc.rpartition("@")[2]
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, port, authority, target


def _check_headers(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    items = [(str(name), str(value)) for name, value in headers.items()]
    for name, value in items:
        if not name or any(c in name for c in " \t\r\n:") or any(c in value for c in "\r\n\0"):
            raise ValueError(f"invalid request header {name!r}: {value!r}")
    return items


async def request(
    url: str,
    method: str,
    *,
    headers: Mapping[str, str],
    body: bytes = b"",
    http2: bool = False,
    signal: Optional[AbortSignal] = None,
    timeout: float = 60.0,
) -> Response:
    """Send one request on a new connection; return once the response headers arrived.

    ``http2`` uses h2c with prior knowledge. If ``signal`` fires at any moment
    (connecting, waiting for headers, reading the body), the connection is closed
    at once and ``signal.reason`` itself is raised. ``timeout`` bounds each wait
    for data; :class:`TransportError` reports a timeout or a connection the
    server broke.
    """
    host, port, authority, target = _split_url(url)
    items = _check_headers(headers)
    if signal is not None:
        signal.raise_if_aborted()
    loop = asyncio.get_running_loop()
    conn = _Connection(loop, authority, timeout)
    exchange: _H1Exchange | _H2Exchange = _H2Exchange(conn) if http2 else _H1Exchange(conn)

    def on_abort(reason: BaseException) -> None:
        # The signal may fire from any thread; only the loop may touch the connection.
        try:
            loop.call_soon_threadsafe(conn.on_abort, reason)
        except RuntimeError:  # the loop is closed: nothing is left to close
            pass

    unregister = signal.add_callback(on_abort) if signal is not None else (lambda: None)
    try:
        await conn.connect(host, port)
        await exchange.send(method.upper(), target, items, bytes(body))
        status, response_headers = await exchange.receive_headers(method.upper())
    except BaseException:
        conn.close_now()
        conn.finished = True
        unregister()
        raise
    return Response(status, response_headers, exchange.http_version, exchange, conn, unregister)
