"""Tests for conformance.reference._decoders: fed whole, byte by byte, and cut anywhere."""

from __future__ import annotations

import datetime
import json
import unittest
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

from conformance.encoders import (
    EventStreamHeaderValue,
    aws_event_stream_message,
    ndjson,
    sse,
)
from conformance.reference._decoders import (
    EventStreamDecoder,
    EventStreamError,
    EventStreamMessage,
    NDJSONDecoder,
    SSEDecoder,
    SSEEvent,
)


def feed_whole(decoder: Any, data: bytes) -> list[Any]:
    """All the bytes in one chunk, then close."""
    return list(decoder.feed(data)) + list(decoder.close())


def feed_bytewise(decoder: Any, data: bytes) -> list[Any]:
    """One byte per chunk, then close."""
    out: list[Any] = []
    for i in range(len(data)):
        out.extend(decoder.feed(data[i : i + 1]))
    return out + list(decoder.close())


def feed_every_split(factory: Callable[[], Any], data: bytes) -> list[list[Any]]:
    """Results of feeding ``data`` cut in two at every position."""
    results = []
    for cut in range(len(data) + 1):
        decoder = factory()
        got = list(decoder.feed(data[:cut])) + list(decoder.feed(data[cut:]))
        results.append(got + list(decoder.close()))
    return results


STRATEGIES = [("whole", feed_whole), ("byte by byte", feed_bytewise)]


# --- SSE -------------------------------------------------------------------------------------------


class SSEDecoderTest(unittest.TestCase):
    """SSEDecoder follows the WHATWG event-stream parsing rules."""

    CASES: ClassVar[list[tuple[str, bytes, list[SSEEvent]]]] = [
        ("one event", b"data: hi\n\n", [SSEEvent("message", "hi")]),
        ("named", b"event: ping\ndata: {}\n\n", [SSEEvent("ping", "{}")]),
        ("lines joined", b"data: a\ndata: b\n\n", [SSEEvent("message", "a\nb")]),
        ("crlf", b"event: x\r\ndata: 1\r\n\r\n", [SSEEvent("x", "1")]),
        ("cr", b"data: 1\rdata: 2\r\r", [SSEEvent("message", "1\n2")]),
        ("one space stripped", b"data:  two\ndata:none\n\n", [SSEEvent("message", " two\nnone")]),
        ("comment ignored", b": keep-alive\n\ndata: x\n\n", [SSEEvent("message", "x")]),
        ("empty data not dispatched", b"event: e\n\n", []),
        ("empty data line dispatched", b"data\n\n", [SSEEvent("message", "")]),
        ("event resets", b"event: a\ndata: 1\n\ndata: 2\n\n", [SSEEvent("a", "1"), SSEEvent("message", "2")]),
        (
            "id persists",
            b"id: 7\ndata: a\n\ndata: b\n\n",
            [SSEEvent("message", "a", "7"), SSEEvent("message", "b", "7")],
        ),
        ("id with NUL ignored", b"id: a\0b\ndata: a\n\n", [SSEEvent("message", "a", None)]),
        ("unknown field and retry", b"retry: 10\nfoo: bar\ndata: x\n\n", [SSEEvent("message", "x")]),
        ("byte order mark", b"\xef\xbb\xbfdata: x\n\n", [SSEEvent("message", "x")]),
        ("utf-8", "data: caf\u00e9 \U0001f600\n\n".encode(), [SSEEvent("message", "caf\u00e9 \U0001f600")]),
        ("incomplete event dropped", b"data: a\n\ndata: b\n", [SSEEvent("message", "a")]),
        ("unterminated line dropped", b"data: a\n\ndata: b", [SSEEvent("message", "a")]),
    ]

    def test_cases(self) -> None:
        """Each stream yields its events, fed whole or byte by byte."""
        for name, data, expected in self.CASES:
            for how, feed in STRATEGIES:
                with self.subTest(name, how=how):
                    self.assertEqual(feed(SSEDecoder(), data), expected)

    def test_every_split_point(self) -> None:
        """A stream cut in two at any byte, CR/LF pairs and UTF-8 characters included, decodes the same."""
        data = "event: e\r\ndata: caf\u00e9\r\ndata: \U0001f600\r\n\r\n: c\rdata: z\r\r".encode()
        expected = [SSEEvent("e", "caf\u00e9\n\U0001f600"), SSEEvent("message", "z")]
        for cut, got in enumerate(feed_every_split(SSEDecoder, data)):
            with self.subTest(cut=cut):
                self.assertEqual(got, expected)

    def test_cut_inside_utf8_character(self) -> None:
        """A chunk ending inside a multi-byte character yields nothing until the line completes."""
        decoder = SSEDecoder()
        raw = "data: \u20ac\n\n".encode()
        self.assertEqual(decoder.feed(raw[:7]), [])  # "data: " and the first byte of the euro sign
        self.assertEqual(decoder.feed(raw[7:]), [SSEEvent("message", "\u20ac")])

    def test_crlf_split_across_chunks_is_one_line_end(self) -> None:
        """A CR at the end of one chunk and a LF at the start of the next make one line break."""
        decoder = SSEDecoder()
        self.assertEqual(decoder.feed(b"data: a\r"), [])
        self.assertEqual(decoder.feed(b"\n"), [])
        self.assertEqual(decoder.feed(b"\r"), [SSEEvent("message", "a")])
        self.assertEqual(decoder.feed(b"\ndata: b\n\n"), [SSEEvent("message", "b")])

    def test_trailing_bytes_kept_for_later(self) -> None:
        """Bytes after the last complete event wait for the rest of their event."""
        decoder = SSEDecoder()
        self.assertEqual(decoder.feed(b"data: 1\n\ndata: 2"), [SSEEvent("message", "1")])
        self.assertEqual(decoder.feed(b"\n\n"), [SSEEvent("message", "2")])

    def test_round_trip_from_encoder(self) -> None:
        """What sse() writes reads back as the same events."""

        def compact(value: Any) -> str:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

        values: list[tuple[Any, str | None]] = [("a\nb", None), ({"x": "\u00e9"}, "delta"), ("", "e")]
        data = b"".join(sse(value, event=event) for value, event in values)
        expected = [
            SSEEvent(event or "message", value if isinstance(value, str) else compact(value))
            for value, event in values
        ]
        for how, feed in STRATEGIES:
            with self.subTest(how=how):
                self.assertEqual(feed(SSEDecoder(), data), expected)


