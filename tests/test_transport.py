"""Tests for conformance.reference._transport against tiny loopback servers in this file.

The servers are raw asyncio servers on the test's own loop (HTTP/1.1 by hand, h2c
through the ``h2`` state machine), so each test scripts exactly the bytes it needs:
a whole reply, a chunked stream, a hang, a cut. Each server notes when the client
closed the connection, which is what the abort and cancel cases are about.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import time
import unittest
from typing import Any, Awaitable, Callable, Optional

from conformance.contract import AbortController
from conformance.reference._transport import Response, TransportError, request

from .test_provider_support import StallWatched

HAVE_H2 = importlib.util.find_spec("h2") is not None
NO_H2 = "h2 is not installed: h2c is optional"

#: The contract's bounds; what held up the whole process is not counted (StallWatched).
ABORT_BOUND = 0.5
CLOSE_BOUND = 1.0
#: How long any single test step may take before the test gives up.
STEP = 5.0

H1Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class _Server:
    """Bookkeeping shared by both servers: port, requests seen, client closes seen."""

    def __init__(self) -> None:
        self.port = 0
        self.requests: list[bytes] = []
        self.got_request = asyncio.Event()
        self.client_closed = asyncio.Event()
        self.closed_at: Optional[float] = None
        self._server: Optional[asyncio.base_events.Server] = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self.serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self._note_closed()
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def _note_closed(self) -> None:
        if not self.client_closed.is_set():
            self.closed_at = time.monotonic()
            self.client_closed.set()

    async def until_client_closes(self, reader: asyncio.StreamReader) -> None:
        """Read until the client closes (FIN or RST), then note when."""
        try:
            for _ in range(100_000):  # bounded: each read returns data or the end
                if not await reader.read(65536):
                    break
        except ConnectionError:
            pass
        self._note_closed()

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for writer in list(self._writers):
            writer.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=STEP)
        await self._server.wait_closed()


class H1Server(_Server):
    """HTTP/1.1 by hand: read one request, then run the test's handler."""

    def __init__(self, handler: H1Handler) -> None:
        super().__init__()
        self.handler = handler

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length)
        self.requests.append(head + body)
        self.got_request.set()
        await self.handler(reader, writer)
        await self.until_client_closes(reader)


def h1_reply(status_line: bytes, headers: list[bytes], parts: list[bytes], *, delay: float = 0.0,
             then: str = "wait") -> Callable[[H1Server], H1Handler]:
    """A handler that writes the head, then each part (flushed), then waits, closes or hangs."""

    def make(server: H1Server) -> H1Handler:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(status_line + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n")
            await writer.drain()
            for part in parts:
                if delay:
                    await asyncio.sleep(delay)
                writer.write(part)
                await writer.drain()
            if then == "close":
                writer.close()

        return handle

    return make


def chunked(*pieces: bytes, terminate: bool = True) -> list[bytes]:
    """Each piece as one chunk of the chunked encoding, and the last chunk."""
    out = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces]
    return out + ([b"0\r\n\r\n"] if terminate else [])


