"""Streams held before a chunk, cut cleanly or reset, and wait_flushed, over HTTP/1.1 and h2c."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import socket
import struct
import threading
import time
import unittest
from typing import Any, Dict, List, Optional, Tuple

from conformance.errors import ProviderInputError
from conformance.provider import (
    FakeProvider,
    JsonReply,
    RecordedRequest,
    StreamReply,
    held,
    start_fake_provider,
)
from conformance.provider.events import ResponseLog

from .test_provider_support import H2Client, H2Response, StallWatched, http1_request

HAVE_H2 = importlib.util.find_spec("h2") is not None
HAVE_HTTPX = importlib.util.find_spec("httpx") is not None
CHUNKS = [b"data: first\n\n", b"data: second\n\n", b"data: third\n\n"]
PAUSE = 0.4
#: asyncio may fire a timer a clock tick early, and reads add their own jitter.
SLACK = 0.03
# A pause is measured from the provider's own clock (the log's write times, the request's
# arrival: the same time.monotonic() in this process) to when the client read what came
# after it, never between two of the client's reads: a client read late shortens the gap
# after it, while nothing the client does can make data come before it was written.
LAST_CHUNK = b"\r\n0\r\n\r\n"

Reads = List[Tuple[float, bytes]]


def read_timed(sock: socket.socket, until: bytes, limit: float = 5.0) -> Tuple[Reads, str]:
    """Read until the data ends with ``until``, EOF or a reset, noting when each read came.

    Returns the reads and how reading stopped: ``done``, ``eof``, ``reset`` or ``timeout``.
    """
    reads: Reads = []
    data = b""
    deadline = time.monotonic() + limit
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return reads, "timeout"
        sock.settimeout(remaining)
        try:
            got = sock.recv(65536)
        except socket.timeout:
            return reads, "timeout"
        except ConnectionResetError:
            return reads, "reset"
        if not got:
            return reads, "eof"
        reads.append((time.monotonic(), got))
        data += got
        if until and data.endswith(until):
            return reads, "done"


def arrival(reads: Reads, marker: bytes) -> float:
    """When the read that completed ``marker`` came."""
    data = b""
    for at, got in reads:
        data += got
        if marker in data:
            return at
    raise AssertionError(f"{marker!r} never came; got {data!r}")


def joined(reads: Reads) -> bytes:
    return b"".join(got for _, got in reads)


def response_of(request: RecordedRequest) -> ResponseLog:
    log = request.response
    if log is None:
        raise AssertionError(f"{request} has no response log")
    return log


def wait_tasks_done(provider: FakeProvider, limit: float = 2.0) -> bool:
    """Whether the provider's tasks (a held stream is one) all end within ``limit``."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not provider._hub.tasks:
            return True
        time.sleep(0.01)
    return False


def by_path(replies: Dict[str, Any]) -> Any:
    def handler(request: RecordedRequest) -> Any:
        return replies[request.path]

    return handler


