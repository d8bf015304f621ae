"""The fake provider side by side with what a user would pick instead, in one run.

Run from the repository root (the peers are optional; each missing one is left out
with the reason):

    pip install pytest-httpserver aiohttp uvicorn hypercorn httpx[http2]
    python bench/run.py [--rounds N] [--quick] [--section NAME ...]

Sections, each interleaved (every round runs every server or setting once, in a
rotating order) and reported as the median over rounds of the per-round medians:

* ``latency``: per-request latency of a small JSON reply and a 20-event stream,
  through a raw socket client and through httpx, for the provider, pytest-httpserver,
  aiohttp, uvicorn (HTTP/1.1), hypercorn (h2c) and the floors (minimal asyncio servers);
* ``startstop``: start, first request and stop of a fresh server, as a test that starts
  one per test pays them;
* ``load``: 50 clients streaming at once: requests per second and the slowest request;
* ``case``: the cost of one conformance case beside what its backend spends alone,
  with the OpenAI Chat reference backend and a trivial in-process backend;
* ``matrix``: the default matrix (``python -m conformance``) at 1x, 2x and 4x its
  cases, and at ``--jobs`` 1, 2, 4 and 8;
* ``app``: one scripted fault (Azure OpenAI's 429 asking for 200 ms, twice, then the
  answer) through openai-python's ``AzureOpenAI`` with its default retries, run in app
  mode (the client built from the environment, the run judged from the request log)
  beside the same fault through the backend suite (``retries = True``, a backend over
  the same SDK), with the SDK's own time in each.

Every loop is bounded in count and in time; everything runs on 127.0.0.1. The load
average is printed with each section: on a loaded machine read the ratios, which are
measured side by side, rather than the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_provider import _p90  # noqa: E402
from clients import HttpxClient, RawH2, RawHttp1, load  # noqa: E402
from peers import Server, available  # noqa: E402

GOAL_FLOOR_RATIO = 1.3
#: A stream is mostly its writes, which the floor pays alike: the provider may add less.
GOAL_STREAM_FLOOR_RATIO = 1.1
GOAL_PEER_SPEEDUP = 2.0
GOAL_CASE_OVERHEAD_MS = 10.0
#: App mode's run of a fault may cost at most this much more wall time than the backend
#: suite's case of the same fault (both wait the same 400 ms the provider asks for).
GOAL_APP_RATIO = 1.25
SECTIONS = ("latency", "startstop", "load", "case", "matrix", "app")

#: (column, client kind, path, most requests per cell) per transport.
WORKLOADS: Dict[str, List[Tuple[str, str, str, int]]] = {
    "http/1.1": [("raw JSON", "raw", "/v1/json", 3000), ("raw stream", "raw", "/v1/sse", 1000),
                 ("httpx JSON", "httpx", "/v1/json", 1000), ("httpx stream", "httpx", "/v1/sse", 500)],
    "h2c": [("raw JSON", "raw", "/v1/json", 1500), ("raw stream", "raw", "/v1/sse", 800),
            ("httpx JSON", "httpx", "/v1/json", 800), ("httpx stream", "httpx", "/v1/sse", 400)],
}


def _load_average() -> str:
    if not hasattr(os, "getloadavg"):
        return "load average unknown"
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def _heading(title: str) -> None:
    print(f"\n== {title}  [{_load_average()}]")


def _measure(call: Callable[[], None], count: int, seconds: float) -> List[float]:
    """µs of up to ``count`` sequential calls within ``seconds``, after a short warm-up."""
    warm_until = time.perf_counter() + min(0.1, seconds / 3)
    for _ in range(20):
        call()
        if time.perf_counter() > warm_until:
            break
    samples: List[float] = []
    clock = time.perf_counter_ns
    deadline = time.perf_counter() + seconds
    for _ in range(count):
        started = clock()
        call()
        samples.append((clock() - started) / 1000)
        if time.perf_counter() > deadline:
            break
    return samples


def _rotate(items: Sequence[Any], by: int) -> List[Any]:
    by %= max(1, len(items))
    return list(items[by:]) + list(items[:by])


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base > 0 else "-"


# -- latency and load ----------------------------------------------------------------------


def _client(kind: str, server: Server) -> Any:
    if kind == "httpx":
        return HttpxClient(server.port, http2=server.h2c)
    return RawH2(server.port) if server.h2c else RawHttp1(server.port)


def _call(client: Any, path: str) -> Callable[[], None]:
    return lambda: client.exchange(path)


def section_latency(servers: List[Tuple[str, str, Server]], rounds: int, budget: float) -> Dict[str, Any]:
    medians: Dict[Tuple[str, str, str], List[float]] = {}
    tails: Dict[Tuple[str, str, str], List[float]] = {}
    for index in range(rounds):
        for name, transport, server in _rotate(servers, index):
            for column, kind, path, count in WORKLOADS[transport]:
                client = _client(kind, server)
                try:
                    samples = _measure(_call(client, path), count, budget)
                finally:
                    client.close()
                medians.setdefault((transport, name, column), []).append(statistics.median(samples))
                tails.setdefault((transport, name, column), []).append(_p90(samples))
            gc.collect()
    table = {key: (statistics.median(v), statistics.median(tails[key])) for key, v in medians.items()}
    met = True
    for transport in WORKLOADS:
        names = [n for n, t, _ in servers if t == transport]
        if not names:
            continue
        columns = [c for c, *_ in WORKLOADS[transport]]
        print(f"\n{transport}: median µs per request (p90), and x the floor in the same column")
        print(f"{'server':<19}" + "".join(f"{c:>25}" for c in columns))
        for name in names:
            cells = []
            for column in columns:
                med, p90 = table[transport, name, column]
                floor = table.get((transport, "floor", column), (0.0, 0.0))[0]
                cells.append(f"{med:>9.0f} ({p90:>6.0f}) {_ratio(med, floor):>6}")
            print(f"{name:<19}" + "".join(f"{c:>25}" for c in cells))
        if "provider" not in names:
            continue
        for column in columns:
            med = table[transport, "provider", column][0]
            if "floor" in names and column.startswith("raw"):
                ratio = med / table[transport, "floor", column][0]
                goal = GOAL_STREAM_FLOOR_RATIO if "stream" in column else GOAL_FLOOR_RATIO
                ok = ratio <= goal
                met = met and ok
                print(f"  goal: provider within {goal}x of the floor, {transport} {column}: "
                      f"{ratio:.2f}x  {'met' if ok else 'NOT MET'}")
        for peer in names:
            if peer in ("floor", "provider"):
                continue
            speedups = []
            for column in columns:
                speed = table[transport, peer, column][0] / table[transport, "provider", column][0]
                speedups.append(f"{column} {speed:.2f}x")
            print(f"  provider faster than {peer}: " + ", ".join(speedups))
            for column in ("raw stream", "httpx stream"):
                speed = table[transport, peer, column][0] / table[transport, "provider", column][0]
                ok = speed >= GOAL_PEER_SPEEDUP
                if column == "raw stream":
                    met = met and ok
                print(f"  goal: >= {GOAL_PEER_SPEEDUP}x faster than {peer} per streamed request "
                      f"({column}): {speed:.2f}x  {'met' if ok else 'NOT MET'}"
                      f"{'' if column == 'raw stream' else ' (httpx-bound; shown, not judged)'}")
    return {"met": met, "table": table}


def section_load(servers: List[Tuple[str, str, Server]], rounds: int, seconds: float,
                 clients: int = 50) -> Dict[str, Any]:
    rps: Dict[Tuple[str, str], List[float]] = {}
    slowest: Dict[Tuple[str, str], List[float]] = {}
    typical: Dict[Tuple[str, str], List[float]] = {}
    errors: Dict[Tuple[str, str], int] = {}
    for index in range(rounds):
        for name, transport, server in _rotate(servers, index):
            result = load(server.port, server.h2c, clients, 400, seconds)
            key = (transport, name)
            rps.setdefault(key, []).append(result["rps"])
            slowest.setdefault(key, []).append(result["slowest_ms"])
            typical.setdefault(key, []).append(result["median_ms"])
            errors[key] = errors.get(key, 0) + result["errors"]
            gc.collect()
    print(f"\n{clients} clients at once, each streaming 20-event replies one after another for "
          f"{seconds:g} s (one asyncio client loop in the bench's thread)")
    print(f"{'transport':<10}{'server':<19}{'req/s':>9}{'x floor':>9}{'median ms':>11}{'slowest ms':>12}"
          f"{'(max)':>9}{'errors':>8}")
    for (transport, name), values in rps.items():
        floor = statistics.median(rps.get((transport, "floor"), [0.0]))
        value = statistics.median(values)
        print(f"{transport:<10}{name:<19}{value:>9.0f}{_ratio(value, floor):>9}"
              f"{statistics.median(typical[transport, name]):>11.2f}"
              f"{statistics.median(slowest[transport, name]):>12.2f}{max(slowest[transport, name]):>9.1f}"
              f"{errors[transport, name]:>8}")
    for transport in WORKLOADS:
        if (transport, "provider") not in rps:
            continue
        mine = statistics.median(rps[transport, "provider"])
        for (t, name), values in rps.items():
            if t == transport and name not in ("floor", "provider"):
                print(f"  {transport}: provider serves {mine / statistics.median(values):.2f}x the "
                      f"requests per second of {name}")
    return {"rps": rps, "slowest": slowest}


# -- start and stop --------------------------------------------------------------------------


def section_startstop(factories: List[Tuple[str, str, Callable[[], Server]]], rounds: int,
                      cycles: int) -> Dict[str, Any]:
    parts: Dict[Tuple[str, str], List[Tuple[float, float, float]]] = {}
    for index in range(rounds):
        for name, transport, factory in _rotate(factories, index):
            for _ in range(cycles):
                server = factory()
                t0 = time.perf_counter()
                server.start()
                t1 = time.perf_counter()
                client = _client("raw", server)
                try:
                    client.exchange("/v1/json")
                finally:
                    client.close()
                t2 = time.perf_counter()
                time.sleep(0.01)  # the test's own work, not counted
                t3 = time.perf_counter()
                server.stop()
                t4 = time.perf_counter()
                parts.setdefault((transport, name), []).append((t1 - t0, t2 - t1, t4 - t3))
            gc.collect()
    print("\nA fresh server per test: start, first request on a new connection (raw client), "
          "10 ms of test work (not counted), stop; median ms")
    print(f"{'transport':<10}{'server':<19}{'start':>8}{'first':>8}{'stop':>9}{'total':>9}{'p90':>9}"
          f"{'provider faster':>17}")
    totals = {key: [sum(p) * 1000 for p in values] for key, values in parts.items()}
    met = True
    for (transport, name), values in parts.items():
        start, first, stop = (statistics.median(v[i] for v in values) * 1000 for i in range(3))
        total = statistics.median(totals[transport, name])
        mine = totals.get((transport, "provider"))
        speed = f"{total / statistics.median(mine):.1f}x" if mine and name != "provider" else ""
        print(f"{transport:<10}{name:<19}{start:>8.2f}{first:>8.2f}{stop:>9.2f}{total:>9.2f}"
              f"{_p90(totals[transport, name]):>9.2f}{speed:>17}")
    for (transport, name), values in totals.items():
        mine = totals.get((transport, "provider"))
        if mine and name not in ("floor", "provider"):
            speed = statistics.median(values) / statistics.median(mine)
            ok = speed >= GOAL_PEER_SPEEDUP
            met = met and ok
            print(f"  goal: start + stop >= {GOAL_PEER_SPEEDUP}x faster than {name} ({transport}): "
                  f"{speed:.1f}x  {'met' if ok else 'NOT MET'}")
    return {"met": met}


# -- conformance cases -----------------------------------------------------------------------


class _TrivialBackend:
    """Returns the fixture at once, without a request: what is left is the case's own cost."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def chat(self, request: Any) -> Any:
        from conformance import ChatResponse, FinishReason
        from conformance.fixture import CONFORMANCE_FIXTURE as FX

        return ChatResponse(FX.text, FinishReason("stop"), usage=FX.usage)

    async def chat_stream(self, request: Any) -> Any:
        from conformance import FinishReason, StreamChunk
        from conformance.fixture import CONFORMANCE_FIXTURE as FX

        yield StreamChunk(FX.text)
        yield StreamChunk(finish_reason=FinishReason("stop"), usage=FX.usage)