class H2Server(_Server):
    """h2c with prior knowledge, one response per request, scripted by ``mode``.

    Modes: ``json`` (a whole reply), ``stream`` (several DATA frames), ``big`` (more
    than the flow-control window, so the client must acknowledge), ``hang`` (headers,
    then nothing), ``silent`` (nothing at all), ``reset`` (one frame, then
    RST_STREAM), ``reset-at-once`` (the headers, one frame and RST_STREAM(NO_ERROR) in
    one write).
    """

    BODY = b'{"ok":true,"text":"caf\xc3\xa9"}'
    PARTS = [b"data: one\n\n", b"data: tw", b"o\n\n", b"data: \xe2\x82", b"\xac\n\n"]
    BIG = bytes(range(256)) * 1024  # 256 KiB, four times the default window

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.request_headers: dict[str, str] = {}
        self.request_body = b""
        self.reset_codes: list[int] = []
        self._window_opened = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import h2.config
        import h2.connection
        import h2.events

        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        for _ in range(100_000):  # bounded: each read returns data or the end
            data = await reader.read(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    self.request_headers = {str(k): str(v) for k, v in event.headers}
                elif isinstance(event, h2.events.DataReceived):
                    self.request_body += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    self.got_request.set()
                    self._spawn(self._respond(conn, writer, event.stream_id))
                elif isinstance(event, h2.events.StreamReset):
                    self.reset_codes.append(int(event.error_code))
                elif isinstance(event, h2.events.WindowUpdated):
                    self._window_opened.set()
            writer.write(conn.data_to_send())
            await writer.drain()
        self._note_closed()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _respond(self, conn: Any, writer: asyncio.StreamWriter, stream_id: int) -> None:
        import h2.errors

        def flush() -> None:
            writer.write(conn.data_to_send())

        if self.mode == "silent":
            return
        if self.mode == "json":
            conn.send_headers(stream_id, [(":status", "200"), ("content-type", "application/json"),
                                          ("content-length", str(len(self.BODY)))])
            conn.send_data(stream_id, self.BODY, end_stream=True)
            flush()
            return
        conn.send_headers(stream_id, [(":status", "200"), ("content-type", "text/event-stream")])
        if self.mode == "reset-at-once":
            # Headers, a frame and the reset in one write, as a small cut reply arrives.
            conn.send_data(stream_id, self.PARTS[0])
            conn.reset_stream(stream_id, h2.errors.ErrorCodes.NO_ERROR)
            flush()
            return
        flush()
        if self.mode == "hang":
            return
        if self.mode == "reset":
            conn.send_data(stream_id, self.PARTS[0])
            flush()
            await asyncio.sleep(0.05)
            conn.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
            flush()
            return
        if self.mode == "stream":
            for part in self.PARTS:
                await asyncio.sleep(0.01)
                conn.send_data(stream_id, part)
                flush()
            conn.end_stream(stream_id)
            flush()
            return
        assert self.mode == "big"
        view = memoryview(self.BIG)
        for _ in range(100_000):  # bounded: each round sends or waits for a window update
            if not view:
                break
            window = min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size)
            if window <= 0:
                self._window_opened.clear()
                await asyncio.wait_for(self._window_opened.wait(), STEP)
                continue
            piece, view = view[:window], view[window:]
            conn.send_data(stream_id, bytes(piece), end_stream=not view)
            flush()
            await writer.drain()


def abort_from_thread(controller: AbortController, reason: BaseException, delay: float) -> threading.Thread:
    """Abort from another thread after ``delay`` seconds, as a real caller might."""

    def run() -> None:
        time.sleep(delay)
        controller.abort(reason)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


class TransportTestCase(StallWatched, unittest.IsolatedAsyncioTestCase):
    """Starts a server per test and always stops it."""

    async def h1(self, make: Callable[[H1Server], H1Handler]) -> H1Server:
        server = H1Server(lambda r, w: asyncio.sleep(0))
        server.handler = make(server)
        await server.start()
        self.addAsyncCleanup(server.stop)
        return server

    async def h2(self, mode: str) -> H2Server:
        server = H2Server(mode)
        await server.start()
        self.addAsyncCleanup(server.stop)
        return server

    async def collect(self, response: Response) -> list[bytes]:
        chunks = []
        async for chunk in response:
            chunks.append(chunk)
        return chunks

    async def assert_client_closed(self, server: _Server, since: float) -> None:
        await asyncio.wait_for(server.client_closed.wait(), STEP)
        assert server.closed_at is not None
        late = await self.unstalled_async(since, server.closed_at)
        self.assertLess(late, CLOSE_BOUND, "the server saw the close too late")


# --- HTTP/1.1 ---------------------------------------------------------------------------------------------


