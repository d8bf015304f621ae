"""HTTP/1.1 on an :class:`asyncio.Protocol`, and the door to h2c.

Strategy: one protocol object per connection, a small state machine fed by
``data_received``; reading a request is :mod:`._h1_parse`'s part. A reply the script
already has (the common case) is answered in the same callback, head and body in one
``transport.write``, with no task. Tasks appear only for what must wait: an async
handler, a stream the socket cannot take yet, a pause before a chunk (which the
client's EOF cancels, so a held stream ends with its client), a hang.

The reader runs while the transport takes writes, so a client that leaves is seen at
once (``eof_received`` / ``connection_lost``), even while a reply hangs; bytes that come
while a reply is under way wait in the buffer (pipelining) up to a bound. While writes
are paused (the client does not read what it asked for) the reader pauses too, and no
further pipelined request is answered: a client that pipelines a hundred large
requests and never reads holds one reply in memory, not a hundred. A client that
leaves then resets the connection, which the writer sees.

h2c starts here too: the prior-knowledge preface parses as the request line
``PRI * HTTP/2.0``, and ``Upgrade: h2c`` is an ordinary request; either hands the
connection to :mod:`._http2`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Dict, List, Optional

from ._h1_parse import BODY, BUSY, CHUNKED, CLOSED, DRAIN, H2, HEAD, RequestParser
from ._h1_reply import ReplyWriter
from ._hub import REPLY_TYPES, Hub
from .replies import RecordedRequest

if TYPE_CHECKING:
    from ._http2 import H2Session

__all__ = ["H1Connection"]

_SWITCHING = b"HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: h2c\r\n\r\n"


class H1Connection(ReplyWriter, RequestParser, asyncio.Protocol):
    """One client connection: HTTP/1.1 until it turns into h2c."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.loop = hub.loop
        self.transport: Any = None
        self.buf = bytearray()
        self.state = HEAD
        self.h2: Optional[H2Session] = None
        #: The requests of this connection: all count as closed when it closes. Bounded
        #: as the record is, so that a connection kept alive for days holds no more.
        self.requests: Deque[RecordedRequest] = deque(maxlen=hub.max_requests)
        self.first = True
        self.keep_alive = True
        self.eof = False
        self.hanging = False
        #: A stream is held by a pause (in self.task): the client's EOF ends it.
        self.holding = False
        self.paused = False
        self.resumed: Optional[asyncio.Future[None]] = None
        self.task: Optional[asyncio.Task[Any]] = None
        self.timer: Optional[asyncio.TimerHandle] = None
        #: Loop time since when the client owes us bytes; 0 while we answer.
        self.since = 0.0
        #: Loop times the body wait began and its last byte came; 0 when not waiting.
        self.body_since = 0.0
        self.last_byte = 0.0
        # The request being read.
        self.method = ""
        self.path = ""
        self.query = ""
        self.version = ""
        self.headers: Dict[str, str] = {}
        self.length = 0
        self.parts: List[bytes] = []
        self.size = 0
        self.chunk_left = 0
        self.chunk_phase = 0
        self.head_only = False
        self.upgrade: Optional[bytes] = None

    # -- asyncio.Protocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        hub = self.hub
        if hub.shutting_down:
            self.transport.abort()
            return
        hub.connections.add(self)
        assert self.loop is not None
        self.since = self.loop.time()
        self.timer = self.loop.call_later(hub.header_timeout, self._check_idle)

    def data_received(self, data: bytes) -> None:
        if self.h2 is not None:
            self.h2.data_received(data)
            return
        state = self.state
        if state >= DRAIN:
            return
        buf = self.buf
        buf += data
        if state == BUSY:
            if len(buf) > self.hub.max_header_bytes + self.hub.max_body_bytes:
                self.abort()  # pipelined far past any request we would accept
            return
        if self.body_since:
            assert self.loop is not None
            self.last_byte = self.loop.time()
        self._process()

    def eof_received(self) -> Optional[bool]:
        self.eof = True
        if self.h2 is not None:
            return None
        self._mark_closed()
        if self.holding and self.task is not None:
            # The client left while a pause held its stream: send no more, close.
            self.task.cancel()
            self.task = None
            return None
        if self.state in (BODY, CHUNKED):
            self._record(self._build(b"".join(self.parts) if self.parts else bytes(self.buf),
                                     "the client closed the connection before the body ended"))
        elif self.state == BUSY and not self.hanging:
            # Half-closed after a complete request: finish the reply, then close.
            return True
        return None

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.hub.connections.discard(self)
        self.state = CLOSED
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.h2 is not None:
            self.h2.connection_lost()
        else:
            self._mark_closed()
        if self.task is not None:
            self.task.cancel()
            self.task = None
        self._wake_writer()

    def pause_writing(self) -> None:
        self.paused = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if self.state == CLOSED:
            return
        self.transport.resume_reading()
        self._wake_writer()
        if self.state == HEAD and self.buf and self.h2 is None:
            self._process()  # the pipeline held back while the client was not reading

    # -- shared with the h2 session -------------------------------------------

    async def writable(self) -> None:
        """Wait until the transport takes writes again (or is gone)."""
        while self.paused and self.state != CLOSED:
            if self.resumed is None:
                assert self.loop is not None
                self.resumed = self.loop.create_future()
            await self.resumed

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def shutdown(self) -> None:
        """The provider is closing: an h2 client hears GOAWAY first (sent if the socket takes it)."""
        if self.h2 is not None:
            self.h2.goaway_at_close()
        self.abort()

    def _wake_writer(self) -> None:
        resumed = self.resumed
        if resumed is not None:
            self.resumed = None
            if not resumed.done():
                resumed.set_result(None)

    def _mark_closed(self) -> None:
        hub = self.hub
        if hub.shutting_down:
            return
        for request in self.requests:
            if not request.closed:
                hub.mark_closed(request)

    def _check_idle(self) -> None:
        self.timer = None
        if self.state == CLOSED:
            return
        assert self.loop is not None
        hub = self.hub
        timeout = hub.header_timeout
        now = self.loop.time()
        if self.paused:  # the client does not read: it is not keeping us waiting
            self.timer = self.loop.call_later(timeout, self._check_idle)
            return
        if self.body_since and self.h2 is None:
            self._check_body(now)
            return
        since = self.h2.idle_since if self.h2 is not None else self.since
        if since and now - since >= timeout:
            if self.h2 is not None:
                self.h2.close_idle()
            elif self.state in (BODY, CHUNKED):
                self._fail(408, f"the request body did not arrive within {timeout:g} s", True)
            elif self.buf:
                self._fail(408, f"the request head did not arrive within {timeout:g} s", False)
            else:
                self.transport.close()
            return
        delay = timeout - (now - since) if since else timeout
        self.timer = self.loop.call_later(delay, self._check_idle)

    def _check_body(self, now: float) -> None:
        """408 for a body that stalled (no byte for body_idle_timeout) or took too long."""
        hub = self.hub
        idle, total = now - self.last_byte, now - self.body_since
        if idle >= hub.body_idle_timeout:
            self._fail(
                408,
                f"the request body stalled: no byte for {idle:.1f} s (body_idle_timeout="
                f"{hub.body_idle_timeout:g} s); {self._body_progress()}",
                True,
            )
        elif total >= hub.body_timeout:
            self._fail(
                408,
                f"the request body took longer than body_timeout={hub.body_timeout:g} s; "
                f"{self._body_progress()}",
                True,
            )
        else:
            delay = min(hub.body_idle_timeout - idle, hub.body_timeout - total)
            assert self.loop is not None
            self.timer = self.loop.call_later(delay, self._check_idle)

    def _body_progress(self) -> str:
        if self.state == BODY:
            return f"{len(self.buf)} of {self.length} bytes had arrived"
        return f"{self.size} bytes of chunks had arrived"

    def _wait_body(self) -> None:
        """The body is not all here: time its wait from now, and wake in time to check it."""
        assert self.loop is not None
        hub = self.hub
        self.body_since = self.last_byte = now = self.loop.time()
        due = now + min(hub.body_idle_timeout, hub.body_timeout)
        timer = self.timer
        if timer is None or timer.when() > due:
            if timer is not None:
                timer.cancel()
            self.timer = self.loop.call_at(due, self._check_idle)

    # -- reading requests -----------------------------------------------------

    def _build(self, body: bytes, error: Optional[str] = None) -> RecordedRequest:
        return RecordedRequest(
            self.method, self.path, self.query, self.headers, body, self.version, error=error
        )

    def _record(self, request: RecordedRequest) -> None:
        self.requests.append(request)
        self.hub.record(request)

    def _complete(self, body: bytes) -> None:
        request = RecordedRequest(self.method, self.path, self.query, self.headers, body, self.version)
        self.requests.append(request)
        self.hub.record(request)
        self.state = BUSY
        self.since = self.body_since = 0.0
        if self.upgrade is not None:
            self._start_upgrade(request)
            return
        reply = self.hub.resolve(request)
        if isinstance(reply, REPLY_TYPES):
            self._respond(reply, request)
        else:
            self.task = self.hub.spawn(self._respond_later(reply, request))

    # -- h2c ------------------------------------------------------------------

    def _start_h2(self, data: bytes) -> None:
        if not self.hub.h2_available():
            self._fail(
                505, "an HTTP/2 preface came, but the h2 package is not installed (pip install h2)",
                False,
            )
            return
        from ._http2 import H2Session

        self.buf.clear()
        self.state = H2
        self.h2 = H2Session(self, self.hub)
        self.h2.start(data)

    def _start_upgrade(self, request: RecordedRequest) -> None:
        from ._http2 import H2Session

        settings = self.upgrade
        assert settings is not None
        session = H2Session(self, self.hub)
        try:
            session.start_upgrade(settings)
        except Exception as exc:  # a malformed HTTP2-Settings header
            request.error = f"bad HTTP2-Settings header: {exc}"
            self._fail(400, request.error, False)
            return
        rest = bytes(self.buf)
        self.buf.clear()
        self.state = H2
        self.h2 = session
        self.transport.write(_SWITCHING)
        session.serve_upgraded(request)
        if rest:
            session.data_received(rest)