async def _backend_alone(case: Any, provider: Any, rounds: int) -> List[float]:
    """ms the backend alone spends on the case's call: create, call, read it all, close."""
    from conformance.fixture import conformance_request

    target = case.target
    provider.reply(lambda request: case._reply(request, []))
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        backend = target.create_backend(provider.url)
        try:
            request = conformance_request(target.model)
            if case.mode == "chat":
                await backend.chat(request)
            else:
                async for _ in backend.chat_stream(request):
                    pass
        except Exception:  # noqa: BLE001 - the error scenarios end this way, as intended
            pass
        finally:
            await backend.aclose() if hasattr(backend, "aclose") else backend.close()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _time_case(case: Any) -> Tuple[float, str]:
    import unittest

    started = time.perf_counter()
    try:
        case.run()
        outcome = "pass"
    except unittest.SkipTest:
        outcome = "skip"
    except AssertionError:
        outcome = "FAIL"
    return (time.perf_counter() - started) * 1000, outcome


def section_case(rounds: int) -> Dict[str, Any]:
    from conformance._cli.matrix import _reference_targets
    from conformance.cases import BackendConformanceTarget, backend_conformance_cases
    from conformance.provider import start_fake_provider
    from conformance.wires import openai_chat_wire

    reference = _reference_targets(["openai-chat"], ["http/1.1"])[0][1]
    trivial = BackendConformanceTarget("trivial", openai_chat_wire, _TrivialBackend)
    cases = [c for c in backend_conformance_cases(reference) if not c.skip]
    trivial_cases = [c for c in backend_conformance_cases(trivial) if c.scenario == "text"]
    case_ms: Dict[str, List[float]] = {}
    alone_ms: Dict[str, List[float]] = {}
    trivial_ms: Dict[str, List[float]] = {}
    outcomes: Dict[str, str] = {}

    def median_of_three(case: Any) -> float:
        samples = []
        for _ in range(3):
            took, outcomes[case.target.name + " " + case.name] = _time_case(case)
            samples.append(took)
        return statistics.median(samples)

    with start_fake_provider() as provider:
        for index in range(rounds):
            # Each case and its backend alone back to back, three runs each, so that
            # the difference is not a change of load between two far-apart moments.
            for case in _rotate(cases, index):
                case_ms.setdefault(case.name, []).append(median_of_three(case))
                if case.scenario not in ("abort", "cancel"):
                    samples = asyncio.run(_backend_alone(case, provider, 3))
                    alone_ms.setdefault(case.name, []).append(statistics.median(samples))
            for case in trivial_cases:
                trivial_ms.setdefault(case.name, []).append(median_of_three(case))
            gc.collect()
    print("\nOne case of the OpenAI Chat reference backend over HTTP/1.1, median ms: the whole case "
          "(fresh provider, backend call in a worker thread, checks, close) and the backend alone "
          "(create, call, read, close, against a provider already running)")
    print(f"{'case':<30}{'case':>9}{'backend':>9}{'on top':>9}")
    overheads = []
    for case in cases:
        whole = statistics.median(case_ms[case.name])
        if case.name in alone_ms:
            own = statistics.median(alone_ms[case.name])
            # The median of the paired differences, round by round.
            on_top = statistics.median(c - a for c, a in zip(case_ms[case.name], alone_ms[case.name]))
            overheads.append(on_top)
            print(f"{case.name:<30}{whole:>9.2f}{own:>9.2f}{on_top:>9.2f}")
        else:
            print(f"{case.name:<30}{whole:>9.2f}{'':>9}{'':>9}  (aborts once the request has "
                  "arrived or the first chunk was yielded, then watches the close)")
    total = sum(statistics.median(case_ms[case.name]) for case in cases)
    print(f"{'all ' + str(len(cases)) + ' cases, one after another':<30}{total:>9.2f}")
    print("Trivial in-process backend (returns the fixture; the case fails on 'no request', "
          "which it reports as the check says; all of it is the case's own cost):")
    for name, values in trivial_ms.items():
        print(f"{'trivial ' + name:<30}{statistics.median(values):>9.2f}")
    worst = max(overheads)
    typical = statistics.median(overheads)
    trivial_worst = max(statistics.median(v) for v in trivial_ms.values())
    met = worst < GOAL_CASE_OVERHEAD_MS and trivial_worst < GOAL_CASE_OVERHEAD_MS
    failed = [name for name, outcome in outcomes.items() if outcome == "FAIL" and "trivial" not in name]
    print(f"  on top of the backend: median {typical:.2f} ms, worst {worst:.2f} ms; trivial backend "
          f"worst {trivial_worst:.2f} ms; reference cases that failed: {failed or 'none'}")
    print(f"  goal: a case costs < {GOAL_CASE_OVERHEAD_MS:g} ms on top of its backend: "
          f"{'met' if met else 'NOT MET'}")
    return {"met": met}