class H1ReplyTest(TransportTestCase):
    """Whole replies and streams over HTTP/1.1."""

    async def test_json_reply(self) -> None:
        """A Content-Length reply comes back whole, with status, lower-case headers and version."""
        body = b'{"ok":true}'
        server = await self.h1(h1_reply(b"HTTP/1.1 201 Created",
                                        [b"Content-Type: application/json", b"Content-Length: 11",
                                         b"X-Request-ID: abc"], [body]))
        response = await request(f"{server.url}/v1/chat?x=y", "POST", headers={"authorization": "Bearer t"},
                                 body=b'{"q":1}')
        self.assertEqual(response.status, 201)
        self.assertEqual(response.http_version, "HTTP/1.1")
        self.assertEqual(response.headers["content-type"], "application/json")
        self.assertEqual(response.headers["x-request-id"], "abc")
        self.assertEqual(await response.read(), body)
        head = server.requests[0]
        self.assertTrue(head.startswith(b"POST /v1/chat?x=y HTTP/1.1\r\n"))
        self.assertIn(f"Host: 127.0.0.1:{server.port}\r\n".encode(), head)
        self.assertIn(b"Content-Length: 7\r\n", head)
        self.assertIn(b"authorization: Bearer t\r\n", head)
        self.assertTrue(head.endswith(b'\r\n\r\n{"q":1}'))
        await self.assert_client_closed(server, time.monotonic())

    async def test_chunked_stream_chunk_by_chunk(self) -> None:
        """Each chunk of a chunked body is handed out as it arrives, decoded."""
        pieces = [b"data: one\n\n", b"data: \xe2\x82", b"\xac\n\n"]
        server = await self.h1(h1_reply(b"HTTP/1.1 200 OK",
                                        [b"Content-Type: text/event-stream", b"Transfer-Encoding: chunked"],
                                        chunked(*pieces), delay=0.02))
        response = await request(server.url + "/s", "GET", headers={})
        self.assertEqual(await self.collect(response), pieces)
        await self.assert_client_closed(server, time.monotonic())

    async def test_body_framings(self) -> None:
        """Content-Length, chunked with extensions and trailers, until-close, and no body all read whole."""
        cases: list[tuple[str, list[bytes], list[bytes], str, bytes]] = [
            ("length", [b"Content-Length: 5"], [b"he", b"llo"], "wait", b"hello"),
            ("chunked", [b"Transfer-Encoding: chunked"],
             [b"3;ext=1\r\nabc\r\n", b"2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n"], "wait", b"abcde"),
            ("until close", [], [b"ab", b"cd"], "close", b"abcd"),
            ("empty length", [b"Content-Length: 0"], [], "wait", b""),
        ]
        for name, headers, parts, then, expected in cases:
            with self.subTest(name):
                server = await self.h1(h1_reply(b"HTTP/1.1 200 OK", headers, parts, delay=0.01, then=then))
                response = await request(server.url, "GET", headers={})
                self.assertEqual(await response.read(), expected)

    async def test_chunked_whole_split_and_broken(self) -> None:
        """Chunks read the same whole in one read, split anywhere across reads, or many in one read;
        a chunk whose data runs past its size, and a size that is not hex, are named."""
        body = b"1a;name=v\r\n" + b"a" * 26 + b"\r\n" + b"3\r\nbcd\r\n0\r\n\r\n"
        for name, parts in [
            ("in one read", [body]),
            ("split inside the size, the data and the CRLF", [body[:1], body[1:13], body[13:39], body[39:41],
                                                               body[41:]]),
        ]:
            with self.subTest(name):
                server = await self.h1(h1_reply(b"HTTP/1.1 200 OK", [b"Transfer-Encoding: chunked"], parts,
                                                delay=0.01))
                response = await request(server.url, "GET", headers={})
                self.assertEqual(await response.read(), b"a" * 26 + b"bcd")
        for name, part, error in [
            ("data past its size", b"3\r\nabcd\r\n0\r\n\r\n", "chunk data longer than its size"),
            ("a size that is not hex", b"zz\r\nab\r\n", "bad chunk size"),
        ]:
            with self.subTest(name):
                server = await self.h1(h1_reply(b"HTTP/1.1 200 OK", [b"Transfer-Encoding: chunked"], [part]))
                response = await request(server.url, "GET", headers={})
                with self.assertRaisesRegex(TransportError, error):
                    await response.read()

    async def test_no_body_statuses(self) -> None:
        """A 204 and a HEAD response have no body and close at once."""
        for name, method, status in [("204", "GET", b"HTTP/1.1 204 No Content"),
                                     ("HEAD", "HEAD", b"HTTP/1.1 200 OK")]:
            with self.subTest(name):
                server = await self.h1(h1_reply(status, [b"Content-Length: 10"], []))
                response = await request(server.url, method, headers={})
                self.assertEqual(await response.read(), b"")
                await self.assert_client_closed(server, time.monotonic())

    async def test_interim_response_skipped(self) -> None:
        """A 100 Continue before the real response is skipped."""
        server = await self.h1(h1_reply(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
                                        [b"Content-Length: 2"], [b"ok"]))
        response = await request(server.url, "POST", headers={}, body=b"x")
        self.assertEqual((response.status, await response.read()), (200, b"ok"))

    async def test_error_status_is_a_response(self) -> None:
        """A 429 is a response to read, not a transport error."""
        server = await self.h1(h1_reply(b"HTTP/1.1 429 Too Many Requests",
                                        [b"Retry-After: 3", b"Content-Length: 2"], [b"{}"]))
        response = await request(server.url, "POST", headers={}, body=b"{}")
        self.assertEqual((response.status, response.headers["retry-after"]), (429, "3"))
        self.assertEqual(await response.read(), b"{}")

    async def test_aclose_early_closes_the_connection(self) -> None:
        """aclose() before the body ends closes the connection, and iteration then fails."""
        server = await self.h1(h1_reply(b"HTTP/1.1 200 OK", [b"Transfer-Encoding: chunked"],
                                        chunked(b"one"), then="wait"))
        response = await request(server.url, "GET", headers={})
        self.assertEqual(await response.__anext__(), b"one")
        since = time.monotonic()
        await response.aclose()
        await self.assert_client_closed(server, since)
        with self.assertRaises(TransportError):
            await response.__anext__()


