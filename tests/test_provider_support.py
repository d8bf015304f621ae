"""Raw clients the provider tests share: HTTP/1.1 and h2 over a plain blocking socket.

They read exactly what came on the wire (chunk framing, DATA frames), which the real
clients (http.client, httpx) hide. This module holds no tests.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
import unittest
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

TIMEOUT = 10.0

#: CONFORMANCE_LONG_TESTS=1 (CI sets it) runs the soak and the fuzz at full length;
#: without it they run a shorter version with the same checks, so that the suite stays
#: quick to work in.
LONG_TESTS = os.environ.get("CONFORMANCE_LONG_TESTS", "") == "1"


@contextlib.contextmanager
def asyncio_debug_in_long_runs_only() -> Iterator[None]:
    """Event loops made inside run without asyncio's debug mode, unless CONFORMANCE_LONG_TESTS=1.

    For the tests that run hundreds of cases to prove verdicts (the mutant zoo, the
    matrix, the agent-loop stages). Under ``python -X dev``, the test command, every
    loop is in debug mode and keeps a traceback of each callback, task and future it
    makes: that doubles to quadruples those tests' time and bears on no verdict. The
    library's own paths still run in debug mode in the other tests, and CI, which sets
    CONFORMANCE_LONG_TESTS=1, runs these in it too.
    """
    import asyncio.coroutines
    from unittest import mock

    if LONG_TESTS or not hasattr(asyncio.coroutines, "_is_debug_mode"):
        yield
        return
    # A new loop takes its mode from this function (asyncio 3.9 to 3.13).
    with mock.patch.object(asyncio.coroutines, "_is_debug_mode", return_value=False):
        yield


class AsyncioDebugOff:
    """:func:`asyncio_debug_in_long_runs_only` for a whole module, from its
    ``setUpModule`` (:meth:`start`) to its ``tearDownModule`` (:meth:`stop`).

    For the modules that run whole suites through a real SDK or a zoo of broken
    loops: there debug mode triples the time of the gate's cases and adds a tenth to
    the SDKs', and decides no verdict. CI (CONFORMANCE_LONG_TESTS=1) keeps it on.
    """

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()

    def start(self) -> None:
        self._stack.enter_context(asyncio_debug_in_long_runs_only())

    def stop(self) -> None:
        self._stack.close()


def asyncio_debug_off_for_module() -> Tuple[Callable[[], None], Callable[[], None]]:
    """A module's ``setUpModule`` and ``tearDownModule`` when it needs no others."""
    off = AsyncioDebugOff()
    return off.start, off.stop


class StallWatched(unittest.TestCase):
    """Runs each test with the stall watch on, for bounds on how soon something happens.

    :meth:`unstalled` is the time between two ``time.monotonic()`` readings less what
    held up the whole process meanwhile (``conformance._stall``), as the library's own
    abort bounds count it: a loaded machine must not fail a test of promptness.
    """

    def setUp(self) -> None:
        super().setUp()
        from conformance._stall import WATCH

        WATCH.start()
        self.addCleanup(WATCH.stop)

    def unstalled(self, since: float, until: Optional[float] = None) -> float:
        from conformance._stall import WATCH

        until = time.monotonic() if until is None else until
        return until - since - WATCH.between(since, until)

    async def unstalled_async(self, since: float, until: Optional[float] = None) -> float:
        """:meth:`unstalled` in a coroutine: it waits for the watch to run past ``until``,
        which must not hold up the event loop meanwhile."""
        import asyncio

        until = time.monotonic() if until is None else until
        return await asyncio.get_running_loop().run_in_executor(None, self.unstalled, since, until)


#: GOAWAY(last_stream_id=0, NO_ERROR), as the AWS SDK for JavaScript sends it.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
GOAWAY_NO_ERROR = struct.pack(">I", 8)[1:] + b"\x07\x00" + b"\x00" * 4 + b"\x00" * 8


class RawResponse:
    """One HTTP/1.1 response as it came: ``chunks`` holds each chunk when chunked."""

    def __init__(self, status: int, headers: Dict[str, str], body: bytes, chunks: Optional[List[bytes]]):
        self.status = status
        self.headers = headers
        self.body = body
        self.chunks = chunks


