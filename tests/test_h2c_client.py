"""The reference client's hand-framed h2c (conformance/reference/_h2c.py), frame by frame.

The server here reads what the client sends through the ``h2`` state machine with its
validation on (so a malformed preface, frame or header block from the client fails the
test), then answers with frames written byte for byte: the shapes a general HTTP/2
server may send that the kit's own provider does not, such as padding, CONTINUATION,
PING, new settings, trailers, interim responses, GOAWAY and unknown frame types, and
the protocol errors the client must name.
"""

from __future__ import annotations

import asyncio
import importlib.util
import unittest
from typing import Any, List, Optional

from conformance.reference._transport import TransportError, request

HAVE_H2 = importlib.util.find_spec("h2") is not None
STEP = 5.0

(DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE,
 CONTINUATION) = range(10)


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream_id.to_bytes(4, "big") + payload


class RawServer:
    """Validates the client's request with h2, then writes the test's frames as given."""

    def __init__(self, script: List[Any], grow: bool = False) -> None:
        import hpack

        self.script = script
        #: Once the default window is used up by the request body, open it further with
        #: a new initial window (SETTINGS) and a connection WINDOW_UPDATE, through h2.
        self.grow = grow
        self.encoder = hpack.Encoder()
        self.request_headers: dict[str, str] = {}
        self.request_body = b""
        self.events: List[Any] = []
        self.port = 0
        self._server: Optional[asyncio.base_events.Server] = None
        self._writers: List[asyncio.StreamWriter] = []

    def headers(self, fields: List[tuple[str, str]]) -> bytes:
        return bytes(self.encoder.encode(fields))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import h2.config
        import h2.connection
        import h2.events

        self._writers.append(writer)
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        conn = h2.connection.H2Connection(config)
        conn.initiate_connection()
        conn.data_to_send()  # the test's script says what the server sends
        ended = False
        try:
            for _ in range(1000):  # bounded: each read returns data or the end
                data = await reader.read(65536)
                if not data:
                    return
                for event in conn.receive_data(data):
                    self.events.append(event)
                    if isinstance(event, h2.events.RequestReceived):
                        self.request_headers = {str(k): str(v) for k, v in event.headers}
                    elif isinstance(event, h2.events.DataReceived):
                        self.request_body += event.data
                        if self.grow and len(self.request_body) == 65535:
                            import h2.settings

                            conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 70000})
                            conn.increment_flow_control_window(4465)
                            writer.write(conn.data_to_send())
                    elif isinstance(event, h2.events.StreamEnded) and not ended:
                        ended = True
                        for step in self.script:
                            if isinstance(step, float):
                                await asyncio.sleep(step)
                            else:
                                writer.write(step(self) if callable(step) else step)
                                await writer.drain()
        except ConnectionError:
            return