class TestReplyValues(unittest.TestCase):
    def test_bad_values_name_what_was_wrong(self) -> None:
        """A bad end, pause or hang-with-end raises ProviderInputError saying what to change."""
        cases: List[Tuple[Dict[str, Any], str]] = [
            ({"end": "rst"}, "did you mean 'reset'"),
            ({"end": "closed"}, "did you mean 'close'"),
            ({"end": 1}, "end must be one of 'complete', 'close', 'reset'"),
            ({"hang": True, "end": "close"}, "a stream that hangs never ends"),
            ({"hang": True, "end": "reset"}, "drop hang"),
            ({"pauses": {4: 1}}, "there are 3 chunks"),
            ({"pauses": {-1: 1}}, "0 to 2"),
            ({"pauses": {True: 1}}, "by its index"),
            ({"pauses": {"1": 1}}, "by its index"),
            ({"pauses": {3: 1}, "hang": True}, "nothing to hold back"),
            ({"pauses": {1: -1}}, "0 to 60 seconds, got -1"),
            ({"pauses": {1: 61}}, "0 to 60 seconds, got 61"),
            ({"pauses": {1: math.nan}}, "0 to 60 seconds, got nan"),
            ({"pauses": {1: "1"}}, "0 to 60 seconds, got '1'"),
            ({"pauses": [(1, 1.0)]}, "must map a chunk's index to seconds"),
        ]
        for kwargs, expected in cases:
            with self.subTest(**{k: repr(v) for k, v in kwargs.items()}):
                with self.assertRaisesRegex(ProviderInputError, expected.replace("(", r"\(")):
                    StreamReply(CHUNKS, **kwargs)

    def test_bad_cut_of_a_whole_reply_names_what_was_wrong(self) -> None:
        """A JsonReply cut without a place to cut, past its body, or said to complete, is refused."""
        cases: List[Tuple[Dict[str, Any], str]] = [
            ({"end": "closed"}, "did you mean 'close'"),
            ({"end": "close"}, "needs cut_at"),
            ({"end": "reset", "cut_at": 10}, r"0 to 9 \(the body has 10\), got 10"),
            ({"end": "close", "cut_at": -1}, "got -1"),
            ({"end": "close", "cut_at": True}, "got True"),
            ({"cut_at": 3}, "does not complete"),
        ]
        for kwargs, expected in cases:
            with self.subTest(**{k: repr(v) for k, v in kwargs.items()}):
                with self.assertRaisesRegex(ProviderInputError, expected):
                    JsonReply(b"0123456789", **kwargs)
        reply = JsonReply(b"0123456789", end="close", cut_at=4)
        self.assertEqual((reply.sent_body(reply.encoded()), reply.end), (b"0123", "close"))
        self.assertEqual(JsonReply(b"ab").sent_body(b"ab"), b"ab")

    def test_good_values_are_kept(self) -> None:
        """Every end, and a pause at each chunk and after the last one, are accepted."""
        for end in ("complete", "close", "reset"):
            with self.subTest(end=end):
                reply = StreamReply(CHUNKS, end=end, pauses={0: 0.5, 3: 1})
                self.assertEqual((reply.end, dict(reply.pauses)), (end, {0: 0.5, 3: 1}))
        self.assertEqual(StreamReply(CHUNKS).end, "complete")

    def test_transport_pauses_skip_empty_chunks(self) -> None:
        """A pause before an empty chunk holds the next written one; one at the end holds the end."""
        reply = StreamReply([b"a", b"", b"b", b""], pauses={0: 0, 1: 0.2, 2: 0.3, 4: 0.5})
        self.assertEqual(reply.transport_pauses(), {1: 0.5, 2: 0.5})
        self.assertEqual(StreamReply(CHUNKS).transport_pauses(), {})

    def test_wait_flushed_bad_values(self) -> None:
        """wait_flushed rejects a count or timeout that is not a number it can wait for."""
        request = RecordedRequest("POST", "/", "", {}, b"", "HTTP/1.1")
        for count, timeout, expected in [
            (-1, 1.0, "count=-1"),
            ("1", 1.0, "count='1'"),
            (True, 1.0, "count=True"),
            (1.5, 1.0, "count=1.5"),
            (1, -1.0, "timeout=-1.0"),
            (1, math.nan, "timeout=nan"),
            (1, "1", "timeout='1'"),
            (1, math.inf, "timeout=inf"),
        ]:
            with self.subTest(count=count, timeout=timeout):
                with self.assertRaisesRegex(ProviderInputError, expected):
                    request.wait_flushed(count, timeout)  # type: ignore[arg-type]
                with self.assertRaisesRegex(ProviderInputError, expected):
                    asyncio.run(request.wait_flushed_async(count, timeout))  # type: ignore[arg-type]


