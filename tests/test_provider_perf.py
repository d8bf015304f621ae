"""What keeps the fake provider fast stays in: Nagle off, no JSON parse per request, a
repeated head not parsed again, a response log that adds no object per request, one
write per chunk, and h2 DATA frames that spend the windows as h2 would.

How fast it is is measured by bench/bench_provider.py and bench/run.py, side by side,
never by a timed test here.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import socket
import struct
import unittest
from typing import Any, List, Optional, Tuple
from unittest import mock

from conformance.provider import FakeProvider, JsonReply, RecordedRequest, StreamReply, start_fake_provider
from conformance.provider._h1_parse import RequestParser

from .test_provider_support import RawConnection, http1_request

HAVE_H2 = importlib.util.find_spec("h2") is not None


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


def _referents(obj: Any) -> List[Any]:
    """What ``obj`` refers to, its attributes' values read through its ``__dict__``: before
    Python 3.11 that dict is an object of its own, from 3.11 on the values sit in the
    instance, and either way it is the instance's storage, not something it holds."""
    storage = getattr(obj, "__dict__", None)
    out: List[Any] = []
    for referent in gc.get_referents(obj):
        out.extend(gc.get_referents(referent) if referent is storage else [referent])
    return out


class TestResponseLogOnTheRequest(unittest.TestCase):
    def test_a_recorded_response_holds_no_object_of_its_own(self) -> None:
        """After a collection, a recorded request holds for the collector only what all requests share."""
        reply = JsonReply({"ok": True})
        stream = StreamReply([b"data: 1\n\n", b"data: 2\n\n"])
        with start_fake_provider() as provider:
            provider.reply(lambda request: stream if request.path == "/s" else reply)
            with RawConnection(provider.port) as connection:
                # The last request answered means the loop is done with the ones before it.
                for path in ("/j", "/s", "/j", "/s", "/last"):
                    connection.send(http1_request("POST", path, b"{}"))
                    connection.read_response()
            requests = provider.requests[:-1]
            gc.collect()
            shared = {id(reply), id(stream), id(provider._hub), id(RecordedRequest)}
            for request in requests:
                with self.subTest(request.path):
                    own = [o for o in _referents(request) if gc.is_tracked(o) and id(o) not in shared]
                    self.assertEqual(own, [])
                    log = request.response
                    assert log is not None
                    self.assertEqual((log.end, log.written), ("complete", len(log.chunks)))

    def test_a_reply_is_cut_into_events_once(self) -> None:
        """Two responses of one reply share one cut of its body into events."""
        reply = StreamReply([b"data: 1\n\n", b"data: 2\n\n"])
        with start_fake_provider() as provider:
            provider.reply(reply)
            with RawConnection(provider.port) as connection:
                for _ in range(2):
                    connection.send(http1_request("POST", "/s", b"{}"))
                    connection.read_response()
            first, second = (r.response for r in provider.requests)
            assert first is not None and second is not None
            self.assertIs(first.body_events(), second.body_events())
            self.assertEqual(len(first.body_events()), 2)

    def test_numbering_goes_on_after_the_settled_requests(self) -> None:
        """Events are numbered in order across requests read at different times; ended ones are skipped."""
        reply = StreamReply([b"data: 1\n\n", b"data: 2\n\n"])
        with start_fake_provider() as provider:
            provider.reply(reply)
            seqs: List[int] = []
            with RawConnection(provider.port) as connection:
                for index in range(3):
                    connection.send(http1_request("POST", "/s", b"{}"))
                    connection.read_response()
                    seqs.extend(event.seq for event in provider.requests[index].events)
            self.assertEqual(seqs, list(range(6)))
            self.assertEqual([e.seq for e in provider.requests[0].events], [0, 1])
            self.assertEqual(provider._hub._settled, 3)  # the last look found all three ended


