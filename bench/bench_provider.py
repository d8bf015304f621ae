"""Bench the fake provider against a minimal raw asyncio server, side by side.

Run from the repository root:

    python bench/bench_provider.py [--rounds N] [--quick]

What it measures, each figure next to its floor and the goal:

* per-request latency (median and p90 of the per-round medians) of a small JSON reply
  and a 20-event stream, over HTTP/1.1 (raw socket client) against a minimal
  ``asyncio.Protocol`` server, and over h2c (raw ``h2`` client) against a minimal
  ``asyncio`` + ``h2`` server; the servers are interleaved within each round;
* start plus stop of a provider;
* how long after a client closes mid-stream (hang=True) the request is marked closed;
* ``import conformance`` in a fresh interpreter, and that it did not import ``h2``.

Every loop is bounded in count and in time; everything runs on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance.provider import JsonReply, StreamReply, start_fake_provider  # noqa: E402

GOAL_RATIO = 1.3
GOAL_START_STOP_MS = 2.0
GOAL_DISCONNECT_MS = 5.0
GOAL_IMPORT_MS = 60.0

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
                write(self.SSE_HEAD + self.SSE_CHUNK)
                for _ in range(19):
                    write(self.SSE_CHUNK)
                write(b"0\r\n\r\n")
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
                    conn.send_headers(sid, [(":status", "200"), ("content-type", "text/event-stream")])
                    self.transport.write(conn.data_to_send())
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


# -- measuring -------------------------------------------------------------------


def _measure(call: Callable[[], None], count: int, seconds: float) -> List[float]:
    """Latencies in µs of up to ``count`` sequential calls, stopping after ``seconds``."""
    for _ in range(min(50, count)):  # warm-up
        call()
    samples: List[float] = []
    deadline = time.perf_counter() + seconds
    clock = time.perf_counter_ns
    for _ in range(count):
        start = clock()
        call()
        samples.append((clock() - start) / 1000)
        if time.perf_counter() > deadline:
            break
    return samples


def _p90(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]


def bench_latency(rounds: int, quick: bool) -> List[Tuple[str, float, float, float, float]]:
    """(workload, floor median, floor p90, provider median, provider p90) in µs."""
    json_reply = JsonReply(JSON_BODY)
    sse_reply = StreamReply(EVENTS)
    provider = start_fake_provider()
    provider.reply(lambda r: sse_reply if r.path == "/v1/sse" else json_reply)
    floor1 = _FloorServer(_FloorHttp1)
    floor2 = _FloorServer(_FloorH2)
    budget = 0.15 if quick else 0.4
    workloads: List[Tuple[str, Callable[[int], Any], Callable[[Any], Callable[[], None]], int, int]] = [
        ("HTTP/1.1 JSON", _RawHttp1Client,
         lambda c: lambda: c.exchange(_http1_request("/v1/json"), False), 3000, floor1.port),
        ("HTTP/1.1 20-event stream", _RawHttp1Client,
         lambda c: lambda: c.exchange(_http1_request("/v1/sse"), True), 1000, floor1.port),
        ("h2c JSON", _RawH2Client, lambda c: lambda: c.exchange("/v1/json"), 1500, floor2.port),
        ("h2c 20-event stream", _RawH2Client, lambda c: lambda: c.exchange("/v1/sse"), 800, floor2.port),
    ]
    medians: Dict[Tuple[str, str], List[float]] = {}
    tails: Dict[Tuple[str, str], List[float]] = {}
    try:
        for round_index in range(rounds):
            for name, client_type, make_call, count, floor_port in workloads:
                order = [("floor", floor_port), ("provider", provider.port)]
                if round_index % 2:
                    order.reverse()
                for who, port in order:
                    client = client_type(port)
                    try:
                        samples = _measure(make_call(client), count, budget)
                    finally:
                        client.close()
                    medians.setdefault((name, who), []).append(statistics.median(samples))
                    tails.setdefault((name, who), []).append(_p90(samples))
    finally:
        provider.close()
        floor1.close()
        floor2.close()
    return [
        (name, statistics.median(medians[name, "floor"]), statistics.median(tails[name, "floor"]),
         statistics.median(medians[name, "provider"]), statistics.median(tails[name, "provider"]))
        for name, *_ in workloads
    ]


def bench_start_stop(cycles: int) -> Tuple[float, float, float]:
    """(median, p90, max) ms of start_fake_provider() plus close()."""
    samples = []
    deadline = time.perf_counter() + 10
    for _ in range(cycles):
        start = time.perf_counter()
        start_fake_provider().close()
        samples.append((time.perf_counter() - start) * 1000)
        if time.perf_counter() > deadline:
            break
    return statistics.median(samples), _p90(samples), max(samples)


def bench_disconnect(trials: int) -> Tuple[float, float, int]:
    """(median, max) ms from a client's close mid-stream to request.closed, and misses."""
    provider = start_fake_provider()
    provider.reply(StreamReply([EVENT], hang=True))
    samples: List[float] = []
    missed = 0
    try:
        for _ in range(trials):
            sock = socket.create_connection(("127.0.0.1", provider.port), timeout=5)
            sock.sendall(_http1_request("/v1/sse"))
            received = b""
            while EVENT not in received:
                part = sock.recv(65536)
                if not part:
                    break
                received += part
            request = provider.next_request(timeout=5)
            time.sleep(0.002)  # the provider is idle between events, as in a slow stream
            closed_at = time.monotonic()
            sock.close()
            if request.wait_closed(2.0) and request.closed_at is not None:
                samples.append((request.closed_at - closed_at) * 1000)
            else:
                missed += 1
    finally:
        provider.close()
    return statistics.median(samples), max(samples), missed