def section_matrix(rounds: int, jobs_rounds: int, scales: Sequence[int],
                   jobs_list: Sequence[int]) -> Dict[str, Any]:
    import importlib.util

    from conformance._cli.matrix import TRANSPORTS, _reference_targets, run_matrix
    from conformance._cli.shared import _default_jobs

    transports = [t for t in TRANSPORTS if t != "h2c" or importlib.util.find_spec("h2") is not None]
    targets = _reference_targets(None, transports)
    default = _default_jobs()
    configs = [("scale", k, default) for k in scales] + [("jobs", 1, j) for j in jobs_list]
    seconds: Dict[Tuple[str, int, int], List[float]] = {}
    counts: Dict[Tuple[str, int, int], int] = {}
    failures = 0
    # The jobs sweep is cheap (one matrix per setting) and noisy: it gets more rounds.
    for index in range(max(rounds, jobs_rounds)):
        chosen = configs if index < rounds else [c for c in configs if c[0] == "jobs"]
        for kind, scale, jobs in _rotate(chosen, index):
            out = io.StringIO()
            started = time.perf_counter()
            failures += run_matrix(targets * scale, jobs, out)
            seconds.setdefault((kind, scale, jobs), []).append(time.perf_counter() - started)
            counts[kind, scale, jobs] = int(out.getvalue().rsplit("\n\n", 1)[-1].split()[0])
            gc.collect()
    print(f"\nThe default matrix (run_matrix over every reference target, {', '.join(transports)}), "
          f"median s over {rounds} round(s), the jobs sweep over {max(rounds, jobs_rounds)}; "
          f"_default_jobs() = {default} here")
    print(f"{'cases':>7}{'jobs':>6}{'seconds':>10}{'ms/case':>9}")
    points = []
    for kind, scale, jobs in configs:
        if kind != "scale":
            continue
        value = statistics.median(seconds[kind, scale, jobs])
        points.append((counts[kind, scale, jobs], value))
        count = counts[kind, scale, jobs]
        print(f"{count:>7}{jobs:>6}{value:>10.2f}{value / count * 1000:>9.2f}")
    if len(points) >= 2:
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x in xs)
        constant = mean_y - slope * mean_x
        growth = ", ".join(f"{x // xs[0]}x cases: {y / ys[0]:.2f}x time" for x, y in points[1:])
        print(f"  growth: {growth}; least squares: {slope * 1000:.2f} ms per case + {constant:.2f} s")
    print(f"{'cases':>7}{'jobs':>6}{'seconds':>10}{'ms/case':>9}")
    best = None
    for kind, scale, jobs in configs:
        if kind != "jobs":
            continue
        value = statistics.median(seconds[kind, scale, jobs])
        if best is None or value < best[1]:
            best = (jobs, value)
        count = counts[kind, scale, jobs]
        print(f"{count:>7}{jobs:>6}{value:>10.2f}{value / count * 1000:>9.2f}")
    if best is not None:
        print(f"  fastest: --jobs {best[0]} ({best[1]:.2f} s); failures in all runs: {failures}")
    # In-process against one worker process per CPU (the default for this matrix),
    # alternated round by round so that load falls on both alike.
    from conformance._cli.shared import _default_processes

    spread = _default_processes(len(targets))
    specs = [("reference", t.wire.name, column) for column, t in targets]
    timed: Dict[int, List[float]] = {1: [], spread: []}
    for index in range(max(rounds, 3)):
        for processes in ((1, spread) if index % 2 == 0 else (spread, 1)):
            started = time.perf_counter()
            failures += run_matrix(targets, default, io.StringIO(), processes=processes, specs=specs)
            timed[processes].append(time.perf_counter() - started)
    one, many = statistics.median(timed[1]), statistics.median(timed[spread])
    print(f"  the default matrix in one process: {one:.2f} s; over {spread} processes (the default): "
          f"{many:.2f} s, {one / many:.2f}x; failures in all runs: {failures}")
    return {"best_jobs": best[0] if best else None}


