"""The HTTP/2 framing the reference client needs for one stream (RFC 9113, RFC 7541).

Strategy: the reference backends open one connection per request and send one stream
on it, to the kit's own provider, which runs the ``h2`` state machine and validates
every frame and header it is sent. For that one stream the client needs far less than
a general HTTP/2 implementation: frames cut from a buffer, a header block written as
literals (no dynamic table, no Huffman coding, so nothing to keep in step with the
peer), and the peer's header blocks read by ``hpack``'s decoder, which keeps the
dynamic table a server may use. Doing this here, not through ``h2``'s connection
object, spares a streamed reply the state machine's cost for each of its DATA frames
(about 11 µs of CPU a frame, and a stream comes in 100 or more).

The framing is a few functions without I/O (:func:`frame`, :func:`header_block`,
:func:`settings_entries`, :func:`error_name`); :class:`H2Exchange` keeps the one
stream's state over :mod:`._connection`'s connection; :mod:`._transport` imports this
module only when h2c is asked for.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, List, Optional, Tuple

from ._connection import (
    _CONNECTION_HEADERS,
    _OWN_HEADERS,
    MAX_HEADER_BYTES,
    TransportError,
    _Connection,
    _text,
)

__all__ = [
    "CLIENT_PREFACE",
    "H2Exchange",
    "DEFAULT_WINDOW",
    "FRAME_HEADER",
    "MAX_FRAME_SIZE",
    "error_name",
    "frame",
    "header_block",
    "settings_entries",
]

CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: Bytes of a frame's header: length (3), type, flags, stream id (4).
FRAME_HEADER = 9
#: The largest frame payload either side may send until told otherwise.
MAX_FRAME_SIZE = 16384
#: The flow-control window of a connection and of a new stream until told otherwise.
DEFAULT_WINDOW = 65535
#: The largest window RFC 9113 allows.
MAX_WINDOW = 2**31 - 1

# Frame types.
(DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE,
 CONTINUATION) = range(10)
# Flags.
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
# Settings.
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
SETTINGS_MAX_FRAME_SIZE = 0x5
# Error codes.
CANCEL = 0x8

_ERROR_NAMES = (
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
)


def error_name(code: int) -> str:
    """The RFC 9113 name of an error code, or the number for one it does not define."""
    return _ERROR_NAMES[code] if 0 <= code < len(_ERROR_NAMES) else str(code)


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One frame: its 9-byte header, then ``payload``."""
    return (
        len(payload).to_bytes(3, "big")
        + bytes((kind, flags))
        + stream_id.to_bytes(4, "big")
        + payload
    )


