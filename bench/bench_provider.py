"""Bench the fake provider against a minimal raw asyncio server and against itself before the change.

Run from the repository root:

    python bench/bench_provider.py [--rounds N] [--quick] [--base REV] [--pin CPU]

Each figure is printed beside its goal and beside the same figure of the package at
``--base`` (by default the commit this work started from), imported from git into
the same process (``bench/revision.py``) and measured in the same rounds:

* CPU per request of the provider alone, with the sockets taken away
  (``bench/provider_cpu.py``): the steadiest figure on a loaded machine;
* per-request latency (median and p90 of the per-round medians) of a small JSON reply
  and a 20-event stream, over HTTP/1.1 (raw socket client) against a minimal
  ``asyncio.Protocol`` server, and over h2c (raw ``h2`` client) against a minimal
  ``asyncio`` + ``h2`` server; the servers take turns within each round, and each
  provider cell starts a fresh provider; what h2c costs over HTTP/1.1; an 8 MiB h2c
  stream in 1 MiB chunks;
* start plus stop of a provider;
* how long after a client closes mid-stream (hang=True) the request is marked closed;
* ``import conformance`` in a fresh interpreter, and that it did not import ``h2``.

The machine's load average is printed with each section: on a loaded machine read the
ratios, which are measured side by side, rather than the absolute figures. Every loop
is bounded in count and in time; everything runs on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from floors import (  # noqa: E402
    EVENT,
    EVENTS,
    JSON_BODY,
    REQUEST_BODY,
    _FloorH2,
    _FloorHttp1,
    _FloorServer,
    _http1_request,
    _RawH2Client,
    _RawHttp1Client,
)
from provider_cpu import WORKLOADS as CPU_WORKLOADS  # noqa: E402
from provider_cpu import measure_cpu  # noqa: E402
from revision import load_revision  # noqa: E402

#: The commit this bench compares with unless told otherwise: the code before the
#: work on request latency, the h2c cost and the provider's import circle.
BASE_REVISION = "c658761"
GOAL_RATIO = 1.3
#: A stream is mostly its writes, which the floor pays alike: the provider may add less.
GOAL_STREAM_RATIO = 1.1
GOAL_START_STOP_MS = 2.0
GOAL_DISCONNECT_MS = 5.0
GOAL_IMPORT_MS = 60.0

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


def _scripted(provider: ModuleType) -> Callable[[Any], Any]:
    """The handler every provider in the bench gets: the stream on /v1/sse, else the JSON reply."""
    json_reply = provider.JsonReply(JSON_BODY)
    sse_reply = provider.StreamReply(EVENTS)
    return lambda request: sse_reply if request.path == "/v1/sse" else json_reply


class _Httpx:
    """httpx's sync client with keep-alive, as a user of the provider would drive it."""

    def __init__(self, port: int, http2: bool) -> None:
        from clients import HttpxClient

        self.client = HttpxClient(port, http2=http2)

    def exchange(self, path: str) -> None:
        self.client.exchange(path)

    def close(self) -> None:
        self.client.close()


#: (name, transport, client for a port, the call it makes, most calls per cell, goal as
#: x the floor, or None where the client's own cost is most of the figure).
_Workload = Tuple[str, str, Callable[[int], Any], Callable[[Any], Callable[[], None]], int, Optional[float]]
_WORKLOADS: List[_Workload] = [
    ("HTTP/1.1 JSON", "HTTP/1.1", _RawHttp1Client,
     lambda c: lambda: c.exchange(_http1_request("/v1/json"), False), 3000, GOAL_RATIO),
    ("HTTP/1.1 20-event stream", "HTTP/1.1", _RawHttp1Client,
     lambda c: lambda: c.exchange(_http1_request("/v1/sse"), True), 1000, GOAL_STREAM_RATIO),
    ("h2c JSON", "h2c", _RawH2Client, lambda c: lambda: c.exchange("/v1/json"), 1500, GOAL_RATIO),
    ("h2c 20-event stream", "h2c", _RawH2Client,
     lambda c: lambda: c.exchange("/v1/sse"), 800, GOAL_STREAM_RATIO),
]
_HTTPX_WORKLOADS: List[_Workload] = [
    ("httpx HTTP/1.1 JSON", "HTTP/1.1", lambda port: _Httpx(port, False),
     lambda c: lambda: c.exchange("/v1/json"), 1000, None),
    ("httpx HTTP/1.1 stream", "HTTP/1.1", lambda port: _Httpx(port, False),
     lambda c: lambda: c.exchange("/v1/sse"), 500, None),
    ("httpx h2c JSON", "h2c", lambda port: _Httpx(port, True),
     lambda c: lambda: c.exchange("/v1/json"), 800, None),
    ("httpx h2c stream", "h2c", lambda port: _Httpx(port, True),
     lambda c: lambda: c.exchange("/v1/sse"), 400, None),
]


