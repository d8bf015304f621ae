"""The connection under the reference client: the socket, what it received, and one place that waits.

Strategy: a single :class:`asyncio.Protocol` (``_Connection``) owns the socket, a
receive buffer and one waiter; every wait of an exchange (HTTP/1.1 in
:mod:`._transport`, h2c in :mod:`._h2c`) goes through ``_Connection.wait()``, so the
three things that may end a wait early are handled in one place:

- the caller's :class:`~conformance.contract.AbortSignal` fires (from any thread):
  the connection is closed at once (``transport.abort()``; over h2 the exchange's
  RST_STREAM(CANCEL) is written first) and ``signal.reason``, that very object, is
  raised from the pending call;
- the awaiting task is cancelled: the connection is closed and ``CancelledError``
  propagates unchanged;
- no byte arrives for ``timeout`` seconds: :class:`TransportError`.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, Callable, Optional

__all__ = ["MAX_HEADER_BYTES", "TransportError"]

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


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
