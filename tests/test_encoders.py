"""Tests for conformance.encoders: golden vectors, then independent decoders."""

from __future__ import annotations

import datetime
import importlib.util
import json
import struct
import unittest
import uuid
import zlib
from typing import Any, ClassVar

from conformance.encoders import (
    MAX_MESSAGE_LENGTH,
    EventStreamHeaderValue,
    aws_event_stream_message,
    ndjson,
    sse,
)
from conformance.errors import ProviderInputError
from conformance.reference._decoders import EventStreamDecoder, SSEDecoder

HAVE_BOTOCORE = importlib.util.find_spec("botocore") is not None
NO_BOTOCORE = "botocore is not installed: the event stream is checked against its decoder"


def _find_openai_sse() -> bool:
    try:
        return importlib.util.find_spec("openai._streaming") is not None
    except ImportError:  # the parent package is missing
        return False


HAVE_OPENAI = _find_openai_sse()
NO_OPENAI = "openai is not installed: SSE is checked against its openai._streaming.SSEDecoder"


# --- golden vectors -----------------------------------------------------------------------

# No headers, no payload: the smallest message. The same bytes are the AWS
# reference vector "empty_message" of aws-c-event-stream.
EMPTY_MESSAGE = bytes.fromhex(
    "00000010"  # total length: 16
    "00000000"  # headers length: 0
    "05c248eb"  # prelude CRC32 of the 8 bytes above
    "7d98c8ff"  # message CRC32 of the 12 bytes above
)

# One string header x=y and the payload {}.
TINY_MESSAGE = bytes.fromhex(
    "00000018"  # total length: 24
    "00000006"  # headers length: 6
    "dcd1a61f"  # prelude CRC32
    "01" "78"  # header name length 1, "x"
    "07" "0001" "79"  # type 7 (string), value length 1, "y"
    "7b7d"  # payload: {}
    "11e21dff"  # message CRC32
)
TINY_HEADERS = {"x": "y"}
TINY_PAYLOAD = b"{}"

# Bedrock's messageStart, as ConverseStream sends it (without the "p" padding).
MESSAGE_START = bytes.fromhex(
    "00000076"  # total length: 118
    "00000052"  # headers length: 82
    "96d5fade"  # prelude CRC32
    # header ":message-type" (13 bytes), type 7, length 5, "event"
    "0d" "3a6d6573736167652d74797065" "07" "0005" "6576656e74"
    # header ":event-type" (11 bytes), type 7, length 12, "messageStart"
    "0b" "3a6576656e742d74797065" "07" "000c" "6d65737361676553746172"
    "74"
    # header ":content-type" (13 bytes), type 7, length 16, "application/json"
    "0d" "3a636f6e74656e742d74797065" "07" "0010" "6170706c69636174696f6e2f6a736f6e"
    # payload: {"role":"assistant"}
    "7b22726f6c65223a22617373697374616e74227d"
    "1cc6be18"  # message CRC32
)
MESSAGE_START_HEADERS = {
    ":message-type": "event",
    ":event-type": "messageStart",
    ":content-type": "application/json",
}
MESSAGE_START_PAYLOAD = b'{"role":"assistant"}'

GOLDEN: list[tuple[str, Any, bytes, bytes]] = [
    ("empty", {}, b"", EMPTY_MESSAGE),
    ("tiny", TINY_HEADERS, TINY_PAYLOAD, TINY_MESSAGE),
    ("messageStart", MESSAGE_START_HEADERS, MESSAGE_START_PAYLOAD, MESSAGE_START),
]

UTC = datetime.timezone(datetime.timedelta(0))  # datetime.UTC needs Python 3.11
STAMP = datetime.datetime(2024, 5, 17, 9, 30, 15, 123000, tzinfo=UTC)
STAMP_MS = 1715938215123
UUID = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")