def bench_import(runs: int) -> Tuple[float, float, bool, bool]:
    """Median ms of ``import conformance`` in a fresh interpreter, the provider's own share
    of it (``-X importtime``, cumulative), and whether h2 / asyncio got imported."""
    code = (
        "import sys, time\n"
        "t = time.perf_counter(); import conformance; a = time.perf_counter() - t\n"
        "print(a * 1000, 'h2' in sys.modules, 'asyncio' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    totals, shares, h2_seen, asyncio_seen = [], [], False, False
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                              text=True, cwd=str(ROOT), env=env, timeout=30, check=True)
        out = done.stdout.split()
        totals.append(float(out[0]))
        h2_seen = h2_seen or out[1] == "True"
        asyncio_seen = asyncio_seen or out[2] == "True"
        share = 0
        for line in done.stderr.splitlines():
            fields = line.split("|")
            if len(fields) == 3 and fields[2].strip() == "conformance.provider":
                share = max(share, int(fields[1]))
        shares.append(share / 1000)
    return statistics.median(totals), statistics.median(shares), h2_seen, asyncio_seen


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="shorter runs, for a smoke check")
    args = parser.parse_args(argv)
    begun = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"Python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs, load average"
          f" {load:.1f} at start; loopback only")
    print(f"\nRequest latency, µs (median of {args.rounds} round medians; p90 likewise), interleaved")
    print(f"{'workload':<26}{'floor med':>10}{'p90':>8}{'provider med':>14}{'p90':>8}{'ratio':>8}"
          f"  goal <= {GOAL_RATIO}x")
    all_met = True
    for name, f_med, f_p90, p_med, p_p90 in bench_latency(args.rounds, args.quick):
        ratio = p_med / f_med
        met = ratio <= GOAL_RATIO
        all_met = all_met and met
        print(f"{name:<26}{f_med:>10.1f}{f_p90:>8.1f}{p_med:>14.1f}{p_p90:>8.1f}{ratio:>7.2f}x"
              f"  {_verdict(met)}")
    median, p90, worst = bench_start_stop(100 if args.quick else 300)
    met = median < GOAL_START_STOP_MS
    all_met = all_met and met
    print(f"\nStart + stop of a provider: median {median:.2f} ms, p90 {p90:.2f} ms, max {worst:.2f} ms"
          f"  (goal < {GOAL_START_STOP_MS} ms: {_verdict(met)})")
    median, worst, missed = bench_disconnect(10 if args.quick else 30)
    met = median < GOAL_DISCONNECT_MS and not missed
    all_met = all_met and met
    print(f"Disconnect seen (client closes mid-stream of a hang=True reply): median {median:.3f} ms,"
          f" max {worst:.3f} ms, missed {missed}  (goal < {GOAL_DISCONNECT_MS} ms: {_verdict(met)})")
    total, share, h2_seen, asyncio_seen = bench_import(5 if args.quick else 9)
    met = total < GOAL_IMPORT_MS and not h2_seen
    all_met = all_met and met
    print(f"import conformance (fresh interpreter, -X importtime on): {total:.1f} ms, of which"
          f" conformance.provider {share:.1f} ms; h2 imported: {h2_seen}; asyncio imported:"
          f" {asyncio_seen}  (goal < {GOAL_IMPORT_MS:.0f} ms and no h2: {_verdict(met)})")
    print(f"\nAll goals met: {all_met}. Bench took {time.perf_counter() - begun:.1f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
