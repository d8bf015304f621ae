"""The fake provider over h2c: httpx with prior knowledge, Upgrade, a raw h2 client, GOAWAY."""

from __future__ import annotations

import asyncio
import http.client
import importlib.util
import itertools
import json
import os
import unittest

from conformance.provider import HangReply, JsonReply, RecordedRequest, StreamReply, start_fake_provider

from .test_provider_support import H2Client

HAVE_H2 = importlib.util.find_spec("h2") is not None
HAVE_HTTPX = HAVE_H2 and importlib.util.find_spec("httpx") is not None
EVENTS = [f"data: {{\"n\": {i}}}\n\n".encode() for i in range(20)]


class H2TestCase(unittest.TestCase):
    http2 = True

    def setUp(self) -> None:
        self.provider = start_fake_provider(http2=self.http2)
        self.addCleanup(self.provider.close)

    def h2(self) -> H2Client:
        client = H2Client(self.provider.port)
        self.addCleanup(client.close)
        return client


@unittest.skipUnless(HAVE_HTTPX, "httpx[http2] is not installed")
class TestHttpxH2c(H2TestCase):
    def test_json_and_stream_with_prior_knowledge(self) -> None:
        """httpx with http1=False, http2=True gets JSON and streamed replies over HTTP/2."""
        import httpx

        with httpx.Client(http1=False, http2=True, base_url=self.provider.url) as client:
            self.provider.reply(JsonReply({"ok": True}, headers={"X-Upper": "1"}))
            response = client.post("/v1/json?x=1", json={"q": 1}, headers={"x-key": "k"})
            self.assertEqual(response.http_version, "HTTP/2")
            self.assertEqual(response.json(), {"ok": True})
            self.assertEqual(response.headers["x-upper"], "1")
            self.provider.reply(StreamReply(EVENTS))
            with client.stream("POST", "/v1/stream", json={}) as streamed:
                lines = [line for line in streamed.iter_lines() if line]
            self.assertEqual(lines, [e.decode().strip() for e in EVENTS])
        request = self.provider.next_request()
        self.assertEqual((request.method, request.path, request.query), ("POST", "/v1/json", "x=1"))
        self.assertEqual(request.http_version, "HTTP/2")
        self.assertEqual(request.headers["x-key"], "k")
        self.assertEqual(request.headers["host"], f"127.0.0.1:{self.provider.port}")
        self.assertEqual(request.json, {"q": 1})

    def test_large_body_and_large_stream_respect_flow_control(self) -> None:
        """A 10 MB body and a 10 MB streamed reply cross h2 flow control whole."""
        import httpx

        body = os.urandom(10 * 1024 * 1024)
        chunks = [body[i:i + 1024 * 1024] for i in range(0, len(body), 1024 * 1024)]
        self.provider.reply(StreamReply(chunks, content_type="application/octet-stream"))
        with httpx.Client(http1=False, http2=True, timeout=30) as client:
            response = client.post(f"{self.provider.url}/big", content=body)
        self.assertTrue(response.content == body)
        self.assertTrue(self.provider.next_request().body == body)

    def test_concurrent_streams_on_one_connection(self) -> None:
        """Ten requests in flight at once on one connection are each handled in their own task."""
        import httpx

        async def handler(request: RecordedRequest) -> JsonReply:
            for _ in range(500):  # wait until all ten are in: proves they run concurrently
                if len(self.provider.requests) >= 10:
                    break
                await asyncio.sleep(0.01)
            return JsonReply({"path": request.path, "seen": len(self.provider.requests)})

        self.provider.reply(handler)

        async def main() -> list:
            async with httpx.AsyncClient(http1=False, http2=True) as client:
                return await asyncio.gather(
                    *(client.get(f"{self.provider.url}/c{i}") for i in range(10))
                )

        responses = asyncio.run(main())
        self.assertEqual([r.json()["path"] for r in responses], [f"/c{i}" for i in range(10)])
        self.assertTrue(all(r.json()["seen"] == 10 for r in responses))

    def test_http1_provider_also_speaks_h2c(self) -> None:
        """A provider started with http2=False answers a prior-knowledge h2 client too."""
        import httpx

        with start_fake_provider() as provider:
            provider.reply(JsonReply({"both": True}))
            with httpx.Client(http1=False, http2=True) as client:
                response = client.get(f"{provider.url}/x")
            self.assertEqual(response.http_version, "HTTP/2")
            self.assertEqual(provider.next_request().http_version, "HTTP/2")