@unittest.skipUnless(HAVE_H2, "h2 is not installed: h2c is optional")
class HandFramedTest(unittest.IsolatedAsyncioTestCase):
    """Each frame a server may send is read as RFC 9113 says, and each protocol error named."""

    async def serve(self, *script: Any, grow: bool = False) -> RawServer:
        server = RawServer(list(script), grow)
        await server.start()
        self.addAsyncCleanup(server.stop)
        return server

    async def fetch(self, server: RawServer, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
        response = await asyncio.wait_for(
            request(f"http://127.0.0.1:{server.port}/v1", "POST", headers={"x-key": "k"}, body=body,
                    http2=True, timeout=STEP),
            STEP,
        )
        return response.status, response.headers, await asyncio.wait_for(response.read(), STEP)

    @staticmethod
    def ok(server: RawServer, *, end_stream: bool = False) -> bytes:
        flags = 0x4 | (0x1 if end_stream else 0)
        return frame(HEADERS, flags, 1, server.headers([(":status", "200"), ("content-type", "text/plain")]))

    async def test_the_request_passes_h2_validation(self) -> None:
        """Preface, settings, headers and body are what a validating h2 server accepts."""
        server = await self.serve(lambda s: self.ok(s, end_stream=True))
        status, headers, body = await self.fetch(server, b'{"q": 1}')
        self.assertEqual((status, headers["content-type"], body), (200, "text/plain", b""))
        self.assertEqual(server.request_headers[":path"], "/v1")
        self.assertEqual(server.request_headers[":authority"], f"127.0.0.1:{server.port}")
        self.assertEqual(server.request_headers["x-key"], "k")
        self.assertEqual(server.request_headers["content-length"], "8")
        self.assertEqual(server.request_body, b'{"q": 1}')
        import h2.events

        settings = [e for e in server.events if isinstance(e, h2.events.RemoteSettingsChanged)]
        self.assertEqual(settings[0].changed_settings[0x2].new_value, 0, "server push is turned off")

    async def test_padding_continuation_and_trailers(self) -> None:
        """A padded HEADERS split over CONTINUATION, padded DATA, and trailers that end the stream."""

        def split_headers(s: RawServer) -> bytes:
            block = s.headers([(":status", "200"), ("x-long", "v" * 40)])
            padded = bytes((3,)) + block[:10]
            return (frame(HEADERS, 0x8, 1, padded + b"\0\0\0")
                    + frame(CONTINUATION, 0, 1, block[10:20])
                    + frame(CONTINUATION, 0x4, 1, block[20:]))

        server = await self.serve(
            split_headers,
            frame(DATA, 0x8, 1, bytes((2,)) + b"hello" + b"\0\0"),
            frame(DATA, 0, 1, b" world"),
            lambda s: frame(HEADERS, 0x5, 1, s.headers([("x-trailer", "t")])),
        )
        status, headers, body = await self.fetch(server)
        self.assertEqual((status, headers["x-long"], body), (200, "v" * 40, b"hello world"))

    async def test_interim_response_then_the_final_one(self) -> None:
        """A 103 before the 200 is skipped, as over HTTP/1.1."""
        server = await self.serve(
            lambda s: frame(HEADERS, 0x4, 1, s.headers([(":status", "103"), ("link", "</a>")])),
            lambda s: self.ok(s),
            frame(DATA, 0x1, 1, b"done"),
        )
        self.assertEqual((await self.fetch(server))[::2], (200, b"done"))

    async def test_ping_settings_and_unknown_frames(self) -> None:
        """PING is answered, new settings are acknowledged and applied, PRIORITY and unknown types ignored."""
        server = await self.serve(
            frame(PING, 0, 0, b"12345678"),
            frame(SETTINGS, 0, 0, (0x3).to_bytes(2, "big") + (100).to_bytes(4, "big")),
            frame(PRIORITY, 0, 1, bytes(5)),
            frame(0xEE, 0, 0, b"whatever"),
            lambda s: self.ok(s),
            frame(DATA, 0x1, 1, b"x" * 16384),
        )
        self.assertEqual((await self.fetch(server))[2], b"x" * 16384)
        await asyncio.sleep(0.05)
        import h2.events

        acks = [e for e in server.events if isinstance(e, h2.events.PingAckReceived)]
        self.assertEqual([a.ping_data for a in acks], [b"12345678"])
        self.assertTrue(any(isinstance(e, h2.events.SettingsAcknowledged) for e in server.events))

    async def test_flow_control_window_from_settings_and_updates(self) -> None:
        """The body waits at the window's end, then goes on as a new initial window and an update open it.

        The server's h2 rejects any byte beyond the windows it granted, so the body
        arriving whole shows the client applied the settings' change to the open stream.
        """
        body = bytes(range(256)) * 273 + b"tail"  # 69892 bytes: 65535 and then 4357 more
        server = await self.serve(lambda s: self.ok(s, end_stream=True), grow=True)
        self.assertEqual((await self.fetch(server, body))[0], 200)
        self.assertEqual(server.request_body, body)

    async def test_goaway_before_the_stream_ended(self) -> None:
        """GOAWAY that leaves the stream out is a TransportError naming GOAWAY and its code."""
        server = await self.serve(frame(GOAWAY, 0, 0, (0).to_bytes(4, "big") + (11).to_bytes(4, "big")))
        with self.assertRaisesRegex(TransportError, r"GOAWAY \(ENHANCE_YOUR_CALM\) before the stream ended"):
            await self.fetch(server)

    async def test_goaway_that_lets_the_stream_finish(self) -> None:
        """A graceful GOAWAY (NO_ERROR, the stream included) lets the reply arrive whole."""
        server = await self.serve(
            frame(GOAWAY, 0, 0, (1).to_bytes(4, "big") + (0).to_bytes(4, "big")),
            lambda s: self.ok(s),
            frame(DATA, 0x1, 1, b"whole"),
        )
        self.assertEqual((await self.fetch(server))[2], b"whole")

    async def test_reset_names_its_code(self) -> None:
        """RST_STREAM before the headers is raised at once, with the code's name."""
        server = await self.serve(frame(RST_STREAM, 0, 1, (7).to_bytes(4, "big")))
        with self.assertRaisesRegex(TransportError, r"reset the h2 stream \(error code REFUSED_STREAM\)"):
            await self.fetch(server)

    async def test_protocol_errors_are_named(self) -> None:
        """Each way a server breaks the protocol is a TransportError that says which."""
        cases = {
            "over the 16384 this side allows": [frame(DATA, 0, 1, b"x" * 16385)],
            "PUSH_PROMISE": [frame(PUSH_PROMISE, 0x4, 1, (2).to_bytes(4, "big"))],
            "interrupted before its END_HEADERS": [
                lambda s: frame(HEADERS, 0, 1, s.headers([(":status", "200")])),
                frame(DATA, 0, 1, b"x"),
            ],
            "DATA before the response headers": [frame(DATA, 0, 1, b"x")],
            "does not decode": [frame(HEADERS, 0x4, 1, b"\xff\xff\xff\xff\xff")],
            "without :status": [lambda s: frame(HEADERS, 0x4, 1, s.headers([("x", "y")]))],
            "not a multiple of 6": [frame(SETTINGS, 0, 0, b"\0\0\0")],
            "padding longer than its frame": [lambda s: self.ok(s), frame(DATA, 0x8, 1, bytes((9,)) + b"ab")],
            "stream 3, which this side never opened": [
                lambda s: frame(HEADERS, 0x4, 3, s.headers([(":status", "200")]))
            ],
        }
        for expected, script in cases.items():
            with self.subTest(expected):
                server = await self.serve(*script)
                with self.assertRaisesRegex(TransportError, f"broke the h2 protocol: .*{expected}"):
                    await self.fetch(server)

    async def test_cut_mid_frame(self) -> None:
        """A connection closed in the middle of a frame is a cut, not a short body."""

        def cut(s: RawServer) -> bytes:
            return self.ok(s) + frame(DATA, 0, 1, b"x" * 100)[:50]

        server = await self.serve(cut, 0.02, lambda s: (s._writers[0].close(), b"")[1])
        with self.assertRaisesRegex(TransportError, "closed the connection before the h2 stream ended"):
            await self.fetch(server)


if __name__ == "__main__":
    unittest.main()
