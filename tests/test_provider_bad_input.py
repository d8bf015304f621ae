"""Bad input never takes the fake provider down: each gets its error, and the next client is served."""

from __future__ import annotations

import importlib.util
import json
import struct
import unittest
from typing import Any, Dict, Optional, Tuple

from conformance.provider import JsonReply, start_fake_provider

from .test_provider_support import PREFACE, H2Client, RawConnection, http1_request

HAVE_H2 = importlib.util.find_spec("h2") is not None

# name: (provider settings, bytes sent, expected status, (method, path) recorded or None, error text)
CASES: Dict[str, Tuple[Dict[str, Any], bytes, int, Optional[Tuple[str, str]], str]] = {
    "malformed request line": ({}, b"GARBAGE\r\n\r\n", 400, None, "malformed request line"),
    "request line with too many parts": (
        {}, b"GET / x HTTP/1.1\r\n\r\n", 400, None, "malformed request line"),
    "malformed method": ({}, b"GE(T / HTTP/1.1\r\n\r\n", 400, None, "malformed request method"),
    "malformed target": ({}, b"GET nope HTTP/1.1\r\n\r\n", 400, None, "malformed request target"),
    "unknown HTTP version": ({}, b"GET / HTTP/3.0\r\n\r\n", 505, None, "not supported"),
    "header without colon": (
        {}, b"POST /v1/a HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400, ("POST", "/v1/a"),
        "malformed header line"),
    "space in header name": (
        {}, b"POST /v1/b HTTP/1.1\r\nBad Header: x\r\n\r\n", 400, ("POST", "/v1/b"),
        "malformed header name"),
    "obsolete line folding": (
        {}, b"GET /f HTTP/1.1\r\nX-A: 1\r\n  folded\r\n\r\n", 400, ("GET", "/f"), "line folding"),
    "header section too large": (
        {"max_header_bytes": 1024}, b"GET /big HTTP/1.1\r\nX-Big: " + b"a" * 2000 + b"\r\n\r\n", 431,
        ("GET", "/big"), "max_header_bytes=1024"),
    "header section too large, never ended": (
        {"max_header_bytes": 1024}, b"GET /big2 HTTP/1.1\r\nX-Big: " + b"a" * 2000, 431,
        ("GET", "/big2"), "max_header_bytes=1024"),
    "Content-Length too large": (
        {"max_body_bytes": 100}, b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", 413,
        ("POST", "/up"), "max_body_bytes=100"),
    "chunked body too large": (
        {"max_body_bytes": 100},
        b"POST /upc HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n" + b"a" * 100
        + b"\r\n1\r\nb\r\n0\r\n\r\n", 413, ("POST", "/upc"), "max_body_bytes=100"),
    "malformed Content-Length": (
        {}, b"POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n", 400, ("POST", "/cl"),
        "malformed Content-Length"),
    "both Content-Length and Transfer-Encoding": (
        {},
        b"POST /both HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400, ("POST", "/both"), "both Content-Length and Transfer-Encoding"),
    "bad chunk size": (
        {}, b"POST /ch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400,
        ("POST", "/ch"), "bad chunked encoding"),
    "chunk data without CRLF": (
        {}, b"POST /ch2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n", 400,
        ("POST", "/ch2"), "bad chunked encoding"),
    "unsupported transfer coding": (
        {}, b"POST /gz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400, ("POST", "/gz"),
        "unsupported Transfer-Encoding"),
    "bare LF line endings": (
        {}, b"GET /lf HTTP/1.1\nHost: x\n\n", 400, None, "bare LF"),
    "bare LF after a CRLF line": (
        {}, b"GET /lf2 HTTP/1.1\r\nHost: x\n\n", 400, None, "bare LF"),
    "HTTP/1.1 without Host": ({}, b"GET /nohost HTTP/1.1\r\n\r\n", 400, ("GET", "/nohost"), "Host"),
    "two Host headers": (
        {}, b"GET /twohosts HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, ("GET", "/twohosts"),
        "Host"),
    "a transfer coding before chunked": (
        {}, b"POST /gzc HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501, ("POST", "/gzc"), "gzip"),
    "chunked twice": (
        {}, b"POST /cc HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        400, ("POST", "/cc"), "chunked more than once"),
}


class TestBadHttp1Input(unittest.TestCase):
    def test_bad_requests_get_their_error_and_the_provider_goes_on(self) -> None:
        """Each malformed request gets its status and a close, is recorded if parsed; a good one follows."""
        for name, (settings, data, status, recorded, text) in CASES.items():
            with self.subTest(name), start_fake_provider(**settings) as provider:
                provider.reply(JsonReply({"good": True}))
                with RawConnection(provider.port) as connection:
                    connection.send(data)
                    response = connection.read_response()
                    self.assertEqual(response.status, status)
                    self.assertIn(text, json.loads(response.body)["error"]["message"])
                    self.assertTrue(connection.closed_by_peer())
                with RawConnection(provider.port) as connection:
                    connection.send(http1_request("GET", "/good"))
                    self.assertEqual(connection.read_response().status, 200)
                requests = provider.requests
                if recorded is None:
                    self.assertEqual([r.path for r in requests], ["/good"])
                else:
                    self.assertEqual((requests[0].method, requests[0].path), recorded)
                    self.assertIn(text, requests[0].error or "")
                    self.assertIsNone(requests[1].error)

    def test_body_cut_short_is_recorded_with_an_error(self) -> None:
        """A client that leaves halfway through a body leaves a recorded request that says so."""
        with start_fake_provider() as provider:
            provider.reply(JsonReply({}))
            with RawConnection(provider.port) as connection:
                connection.send(b"POST /cut HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
            request = provider.next_request()
            self.assertEqual(request.path, "/cut")
            self.assertEqual(request.body, b"0123456789")
            self.assertIn("before the body ended", request.error or "")

    def test_slow_head_times_out(self) -> None:
        """A client that never finishes its head gets 408 and a closed connection after header_timeout."""
        with start_fake_provider(header_timeout=0.1) as provider:
            with RawConnection(provider.port) as connection:
                connection.send(b"GET /slow HTTP/1.1\r\nHost:")
                response = connection.read_response()
                self.assertEqual(response.status, 408)
                self.assertTrue(connection.closed_by_peer())
            with RawConnection(provider.port) as connection:  # an idle one is just closed
                self.assertEqual(connection.read_to_eof(), b"")


@unittest.skipUnless(HAVE_H2, "h2 is not installed")
class TestBadH2Input(unittest.TestCase):
    def test_garbage_after_the_preface_gets_goaway(self) -> None:
        """Garbage after the h2 preface gets a GOAWAY with an error code and a close; others go on."""
        cases = {
            "text, read as an oversize frame": (b"this is not an HTTP/2 frame at all, just garbage!", 6),
            "DATA on stream 0 before SETTINGS": (b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x", 1),
            "bad preface ending": (b"", 1),
        }
        for http2 in (True, False):
            for name, (garbage, code) in cases.items():
                with self.subTest(name, http2=http2), start_fake_provider(http2=http2) as provider:
                    provider.reply(JsonReply({"good": True}))
                    preface = PREFACE if garbage else PREFACE[:-6] + b"XX\r\n\r\n" + b"\x00" * 9
                    with RawConnection(provider.port) as connection:
                        connection.send(preface + garbage)
                        received = connection.read_to_eof()
                    goaways = [payload for kind, payload in _frames(received) if kind == 7]
                    self.assertEqual(len(goaways), 1, received)
                    self.assertEqual(struct.unpack(">I", goaways[0][4:8])[0], code)
                    with H2Client(provider.port) as client:
                        response = client.response(client.request("GET", "/good"))
                    self.assertEqual(response.status, 200)

    def test_oversize_h2_body_gets_413(self) -> None:
        """An h2 body past max_body_bytes gets 413 on its stream, is recorded, and the connection goes on."""
        with start_fake_provider(http2=True, max_body_bytes=1000) as provider:
            provider.reply(JsonReply({"good": True}))
            with H2Client(provider.port) as client:
                response = client.response(client.request("POST", "/big", b"x" * 5000))
                self.assertEqual(response.status, 413)
                response = client.response(client.request("GET", "/good"))
                self.assertEqual(response.status, 200)
            self.assertIn("max_body_bytes=1000", provider.requests[0].error or "")


def _frames(data: bytes) -> list:
    """(type, payload) of each whole frame in what an h2 server sent."""
    frames = []
    position = 0
    while len(data) - position >= 9:
        length = int.from_bytes(data[position:position + 3], "big")
        kind = data[position + 3]
        frames.append((kind, data[position + 9:position + 9 + length]))
        position += 9 + length
    return frames


if __name__ == "__main__":
    unittest.main()
