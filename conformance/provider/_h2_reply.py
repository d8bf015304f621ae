"""h2 replies written to a stream: whole, streamed, held, cut.

Strategy: a mixin of :class:`._http2.H2Session`, as the HTTP/1.1 writing half is of
its connection. A reply is written in the callback that completed its request, as far
as the flow control windows allow; what must wait (a pause, a closed window, a paused
transport, an async handler) goes on in a task of its own, which a client RST_STREAM
cancels. Every stream chunk goes out as its own DATA frame(s) and its own transport
write; the HEADERS go with the first chunk, as HTTP/1.1 writes the head with it. How
a stream ends is the reply's ``end``: END_STREAM, ``RST_STREAM(NO_ERROR)`` for a clean
close, ``RST_STREAM(INTERNAL_ERROR)`` for a reset.

The ``h2`` state machine is pure Python and costs more per frame than the rest of a
response: a stream's chunks before its last are framed here (:func:`data_frame`), with
h2's flow control windows spent as ``send_data`` would spend them (:func:`spend`),
and only what changes a stream's state (HEADERS, the END_STREAM, a reset) goes through
``h2``. A DATA frame without END_STREAM moves no state, so h2's view stays whole. The
response headers are made valid and lower-case here, once per reply (they are cached
with it), so ``h2`` is told not to check them again per response.
"""

from __future__ import annotations

import asyncio
import struct
from time import monotonic
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

import h2.connection
import h2.errors
import h2.exceptions

from ._hub import REPLY_TYPES
from .replies import WATCH, DropReply, HangReply, JsonReply, RecordedRequest, Reply, StreamReply

if TYPE_CHECKING:
    from ._hub import Hub

__all__ = ["Carrier", "H2ReplyWriter", "Headers", "Stream", "data_frame", "encode_json", "spend"]


class Carrier(Protocol):
    """What an h2 session needs of the connection that carries it: the HTTP/1.1
    protocol object, which hands itself over at the preface or the ``Upgrade: h2c``.

    Named here, below both, so that the session never imports the HTTP/1.1 side.
    """

    transport: Any
    #: Set while the transport asks us to stop writing (the client does not read).
    paused: bool

    async def writable(self) -> None:
        """Return once the transport takes writes again (or is gone)."""


#: Connection-specific headers HTTP/2 forbids (RFC 9113 8.2.2); a reply's own are dropped.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"}
)
Headers = List[Tuple[bytes, bytes]]
#: A frame header read as one 32-bit word (24-bit length, 8-bit type), the flags and the
#: stream id (RFC 9113 4.1); DATA is type 0, and a DATA frame here carries no flags.
_FRAME_HEAD = struct.Struct(">IBI")


def _headers(status: int, fixed: Sequence[Tuple[str, str]], extra: Sequence[Tuple[str, str]]) -> Headers:
    """:status first, then the headers, as h2 would normalize them: names lower-case,
    values without surrounding whitespace, no connection-specific header."""
    names = {name.lower() for name, _ in extra}
    out: Headers = [(b":status", str(status).encode("ascii"))]
    out.extend((n.encode("ascii"), v.encode("utf-8")) for n, v in fixed if n not in names)
    out.extend(
        (n.lower().encode("ascii"), v.strip(" \t").encode("utf-8"))
        for n, v in extra
        if n.lower() not in _HOP_BY_HOP
    )
    return out


def encode_json(reply: JsonReply) -> Tuple[Headers, bytes]:
    body = reply.encoded()
    if reply.status < 200 or reply.status in (204, 304):
        body = b""
        fixed = [("content-type", reply.content_type)]
    else:
        fixed = [("content-type", reply.content_type), ("content-length", str(len(body)))]
    return _headers(reply.status, fixed, reply.header_items()), body


def data_frame(stream_id: int, data: bytes) -> bytes:
    """A DATA frame without flags: what ``send_data(stream_id, data)`` would serialize."""
    return _FRAME_HEAD.pack(len(data) << 8, 0, stream_id) + data


def spend(conn: h2.connection.H2Connection, stream: Any, size: int) -> None:
    """Take ``size`` bytes out of the connection's and the stream's send windows, as
    h2's ``send_data`` does, for a DATA frame written by :func:`data_frame`."""
    conn.outbound_flow_control_window -= size
    stream.outbound_flow_control_window -= size