def _integer(value: int, prefix_bits: int, first: int = 0) -> bytes:
    """An HPACK integer with an N-bit prefix (RFC 7541 5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(data: bytes) -> bytes:
    """An HPACK string literal, not Huffman-coded (RFC 7541 5.2)."""
    return _integer(len(data), 7) + data


def header_block(fields: Iterable[Tuple[str, str]]) -> bytes:
    """A header block of literals without indexing, new names (RFC 7541 6.2.2).

    Literals leave the peer's dynamic table untouched, so the block means the same
    whatever was sent before it, and the client keeps no encoder state.
    """
    out = bytearray()
    for name, value in fields:
        out += b"\x00" + _string(name.encode("utf-8")) + _string(value.encode("utf-8"))
    return bytes(out)


def settings_entries(payload: bytes) -> List[Tuple[int, int]]:
    """The (identifier, value) pairs of a SETTINGS payload (a multiple of 6 bytes)."""
    return [
        (int.from_bytes(payload[at : at + 2], "big"), int.from_bytes(payload[at + 2 : at + 6], "big"))
        for at in range(0, len(payload), 6)
    ]


class H2Exchange:
    """One stream over a fresh h2c connection (prior knowledge), framed by hand.

    The framing is this module's functions; this class keeps the one stream's state: the
    peer's settings and flow-control windows for sending the body, the bytes received
    but not yet granted back, the header block being assembled, and what the stream
    has delivered (status, headers, data, its end or the reason it failed).
    """

    http_version = "HTTP/2"

    def __init__(self, conn: _Connection) -> None:
        import hpack

        self.conn = conn
        self.stream_id = 1
        self.done = False
        self._decoder = hpack.Decoder(max_header_list_size=MAX_HEADER_BYTES)
        self._status: Optional[int] = None
        self._headers: dict[str, str] = {}
        self._data: deque[bytes] = deque()
        self._stream_open = False
        #: Why the stream ended short, once the response headers are in: raised after
        #: the data that came before it has been handed out.
        self._failed: Optional[TransportError] = None
        # What the peer allows this side to send, and how large its frames may be.
        self._send_window = DEFAULT_WINDOW
        self._stream_send_window = DEFAULT_WINDOW
        self._peer_initial_window = DEFAULT_WINDOW
        self._max_frame = MAX_FRAME_SIZE
        #: Bytes received and not yet granted back with WINDOW_UPDATE.
        self._unacked = 0
        #: A header block still waiting for its CONTINUATION frames: (flags, bytes).
        self._block: Optional[tuple[int, bytearray]] = None

    async def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> None:
        conn = self.conn
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
        # The preface, this side's settings (no server push) and the request's headers,
        # in one write: the provider reads them in one go.
        out = bytearray(CLIENT_PREFACE)
        out += frame(SETTINGS, 0, 0, (SETTINGS_ENABLE_PUSH).to_bytes(2, "big") + bytes(4))
        out += self._headers_frames(header_block(fields), end_stream=not body)
        self._stream_open = True
        conn.farewell = self.cancel_bytes
        view = memoryview(body)
        while view:
            window = min(self._send_window, self._stream_send_window, self._max_frame)
            if window <= 0:
                if out:
                    conn.write(bytes(out))
                    out.clear()
                await self._receive("waiting for flow-control window to send the request body")
                continue
            piece, view = view[:window], view[window:]
            self._send_window -= len(piece)
            self._stream_send_window -= len(piece)
            out += frame(DATA, 0 if view else END_STREAM, self.stream_id, bytes(piece))
        if out:
            conn.write(bytes(out))

    def _headers_frames(self, block: bytes, *, end_stream: bool) -> bytes:
        """HEADERS, then CONTINUATION frames if the block is larger than a frame."""
        size = self._max_frame
        pieces = [block[at : at + size] for at in range(0, len(block), size)] or [b""]
        flags = END_STREAM if end_stream else 0
        out = bytearray()
        for index, piece in enumerate(pieces):
            last = END_HEADERS if index == len(pieces) - 1 else 0
            if index == 0:
                out += frame(HEADERS, flags | last, self.stream_id, piece)
            else:
                out += frame(CONTINUATION, last, self.stream_id, piece)
        return bytes(out)

    def _broken(self, what: str) -> TransportError:
        """The peer broke the protocol: close at once and say how."""
        self.conn.close_now()
        return TransportError(f"{self.conn.authority} broke the h2 protocol: {what}")

    async def _receive(self, what: str) -> None:
        """Handle every whole frame that arrived; wait once if none had."""
        conn = self.conn
        conn.check()
        if not self._frames():
            if conn.eof:
                raise conn.cut_error("before the h2 stream ended")
            await conn.wait(what)
            self._frames()

    def _frames(self) -> bool:
        """Handle the whole frames in the buffer; whether there was at least one."""
        conn = self.conn
        buffer = conn.buffer
        replies = bytearray()
        handled = False
        at = 0
        while len(buffer) - at >= FRAME_HEADER:
            length = int.from_bytes(buffer[at : at + 3], "big")
            if length > MAX_FRAME_SIZE:
                del buffer[:at]
                raise self._broken(f"a frame of {length} bytes, over the {MAX_FRAME_SIZE} this side allows")
            end = at + FRAME_HEADER + length
            if len(buffer) < end:
                break
            kind, flags = buffer[at + 3], buffer[at + 4]
            stream_id = int.from_bytes(buffer[at + 5 : at + 9], "big") & 0x7FFFFFFF
            payload = bytes(buffer[at + FRAME_HEADER : end])
            at = end
            handled = True
            try:
                stop = self._frame(kind, flags, stream_id, payload, replies)
            except BaseException:
                del buffer[:at]
                raise
            if stop:
                break
        del buffer[:at]
        if self._unacked >= DEFAULT_WINDOW // 2:
            # Granted back once half the window is used: the caller reads lazily, and a
            # window left closed would stall the server with no one to reopen it.
            increment = self._unacked.to_bytes(4, "big")
            replies += frame(WINDOW_UPDATE, 0, 0, increment)
            if self._stream_open:
                replies += frame(WINDOW_UPDATE, 0, self.stream_id, increment)
            self._unacked = 0
        if replies and not conn.closed:
            conn.write(bytes(replies))
        return handled

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes, replies: bytearray) -> bool:
        """Handle one frame; whether the exchange is over (nothing after it matters)."""
        if self._block is not None and kind != CONTINUATION:
            raise self._broken("a header block interrupted before its END_HEADERS")
        if kind == DATA:
            if stream_id == 0:
                raise self._broken("a DATA frame on stream 0")
            self._unacked += len(payload)
            if stream_id == self.stream_id:
                if self._status is None:
                    raise self._broken("DATA before the response headers")
                data = self._unpad(flags, payload)
                if data:
                    self._data.append(data)
                if flags & END_STREAM:
                    self._end_stream()
        elif kind in (HEADERS, CONTINUATION):
            if kind == HEADERS:
                if stream_id != self.stream_id:
                    raise self._broken(f"HEADERS on stream {stream_id}, which this side never opened")
                payload = self._unpad(flags, payload)
                if flags & PRIORITY_FLAG:
                    payload = payload[5:]
                self._block = (flags, bytearray(payload))
            else:
                if self._block is None or stream_id != self.stream_id:
                    raise self._broken("a CONTINUATION frame with no header block to continue")
                self._block[1].extend(payload)
            if flags & END_HEADERS:
                first, block = self._block
                self._block = None
                self._header_block(bytes(block))
                if first & END_STREAM:
                    self._end_stream()
        elif kind == RST_STREAM:
            if stream_id == self.stream_id and len(payload) == 4:
                self._stream_open = False
                self.conn.close_now()
                code = int.from_bytes(payload, "big")
                self._fail(
                    TransportError(
                        f"{self.conn.authority} reset the h2 stream (error code {error_name(code)})"
                    )
                )
                return True
        elif kind == SETTINGS:
            if not flags & ACK:
                if len(payload) % 6:
                    raise self._broken(f"a SETTINGS frame of {len(payload)} bytes, not a multiple of 6")
                for identifier, value in settings_entries(payload):
                    if identifier == SETTINGS_INITIAL_WINDOW_SIZE:
                        if value > MAX_WINDOW:
                            raise self._broken(f"an initial window of {value}, over 2^31-1")
                        self._stream_send_window += value - self._peer_initial_window
                        self._peer_initial_window = value
                    elif identifier == SETTINGS_MAX_FRAME_SIZE:
                        if not MAX_FRAME_SIZE <= value <= 2**24 - 1:
                            raise self._broken(f"a maximum frame size of {value}")
                        self._max_frame = value
                replies += frame(SETTINGS, ACK, 0)
        elif kind == PING:
            if not flags & ACK:
                replies += frame(PING, ACK, 0, payload)
        elif kind == GOAWAY:
            last_stream = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            code = int.from_bytes(payload[4:8], "big")
            if not self.done and (code != 0 or last_stream < self.stream_id):
                self._stream_open = False
                self.conn.close_now()
                self._fail(
                    TransportError(
                        f"{self.conn.authority} ended the h2 connection with GOAWAY "
                        f"({error_name(code)}) before the stream ended"
                    )
                )
                return True
        elif kind == WINDOW_UPDATE:
            increment = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            if stream_id == 0:
                self._send_window += increment
            elif stream_id == self.stream_id:
                self._stream_send_window += increment
        elif kind == PUSH_PROMISE:
            raise self._broken("PUSH_PROMISE, which this side's settings turned off")
        # PRIORITY and frame types this side does not know are ignored (RFC 9113 5.5).
        return False

    def _unpad(self, flags: int, payload: bytes) -> bytes:
        if not flags & PADDED:
            return payload
        if not payload or payload[0] >= len(payload):
            raise self._broken("padding longer than its frame")
        return payload[1 : len(payload) - payload[0]]

    def _header_block(self, block: bytes) -> None:
        import hpack

        try:
            fields = self._decoder.decode(block, raw=True)
        except hpack.HPACKError as exc:
            raise self._broken(f"a header block that does not decode ({exc})") from exc
        status: Optional[int] = None
        headers: dict[str, str] = {}
        for name, value in fields:
            key, text = _text(name), _text(value)
            if key == ":status":
                if not text.isdigit():
                    raise self._broken(f"the status {text!r}")
                status = int(text)
            elif not key.startswith(":"):
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
        if self._status is not None:
            return  # trailers: what the stream's end says is all that matters
        if status is None:
            raise self._broken("response headers without :status")
        if 100 <= status < 200:
            return  # an interim response; the final one follows
        self._status, self._headers = status, headers

    def _end_stream(self) -> None:
        self._stream_open = False
        self.done = True

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
        self._stream_open = False
        return frame(RST_STREAM, 0, self.stream_id, CANCEL.to_bytes(4, "big"))
