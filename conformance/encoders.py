"""Hand-written encoders for the three stream formats the wires answer in.

Server-Sent Events (OpenAI, Anthropic, Gemini), newline-delimited JSON (Ollama)
and the binary AWS event stream (Bedrock). They are written here rather than
borrowed so that the fake provider depends on nothing, and tested against the
independent decoders the real SDKs use.

The event-stream part is laid out in the order of the format itself: constants,
errors, primitives, then the encoder.
"""

from __future__ import annotations

import re
import struct
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ProviderInputError

__all__ = [
    "EventStreamHeaderValue",
    "aws_event_stream_message",
    "ndjson",
    "sse",
]


def _compact_json(value: Any) -> str:
    import json  # per event, not per import

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- Server-Sent Events ---------------------------------------------------------

# The WHATWG parser ends a line at CRLF, LF or CR alike, so all three split data.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def sse(data: Any, event: str | None = None, id: str | None = None) -> bytes:
    """One Server-Sent Event, ending with its blank line, as UTF-8 bytes.

    ``data`` is used as is when it is a ``str``; any other value is encoded as
    compact JSON. A data string with line breaks becomes several ``data:`` lines,
    which a conforming reader joins back with ``\\n``.
    """
    text = data if isinstance(data, str) else _compact_json(data)
    lines = []
    if event is not None:
        if _LINE_BREAK.search(event):
            raise ProviderInputError(f"SSE event name must be one line, got {event!r}")
        lines.append(f"event: {event}")
    if id is not None:
        if _LINE_BREAK.search(id) or "\0" in id:
            raise ProviderInputError(f"SSE id must be one line without NUL, got {id!r}")
        lines.append(f"id: {id}")
    lines.extend(f"data: {line}" for line in _LINE_BREAK.split(text))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


# --- NDJSON -------------------------------------------------------------------------


def ndjson(obj: Any) -> bytes:
    """One line of newline-delimited JSON: compact JSON and ``\\n``, as UTF-8 bytes."""
    # Compact JSON escapes every control character, so the value cannot hold a newline.
    return (_compact_json(obj) + "\n").encode("utf-8")


# --- AWS event stream: constants -------------------------------------------------------

#: Header value types of the AWS event stream, by their type byte.
HEADER_TYPE_TRUE = 0
HEADER_TYPE_FALSE = 1
HEADER_TYPE_BYTE = 2
HEADER_TYPE_SHORT = 3
HEADER_TYPE_INTEGER = 4
HEADER_TYPE_LONG = 5
HEADER_TYPE_BYTE_ARRAY = 6
HEADER_TYPE_STRING = 7
HEADER_TYPE_TIMESTAMP = 8
HEADER_TYPE_UUID = 9

#: total length u32, headers length u32.
PRELUDE = struct.Struct(">II")
#: A CRC32, after the prelude and at the end of the message.
CRC = struct.Struct(">I")
PRELUDE_LENGTH = PRELUDE.size + CRC.size  # 12
#: The smallest message: prelude, its CRC and the message CRC, no headers, no payload.
MIN_MESSAGE_LENGTH = PRELUDE_LENGTH + CRC.size  # 16

UINT8 = struct.Struct(">B")
UINT16 = struct.Struct(">H")
INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

MAX_HEADER_NAME_LENGTH = 255
MAX_HEADER_VALUE_LENGTH = 65535
#: botocore refuses a message whose headers exceed this.
MAX_HEADERS_LENGTH = 128 * 1024
#: The largest message AWS sends or accepts (aws-c-event-stream's limit).
MAX_MESSAGE_LENGTH = 16 * 1024 * 1024


def _is_datetime(value: Any) -> bool:
    # As for uuid below: a datetime exists only once its module was imported.
    module = sys.modules.get("datetime")
    return module is not None and isinstance(value, module.datetime)


# --- AWS event stream: errors and explicit values ---------------------------------------


def _too_big(what: str, size: int, limit: int) -> ProviderInputError:
    return ProviderInputError(f"event stream {what} is {size} bytes; the limit is {limit}")


@dataclass(frozen=True)
class EventStreamHeaderValue:
    """A header value with its type byte given explicitly.

    Needed for the types no Python value maps to on its own: byte (2) and
    short (3); any other type byte is accepted too, with a value of that type
    (ignored for true (0) and false (1)).
    """

    type: int
    value: Any = None

    def __post_init__(self) -> None:
        if self.type not in _PACKERS:
            raise ProviderInputError(f"unknown event stream header type {self.type!r}; use 0 to 9")


# --- AWS event stream: primitives ---------------------------------------------------------


def crc32(data: bytes, value: int = 0) -> int:
    """CRC32 (IEEE, as zlib computes it) as an unsigned 32-bit integer."""
    # zlib.crc32 returned a signed int on Python 2 and some 32-bit platforms; the
    # mask keeps the value in the unsigned range that ">I" packs on every build.
    import zlib  # per message, not per import: only the Bedrock wire frames messages

    return zlib.crc32(data, value) & 0xFFFFFFFF


def _pack_nothing(value: Any) -> bytes:
    return b""


def _fixed(packer: struct.Struct, name: str) -> Callable[[Any], bytes]:
    def pack(value: Any) -> bytes:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ProviderInputError(f"event stream {name} header needs an int, got {value!r}")
        try:
            return packer.pack(value)
        except struct.error:
            raise ProviderInputError(f"event stream {name} header value {value!r} is out of range") from None

    return pack


