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
import json
import socket
import struct
from http import HTTPStatus
from time import monotonic
from typing import TYPE_CHECKING, Any, Awaitable, Dict, List, Mapping, Optional, Sequence, Tuple

from ._h1_parse import BODY, BUSY, CHUNKED, CLOSED, DRAIN, H2, HEAD, RequestParser
from ._hub import REPLY_TYPES, Hub
from .events import ResponseLog
from .replies import WATCH, HangReply, JsonReply, RecordedRequest, Reply, StreamReply

if TYPE_CHECKING:
    from ._http2 import H2Session

__all__ = ["H1Connection"]

_REASONS = {int(s): s.phrase for s in HTTPStatus}
_STATUS_LINES: Dict[int, str] = {}

_SWITCHING = b"HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: h2c\r\n\r\n"
_END_KEEP = b"\r\n"
_END_CLOSE = b"connection: close\r\n\r\n"
_LAST_CHUNK = b"0\r\n\r\n"
#: SO_LINGER on, zero seconds: close() then resets the connection (RST, not FIN).
_LINGER_ZERO = struct.pack("ii", 1, 0)

#: How long a connection that was answered with an error may linger, reading and
#: discarding, so that closing it does not reset the error reply away.
_DRAIN_SECONDS = 2.0


def status_line(status: int) -> str:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = _STATUS_LINES[status] = f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
    return line


def _head(status: int, fixed: Sequence[Tuple[str, str]], extra: Sequence[Tuple[str, str]]) -> str:
    """Status line and headers, without the blank line; the reply's own headers win."""
    names = {name.lower() for name, _ in extra}
    lines = [status_line(status)]
    lines.extend(f"{name}: {value}\r\n" for name, value in fixed if name not in names)
    lines.extend(f"{name}: {value}\r\n" for name, value in extra)
    return "".join(lines)


def extra_headers(headers: Optional[Mapping[str, str]]) -> Sequence[Tuple[str, str]]:
    """A reply's own headers (the reply checked them when it was built)."""
    return [(str(k), str(v)) for k, v in headers.items()] if headers else ()


def encode_json(reply: JsonReply) -> Tuple[bytes, bytes]:
    """(head without its blank line, body) of a whole reply."""
    body = reply.encoded()
    if reply.status < 200 or reply.status in (204, 304):
        fixed: List[Tuple[str, str]] = [("content-type", reply.content_type)]
        body = b""
    else:
        fixed = [("content-type", reply.content_type), ("content-length", str(len(body)))]
    return _head(reply.status, fixed, extra_headers(reply.headers)).encode("utf-8"), body


def encode_stream(reply: StreamReply, chunked: bool) -> Tuple[bytes, List[bytes]]:
    """(head without its blank line, each non-empty chunk framed for the wire)."""
    fixed = [("content-type", reply.content_type)]
    if chunked:
        fixed.append(("transfer-encoding", "chunked"))
        chunks = [b"%x\r\n" % len(c) + c + b"\r\n" for c in reply.chunks if c]
    else:
        chunks = [bytes(c) for c in reply.chunks if c]
    return _head(reply.status, fixed, extra_headers(reply.headers)).encode("utf-8"), chunks