def _h2_stream(conn: h2.connection.H2Connection, stream_id: int) -> Any:
    """h2's own stream object, when it keeps the windows :func:`spend` takes from; else None.

    Checked per stream rather than trusted: a later h2 that keeps them elsewhere gets
    every frame through ``send_data`` again, slower but right.
    """
    streams = getattr(conn, "streams", None)
    stream = streams.get(stream_id) if isinstance(streams, dict) else None
    if isinstance(getattr(stream, "outbound_flow_control_window", None), int) and isinstance(
        getattr(conn, "outbound_flow_control_window", None), int
    ):
        return stream
    return None


class Stream:
    """A request stream from its HEADERS until its reply has ended (or it was reset)."""

    __slots__ = ("stream_id", "head", "parts", "size", "request", "task", "done")

    def __init__(self, stream_id: int, head: List[Tuple[bytes, bytes]]) -> None:
        self.stream_id = stream_id
        self.head = head
        self.parts: List[bytes] = []
        self.size = 0
        self.request: Optional[RecordedRequest] = None
        self.task: Optional[asyncio.Task[Any]] = None
        self.done = False


class H2ReplyWriter:
    """The writing half of :class:`._http2.H2Session`: a reply in, frames on the stream."""

    conn: h2.connection.H2Connection
    hub: Hub
    owner: Carrier
    transport: Any
    loop: asyncio.AbstractEventLoop
    closed: bool
    window_waiters: List[asyncio.Future[None]]
    # What the session provides: declared, not defined, so nothing here shadows it.
    _flush: Callable[[], None]
    _finish: Callable[[Stream], None]

    def _dispatch(self, stream: Stream, request: RecordedRequest) -> None:
        reply = self.hub.resolve(request)
        if isinstance(reply, JsonReply):
            self._reply_now(stream, reply)
        elif isinstance(reply, StreamReply):
            self._stream_now(stream, reply)
        elif isinstance(reply, REPLY_TYPES):
            stream.task = self.hub.spawn(self._send(stream, reply))
        else:
            stream.task = self.hub.spawn(self._send_later(stream, reply))

    def _encode_stream(self, reply: StreamReply) -> Tuple[Headers, List[bytes]]:
        hub = self.hub
        cached = hub.h2_stream_cache
        if cached[0] is reply:
            encoded: Tuple[Headers, List[bytes]] = cached[1]
            return encoded
        headers = _headers(reply.status, [("content-type", reply.content_type)], reply.header_items())
        encoded = (headers, [bytes(c) for c in reply.chunks if c])
        hub.h2_stream_cache = (reply, encoded)
        return encoded

    def _stream_now(self, stream: Stream, reply: StreamReply) -> None:
        """A stream: its chunks written in this callback while the windows allow.

        Each chunk is still its own DATA frame and its own write (the HEADERS ride with
        the first); only what must wait (a pause, a closed window, a paused transport,
        a chunk larger than a frame) goes on in a task, from the chunk where this
        stopped. The chunks before the last are framed here (see the module's docstring).
        """
        headers, chunks = self._encode_stream(reply)
        conn = self.conn
        sid = stream.stream_id
        request = self._noted(stream, reply)
        request._times = times = []
        pauses = reply.transport_pauses() if reply.pauses else None
        count = len(chunks)
        # END_STREAM rides on the last chunk (or the headers) when nothing comes between
        # it and a complete end; otherwise _end sends what ends the stream.
        at_once = reply.end == "complete" and not reply.hang and not (pauses and count in pauses)
        last = count - 1 if at_once else -1
        watch = WATCH
        transport = self.transport
        owner = self.owner
        try:
            conn.send_headers(sid, headers, end_stream=at_once and not chunks)
            if at_once and not chunks:
                request._end = "complete"
            # One look at the windows, then counted down here: asking h2 per chunk
            # costs more than writing the chunk.
            room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            frame = conn.max_outbound_frame_size
            own = _h2_stream(conn, sid)
            for index, chunk in enumerate(chunks):
                size = len(chunk)
                if size > room or size > frame or owner.paused or (pauses and index in pauses):
                    self._flush()  # the HEADERS, and what h2 has queued, before the wait
                    rest = self._send_chunks(stream, chunks, index, request, last, pauses)
                    stream.task = self.hub.spawn(rest)
                    return
                ends = index == last
                if ends or own is None:
                    conn.send_data(sid, chunk, end_stream=ends)
                    out = conn.data_to_send()
                else:
                    # What h2 has queued (the HEADERS, window updates) goes first, in order.
                    out = conn.data_to_send() + data_frame(sid, chunk)
                    spend(conn, own, size)
                room -= size
                times.append(monotonic())  # before the write: a client with the bytes finds them logged
                if ends:
                    request._end = "complete"
                    request._written = count  # before the write that ends it, as HTTP/1.1 does
                if not transport.is_closing():
                    transport.write(out)
                request._written = index + 1
                if watch.waiting:
                    watch.notify()
            self._flush()
        except h2.exceptions.ProtocolError:  # the client reset the stream or left
            self._flush()
            self._finish(stream)
            return
        if at_once:
            # A tuple of floats the collector stops tracking: the request holds no list.
            request._times = tuple(times)
            if watch.waiting:
                watch.notify()
            self._finish(stream)
        elif pauses and count in pauses:
            stream.task = self.hub.spawn(self._send_chunks(stream, chunks, count, request, last, pauses))
        elif not reply.hang:
            self._end(stream, request)

    async def _send_chunks(
        self,
        stream: Stream,
        chunks: List[bytes],
        start: int,
        request: RecordedRequest,
        last: int,
        pauses: Optional[Dict[int, float]],
    ) -> None:
        """The rest of a stream, from chunk ``start``, after its pauses and flow control.

        A pause ends early when the client resets the stream or leaves (the task is
        cancelled) or the provider closes.
        """
        try:
            for index in range(start, len(chunks)):
                seconds = pauses.get(index) if pauses else None
                if seconds:
                    await asyncio.sleep(seconds)
                await self._data(stream.stream_id, chunks[index], index == last, request, index + 1)
                request._written = index + 1
                if WATCH.waiting:
                    WATCH.notify()
            seconds = pauses.get(len(chunks)) if pauses else None
            if seconds:
                await asyncio.sleep(seconds)
            if last >= 0:
                WATCH.notify()  # _data set the end with the last frame
            elif request._reply.hang:
                return
            else:
                self._end(stream, request)
                return
        except h2.exceptions.ProtocolError:
            pass
        self._finish(stream)

    def _end(self, stream: Stream, request: RecordedRequest) -> None:
        """End a stream whose last chunk did not: complete it, or cut it as the reply says.

        ``close`` is ``RST_STREAM(NO_ERROR)``, a stop with no error, as Node's
        ``Http2Stream.close()`` sends by default; ``reset`` is
        ``RST_STREAM(INTERNAL_ERROR)``, as nginx sends for a response it cannot finish.
        """
        end = request._reply.end
        try:
            if end == "complete":
                self.conn.end_stream(stream.stream_id)
            elif end == "close":
                self.conn.reset_stream(stream.stream_id, h2.errors.ErrorCodes.NO_ERROR)
            else:
                self.conn.reset_stream(stream.stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
        except h2.exceptions.ProtocolError:  # the client reset the stream or left first
            self._finish(stream)
            return
        request._end = end
        self._flush()
        WATCH.notify()
        self._finish(stream)

    def _encode(self, reply: JsonReply) -> Tuple[Headers, bytes]:
        hub = self.hub
        cached = hub.h2_cache
        if cached[0] is reply:
            encoded: Tuple[Headers, bytes] = cached[1]
            return encoded
        try:
            encoded = encode_json(reply)
        except Exception as exc:
            return encode_json(hub.encoding_failed(exc))
        hub.h2_cache = (reply, encoded)
        return encoded

    def _reply_now(self, stream: Stream, reply: JsonReply) -> None:
        """A whole reply: written in this callback when the windows allow it."""
        headers, body = self._encode(reply)
        conn = self.conn
        sid = stream.stream_id
        if reply.end != "complete":  # cut short: through the task, which waits on the windows
            stream.task = self.hub.spawn(self._send(stream, reply))
            return
        try:
            if not body:
                conn.send_headers(sid, headers, end_stream=True)
            elif (
                not self.owner.paused
                and len(body) <= conn.max_outbound_frame_size
                and conn.local_flow_control_window(sid) >= len(body)
            ):
                conn.send_headers(sid, headers)
                conn.send_data(sid, body, end_stream=True)
                request = self._noted(stream, reply)
                request._times = (monotonic(),)
                request._end = "complete"
                request._written = 1  # before the write that ends it, as HTTP/1.1 does
                self._flush()
                if WATCH.waiting:
                    WATCH.notify()
                self._finish(stream)
                return
            else:
                stream.task = self.hub.spawn(self._send(stream, reply))
                return
        except h2.exceptions.ProtocolError:  # the stream or connection is gone
            pass
        self._flush()
        self._finish(stream)

    async def _send_later(self, stream: Stream, pending: Awaitable[Reply]) -> None:
        reply = await pending
        stream.task = None
        if self.closed or stream.done:
            return
        if isinstance(reply, JsonReply):
            self._reply_now(stream, reply)
        elif isinstance(reply, StreamReply):
            self._stream_now(stream, reply)
        else:
            await self._send(stream, reply)

    async def _send(self, stream: Stream, reply: Reply) -> None:
        conn = self.conn
        sid = stream.stream_id
        try:
            if isinstance(reply, HangReply):
                return  # the stream stays in flight until the client resets it or leaves
            if isinstance(reply, DropReply):
                # Before any HEADERS: the stream ends with no response at all.
                errors = h2.errors.ErrorCodes
                conn.reset_stream(sid, errors.NO_ERROR if reply.end == "close" else errors.INTERNAL_ERROR)
                self._flush()
            elif isinstance(reply, JsonReply) and reply.end != "complete":
                await self._send_cut(stream, reply)
            elif isinstance(reply, JsonReply):
                headers, body = self._encode(reply)
                conn.send_headers(sid, headers, end_stream=not body)
                self._flush()
                if body:
                    request = self._noted(stream, reply)
                    await self._data(sid, body, True, request, 1)
                    request._written = 1
                    WATCH.notify()
            else:  # a StreamReply goes through _stream_now
                raise AssertionError(f"unexpected reply {reply!r}")
        except h2.exceptions.ProtocolError:
            pass  # the client reset the stream or the connection went away
        self._finish(stream)

    async def _send_cut(self, stream: Stream, reply: JsonReply) -> None:
        """A whole reply cut short: its headers with the full ``content-length``, part of
        its body, then ``RST_STREAM`` (``NO_ERROR`` for a clean close, ``INTERNAL_ERROR``
        for a reset) where END_STREAM should have come."""
        headers, body = self._encode(reply)
        sid = stream.stream_id
        self.conn.send_headers(sid, headers)
        self._flush()
        request = self._noted(stream, reply)
        sent = reply.sent_body(body)
        if sent:
            await self._data(sid, sent, False, request)
        else:
            request._times = (monotonic(),)
        request._written = 1
        errors = h2.errors.ErrorCodes
        self.conn.reset_stream(sid, errors.NO_ERROR if reply.end == "close" else errors.INTERNAL_ERROR)
        request._end = reply.end
        self._flush()
        WATCH.notify()

    async def _data(
        self, sid: int, data: bytes, end: bool, request: Optional[RecordedRequest] = None, written: int = 0
    ) -> None:
        """Send one chunk as DATA frame(s), waiting on flow control; one write per frame.

        The chunk's flush time joins the request's times just before its last frame is
        written; with ``end``, that frame ends the stream, and the request counts
        ``written`` chunks before it goes (as in every write that ends a response).
        """
        conn = self.conn
        own = _h2_stream(conn, sid)
        view = memoryview(data)  # frames are cut from it without a copy each
        offset = 0
        total = len(data)
        while offset < total:
            if self.owner.paused:
                await self.owner.writable()
            if self.closed:
                raise h2.exceptions.ProtocolError("connection closed")
            size = min(total - offset, conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            if size <= 0:
                waiter = self.loop.create_future()
                self.window_waiters.append(waiter)
                await waiter
                continue
            ends = end and offset + size == total
            # Framed here unless it ends the stream, or h2 would refuse it (the client
            # reset the stream while this waited): then h2 says so, as it always did.
            if ends or own is None or own.closed:
                conn.send_data(sid, data[offset : offset + size], end_stream=ends)
                out = conn.data_to_send()
            else:
                out = conn.data_to_send() + _FRAME_HEAD.pack(size << 8, 0, sid) + view[offset : offset + size]
                spend(conn, own, size)
            offset += size
            if offset == total and request is not None:
                times = request._times
                if isinstance(times, list):
                    times.append(monotonic())
                else:
                    request._times = (*times, monotonic())
                if end:
                    request._end = "complete"
                    request._written = written
            if not self.transport.is_closing():
                self.transport.write(out)

    def _noted(self, stream: Stream, reply: Reply) -> RecordedRequest:
        """Note on the stream's request that this reply is going out (its response log)."""
        request = stream.request
        assert request is not None  # built before any reply is chosen
        request._reply = reply
        request._numbering = self.hub
        return request