class Http1TestCase(StallWatched):
    def setUp(self) -> None:
        self.provider = start_fake_provider()
        self.addCleanup(self.provider.close)

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.provider.port), timeout=5)
        self.addCleanup(sock.close)
        return sock

    def start(self, reply: Any, path: str = "/v1/stream") -> Tuple[socket.socket, RecordedRequest]:
        if reply is not None:
            self.provider.reply(reply)
        sock = self.connect()
        sock.sendall(http1_request("POST", path, b"{}"))
        return sock, self.provider.next_request(timeout=5)

    def stream(self, reply: Any, until: bytes = LAST_CHUNK) -> Tuple[RecordedRequest, Reads, str]:
        sock, request = self.start(reply)
        reads, how = read_timed(sock, until)
        return request, reads, how


class TestHttp1Pauses(Http1TestCase):
    def test_pause_holds_the_stream_before_its_chunk(self) -> None:
        """The chunks before a pause arrive, then nothing for the pause, then the rest and the end."""
        request, reads, how = self.stream(StreamReply(CHUNKS, pauses={1: PAUSE}))
        self.assertEqual(how, "done")
        log = response_of(request)
        self.assertGreaterEqual(arrival(reads, b"second") - log.times[0], PAUSE - SLACK)
        self.assertLess(self.unstalled(arrival(reads, b"second"), arrival(reads, b"third")), PAUSE / 2)
        self.assertEqual((log.end, log.incomplete, log.written), ("complete", False, 3))
        # The log keeps each chunk's real write time, pause included.
        self.assertGreaterEqual(log.times[1] - log.times[0], PAUSE - SLACK)
        self.assertEqual([event.chunk for event in request.events], [0, 1, 2])

    def test_pause_before_the_first_chunk_sends_the_head_first(self) -> None:
        """With a pause at chunk 0 the status and headers come at once, the first chunk after it."""
        request, reads, how = self.stream(StreamReply(CHUNKS, pauses={0: PAUSE}))
        self.assertEqual(how, "done")
        self.assertLess(self.unstalled(request.received_at, arrival(reads, b"200 OK")), PAUSE)
        self.assertGreaterEqual(arrival(reads, b"first") - request.received_at, PAUSE - SLACK)

    def test_pause_after_the_last_chunk_holds_the_end(self) -> None:
        """A pause at len(chunks) sends every chunk, then waits before the terminating chunk."""
        request, reads, how = self.stream(StreamReply(CHUNKS, pauses={3: PAUSE}))
        self.assertEqual(how, "done")
        log = response_of(request)
        self.assertGreaterEqual(arrival(reads, LAST_CHUNK) - log.times[2], PAUSE - SLACK)
        self.assertEqual(log.end, "complete")

    def test_pause_holds_only_its_own_connection(self) -> None:
        """While one stream is held, another connection is answered at once."""
        self.provider.reply(
            by_path({"/held": StreamReply(CHUNKS, pauses={1: 5}), "/json": JsonReply({"ok": 1})})
        )
        held, request = self.start(None, "/held")
        read_timed(held, b"first\n\n\r\n")
        sock, _ = self.start(None, "/json")
        began = time.monotonic()
        reads, how = read_timed(sock, b'{"ok":1}')
        self.assertEqual(how, "done")
        self.assertLess(self.unstalled(began), 1.0)
        self.assertEqual(response_of(request).written, 1)

    def test_pause_ends_when_the_client_leaves(self) -> None:
        """A client that closes during a 30 s pause ends it: nothing more is written."""
        sock, request = self.start(StreamReply(CHUNKS, pauses={1: 30}))
        read_timed(sock, b"first\n\n\r\n")
        sock.close()
        self.assertTrue(request.wait_closed(2))
        self.assertTrue(wait_tasks_done(self.provider), "the held stream's task did not end")
        log = response_of(request)
        self.assertEqual((log.written, log.end, log.incomplete), (1, None, True))
        self.assertEqual(len(request.events), 1)

    def test_pause_ends_when_the_client_half_closes(self) -> None:
        """A client's EOF during a pause closes the connection at once, without the rest."""
        sock, request = self.start(StreamReply(CHUNKS, pauses={1: 30}))
        read_timed(sock, b"first\n\n\r\n")
        sock.shutdown(socket.SHUT_WR)
        began = time.monotonic()
        reads, how = read_timed(sock, b"", limit=3)
        self.assertEqual(how, "eof")
        self.assertLess(self.unstalled(began), 2.0)
        self.assertNotIn(b"second", joined(reads))
        self.assertEqual(response_of(request).written, 1)

    def test_no_pause_for_a_client_that_already_left(self) -> None:
        """A client whose EOF came while its reply was being made is not held for a pause."""

        async def handler(request: RecordedRequest) -> StreamReply:
            await asyncio.sleep(0.2)  # the EOF comes meanwhile
            return StreamReply(CHUNKS, pauses={0: 30})

        self.provider.reply(handler)
        sock = self.connect()
        sock.sendall(http1_request("POST", "/v1/stream", b"{}"))
        sock.shutdown(socket.SHUT_WR)
        began = time.monotonic()
        reads, how = read_timed(sock, b"", limit=3)
        self.assertEqual(how, "eof")
        self.assertLess(self.unstalled(began), 2.0)
        self.assertNotIn(b"first", joined(reads))
        self.assertTrue(wait_tasks_done(self.provider), "a task still holds the stream")

    def test_pause_ends_when_the_provider_closes(self) -> None:
        """Closing the provider ends a pause, and a wait_flushed for the held chunk says False."""
        sock, request = self.start(StreamReply(CHUNKS, pauses={1: 30}))
        read_timed(sock, b"first\n\n\r\n")
        results: List[bool] = []
        waiter = threading.Thread(target=lambda: results.append(request.wait_flushed(2, timeout=10)))
        waiter.start()
        began = time.monotonic()
        self.provider.close()
        waiter.join(5)
        self.assertEqual(results, [False])
        self.assertLess(self.unstalled(began), 2.0)
        _, how = read_timed(sock, b"", limit=3)
        self.assertIn(how, ("eof", "reset"))