def _workloads() -> List[_Workload]:
    """The raw workloads, and httpx's where httpx (with its h2 extra) is installed."""
    import importlib.util

    if importlib.util.find_spec("httpx") is None or importlib.util.find_spec("h2") is None:
        return list(_WORKLOADS)
    return _WORKLOADS + _HTTPX_WORKLOADS


def bench_latency(
    packages: Sequence[Tuple[str, ModuleType]], rounds: int, quick: bool
) -> Dict[Tuple[str, str], Tuple[float, float]]:
    """``(workload, who)`` to (median, p90) µs, ``who`` being "floor" or a package's label.

    Every cell (a workload against one server) gets a fresh client connection and, for
    a provider, a fresh provider: what one provider recorded (and the collector's work
    on it) is not charged to the next one measured. The order rotates round by round.
    """
    floors = {"HTTP/1.1": _FloorServer(_FloorHttp1), "h2c": _FloorServer(_FloorH2)}
    budget = 0.15 if quick else 0.4
    medians: Dict[Tuple[str, str], List[float]] = {}
    tails: Dict[Tuple[str, str], List[float]] = {}
    who = ["floor"] + [label for label, _ in packages]
    modules = dict(packages)
    try:
        for round_index in range(rounds):
            for name, transport, client_type, make_call, count, _ in _workloads():
                turn = round_index % len(who)
                for label in who[turn:] + who[:turn]:
                    server: Any = None
                    if label == "floor":
                        port = floors[transport].port
                    else:
                        server = modules[label].start_fake_provider()
                        server.reply(_scripted(modules[label]))
                        port = server.port
                    client = client_type(port)
                    try:
                        samples = _measure(make_call(client), count, budget)
                    finally:
                        client.close()
                        if server is not None:
                            server.close()
                    medians.setdefault((name, label), []).append(statistics.median(samples))
                    tails.setdefault((name, label), []).append(_p90(samples))
                    server = None
                    gc.collect()
    finally:
        for floor in floors.values():
            floor.close()
    return {key: (statistics.median(v), statistics.median(tails[key])) for key, v in medians.items()}


def bench_large_h2c(packages: Sequence[Tuple[str, ModuleType]], rounds: int) -> Dict[str, float]:
    """Per package, the median ms of an 8 MiB h2c stream in 1 MiB chunks (a raw h2 client):
    frames cut from chunks larger than a frame, and flow control, rather than per-request cost."""
    body = os.urandom(1 << 20)
    samples: Dict[str, List[float]] = {}
    for index in range(rounds):
        turn = index % len(packages)
        for label, module in list(packages[turn:]) + list(packages[:turn]):
            server = module.start_fake_provider()
            server.reply(module.StreamReply([body] * 8, content_type="application/octet-stream"))
            client = _RawH2Client(server.port)
            try:
                client.exchange("/big")  # warm-up
                started = time.perf_counter()
                for _ in range(3):
                    client.exchange("/big")
                samples.setdefault(label, []).append((time.perf_counter() - started) / 3 * 1000)
            finally:
                client.close()
                server.close()
            gc.collect()
    return {label: statistics.median(values) for label, values in samples.items()}


def bench_start_stop(
    packages: Sequence[Tuple[str, ModuleType]], cycles: int
) -> Dict[str, Tuple[float, float]]:
    """Per package label, (median, p90) ms of start_fake_provider() plus close(), interleaved."""
    samples: Dict[str, List[float]] = {label: [] for label, _ in packages}
    deadline = time.perf_counter() + 20
    for index in range(cycles):
        for label, provider in packages[index % len(packages):] + packages[: index % len(packages)]:
            start = time.perf_counter()
            provider.start_fake_provider().close()
            samples[label].append((time.perf_counter() - start) * 1000)
        if time.perf_counter() > deadline:
            break
    return {label: (statistics.median(values), _p90(values)) for label, values in samples.items()}


