"""A minimal async HTTP client for the reference backends: HTTP/1.1 and h2c.

Strategy: one connection per request, no pooling, over :mod:`._connection`'s
``_Connection``, the one place that waits (and so the one place an abort, a
cancellation or a timeout ends a wait).

The two protocols are small exchanges over that connection: ``_H1Exchange`` parses
the status line, headers and the body framing (Content-Length, chunked, or until
close); ``H2Exchange`` (:mod:`._h2c`, imported only when h2c is asked for) speaks
HTTP/2 for one stream, framed by hand, granting received data back so flow control
never stalls. :func:`request` returns as soon as the headers arrived; the body is read
lazily through :class:`Response`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Callable, Optional, Protocol
from urllib.parse import urlsplit

from ..contract import AbortSignal
from ._connection import _OWN_HEADERS, MAX_HEADER_BYTES, MAX_LINE_BYTES, TransportError, _Connection

__all__ = ["Response", "TransportError", "request"]

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
        buffer = conn.buffer
        if self._chunk_state == "size":
            # The common case, a whole chunk in the buffer (size line, data, CRLF), is taken
            # in one step; anything else goes through the states below.
            end = buffer.find(b"\r\n", 0, MAX_LINE_BYTES)
            if end > 0:
                size_text = bytes(buffer[:end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    size = 0  # the states below report the bad line
                start = end + 2
                stop = start + size
                if size > 0 and len(buffer) >= stop + 2 and buffer[stop : stop + 2] == b"\r\n":
                    data = bytes(buffer[start:stop])
                    del buffer[: stop + 2]
                    return data
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


# --- what an exchange offers --------------------------------------------------------------------


class _Exchange(Protocol):
    """One request and response over a connection: ``_H1Exchange`` or ``_h2c.H2Exchange``."""

    http_version: str

    async def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> None: ...

    async def receive_headers(self, method: str) -> tuple[int, dict[str, str]]: ...

    async def next_chunk(self) -> Optional[bytes]: ...

    def exhausted(self) -> bool: ...



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
        exchange: _Exchange,
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
    exchange: _Exchange
    if http2:
        from ._h2c import H2Exchange

        exchange = H2Exchange(conn)
    else:
        exchange = _H1Exchange(conn)

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