class H1FailureTest(TransportTestCase):
    """Cut connections, timeouts and bad input over HTTP/1.1."""

    async def test_cut_mid_body(self) -> None:
        """A server that closes mid-body raises TransportError, whatever the framing."""
        cases: list[tuple[str, list[bytes], list[bytes]]] = [
            ("chunked without terminator", [b"Transfer-Encoding: chunked"],
             chunked(b"data: one\n\n", terminate=False)),
            ("chunked inside a chunk", [b"Transfer-Encoding: chunked"], [b"a\r\nabc"]),
            ("short content-length", [b"Content-Length: 10"], [b"abc"]),
        ]
        for name, headers, parts in cases:
            with self.subTest(name):
                server = await self.h1(h1_reply(b"HTTP/1.1 200 OK", headers, parts, then="close"))
                response = await request(server.url, "GET", headers={})
                with self.assertRaisesRegex(TransportError, "closed the connection"):
                    await response.read()

    async def test_cut_before_headers(self) -> None:
        """A server that closes before answering raises TransportError from request()."""

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await self.h1(lambda s: handle)
        with self.assertRaisesRegex(TransportError, "before the response headers"):
            await request(server.url, "GET", headers={})

    async def test_timeout_names_itself(self) -> None:
        """A server that never answers fails after the timeout, with a message naming it."""
        server = await self.h1(lambda s: lambda r, w: asyncio.sleep(0))
        with self.assertRaisesRegex(TransportError, "timeout"):
            await request(server.url, "GET", headers={}, timeout=0.2)
        await self.assert_client_closed(server, time.monotonic())

    async def test_connection_refused(self) -> None:
        """A port nobody listens on raises TransportError."""
        server = await self.h1(lambda s: lambda r, w: asyncio.sleep(0))
        port = server.port
        await server.stop()
        with self.assertRaises(TransportError):
            await request(f"http://127.0.0.1:{port}/", "GET", headers={})

    async def test_bad_urls_and_headers(self) -> None:
        """Only http:// URLs and well-formed headers are accepted."""
        cases: list[tuple[str, dict[str, str]]] = [
            ("https://127.0.0.1/", {}),
            ("ftp://127.0.0.1/", {}),
            ("http:///nohost", {}),
            ("http://127.0.0.1/", {"bad name": "v"}),
            ("http://127.0.0.1/", {"x-ok": "line\r\nbreak"}),
        ]
        for url, headers in cases:
            with self.subTest(url=url, headers=headers), self.assertRaises(ValueError):
                await request(url, "GET", headers=headers)