# --- NDJSON ------------------------------------------------------------------------------------------


class NDJSONDecoderTest(unittest.TestCase):
    """NDJSONDecoder yields one JSON value per complete line."""

    CASES: ClassVar[list[tuple[str, bytes, list[Any]]]] = [
        ("two lines", b'{"a":1}\n[2]\n', [{"a": 1}, [2]]),
        ("blank lines skipped", b'\n1\n\n  \n2\n', [1, 2]),
        ("crlf", b"1\r\n2\r\n", [1, 2]),
        ("last line without newline", b'1\n{"done":true}', [1, {"done": True}]),
        ("utf-8", '"caf\u00e9 \U0001f600"\n'.encode(), ["caf\u00e9 \U0001f600"]),
        ("empty", b"", []),
    ]

    def test_cases(self) -> None:
        """Each stream yields its values, fed whole or byte by byte."""
        for name, data, expected in self.CASES:
            for how, feed in STRATEGIES:
                with self.subTest(name, how=how):
                    self.assertEqual(feed(NDJSONDecoder(), data), expected)

    def test_every_split_point(self) -> None:
        """A stream cut in two at any byte, inside a character included, decodes the same."""
        values = [{"message": {"content": "\u00e9\U0001f600"}}, {"done": True}]
        data = b"".join(ndjson(v) for v in values)
        for cut, got in enumerate(feed_every_split(NDJSONDecoder, data)):
            with self.subTest(cut=cut):
                self.assertEqual(got, values)

    def test_partial_line_waits(self) -> None:
        """A line without its newline yields nothing until it completes."""
        decoder = NDJSONDecoder()
        self.assertEqual(decoder.feed(b'{"a":'), [])
        self.assertEqual(decoder.feed(b'1}\n{"b"'), [{"a": 1}])
        self.assertEqual(decoder.feed(b":2}\n"), [{"b": 2}])
        self.assertEqual(decoder.close(), [])

    def test_bad_line_raises(self) -> None:
        """A line that is not JSON raises ValueError."""
        for data in (b"{nope}\n", b"\xff\n"):
            with self.subTest(data=data), self.assertRaises(ValueError):
                NDJSONDecoder().feed(data)
        with self.assertRaises(ValueError):
            decoder = NDJSONDecoder()
            decoder.feed(b"{")
            decoder.close()


# --- AWS event stream ------------------------------------------------------------------------------------

UTC = datetime.timezone(datetime.timedelta(0))  # datetime.UTC needs Python 3.11
STAMP = datetime.datetime(2024, 5, 17, 9, 30, 15, 123000, tzinfo=UTC)
UUID = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")

EVERY_HEADER_TYPE: dict[str, Any] = {
    "true": True,
    "false": False,
    "byte": EventStreamHeaderValue(2, -128),
    "short": EventStreamHeaderValue(3, 32767),
    "int": -(2**31),
    "long": 2**62,
    "bytes": b"\x00\x01\xff",
    "string": "caf\u00e9",
    "timestamp": STAMP,
    "uuid": UUID,
}
EVERY_HEADER_TYPE_DECODED = {
    name: (value.value if isinstance(value, EventStreamHeaderValue) else value)
    for name, value in EVERY_HEADER_TYPE.items()
}

MESSAGE_START = {":message-type": "event", ":event-type": "messageStart", ":content-type": "application/json"}
MESSAGES = [
    (MESSAGE_START, b'{"role":"assistant"}'),
    (EVERY_HEADER_TYPE, "\u00e9\U0001f600".encode()),
    ({}, b""),
]
EXPECTED = [
    EventStreamMessage(headers=MESSAGE_START, payload=b'{"role":"assistant"}'),
    EventStreamMessage(headers=EVERY_HEADER_TYPE_DECODED, payload="\u00e9\U0001f600".encode()),
    EventStreamMessage(headers={}, payload=b""),
]
STREAM = b"".join(aws_event_stream_message(h, p) for h, p in MESSAGES)