# -- the run ---------------------------------------------------------------------------------


def _versions() -> str:
    from importlib import metadata

    found = []
    for package in ("httpx", "h2", "pytest-httpserver", "werkzeug", "aiohttp", "uvicorn", "h11", "hypercorn"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


# -- app mode beside the backend suite ----------------------------------------------------------

_APP_MODEL = "gpt-4o-mini"


class _AzureSDKBackend:
    """A backend over openai-python's ``AzureOpenAI``, its default retries on, for the suite's side."""

    def __init__(self, url: str) -> None:
        import openai

        started = time.perf_counter()
        self.client = openai.AzureOpenAI(azure_endpoint=url, api_key="test", api_version="2024-10-21")
        self.took = time.perf_counter() - started

    def chat(self, request: Any) -> Any:
        from conformance import ChatResponse, Usage

        tools = [
            {"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": dict(t.parameters)}}
            for t in request.tools
        ]
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        started = time.perf_counter()
        reply = self.client.chat.completions.create(model=request.model, messages=messages, tools=tools)
        self.took += time.perf_counter() - started
        usage = reply.usage
        return ChatResponse(
            content=reply.choices[0].message.content or "",
            finish_reason=reply.choices[0].finish_reason,
            usage=Usage(usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) if usage else None,
        )

    def close(self) -> None:
        self.client.close()