class H1Connection(RequestParser, asyncio.Protocol):
    """One client connection: HTTP/1.1 until it turns into h2c."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.loop = hub.loop
        self.transport: Any = None
        self.buf = bytearray()
        self.state = HEAD
        self.h2: Optional[H2Session] = None
        #: Every request of this connection: all count as closed when it closes.
        self.requests: List[RecordedRequest] = []
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

    # -- answering ------------------------------------------------------------

    async def _respond_later(self, pending: Awaitable[Reply], request: RecordedRequest) -> None:
        reply = await pending
        self.task = None
        if self.state == BUSY and not self.transport.is_closing():
            self._respond(reply, request)
            self._process()

    def _respond(self, reply: Reply, request: RecordedRequest) -> None:
        if isinstance(reply, JsonReply):
            hub = self.hub
            cached = hub.h1_cache
            if cached[0] is reply:
                head, body = cached[1]
            else:
                try:
                    head, body = encode_json(reply)
                except Exception as exc:  # e.g. a body json cannot encode
                    reply = hub.encoding_failed(exc)
                    head, body = encode_json(reply)
                else:
                    hub.h1_cache = (reply, (head, body))
            end = _END_KEEP if self.keep_alive else _END_CLOSE
            if self.head_only:
                self.transport.write(head + end)
            else:
                # Logged before the write: a client that has the bytes finds them logged.
                request.response = log = ResponseLog(reply, hub)
                log.times.append(monotonic())
                log.end = "complete"
                self.transport.write(head + end + body)
                log.written = 1
                if WATCH.waiting:
                    WATCH.notify()
            self._done()
        elif isinstance(reply, StreamReply):
            chunked = self.version == "HTTP/1.1"
            if not chunked:
                self.keep_alive = False
            hub = self.hub
            cached = hub.h1_stream_cache
            if cached[0] is reply and cached[1] == chunked:
                head, framed = cached[2]
            else:
                head, framed = encode_stream(reply, chunked)
                hub.h1_stream_cache = (reply, chunked, (head, framed))
            head += _END_KEEP if self.keep_alive else _END_CLOSE
            ending = _LAST_CHUNK if chunked else b""
            if self.head_only:
                framed = []
                ending = b""
            request.response = log = ResponseLog(reply, hub)
            pauses = reply.transport_pauses() if reply.pauses and framed else None
            if framed and not (pauses and 0 in pauses):
                log.times.append(monotonic())
                self.transport.write(head + framed[0])
                log.written = 1
                if WATCH.waiting:
                    WATCH.notify()
                self._stream(framed, 1, ending, log, pauses)
            else:
                self.transport.write(head)
                self._stream(framed, 0, ending, log, pauses)
        else:
            assert isinstance(reply, HangReply)
            self.hanging = True
            if self.eof:
                self.transport.close()

    def _stream(
        self,
        framed: List[bytes],
        index: int,
        ending: bytes,
        log: ResponseLog,
        pauses: Optional[Dict[int, float]],
    ) -> None:
        """Write the chunks from ``index`` on; a pause or a full socket goes on in a task."""
        transport = self.transport
        times = log.times
        watch = WATCH
        count = len(framed)
        while index < count:
            if transport.is_closing():
                return
            if self.paused or (pauses and index in pauses):
                self.task = self.hub.spawn(self._stream_later(framed, index, ending, log, pauses))
                return
            times.append(monotonic())
            transport.write(framed[index])
            index += 1
            log.written = index
            if watch.waiting:
                watch.notify()
        if pauses and count in pauses:  # held after the last chunk, before the end
            self.task = self.hub.spawn(self._stream_later(framed, count, ending, log, pauses))
            return
        reply = log.reply
        if reply.hang:
            self.hanging = True
            if self.eof:
                transport.close()
            return
        if reply.end == "complete":
            log.end = "complete"  # before the write, as the times are
            if ending:
                transport.write(ending)
            if watch.waiting:
                watch.notify()
            self._done()
        elif reply.end == "close":
            # No last chunk: the body ends with the connection, short of its end.
            log.end = "close"
            watch.notify()
            self._half_close()
        else:
            self._reset(log)

    async def _stream_later(
        self,
        framed: List[bytes],
        index: int,
        ending: bytes,
        log: ResponseLog,
        pauses: Optional[Dict[int, float]],
    ) -> None:
        seconds = pauses.pop(index, 0.0) if pauses else 0.0
        if seconds:
            if self.eof:  # the client left before the pause began: hold nothing for it
                self.task = None
                self.transport.close()
                return
            # Ended early by connection_lost (the task is cancelled), by the client's
            # EOF (eof_received cancels it) or by the provider closing.
            self.holding = True
            try:
                await asyncio.sleep(seconds)
            finally:
                self.holding = False
        await self.writable()
        self.task = None
        if self.state == BUSY and not self.transport.is_closing():
            self._stream(framed, index, ending, log, pauses)
            self._process()

    def _reset(self, log: ResponseLog) -> None:
        """End with a TCP reset, once what was written has left the transport's buffer.

        SO_LINGER with a zero timeout makes the close send RST instead of FIN. The
        write buffer is drained first (a limit of zero makes the transport say when)
        so that the chunks logged as written are on the socket before the reset.
        """
        transport = self.transport
        self.state = DRAIN
        if transport.is_closing():
            return
        if transport.get_write_buffer_size():
            transport.set_write_buffer_limits(0)
            self.task = self.hub.spawn(self._reset_later(log))
            return
        log.end = "reset"
        WATCH.notify()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
        transport.abort()

    async def _reset_later(self, log: ResponseLog) -> None:
        await self.writable()
        self.task = None
        self._reset(log)

    def _done(self) -> None:
        """The reply is complete: wait for the next request, or close."""
        if not self.keep_alive or self.eof:
            self.state = CLOSED
            self.transport.close()
            return
        self.state = HEAD
        assert self.loop is not None
        self.since = self.loop.time()

    def _fail(self, status: int, message: str, parsed: bool) -> bool:
        """Answer a bad request with an error and close; record it if it parsed."""
        if parsed:
            self._record(self._build(b"".join(self.parts), error=message))
        kind = "conformance_h2c_only" if status == 505 and parsed else "conformance_bad_request"
        body = json.dumps({"error": {"message": message, "type": kind}}).encode("utf-8")
        head = _head(
            status, [("content-type", "application/json"), ("content-length", str(len(body)))], ()
        )
        self.state = DRAIN
        self.buf.clear()
        self.transport.write(head.encode("utf-8") + _END_CLOSE + body)
        self._half_close()
        return False

    def _half_close(self) -> None:
        """Close cleanly after what was written: FIN now, the socket once the client left.

        Closing with unread input would reset the connection and could take the last
        bytes with it; half-close instead and let the client leave first, within a bound.
        """
        self.state = DRAIN
        transport = self.transport
        if transport.can_write_eof() and not self.eof:
            transport.write_eof()
            assert self.loop is not None
            if self.timer is not None:
                self.timer.cancel()
            self.timer = self.loop.call_later(_DRAIN_SECONDS, transport.close)
        else:
            transport.close()

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