class RawConnection:
    """A blocking HTTP/1.1 client connection that shows the framing."""

    def __init__(self, port: int, timeout: float = TIMEOUT) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_head(self) -> Tuple[int, Dict[str, str]]:
        line = self.file.readline(70000)
        if not line:
            raise ConnectionError("the provider closed the connection before a response")
        status = int(line.split(b" ", 2)[1])
        headers: Dict[str, str] = {}
        while True:
            line = self.file.readline(70000)
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def read_response(self, head_only: bool = False) -> RawResponse:
        status, headers = self.read_head()
        if head_only or status < 200 or status in (204, 304):
            return RawResponse(status, headers, b"", None)
        if headers.get("transfer-encoding") == "chunked":
            chunks = []
            while True:
                size = int(self.file.readline(100).split(b";")[0], 16)
                if size == 0:
                    while self.file.readline(1000) not in (b"\r\n", b""):
                        pass
                    break
                chunks.append(self.read_exact(size))
                if self.read_exact(2) != b"\r\n":
                    raise AssertionError("chunk data not followed by CRLF")
            return RawResponse(status, headers, b"".join(chunks), chunks)
        if "content-length" in headers:
            return RawResponse(status, headers, self.read_exact(int(headers["content-length"])), None)
        return RawResponse(status, headers, self.read_to_eof(), None)

    def read_exact(self, size: int) -> bytes:
        data = self.file.read(size)
        if len(data) != size:
            raise ConnectionError(f"connection closed after {len(data)} of {size} bytes")
        return data

    def read_to_eof(self) -> bytes:
        parts = []
        while True:
            try:
                data = self.file.read1(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            parts.append(data)
        return b"".join(parts)

    def closed_by_peer(self) -> bool:
        """Whether the provider closed the connection (reads to EOF, bounded by the timeout)."""
        try:
            return self.read_to_eof() is not None
        except socket.timeout:
            return False


def http1_request(
    method: str, path: str, body: bytes = b"", headers: Optional[Dict[str, str]] = None
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1"]
    lines.extend(f"{k}: {v}" for k, v in (headers or {}).items())
    if body and not any(k.lower() == "transfer-encoding" for k in headers or {}):
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class H2Response:
    def __init__(self) -> None:
        self.status = 0
        self.headers: Dict[str, str] = {}
        self.chunks: List[bytes] = []
        self.ended = False
        self.reset = False
        #: The RST_STREAM error code, when the provider reset the stream.
        self.reset_code: Optional[int] = None

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


class H2Client:
    """The h2 state machine over a blocking socket, prior knowledge (or after an upgrade)."""

    def __init__(self, port: int, timeout: float = TIMEOUT, prior_knowledge: bool = True) -> None:
        import h2.config
        import h2.connection
        import h2.settings

        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        self.responses: Dict[int, H2Response] = {}
        self.terminated: Any = None
        self.eof = False
        self.goaway_on_headers = False
        self.write_shut = False
        self.pending = b""
        if prior_knowledge:
            self.conn.local_settings = h2.settings.Settings(
                client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20}
            )
            self.conn.initiate_connection()
            self.conn.increment_flow_control_window(1 << 24)
            self.flush()

    def __enter__(self) -> H2Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data and not self.write_shut:
            self.sock.sendall(data)

    def shutdown_write(self) -> None:
        """Half-close; from now on what h2 would send (window updates) is dropped.

        Writing after the half-close fails, and a client that then closes with
        unread input resets the connection, which can drop the request it sent last.
        """
        self.sock.shutdown(socket.SHUT_WR)
        self.write_shut = True

    def request(
        self, method: str, path: str, body: bytes = b"", headers: Optional[List[Tuple[str, str]]] = None
    ) -> int:
        sid: int = self.conn.get_next_available_stream_id()
        self.responses[sid] = H2Response()
        head = [
            (":method", method),
            (":path", path),
            (":scheme", "http"),
            (":authority", f"127.0.0.1:{self.port}"),
        ]
        head.extend(headers or [])
        self.conn.send_headers(sid, head, end_stream=not body)
        self.flush()
        offset = 0
        while offset < len(body):
            size = min(
                len(body) - offset,
                self.conn.local_flow_control_window(sid),
                self.conn.max_outbound_frame_size,
            )
            if size <= 0:
                self.pump()
                continue
            end = offset + size == len(body)
            self.conn.send_data(sid, body[offset : offset + size], end_stream=end)
            offset += size
            self.flush()
        return sid

    def pump(self) -> None:
        """Read once from the socket and act on the events."""
        import h2.events

        data, self.pending = self.pending or self.sock.recv(1 << 20), b""
        if not data:
            self.eof = True
            raise ConnectionError("the provider closed the connection")
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                response = self.responses[event.stream_id]
                for name, value in event.headers:
                    if name == ":status":
                        response.status = int(value)
                    else:
                        response.headers[name] = value
                if self.goaway_on_headers:
                    # Behind h2's back, so that our own state machine keeps reading.
                    self.sock.sendall(GOAWAY_NO_ERROR)
            elif isinstance(event, h2.events.DataReceived):
                self.responses[event.stream_id].chunks.append(event.data)
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.responses[event.stream_id].ended = True
            elif isinstance(event, h2.events.StreamReset):
                self.responses[event.stream_id].reset = True
                self.responses[event.stream_id].reset_code = int(event.error_code)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.terminated = event
        self.flush()

    def response(self, sid: int) -> H2Response:
        """Read until the stream ends (or is reset)."""
        response = self.responses[sid]
        for _ in range(100000):
            if response.ended or response.reset:
                return response
            self.pump()
        raise AssertionError("no end of stream after 100000 reads")

    def headers_of(self, sid: int) -> H2Response:
        response = self.responses[sid]
        for _ in range(1000):
            if response.status:
                return response
            self.pump()
        raise AssertionError("no response headers after 1000 reads")

    def upgrade(self, path: str) -> int:
        """Send an HTTP/1.1 request with Upgrade: h2c, read the 101, go on as h2; stream 1."""
        import h2.config
        import h2.connection

        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        settings = self.conn.initiate_upgrade_connection()
        assert settings is not None
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\n"
            "Upgrade: h2c\r\nHTTP2-Settings: ".encode()
            + settings.rstrip(b"=")
            + b"\r\n\r\n"
        )
        received = b""
        while b"\r\n\r\n" not in received:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed before the 101")
            received += data
        head, _, self.pending = received.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101 "):
            raise AssertionError(f"expected 101 Switching Protocols, got {head[:60]!r}")
        self.responses[1] = H2Response()
        self.flush()
        return 1

    def read_to_eof(self) -> None:
        for _ in range(100000):
            try:
                self.pump()
            except (ConnectionError, OSError):
                return