#: (header value given, type byte, value botocore decodes)
EVERY_TYPE: list[tuple[Any, int, Any]] = [
    (True, 0, True),
    (False, 1, False),
    (EventStreamHeaderValue(2, -7), 2, -7),
    (EventStreamHeaderValue(3, 30000), 3, 30000),
    (123456, 4, 123456),
    (-(2**31), 4, -(2**31)),
    (2**31, 5, 2**31),
    (-(2**40), 5, -(2**40)),
    (b"\x00\xffraw", 6, b"\x00\xffraw"),
    ("h\u00e9llo \u2603", 7, "h\u00e9llo \u2603"),
    (STAMP, 8, STAMP_MS),
    (UUID, 9, UUID.bytes),
]


def _botocore_messages(data: bytes) -> list[Any]:
    from botocore.eventstream import EventStreamBuffer  # type: ignore[import-untyped,unused-ignore]

    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return list(buffer)


# --- SSE -------------------------------------------------------------------------------------


class SSEGoldenTest(unittest.TestCase):
    """sse() writes the exact bytes of the event-stream format."""

    CASES: ClassVar[list[tuple[str, Any, Any, Any, bytes]]] = [
        ("plain text", "hello", None, None, b"data: hello\n\n"),
        ("named event", "{}", "ping", None, b"event: ping\ndata: {}\n\n"),
        ("id", "x", "e", "7", b"event: e\nid: 7\ndata: x\n\n"),
        ("json value", {"a": [1, "\u00e9"]}, None, None, 'data: {"a":[1,"\u00e9"]}\n\n'.encode()),
        ("json string is not quoted", "[DONE]", None, None, b"data: [DONE]\n\n"),
        ("multi-line", "a\nb\r\nc", None, None, b"data: a\ndata: b\ndata: c\n\n"),
        ("empty string", "", None, None, b"data: \n\n"),
        ("non-string scalar", 3, None, None, b"data: 3\n\n"),
    ]

    def test_golden_bytes(self) -> None:
        """Each case encodes to exactly the expected bytes."""
        for name, data, event, id_, expected in self.CASES:
            with self.subTest(name):
                self.assertEqual(sse(data, event=event, id=id_), expected)

    def test_rejects_multi_line_event_name_and_id(self) -> None:
        """An event name or id with a line break would corrupt the stream, so it is refused."""
        for kwargs in ({"event": "a\nb"}, {"id": "1\r2"}, {"id": "a\0b"}):
            with self.subTest(**kwargs), self.assertRaises(ProviderInputError):
                sse("x", **kwargs)


class SSEReadBackTest(unittest.TestCase):
    """What sse() writes, independent readers read back unchanged."""

    EVENTS: ClassVar[list[tuple[Any, Any]]] = [
        ("hello", None),
        ({"type": "message_start", "text": "caf\u00e9 \U0001f600"}, "message_start"),
        ("line one\nline two\n\nline four", "multi"),
        (" leading space kept", None),
    ]

    @staticmethod
    def _expected(data: Any) -> str:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return text

    def test_own_decoder_reads_back(self) -> None:
        """The project's SSEDecoder returns each event's name and data."""
        for data, event in self.EVENTS:
            with self.subTest(data=data):
                decoder = SSEDecoder()
                events = decoder.feed(sse(data, event=event))
                self.assertEqual(len(events), 1)
                self.assertEqual(events[0].event, event or "message")
                self.assertEqual(events[0].data, self._expected(data))

    @unittest.skipUnless(HAVE_OPENAI, NO_OPENAI)
    def test_openai_decoder_reads_back(self) -> None:
        """The openai SDK's SSE reader returns each event's name and data."""
        from openai._streaming import SSEDecoder as OpenAIDecoder

        for data, event in self.EVENTS:
            with self.subTest(data=data):
                raw = sse(data, event=event)
                # One byte per chunk: the reader must join what TCP splits.
                got = list(OpenAIDecoder().iter_bytes(iter([raw[i : i + 1] for i in range(len(raw))])))
                self.assertEqual(len(got), 1)
                self.assertEqual(got[0].event, event)
                self.assertEqual(got[0].data, self._expected(data))


# --- NDJSON -----------------------------------------------------------------------------------


