"""Hostile clients that once broke or degraded the fake provider, one test each.

Each test is bounded in count and time, uses only loopback, and would fail (not
hang) against a provider without the defence it checks.
"""

from __future__ import annotations

import importlib.util
import json
import math
import socket
import struct
import threading
import time
import unittest
from typing import Any, List, Optional, Tuple
from unittest import mock

from conformance.errors import ProviderInputError
from conformance.provider import (
    FakeProvider,
    HangReply,
    JsonReply,
    RecordedRequest,
    StreamReply,
    _server,
    start_fake_provider,
)

from .hygiene import blocks_on_purpose
from .test_provider_support import GOAWAY_NO_ERROR, PREFACE, H2Client, RawConnection, http1_request

HAVE_H2 = importlib.util.find_spec("h2") is not None
NEEDS_H2 = "the h2 package is not installed"

PING, GOAWAY, RST_STREAM = 0x6, 0x7, 0x3
ENHANCE_YOUR_CALM, REFUSED_STREAM = 0xB, 0x7


def _frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream_id) + payload


def _frames(data: bytes) -> List[Tuple[int, int, int, bytes]]:
    """(type, flags, stream id, payload) of each whole frame in ``data``."""
    out = []
    pos = 0
    while len(data) - pos >= 9:
        length = int.from_bytes(data[pos:pos + 3], "big")
        if len(data) - pos - 9 < length:
            break
        kind, flags = data[pos + 3], data[pos + 4]
        sid = int.from_bytes(data[pos + 5:pos + 9], "big") & 0x7FFFFFFF
        out.append((kind, flags, sid, data[pos + 9:pos + 9 + length]))
        pos += 9 + length
    return out


def _settle(read: Any, seconds: float = 3.0) -> Any:
    """Poll ``read()`` until it gives the same value twice 0.2 s apart, or time runs out."""
    deadline = time.monotonic() + seconds
    last = read()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        value = read()
        if value == last:
            return value
        last = value
    return last


def _write_buffered(provider: FakeProvider) -> int:
    """Bytes the provider's transports hold, not yet taken by the kernel."""
    return sum(c.transport.get_write_buffer_size() for c in list(provider._hub.connections))


class TestBackPressure(unittest.TestCase):
    def test_pipelined_large_replies_to_a_client_that_never_reads_are_not_all_buffered(self) -> None:
        """Ten pipelined 4 MiB replies to a non-reader: one is buffered, and all arrive once it reads."""
        body = b"x" * (4 << 20)
        with start_fake_provider() as provider:
            provider.reply(JsonReply(body, content_type="application/octet-stream"))
            with RawConnection(provider.port) as connection:
                connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
                connection.send(http1_request("GET", "/big") * 10)
                buffered = _settle(lambda: _write_buffered(provider))
                self.assertLess(buffered, 2 * len(body), "replies piled up in the provider's memory")
                self.assertLess(provider._hub.count(), 10, "the pipeline went on being answered")
                for _ in range(10):
                    response = connection.read_response()
                    self.assertEqual((response.status, len(response.body)), (200, len(body)))
            self.assertEqual(len(provider.requests), 10)

    @unittest.skipUnless(HAVE_H2, NEEDS_H2)
    def test_h2_ping_flood_from_a_client_that_never_reads_gets_goaway_enhance_your_calm(self) -> None:
        """Fifty thousand PINGs, never read: the provider stops with GOAWAY(ENHANCE_YOUR_CALM) and closes."""
        flood = _frame(PING, 0, 0, b"\x00" * 8) * 50000
        with start_fake_provider() as provider:
            provider.reply(JsonReply({}))
            with socket.create_connection(("127.0.0.1", provider.port), timeout=5.0) as sock:
                sock.sendall(PREFACE + _frame(0x4, 0, 0, b""))
                try:
                    sock.sendall(flood)
                except OSError:  # the provider closed in the middle: what we want
                    pass
                received = bytearray()
                deadline = time.monotonic() + 10.0
                while time.monotonic() < deadline:
                    try:
                        data = sock.recv(1 << 20)
                    except OSError:
                        break
                    if not data:
                        break
                    received += data
            goaways = [p for kind, _, _, p in _frames(bytes(received)) if kind == GOAWAY]
            self.assertTrue(goaways, "no GOAWAY after the flood")
            self.assertEqual(int.from_bytes(goaways[-1][4:8], "big"), ENHANCE_YOUR_CALM)
            acks = sum(1 for kind, _, _, _ in _frames(bytes(received)) if kind == PING)
            self.assertLess(acks, 50000, "every PING was answered")
            with RawConnection(provider.port) as other:  # and the provider still serves
                other.send(http1_request("GET", "/after"))
                self.assertEqual(other.read_response().status, 200)


