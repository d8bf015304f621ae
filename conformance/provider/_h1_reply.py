"""HTTP/1.1 replies written to a connection: whole, streamed, held, cut.

Strategy: a mixin of the connection protocol, as the reading half is (see
:mod:`._h1_parse`), so the hot path stays one callback and no hop between objects. A
whole reply goes out as head and body in one ``transport.write``; a stream writes each
chunk on its own and goes on in a task only for what must wait (a full socket, a
pause). How a stream ends is the reply's ``end``: the last chunk of the chunked
encoding, a clean close without it (FIN), or a reset (RST through ``SO_LINGER`` 0).
Each chunk's time is noted (on its request: see :class:`.events.ResponseLog`) just
before its write and the chunk counted just after it; in the write that ends the
response (a whole reply, or the last chunk carrying the terminating one) it is
counted just before, so that a client holding the end finds every chunk counted.
``wait_flushed`` callers are woken then, only when there are any.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from http import HTTPStatus
from time import monotonic
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ._h1_parse import BUSY, CLOSED, DRAIN, HEAD
from .replies import WATCH, DropReply, HangReply, JsonReply, RecordedRequest, Reply, StreamReply

if TYPE_CHECKING:
    from ._hub import Hub

__all__ = ["ReplyWriter", "encode_json", "encode_stream", "status_line"]

_REASONS = {int(s): s.phrase for s in HTTPStatus}
_STATUS_LINES: Dict[int, str] = {}

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


def _ends_at_once(reply: StreamReply, pauses: Optional[Dict[int, float]], count: int) -> bool:
    """Whether nothing comes between a stream's last chunk and its complete end."""
    return reply.end == "complete" and not reply.hang and not (pauses and count in pauses)


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


