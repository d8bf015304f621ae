"""h2c: an ``h2`` state machine behind the connection's protocol object.

Strategy: the bytes from the client are cut into whole frames here, before ``h2``
sees them, for one reason: a client GOAWAY must not cut the responses already under
way. The AWS SDK for JavaScript sends ``GOAWAY(NO_ERROR)`` as soon as it has the
response headers and keeps reading the stream; ``h2`` would move the connection to
CLOSED at once and refuse every further ``send_data``. So a NO_ERROR GOAWAY that
comes while streams are in flight is held back (and any more of them: RFC 9113 6.8
allows several), and fed to ``h2`` only when the last of them has ended; then the
connection closes gracefully. Frames after it (window updates, resets) still go to
``h2`` as usual. The same cut counts the frames that demand an answer (PING,
SETTINGS): a flood of them gets ``GOAWAY(ENHANCE_YOUR_CALM)`` before ``h2`` queues
the answers. While the client reads nothing, the connection stops reading (see
:mod:`._http1`), so a flood that is never read costs one read's worth.

``h2`` answers a stream over ``MAX_CONCURRENT_STREAMS`` with a connection error,
which kills every stream in flight; RFC 9113 5.1.2 asks for
``RST_STREAM(REFUSED_STREAM)`` on the extra stream alone. So the limit is advertised
as ``h2`` sets it, and enforced here, stream by stream.

Replies, from HEADERS to the end of the stream, are written by the session's writing
half, :mod:`._h2_reply`. The connection that carries the session is the HTTP/1.1
protocol object, seen here only as the small :class:`._h2_reply.Carrier` it hands
over, so that this module never imports the HTTP/1.1 side.
"""

from __future__ import annotations

import asyncio
import base64
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from ._h2_reply import Carrier, H2ReplyWriter, Stream
from ._hub import Hub
from .replies import JsonReply, RecordedRequest

__all__ = ["H2Session"]

_PREFACE_SIZE = 24
_FRAME_HEAD = 9
_GOAWAY = 0x7
_PING = 0x6
_SETTINGS = 0x4
#: PING and SETTINGS frames (each asks for an answer) a client may send in a second
#: before it is told ENHANCE_YOUR_CALM. Real clients send a handful.
_FLOOD_FRAMES = 10000
#: The connection-level receive window we open at the start, so large bodies flow.
_CONNECTION_WINDOW = 1 << 24

#: How long a connection this side closed may stay half-open, reading and discarding,
#: while the client reads the last frames and leaves.
_LINGER_SECONDS = 2.0