class TestBlockingHandler(unittest.TestCase):
    def test_close_refuses_the_port_and_raises_naming_the_handler_when_the_loop_is_blocked(self) -> None:
        """A sync handler that blocks the loop: close() shuts the port and raises naming the handler."""
        entered, release = threading.Event(), threading.Event()

        def slow_handler(request: RecordedRequest) -> JsonReply:
            entered.set()
            with blocks_on_purpose():
                release.wait(10.0)
            return JsonReply({})

        provider = start_fake_provider()
        provider.reply(slow_handler)
        try:
            with RawConnection(provider.port) as connection:
                connection.send(http1_request("GET", "/slow"))
                self.assertTrue(entered.wait(5.0))
                with mock.patch.object(_server, "_JOIN_SECONDS", 0.2):
                    with self.assertRaises(ProviderInputError) as caught:
                        provider.close()
                self.assertIn("slow_handler", str(caught.exception))
                self.assertIn("refuses new connections", str(caught.exception))
                assert provider._thread is not None
                self.assertTrue(provider._thread.is_alive())
                # close() did not return while the port still accepted: it now refuses.
                with self.assertRaises(ConnectionRefusedError):
                    socket.create_connection(("127.0.0.1", provider.port), timeout=2.0).close()
        finally:
            release.set()
        provider.close()  # the handler returned: this close finishes, and returns
        assert provider._thread is not None
        self.assertFalse(provider._thread.is_alive())

    def test_the_request_record_is_bounded_by_default(self) -> None:
        """A provider keeps the newest DEFAULT_MAX_REQUESTS requests unless a test asks for every one."""
        from conformance.provider._server import DEFAULT_MAX_REQUESTS

        with start_fake_provider() as provider:
            self.assertEqual(provider._hub.max_requests, DEFAULT_MAX_REQUESTS)
        with start_fake_provider(max_requests=None) as provider:
            self.assertIsNone(provider._hub.max_requests)


