"""Incremental decoders for the stream formats the reference backends read.

Strategy: each decoder is sans-IO. ``feed()`` takes whatever bytes the socket gave,
cut anywhere (inside a UTF-8 character, inside a line, inside a binary frame),
keeps the incomplete tail in a buffer and returns only the units that are complete.
Text is decoded per complete line, never per chunk, which is the bug the wires'
odd chunk boundaries are there to catch. ``close()`` says what the end of the
stream means for the tail: nothing for SSE (an unfinished event is dropped, per
the WHATWG rules), a last line for NDJSON, an error for the event stream.
"""

from __future__ import annotations

import datetime as _dt
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..encoders import (
    CRC,
    HEADER_TYPE_BYTE,
    HEADER_TYPE_BYTE_ARRAY,
    HEADER_TYPE_FALSE,
    HEADER_TYPE_INTEGER,
    HEADER_TYPE_LONG,
    HEADER_TYPE_SHORT,
    HEADER_TYPE_STRING,
    HEADER_TYPE_TIMESTAMP,
    HEADER_TYPE_TRUE,
    HEADER_TYPE_UUID,
    INT8,
    INT16,
    INT32,
    INT64,
    MAX_HEADERS_LENGTH,
    MAX_MESSAGE_LENGTH,
    MIN_MESSAGE_LENGTH,
    PRELUDE,
    PRELUDE_LENGTH,
    UINT8,
    UINT16,
    crc32,
)

__all__ = [
    "EventStreamDecoder",
    "EventStreamError",
    "EventStreamMessage",
    "NDJSONDecoder",
    "SSEDecoder",
    "SSEEvent",
]


# --- Server-Sent Events ------------------------------------------------------------------


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its type (``"message"`` unless named), data and last id."""

    event: str
    data: str
    id: str | None = None


class SSEDecoder:
    """Server-Sent Events, parsed by the WHATWG event-stream rules.

    Lines end in CRLF, LF or CR; ``data`` lines are joined with ``\\n``; one space
    after the colon is dropped; lines starting with ``:`` are comments; a blank
    line dispatches the event unless its data is empty. ``id`` is the last event
    id seen on the stream so far, as the spec's ``lastEventId``.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._skip_lf = False  # the last chunk ended in CR; a LF now belongs to it
        self._at_start = True
        self._event_type = ""
        self._data: list[str] = []
        self._last_id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Take more bytes; return the events they complete."""
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        if chunk:
            self._skip_lf = False
        self._buffer += chunk
        if self._at_start:
            if len(self._buffer) < 3 and b"\xef\xbb\xbf".startswith(bytes(self._buffer)):
                return []  # could still be a byte order mark
            if self._buffer.startswith(b"\xef\xbb\xbf"):
                del self._buffer[:3]
            self._at_start = False
        events: list[SSEEvent] = []
        start = 0
        buffer = self._buffer
        while True:
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            if cr == -1 or (lf != -1 and lf < cr):
                end, after = lf, lf + 1
            elif cr + 1 < len(buffer):
                end, after = cr, cr + 2 if buffer[cr + 1] == 0x0A else cr + 1
            else:
                # CR is the last byte: the line is complete, but a LF may follow later.
                end, after = cr, cr + 1
                self._skip_lf = True
            event = self._line(bytes(buffer[start:end]).decode("utf-8", "replace"))
            if event is not None:
                events.append(event)
            start = after
        del buffer[:start]
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: an event without its final blank line is dropped, per spec."""
        self._buffer.clear()
        self._data = []
        self._event_type = ""
        return []

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event_type = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        # "retry" and unknown fields are ignored: no reconnection happens here.
        return None

    def _dispatch(self) -> SSEEvent | None:
        data, event_type = self._data, self._event_type
        self._data, self._event_type = [], ""
        if not data:
            return None
        return SSEEvent(event=event_type or "message", data="\n".join(data), id=self._last_id)


# --- NDJSON ----------------------------------------------------------------------------------