class H1AbortTest(TransportTestCase):
    """An abort or a cancellation closes the HTTP/1.1 connection at once."""

    async def test_abort_before_headers(self) -> None:
        """Aborting while the server is silent raises the very reason and closes the connection."""
        server = await self.h1(lambda s: lambda r, w: asyncio.sleep(0))
        controller = AbortController()
        reason = RuntimeError("caller gave up")
        pending = asyncio.ensure_future(request(server.url, "POST", headers={}, body=b"{}",
                                                signal=controller.signal))
        await asyncio.wait_for(server.got_request.wait(), STEP)
        thread = abort_from_thread(controller, reason, 0.05)
        since = time.monotonic()
        with self.assertRaises(RuntimeError) as caught:
            await asyncio.wait_for(pending, STEP)
        self.assertIs(caught.exception, reason)
        self.assertLess(await self.unstalled_async(since), 0.05 + ABORT_BOUND)
        await self.assert_client_closed(server, since)
        thread.join(STEP)

    async def test_abort_mid_body(self) -> None:
        """Aborting while the body streams raises the very reason from the iteration."""
        server = await self.h1(h1_reply(b"HTTP/1.1 200 OK", [b"Transfer-Encoding: chunked"],
                                        chunked(b"data: one\n\n", terminate=False)))
        controller = AbortController()
        reason = TimeoutError("deadline")
        response = await request(server.url, "GET", headers={}, signal=controller.signal)
        self.assertEqual(await response.__anext__(), b"data: one\n\n")
        thread = abort_from_thread(controller, reason, 0.05)
        since = time.monotonic()
        with self.assertRaises(TimeoutError) as caught:
            await asyncio.wait_for(response.read(), STEP)
        self.assertIs(caught.exception, reason)
        self.assertLess(await self.unstalled_async(since), 0.05 + ABORT_BOUND)
        await self.assert_client_closed(server, since)
        thread.join(STEP)

    async def test_abort_between_reads(self) -> None:
        """An abort while nobody reads closes at once; the next read raises the reason."""
        server = await self.h1(h1_reply(b"HTTP/1.1 200 OK", [b"Transfer-Encoding: chunked"],
                                        chunked(b"a", b"b", terminate=False)))
        controller = AbortController()
        reason = ValueError("stop")
        response = await request(server.url, "GET", headers={}, signal=controller.signal)
        since = time.monotonic()
        controller.abort(reason)
        await self.assert_client_closed(server, since)
        with self.assertRaises(ValueError) as caught:
            await response.__anext__()
        self.assertIs(caught.exception, reason)

    async def test_already_aborted(self) -> None:
        """A signal that already fired raises its reason without connecting."""
        controller = AbortController()
        reason = RuntimeError("early")
        controller.abort(reason)
        with self.assertRaises(RuntimeError) as caught:
            await request("http://127.0.0.1:9/", "GET", headers={}, signal=controller.signal)
        self.assertIs(caught.exception, reason)

    async def test_abort_after_body_changes_nothing(self) -> None:
        """Once the body is read, an abort has nothing left to close and raises nothing."""
        server = await self.h1(h1_reply(b"HTTP/1.1 200 OK", [b"Content-Length: 2"], [b"ok"]))
        controller = AbortController()
        response = await request(server.url, "GET", headers={}, signal=controller.signal)
        self.assertEqual(await response.read(), b"ok")
        controller.abort(RuntimeError("late"))
        await asyncio.sleep(0.01)
        self.assertEqual(await response.read(), b"")

    async def test_cancel_waiting_for_headers(self) -> None:
        """Cancelling request() closes the connection and lets CancelledError through."""
        server = await self.h1(lambda s: lambda r, w: asyncio.sleep(0))
        pending = asyncio.ensure_future(request(server.url, "GET", headers={}))
        await asyncio.wait_for(server.got_request.wait(), STEP)
        since = time.monotonic()
        pending.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await pending
        await self.assert_client_closed(server, since)

    async def test_cancel_mid_body(self) -> None:
        """Cancelling a read of the body closes the connection and lets CancelledError through."""
        server = await self.h1(h1_reply(b"HTTP/1.1 200 OK", [b"Transfer-Encoding: chunked"],
                                        chunked(b"x", terminate=False)))
        response = await request(server.url, "GET", headers={})
        reading = asyncio.ensure_future(response.read())
        await asyncio.sleep(0.05)
        since = time.monotonic()
        reading.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await reading
        await self.assert_client_closed(server, since)