class EventStreamDecoderTest(unittest.TestCase):
    """EventStreamDecoder reads the binary AWS event stream and checks both CRCs."""

    def test_round_trip(self) -> None:
        """Messages from the encoder decode to their headers, every type included, and payloads."""
        for how, feed in STRATEGIES:
            with self.subTest(how=how):
                self.assertEqual(feed(EventStreamDecoder(), STREAM), EXPECTED)

    def test_every_split_point(self) -> None:
        """A message cut in two at any byte, prelude and CRCs included, decodes the same."""
        data = aws_event_stream_message(*MESSAGES[0])
        for cut, got in enumerate(feed_every_split(EventStreamDecoder, data)):
            with self.subTest(cut=cut):
                self.assertEqual(got, EXPECTED[:1])

    def test_trailing_bytes_kept_for_later(self) -> None:
        """Bytes of an unfinished next message wait, and close() then refuses them."""
        first = aws_event_stream_message(*MESSAGES[0])
        second = aws_event_stream_message(*MESSAGES[2])
        decoder = EventStreamDecoder()
        self.assertEqual(decoder.feed(first + second[:5]), EXPECTED[:1])
        self.assertEqual(decoder.feed(second[5:]), EXPECTED[2:])
        self.assertEqual(decoder.close(), [])
        decoder.feed(second[:-1])
        with self.assertRaisesRegex(EventStreamError, "ended inside a message"):
            decoder.close()

    def test_timestamp_and_uuid_types(self) -> None:
        """Timestamps decode as aware UTC datetimes and uuids as uuid.UUID."""
        (message,) = EventStreamDecoder().feed(aws_event_stream_message(EVERY_HEADER_TYPE, b""))
        self.assertEqual(message.headers["timestamp"].tzinfo, UTC)
        self.assertIsInstance(message.headers["uuid"], uuid.UUID)


class EventStreamCorruptionTest(unittest.TestCase):
    """EventStreamDecoder refuses corrupt messages, naming what is wrong."""

    def _flip(self, data: bytes, bit: int) -> bytes:
        corrupt = bytearray(data)
        corrupt[bit // 8] ^= 1 << (bit % 8)
        return bytes(corrupt)

    def test_one_flipped_bit_in_each_crc(self) -> None:
        """A flipped bit in the prelude CRC or the message CRC is reported with both values."""
        data = aws_event_stream_message(*MESSAGES[0])
        last = len(data) * 8 - 1
        for name, bit, which in [
            ("prelude CRC", 8 * 8 + 3, "prelude CRC"),
            ("message CRC", last, "message CRC"),
        ]:
            for how, feed in STRATEGIES:
                with self.subTest(name, how=how):
                    with self.assertRaises(EventStreamError) as caught:
                        feed(EventStreamDecoder(), self._flip(data, bit))
                    text = str(caught.exception)
                    self.assertIn(which, text)
                    self.assertIn("0x", text)

    def test_flipped_bit_anywhere_detected(self) -> None:
        """A flipped bit in the prelude, headers or payload fails one of the CRCs."""
        data = aws_event_stream_message(*MESSAGES[0])
        for bit in range(0, len(data) * 8, 7):
            with self.subTest(bit=bit), self.assertRaisesRegex(EventStreamError, "CRC mismatch"):
                feed_whole(EventStreamDecoder(), self._flip(data, bit))

    def test_crc_values_in_message(self) -> None:
        """The error names the CRC the message carries and the one its bytes compute to."""
        data = aws_event_stream_message({}, b"")
        bad = data[:-4] + b"\x00\x00\x00\x00"
        with self.assertRaises(EventStreamError) as caught:
            EventStreamDecoder().feed(bad)
        self.assertIn("0x00000000", str(caught.exception))
        self.assertIn("0x7d98c8ff", str(caught.exception))

    def test_bad_lengths_and_headers(self) -> None:
        """Impossible lengths and malformed headers raise EventStreamError, with valid CRCs."""
        import struct
        import zlib

        def framed(total: int | None, headers: bytes, payload: bytes = b"") -> bytes:
            length = total if total is not None else 16 + len(headers) + len(payload)
            prelude = struct.pack(">II", length, len(headers))
            head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
            return head + struct.pack(">I", zlib.crc32(head))

        cases = [
            ("total below minimum", framed(15, b"")[:16]),
            ("unknown header type", framed(None, b"\x01h\x0a")),
            ("header name past end", framed(None, b"\x05ab")),
            ("empty header name", framed(None, b"\x00\x07\x00\x00")),
            ("string past end", framed(None, b"\x01h\x07\x00\x09ab")),
            ("int past end", framed(None, b"\x01h\x04\x00")),
            ("string not utf-8", framed(None, b"\x01h\x07\x00\x01\xff")),
        ]
        for name, data in cases:
            with self.subTest(name), self.assertRaises(EventStreamError):
                feed_whole(EventStreamDecoder(), data)


if __name__ == "__main__":
    unittest.main()
