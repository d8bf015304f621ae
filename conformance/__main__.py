"""The command line: the reference matrix, a user's target, or one scenario served.

    python -m conformance                       every case, reference backends, all wires, h1 and h2c
    python -m conformance run MODULE:NAME       a user's BackendConformanceTarget or TestCase class
    python -m conformance serve --wire W --scenario S [--mode M] [--port P] [--http2]

The exit status is 0 only when nothing failed.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import os
import sys
import time
import traceback
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO, Tuple

from .cases import BackendConformanceTarget, ConformanceCase, backend_conformance_cases
from .scenarios import MODES, SCENARIOS

TRANSPORTS = ("http/1.1", "h2c")


def _default_jobs() -> int:
    # Cases wait on sockets far more than they compute; a few at once pay even on 2 cores.
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


def _outcome(case: ConformanceCase) -> Tuple[str, str]:
    """``("pass" | "FAIL" | "skip" | "ERROR", detail)`` for one case."""
    try:
        case.run()
    except unittest.SkipTest as exc:
        return "skip", str(exc)
    except AssertionError as exc:
        return "FAIL", str(exc)
    except Exception:  # noqa: BLE001 - a crash in a case is reported, not raised
        return "ERROR", traceback.format_exc()
    return "pass", ""


def _reference(create: Callable[[str, bool], Any], url: str, *, http2: bool) -> Any:
    return create(url, http2)


def _reference_targets(
    wires: Optional[Sequence[str]], transports: Sequence[str]
) -> List[Tuple[str, BackendConformanceTarget]]:
    from .reference import REFERENCE_BACKENDS
    from .wires import WIRES

    names = list(wires or WIRES)
    unknown = [n for n in names if n not in WIRES]
    if unknown:
        raise SystemExit(f"unknown wire {unknown[0]!r}; known: {', '.join(WIRES)}")
    targets = []
    for name in names:
        for transport in transports:
            http2 = transport == "h2c"
            targets.append(
                (
                    transport,
                    BackendConformanceTarget(
                        name=f"reference {name} over {transport}",
                        wire=WIRES[name],
                        create_backend=functools.partial(_reference, REFERENCE_BACKENDS[name], http2=http2),
                        http2=http2,
                    ),
                )
            )
    return targets


def run_matrix(targets: List[Tuple[str, BackendConformanceTarget]], jobs: int, out: TextIO) -> int:
    """Run every case of every target; print the matrix and the failures; return the exit status."""
    started = time.perf_counter()
    cases = [(column, case) for column, target in targets for case in backend_conformance_cases(target)]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(lambda item: _outcome(item[1]), cases))
    elapsed = time.perf_counter() - started

    # Columns are (wire, transport) pairs, grouped under one heading per wire.
    columns: List[Tuple[str, str]] = []
    for column, target in targets:
        if (target.wire.name, column) not in columns:
            columns.append((target.wire.name, column))
    cells: Dict[Tuple[str, str, str], str] = {}
    failures = []
    for (column, case), (status, detail) in zip(cases, results):
        cells[(case.name, case.target.wire.name, column)] = status
        if status in ("FAIL", "ERROR"):
            failures.append((case, detail))

    rows = [f"{s}/{m}" for s, row in SCENARIOS.items() for m in MODES if m in row.modes]
    first = max(len(r) for r in rows) + 2
    width = max(len(t) for _, t in columns) + 1
    wires: List[str] = []
    for wire, _ in columns:
        if wire not in wires:
            wires.append(wire)
    span = {w: max(width * sum(1 for c in columns if c[0] == w), len(w) + 2) for w in wires}
    per = {w: span[w] // sum(1 for c in columns if c[0] == w) for w in wires}
    out.write("".ljust(first) + "".join(w.ljust(span[w]) for w in wires).rstrip() + "\n")
    out.write("scenario/mode".ljust(first) + "".join(t.ljust(per[w]) for w, t in columns).rstrip() + "\n")
    for row in rows:
        line = row.ljust(first) + "".join(cells.get((row, w, t), "-").ljust(per[w]) for w, t in columns)
        out.write(line.rstrip() + "\n")
    for case, detail in failures:
        out.write(f"\n{case.target.name}, {case.name}:\n{detail}\n")
    counts = {s: sum(1 for r in results if r[0] == s) for s in ("pass", "FAIL", "ERROR", "skip")}
    # Each case runs every variant of its scenario (each real shape) on a fresh provider.
    runs = sum(len(case.variants()) for (_, case), (status, _) in zip(cases, results) if status != "skip")
    out.write(
        f"\n{len(results)} cases: {counts['pass']} passed, {counts['FAIL'] + counts['ERROR']} failed, "
        f"{counts['skip']} skipped in {elapsed:.2f} s ({jobs} at a time); {runs} variant runs\n"
    )
    return 1 if failures else 0


def _load(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"expected MODULE:NAME, e.g. tests.test_gateway:GatewayConformance, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"cannot import {module_name!r}: {exc}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise SystemExit(f"{module_name!r} has no attribute {attribute!r}") from None


def command_run(args: argparse.Namespace, out: TextIO) -> int:
    obj = _load(args.target)
    if isinstance(obj, BackendConformanceTarget):
        return run_matrix([("http/2" if obj.http2 else "http/1.1", obj)], args.jobs, out)
    if isinstance(obj, type) and issubclass(obj, unittest.TestCase):
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(obj)
        result = unittest.TextTestRunner(stream=out, verbosity=2).run(suite)
        return 0 if result.wasSuccessful() else 1
    raise SystemExit(
        f"{args.target} is a {type(obj).__name__}; expected a BackendConformanceTarget or a "
        "unittest.TestCase subclass using BackendConformanceTestCase"
    )


#: What ``serve`` keeps of its request record; older requests are dropped and counted.
SERVE_MAX_REQUESTS = 1000


def command_serve(args: argparse.Namespace, out: TextIO) -> int:
    from .provider import start_fake_provider
    from .provider._server import is_loopback
    from .wires import WIRES

    if args.wire not in WIRES:
        raise SystemExit(f"unknown wire {args.wire!r}; known: {', '.join(WIRES)}")
    if args.scenario not in SCENARIOS:
        raise SystemExit(f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}")
    if args.mode not in SCENARIOS[args.scenario].modes:
        raise SystemExit(f"{args.scenario} runs in {', '.join(SCENARIOS[args.scenario].modes)} mode only")
    if not is_loopback(args.host) and not args.allow_remote:
        raise SystemExit(
            f"refusing to bind {args.host}: the fake provider answers anyone who connects; "
            "add --allow-remote if you mean it"
        )
    wire = WIRES[args.wire]
    if args.scenario in wire.unsupported:
        raise SystemExit(f"{wire.name} has no {args.scenario} scenario: {wire.unsupported[args.scenario]}")

    def handler(request: Any) -> Any:
        out.write(f"{time.strftime('%H:%M:%S')} {request} {len(request.body)} bytes\n")
        out.flush()
        if wire.is_generation(request):
            return wire.reply(args.scenario, args.mode, request)
        return wire.aux_reply(request)

    if not is_loopback(args.host):
        out.write(f"warning: listening on {args.host}, reachable from other machines\n")
        out.flush()
    # A serve session may run for days: keep the newest requests, not all of them.
    provider = start_fake_provider(
        http2=args.http2, host=args.host, port=args.port, allow_remote=args.allow_remote,
        max_requests=SERVE_MAX_REQUESTS,
    )
    with provider:
        provider.reply(handler)
        out.write(
            f"serving {wire.title} {args.scenario}/{args.mode} at {provider.url}"
            f"{' (h2c only)' if args.http2 else ''}; Ctrl-C stops\n"
        )
        out.flush()
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            out.write("stopped\n")
    return 0


def main(argv: Optional[Sequence[str]] = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=_default_jobs(), help="cases run at once")
    parser.add_argument("--wire", action="append", help="only this wire (repeatable)")
    parser.add_argument("--transport", action="append", choices=TRANSPORTS, help="only this transport")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run a user's target or TestCase class")
    run.add_argument("target", metavar="MODULE:NAME")
    run.add_argument("--jobs", type=int, default=_default_jobs())
    serve = sub.add_parser("serve", help="serve one scenario to any client, logging each request")
    serve.add_argument("--wire", required=True)
    serve.add_argument("--scenario", required=True)
    serve.add_argument("--mode", default="chat", choices=MODES)
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    serve.add_argument("--http2", action="store_true", help="speak h2c only")
    args = parser.parse_args(argv)
    if args.command == "run":
        return command_run(args, out)
    if args.command == "serve":
        return command_serve(args, out)
    transports = list(args.transport or TRANSPORTS)
    if "h2c" in transports and importlib.util.find_spec("h2") is None:
        out.write("h2 is not installed: the h2c column is left out (pip install h2)\n")
        transports.remove("h2c")
    return run_matrix(_reference_targets(args.wire, transports), args.jobs, out)


if __name__ == "__main__":
    sys.exit(main())
