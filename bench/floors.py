"""The floors the provider is measured against, the raw clients that drive them, and the bytes.

Every server in the benches answers the same two routes with the same bytes:
``POST /v1/json`` gets ``JSON_BODY`` (300 bytes, Content-Length) and ``POST /v1/sse``
gets ``EVENTS`` (20 events of 100 bytes, each written on its own). A floor is the
least a server can do for them on ``asyncio`` (and ``h2`` for h2c); a raw client
reads the framing off a plain socket, so that what is measured is the server.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any, Callable, Dict

__all__ = [
    "EVENT",
    "EVENTS",
    "JSON_BODY",
    "REQUEST_BODY",
    "_FloorH2",
    "_FloorHttp1",
    "_FloorServer",
    "_RawH2Client",
    "_RawHttp1Client",
    "_http1_request",
    "_recv",
]

REQUEST_BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi there"}]}).encode()
JSON_BODY = json.dumps({"id": "x" * 40, "choices": [{"text": "y" * 200}], "usage": {"t": 1}}).encode()
JSON_BODY = JSON_BODY + b" " * max(0, 300 - len(JSON_BODY))
EVENT = b"data: " + b"z" * 92 + b"\n\n"
EVENTS = [EVENT] * 20
assert len(EVENT) == 100


def _http1_request(path: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(REQUEST_BODY)}\r\n\r\n"
    ).encode() + REQUEST_BODY


# -- the floors ------------------------------------------------------------------


class _FloorHttp1(asyncio.Protocol):
    """The least an HTTP/1.1 server can do: find the head, read the body, write bytes."""

    JSON = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        % len(JSON_BODY) + JSON_BODY
    )
    SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    SSE_CHUNK = b"%x\r\n%b\r\n" % (len(EVENT), EVENT)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buf[:end]).lower()
            at = head.find(b"content-length:")
            length = 0
            if at >= 0:
                stop = head.find(b"\r\n", at)
                length = int(head[at + 15 : stop if stop > 0 else None])
            if len(buf) < end + 4 + length:
                return
            del buf[: end + 4 + length]
            write = self.transport.write
            if head.startswith(b"post /v1/sse"):
                # Each event its own write, the head with the first and the last chunk
                # with the terminating one: what the provider does too.
                write(self.SSE_HEAD + self.SSE_CHUNK)
                for _ in range(18):
                    write(self.SSE_CHUNK)
                write(self.SSE_CHUNK + b"0\r\n\r\n")
            else:
                write(self.JSON)


class _FloorH2(asyncio.Protocol):
    """The least an h2c server can do with the h2 state machine."""

    def connection_made(self, transport: Any) -> None:
        import h2.config
        import h2.connection

        self.transport = transport
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.conn.initiate_connection()
        self.paths: Dict[int, str] = {}
        transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        import h2.events

        conn = self.conn
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                self.paths[event.stream_id] = dict(event.headers)[b":path"].decode()
            elif isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                sid = event.stream_id
                if self.paths.pop(sid) == "/v1/sse":
                    # Each event its own DATA frame and write, the HEADERS with the first.
                    conn.send_headers(sid, [(":status", "200"), ("content-type", "text/event-stream")])
                    for index in range(20):
                        conn.send_data(sid, EVENT, end_stream=index == 19)
                        self.transport.write(conn.data_to_send())
                else:
                    conn.send_headers(sid, [(":status", "200"), ("content-type", "application/json"),
                                            ("content-length", str(len(JSON_BODY)))])
                    conn.send_data(sid, JSON_BODY, end_stream=True)
        out = conn.data_to_send()
        if out:
            self.transport.write(out)


class _FloorServer:
    """A protocol class served by its own loop in a daemon thread."""

    def __init__(self, protocol: Callable[[], asyncio.Protocol]) -> None:
        self.loop = asyncio.new_event_loop()
        # IPPROTO_TCP, so that asyncio sets TCP_NODELAY on accepted sockets.
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.stop = self.loop.create_future()
        self.thread = threading.Thread(target=self._run, args=(protocol,), daemon=True)
        self.thread.start()

    def _run(self, protocol: Callable[[], asyncio.Protocol]) -> None:
        async def serve() -> None:
            server = await self.loop.create_server(protocol, sock=self.sock)
            await self.stop
            server.close()

        self.loop.run_until_complete(serve())
        self.loop.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set_result, None)
        self.thread.join(5)
        self.sock.close()


# -- the clients -----------------------------------------------------------------

def _recv(sock: socket.socket) -> bytes:
    """One recv, as any client does it: no TCP_QUICKACK.

    An earlier version set TCP_QUICKACK after each recv, because a 20-chunk reply
    stalled about 40 ms on the client's delayed ACK. That stall was the servers'
    Nagle: asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP, and
    the listening sockets were made with proto 0. Now that they say TCP, a plain
    client sees no stall, and neither must the bench's.
    """
    return sock.recv(65536)


class _RawHttp1Client:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def exchange(self, request: bytes, streamed: bool) -> None:
        sock = self.sock
        sock.sendall(request)
        data = b""
        while True:
            part = _recv(sock)
            if not part:
                raise ConnectionError("closed")
            data += part
            end = data.find(b"\r\n\r\n")
            if end < 0:
                continue
            if streamed:
                if data.endswith(b"\r\n0\r\n\r\n"):
                    return
            else:
                at = data.find(b"content-length: ")
                length = int(data[at + 16 : data.find(b"\r\n", at)])
                if len(data) >= end + 4 + length:
                    return

    def close(self) -> None:
        self.sock.close()


class _RawH2Client:
    def __init__(self, port: int) -> None:
        import h2.config
        import h2.connection
        import h2.events

        self.events = h2.events
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(1 << 24)
        self.sock.sendall(self.conn.data_to_send())
        self.authority = f"127.0.0.1:{port}"

    def exchange(self, path: str) -> None:
        conn = self.conn
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", "POST"), (":path", path), (":scheme", "http"),
                                (":authority", self.authority), ("content-type", "application/json")])
        conn.send_data(sid, REQUEST_BODY, end_stream=True)
        self.sock.sendall(conn.data_to_send())
        ended = False
        while not ended:
            data = _recv(self.sock)
            if not data:
                raise ConnectionError("closed")
            for event in conn.receive_data(data):
                if isinstance(event, self.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, self.events.StreamEnded) and event.stream_id == sid:
                    ended = True
            out = conn.data_to_send()
            if out:
                self.sock.sendall(out)

    def close(self) -> None:
        self.sock.close()