class NDJSONDecoder:
    """Newline-delimited JSON: one value per complete line, blank lines skipped.

    A line that is not JSON raises :class:`json.JSONDecodeError` (a ``ValueError``).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[Any]:
        """Take more bytes; return the values of the lines they complete."""
        self._buffer += chunk
        end = self._buffer.rfind(b"\n")
        if end == -1:
            return []
        complete = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return [self._parse(line) for line in complete.split(b"\n") if line.strip()]

    def close(self) -> list[Any]:
        """End of stream: parse a last line that had no newline."""
        tail, self._buffer = bytes(self._buffer), bytearray()
        return [self._parse(tail)] if tail.strip() else []

    @staticmethod
    def _parse(line: bytes) -> Any:
        return json.loads(line.decode("utf-8"))


# --- AWS event stream --------------------------------------------------------------------


class EventStreamError(ValueError):
    """The bytes are not a valid AWS event stream: bad CRC, bad length, bad header."""


@dataclass(frozen=True)
class EventStreamMessage:
    """One decoded message: typed header values by name, and the raw payload."""

    headers: dict[str, Any]
    payload: bytes


# The same object as datetime.timezone.utc; datetime.UTC needs Python 3.11.
_UTC = _dt.timezone(_dt.timedelta(0))
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_UTC)

_Reader = Callable[[bytes, int], tuple[Any, int]]


def _need(data: bytes, offset: int, size: int) -> None:
    if offset + size > len(data):
        raise EventStreamError(
            f"header value runs past the headers section ({size} bytes at offset {offset} "
            f"of {len(data)})"
        )


def _fixed_reader(packer: Any) -> _Reader:
    def read(data: bytes, offset: int) -> tuple[Any, int]:
        _need(data, offset, packer.size)
        return packer.unpack_from(data, offset)[0], offset + packer.size

    return read


def _read_raw(data: bytes, offset: int) -> tuple[bytes, int]:
    _need(data, offset, UINT16.size)
    (length,) = UINT16.unpack_from(data, offset)
    offset += UINT16.size
    _need(data, offset, length)
    return data[offset : offset + length], offset + length


def _read_string(data: bytes, offset: int) -> tuple[Any, int]:
    raw, offset = _read_raw(data, offset)
    try:
        return raw.decode("utf-8"), offset
    except UnicodeDecodeError as exc:
        raise EventStreamError(f"string header value is not UTF-8: {exc}") from None


def _read_timestamp(data: bytes, offset: int) -> tuple[Any, int]:
    millis, offset = _fixed_reader(INT64)(data, offset)
    return _EPOCH + _dt.timedelta(milliseconds=millis), offset


def _read_uuid(data: bytes, offset: int) -> tuple[Any, int]:
    _need(data, offset, 16)
    return uuid.UUID(bytes=data[offset : offset + 16]), offset + 16


#: How each header type's value is read, by type byte (see ``encoders``).
_READERS: dict[int, _Reader] = {
    HEADER_TYPE_TRUE: lambda data, offset: (True, offset),
    HEADER_TYPE_FALSE: lambda data, offset: (False, offset),
    HEADER_TYPE_BYTE: _fixed_reader(INT8),
    HEADER_TYPE_SHORT: _fixed_reader(INT16),
    HEADER_TYPE_INTEGER: _fixed_reader(INT32),
    HEADER_TYPE_LONG: _fixed_reader(INT64),
    HEADER_TYPE_BYTE_ARRAY: _read_raw,
    HEADER_TYPE_STRING: _read_string,
    HEADER_TYPE_TIMESTAMP: _read_timestamp,
    HEADER_TYPE_UUID: _read_uuid,
}


def _decode_headers(data: bytes) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    offset = 0
    while offset < len(data):
        (name_length,) = UINT8.unpack_from(data, offset)
        offset += UINT8.size
        if name_length == 0 or offset + name_length + UINT8.size > len(data):
            raise EventStreamError(f"malformed header name at offset {offset - 1}")
        try:
            name = data[offset : offset + name_length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EventStreamError(f"header name is not UTF-8: {exc}") from None
        offset += name_length
        (header_type,) = UINT8.unpack_from(data, offset)
        offset += UINT8.size
        reader = _READERS.get(header_type)
        if reader is None:
            raise EventStreamError(f"header {name!r} has unknown type {header_type}")
        headers[name], offset = reader(data, offset)
    return headers


class EventStreamDecoder:
    """The binary AWS event stream (``application/vnd.amazon.eventstream``).

    Both CRCs are verified before a message is returned; a mismatch raises
    :class:`EventStreamError` naming the CRC and both values.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[EventStreamMessage]:
        """Take more bytes; return the messages they complete."""
        self._buffer += chunk
        messages: list[EventStreamMessage] = []
        while len(self._buffer) >= PRELUDE_LENGTH:
            total, headers_length = PRELUDE.unpack_from(self._buffer, 0)
            (prelude_crc,) = CRC.unpack_from(self._buffer, PRELUDE.size)
            actual = crc32(bytes(self._buffer[: PRELUDE.size]))
            if prelude_crc != actual:
                raise EventStreamError(
                    f"prelude CRC mismatch: the message says 0x{prelude_crc:08x}, "
                    f"the prelude computes to 0x{actual:08x}"
                )
            if not MIN_MESSAGE_LENGTH <= total <= MAX_MESSAGE_LENGTH:
                raise EventStreamError(
                    f"message length {total} is outside {MIN_MESSAGE_LENGTH}..{MAX_MESSAGE_LENGTH}"
                )
            if headers_length > min(MAX_HEADERS_LENGTH, total - MIN_MESSAGE_LENGTH):
                raise EventStreamError(
                    f"headers length {headers_length} does not fit a message of {total} bytes"
                )
            if len(self._buffer) < total:
                break
            message = bytes(self._buffer[:total])
            del self._buffer[:total]
            (message_crc,) = CRC.unpack_from(message, total - CRC.size)
            actual = crc32(message[: total - CRC.size])
            if message_crc != actual:
                raise EventStreamError(
                    f"message CRC mismatch: the message says 0x{message_crc:08x}, "
                    f"its bytes compute to 0x{actual:08x}"
                )
            headers_end = PRELUDE_LENGTH + headers_length
            messages.append(
                EventStreamMessage(
                    headers=_decode_headers(message[PRELUDE_LENGTH:headers_end]),
                    payload=message[headers_end : total - CRC.size],
                )
            )
        return messages

    def close(self) -> list[EventStreamMessage]:
        """End of stream: raise :class:`EventStreamError` if a message is unfinished."""
        if self._buffer:
            left = len(self._buffer)
            self._buffer.clear()
            raise EventStreamError(f"stream ended inside a message ({left} bytes left over)")
        return []
