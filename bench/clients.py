"""The clients the bench drives every server with: raw sockets, httpx, and a load of 50.

Strategy: a raw client measures the server, httpx measures what a user of the server
sees. The raw HTTP/1.1 client here reads any framing (Content-Length, chunked, or to
the end of the connection) and reconnects when the server closes, because
pytest-httpserver closes after every response; the reconnect is then part of the
request's time, as it is for a user. The load clients run on one asyncio loop in the
bench's own thread, each connection sending its requests one after the other.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from floors import REQUEST_BODY, _http1_request, _RawH2Client, _recv

__all__ = ["RawHttp1", "RawH2", "HttpxClient", "load", "REQUESTS"]

REQUESTS = {path: _http1_request(path) for path in ("/v1/json", "/v1/sse")}
_TIMEOUT = 10.0
RawH2 = _RawH2Client


def _framing(head: bytes) -> Tuple[Optional[int], bool, bool]:
    """(Content-Length or None, chunked, the server will close) from a response head."""
    lower = head.lower()
    length = None
    at = lower.find(b"\r\ncontent-length:")
    if at >= 0:
        end = lower.find(b"\r\n", at + 2)
        length = int(lower[at + 17 : end if end > 0 else None])
    chunked = b"\r\ntransfer-encoding: chunked" in lower
    close = lower.startswith(b"http/1.0") or b"\r\nconnection: close" in lower
    return length, chunked, close or (length is None and not chunked)


class RawHttp1:
    """A blocking HTTP/1.1 client over one socket at a time, TCP_NODELAY on."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: Optional[socket.socket] = None

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        return sock

    def exchange(self, path: str) -> None:
        """Send one request and read the whole response."""
        for attempt in (0, 1):
            sock = self.sock or self._connect()
            try:
                sock.sendall(REQUESTS[path])
                data = _recv(sock)
            except OSError:
                data = b""
            if data:
                break
            self.close()  # a kept-alive connection the server had closed: once more, afresh
            if attempt:
                raise ConnectionError("the server closed the connection without a response")
        while b"\r\n\r\n" not in data:
            part = _recv(sock)
            if not part:
                raise ConnectionError("closed inside the response head")
            data += part
        end = data.index(b"\r\n\r\n") + 4
        length, chunked, close = _framing(data[:end])
        while True:
            body = len(data) - end
            if length is not None and body >= length:
                break
            if chunked and (data.endswith(b"\r\n0\r\n\r\n") or data[end:] == b"0\r\n\r\n"):
                break
            part = _recv(sock)
            if not part:
                if length is None and not chunked:
                    break
                raise ConnectionError("closed inside the response body")
            data += part
        if close:
            self.close()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class HttpxClient:
    """httpx's sync client with keep-alive: ``http2=True`` speaks h2c with prior knowledge."""

    def __init__(self, port: int, http2: bool = False) -> None:
        import httpx

        self.client = httpx.Client(http1=not http2, http2=http2, timeout=_TIMEOUT)
        self.url = f"http://127.0.0.1:{port}"
        self.headers = {"content-type": "application/json"}

    def exchange(self, path: str) -> None:
        if path == "/v1/sse":
            with self.client.stream("POST", self.url + path, content=REQUEST_BODY,
                                    headers=self.headers) as response:
                events = sum(1 for line in response.iter_lines() if line.startswith("data:"))
            assert events == 20, events
        else:
            assert len(self.client.post(self.url + path, content=REQUEST_BODY,
                                        headers=self.headers).content) >= 300

    def close(self) -> None:
        self.client.close()


# -- many clients at once -------------------------------------------------------------------


async def _h1_worker(port: int, count: int, deadline: float, latencies: List[float]) -> None:
    reader: Optional[asyncio.StreamReader] = None
    writer: Optional[asyncio.StreamWriter] = None
    request = REQUESTS["/v1/sse"]
    clock = time.perf_counter
    try:
        for _ in range(count):
            if clock() >= deadline:
                return
            started = clock()
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert reader is not None
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length, chunked, close = _framing(head)
            if chunked:
                while True:
                    size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                    await reader.readexactly(size + 2)
                    if size == 0:
                        break
            elif length is not None:
                await reader.readexactly(length)
            else:
                await reader.read()
            latencies.append(clock() - started)
            if close:
                writer.close()
                await writer.wait_closed()
                reader = writer = None
    finally:
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass


async def _h2_worker(port: int, count: int, deadline: float, latencies: List[float]) -> None:
    import h2.config
    import h2.connection
    import h2.events

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.increment_flow_control_window(1 << 24)
    writer.write(conn.data_to_send())
    head = [(":method", "POST"), (":path", "/v1/sse"), (":scheme", "http"),
            (":authority", f"127.0.0.1:{port}"), ("content-type", "application/json")]
    clock = time.perf_counter
    try:
        for _ in range(count):
            if clock() >= deadline:
                return
            started = clock()
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, head)
            conn.send_data(sid, REQUEST_BODY, end_stream=True)
            writer.write(conn.data_to_send())
            ended = False
            while not ended:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("the server closed the h2 connection")
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.DataReceived):
                        conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded) and event.stream_id == sid:
                        ended = True
                out = conn.data_to_send()
                if out:
                    writer.write(out)
            latencies.append(clock() - started)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass


def load(port: int, h2c: bool, clients: int, per_client: int, seconds: float) -> Dict[str, Any]:
    """``clients`` connections at once, each streaming up to ``per_client`` 20-event replies.

    New requests stop after ``seconds``; those under way finish (bounded at 30 s).
    Returns requests per second, the slowest request and the median, in ms, and errors.
    """
    worker: Callable[..., Any] = _h2_worker if h2c else _h1_worker

    async def main() -> Tuple[List[float], float, int]:
        latencies: List[float] = []
        started = time.perf_counter()
        deadline = started + seconds
        tasks = [asyncio.ensure_future(worker(port, per_client, deadline, latencies))
                 for _ in range(clients)]
        done, pending = await asyncio.wait(tasks, timeout=seconds + 30)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
        errors = sum(1 for t in done if t.exception() is not None) + len(pending)
        return latencies, time.perf_counter() - started, errors

    latencies, elapsed, errors = asyncio.run(main())
    ordered = sorted(latencies) or [float("nan")]
    return {
        "rps": len(latencies) / elapsed,
        "slowest_ms": ordered[-1] * 1000,
        "median_ms": ordered[len(ordered) // 2] * 1000,
        "requests": len(latencies),
        "errors": errors,
    }