class H2Session(H2ReplyWriter):
    """The HTTP/2 side of one connection; the owner protocol forwards its events here."""

    def __init__(self, owner: Carrier, hub: Hub) -> None:
        self.owner = owner
        self.hub = hub
        self.transport = owner.transport
        # The response headers are normalized and checked once per reply, where they are
        # made (see _h2_reply): h2 need not do it again for every response.
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(
                client_side=False,
                header_encoding=None,
                validate_outbound_headers=False,
                normalize_outbound_headers=False,
            )
        )
        self.buf = bytearray()
        self.preface_left = _PREFACE_SIZE
        self.streams: Dict[int, Stream] = {}
        #: The requests of this connection, bounded as the record is (see _http1).
        self.requests: Deque[RecordedRequest] = deque(maxlen=hub.max_requests)
        self.held_goaway: Optional[bytes] = None
        self.window_waiters: List[asyncio.Future[None]] = []
        self.closed = False
        assert hub.loop is not None
        self.loop = hub.loop
        self.idle_since = self.loop.time()
        self.max_streams = 100
        self.flood_since = 0.0
        self.flood_count = 0
        self._handlers: Dict[type, Callable[[Any], None]] = {
            h2.events.RequestReceived: self._on_request,
            h2.events.DataReceived: self._on_data,
            h2.events.StreamEnded: self._on_stream_ended,
            h2.events.StreamReset: self._on_reset,
            h2.events.WindowUpdated: self._on_window,
            h2.events.RemoteSettingsChanged: self._on_window,
            h2.events.ConnectionTerminated: self._on_terminated,
        }

    # -- starting ------------------------------------------------------------

    def start(self, data: bytes) -> None:
        """Prior knowledge: ``data`` begins with the client preface."""
        self.conn.initiate_connection()
        self._limit_streams_here()
        self.conn.increment_flow_control_window(_CONNECTION_WINDOW - 65535)
        self._flush()
        self.data_received(data)

    def start_upgrade(self, settings: bytes) -> None:
        """Upgrade: h2c; ``settings`` is the HTTP2-Settings header (base64url, maybe unpadded)."""
        padded = settings + b"=" * (-len(settings) % 4)
        base64.urlsafe_b64decode(padded)  # raises on garbage before h2 sees it
        self.conn.initiate_upgrade_connection(padded)
        self._limit_streams_here()

    def _limit_streams_here(self) -> None:
        """Keep h2's advertised MAX_CONCURRENT_STREAMS, but enforce it in :meth:`_on_request`.

        Our SETTINGS are already written with h2's value; h2 is then given a limit it
        will not reach, so that the extra stream is refused alone, not the connection.
        """
        settings = self.conn.local_settings
        self.max_streams = settings.max_concurrent_streams
        values = {h2.settings.SettingCodes(code): settings[code] for code in settings}
        values[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 2**31 - 1
        self.conn.local_settings = h2.settings.Settings(client=False, initial_values=values)

    def serve_upgraded(self, request: RecordedRequest) -> None:
        """After the 101: send our preface and answer the upgrade request as stream 1."""
        self.conn.increment_flow_control_window(_CONNECTION_WINDOW - 65535)
        self._flush()
        stream = Stream(1, [])
        stream.request = request
        self.streams[1] = stream
        self.requests.append(request)
        self.idle_since = 0.0
        self._dispatch(stream, request)

    # -- reading -------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        buf = self.buf
        buf += data
        size = len(buf)
        pos = 0
        if self.preface_left:
            pos = min(self.preface_left, size)
            self.preface_left -= pos
        start = 0
        limit = self.conn.max_inbound_frame_size
        asking = 0
        while size - pos >= _FRAME_HEAD:
            length = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
            if length > limit:  # h2 would wait for all of it; refuse it now
                self._refuse(h2.errors.ErrorCodes.FRAME_SIZE_ERROR)
                return
            end = pos + _FRAME_HEAD + length
            if end > size:
                break
            kind = buf[pos + 3]
            if kind == _GOAWAY and length >= 8:
                if pos > start and not self._feed(bytes(buf[start:pos])):
                    return
                start = pos
                error_code = int.from_bytes(buf[pos + 13 : pos + 17], "big")
                if self.streams and error_code == 0:
                    if self.held_goaway is None:
                        self.held_goaway = bytes(buf[pos:end])
                    start = end  # a second one says nothing the first did not
            elif (kind == _PING or kind == _SETTINGS) and not buf[pos + 4] & 1:  # not an ACK
                asking += 1
            pos = end
        if asking and self._flooded(asking):
            return
        chunk = bytes(buf[start:pos])
        del buf[:pos]
        if chunk:
            self._feed(chunk)

    def _flooded(self, count: int) -> bool:
        """Count frames that ask for an answer; past the budget, GOAWAY(ENHANCE_YOUR_CALM)."""
        now = self.loop.time()
        if now - self.flood_since >= 1.0:
            self.flood_since = now
            self.flood_count = 0
        self.flood_count += count
        if self.flood_count <= _FLOOD_FRAMES:
            return False
        self._refuse(h2.errors.ErrorCodes.ENHANCE_YOUR_CALM)
        return True

    def _feed(self, data: bytes) -> bool:
        """Give whole frames to h2 and act on its events; False once the connection is done."""
        if self.closed:
            return False
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            # h2 has usually queued a GOAWAY with the error code (not for a bad preface).
            out = self.conn.data_to_send()
            if not out:
                code = getattr(exc, "error_code", None) or h2.errors.ErrorCodes.PROTOCOL_ERROR
                self._refuse(code)
                return False
            self.transport.write(out)
            self._close()
            return False
        handlers = self._handlers
        for event in events:
            handler = handlers.get(type(event))
            if handler is not None:
                handler(event)
            if self.closed:
                return False
        self._flush()
        return True

    def _on_request(self, event: h2.events.RequestReceived) -> None:
        if len(self.streams) >= self.max_streams:
            # Not processed, so the client may retry it (RFC 9113 8.7); not recorded.
            self.conn.reset_stream(event.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
            return
        self.streams[event.stream_id] = Stream(event.stream_id, list(event.headers or ()))
        self.idle_since = 0.0

    def _on_data(self, event: h2.events.DataReceived) -> None:
        stream = self.streams.get(event.stream_id)
        self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        if stream is None or stream.request is not None or event.data is None:
            return
        stream.parts.append(event.data)
        stream.size += len(event.data)
        if stream.size > self.hub.max_body_bytes:
            message = (
                f"request body is larger than max_body_bytes={self.hub.max_body_bytes}"
            )
            self._build(stream, message)
            self._reply_now(stream, _error(413, message))
            try:  # RFC 9113 8.1: a complete reply, then stop the upload
                self.conn.reset_stream(stream.stream_id, h2.errors.ErrorCodes.NO_ERROR)
            except h2.exceptions.ProtocolError:
                pass
            self._finish(stream)

    def _on_stream_ended(self, event: h2.events.StreamEnded) -> None:
        stream = self.streams.get(event.stream_id)
        if stream is None or stream.request is not None:
            return
        request = self._build(stream, None)
        self._dispatch(stream, request)

    def _on_reset(self, event: h2.events.StreamReset) -> None:
        stream = self.streams.get(event.stream_id)
        if stream is None:
            return
        if stream.request is None:
            self._build(stream, "the client reset the stream before the request ended")
        assert stream.request is not None
        if not self.hub.shutting_down:
            self.hub.mark_closed(stream.request)
        if stream.task is not None:
            stream.task.cancel()
        self._finish(stream)
        self._wake()

    def _on_window(self, event: Any) -> None:
        self._wake()

    def _on_terminated(self, event: h2.events.ConnectionTerminated) -> None:
        self._flush()
        self._close()

    def _build(self, stream: Stream, error: Optional[str]) -> RecordedRequest:
        method = target = authority = ""
        headers: Dict[str, str] = {}
        for raw_name, raw_value in stream.head:
            name = raw_name.decode("latin-1") if isinstance(raw_name, bytes) else raw_name
            value = raw_value.decode("latin-1") if isinstance(raw_value, bytes) else raw_value
            if name[:1] == ":":
                if name == ":method":
                    method = value
                elif name == ":path":
                    target = value
                elif name == ":authority":
                    authority = value
            elif name in headers:
                headers[name] = f"{headers[name]}, {value}"
            else:
                headers[name] = value
        if authority and "host" not in headers:
            headers["host"] = authority
        path, _, query = target.partition("?")
        body = b"".join(stream.parts)
        request = RecordedRequest(method, path, query, headers, body, "HTTP/2", error=error)
        stream.request = request
        self.requests.append(request)
        self.hub.record(request)
        return request

    def _finish(self, stream: Stream) -> None:
        """The stream is over for us; release a held GOAWAY when it was the last one."""
        stream.done = True
        self.streams.pop(stream.stream_id, None)
        if not self.streams:
            self.idle_since = self.loop.time()
            held = self.held_goaway
            if held is not None and not self.closed:
                self.held_goaway = None
                self._feed(held)

    def _wake(self) -> None:
        waiters = self.window_waiters
        if waiters:
            self.window_waiters = []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data and not self.transport.is_closing():
            self.transport.write(data)

    # -- leaving -------------------------------------------------------------

    def _refuse(self, error_code: int) -> None:
        """A protocol error found before h2 saw it: GOAWAY with the code, then close."""
        try:
            self.conn.close_connection(error_code=error_code)
        except h2.exceptions.ProtocolError:
            pass
        self._flush()
        self._close()

    def goaway_at_close(self) -> None:
        """The provider is closing: tell the client before the connection is cut."""
        if self.closed:
            return
        try:
            self.conn.close_connection(additional_data=b"the fake provider is closing")
        except h2.exceptions.ProtocolError:
            return
        self._flush()

    def close_idle(self) -> None:
        """No stream for header_timeout: say GOAWAY and close."""
        try:
            self.conn.close_connection()
        except h2.exceptions.ProtocolError:
            pass
        self._flush()
        self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            transport = self.transport
            # Closing with unread input (a late WINDOW_UPDATE) makes the kernel send a
            # reset, which can take the last frames with it before the client reads
            # them: half-close and let the client leave first, within a bound.
            if transport.can_write_eof() and not transport.is_closing():
                transport.write_eof()
                self.loop.call_later(_LINGER_SECONDS, transport.close)
            else:
                transport.close()

    def connection_lost(self) -> None:
        self.closed = True
        hub = self.hub
        if not hub.shutting_down:
            for request in self.requests:
                hub.mark_closed(request)
        for stream in list(self.streams.values()):
            if stream.task is not None:
                stream.task.cancel()
        self.streams.clear()
        for waiter in self.window_waiters:
            waiter.cancel()
        self.window_waiters = []


def _error(status: int, message: str) -> JsonReply:
    return JsonReply({"error": {"message": message, "type": "conformance_bad_request"}}, status=status)