class TestHttp1Held(Http1TestCase):
    def test_held_sends_nothing_then_the_whole_reply(self) -> None:
        """A held reply's status line comes only after the hold, then the reply whole."""
        self.provider.reply(lambda request: held(JsonReply({"ok": 1}), PAUSE))
        sock = self.connect()
        sock.sendall(http1_request("POST", "/v1/chat", b"{}"))
        request = self.provider.next_request(timeout=5)
        reads, how = read_timed(sock, b'{"ok":1}')
        self.assertEqual(how, "done")
        self.assertGreaterEqual(arrival(reads, b"200 OK") - request.received_at, PAUSE - SLACK)

    def test_held_ends_when_the_connection_is_lost(self) -> None:
        """A client that resets its connection during a 30 s hold ends it: nothing is written,
        no task is left. (Its EOF alone is a half-close: the reply is still owed.)"""
        self.provider.reply(lambda request: held(JsonReply({"ok": 1}), 30))
        sock = self.connect()
        sock.sendall(http1_request("POST", "/v1/chat", b"{}"))
        request = self.provider.next_request(timeout=5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        self.assertTrue(request.wait_closed(2))
        self.assertTrue(wait_tasks_done(self.provider), "the held reply's task did not end")
        self.assertIsNone(request.response)

    def test_held_bad_values_name_what_was_wrong(self) -> None:
        """A hold out of range, or of something that is not a reply, is refused with what to give."""
        for reply, seconds, words in (
            (JsonReply({}), -1, "0 to 60"),
            (JsonReply({}), 61, "0 to 60"),
            (JsonReply({}), True, "0 to 60"),
            ({"ok": 1}, 1, "takes a JsonReply"),
        ):
            with self.subTest(reply=reply, seconds=seconds):
                with self.assertRaisesRegex(ProviderInputError, words):
                    held(reply, seconds)  # type: ignore[arg-type]


class TestHttp1Endings(Http1TestCase):
    def test_clean_close_ends_without_the_last_chunk(self) -> None:
        """end='close' sends every chunk, then EOF with no terminating zero-length chunk."""
        request, reads, how = self.stream(StreamReply(CHUNKS, end="close"))
        self.assertEqual(how, "eof")
        body = joined(reads)
        self.assertIn(b"data: third\n\n\r\n", body)
        self.assertFalse(body.endswith(LAST_CHUNK), body[-20:])
        log = response_of(request)
        self.assertEqual((log.end, log.incomplete, log.written), ("close", True, 3))
        self.assertEqual([event.chunk for event in request.events], [0, 1, 2])

    def test_reset_resets_the_connection(self) -> None:
        """end='reset' sends every chunk, then a TCP reset (ConnectionResetError on the client)."""
        request, reads, how = self.stream(StreamReply(CHUNKS, end="reset"))
        self.assertEqual(how, "reset")
        self.assertNotIn(LAST_CHUNK, joined(reads))
        log = response_of(request)
        self.assertEqual((log.end, log.incomplete, log.written), ("reset", True, 3))
        self.assertEqual(len(request.events), 3)

    def test_reset_after_a_pause(self) -> None:
        """A pause after the last chunk, then a reset: the chunks come, the reset comes after the pause."""
        request, reads, how = self.stream(StreamReply(CHUNKS, end="reset", pauses={3: PAUSE}))
        self.assertEqual(how, "reset")
        self.assertIn(b"third", joined(reads))
        log = response_of(request)
        self.assertEqual(log.end, "reset")
        self.assertGreaterEqual(time.monotonic() - log.times[2], PAUSE - SLACK)

    def test_whole_reply_cut_short_of_its_content_length(self) -> None:
        """A JsonReply cut with end='close' promises the whole body, sends part of it, then EOF."""
        body = b'{"choices":[{"message":{"content":"Hello"}}]}'
        request, reads, how = self.stream(JsonReply(body, end="close", cut_at=20), until=b"\0")
        self.assertEqual(how, "eof")
        data = joined(reads)
        head, _, sent = data.partition(b"\r\n\r\n")
        self.assertIn(b"content-length: %d" % len(body), head)
        self.assertEqual(sent, body[:20])
        log = response_of(request)
        self.assertEqual((log.end, log.incomplete, log.written, log.chunks), ("close", True, 1, [body[:20]]))

    def test_whole_reply_cut_by_a_reset(self) -> None:
        """A JsonReply cut with end='reset' sends part of its body, then a TCP reset."""
        body = b'{"choices":[{"message":{"content":"Hello"}}]}'
        request, reads, how = self.stream(JsonReply(body, end="reset", cut_at=20), until=b"\0")
        self.assertEqual(how, "reset")
        self.assertEqual(response_of(request).end, "reset")

    def test_complete_keeps_the_connection(self) -> None:
        """The default end completes the response and the connection serves the next request."""
        sock, request = self.start(StreamReply(CHUNKS))
        self.assertEqual(read_timed(sock, LAST_CHUNK)[1], "done")
        sock.sendall(http1_request("POST", "/again", b"{}"))
        self.assertEqual(read_timed(sock, LAST_CHUNK)[1], "done")
        self.assertEqual(response_of(request).end, "complete")


class TestHttp1WaitFlushed(Http1TestCase):
    def test_true_once_the_chunk_is_out_false_while_held(self) -> None:
        """wait_flushed is True for the chunks before a pause, False for the held one until it goes."""
        sock, request = self.start(StreamReply(CHUNKS, pauses={2: PAUSE}))
        self.assertTrue(request.wait_flushed(2, timeout=5))
        self.assertFalse(request.wait_flushed(3, timeout=0.05))
        self.assertTrue(request.wait_flushed(3, timeout=5))
        returned = time.monotonic()
        log = response_of(request)
        self.assertGreaterEqual(log.times[2] - log.times[1], PAUSE - SLACK)
        late = self.unstalled(log.times[2], returned)
        self.assertLess(late, 0.25, "woken late: wait_flushed should not poll")
        self.assertTrue(request.wait_flushed(0, timeout=0))
        self.assertEqual(read_timed(sock, LAST_CHUNK)[1], "done")

    def test_waits_for_a_reply_not_yet_started(self) -> None:
        """A wait that starts before an async handler replies ends when the chunk goes out."""

        async def handler(request: RecordedRequest) -> StreamReply:
            await asyncio.sleep(0.2)
            return StreamReply(CHUNKS)

        sock, request = self.start(handler)
        self.assertIsNone(request.response)
        self.assertTrue(request.wait_flushed(3, timeout=5))
        self.assertEqual(read_timed(sock, LAST_CHUNK)[1], "done")

    def test_a_whole_reply_is_one_chunk(self) -> None:
        """For a JsonReply, count 1 is the body."""
        sock, request = self.start(JsonReply({"ok": 1}))
        self.assertTrue(request.wait_flushed(1, timeout=5))
        self.assertFalse(request.wait_flushed(2, timeout=5))

    def test_async_twin_waits_without_blocking_its_loop(self) -> None:
        """wait_flushed_async is True once the chunks are out, False while held, on the caller's loop."""
        sock, request = self.start(StreamReply(CHUNKS, pauses={2: PAUSE}))

        async def check() -> List[Any]:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.ensure_future(tick())
            try:
                results = [
                    await request.wait_flushed_async(2, timeout=5),
                    await request.wait_flushed_async(3, timeout=0.05),
                    await request.wait_flushed_async(3, timeout=5),
                ]
            finally:
                ticker.cancel()
            return [results, ticks]

        results, ticks = asyncio.run(check())
        self.assertEqual(results, [True, False, True])
        self.assertGreater(ticks, 5, "the caller's loop did not run while it waited")
        self.assertEqual(read_timed(sock, LAST_CHUNK)[1], "done")

    def test_a_handler_can_await_a_chunk_of_another_request(self) -> None:
        """An async reply handler on the provider's loop awaits another request's held chunk."""
        held: List[RecordedRequest] = []

        async def handler(request: RecordedRequest) -> Any:
            if request.path == "/held":
                held.append(request)
                return StreamReply(CHUNKS, pauses={1: 30})
            flushed = await held[0].wait_flushed_async(1, timeout=5)
            return JsonReply({"flushed": flushed})

        self.provider.reply(handler)
        stream, _ = self.start(None, "/held")
        read_timed(stream, b"first\n\n\r\n")
        sock, _ = self.start(None, "/ask")
        reads, how = read_timed(sock, b'{"flushed":true}')
        self.assertEqual(how, "done", joined(reads))

    def test_false_at_once_when_it_cannot_happen(self) -> None:
        """More chunks than the reply has, or a client gone, make wait_flushed False without waiting."""
        _, request = self.start(StreamReply(CHUNKS))
        began = time.monotonic()
        self.assertFalse(request.wait_flushed(4, timeout=5))
        sock, held = self.start(StreamReply(CHUNKS, pauses={1: 30}))
        read_timed(sock, b"first\n\n\r\n")
        sock.close()
        self.assertFalse(held.wait_flushed(2, timeout=5))
        self.assertLess(self.unstalled(began), 2.0)


@unittest.skipUnless(HAVE_H2, "h2 is not installed")
class TestH2(StallWatched):
    def setUp(self) -> None:
        self.provider = start_fake_provider(http2=True)
        self.addCleanup(self.provider.close)

    def client(self) -> H2Client:
        client = H2Client(self.provider.port, timeout=5)
        self.addCleanup(client.close)
        return client

    def read(self, client: H2Client, sid: int, count: Optional[int] = None) -> Tuple[H2Response, List[float]]:
        """Pump until the stream ends (or has ``count`` chunks); when each chunk (and the end) came."""
        response = client.responses[sid]
        times: List[float] = []
        for _ in range(10000):
            if response.ended or response.reset or (count is not None and len(response.chunks) >= count):
                break
            client.pump()
            now = time.monotonic()
            times.extend([now] * (len(response.chunks) - len(times)))
        if count is None:
            times.append(time.monotonic())  # the end
        return response, times

    def test_pause_holds_the_stream_before_its_chunk(self) -> None:
        """Over h2 the chunks before a pause arrive, then nothing for the pause, then the rest."""
        self.provider.reply(StreamReply(CHUNKS, pauses={1: PAUSE}))
        client = self.client()
        sid = client.request("POST", "/v1/stream", b"{}")
        response, times = self.read(client, sid)
        self.assertTrue(response.ended)
        self.assertEqual(response.body, b"".join(CHUNKS))
        request = self.provider.next_request(timeout=5)
        log = response_of(request)
        self.assertGreaterEqual(times[1] - log.times[0], PAUSE - SLACK)
        self.assertLess(self.unstalled(times[1], times[2]), PAUSE / 2)
        # The count follows each write: the client may read END_STREAM a moment before.
        self.assertTrue(request.wait_flushed(3, timeout=5))
        self.assertEqual(log.end, "complete")
        self.assertGreaterEqual(log.times[1] - log.times[0], PAUSE - SLACK)

    def test_pause_after_the_last_chunk_holds_end_stream(self) -> None:
        """A pause at len(chunks) sends the chunks without END_STREAM, then ends the stream after it."""
        self.provider.reply(StreamReply(CHUNKS, pauses={3: PAUSE}))
        client = self.client()
        sid = client.request("POST", "/v1/stream", b"{}")
        response, times = self.read(client, sid)
        self.assertTrue(response.ended)
        log = response_of(self.provider.next_request(timeout=5))
        self.assertGreaterEqual(times[3] - log.times[2], PAUSE - SLACK)

    def test_pause_ends_when_the_client_resets_the_stream(self) -> None:
        """A client RST_STREAM during a pause ends it; the connection's other streams go on."""
        import h2.errors

        self.provider.reply(
            by_path({"/held": StreamReply(CHUNKS, pauses={1: 30}), "/next": StreamReply(CHUNKS)})
        )
        client = self.client()
        sid = client.request("POST", "/held", b"{}")
        self.read(client, sid, count=1)
        request = self.provider.next_request(timeout=5)
        self.assertTrue(request.wait_flushed(1, timeout=5))
        client.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        client.flush()
        self.assertTrue(request.wait_closed(2))
        self.assertTrue(wait_tasks_done(self.provider), "the held stream's task did not end")
        self.assertEqual(response_of(request).written, 1)
        other = client.request("POST", "/next", b"{}")
        response, _ = self.read(client, other)
        self.assertTrue(response.ended)
        self.assertEqual(response.body, b"".join(CHUNKS))

    def test_close_and_reset_end_the_stream_with_rst_stream(self) -> None:
        """end="close" ends with RST_STREAM(NO_ERROR), end="reset" with RST_STREAM(INTERNAL_ERROR)."""
        for end, code in (("close", 0), ("reset", 2)):
            with self.subTest(end=end):
                self.provider.reply(StreamReply(CHUNKS, end=end))
                client = self.client()
                sid = client.request("POST", "/v1/stream", b"{}")
                response, _ = self.read(client, sid)
                self.assertEqual((response.reset, response.ended, response.reset_code), (True, False, code))
                self.assertEqual(response.body, b"".join(CHUNKS))
                request = self.provider.next_request(timeout=5)
                log = response_of(request)
                self.assertEqual((log.end, log.incomplete), (end, True))
                self.assertEqual(len(request.events), 3)
                # Only the stream was cut: the connection answers the next request.
                self.provider.reply(JsonReply({"ok": 1}))
                again = client.request("GET", "/after")
                self.assertTrue(self.read(client, again)[0].ended)
                self.provider.next_request(timeout=5)

    def test_whole_reply_cut_short_ends_with_rst_stream(self) -> None:
        """A cut JsonReply sends its headers and part of its body, then RST_STREAM by its end."""
        body = b'{"choices":[{"message":{"content":"Hello"}}]}'
        for end, code in (("close", 0), ("reset", 2)):
            with self.subTest(end=end):
                self.provider.reply(JsonReply(body, end=end, cut_at=20))
                client = self.client()
                sid = client.request("POST", "/v1/chat", b"{}")
                response, _ = self.read(client, sid)
                self.assertEqual((response.reset, response.ended, response.reset_code), (True, False, code))
                self.assertEqual(response.body, body[:20])
                self.assertEqual(response.headers.get("content-length"), str(len(body)))
                log = response_of(self.provider.next_request(timeout=5))
                self.assertEqual((log.end, log.written), (end, 1))

    def test_wait_flushed_over_h2(self) -> None:
        """wait_flushed sees h2 DATA frames go out, and not the one a pause holds."""
        self.provider.reply(StreamReply(CHUNKS, pauses={1: PAUSE}))
        client = self.client()
        sid = client.request("POST", "/v1/stream", b"{}")
        request = self.provider.next_request(timeout=5)
        self.assertTrue(request.wait_flushed(1, timeout=5))
        self.assertFalse(request.wait_flushed(2, timeout=0.05))
        self.assertTrue(request.wait_flushed(3, timeout=5))
        self.assertTrue(self.read(client, sid)[0].ended)


@unittest.skipUnless(HAVE_HTTPX and HAVE_H2, "httpx[http2] is not installed")
class TestHttpxSeesTheEndings(unittest.TestCase):
    def test_httpx_reads_the_chunks_then_fails(self) -> None:
        """httpx gets every chunk, then the error each ending should give it, over HTTP/1.1 and h2c."""
        import httpx

        expected = {
            (False, "close"): (httpx.RemoteProtocolError, "incomplete chunked read"),
            (False, "reset"): (httpx.ReadError, "reset"),
            # h2 spells the code as a number or as its name, by version.
            (True, "close"): (httpx.RemoteProtocolError, r"error_code:(0|ErrorCodes\.NO_ERROR)\b"),
            (True, "reset"): (httpx.RemoteProtocolError, r"error_code:(2|ErrorCodes\.INTERNAL_ERROR)\b"),
        }
        for (http2, end), (error, text) in expected.items():
            with self.subTest(http2=http2, end=end), start_fake_provider(http2=http2) as provider:
                provider.reply(StreamReply(CHUNKS, end=end))
                got: List[bytes] = []
                with self.assertRaisesRegex(error, text):
                    with httpx.Client(http1=not http2, http2=http2, timeout=5) as client:
                        with client.stream("POST", f"{provider.url}/v1/stream", json={}) as response:
                            got.extend(response.iter_raw())
                self.assertEqual(b"".join(got), b"".join(CHUNKS))

    def test_httpx_fails_on_a_whole_reply_cut_short(self) -> None:
        """httpx reads a JsonReply cut short as an error, never as a shorter body, over both transports."""
        import httpx

        body = b'{"choices":[{"message":{"content":"Hello"}}]}'
        for http2 in (False, True):
            with self.subTest(http2=http2), start_fake_provider(http2=http2) as provider:
                provider.reply(JsonReply(body, end="close", cut_at=20))
                with self.assertRaises(httpx.RemoteProtocolError):
                    with httpx.Client(http1=not http2, http2=http2, timeout=5) as client:
                        client.post(f"{provider.url}/v1/chat", json={})


if __name__ == "__main__":
    unittest.main()