class NDJSONTest(unittest.TestCase):
    """ndjson() writes one compact JSON line."""

    def test_golden_bytes(self) -> None:
        """Values encode compactly, unescaped UTF-8, with one trailing newline."""
        cases = [
            ({"a": 1, "b": [True, None]}, b'{"a":1,"b":[true,null]}\n'),
            ("line\nbreak", b'"line\\nbreak"\n'),
            ({"t": "\u00e9\U0001f600"}, '{"t":"\u00e9\U0001f600"}\n'.encode()),
        ]
        for value, expected in cases:
            with self.subTest(value=value):
                self.assertEqual(ndjson(value), expected)
                self.assertEqual(json.loads(ndjson(value)), value)


# --- AWS event stream: positive ----------------------------------------------------------------


class EventStreamGoldenTest(unittest.TestCase):
    """aws_event_stream_message() writes the golden vectors byte for byte."""

    def test_golden_vectors(self) -> None:
        """Each message encodes to its annotated hex vector."""
        for name, headers, payload, expected in GOLDEN:
            with self.subTest(name):
                self.assertEqual(aws_event_stream_message(headers, payload), expected)

    def test_golden_crcs_cross_checked_with_zlib(self) -> None:
        """The CRCs in the vectors are zlib's CRC32 of the prelude and of the whole message."""
        for name, _, _, vector in GOLDEN:
            with self.subTest(name):
                total, _headers_length = struct.unpack(">II", vector[:8])
                self.assertEqual(total, len(vector))
                self.assertEqual(vector[8:12], struct.pack(">I", zlib.crc32(vector[:8]) & 0xFFFFFFFF))
                self.assertEqual(vector[-4:], struct.pack(">I", zlib.crc32(vector[:-4]) & 0xFFFFFFFF))

    def test_research_message_stop_prelude(self) -> None:
        """Bedrock's messageStop matches the 122-byte prelude recorded from the real service."""
        message = aws_event_stream_message(
            {":event-type": "messageStop", ":content-type": "application/json", ":message-type": "event"},
            b'{"stopReason":"end_turn"}',
        )
        self.assertEqual(len(message), 122)
        self.assertEqual(message[:12], bytes.fromhex("0000007a00000051ca2c4665"))
        self.assertEqual(message[12:25], b"\x0b:event-type\x07")

    def test_header_type_bytes(self) -> None:
        """Each Python value is written with its type byte."""
        for value, type_byte, _ in EVERY_TYPE:
            with self.subTest(value=value):
                message = aws_event_stream_message({"h": value}, b"")
                self.assertEqual(message[12:15], b"\x01h" + bytes([type_byte]))

    def test_naive_datetime_is_utc(self) -> None:
        """A naive datetime is taken as UTC, and millisecond precision is kept."""
        naive = STAMP.replace(tzinfo=None)
        self.assertEqual(
            aws_event_stream_message({"t": naive}, b""), aws_event_stream_message({"t": STAMP}, b"")
        )
        self.assertEqual(aws_event_stream_message({"t": STAMP}, b"")[15:23], struct.pack(">q", STAMP_MS))

    def test_own_decoder_round_trip(self) -> None:
        """The project's EventStreamDecoder reads every header type back."""
        headers = {f"h{i}": value for i, (value, _, _) in enumerate(EVERY_TYPE)}
        expected = {
            f"h{i}": (value.value if isinstance(value, EventStreamHeaderValue) else value)
            for i, (value, _, _) in enumerate(EVERY_TYPE)
        }
        (message,) = EventStreamDecoder().feed(aws_event_stream_message(headers, b"payload"))
        self.assertEqual(message.headers, expected)
        self.assertEqual(message.payload, b"payload")