# --- h2c --------------------------------------------------------------------------------------------------


@unittest.skipUnless(HAVE_H2, NO_H2)
class H2Test(TransportTestCase):
    """Replies, streams, cuts, aborts and cancellation over h2c."""

    async def test_json_reply(self) -> None:
        """A whole reply comes back over h2c, and the request carries its pseudo-headers and body."""
        server = await self.h2("json")
        response = await request(f"{server.url}/v1/chat?x=y", "POST", http2=True,
                                 headers={"Authorization": "Bearer t", "Connection": "keep-alive"},
                                 body=b'{"q":1}')
        self.assertEqual((response.status, response.http_version), (200, "HTTP/2"))
        self.assertEqual(response.headers["content-type"], "application/json")
        self.assertEqual(await response.read(), H2Server.BODY)
        self.assertEqual(server.request_headers[":path"], "/v1/chat?x=y")
        self.assertEqual(server.request_headers[":method"], "POST")
        self.assertEqual(server.request_headers["authorization"], "Bearer t")
        self.assertNotIn("connection", server.request_headers)
        self.assertEqual(server.request_body, b'{"q":1}')
        await self.assert_client_closed(server, time.monotonic())

    async def test_stream_frame_by_frame(self) -> None:
        """Each DATA frame is handed out as it arrives."""
        server = await self.h2("stream")
        response = await request(server.url, "GET", http2=True, headers={})
        self.assertEqual(await self.collect(response), H2Server.PARTS)

    async def test_flow_control(self) -> None:
        """A body four times the default window arrives whole, so received data is acknowledged."""
        server = await self.h2("big")
        response = await request(server.url, "GET", http2=True, headers={}, timeout=STEP)
        self.assertEqual(await asyncio.wait_for(response.read(), STEP), H2Server.BIG)

    async def test_large_request_body(self) -> None:
        """A request body larger than the window is sent as the server opens it."""
        server = await self.h2("json")
        body = b"x" * 200_000
        response = await request(server.url, "POST", http2=True, headers={}, body=body, timeout=STEP)
        await response.read()
        self.assertEqual(server.request_body, body)

    async def test_stream_reset_mid_body(self) -> None:
        """A stream the server resets mid-body raises TransportError naming the reset."""
        server = await self.h2("reset")
        response = await request(server.url, "GET", http2=True, headers={})
        with self.assertRaisesRegex(TransportError, "reset the h2 stream"):
            await response.read()

    async def test_reset_with_the_headers_comes_after_the_data(self) -> None:
        """A reset that comes with the headers is raised only after the data before it, as on_error says."""
        server = await self.h2("reset-at-once")
        response = await request(server.url, "GET", http2=True, headers={})
        self.assertEqual(response.status, 200)
        self.assertEqual(await response.__anext__(), H2Server.PARTS[0])
        response.on_error = lambda error: LookupError(f"translated: {error}")
        with self.assertRaisesRegex(LookupError, r"translated: .*reset the h2 stream \(error code NO_ERROR"):
            await response.__anext__()

    async def test_abort_before_headers(self) -> None:
        """Aborting while the server is silent raises the very reason and closes the connection."""
        server = await self.h2("silent")
        controller = AbortController()
        reason = RuntimeError("caller gave up")
        pending = asyncio.ensure_future(request(server.url, "GET", http2=True, headers={},
                                                signal=controller.signal))
        await asyncio.wait_for(server.got_request.wait(), STEP)
        thread = abort_from_thread(controller, reason, 0.05)
        since = time.monotonic()
        with self.assertRaises(RuntimeError) as caught:
            await asyncio.wait_for(pending, STEP)
        self.assertIs(caught.exception, reason)
        self.assertLess(await self.unstalled_async(since), 0.05 + ABORT_BOUND)
        await self.assert_client_closed(server, since)
        thread.join(STEP)

    async def test_abort_mid_body_sends_cancel(self) -> None:
        """Aborting mid-body raises the very reason, resets the stream with CANCEL and closes."""
        server = await self.h2("hang")
        controller = AbortController()
        reason = TimeoutError("deadline")
        response = await request(server.url, "GET", http2=True, headers={}, signal=controller.signal)
        thread = abort_from_thread(controller, reason, 0.05)
        since = time.monotonic()
        with self.assertRaises(TimeoutError) as caught:
            await asyncio.wait_for(response.read(), STEP)
        self.assertIs(caught.exception, reason)
        self.assertLess(await self.unstalled_async(since), 0.05 + ABORT_BOUND)
        await self.assert_client_closed(server, since)
        self.assertEqual(server.reset_codes, [0x8])  # CANCEL
        thread.join(STEP)

    async def test_aclose_sends_cancel(self) -> None:
        """aclose() resets the open stream with CANCEL and closes the connection."""
        server = await self.h2("hang")
        response = await request(server.url, "GET", http2=True, headers={})
        since = time.monotonic()
        await response.aclose()
        await self.assert_client_closed(server, since)
        self.assertEqual(server.reset_codes, [0x8])

    async def test_cancel_mid_body(self) -> None:
        """Cancelling a read of the body closes the connection and lets CancelledError through."""
        server = await self.h2("hang")
        response = await request(server.url, "GET", http2=True, headers={})
        reading = asyncio.ensure_future(response.read())
        await asyncio.sleep(0.05)
        since = time.monotonic()
        reading.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await reading
        await self.assert_client_closed(server, since)