class ReplyWriter:
    """The writing half of :class:`._http1.H1Connection`: a reply in, bytes on the socket."""

    hub: Hub
    transport: Any
    loop: Optional[asyncio.AbstractEventLoop]
    buf: bytearray
    state: int
    keep_alive: bool
    eof: bool
    hanging: bool
    holding: bool
    paused: bool
    head_only: bool
    version: str
    parts: List[bytes]
    since: float
    task: Optional[asyncio.Task[Any]]
    timer: Optional[asyncio.TimerHandle]

    # What the connection and the reading half provide: declared, not defined, so
    # that nothing here shadows them in the connection's method order.
    _process: Callable[[], None]
    writable: Callable[[], Awaitable[None]]
    _build: Callable[..., RecordedRequest]
    _record: Callable[[RecordedRequest], None]

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
            if reply.end != "complete":
                self._respond_cut(reply, request, head, body)
                return
            end = _END_KEEP if self.keep_alive else _END_CLOSE
            if self.head_only:
                self.transport.write(head + end)
            else:
                # Logged before the write: a client that has the bytes finds them logged.
                request._reply = reply
                request._numbering = hub
                request._times = (monotonic(),)
                request._end = "complete"
                request._written = 1  # the write that ends it: see the module's docstring
                self.transport.write(head + end + body)
                if WATCH.waiting:
                    WATCH.notify()
            self._done()
        elif isinstance(reply, StreamReply):
            # A stream delimited by its own content-length goes without the chunked encoding.
            chunked = self.version == "HTTP/1.1" and reply.content_length() is None
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
            request._reply = reply
            request._numbering = hub
            request._times = times = []
            pauses = reply.transport_pauses() if reply.pauses and framed else None
            if framed and not (pauses and 0 in pauses):
                first = head + framed[0]
                times.append(monotonic())
                if len(framed) == 1 and ending and _ends_at_once(reply, pauses, 1):
                    request._end = "complete"  # after the time, before the write
                    first += ending
                    ending = b""
                    request._written = 1
                self.transport.write(first)
                request._written = 1
                if WATCH.waiting:
                    WATCH.notify()
                self._stream(framed, 1, ending, request, pauses)
            else:
                self.transport.write(head)
                self._stream(framed, 0, ending, request, pauses)
        elif isinstance(reply, DropReply):
            self._drop(reply)
        else:
            assert isinstance(reply, HangReply)
            self.hanging = True
            if self.eof:
                self.transport.close()

    def _respond_cut(self, reply: JsonReply, request: RecordedRequest, head: bytes, body: bytes) -> None:
        """A whole reply cut short: its full ``content-length``, part of its body, then the end.

        The client is left with a body shorter than the head promised, as when a
        connection dies mid-body; a HEAD request gets the head and the same end.
        """
        self.keep_alive = False
        request._reply = reply
        request._numbering = self.hub
        sent = b"" if self.head_only else reply.sent_body(body)
        request._times = (monotonic(),)
        self.transport.write(head + _END_CLOSE + sent)
        request._written = 1
        if reply.end == "close":
            request._end = "close"
            WATCH.notify()
            self._half_close()
        else:
            self._reset(request)

    def _drop(self, reply: DropReply) -> None:
        """End the connection before any byte of a response: a FIN, or a reset."""
        self.keep_alive = False
        if reply.end == "close":
            self._half_close()
            return
        self.state = DRAIN
        transport = self.transport
        if transport.is_closing():
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
        transport.abort()

    def _stream(
        self,
        framed: List[bytes],
        index: int,
        ending: bytes,
        request: RecordedRequest,
        pauses: Optional[Dict[int, float]],
    ) -> None:
        """Write the chunks from ``index`` on; a pause or a full socket goes on in a task."""
        transport = self.transport
        # Bound once: the loop runs per chunk, and a stream is mostly chunks.
        write, closing, note = transport.write, transport.is_closing, request._times.append
        watch = WATCH
        count = len(framed)
        while index < count:
            if closing():
                request._written = index
                return
            if self.paused or (pauses and index in pauses):
                request._written = index
                self.task = self.hub.spawn(self._stream_later(framed, index, ending, request, pauses))
                return
            note(monotonic())
            data = framed[index]
            index += 1
            if index == count and ending and _ends_at_once(request._reply, pauses, count):
                # The terminating chunk goes with the last one, as h2's END_STREAM rides
                # on the last DATA frame: one write less, the same bytes.
                request._end = "complete"  # after the time, before the write
                data += ending
                ending = b""
                request._written = index
            write(data)
            if watch.waiting:
                # Counted per chunk for a waiter; for anyone else the count catches up
                # when this run of writes ends, a few microseconds later, before the
                # waiters are looked for once more (one who came meanwhile finds it).
                request._written = index
                watch.notify()
        request._written = index
        if watch.waiting:
            watch.notify()
        if pauses and count in pauses:  # held after the last chunk, before the end
            self.task = self.hub.spawn(self._stream_later(framed, count, ending, request, pauses))
            return
        reply = request._reply
        if reply.hang:
            self.hanging = True
            if self.eof:
                transport.close()
            return
        if reply.end == "complete":
            request._end = "complete"  # before the write, as the times are
            # A tuple of floats the collector stops tracking: the request holds no list.
            request._times = tuple(request._times)
            if ending:
                transport.write(ending)
            if watch.waiting:
                watch.notify()
            self._done()
        elif reply.end == "close":
            # No last chunk: the body ends with the connection, short of its end.
            request._end = "close"
            watch.notify()
            self._half_close()
        else:
            self._reset(request)

    async def _stream_later(
        self,
        framed: List[bytes],
        index: int,
        ending: bytes,
        request: RecordedRequest,
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
            self._stream(framed, index, ending, request, pauses)
            self._process()

    def _reset(self, request: RecordedRequest) -> None:
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
            self.task = self.hub.spawn(self._reset_later(request))
            return
        request._end = "reset"
        WATCH.notify()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
        transport.abort()

    async def _reset_later(self, request: RecordedRequest) -> None:
        await self.writable()
        self.task = None
        self._reset(request)

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
        head = _head(status, [("content-type", "application/json"), ("content-length", str(len(body)))], ())
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
