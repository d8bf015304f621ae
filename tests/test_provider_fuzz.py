"""Fuzzing the fake provider over real sockets: mutated HTTP/1.1 requests and mutated h2 frames.

Strategy: each example starts from a valid request (or a valid h2c preface and
request frames), mutates it the way broken clients and proxies do (a byte flipped,
the end cut off, bytes inserted, a header line repeated, a chunk size mangled), sends
it on a fresh connection and half-closes. The provider must answer with well-formed
HTTP (or h2 frames: a GOAWAY or a response) or just close, raise nothing on its loop,
and then serve a good request as if nothing had happened. Hypothesis runs
derandomized, so CI sees the same examples every time.
"""

from __future__ import annotations

import importlib.util
import re
import socket
import struct
import unittest
from typing import Any, Dict, List, Tuple

from conformance.provider import JsonReply, StreamReply, start_fake_provider

from .test_provider_support import LONG_TESTS, RawConnection, http1_request

HAVE_HYPOTHESIS = importlib.util.find_spec("hypothesis") is not None
HAVE_H2 = importlib.util.find_spec("h2") is not None
SKIP_REASON = "hypothesis is not installed (pip install hypothesis): the fuzz tests need it"

if HAVE_HYPOTHESIS:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
else:  # pragma: no cover - the tests skip; these stand-ins only let the module import
    def _identity(*args: Any, **kwargs: Any) -> Any:
        return lambda function: function

    given = settings = _identity
    st = None  # type: ignore[assignment]
    HealthCheck = None  # type: ignore[assignment,misc]

#: Bounded and repeatable: 150 examples per test with CONFORMANCE_LONG_TESTS=1, else 30,
#: the same ones every run.
FUZZ_SETTINGS: Dict[str, Any] = (
    {
        "max_examples": 150 if LONG_TESTS else 30,
        "deadline": None,
        "derandomize": True,
        "database": None,
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    }
    if HAVE_HYPOTHESIS
    else {}
)
READ_TIMEOUT = 5.0

# -- valid requests to start from ------------------------------------------------------------

BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
SEEDS_H1: List[bytes] = [
    http1_request("GET", "/v1/models"),
    http1_request("POST", "/v1/chat/completions?x=1", BODY, {"content-type": "application/json"}),
    http1_request("POST", "/v1/stream", BODY, {"accept": "text/event-stream"}),
    b"POST /v1/chunked HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\ntrailer: x\r\n\r\n",
    http1_request("POST", "/v1/expect", BODY, {"expect": "100-continue"}),
    http1_request("GET", "/a") + http1_request("POST", "/b", b"{}"),  # pipelined
    b"GET /old HTTP/1.0\r\n\r\n",
    b"GET /up HTTP/1.1\r\nhost: a\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\n"
    b"http2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
]


def _header_lines(request: bytes) -> List[Tuple[int, int]]:
    """(start, end) of each header line, CRLF included, in the first head of ``request``."""
    head_end = request.find(b"\r\n\r\n")
    lines = []
    start = request.find(b"\r\n") + 2
    while 0 < start <= head_end:
        end = request.find(b"\r\n", start) + 2
        lines.append((start, end))
        start = end
    return lines


def mutate(data: bytes, kind: str, at: int, value: bytes) -> bytes:
    """One mutation of ``data``; ``at`` picks the place, ``value`` the new bytes."""
    if not data:
        return value
    at %= len(data)
    if kind == "flip":
        bits = value[0] if value and value[0] else 0xFF
        return data[:at] + bytes([data[at] ^ bits]) + data[at + 1 :]
    if kind == "truncate":
        return data[:at]
    if kind == "insert":
        return data[:at] + value + data[at:]
    if kind == "delete":
        return data[:at] + data[at + 1 + len(value) :]
    if kind == "duplicate-header":
        lines = _header_lines(data)
        if not lines:
            return data + value
        start, end = lines[at % len(lines)]
        return data[:end] + data[start:end] + data[end:]
    if kind == "chunk-size":
        match = re.search(rb"\r\n\r\n([0-9a-fA-F]+)", data)
        if match is None:
            return data[:at] + value + data[at:]
        return data[: match.start(1)] + (value or b"zz") + data[match.end(1) :]
    raise AssertionError(kind)