# --- against the project's fake provider --------------------------------------------------------------------


def _find_provider() -> bool:
    try:
        return importlib.util.find_spec("conformance.provider._server") is not None
    except ImportError:
        return False


@unittest.skipUnless(_find_provider(), "the fake provider (conformance.provider) is not there yet")
class FakeProviderTest(unittest.IsolatedAsyncioTestCase):
    """The transport talks to the fake provider over both protocols."""

    async def _provider(self, http2: bool) -> Any:
        from conformance.provider import start_fake_provider

        provider = start_fake_provider(http2=http2)
        self.addAsyncCleanup(provider.aclose)
        return provider

    def _protocols(self) -> list[tuple[str, bool]]:
        return [("HTTP/1.1", False)] + ([("HTTP/2", True)] if HAVE_H2 else [])

    async def test_json_and_stream(self) -> None:
        """A JSON reply and a stream come back whole, with the provider's status and version."""
        from conformance.provider import JsonReply, StreamReply

        for version, http2 in self._protocols():
            with self.subTest(version):
                provider = await self._provider(http2)
                provider.reply(JsonReply({"ok": True}, status=201))
                response = await request(provider.url + "/v1/x?y=1", "POST", headers={"x-key": "k"},
                                         body=b"{}", http2=http2)
                self.assertEqual((response.status, response.http_version), (201, version))
                self.assertEqual(await response.read(), b'{"ok":true}')
                seen = await provider.next_request_async()
                self.assertEqual((seen.method, seen.path, seen.headers["x-key"]), ("POST", "/v1/x", "k"))
                chunks = [b"data: a\n\n", b"data: \xe2\x82", b"\xac\n\n"]
                provider.reply(StreamReply(chunks))
                response = await request(provider.url, "POST", headers={}, body=b"{}", http2=http2)
                self.assertEqual(b"".join(await self._collect(response)), b"".join(chunks))

    async def _collect(self, response: Response) -> list[bytes]:
        return [chunk async for chunk in response]

    async def test_abort_mid_body(self) -> None:
        """An abort mid-stream raises the very reason, and the provider sees the close within 1 s."""
        from conformance.provider import StreamReply

        for version, http2 in self._protocols():
            with self.subTest(version):
                provider = await self._provider(http2)
                provider.reply(StreamReply([b"data: a\n\n"], hang=True))
                controller = AbortController()
                reason = RuntimeError("abort")
                response = await request(provider.url, "POST", headers={}, body=b"{}", http2=http2,
                                         signal=controller.signal)
                self.assertEqual(await response.__anext__(), b"data: a\n\n")
                thread = abort_from_thread(controller, reason, 0.05)
                with self.assertRaises(RuntimeError) as caught:
                    await asyncio.wait_for(response.read(), STEP)
                self.assertIs(caught.exception, reason)
                closed = await provider.latest_closed_async(CLOSE_BOUND)
                self.assertIsNotNone(closed, "the provider did not see the connection close")
                thread.join(STEP)


if __name__ == "__main__":
    unittest.main()