def bench_disconnect(provider: ModuleType, trials: int) -> Tuple[float, float, int]:
    """(median, max) ms from a client's close mid-stream to request.closed, and misses."""
    server = provider.start_fake_provider()
    server.reply(provider.StreamReply([EVENT], hang=True))
    samples: List[float] = []
    missed = 0
    try:
        for _ in range(trials):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(_http1_request("/v1/sse"))
            received = b""
            for _ in range(1000):
                if EVENT in received:
                    break
                part = sock.recv(65536)
                if not part:
                    break
                received += part
            request = server.next_request(timeout=5)
            time.sleep(0.002)  # the provider is idle between events, as in a slow stream
            closed_at = time.monotonic()
            sock.close()
            if request.wait_closed(2.0) and request.closed_at is not None:
                samples.append((request.closed_at - closed_at) * 1000)
            else:
                missed += 1
    finally:
        server.close()
    if not samples:
        return float("nan"), float("nan"), missed
    return statistics.median(samples), max(samples), missed


def bench_import(folders: Sequence[Tuple[str, Path]], runs: int) -> Dict[str, Tuple[float, float, bool]]:
    """Per label, the median ms of ``import conformance`` in a fresh interpreter started in
    ``folder``, the provider's own share of it (``-X importtime``, cumulative), and
    whether h2 got imported; the folders take turns."""
    code = (
        "import sys, time\n"
        "t = time.perf_counter(); import conformance; a = time.perf_counter() - t\n"
        "print(a * 1000, 'h2' in sys.modules)\n"
    )
    totals: Dict[str, List[float]] = {}
    shares: Dict[str, List[float]] = {}
    h2_seen: Dict[str, bool] = {}
    for index in range(runs):
        for label, folder in folders[index % len(folders):] + folders[: index % len(folders)]:
            env = dict(os.environ, PYTHONPATH=str(folder))
            done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                                  text=True, cwd=str(folder), env=env, timeout=30, check=True)
            out = done.stdout.split()
            totals.setdefault(label, []).append(float(out[0]))
            h2_seen[label] = h2_seen.get(label, False) or out[1] == "True"
            share = 0
            for line in done.stderr.splitlines():
                fields = line.split("|")
                if len(fields) == 3 and fields[2].strip() == "conformance.provider":
                    share = max(share, int(fields[1]))
            shares.setdefault(label, []).append(share / 1000)
    return {
        label: (statistics.median(totals[label]), statistics.median(shares[label]), h2_seen[label])
        for label in totals
    }


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def _load() -> str:
    if not hasattr(os, "getloadavg"):
        return "load average unknown"
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def _against(value: float, base: Optional[float]) -> str:
    """``value`` beside the base's, as the change: 0.80x is a fifth less."""
    return f"{value / base:.2f}x" if base else "-"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="shorter runs, for a smoke check")
    parser.add_argument("--base", default=BASE_REVISION, metavar="REV",
                        help=f"the revision to measure beside the working copy (default {BASE_REVISION}; "
                             "'none' to measure the working copy alone)")
    parser.add_argument("--pin", type=int, metavar="CPU",
                        help="run every thread on this one CPU (Linux): client and server then add up")
    args = parser.parse_args(argv)
    rounds = max(1, args.rounds)
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})  # threads started from here on inherit it
    begun = time.perf_counter()
    import conformance.provider as provider

    packages: List[Tuple[str, ModuleType]] = [("now", provider)]
    folders: List[Tuple[str, Path]] = [("now", ROOT)]
    base_label: Optional[str] = None
    if args.base != "none":
        revision, why = load_revision(args.base)
        if revision is None:
            print(why)
        else:
            base_label = revision.label
            packages.append((base_label, revision.module("provider")))
            folders.append((base_label, revision.folder))
    placement = f"pinned to CPU {args.pin}" if args.pin is not None else "unpinned"
    print(f"Python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs, {placement}; "
          f"at start: {_load()}; loopback only")
    base_note = "no base revision"
    if base_label:
        base_note = f"'{base_label}' is the code before the change, measured in the same rounds"
    print(f"'now' is the working copy; {base_note}; 'x base' is now / base (below 1: faster now)")
    all_met = True

    print(f"\nCPU per request of the provider alone (fake transport, thread CPU clock), µs, median of "
          f"up to {rounds * 3} runs  [{_load()}]")
    cpu = measure_cpu(packages, _scripted, _http1_request, REQUEST_BODY,
                      {"/v1/json": len(JSON_BODY), "/v1/sse": len(EVENT) * len(EVENTS)},
                      rounds * 3, 5.0 if args.quick else 20.0)
    print(f"{'workload':<26}{'now':>9}{(base_label or ''):>10}{'x base':>8}")
    for name, *_ in CPU_WORKLOADS:
        now = cpu[name, "now"]
        base = cpu.get((name, base_label)) if base_label else None
        print(f"{name:<26}{now:>9.2f}{(f'{base:.2f}' if base else '-'):>10}{_against(now, base):>8}")
    print(f"\nRequest latency over loopback, µs: median of {rounds} round medians (p90 likewise), "
          f"interleaved, a fresh provider per cell  [{_load()}]")
    print(f"{'workload':<26}{'floor':>8}{'now':>8}{'p90':>7}{'x floor':>8}{'goal':>7}{'':>9}"
          f"{(base_label or ''):>10}{'x floor':>8}{'x base':>8}")
    latency = bench_latency(packages, rounds, args.quick)
    for name, _, _, _, _, goal in _workloads():
        floor = latency[name, "floor"][0]
        now, now_p90 = latency[name, "now"]
        met = goal is None or now / floor <= goal
        all_met = all_met and met
        verdict = "(shown)" if goal is None else _verdict(met)
        line = (f"{name:<26}{floor:>8.1f}{now:>8.1f}{now_p90:>7.0f}{now / floor:>7.2f}x"
                f"{(f'{goal:.1f}x' if goal else '-'):>7}{verdict:>9}")
        if base_label:
            base = latency[name, base_label][0]
            line += f"{base:>10.1f}{base / floor:>7.2f}x{_against(now, base):>8}"
        print(line)
    print("  h2c over HTTP/1.1, the same client and reply, per request:")
    for kind in ("JSON", "20-event stream", "httpx JSON", "httpx stream"):
        h1, h2 = (f"HTTP/1.1 {kind}", f"h2c {kind}") if not kind.startswith("httpx") else (
            kind.replace("httpx", "httpx HTTP/1.1"), kind.replace("httpx", "httpx h2c"))
        if (h1, "floor") not in latency:
            continue
        line = f"    {kind:<18} floor {latency[h2, 'floor'][0] / latency[h1, 'floor'][0]:.2f}x"
        for label, _ in packages:
            line += f", {label} {latency[h2, label][0] / latency[h1, label][0]:.2f}x"
        print(line)

    large = bench_large_h2c(packages, rounds)
    line = f"h2c 8 MiB stream in 1 MiB chunks, raw h2 client: now {large['now']:.1f} ms"
    if base_label:
        line += f", {base_label} {large[base_label]:.1f} ms ({_against(large['now'], large[base_label])})"
    print(line)

    print(f"\n[{_load()}]")
    stops = bench_start_stop(packages, 60 if args.quick else 200)
    median, p90 = stops["now"]
    met = median < GOAL_START_STOP_MS
    all_met = all_met and met
    base_text = ""
    if base_label:
        base = stops[base_label][0]
        base_text = f"; {base_label}: median {base:.2f} ms ({_against(median, base)})"
    print(f"Start + stop of a provider: median {median:.2f} ms, p90 {p90:.2f} ms  "
          f"(goal < {GOAL_START_STOP_MS} ms: {_verdict(met)}){base_text}")
    for label, module in packages:
        median, worst, missed = bench_disconnect(module, 10 if args.quick else 30)
        met = median < GOAL_DISCONNECT_MS and not missed
        if label == "now":
            all_met = all_met and met
        print(f"Disconnect seen ({label}; client closes mid-stream of a hang=True reply): "
              f"median {median:.3f} ms, "
              f"max {worst:.3f} ms, missed {missed}  (goal < {GOAL_DISCONNECT_MS} ms: {_verdict(met)})")
    imports = bench_import(folders, 5 if args.quick else 9)
    for label, (total, share, h2_seen) in imports.items():
        met = total < GOAL_IMPORT_MS and not h2_seen
        if label == "now":
            all_met = all_met and met
        print(f"import conformance ({label}; fresh interpreter, -X importtime on): {total:.1f} ms, of which "
              f"conformance.provider {share:.1f} ms; h2 imported: {h2_seen}  "
              f"(goal < {GOAL_IMPORT_MS:.0f} ms and no h2: {_verdict(met)})")
    print(f"\nat end: {_load()}. All goals met: {all_met}. Bench took {time.perf_counter() - begun:.1f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
