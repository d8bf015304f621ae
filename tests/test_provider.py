"""The fake provider over HTTP/1.1: real clients, raw framing, the record and its waits."""

from __future__ import annotations

import asyncio
import gc
import http.client
import importlib.util
import json
import logging
import os
import socket
import threading
import time
import unittest
import warnings
from typing import List

from conformance.errors import ProviderInputError
from conformance.provider import (
    FakeProvider,
    HangReply,
    JsonReply,
    RecordedRequest,
    StreamReply,
    start_fake_provider,
)

from .test_provider_support import RawConnection, http1_request

HAVE_HTTPX = importlib.util.find_spec("httpx") is not None
EVENTS = [f"data: {{\"n\": {i}}}\n\n".encode() for i in range(20)]


class ProviderTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.provider = start_fake_provider()
        self.addCleanup(self.provider.close)

    def raw(self) -> RawConnection:
        connection = RawConnection(self.provider.port)
        self.addCleanup(connection.close)
        return connection


class TestHttpClient(ProviderTestCase):
    def test_json_reply_reaches_http_client_and_request_is_recorded(self) -> None:
        """http.client gets the scripted JSON reply and the request is recorded field by field."""
        self.provider.reply(JsonReply({"ok": True}, status=201, headers={"x-request-id": "r1"}))
        client = http.client.HTTPConnection("127.0.0.1", self.provider.port, timeout=10)
        self.addCleanup(client.close)
        client.request("POST", "/v1/chat?a=1&b=2", body=b'{"model": "m"}',
                       headers={"Content-Type": "application/json", "X-Key": "k1"})
        response = client.getresponse()
        self.assertEqual(response.status, 201)
        self.assertEqual(response.getheader("content-type"), "application/json")
        self.assertEqual(response.getheader("x-request-id"), "r1")
        self.assertEqual(json.loads(response.read()), {"ok": True})
        request = self.provider.next_request()
        self.assertEqual((request.method, request.path, request.query), ("POST", "/v1/chat", "a=1&b=2"))
        self.assertEqual(request.params, {"a": "1", "b": "2"})
        self.assertEqual(request.headers["x-key"], "k1")
        self.assertEqual(request.headers["content-type"], "application/json")
        self.assertEqual(request.body, b'{"model": "m"}')
        self.assertEqual(request.json, {"model": "m"})
        self.assertEqual(request.http_version, "HTTP/1.1")
        self.assertIsNone(request.error)

    def test_stream_reply_reaches_http_client(self) -> None:
        """http.client reads a StreamReply whole through the chunked encoding."""
        self.provider.reply(StreamReply(EVENTS))
        client = http.client.HTTPConnection("127.0.0.1", self.provider.port, timeout=10)
        self.addCleanup(client.close)
        client.request("GET", "/stream")
        response = client.getresponse()
        self.assertEqual(response.getheader("content-type"), "text/event-stream")
        self.assertEqual(response.read(), b"".join(EVENTS))

    def test_repeated_headers_are_joined(self) -> None:
        """A header sent twice is recorded once, its values joined with a comma."""
        self.provider.reply(JsonReply({}))
        with self.raw() as connection:
            connection.send(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\n\r\n")
            self.assertEqual(connection.read_response().status, 200)
        self.assertEqual(self.provider.next_request().headers["x-a"], "1, 2")


@unittest.skipUnless(HAVE_HTTPX, "httpx is not installed")
class TestHttpx(ProviderTestCase):
    def test_json_reply_reaches_httpx(self) -> None:
        """httpx over HTTP/1.1 gets the JSON reply and its status and headers."""
        import httpx

        self.provider.reply(JsonReply({"error": "slow down"}, status=429, headers={"retry-after": "2"}))
        with httpx.Client(base_url=self.provider.url) as client:
            response = client.post("/v1/x", json={"q": 1})
        self.assertEqual(response.status_code, 429)
        self.assertEqual(response.headers["retry-after"], "2")
        self.assertEqual(response.json(), {"error": "slow down"})
        self.assertEqual(response.http_version, "HTTP/1.1")
        self.assertEqual(self.provider.next_request().json, {"q": 1})

    def test_stream_reply_reaches_httpx_line_by_line(self) -> None:
        """httpx streams a StreamReply; every event arrives, in order."""
        import httpx

        self.provider.reply(StreamReply(EVENTS))
        with httpx.Client(base_url=self.provider.url) as client:
            with client.stream("POST", "/v1/stream", json={}) as response:
                lines = [line for line in response.iter_lines() if line]
        self.assertEqual(lines, [e.decode().strip() for e in EVENTS])

    def test_large_body_and_large_stream(self) -> None:
        """A 10 MB request body arrives whole, and a 10 MB streamed reply too."""
        import httpx

        body = os.urandom(10 * 1024 * 1024)
        chunks = [body[i:i + 1024 * 1024] for i in range(0, len(body), 1024 * 1024)]
        self.provider.reply(StreamReply(chunks, content_type="application/octet-stream"))
        with httpx.Client(base_url=self.provider.url, timeout=30) as client:
            response = client.post("/upload", content=body)
        self.assertEqual(len(response.content), len(body))
        self.assertTrue(response.content == body)
        self.assertTrue(self.provider.next_request().body == body)

    def test_async_client_against_provider(self) -> None:
        """httpx.AsyncClient in the test's own event loop talks to the provider's loop."""
        import httpx

        self.provider.reply(JsonReply({"ok": 1}))

        async def main() -> int:
            asyncio.get_running_loop().slow_callback_duration = 5.0  # building the SSL context
            async with httpx.AsyncClient() as client:
                response = await client.get(f"{self.provider.url}/a")
                request = await self.provider.next_request_async(timeout=5)
                self.assertEqual(request.path, "/a")
                return response.status_code

        self.assertEqual(asyncio.run(main()), 200)


class TestFraming(ProviderTestCase):
    def test_each_stream_chunk_arrives_as_its_own_chunk(self) -> None:
        """Chunk boundaries are kept on the wire; empty chunks are skipped, not sent as the end."""
        chunks = [b"data: a\n\n", b"", b"data: b", b"\n\n", b"\xe2\x82", b"\xac"]
        self.provider.reply(StreamReply(chunks))
        with self.raw() as connection:
            connection.send(http1_request("GET", "/s"))
            response = connection.read_response()
        self.assertEqual(response.headers["transfer-encoding"], "chunked")
        self.assertEqual(response.chunks, [c for c in chunks if c])

    def test_a_stream_with_its_own_content_length_goes_unchunked(self) -> None:
        """A stream whose headers name its length is sent by that length, not chunked, then closed."""
        chunks = [b"data: a\n\n", b"data: b\n\n"]
        self.provider.reply(StreamReply(chunks, headers={"Content-Length": "18"}))
        with self.raw() as connection:
            connection.send(http1_request("GET", "/s"))
            response = connection.read_response()
            self.assertNotIn("transfer-encoding", response.headers)
            self.assertEqual(response.headers["content-length"], "18")
            self.assertEqual(response.body, b"".join(chunks))
            self.assertEqual(connection.read_to_eof(), b"")

    def test_a_stream_length_that_is_not_its_total_is_refused(self) -> None:
        """A content-length other than the chunks' total, or on a stream cut short, is refused."""
        from conformance.errors import ProviderInputError

        with self.assertRaisesRegex(ProviderInputError, "sends exactly that many bytes"):
            StreamReply([b"abc"], headers={"content-length": "4"})
        with self.assertRaisesRegex(ProviderInputError, "ends 'complete'"):
            StreamReply([b"abc"], headers={"content-length": "3"}, end="close")
        with self.assertRaisesRegex(ProviderInputError, "a count of bytes"):
            StreamReply([b"abc"], headers={"content-length": "three"})

    def test_keep_alive_serves_requests_in_turn_and_honours_close(self) -> None:
        """Several requests share one connection; Connection: close ends it after the reply."""
        self.provider.reply(lambda r: JsonReply({"path": r.path}))
        with self.raw() as connection:
            for index in range(3):
                connection.send(http1_request("GET", f"/r{index}"))
                self.assertEqual(json.loads(connection.read_response().body), {"path": f"/r{index}"})
            connection.send(http1_request("GET", "/last", headers={"Connection": "close"}))
            response = connection.read_response()
            self.assertEqual(response.headers.get("connection"), "close")
            self.assertEqual(connection.read_to_eof(), b"")
        self.assertEqual([r.path for r in self.provider.requests], ["/r0", "/r1", "/r2", "/last"])

    def test_pipelined_requests_are_answered_in_order(self) -> None:
        """Two requests sent in one write get two replies, in order."""
        self.provider.reply(lambda r: StreamReply([r.path.encode()]))
        with self.raw() as connection:
            connection.send(http1_request("POST", "/one", b"1") + http1_request("POST", "/two", b"22"))
            self.assertEqual(connection.read_response().body, b"/one")
            self.assertEqual(connection.read_response().body, b"/two")
        self.assertEqual([r.body for r in self.provider.requests], [b"1", b"22"])

    def test_chunked_request_body_is_decoded(self) -> None:
        """A chunked request body (with an extension and a trailer) is recorded decoded."""
        self.provider.reply(JsonReply({}))
        with self.raw() as connection:
            connection.send(
                b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5;ext=1\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\nX-Trailer: t\r\n\r\n"
            )
            self.assertEqual(connection.read_response().status, 200)
        request = self.provider.next_request()
        self.assertEqual(request.body, b'{"a": 1}')
        self.assertEqual(request.json, {"a": 1})

    def test_expect_100_continue_is_answered_before_the_body(self) -> None:
        """A client that expects 100-continue gets it, sends the body, and gets the reply."""
        self.provider.reply(JsonReply({"ok": True}))
        with self.raw() as connection:
            connection.send(
                b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
            )
            self.assertEqual(connection.read_response().status, 100)
            connection.send(b"body")
            self.assertEqual(connection.read_response().status, 200)
        self.assertEqual(self.provider.next_request().body, b"body")

    def test_http10_request_is_answered_then_closed(self) -> None:
        """An HTTP/1.0 request gets its reply (a stream without chunking) and the connection closes."""
        self.provider.reply(StreamReply([b"a", b"b"]))
        with self.raw() as connection:
            connection.send(b"GET /old HTTP/1.0\r\n\r\n")
            response = connection.read_response()
        self.assertEqual(response.body, b"ab")
        self.assertIsNone(response.chunks)
        self.assertEqual(self.provider.next_request().http_version, "HTTP/1.0")

    def test_head_request_gets_headers_only(self) -> None:
        """A HEAD request gets the reply's headers and no body, and the connection stays usable."""
        self.provider.reply(JsonReply({"x": 1}))
        with self.raw() as connection:
            connection.send(http1_request("HEAD", "/h"))
            response = connection.read_response(head_only=True)
            self.assertEqual(response.headers["content-length"], "7")
            connection.send(http1_request("GET", "/g"))
            self.assertEqual(connection.read_response().body, b'{"x":1}')


class TestScript(ProviderTestCase):
    def get(self, path: str = "/v1/chat/completions", method: str = "POST") -> tuple:
        with self.raw() as connection:
            connection.send(http1_request(method, path, b"{}"))
            response = connection.read_response()
        return response.status, json.loads(response.body) if response.body else None

    def test_no_reply_scripted_names_method_and_path(self) -> None:
        """Before reply() the provider answers 501 with a message naming the request."""
        status, body = self.get()
        self.assertEqual(status, 501)
        self.assertIn("no reply scripted for POST /v1/chat/completions", body["error"]["message"])
        self.assertIn("provider.reply(", body["error"]["message"])

    def test_handler_results(self) -> None:
        """Sync, async and broken handlers each give the reply or a 500 that says what went wrong."""

        async def async_handler(request: RecordedRequest) -> JsonReply:
            await asyncio.sleep(0.001)
            return JsonReply({"async": request.path})

        def raising(request: RecordedRequest) -> JsonReply:
            raise ValueError("boom")

        async def async_raising(request: RecordedRequest) -> JsonReply:
            raise KeyError("gone")

        cases = [
            ("sync", lambda r: JsonReply({"sync": r.path}), 200, "sync"),
            ("async", async_handler, 200, "async"),
            ("raises", raising, 500, "ValueError: boom"),
            ("async raises", async_raising, 500, "KeyError"),
            ("not a reply", lambda r: {"plain": "dict"}, 500, "returned dict"),
            ("awaitable not a reply", lambda r: asyncio.sleep(0, result=42), 500, "returned int"),
            ("unencodable body", lambda r: JsonReply({"x": object()}), 500, "could not be encoded"),
        ]
        for name, handler, status, text in cases:
            with self.subTest(name):
                self.provider.reply(handler)
                got_status, body = self.get("/p")
                self.assertEqual(got_status, status)
                self.assertIn(text, json.dumps(body))
        errors = self.provider.errors
        self.assertIsInstance(errors[0], ValueError)
        self.assertIsNotNone(errors[0].__traceback__)
        self.assertEqual(len(errors), 5)

    def test_reply_rejects_what_is_not_a_reply(self) -> None:
        """reply() with something that is neither a reply nor callable raises ProviderInputError."""
        for value in ({"a": 1}, b"bytes", 42):
            with self.subTest(value=value):
                with self.assertRaises(ProviderInputError):
                    self.provider.reply(value)  # type: ignore[arg-type]

    def test_requests_is_a_snapshot_in_arrival_order(self) -> None:
        """requests is a copy in arrival order; changing it does not change the record."""
        self.provider.reply(JsonReply({}))
        for index in range(3):
            self.get(f"/{index}")
        snapshot = self.provider.requests
        snapshot.clear()
        self.assertEqual([r.path for r in self.provider.requests], ["/0", "/1", "/2"])


class TestWaiting(ProviderTestCase):
    def test_next_request_walks_the_record_then_times_out(self) -> None:
        """next_request returns each request once, in order, then raises TimeoutError saying how many came."""
        self.provider.reply(JsonReply({}))
        with self.raw() as connection:
            for path in ("/a", "/b"):
                connection.send(http1_request("GET", path))
                connection.read_response()
        self.assertEqual(self.provider.next_request().path, "/a")
        self.assertEqual(self.provider.next_request().path, "/b")
        with self.assertRaises(TimeoutError) as caught:
            self.provider.next_request(timeout=0.05)
        self.assertIn("2 requests so far", str(caught.exception))

    def test_next_request_waits_for_a_request_to_come(self) -> None:
        """next_request blocks until a request arrives from another thread."""
        self.provider.reply(JsonReply({}))

        def later() -> None:
            time.sleep(0.05)
            with RawConnection(self.provider.port) as connection:
                connection.send(http1_request("GET", "/late"))
                connection.read_response()

        thread = threading.Thread(target=later)
        thread.start()
        self.addCleanup(thread.join)
        self.assertEqual(self.provider.next_request(timeout=10).path, "/late")

    def test_hang_stream_stays_open_until_the_client_leaves(self) -> None:
        """A hang=True stream sends its chunks, no terminator, and latest_closed sees the client leave."""
        self.provider.reply(StreamReply([b"data: 1\n\n"], hang=True))
        connection = RawConnection(self.provider.port)
        try:
            connection.send(http1_request("POST", "/hang", b"{}"))
            status, headers = connection.read_head()
            self.assertEqual(int(connection.file.readline(), 16), 9)
            self.assertEqual(connection.read_exact(11), b"data: 1\n\n\r\n")
            self.assertIsNone(self.provider.latest_closed(timeout=0.05))
            connection.sock.settimeout(0.1)
            with self.assertRaises(socket.timeout):
                connection.file.read1(1)  # nothing more: no terminating chunk
        finally:
            connection.close()
        closed = self.provider.latest_closed(timeout=5)
        self.assertIsNotNone(closed)
        assert closed is not None
        self.assertEqual(closed.path, "/hang")
        self.assertTrue(closed.closed)
        self.assertIsNotNone(closed.closed_at)

    def test_hang_reply_sends_nothing_until_the_client_leaves(self) -> None:
        """HangReply sends no byte at all; closing the client marks the request closed."""
        self.provider.reply(HangReply())
        connection = RawConnection(self.provider.port, timeout=0.1)
        try:
            connection.send(http1_request("GET", "/never"))
            with self.assertRaises(socket.timeout):
                connection.file.read1(1)
        finally:
            connection.close()
        self.assertTrue(self.provider.next_request().wait_closed(5))

    def test_half_close_after_the_request_counts_as_closed(self) -> None:
        """A client that shuts down its sending side after a full request is seen as gone."""
        self.provider.reply(HangReply())
        with self.raw() as connection:
            connection.send(http1_request("GET", "/half"))
            connection.sock.shutdown(socket.SHUT_WR)
            closed = self.provider.latest_closed(timeout=5)
        self.assertIsNotNone(closed)

    def test_async_twins_work_from_another_event_loop(self) -> None:
        """next_request_async and latest_closed_async wait inside the test's own loop without blocking it."""
        self.provider.reply(StreamReply([b"x"], hang=True))
        port = self.provider.port

        async def main() -> tuple:
            with self.assertRaises(TimeoutError):
                await self.provider.next_request_async(timeout=0.01)
            self.assertIsNone(await self.provider.latest_closed_async(timeout=0.01))
            waiting = asyncio.ensure_future(self.provider.next_request_async(timeout=10))
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(http1_request("GET", "/async"))
            await writer.drain()
            request = await waiting
            await reader.readuntil(b"x\r\n")
            closing = asyncio.ensure_future(self.provider.latest_closed_async(timeout=10))
            writer.close()
            await writer.wait_closed()
            return request, await closing

        request, closed = asyncio.run(main())
        self.assertEqual(request.path, "/async")
        self.assertIs(closed, request)


class TestLifeCycle(unittest.TestCase):
    def test_connections_arriving_as_it_closes_are_refused_cleanly(self) -> None:
        """Closed while clients keep connecting, the provider logs no error and leaks no socket.

        An accept already taken when the server closed made asyncio's own code fail
        (``Server._attach``), which its debug mode logs, and leaked the accepted socket.
        """
        logged: List[str] = []

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                logged.append(record.getMessage())

        handler = Collect(logging.ERROR)
        logging.getLogger("asyncio").addHandler(handler)
        self.addCleanup(logging.getLogger("asyncio").removeHandler, handler)

        def hammer(port: int, stop: threading.Event) -> None:
            opened = []
            deadline = time.monotonic() + 5.0
            while not stop.is_set() and time.monotonic() < deadline and len(opened) < 500:
                try:
                    opened.append(socket.create_connection(("127.0.0.1", port), timeout=0.2))
                except OSError:
                    pass
            for sock in opened:
                sock.close()

        for _ in range(30):
            provider = start_fake_provider()
            assert provider._loop is not None
            provider._loop.set_debug(True)  # the failure is logged in debug mode only
            stop = threading.Event()
            clients = threading.Thread(target=hammer, args=(provider.port, stop))
            clients.start()
            time.sleep(0.003)
            provider.close()
            stop.set()
            clients.join(10.0)
        gc.collect()  # an accepted socket left without a transport warns as it is freed
        self.assertEqual([m for m in logged if "transport creation" in m], [])

    def test_context_managers_start_and_close(self) -> None:
        """with and async with start the provider and close it; close is idempotent and frees the port."""
        with start_fake_provider() as provider:
            self.assertTrue(provider.url.startswith("http://127.0.0.1:"))
            self.assertFalse(provider.http2)
            port = provider.port
        provider.close()
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))

        async def main() -> str:
            asyncio.get_running_loop().slow_callback_duration = 5.0  # start and close block briefly
            async with FakeProvider() as provider:
                provider.reply(JsonReply({}))
                reader, writer = await asyncio.open_connection("127.0.0.1", provider.port)
                writer.write(http1_request("GET", "/"))
                line = await reader.readline()
                writer.close()
                await writer.wait_closed()
            return line.decode()

        self.assertIn(" 200 ", asyncio.run(main()))

    def test_close_with_streams_in_flight_ends_them(self) -> None:
        """close() with hanging replies in flight returns, ends the connections and the thread."""
        provider = start_fake_provider()
        provider.reply(StreamReply([b"a"], hang=True))
        connections = [RawConnection(provider.port) for _ in range(3)]
        try:
            for connection in connections:
                connection.send(http1_request("GET", "/h"))
                connection.read_head()
            threads = threading.active_count()
            provider.close()
            self.assertEqual(threading.active_count(), threads - 1)
            for connection in connections:
                self.assertTrue(connection.closed_by_peer())
        finally:
            for connection in connections:
                connection.close()

    def test_bad_settings_are_refused(self) -> None:
        """Nonsense limits or ports raise ProviderInputError before anything is bound."""
        for kwargs in ({"max_header_bytes": 0}, {"max_body_bytes": -1}, {"port": 70000},
                       {"header_timeout": 0}):
            with self.subTest(**kwargs):
                with self.assertRaises(ProviderInputError):
                    FakeProvider(**kwargs)  # type: ignore[arg-type]

    def test_start_close_cycles_leak_nothing(self) -> None:
        """500 start/close cycles leave no thread, socket or file descriptor, and warn nothing."""
        gc.collect()
        fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
        threads = threading.active_count()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for index in range(500):
                provider = start_fake_provider()
                if index % 50 == 0:
                    provider.reply(JsonReply({}))
                    with RawConnection(provider.port) as connection:
                        connection.send(http1_request("GET", "/"))
                        self.assertEqual(connection.read_response().status, 200)
                provider.close()
            gc.collect()
        self.assertEqual([str(w.message) for w in caught], [])
        self.assertEqual(threading.active_count(), threads)
        if fds is not None:
            self.assertEqual(len(os.listdir("/proc/self/fd")), fds)


if __name__ == "__main__":
    unittest.main()