@unittest.skipUnless(HAVE_H2, "h2 is not installed")
class TestRawH2(H2TestCase):
    def test_goaway_after_headers_does_not_cut_the_stream(self) -> None:
        """A client GOAWAY right after the response headers (the AWS JS SDK) still gets the whole stream."""
        # Big enough to exhaust the client's window, so the provider is mid-stream at the GOAWAY.
        chunks = [bytes([65 + i]) * 40000 for i in range(20)]
        self.provider.reply(StreamReply(chunks))
        client = H2Client(self.provider.port)
        self.addCleanup(client.close)
        import h2.settings

        client.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535})
        client.flush()
        client.goaway_on_headers = True
        sid = client.request("POST", "/model/m/converse-stream", b'{"a": 1}')
        response = client.response(sid)
        self.assertTrue(response.ended)
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body, b"".join(chunks))
        client.read_to_eof()  # and then the provider closes the connection gracefully
        self.assertTrue(client.eof or client.terminated is not None)

    def test_data_frames_follow_the_chunks(self) -> None:
        """Each small chunk goes out as its own DATA frame; the stream ends after the last."""
        chunks = [b"one", b"", b"two", b"three"]
        self.provider.reply(StreamReply(chunks, headers={"x-amzn-requestid": "r"}))
        client = self.h2()
        response = client.response(client.request("GET", "/s"))
        self.assertEqual(response.chunks, [b"one", b"two", b"three"])
        self.assertEqual(response.headers["x-amzn-requestid"], "r")
        self.assertEqual(response.headers["content-type"], "text/event-stream")

    def test_a_stream_with_its_own_content_length_ends_with_end_stream(self) -> None:
        """A stream whose headers name its length sends them, its frames, and END_STREAM."""
        chunks = [b"one", b"two"]
        self.provider.reply(StreamReply(chunks, headers={"content-length": "6"}))
        client = self.h2()
        response = client.response(client.request("GET", "/s"))
        self.assertEqual(response.chunks, chunks)
        self.assertEqual(response.headers["content-length"], "6")
        self.assertTrue(response.ended)

    def test_small_chunks_past_the_default_windows_keep_their_frames(self) -> None:
        """300 chunks of 1000 bytes, five default windows' worth: no frame spans two chunks or oversends."""
        import socket

        import h2.config
        import h2.connection
        import h2.events

        chunks = [bytes([48 + i % 10]) * 1000 for i in range(300)]
        self.provider.reply(StreamReply(chunks))
        with socket.create_connection(("127.0.0.1", self.provider.port), timeout=10) as sock:
            # Default windows (65535 bytes): h2 raises FlowControlError if the peer oversends.
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            conn.initiate_connection()
            conn.send_headers(1, [(":method", "GET"), (":path", "/s"), (":scheme", "http"),
                                  (":authority", "127.0.0.1")], end_stream=True)
            sock.sendall(conn.data_to_send())
            frames, ended = [], False
            for _ in range(10000):
                if ended:
                    break
                data = sock.recv(1 << 16)
                self.assertTrue(data, "the provider closed the connection")
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.DataReceived):
                        frames.append(event.data)
                        # Opened as the bytes are read, so the provider runs into the window again and again.
                        conn.acknowledge_received_data(event.flow_controlled_length, 1)
                    elif isinstance(event, h2.events.StreamEnded):
                        ended = True
                sock.sendall(conn.data_to_send())
        self.assertTrue(ended)
        self.assertEqual(b"".join(frames), b"".join(chunks))
        # A chunk is one frame, or several where the window had less room than it.
        frame_ends = set(itertools.accumulate(len(f) for f in frames))
        chunk_ends = set(itertools.accumulate(len(c) for c in chunks))
        self.assertLessEqual(chunk_ends, frame_ends)
        self.assertLess(len(frames), len(chunks) + 10)
        log = self.provider.next_request().response
        assert log is not None
        self.assertEqual((log.written, log.end, len(log.times)), (300, "complete", 300))

    def test_client_reset_marks_the_stream_closed(self) -> None:
        """RST_STREAM from the client on a hanging stream is seen by latest_closed; the connection goes on."""
        self.provider.reply(StreamReply([b"first"], hang=True))
        client = self.h2()
        sid = client.request("POST", "/hang", b"{}")
        client.headers_of(sid)
        self.assertIsNone(self.provider.latest_closed(timeout=0.05))
        client.conn.reset_stream(sid)
        client.flush()
        closed = self.provider.latest_closed(timeout=5)
        self.assertIsNotNone(closed)
        assert closed is not None
        self.assertEqual(closed.path, "/hang")
        self.provider.reply(JsonReply({"after": True}))
        response = client.response(client.request("GET", "/after"))
        self.assertEqual(json.loads(response.body), {"after": True})

    def test_connection_close_marks_a_hanging_request_closed(self) -> None:
        """Closing the socket under a HangReply stream marks its request closed."""
        self.provider.reply(HangReply())
        client = H2Client(self.provider.port)
        try:
            client.request("GET", "/never")
            request = self.provider.next_request()
            self.assertFalse(request.closed)
        finally:
            client.close()
        self.assertTrue(request.wait_closed(5))

    def test_async_handler_and_unscripted_reply(self) -> None:
        """Over h2 too, an async handler answers and an unscripted provider says 501."""
        client = self.h2()
        response = client.response(client.request("POST", "/v1/x", b"{}"))
        self.assertEqual(response.status, 501)
        self.assertIn("no reply scripted for POST /v1/x", response.body.decode())

        async def handler(request: RecordedRequest) -> StreamReply:
            await asyncio.sleep(0.001)
            return StreamReply([request.path.encode()])

        self.provider.reply(handler)
        response = client.response(client.request("GET", "/async"))
        self.assertEqual(response.body, b"/async")

    def test_upgrade_h2c_serves_the_request_as_stream_1(self) -> None:
        """An HTTP/1.1 request with Upgrade: h2c gets 101 and its reply on stream 1, then h2 goes on."""
        self.provider.reply(lambda r: JsonReply({"path": r.path}))
        client = H2Client(self.provider.port, prior_knowledge=False)
        self.addCleanup(client.close)
        sid = client.upgrade("/up")
        response = client.response(sid)
        self.assertEqual(json.loads(response.body), {"path": "/up"})
        response = client.response(client.request("GET", "/next"))
        self.assertEqual(json.loads(response.body), {"path": "/next"})
        request = self.provider.next_request()
        self.assertEqual(request.path, "/up")
        self.assertEqual(request.headers["upgrade"], "h2c")


class TestH2cOnly(unittest.TestCase):
    @unittest.skipUnless(HAVE_H2, "h2 is not installed")
    def test_http11_request_to_h2c_only_provider_gets_505(self) -> None:
        """An HTTP/1.1 request to an http2=True provider gets 505 saying how to fix it, and is recorded."""
        with start_fake_provider(http2=True) as provider:
            provider.reply(JsonReply({}))
            client = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=10)
            try:
                client.request("POST", "/v1/chat", body=b"{}")
                response = client.getresponse()
                body = json.loads(response.read())
            finally:
                client.close()
            self.assertEqual(response.status, 505)
            self.assertIn("speaks h2c only", body["error"]["message"])
            self.assertIn("http2=False", body["error"]["message"])
            request = provider.next_request()
            self.assertEqual(request.path, "/v1/chat")
            self.assertIn("h2c only", request.error or "")


if __name__ == "__main__":
    unittest.main()