class _Transport:
    """An asyncio transport that keeps each write."""

    def __init__(self) -> None:
        self.writes: List[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


class _Wire:
    """A provider's connection protocol fed by hand, its writes kept: no socket, no loop running."""

    def __init__(self, reply: Any) -> None:
        from conformance.provider._http1 import H1Connection

        self.provider = FakeProvider()
        self.provider.reply(reply)
        self.loop = asyncio.new_event_loop()
        self.provider._hub.loop = self.loop
        self.transport = _Transport()
        self.connection = H1Connection(self.provider._hub)
        self.connection.connection_made(self.transport)

    def feed(self, data: bytes) -> List[bytes]:
        """The writes that ``data`` caused."""
        before = len(self.transport.writes)
        self.connection.data_received(data)
        return self.transport.writes[before:]

    def close(self) -> None:
        self.connection.connection_lost(None)  # cancels what a held stream left on the loop
        tasks = list(self.provider._hub.tasks)
        if tasks:
            self.loop.run_until_complete(asyncio.wait(tasks, timeout=1.0))
        self.loop.close()
        self.provider.close()


def _frames(data: bytes) -> List[Tuple[int, int, int, bytes]]:
    """(type, flags, stream id, payload) of each whole h2 frame in ``data``."""
    out = []
    pos = 0
    while pos + 9 <= len(data):
        length = int.from_bytes(data[pos : pos + 3], "big")
        kind, flags, sid = struct.unpack(">BBI", data[pos + 3 : pos + 9])
        out.append((kind, flags, sid & 0x7FFFFFFF, data[pos + 9 : pos + 9 + length]))
        pos += 9 + length
    return out


class TestOneWritePerChunk(unittest.TestCase):
    CHUNKS = [b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n"]

    def wire(self, reply: Any) -> _Wire:
        wire = _Wire(reply)
        self.addCleanup(wire.close)
        return wire

    def test_http1_head_rides_the_first_chunk_and_the_end_the_last(self) -> None:
        """Three chunks, three writes: the head with the first, the terminating chunk with the last."""
        writes = self.wire(StreamReply(self.CHUNKS)).feed(http1_request("POST", "/s", b"{}"))
        self.assertEqual(len(writes), 3)
        self.assertTrue(writes[0].startswith(b"HTTP/1.1 200 OK\r\n"))
        self.assertTrue(writes[0].endswith(b"\r\n\r\n9\r\ndata: 1\n\n\r\n"))
        self.assertEqual(writes[1], b"9\r\ndata: 2\n\n\r\n")
        self.assertEqual(writes[2], b"9\r\ndata: 3\n\n\r\n0\r\n\r\n")

    def test_http1_end_is_its_own_write_when_it_waits(self) -> None:
        """A stream that hangs, or is held before its end, writes each chunk alone, no end with the last."""
        for name, reply in (("hang", StreamReply(self.CHUNKS, hang=True)),
                            ("pause", StreamReply(self.CHUNKS, pauses={3: 30}))):
            with self.subTest(name):
                writes = self.wire(reply).feed(http1_request("POST", "/s", b"{}"))
                self.assertEqual(writes[1:], [b"9\r\ndata: 2\n\n\r\n", b"9\r\ndata: 3\n\n\r\n"])

    @unittest.skipUnless(HAVE_H2, "h2 is not installed")
    def test_h2_headers_ride_the_first_data_frame(self) -> None:
        """Over h2c, one write per chunk: HEADERS with the first DATA frame, END_STREAM on the last."""
        import h2.config
        import h2.connection

        client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        client.initiate_connection()
        wire = self.wire(StreamReply(self.CHUNKS))
        wire.feed(client.data_to_send())
        client.send_headers(1, [(":method", "POST"), (":path", "/s"), (":scheme", "http"),
                                (":authority", "a")], end_stream=True)
        writes = [_frames(w) for w in wire.feed(client.data_to_send())]
        data_writes = [w for w in writes if any(f[0] == 0 for f in w)]
        self.assertEqual(len(data_writes), 3)
        self.assertEqual([f[0] for f in data_writes[0] if f[2] == 1], [1, 0])  # HEADERS, DATA
        self.assertEqual([f[3] for w in data_writes for f in w if f[0] == 0], self.CHUNKS)
        self.assertEqual([f[1] & 1 for w in data_writes for f in w if f[0] == 0], [0, 0, 1])  # END_STREAM

    @unittest.skipUnless(HAVE_H2, "h2 is not installed")
    def test_a_data_frame_made_here_is_the_one_h2_makes(self) -> None:
        """data_frame() gives the bytes h2 serializes for the DATA frame, and spend() the same windows."""
        import h2.config
        import h2.connection
        import h2.events

        from conformance.provider._h2_reply import _h2_stream, data_frame, spend

        def server() -> Tuple[Any, int]:
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
            conn.initiate_connection()
            client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            client.initiate_connection()
            head = [(":method", "GET"), (":path", "/"), (":scheme", "http"), (":authority", "a")]
            client.send_headers(3, head, end_stream=True)
            events = conn.receive_data(client.data_to_send())
            self.assertTrue(any(isinstance(e, h2.events.RequestReceived) for e in events))
            conn.send_headers(3, [(":status", "200")])
            conn.data_to_send()
            return conn, 3

        by_h2, sid = server()
        by_hand, _ = server()
        for chunk in (b"x", b"data: \xe2\x82", b"y" * 16384):
            by_h2.send_data(sid, chunk)
            own: Optional[Any] = _h2_stream(by_hand, sid)
            assert own is not None
            spend(by_hand, own, len(chunk))
            self.assertEqual(data_frame(sid, chunk), by_h2.data_to_send())
            self.assertEqual(by_hand.local_flow_control_window(sid), by_h2.local_flow_control_window(sid))
            self.assertEqual(by_hand.outbound_flow_control_window, by_h2.outbound_flow_control_window)


if __name__ == "__main__":
    unittest.main()