@unittest.skipUnless(HAVE_BOTOCORE, NO_BOTOCORE)
class EventStreamBotocoreTest(unittest.TestCase):
    """botocore's own decoder reads what the encoder writes."""

    def test_golden_vectors_decode(self) -> None:
        """Each golden vector decodes to its headers and payload."""
        for name, headers, payload, vector in GOLDEN:
            with self.subTest(name):
                (message,) = _botocore_messages(vector)
                self.assertEqual(message.headers, headers)
                self.assertEqual(message.payload, payload)

    def test_every_header_type_round_trips(self) -> None:
        """Each header type, alone, decodes to the value botocore models for it."""
        for value, _, decoded in EVERY_TYPE:
            with self.subTest(value=value):
                (message,) = _botocore_messages(aws_event_stream_message({"name": value}, b"x"))
                self.assertEqual(message.headers, {"name": decoded})
                self.assertEqual(message.payload, b"x")

    def test_many_messages_in_one_buffer(self) -> None:
        """Messages written back to back decode one by one, in order."""
        payloads = [b"", b"{}", "\u00e9".encode() * 1000]
        data = b"".join(
            aws_event_stream_message({":event-type": f"e{i}", "n": i}, p) for i, p in enumerate(payloads)
        )
        messages = _botocore_messages(data)
        self.assertEqual([m.payload for m in messages], payloads)
        self.assertEqual([m.headers["n"] for m in messages], [0, 1, 2])

    def test_limits_reach_but_do_not_pass(self) -> None:
        """Values at the limits encode and decode."""
        name = "n" * 255
        for value in ("v" * 65535, b"\x01" * 65535):
            with self.subTest(type=type(value).__name__):
                (decoded,) = _botocore_messages(aws_event_stream_message({name: value}, b""))
                self.assertEqual(decoded.headers, {name: value})


# --- AWS event stream: negative ----------------------------------------------------------------


class EventStreamRejectsTest(unittest.TestCase):
    """aws_event_stream_message() refuses what no decoder would accept, saying why."""

    def test_too_big(self) -> None:
        """Oversize names, values and messages raise ProviderInputError naming the limit."""
        cases: list[tuple[str, Any, bytes, str]] = [
            ("name", {"n" * 256: "v"}, b"", "255"),
            ("utf-8 name", {"\u00e9" * 128: "v"}, b"", "255"),
            ("string", {"s": "v" * 65536}, b"", "65535"),
            ("utf-8 string", {"s": "\u00e9" * 32768}, b"", "65535"),
            ("bytes", {"b": b"x" * 65536}, b"", "65535"),
            ("headers section", {f"h{i}": "v" * 65535 for i in range(3)}, b"", "131072"),
            ("message", {}, b"x" * (MAX_MESSAGE_LENGTH - 15), str(MAX_MESSAGE_LENGTH)),
        ]
        for name, headers, payload, limit in cases:
            with self.subTest(name):
                with self.assertRaises(ProviderInputError) as caught:
                    aws_event_stream_message(headers, payload)
                self.assertIn(limit, str(caught.exception))
                self.assertIn("limit", str(caught.exception))

    def test_largest_message_accepted(self) -> None:
        """A message of exactly the limit encodes."""
        message = aws_event_stream_message({}, b"x" * (MAX_MESSAGE_LENGTH - 16))
        self.assertEqual(len(message), MAX_MESSAGE_LENGTH)

    def test_bad_values(self) -> None:
        """Values without a header type, or out of their type's range, are refused."""
        cases: list[tuple[str, Any]] = [
            ("float", 1.5),
            ("none", None),
            ("list", [1]),
            ("int beyond int64", 2**63),
            ("byte out of range", EventStreamHeaderValue(2, 128)),
            ("short out of range", EventStreamHeaderValue(3, -32769)),
            ("short not int", EventStreamHeaderValue(3, "1")),
            ("string not str", EventStreamHeaderValue(7, b"x")),
        ]
        for name, value in cases:
            with self.subTest(name), self.assertRaises(ProviderInputError):
                aws_event_stream_message({"h": value}, b"")

    def test_bad_explicit_type_and_empty_name(self) -> None:
        """An unknown type byte and an empty header name are refused."""
        with self.assertRaises(ProviderInputError):
            EventStreamHeaderValue(10, 1)
        with self.assertRaises(ProviderInputError):
            aws_event_stream_message({"": "v"}, b"")


if __name__ == "__main__":
    unittest.main()
