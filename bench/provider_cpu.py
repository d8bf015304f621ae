"""CPU per request of the provider's own code, with the sockets taken away.

Strategy: a socket round trip on a loaded two-CPU machine moves by tens of percent
from run to run, while the provider's share of it is a few microseconds. So this
section feeds a connection protocol the bytes a client would send, through a fake
transport that only counts what is written, and reads the thread's CPU clock: what is
left is the provider's own work per request (parse, record, resolve, write, log),
garbage collection included. The same bytes go to each package being compared, in
rotating order within each round. Every run checks that each request was answered in
full, so a path that stalled (a task on the loop, which never runs here) cannot pass
for a fast one.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__all__ = ["WORKLOADS", "measure_cpu"]


class _Transport:
    """Just enough of an asyncio transport: writes are counted, nothing is sent."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: Optional[int] = None, low: Optional[int] = None) -> None:
        pass


def _h2_client_bytes(path: str, body: bytes, count: int) -> List[bytes]:
    """What an h2 client sends for ``count`` requests, one element per request (the preface first)."""
    import h2.config
    import h2.connection
    import h2.settings

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.increment_flow_control_window(1 << 24)
    # This client never hears the server, which opens its window as it reads and ends
    # each stream: it is told up front of a window and a stream limit large enough.
    peer = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    peer.initiate_connection()
    peer.increment_flow_control_window(1 << 30)
    peer.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 2**31 - 1})
    conn.receive_data(peer.data_to_send())
    sent = [conn.data_to_send()]
    head = [(":method", "POST"), (":path", path), (":scheme", "http"),
            (":authority", "127.0.0.1"), ("content-type", "application/json")]
    for _ in range(count):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, head)
        conn.send_data(sid, body, end_stream=True)
        sent.append(conn.data_to_send())
    sent[1] = sent[0] + sent[1]
    return sent[1:]


class _Rig:
    """One package's provider, not started: a hub with a loop that never runs, and its connections."""

    def __init__(self, provider: ModuleType, replies: Callable[[ModuleType], Any]) -> None:
        from importlib import import_module

        self.fake = provider.FakeProvider()
        self.fake.reply(replies(provider))
        self.hub = self.fake._hub
        self.loop = asyncio.new_event_loop()
        self.hub.loop = self.loop
        self.connection = import_module(provider.__name__ + "._http1").H1Connection

    def run(self, requests: Sequence[bytes]) -> Tuple[float, int]:
        """CPU seconds for a fresh connection to take ``requests`` one after another, and bytes written."""
        conn = self.connection(self.hub)
        transport = _Transport()
        conn.connection_made(transport)
        feed = conn.data_received
        clock = time.thread_time
        started = clock()
        for data in requests:
            feed(data)
        took = clock() - started
        conn.connection_lost(None)
        return took, transport.written

    def close(self) -> None:
        self.loop.close()
        self.fake.close()


#: name, transport, path, requests per run.
WORKLOADS: List[Tuple[str, str, str, int]] = [
    ("HTTP/1.1 JSON", "http/1.1", "/v1/json", 2000),
    ("HTTP/1.1 20-event stream", "http/1.1", "/v1/sse", 1000),
    ("h2c JSON", "h2c", "/v1/json", 1000),
    ("h2c 20-event stream", "h2c", "/v1/sse", 500),
]


def measure_cpu(
    packages: Sequence[Tuple[str, ModuleType]],
    replies: Callable[[ModuleType], Any],
    http1_request: Callable[[str], bytes],
    body: bytes,
    least: Dict[str, int],
    rounds: int,
    seconds: float,
) -> Dict[Tuple[str, str], float]:
    """µs of CPU per request, ``(workload, package label)`` to the median over runs.

    ``packages`` are ``(label, provider module)``; ``replies(provider)`` scripts a
    provider as the socket bench does; ``least[path]`` is the fewest bytes a whole
    response to ``path`` can be. Each round runs every workload once per package, the
    packages in rotating order, and stops adding runs once ``seconds`` have passed.
    """
    # A provider of its own per package and workload, as a test would have.
    rigs = {
        (name, label): _Rig(provider, replies) for label, provider in packages for name, *_ in WORKLOADS
    }
    inputs: Dict[str, List[bytes]] = {}
    for name, transport, path, count in WORKLOADS:
        if transport == "h2c":
            inputs[name] = _h2_client_bytes(path, body, count)
        else:
            inputs[name] = [http1_request(path)] * count
    samples: Dict[Tuple[str, str], List[float]] = {}
    labels = [label for label, _ in packages]
    deadline = time.perf_counter() + seconds
    try:
        for index in range(rounds):
            for name, _, path, count in WORKLOADS:
                turn = index % len(labels)
                for label in labels[turn:] + labels[:turn]:
                    gc.collect()  # each run starts from the same state of the collector
                    took, written = rigs[name, label].run(inputs[name])
                    if written < least[path] * count:
                        raise RuntimeError(
                            f"{label} {name}: wrote {written} bytes for {count} requests, fewer than "
                            f"{least[path]} each: a reply waited on the loop, so this run measures nothing"
                        )
                    samples.setdefault((name, label), []).append(took / count * 1e6)
            if index and time.perf_counter() > deadline:
                break
    finally:
        for rig in rigs.values():
            rig.close()
    return {key: statistics.median(values) for key, values in samples.items()}
