"""What one large upstream HTTP chunk costs the recorder: its time grows with its size, not its square.

Each round sends one chunk of each size (1, 16 and 64 MiB by default) from a loopback
upstream through a :class:`~conformance.gate.Recorder` to a client, in a rotating order
so a busy machine weighs on each alike, and times the client's read from the request to
its last byte, beside the same bytes read straight from the upstream (the floor). The
figure is MB/s per size: a relay whose parts were added in place (``pending += data``)
falls with the size (1.9 MB/s at 256 MiB, the figure that led to the change), one that
joins them once keeps it. The fixture's own writing comes after the client's last byte
and is timed apart. Loopback only; each round is bounded by the sizes it sends.

Run from the repository root: ``python bench/bench_recorder.py [--rounds N] [--sizes 1,16,64]``.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance.gate.record import Recorder  # noqa: E402
from conformance.wires import openai_chat_wire  # noqa: E402

MIB = 1024 * 1024
#: Throughput at the largest size as a share of the smallest's: at or above this is linear.
GOAL_SHARE = 0.5


def serve_one_chunk(size: int) -> str:
    """A loopback upstream answering every request with one chunked HTTP chunk of ``size`` bytes."""
    listener = socket.create_server(("127.0.0.1", 0))
    block = b"z" * MIB

    def run() -> None:
        with listener:
            listener.settimeout(60)
            while True:
                try:
                    sock, _ = listener.accept()
                except OSError:
                    return
                with sock:
                    sock.settimeout(60)
                    data = b""
                    while b"\r\n\r\n" not in data:
                        more = sock.recv(65536)
                        if not more:
                            break
                        data += more
                    if data.startswith(b"STOP"):
                        return
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    while len(body) < length:  # read it all: closing on unread bytes resets
                        body += sock.recv(65536)
                    sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                 b"transfer-encoding: chunked\r\n\r\n%x\r\n" % size)
                    for _ in range(size // MIB):
                        sock.sendall(block)
                    sock.sendall(b"\r\n0\r\n\r\n")

    threading.Thread(target=run, daemon=True).start()
    return f"127.0.0.1:{listener.getsockname()[1]}"


def read_through(address: str) -> float:
    """Seconds from sending a request to ``address`` to the body's last byte."""
    host, port = address.rsplit(":", 1)
    client = http.client.HTTPConnection(host, int(port), timeout=120)
    started = time.perf_counter()
    client.request("POST", "/v1/chat/completions", body=b"{}", headers={"content-type": "application/json"})
    response = client.getresponse()
    while response.read1(1 << 20):
        pass
    took = time.perf_counter() - started
    client.close()
    return took


def stop(address: str) -> None:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"STOP\r\n\r\n")


def main(argv: List[str] = sys.argv[1:]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="1,16,64", help="chunk sizes in MiB, comma-separated")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f}; loopback only")
    folder = tempfile.mkdtemp(prefix="bench-recorder-")
    relayed: Dict[int, List[float]] = {s: [] for s in sizes}
    floor: Dict[int, List[float]] = {s: [] for s in sizes}
    writing: Dict[int, List[float]] = {s: [] for s in sizes}
    try:
        for round_ in range(args.rounds):
            for size in sizes[round_ % len(sizes):] + sizes[: round_ % len(sizes)]:
                upstream = serve_one_chunk(size * MIB)
                floor[size].append(read_through(upstream))
                with Recorder(openai_chat_wire, f"http://{upstream}", folder,
                              max_response_bytes=(max(sizes) + 1) * MIB) as recorder:
                    relayed[size].append(read_through(recorder.url.split("//", 1)[1]))
                    began = time.perf_counter()
                    recorder.wait_written(1, timeout=300)
                    writing[size].append(time.perf_counter() - began)
                stop(upstream)
                for name in os.listdir(folder):
                    os.remove(os.path.join(folder, name))
    finally:
        shutil.rmtree(folder, True)
    print(f"\n{'chunk':>8}{'floor MB/s':>12}{'recorder MB/s':>15}{'vs floor':>10}{'fixture written, s':>20}")
    speed = {}
    for size in sizes:
        f = size * MIB / statistics.median(floor[size]) / 1e6
        r = size * MIB / statistics.median(relayed[size]) / 1e6
        speed[size] = r
        print(f"{size:>5} MiB{f:>12.0f}{r:>15.0f}{r / f:>9.2f}x{statistics.median(writing[size]):>20.2f}")
    share = speed[max(sizes)] / speed[min(sizes)]
    verdict = "met" if share >= GOAL_SHARE else "NOT MET"
    print(f"\nThroughput at {max(sizes)} MiB is {share:.2f}x that at {min(sizes)} MiB "
          f"(linear if at least {GOAL_SHARE}x: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