def _pack_byte_array(value: Any) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise ProviderInputError(f"event stream byte-array header needs bytes, got {value!r}")
    raw = bytes(value)
    if len(raw) > MAX_HEADER_VALUE_LENGTH:
        raise _too_big("byte-array header value", len(raw), MAX_HEADER_VALUE_LENGTH)
    return UINT16.pack(len(raw)) + raw


def _pack_string(value: Any) -> bytes:
    if not isinstance(value, str):
        raise ProviderInputError(f"event stream string header needs a str, got {value!r}")
    raw = value.encode("utf-8")
    if len(raw) > MAX_HEADER_VALUE_LENGTH:
        raise _too_big("string header value", len(raw), MAX_HEADER_VALUE_LENGTH)
    return UINT16.pack(len(raw)) + raw


def _pack_timestamp(value: Any) -> bytes:
    if isinstance(value, int) and not isinstance(value, bool):
        millis = value
    elif _is_datetime(value):
        import datetime

        utc = datetime.timezone.utc
        # A naive datetime is taken as UTC, as AWS timestamps always are.
        aware = value if value.tzinfo is not None else value.replace(tzinfo=utc)
        delta = aware - datetime.datetime(1970, 1, 1, tzinfo=utc)
        # Integer arithmetic: a float timestamp would lose milliseconds far from 1970.
        millis = (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000
    else:
        raise ProviderInputError(
            f"event stream timestamp header needs a datetime or int milliseconds, got {value!r}"
        )
    return _fixed(INT64, "timestamp")(millis)


def _is_uuid(value: Any) -> bool:
    # A uuid.UUID exists only once its module was imported; asking sys.modules spares
    # every user of the encoders uuid's import, which loads platform.
    module = sys.modules.get("uuid")
    return module is not None and isinstance(value, module.UUID)


def _pack_uuid(value: Any) -> bytes:
    if _is_uuid(value):
        packed: bytes = value.bytes
        return packed
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    raise ProviderInputError(f"event stream uuid header needs a uuid.UUID, got {value!r}")


#: How each header type's value goes on the wire, by type byte.
_PACKERS: dict[int, Callable[[Any], bytes]] = {
    HEADER_TYPE_TRUE: _pack_nothing,
    HEADER_TYPE_FALSE: _pack_nothing,
    HEADER_TYPE_BYTE: _fixed(INT8, "byte"),
    HEADER_TYPE_SHORT: _fixed(INT16, "short"),
    HEADER_TYPE_INTEGER: _fixed(INT32, "integer"),
    HEADER_TYPE_LONG: _fixed(INT64, "long"),
    HEADER_TYPE_BYTE_ARRAY: _pack_byte_array,
    HEADER_TYPE_STRING: _pack_string,
    HEADER_TYPE_TIMESTAMP: _pack_timestamp,
    HEADER_TYPE_UUID: _pack_uuid,
}

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _infer_type(value: Any) -> int:
    # bool before int: a bool is an int to isinstance.
    if isinstance(value, bool):
        return HEADER_TYPE_TRUE if value else HEADER_TYPE_FALSE
    if isinstance(value, int):
        return HEADER_TYPE_INTEGER if _INT32_MIN <= value <= _INT32_MAX else HEADER_TYPE_LONG
    if isinstance(value, (bytes, bytearray, memoryview)):
        return HEADER_TYPE_BYTE_ARRAY
    if isinstance(value, str):
        return HEADER_TYPE_STRING
    if _is_datetime(value):
        return HEADER_TYPE_TIMESTAMP
    if _is_uuid(value):
        return HEADER_TYPE_UUID
    raise ProviderInputError(
        f"event stream header value {value!r} has no header type; use bool, int, bytes, "
        "str, datetime, uuid.UUID or EventStreamHeaderValue"
    )


def encode_header(name: str, value: Any) -> bytes:
    """One typed header: name length u8, name, type byte, value."""
    raw_name = name.encode("utf-8")
    if not raw_name:
        raise ProviderInputError("event stream header name must not be empty")
    if len(raw_name) > MAX_HEADER_NAME_LENGTH:
        raise _too_big(f"header name {name[:40]!r}...", len(raw_name), MAX_HEADER_NAME_LENGTH)
    if isinstance(value, EventStreamHeaderValue):
        header_type, value = value.type, value.value
    else:
        header_type = _infer_type(value)
    return UINT8.pack(len(raw_name)) + raw_name + UINT8.pack(header_type) + _PACKERS[header_type](value)


def encode_headers(headers: Mapping[str, Any]) -> bytes:
    """The headers section of a message, in the mapping's order."""
    return b"".join(encode_header(name, value) for name, value in headers.items())


# --- AWS event stream: encoder ------------------------------------------------------------


def aws_event_stream_message(headers: Mapping[str, Any], payload: bytes) -> bytes:
    """One binary AWS event stream message (``application/vnd.amazon.eventstream``).

    Layout, all integers big-endian: total length u32, headers length u32, CRC32
    of those 8 bytes, the headers, the payload, and CRC32 of everything before it.
    Header values are typed from their Python type (see
    :class:`EventStreamHeaderValue` for byte and short).
    """
    encoded_headers = encode_headers(headers)
    if len(encoded_headers) > MAX_HEADERS_LENGTH:
        raise _too_big("headers section", len(encoded_headers), MAX_HEADERS_LENGTH)
    payload = bytes(payload)
    total = MIN_MESSAGE_LENGTH + len(encoded_headers) + len(payload)
    if total > MAX_MESSAGE_LENGTH:
        raise _too_big("message", total, MAX_MESSAGE_LENGTH)
    prelude = PRELUDE.pack(total, len(encoded_headers))
    head = prelude + CRC.pack(crc32(prelude)) + encoded_headers + payload
    return head + CRC.pack(crc32(head))
