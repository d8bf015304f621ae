"""What keeps the fake provider fast stays in: Nagle off, and no JSON parse per request.

How fast it is is measured by bench/run.py, side by side, never by a timed test here.
"""

from __future__ import annotations

import json
import socket
import unittest

from conformance.provider import JsonReply, RecordedRequest, start_fake_provider

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


if __name__ == "__main__":
    unittest.main()