class TestSlowBody(unittest.TestCase):
    def test_slow_upload_that_keeps_coming_is_not_cut_off(self) -> None:
        """100 bytes every 0.15 s for 1.5 s, with a 0.5 s idle timeout: 200, whole body."""
        with start_fake_provider(header_timeout=0.5, body_idle_timeout=0.5, body_timeout=10.0) as provider:
            provider.reply(JsonReply({}))
            with RawConnection(provider.port) as connection:
                connection.send(b"POST /slow HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n")
                for _ in range(10):
                    time.sleep(0.15)
                    connection.send(b"a" * 100)
                self.assertEqual(connection.read_response().status, 200)
            self.assertEqual(len(provider.requests[0].body), 1000)

    def test_stalled_body_gets_408_after_the_idle_timeout(self) -> None:
        """A body that stops coming gets 408 naming body_idle_timeout, and is recorded with the error."""
        with start_fake_provider(body_idle_timeout=0.3) as provider:
            with RawConnection(provider.port) as connection:
                connection.send(b"POST /stall HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nabc")
                response = connection.read_response()
                self.assertEqual(response.status, 408)
                self.assertIn("body_idle_timeout", json.loads(response.body)["error"]["message"])
            self.assertIn("body_idle_timeout", provider.requests[0].error or "")

    def test_body_that_trickles_past_the_total_cap_gets_408(self) -> None:
        """A body that keeps trickling but takes longer than body_timeout gets 408 naming body_timeout."""
        with start_fake_provider(body_idle_timeout=1.0, body_timeout=0.6) as provider:
            with RawConnection(provider.port) as connection:
                connection.send(b"POST /trickle HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n")
                for _ in range(8):
                    time.sleep(0.1)
                    try:
                        connection.send(b"a")
                    except OSError:
                        break
                response = connection.read_response()
                self.assertEqual(response.status, 408)
                self.assertIn("body_timeout", json.loads(response.body)["error"]["message"])

    def test_timeouts_must_be_positive_numbers(self) -> None:
        """A zero, negative or non-number body timeout is refused when the provider is made."""
        for name in ("body_idle_timeout", "body_timeout"):
            for value in (0, -1.0, math.nan, "5"):
                with self.subTest(name=name, value=value), self.assertRaises(ProviderInputError):
                    FakeProvider(**{name: value})


@unittest.skipUnless(HAVE_H2, NEEDS_H2)
class TestH2Goaway(unittest.TestCase):
    def test_two_goaways_from_the_client_do_not_cut_the_stream(self) -> None:
        """GOAWAY(NO_ERROR) twice mid-stream: the stream still completes, no PROTOCOL_ERROR."""
        body = b"y" * (3 << 20)  # more than the client's 1 MiB window: still in flight at the GOAWAYs
        with start_fake_provider() as provider:
            provider.reply(StreamReply([body[i:i + 65536] for i in range(0, len(body), 65536)],
                                       content_type="application/octet-stream"))
            with H2Client(provider.port) as client:
                sid = client.request("GET", "/two-goaways")
                client.headers_of(sid)
                client.sock.sendall(GOAWAY_NO_ERROR + GOAWAY_NO_ERROR)
                response = client.response(sid)
                self.assertTrue(response.ended)
                self.assertEqual(len(response.body), len(body))
                if client.terminated is not None:
                    self.assertEqual(client.terminated.error_code, 0)

    def test_close_with_a_stream_in_flight_sends_goaway_first(self) -> None:
        """close() while a stream hangs: the client reads a GOAWAY before the connection ends."""
        with start_fake_provider() as provider:
            provider.reply(HangReply())
            client = H2Client(provider.port, timeout=5.0)
            try:
                client.request("GET", "/hang")
                self.assertIsNotNone(provider.next_request(5.0))
                provider.close()
                client.read_to_eof()
                self.assertIsNotNone(client.terminated, "no GOAWAY before the close")
            finally:
                client.close()

    def test_streams_beyond_max_concurrent_streams_are_refused_one_by_one(self) -> None:
        """The 101st stream gets RST_STREAM(REFUSED_STREAM); the 100 in flight and the connection go on."""
        release = threading.Event()

        async def handler(request: RecordedRequest) -> JsonReply:
            import asyncio

            for _ in range(100):
                if release.is_set():
                    break
                await asyncio.sleep(0.05)
            return JsonReply({"path": request.path})

        with start_fake_provider() as provider:
            provider.reply(handler)
            with H2Client(provider.port) as client:
                # Sent before the provider's SETTINGS are read, so the client's own
                # h2 does not stop at the limit.
                sids = [client.request("GET", f"/s/{n}") for n in range(101)]
                deadline = time.monotonic() + 5.0
                while not client.responses[sids[-1]].reset and time.monotonic() < deadline:
                    client.pump()
                self.assertTrue(client.responses[sids[-1]].reset, "the extra stream was not refused")
                self.assertIsNone(client.terminated, "the connection was closed")
                release.set()
                for sid in sids[:100]:
                    self.assertEqual(client.response(sid).status, 200)
                again = client.request("GET", "/again")
                self.assertEqual(client.response(again).status, 200)
            self.assertEqual(len(provider.requests), 101)