def _app_answer(took: List[float]) -> str:
    import openai

    started = time.perf_counter()
    with openai.AzureOpenAI() as client:
        reply = client.chat.completions.create(
            model=_APP_MODEL, messages=[{"role": "user", "content": "What is the weather?"}]
        )
    took.append(time.perf_counter() - started)
    return reply.choices[0].message.content or ""


def section_app(rounds: int) -> Dict[str, Any]:
    """App mode's run of a 429 with retry-after beside the backend suite's case of it, interleaved."""
    try:
        import openai  # noqa: F401
    except ImportError:
        print("left out: openai is not installed (pip install openai)")
        return {"met": True}
    from conformance.app import FakeProviderEnvironment
    from conformance.cases import BackendConformanceTarget, ConformanceCase
    from conformance.wires import WIRES

    backends: List[_AzureSDKBackend] = []

    def create(url: str) -> _AzureSDKBackend:
        backends.append(_AzureSDKBackend(url))
        return backends[-1]

    wire = WIRES["azure-openai-chat"]
    # The suite plays every shape of a 429 in turn; the app run plays the first that asks
    # for a delay, and so does the suite's side here.
    others = [v.name for v in wire.variants("rate-limit", "chat") if v.name != "retry-after"]
    target = BackendConformanceTarget(
        "openai-python AzureOpenAI, default retries", wire, create, model=_APP_MODEL, retries=True,
        skip={f"rate-limit:{name}": "the app run plays the retry-after shape alone" for name in others},
    )
    case = ConformanceCase(target, "rate-limit", "chat")
    app_ms: List[float] = []
    app_sdk_ms: List[float] = []
    suite_ms: List[float] = []
    suite_sdk_ms: List[float] = []
    failed: List[str] = []
    with FakeProviderEnvironment(timeout=10.0) as env:
        for index in range(rounds):
            for side in _rotate(("app", "suite"), index):
                if side == "app":
                    took: List[float] = []
                    env.script("azure-openai-chat", "rate-limit")
                    started = time.perf_counter()
                    run = env.run(_app_answer, took)
                    app_ms.append(1000 * (time.perf_counter() - started))
                    app_sdk_ms.append(1000 * took[0] if took else float("nan"))
                    if not run.ok:
                        failed.append(f"app mode: {run.report()}")
                else:
                    started = time.perf_counter()
                    try:
                        case.run()
                    except AssertionError as error:
                        failed.append(f"suite: {error}")
                    suite_ms.append(1000 * (time.perf_counter() - started))
                    suite_sdk_ms.append(1000 * backends[-1].took)
            gc.collect()
    app, suite = statistics.median(app_ms), statistics.median(suite_ms)
    app_sdk, suite_sdk = statistics.median(app_sdk_ms), statistics.median(suite_sdk_ms)
    print(f"One 429 asking for 200 ms, twice, then the answer, through openai-python {openai.__version__} "
          f"AzureOpenAI (default retries); median ms over {rounds} round(s)")
    print(f"{'':<34}{'whole':>9}{'SDK':>10}{'on top':>9}   (SDK: the client built and called)")
    print(f"{'app mode (env.run, judged)':<34}{app:>9.1f}{app_sdk:>10.1f}{app - app_sdk:>9.1f}")
    print(f"{'backend suite (case.run)':<34}{suite:>9.1f}{suite_sdk:>10.1f}{suite - suite_sdk:>9.1f}")
    ratio = app / suite if suite > 0 else float("inf")
    met = ratio <= GOAL_APP_RATIO and not failed
    print(f"app mode / suite: {ratio:.2f}x (goal <= {GOAL_APP_RATIO}x): {'met' if met else 'NOT MET'}")
    for line in failed[:2]:
        print(f"  failed: {line}")
    return {"met": met, "app_ms": app, "suite_ms": suite, "ratio": ratio}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds for latency, start/stop, case")
    parser.add_argument("--quick", action="store_true", help="short runs: a smoke check, not numbers")
    parser.add_argument("--section", action="append", choices=SECTIONS, help="only this section")
    parser.add_argument("--pin", type=int, metavar="CPU",
                        help="run every thread on this one CPU (Linux): steadier ratios, since "
                             "unpinned round trips are bimodal (client and server on one core or two)")
    args = parser.parse_args(argv)
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})  # threads started from here on inherit it
    sections = args.section or list(SECTIONS)
    rounds = 2 if args.quick else max(1, args.rounds)
    begun = time.perf_counter()
    print(f"Python {sys.version.split()[0]} on {sys.platform}; {_versions()}")
    placement = f"pinned to CPU {args.pin}" if args.pin is not None else "unpinned"
    print(f"at start: {_load_average()}; loopback only; servers in daemon threads of this process, "
          f"{placement}")
    factories, missing = available()
    for line in missing:
        print(line)
    goals: Dict[str, bool] = {}
    if "latency" in sections or "load" in sections:
        servers: List[Tuple[str, str, Server]] = []
        try:
            for name, transport, factory in factories:
                server = factory()
                server.start()
                servers.append((name, transport, server))
            if "latency" in sections:
                _heading("Per-request latency, interleaved")
                goals["latency"] = section_latency(servers, rounds, 0.1 if args.quick else 0.3)["met"]
            if "load" in sections:
                _heading("50 concurrent streaming clients, interleaved")
                section_load(servers, 1 if args.quick else 3, 0.3 if args.quick else 1.0)
        finally:
            for _, _, server in servers:
                server.stop()
    if "startstop" in sections:
        _heading("Start plus stop, interleaved")
        goals["start + stop"] = section_startstop(factories, rounds, 1 if args.quick else 3)["met"]
    if "case" in sections:
        _heading("The cost of one conformance case, interleaved")
        goals["case"] = section_case(rounds)["met"]
    if "matrix" in sections:
        _heading("The default matrix, interleaved")
        section_matrix(1 if args.quick else 3, 1 if args.quick else 7,
                       (1, 2) if args.quick else (1, 2, 4), (1, 2, 4, 8))
    if "app" in sections:
        _heading("App mode beside the backend suite, one fault, interleaved")
        goals["app"] = section_app(rounds)["met"]
    print(f"\nat end: {_load_average()}; bench took {time.perf_counter() - begun:.0f} s")
    print("goals: " + ", ".join(f"{k} {'met' if v else 'NOT MET'}" for k, v in goals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
