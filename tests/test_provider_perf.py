"""What keeps the fake provider fast stays in: Nagle off, no JSON parse per request, and a
repeated head not parsed again.

How fast it is is measured by bench/run.py, side by side, never by a timed test here.
"""

from __future__ import annotations

import json
import socket
import unittest
from unittest import mock

from conformance.provider import JsonReply, RecordedRequest, start_fake_provider
from conformance.provider._h1_parse import RequestParser

from .test_provider_support import RawConnection, http1_request


class TestNagle(unittest.TestCase):
    def test_accepted_connections_have_tcp_nodelay(self) -> None:
        """Every accepted connection has Nagle turned off, so each stream chunk leaves at once."""
        with start_fake_provider() as provider:
            provider.reply(JsonReply({}))
            with RawConnection(provider.port) as connection:
                connection.send(http1_request("GET", "/"))
                self.assertEqual(connection.read_response().status, 200)
                transports = [c.transport for c in provider._hub.connections]
                self.assertEqual(len(transports), 1)
                sock = transports[0].get_extra_info("socket")
                self.assertTrue(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


class TestLazyJson(unittest.TestCase):
    def test_json_is_parsed_on_first_access_and_kept(self) -> None:
        """RecordedRequest.json parses the body once, when first read, and caches the result."""
        request = RecordedRequest("POST", "/", "", {}, b'{"a": [1, 2]}', "HTTP/1.1")
        self.assertIs(request.__dict__["_json"].__class__, object)  # not parsed yet
        first = request.json
        self.assertEqual(first, {"a": [1, 2]})
        self.assertIs(request.json, first)

    def test_json_semantics_are_unchanged(self) -> None:
        """Empty or non-JSON bodies give None, a given value wins, and the value can be set."""
        cases = {
            "empty body": (b"", None, None),
            "not JSON": (b"{oops", None, None),
            "not UTF-8": (b"\xff\xfe{", None, None),
            "JSON null": (b"null", None, None),
            "given value": (b"{}", {"given": True}, {"given": True}),
        }
        for name, (body, given, expected) in cases.items():
            with self.subTest(name):
                request = RecordedRequest("POST", "/", "", {}, body, "HTTP/1.1", json=given)
                self.assertEqual(request.json, expected)
        request = RecordedRequest("POST", "/", "", {}, b"[1]", "HTTP/1.1")
        request.json = {"set": 1}
        self.assertEqual(request.json, {"set": 1})

    def test_provider_records_parse_lazily(self) -> None:
        """A request recorded by the provider reads its JSON body as before."""
        with start_fake_provider() as provider:
            provider.reply(JsonReply({}))
            body = json.dumps({"model": "m", "n": 1}).encode()
            with RawConnection(provider.port) as connection:
                connection.send(http1_request("POST", "/v1/x", body))
                connection.read_response()
            self.assertEqual(provider.next_request().json, {"model": "m", "n": 1})


class TestKeptHead(unittest.TestCase):
    def setUp(self) -> None:
        self.provider = start_fake_provider()
        self.addCleanup(self.provider.close)
        self.provider.reply(JsonReply({"ok": True}))
        self.connection = RawConnection(self.provider.port)
        self.addCleanup(self.connection.close)

    def exchange(self, request: bytes) -> int:
        self.connection.send(request)
        return self.connection.read_response().status

    def test_a_repeated_head_is_not_parsed_again(self) -> None:
        """The same head again is taken up as read before: the parser's body check never runs for it."""
        request = http1_request("POST", "/v1/x?a=1", b'{"n": 1}', {"x-key": "k"})
        self.assertEqual(self.exchange(request), 200)
        with mock.patch.object(RequestParser, "_start_body", side_effect=AssertionError("parsed again")):
            self.assertEqual(self.exchange(request), 200)
        first, second = self.provider.requests
        self.assertEqual(
            (second.method, second.path, second.query, second.body), ("POST", "/v1/x", "a=1", b'{"n": 1}')
        )
        self.assertEqual(second.headers, first.headers)
        self.assertEqual(self.provider.errors, [])

    def test_each_request_gets_headers_of_its_own(self) -> None:
        """Changing one recorded request's headers leaves the next one, with the same head, as it came."""
        request = http1_request("POST", "/v1/x", b"{}", {"x-key": "k"})
        self.exchange(request)
        self.provider.requests[0].headers["x-key"] = "changed"
        self.exchange(request)
        self.assertEqual(self.provider.requests[1].headers["x-key"], "k")

    def test_another_head_is_parsed(self) -> None:
        """A head that differs by one byte is read afresh, and becomes the kept one."""
        self.exchange(http1_request("POST", "/v1/x", b"{}", {"x-key": "a"}))
        self.exchange(http1_request("POST", "/v1/x", b"{}", {"x-key": "b"}))
        self.assertEqual([r.headers["x-key"] for r in self.provider.requests], ["a", "b"])

    def test_a_kept_head_still_gets_100_continue(self) -> None:
        """Expect: 100-continue on a kept head is still answered before the body is sent."""
        body = b'{"n": 1}'
        expect = {"expect": "100-continue", "content-length": str(len(body))}
        head = http1_request("POST", "/v1/x", b"", expect)
        for _ in range(2):
            self.connection.send(head)
            self.assertEqual(self.connection.read_head()[0], 100)
            self.connection.send(body)
            self.assertEqual(self.connection.read_response().status, 200)
        self.assertEqual([r.body for r in self.provider.requests], [body, body])

    def test_a_kept_chunked_head_reads_each_body(self) -> None:
        """Two chunked requests with one head each get their own body."""
        head = http1_request("POST", "/v1/x", b"", {"transfer-encoding": "chunked"})
        for body in (b"first", b"second!"):
            self.assertEqual(self.exchange(head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)), 200)
        self.assertEqual([r.body for r in self.provider.requests], [b"first", b"second!"])

    def test_a_refused_head_is_not_kept(self) -> None:
        """A head answered with an error is never taken up again: the same bytes are refused again."""
        bad = b"POST /v1/x HTTP/1.1\r\nhost: a\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n"
        for _ in range(2):
            with RawConnection(self.provider.port) as connection:
                connection.send(bad)
                self.assertEqual(connection.read_response().status, 400)
        self.assertIsNone(self.provider._hub.h1_head)


if __name__ == "__main__":
    unittest.main()