if HAVE_HYPOTHESIS:
    KINDS = st.sampled_from(["flip", "truncate", "insert", "delete", "duplicate-header", "chunk-size"])
    MUTATION = st.tuples(KINDS, st.integers(0, 1 << 16), st.binary(min_size=0, max_size=12))
    H1_INPUT = st.one_of(
        st.tuples(st.sampled_from(SEEDS_H1), st.lists(MUTATION, min_size=1, max_size=3)),
        st.tuples(st.binary(max_size=300), st.just([])),
    )

# -- reading what came back ------------------------------------------------------------------

_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-5][0-9][0-9]) [^\r\n]*\Z")


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the provider sends until it closes (a reset counts as closed)."""
    parts = []
    for _ in range(100000):
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        parts.append(data)
    return b"".join(parts)


def parse_http1_responses(data: bytes) -> Tuple[List[int], bytes]:
    """The statuses of the well-formed responses in ``data``, and what follows a 101.

    Raises AssertionError on anything that is not a sequence of HTTP/1.1 responses.
    """
    statuses: List[int] = []
    rest = data
    while rest:
        end = rest.find(b"\r\n\r\n")
        assert end > 0, f"an incomplete response head: {rest[:200]!r}"
        lines = rest[:end].split(b"\r\n")
        match = _STATUS_LINE.match(lines[0])
        assert match is not None, f"not a status line: {lines[0][:100]!r}"
        status = int(match.group(1))
        statuses.append(status)
        headers: Dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            assert colon and re.fullmatch(rb"[!#$%&'*+\-.^_`|~0-9a-z]+", name), f"bad header {line!r}"
            headers[name] = value.strip()
        rest = rest[end + 4 :]
        if status == 101:
            return statuses, rest
        if status < 200 or status in (204, 304):
            continue
        if b"content-length" in headers:
            length = int(headers[b"content-length"])
            assert len(rest) >= length, "a body shorter than its Content-Length"
            rest = rest[length:]
        elif headers.get(b"transfer-encoding") == b"chunked":
            while True:
                line_end = rest.find(b"\r\n")
                assert line_end > 0, "a chunk without its size line"
                size = int(rest[:line_end], 16)
                rest = rest[line_end + 2 :]
                if size == 0:
                    assert rest[:2] == b"\r\n", "no CRLF after the last chunk"
                    rest = rest[2:]
                    break
                assert rest[size : size + 2] == b"\r\n", "a chunk not followed by CRLF"
                rest = rest[size + 2 :]
        else:
            rest = b""  # the body runs to the close
    return statuses, rest


def parse_h2_frames(data: bytes) -> List[int]:
    """The types of the frames in ``data``; raises AssertionError if they do not frame it exactly."""
    types = []
    pos = 0
    while pos < len(data):
        assert len(data) - pos >= 9, f"a frame header cut short at {pos}"
        length = int.from_bytes(data[pos : pos + 3], "big")
        assert pos + 9 + length <= len(data), f"a frame of {length} bytes cut short"
        types.append(data[pos + 3])
        pos += 9 + length
    return types


def h2_request_frames() -> bytes:
    """A client preface, SETTINGS, and one POST with a body, as the h2 library writes them."""
    import h2.config
    import h2.connection

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "POST"), (":path", "/v1/h2"), (":scheme", "http"),
                          (":authority", "127.0.0.1"), ("content-type", "application/json")])
    conn.send_data(1, BODY, end_stream=True)
    conn.send_headers(3, [(":method", "GET"), (":path", "/v1/second"), (":scheme", "http"),
                          (":authority", "127.0.0.1")], end_stream=True)
    return conn.data_to_send()


PREFACE_SIZE = 24
GOAWAY, HEADERS, SETTINGS = 0x7, 0x1, 0x4


@unittest.skipUnless(HAVE_HYPOTHESIS, SKIP_REASON)
class TestFuzz(unittest.TestCase):
    provider: Any
    loop_errors: List[Dict[str, Any]]

    @classmethod
    def setUpClass(cls) -> None:
        cls.provider = start_fake_provider(header_timeout=2.0)
        cls.provider.reply(
            lambda r: StreamReply([b"data: 1\n\n", b"data: 2\n\n"]) if "stream" in r.path
            else JsonReply({"ok": True})
        )
        cls.loop_errors = []
        # Anything that escapes a callback on the provider's loop lands here, not in a log.
        cls.provider._loop.call_soon_threadsafe(
            cls.provider._loop.set_exception_handler, lambda loop, context: cls.loop_errors.append(context)
        )

    @classmethod
    def tearDownClass(cls) -> None:
        cls.provider.close()

    def send(self, data: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", self.provider.port), timeout=READ_TIMEOUT) as sock:
            try:
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
            except OSError:  # the provider already answered and closed
                pass
            return read_until_closed(sock)

    def assert_still_serving(self) -> None:
        self.assertEqual(self.provider.errors, [])
        self.assertEqual(self.loop_errors, [])
        self.assertTrue(self.provider._thread.is_alive())
        with RawConnection(self.provider.port, timeout=READ_TIMEOUT) as connection:
            connection.send(http1_request("GET", "/good"))
            self.assertEqual(connection.read_response().status, 200)

    @settings(**FUZZ_SETTINGS)
    @given(H1_INPUT if HAVE_HYPOTHESIS else None)
    def test_mutated_http1_requests_get_valid_responses_or_a_close(self, case: Any) -> None:
        """Whatever bytes come, the answer is well-formed HTTP/1.1 or a close; the next client is served."""
        data, mutations = case
        for kind, at, value in mutations:
            data = mutate(data, kind, at, value)
        received = self.send(data)
        statuses, rest = parse_http1_responses(received)
        if statuses and statuses[-1] == 101:
            parse_h2_frames(rest)
        self.assert_still_serving()

    @unittest.skipUnless(HAVE_H2, "h2 is not installed")
    @settings(**FUZZ_SETTINGS)
    @given(st.lists(MUTATION, min_size=1, max_size=3) if HAVE_HYPOTHESIS else None)
    def test_mutated_h2_frames_get_goaway_or_a_response(self, mutations: Any) -> None:
        """After a valid preface, mutated frames get GOAWAY, a response or a close; next client served."""
        frames = h2_request_frames()
        preface, rest = frames[:PREFACE_SIZE], frames[PREFACE_SIZE:]
        for kind, at, value in mutations:
            rest = mutate(rest, kind, at, value)
        received = self.send(preface + rest)
        types = parse_h2_frames(received)
        if types:
            self.assertEqual(types[0], SETTINGS, "the server's preface is a SETTINGS frame")
        self.assert_still_serving()

    def test_mutate_makes_each_kind_of_damage(self) -> None:
        """The mutations the fuzzer uses each change a valid request the way they say."""
        seed = SEEDS_H1[3]
        self.assertEqual(mutate(seed, "truncate", 10, b""), seed[:10])
        self.assertEqual(len(mutate(seed, "insert", 5, b"xyz")), len(seed) + 3)
        self.assertNotEqual(mutate(seed, "flip", 0, b"\x01"), seed)
        self.assertIn(b"host: a\r\nhost: a\r\n", mutate(seed, "duplicate-header", 0, b""))
        self.assertIn(b"\r\n\r\nzz\r\nhello", mutate(seed, "chunk-size", 0, b""))
        whole = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
        self.assertEqual(parse_http1_responses(whole), ([200], b""))
        with self.assertRaises(AssertionError):
            parse_http1_responses(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nok")
        self.assertEqual(parse_h2_frames(struct.pack(">I", 0)[1:] + bytes([GOAWAY, 0]) + b"\0" * 4), [GOAWAY])


if __name__ == "__main__":
    unittest.main()