class TestRecord(unittest.TestCase):
    def test_max_requests_keeps_the_newest_and_counts_the_dropped(self) -> None:
        """With max_requests=5, eight requests leave the last five and dropped_requests == 3."""
        with start_fake_provider(max_requests=5) as provider:
            provider.reply(JsonReply({}))
            with RawConnection(provider.port) as connection:
                for n in range(8):
                    connection.send(http1_request("GET", f"/r/{n}"))
                    connection.read_response()
            self.assertEqual([r.path for r in provider.requests], [f"/r/{n}" for n in range(3, 8)])
            self.assertEqual(provider.dropped_requests, 3)
            self.assertEqual(provider.next_request(1.0).path, "/r/3")
            self.assertEqual(provider.clear_requests(), 5)
            self.assertEqual(provider.requests, [])
            with self.assertRaises(TimeoutError):
                provider.next_request(0.05)

    def test_a_kept_alive_connection_holds_no_more_than_the_record(self) -> None:
        """Twenty requests on one connection, max_requests=5: it keeps five, marked closed at its end."""
        with start_fake_provider(max_requests=5) as provider:
            provider.reply(JsonReply({}))
            with RawConnection(provider.port) as connection:
                for n in range(20):
                    connection.send(http1_request("GET", f"/r/{n}"))
                    connection.read_response()
                (held,) = [list(c.requests) for c in list(provider._hub.connections)]
                self.assertEqual([r.path for r in held], [f"/r/{n}" for n in range(15, 20)])
            self.assertIsNotNone(provider.latest_closed(timeout=2.0))
            self.assertTrue(all(r.closed for r in provider.requests))

    def test_max_requests_must_be_a_positive_int(self) -> None:
        """A zero, negative or non-int max_requests is refused."""
        for value in (0, -1, 2.5, True):
            with self.subTest(value=value), self.assertRaises(ProviderInputError):
                FakeProvider(max_requests=value)  # type: ignore[arg-type]


class TestWaits(unittest.TestCase):
    def _call(self, function: Any, *args: Any) -> Optional[BaseException]:
        """Run ``function(*args)`` in a thread, bounded; the exception it raised, or None."""
        outcome: List[Optional[BaseException]] = []

        def run() -> None:
            try:
                function(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                outcome.append(exc)
            else:
                outcome.append(None)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(3.0)
        self.assertFalse(thread.is_alive(), f"{function.__name__}{args} did not return within 3 s")
        return outcome[0]

    def test_bad_timeouts_are_refused_with_a_reason(self) -> None:
        """nan, None, inf, a negative number and a string are refused at once, naming the value."""
        with start_fake_provider() as provider:
            for method in (provider.next_request, provider.latest_closed):
                for value in (math.nan, None, math.inf, -1.0, "1"):
                    with self.subTest(method=method.__name__, value=value):
                        exc = self._call(method, value)
                        self.assertIsInstance(exc, ProviderInputError)
                        self.assertIn("timeout", str(exc))

    def test_waiting_on_a_closed_provider_says_it_is_closed(self) -> None:
        """next_request after close(), or during it, raises at once saying the provider is closed."""
        provider = start_fake_provider()
        waiting: List[Optional[BaseException]] = []
        thread = threading.Thread(target=lambda: waiting.append(self._call(provider.next_request, 5.0)))
        thread.start()
        time.sleep(0.1)
        provider.close()
        thread.join(4.0)
        self.assertIn("closed", str(waiting[0]))
        exc = self._call(provider.next_request, 5.0)
        self.assertIn("closed", str(exc))
        self.assertNotIn("no new request", str(exc))


if __name__ == "__main__":
    unittest.main()
