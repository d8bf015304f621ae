"""The command line: the reference matrix, a user's target, or one scenario served.

    python -m conformance                       both suites, reference targets, all wires, h1 and h2c
    python -m conformance --suite backend       the backend suite alone (--suite loop: the agent loops)
    python -m conformance run MODULE:NAME       a user's target (backend or agent loop) or TestCase class
    python -m conformance serve --wire W --scenario S [--mode M] [--variant V] [--port P] [--http2]
    python -m conformance serve --wire W --stage STAGE [--mode M] [--timeout S] [--json PATH] [--junit PATH]
    python -m conformance serve --list [--wire W] [--scenario S | --stage STAGE]
    python -m conformance serve --wire openai-chat --servers mistral,groq [--reasoning-content] ...
    python -m conformance record --wire W --upstream URL [--out DIR] [--scenario S] [--port P]
    python -m conformance gate MODULE:NAME [--json PATH] [--markdown PATH] [--junit PATH] [--smoke]

Every command that runs cases takes --json PATH and --junit PATH (JUnit XML), written
whether the cases pass or not; options shared with the top level (--jobs, --processes,
--json, --junit) may stand before the command's name or after it. The reference matrix
and ``serve`` take a shipped wire's configurations too (``--servers``,
``--reasoning-content``: ``_wire_options``); ``run`` and ``gate`` use the target's own wire.

``serve`` judges the client it serves once the client reports how its run ended
(``POST /conformance/outcome``), with the tools at ``POST /conformance/tools/<name>``.

Exit status: 0 when every case passed or was skipped, 1 when a case failed, 2 for a
usage error (an unknown wire or scenario, a MODULE:NAME that does not load).
"""

from __future__ import annotations

import argparse
import dataclasses
import email.utils
import importlib
import importlib.util
import os
import re
import secrets
import sys
import time
import unittest
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from ._results import CaseRecord, check_writable, write_reports
from ._targets import (
    AnyCase,
    AnyTarget,
    TargetSpec,
    UsageError,
    cases_of,
    is_target,
    load,
    preload,
    reference_loop_targets,
    reference_spec,
    reference_targets,
    serve_cases,
    timed_outcome,
    waits_first,
)
from ._wire_options import add_options, as_code, check_chosen, configured, extra_variants, flags_of, given
from .cases import BackendConformanceTarget, ConformanceCase
from .scenarios import MODES, SCENARIOS

TRANSPORTS = ("http/1.1", "h2c")
#: What the reference matrix runs: the backend suite, the agent-loop suite, or both.
SUITES = ("backend", "loop", "both")
#: The reference targets, under the name the benches use.
_reference_targets = reference_targets
#: The outcome colours on a terminal (ANSI SGR codes).
COLOURS = {"pass": "32", "FAIL": "31", "ERROR": "31", "skip": "33"}


def use_colour(out: TextIO) -> bool:
    """Colour only on a terminal, and never where ``NO_COLOR`` is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(out, "isatty", None)
    return bool(callable(isatty) and isatty())


def _paint(text: str, status: str, colour: bool) -> str:
    code = COLOURS.get(status)
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text


def _default_jobs(waiting: bool = False) -> int:
    # Cases wait on sockets far more than they compute; a few at once pay even on 2 cores.
    jobs = max(2, min(8, 2 * (os.cpu_count() or 1)))
    # The gate's cases also wait on purpose (a timeout, retry delays, a hold, a grace):
    # cases that only wait take a slot and no CPU, so a matrix with them runs twice as many.
    return 2 * jobs if waiting else jobs


def _jobs(asked: Optional[int], targets: Sequence[Tuple[str, AnyTarget]]) -> int:
    """``--jobs`` as given, else the default for these targets."""
    if asked is not None:
        return asked
    return _default_jobs(waiting=any(not isinstance(t, BackendConformanceTarget) for _, t in targets))


#: A matrix of this many targets or more is spread over worker processes by default:
#: below it, starting the workers costs more than they save.
AUTO_PROCESSES_FROM = 6


#: The most worker processes the default spreads a matrix over.
MAX_PROCESSES = 8


def _default_processes(targets: int) -> int:
    # Two per CPU: a case runs several threads (the provider's, the driver's, a loop's)
    # that contend for one interpreter lock, so beyond one worker per CPU more workers
    # still shorten the run (both suites on two cores: 11 s over two, 6.5 s over four).
    if targets < AUTO_PROCESSES_FROM:
        return 1
    return max(1, min(2 * (os.cpu_count() or 1), MAX_PROCESSES, targets))


#: How long the matrix waits for a worker process to end once its cases are done.
WORKER_EXIT_WITHIN = 10.0


def _answer(answers: Any, workers: Sequence[Any]) -> Tuple[int, str, Tuple[str, str], float]:
    """The next case a worker process finished; an error if every worker ended with cases left."""
    import queue

    while True:
        try:
            answer: Tuple[int, str, Tuple[str, str], float] = answers.get(timeout=0.5)
            return answer
        except queue.Empty:
            if not any(worker.is_alive() for worker in workers):
                codes = ", ".join(str(worker.exitcode) for worker in workers)
                raise RuntimeError(
                    f"the worker processes ended before their cases did (exit codes {codes})"
                ) from None


def _row(case: AnyCase) -> str:
    """The case's row in the matrix: ``tool-call/stream``, or ``loop forced-tool/stream``."""
    return case.name if isinstance(case, ConformanceCase) else f"loop {case.name}"


def _runs(case: AnyCase) -> int:
    return len(case.variants()) if isinstance(case, ConformanceCase) else 1


def run_matrix(
    targets: Sequence[Tuple[str, AnyTarget]],
    jobs: int,
    out: TextIO,
    colour: bool = False,
    *,
    processes: int = 1,
    specs: Optional[Sequence[TargetSpec]] = None,
    reports: Optional[Dict[str, Any]] = None,
    command: str = "python -m conformance",
) -> int:
    """Run every case of every target; print progress, the matrix and the failures; return the exit status.

    A line goes out at once, and one more as each target finishes, so a run whose
    backend hangs shows what it is doing long before the case's bound is reached.
    With ``processes`` above 1 (and ``specs`` to rebuild each target from), the
    cases are handed out one by one to that many worker processes, each running
    ``jobs`` cases at a time: the cases' own work then uses more than one core. The
    cases that wait on purpose go first, so that their waiting overlaps the rest.
    ``reports`` maps ``--json`` and ``--junit`` to the files to write every case's
    outcome to (see ``_results``), written whether the cases passed or not.
    """
    started = time.perf_counter()
    cases = [(column, case) for column, target in targets for case in cases_of(target)]
    noun = "target" if len(targets) == 1 else "targets"
    spread = processes > 1 and specs is not None
    how = f"{jobs} at a time" + (f" in each of {processes} processes" if spread else "")
    out.write(f"running {len(cases)} cases of {len(targets)} {noun}, {how}\n")
    out.flush()
    results: List[Tuple[str, str]] = [("", "")] * len(cases)
    seconds: List[float] = [0.0] * len(cases)
    position = {(id(case.target), case.name): index for index, (_, case) in enumerate(cases)}
    left = {id(target): 0 for _, target in targets}
    for _, case in cases:
        left[id(case.target)] += 1

    def done(target: AnyTarget, name: str, result: Tuple[str, str], took: float) -> None:
        results[position[(id(target), name)]] = result
        seconds[position[(id(target), name)]] = took
        left[id(target)] -= 1
        if left[id(target)] == 0:
            mine = [r[0] for (_, c), r in zip(cases, results) if c.target is target]
            failed = sum(1 for r in mine if r in ("FAIL", "ERROR"))
            line = (
                f"{target.name}: {mine.count('pass')} passed, {failed} failed, {mine.count('skip')} "
                f"skipped ({time.perf_counter() - started:.1f} s)"
            )
            out.write(_paint(line, "FAIL" if failed else "pass", colour) + "\n")
            out.flush()

    if spread:
        assert specs is not None
        import multiprocessing
        import threading

        # A fork starts a worker at once, with everything imported; it is safe only while
        # this process runs no other thread (the command line's case). Anywhere else
        # (a test runner, an application) spawn a fresh interpreter instead.
        forkable = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
        context: Any = multiprocessing.get_context("fork" if forkable else "spawn")
        if forkable:
            preload(targets)  # once here, rather than once in every worker
        tasks: Any = context.Queue()
        answers: Any = context.Queue()
        workers = [
            context.Process(target=serve_cases, args=(specs, tasks, answers, jobs), daemon=True)
            for _ in range(processes)
        ]
        for worker in workers:
            worker.start()
        # Handed out case by case, those that wait on purpose first, so that every process
        # stays busy to the end; only once the workers run (the queue's thread is no fork's).
        index_of = {id(target): index for index, (_, target) in enumerate(targets)}
        for _, case in sorted(cases, key=lambda item: waits_first(item[1])):
            tasks.put((index_of[id(case.target)], case.name))
        for _ in range(processes * max(1, jobs)):
            tasks.put(None)
        try:
            for _ in cases:
                index, name, result, took = _answer(answers, workers)
                done(targets[index][1], name, result, took)
        finally:
            for worker in workers:
                worker.join(WORKER_EXIT_WITHIN)
                if worker.is_alive():
                    worker.terminate()
                    worker.join()
            tasks.close()
            answers.close()
    else:
        from ._loops import kept_loops

        with kept_loops(), ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            ordered = sorted((case for _, case in cases), key=waits_first)
            futures = {pool.submit(timed_outcome, case): case for case in ordered}
            for future in as_completed(futures):
                case = futures[future]
                status, detail, took = future.result()
                done(case.target, case.name, (status, detail), took)
    elapsed = time.perf_counter() - started
    out.write("\n")

    # Columns are (wire, transport) pairs, grouped under one heading per wire.
    columns: List[Tuple[str, str]] = []
    for column, target in targets:
        if (target.wire.name, column) not in columns:
            columns.append((target.wire.name, column))
    cells: Dict[Tuple[str, str, str], str] = {}
    failures = []
    skips: Dict[str, List[str]] = {}
    for (column, case), (status, detail) in zip(cases, results):
        cells[(_row(case), case.target.wire.name, column)] = status
        if status in ("FAIL", "ERROR"):
            failures.append((case, detail))
        elif status == "skip":
            skips.setdefault(detail, []).append(f"{case.target.wire.name} {column} {case.name}")

    rows: List[str] = []
    if any(isinstance(case, ConformanceCase) for _, case in cases):
        rows += [f"{s}/{m}" for s, row in SCENARIOS.items() for m in MODES if m in row.modes]
    if any(not isinstance(case, ConformanceCase) for _, case in cases):
        from .gate.stages import LOOP_MODES, STAGES

        rows += [f"loop {s}/{m}" for s, stage in STAGES.items() for m in LOOP_MODES if m in stage.modes]
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
        line = row.ljust(first)
        for w, t in columns:
            status = cells.get((row, w, t), "-")
            # Pad before painting: the escape codes take no room on screen.
            line += _paint(status, status, colour) + " " * (per[w] - len(status))
        out.write(line.rstrip() + "\n")
    if skips:
        out.write("\nskipped:\n")
        for reason, where in skips.items():
            shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
            out.write(f"  {reason}: {shown}\n")
    for case, detail in failures:
        out.write(f"\n{_paint(f'{case.target.name}, {case.name}:', 'FAIL', colour)}\n{detail}\n")
    counts = {s: sum(1 for r in results if r[0] == s) for s in ("pass", "FAIL", "ERROR", "skip")}
    # Each case runs every variant of its scenario (each real shape) on a fresh provider.
    runs = sum(_runs(case) for (_, case), (status, _) in zip(cases, results) if status != "skip")
    out.write(
        f"\n{len(results)} cases: {counts['pass']} passed, {counts['FAIL'] + counts['ERROR']} failed, "
        f"{counts['skip']} skipped in {elapsed:.2f} s ({how}); {runs} variant runs\n"
    )
    if reports:
        records = [
            CaseRecord(
                target=case.target.name,
                case=case.name,
                outcome=status,
                detail=detail,
                seconds=took,
                suite="backend" if isinstance(case, ConformanceCase) else "loop",
                wire=case.target.wire.name,
            )
            for (_, case), (status, detail), took in zip(cases, results, seconds)
        ]
        _write(records, reports, command, elapsed, out)
    return 1 if failures else 0


def _write(
    records: List[CaseRecord], reports: Dict[str, Any], command: str, elapsed: float, out: TextIO
) -> None:
    """Write the ``--json`` and ``--junit`` files asked for, and say so."""
    try:
        written = write_reports(
            records,
            json_path=reports.get("--json"),
            junit_path=reports.get("--junit"),
            command=command,
            seconds=elapsed,
        )
    except OSError as exc:
        raise UsageError(f"cannot write the results: {exc}") from None
    for kind, path in written:
        out.write(f"wrote {kind} to {path}\n")
    out.flush()


def report_paths(args: argparse.Namespace) -> Dict[str, Any]:
    """The ``--json`` and ``--junit`` files asked for, checked before any case runs."""
    try:
        asked = {option: getattr(args, option[2:], None) for option in ("--json", "--junit")}
        return check_writable(asked)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


class _RecordingResult(unittest.TextTestResult):
    """unittest's own result, which also keeps each test's outcome and time for the reports."""

    records: List[CaseRecord]

    def startTest(self, test: unittest.TestCase) -> None:  # noqa: N802 - unittest's name
        self._started = time.perf_counter()
        super().startTest(test)

    def _keep(self, test: Any, outcome: str, detail: str = "") -> None:
        took = time.perf_counter() - getattr(self, "_started", time.perf_counter())
        name = test.id()
        target, _, case = name.rpartition(".")
        self.records.append(CaseRecord(target or name, case or name, outcome, detail, took))

    def addSuccess(self, test: unittest.TestCase) -> None:  # noqa: N802
        super().addSuccess(test)
        self._keep(test, "pass")

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:  # noqa: N802
        super().addFailure(test, err)
        self._keep(test, "FAIL", self.failures[-1][1])

    def addError(self, test: unittest.TestCase, err: Any) -> None:  # noqa: N802
        super().addError(test, err)
        self._keep(test, "ERROR", self.errors[-1][1])

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:  # noqa: N802
        super().addSkip(test, reason)
        self._keep(test, "skip", reason)

    def addExpectedFailure(self, test: unittest.TestCase, err: Any) -> None:  # noqa: N802
        super().addExpectedFailure(test, err)
        self._keep(test, "pass", "expected failure: " + self.expectedFailures[-1][1])

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:  # noqa: N802
        super().addUnexpectedSuccess(test)
        self._keep(test, "FAIL", "unexpected success: the test is marked as an expected failure")

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:  # noqa: N802
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            listed = self.failures if failed else self.errors
            self._keep(subtest, "FAIL" if failed else "ERROR", listed[-1][1])


def command_run(args: argparse.Namespace, out: TextIO) -> int:
    reports = report_paths(args)
    obj = load(args.target)
    command = f"python -m conformance run {args.target}"
    if is_target(obj):
        column = "http/2" if obj.http2 else "http/1.1"
        return run_matrix(
            [(column, obj)],
            _jobs(args.jobs, [(column, obj)]),
            out,
            use_colour(out),
            processes=args.processes or 1,
            specs=[("load", args.target)],
            reports=reports,
            command=command,
        )
    if isinstance(obj, type) and issubclass(obj, unittest.TestCase):
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(obj)
        out.write(f"running {suite.countTestCases()} tests of {obj.__qualname__}\n")
        out.flush()
        records: List[CaseRecord] = []

        def recording(*a: Any, **k: Any) -> _RecordingResult:
            result = _RecordingResult(*a, **k)
            result.records = records
            return result

        started = time.perf_counter()
        runner = unittest.TextTestRunner(stream=out, verbosity=2, resultclass=recording)
        result = runner.run(suite)
        if reports:
            _write(records, reports, command, time.perf_counter() - started, out)
        return 0 if result.wasSuccessful() else 1
    raise UsageError(
        f"{args.target} is a {type(obj).__name__}; expected a BackendConformanceTarget, an "
        "AgentLoopTarget, or a unittest.TestCase subclass using BackendConformanceTestCase or "
        "AgentLoopConformanceTestCase"
    )


#: What ``serve`` keeps of its request record; older requests are dropped and counted.
SERVE_MAX_REQUESTS = 1000

#: Headers that carry a request id, by lower-case name, on the wires that send one.
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid")


def fresh_request_id(like: str) -> str:
    """A new id in the shape of ``like``: a UUID for a UUID, else its prefix and new characters."""
    if re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", like):
        return str(uuid.uuid4())
    prefix, _, rest = like.rpartition("_")
    body = secrets.token_hex(max(12, len(rest)))[: max(12, len(rest))]
    return f"{prefix}_{body}" if prefix else body


def served(reply: Any) -> Any:
    """``reply`` as ``serve`` sends it: a fresh request id and the current ``date`` on each response.

    The wires answer with fixed ids and dates so that the cases read the same on
    every run; a client pointed at ``serve`` sees what a live provider sends instead.
    """
    from .provider import JsonReply, StreamReply

    if not isinstance(reply, (JsonReply, StreamReply)):
        return reply  # a HangReply sends no headers at all
    headers = {k: v for k, v in (reply.headers or {}).items() if k.lower() != "date"}
    ids = [k for k in headers if k.lower() in _REQUEST_ID_HEADERS]
    for name in ids:
        headers[name] = fresh_request_id(headers[name])
    if not ids:
        headers["x-request-id"] = fresh_request_id("req_")
    headers["date"] = email.utils.formatdate(usegmt=True)
    return dataclasses.replace(reply, headers=headers)


def _configured(settings: Dict[str, Dict[str, Any]], wires: Optional[Sequence[str]], where: str) -> None:
    """A usage error where the wire options configure a wire the command does not play."""
    try:
        check_chosen(settings, wires, where)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def command_serve(args: argparse.Namespace, out: TextIO, settings: Dict[str, Dict[str, Any]]) -> int:
    from .gate.tools import GateToolset
    from .provider._server import is_loopback
    from .wires import WIRES

    if args.wire is not None and args.wire not in WIRES:
        raise UsageError(f"unknown wire {args.wire!r}; known: {', '.join(WIRES)}")
    _configured(settings, [args.wire] if args.wire else None, "serve plays")
    if args.list:
        names = [args.wire] if args.wire else list(WIRES)
        listing(out, [configured(name, settings) for name in names], args.scenario, args.stage)
        return 0
    reports = report_paths(args)
    if args.scenario is not None and args.stage is not None:
        raise UsageError("give --scenario (a backend scenario) or --stage (an agent-loop stage), not both")
    if args.wire is None or (args.scenario is None and args.stage is None):
        asked = (("--wire", args.wire), ("--scenario or --stage", args.scenario or args.stage))
        missing = " and ".join(n for n, v in asked if not v)
        raise UsageError(f"serve needs {missing} (or --list, to see what each wire plays)")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if not is_loopback(args.host) and not args.allow_remote:
        raise UsageError(
            f"refusing to bind {args.host}: the fake provider answers anyone who connects; "
            "add --allow-remote if you mean it"
        )
    if args.stage is not None and settings:
        flags = " ".join(flags_of(configured(args.wire, settings)))
        raise UsageError(
            f"{flags} adds shapes to the backend scenarios (their variants); an agent-loop stage plays "
            f"the same conversation on every configuration of {args.wire}: leave {flags.split()[0]} out "
            "with --stage"
        )
    wire = configured(args.wire, settings)
    with GateToolset(run_id=args.run_id) as toolset:
        session, title = _serve_session(args, wire, toolset)
        try:
            return _serve_run(session, title, wire, reports, args, out)
        finally:
            session.close()


def _serve_run(
    session: Any, title: str, wire: Any, reports: Dict[str, Any], args: argparse.Namespace, out: TextIO
) -> int:
    """Serve until the client reports (or ``--timeout``, or Ctrl-C); print and write the verdict."""
    from .provider import start_fake_provider
    from .provider._server import is_loopback

    if not is_loopback(args.host):
        out.write(f"warning: listening on {args.host}, reachable from other machines\n")
        out.flush()

    def handler(request: Any) -> Any:
        out.write(f"{time.strftime('%H:%M:%S')} {request} {len(request.body)} bytes\n")
        out.flush()
        return session.handle(request)

    # A serve session may run for days: keep the newest requests, not all of them.
    provider = start_fake_provider(
        http2=args.http2,
        host=args.host,
        port=args.port,
        allow_remote=args.allow_remote,
        max_requests=SERVE_MAX_REQUESTS,
    )
    with provider:
        session.attach(lambda: provider.requests)
        provider.reply(handler)
        until = f"POST {provider.url}/conformance/outcome ends the run"
        bound = f" (or {args.timeout:g} s pass)" if args.timeout is not None else ""
        shown = " ".join(flags_of(wire))
        out.write(
            f"serving {wire.title}{f' ({shown})' if shown else ''} {title} at {provider.url}"
            f"{' (h2c only)' if args.http2 else ''}; {until}{bound}; Ctrl-C stops\n"
        )
        out.flush()
        printed: Dict[int, Any] = {}
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        try:
            while not session.done.is_set():
                # Also a moment for the client to read its verdict and say no more before the
                # port closes, which is why this sleeps rather than waits on the report.
                time.sleep(PRINT_EVERY)
                _print_events(provider.requests, printed, out)
                if deadline is not None and time.monotonic() > deadline:
                    out.write(f"no outcome reported within {args.timeout:g} s\n")
                    session.give_up()
                    break
        except KeyboardInterrupt:
            out.write("stopped\n")
            return 0
        # Let the client read its verdict before the port closes.
        _answered(provider.requests)
        _print_events(provider.requests, printed, out)
    verdict = session.verdict
    assert verdict is not None
    return _say_verdict(verdict, reports, args, out, wire)


def _serve_session(args: argparse.Namespace, wire: Any, toolset: Any) -> Tuple[Any, str]:
    """The judge's session for ``serve``'s scenario or stage, and the title it is served under."""
    from ._judge import BackendSession
    from .gate._remote import StageSession

    common: Dict[str, Any] = {
        "model": args.model,
        "http2": args.http2,
        "timeout": args.timeout or DEFAULT_CLIENT_TIMEOUT,
        "dress": served,
    }
    if args.stage is not None:
        from .gate.stages import STAGES

        if args.stage not in STAGES:
            hint = f"; it is a backend scenario: --scenario {args.stage}" if args.stage in SCENARIOS else ""
            raise UsageError(f"unknown stage {args.stage!r}; known: {', '.join(STAGES)}{hint}")
        if args.mode not in STAGES[args.stage].modes:
            raise UsageError(f"{args.stage} runs in {', '.join(STAGES[args.stage].modes)} mode only")
        if args.variant:
            raise UsageError("--variant chooses a backend scenario's shape; a stage has one script")
        from .errors import TargetDefinitionError

        try:
            stage_session = StageSession(
                wire, args.stage, args.mode, toolset, max_result_chars=args.max_result_chars, **common
            )
        except TargetDefinitionError as exc:  # a --max-result-chars below 1
            raise UsageError(str(exc).replace("max_result_chars", "--max-result-chars")) from None
        skip = stage_session.case.skip
        if skip:
            raise UsageError(f"{wire.name} does not play the {args.stage} stage in {args.mode} mode: {skip}")
        return stage_session, f"stage {args.stage}/{args.mode}"
    if args.scenario not in SCENARIOS:
        from .gate.stages import STAGES

        hint = f"; it is an agent-loop stage: --stage {args.scenario}" if args.scenario in STAGES else ""
        raise UsageError(f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}{hint}")
    if args.mode not in SCENARIOS[args.scenario].modes:
        raise UsageError(f"{args.scenario} runs in {', '.join(SCENARIOS[args.scenario].modes)} mode only")
    absent = wire.absent(args.scenario)
    if absent is not None:
        raise UsageError(f"{wire.name} has no {args.scenario} scenario: {absent}")
    variant = chosen_variant(wire, args.scenario, args.mode, args.variant)
    shape = f" [{variant.name}: {variant.title}]" if variant.name else ""
    session = BackendSession(wire, args.scenario, args.mode, variant, toolset, **common)
    return session, f"{args.scenario}/{args.mode}{shape}"


#: The bound ``serve`` gives a client's run when ``--timeout`` is not set, as a
#: target's default ``timeout``: the task's ``max_seconds`` is most of it.
DEFAULT_CLIENT_TIMEOUT = 5.0


#: How often ``serve`` prints the events the provider sent, while it waits for the report.
PRINT_EVERY = 0.05


def _answered(requests: List[Any], within: float = 1.0) -> None:
    """Wait, bounded, until the report's answer (the verdict) has gone out."""
    deadline = time.monotonic() + within
    for request in requests:
        if request.path == "/conformance/outcome":
            # Its one chunk, the verdict, flushed; at once where it never will be (the client left).
            request.wait_flushed(1, max(0.0, deadline - time.monotonic()))


def _say_verdict(
    verdict: Any, reports: Dict[str, Any], args: argparse.Namespace, out: TextIO, wire: Any
) -> int:
    record = verdict.record
    words = {"pass": "passed", "FAIL": "FAILED", "ERROR": "ERROR", "skip": "skipped"}[record.outcome]
    line = f"verdict: {record.wire} {record.case} {words}"
    if verdict.checks:
        line += f" [{', '.join(verdict.checks)}]"
    out.write("\n" + _paint(line, record.outcome, use_colour(out)) + "\n")
    if record.detail:
        out.write(record.detail + "\n")
    if reports:
        shown = "".join(f" {flag}" for flag in flags_of(wire))
        command = f"python -m conformance serve --wire {args.wire}{shown} " + (
            f"--stage {args.stage}" if args.stage else f"--scenario {args.scenario}"
        )
        _write([record], reports, f"{command} --mode {args.mode}", record.seconds, out)
    out.flush()
    return 1 if verdict.failed else 0


def chosen_variant(wire: Any, scenario: str, mode: str, name: Optional[str]) -> Any:
    """The variant ``serve --variant`` names (the first shape when none is named)."""
    variants = wire.variants(scenario, mode)
    if not name:
        return variants[0]
    for variant in variants:
        if variant.name == name:
            return variant
    import difflib

    names = [v.name for v in variants if v.name]
    wanted = (scenario, mode, name)
    elsewhere = [needs for s, m, _, v, needs in extra_variants(wire) if (s, m, v.name) == wanted]
    if elsewhere:
        raise UsageError(
            f"{wire.name} plays the variant {name!r} of {scenario}/{mode} only with {elsewhere[0]}: add it"
        )
    if not names:
        raise UsageError(f"{wire.name} answers {scenario}/{mode} in one shape only: leave --variant out")
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"its variants: {', '.join(names)}"
    raise UsageError(f"{wire.name} has no variant {name!r} of {scenario}/{mode}; {hint}")


def listing(
    out: TextIO, wires: Sequence[Any], scenario: Optional[str] = None, stage: Optional[str] = None
) -> None:
    """``serve --list``: every scenario and mode each wire plays, with each variant and its source;
    then every agent-loop stage and mode it plays (``serve --stage``), or why not.

    ``--scenario`` narrows the list to one scenario, ``--stage`` to one stage.
    """
    from .gate.stages import LOOP_MODES, STAGES

    if scenario is not None and scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    if stage is not None and stage not in STAGES:
        raise UsageError(f"unknown stage {stage!r}; known: {', '.join(STAGES)}")
    for wire in wires:
        shown = " ".join(flags_of(wire))
        out.write(f"{wire.name} ({wire.title}){f', with {shown}' if shown else ''}:\n")
        for name, row in SCENARIOS.items():
            if stage is not None or (scenario is not None and name != scenario):
                continue
            absent = wire.absent(name)
            if absent is not None:
                out.write(f"  {name}: not played ({absent})\n")
                continue
            for mode in row.modes:
                variants = wire.variants(name, mode)
                named = [v for v in variants if v.name]
                if not named:
                    out.write(f"  {name} --mode {mode}{_NOT_JUDGED_NOTE.get(name, '')}\n")
                    continue
                for index, v in enumerate(named):
                    first = " (the default)" if index == 0 else ""
                    source = f"; seen in {v.source}" if v.source else ""
                    out.write(f"  {name} --mode {mode} --variant {v.name}{first}: {v.title}{source}\n")
        if stage is None and not flags_of(wire):
            _list_extra_variants(out, wire, scenario)
        if scenario is not None:
            continue
        for name, stage_row in STAGES.items():
            if stage is not None and name != stage:
                continue
            for mode in LOOP_MODES:
                if mode not in stage_row.modes:
                    continue
                skip = _stage_skip(wire, name, mode)
                played = f": not played ({skip})" if skip else _NOT_JUDGED_NOTE.get(name, "")
                out.write(f"  --stage {name} --mode {mode}{played}\n")
    out.flush()


def _list_extra_variants(out: TextIO, wire: Any, scenario: Optional[str]) -> None:
    """The variants ``wire`` plays only when a wire option configures it, each with the options."""
    extra = [row for row in extra_variants(wire) if scenario is None or row[0] == scenario]
    if not extra:
        return
    out.write(f"  with a configuration of {wire.name} (give its option to serve one):\n")
    for name, mode, place, v, needs in extra:
        first = ", the default" if place == 0 else ""
        source = f"; seen in {v.source}" if v.source else ""
        out.write(f"  {name} --mode {mode} --variant {v.name} (with {needs}{first}): {v.title}{source}\n")


#: What ``serve --list`` adds to a case it serves but cannot judge (``_judge.NOT_JUDGED``).
_NOT_JUDGED_NOTE = {
    "abort": " (served, not judged: the abort fires the caller's signal inside the client)",
    "cancel": " (served, not judged: the cancel needs the caller's own signal or task)",
}


def _stage_skip(wire: Any, stage: str, mode: str) -> Optional[str]:
    """Why ``wire`` does not play ``stage`` in ``mode`` (the gate's own skip reason), or ``None``."""
    from ._judge import elsewhere
    from .gate.cases import AgentLoopCase
    from .gate.loop import AgentLoopTarget

    return AgentLoopCase(AgentLoopTarget("serve", wire, elsewhere), stage, mode).skip


def _print_events(requests: List[Any], printed: Dict[int, Any], out: TextIO) -> None:
    """Print the event log of each reply that has gone out (or whose client left), once."""
    for request in requests:
        log = request.response
        if id(request) in printed or log is None or not (log.complete() or request.closed):
            continue
        printed[id(request)] = request  # kept so that the id is not reused while listed
        out.write(f"  sent {log.status} {log.content_type} for {request}:\n")
        for event in request.events:
            out.write(f"    {event.describe(request.received_at)}\n")
        out.flush()
    if len(printed) > 2 * SERVE_MAX_REQUESTS:
        alive = {id(r) for r in requests}
        for key in [k for k in printed if k not in alive]:
            del printed[key]


def command_record(args: argparse.Namespace, out: TextIO) -> int:
    """A loopback recording proxy in front of a real provider; one fixture per exchange."""
    import ssl

    from .gate.record import Recorder
    from .wires import WIRES

    if args.wire not in WIRES:
        raise UsageError(f"unknown wire {args.wire!r}; known: {', '.join(WIRES)}")
    from .gate.stages import STAGES

    if args.scenario is not None and args.scenario not in SCENARIOS and args.scenario not in STAGES:
        raise UsageError(
            f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}; or an agent-loop "
            f"stage: {', '.join(STAGES)}"
        )
    context = ssl.create_default_context(cafile=args.cafile) if args.cafile else None
    try:
        recorder = Recorder(
            WIRES[args.wire],
            args.upstream,
            args.out,
            port=args.port,
            ssl_context=context,
            scenario=args.scenario,
            run_id=args.run_id,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    with recorder:
        out.write(
            f"recording {args.wire} at {recorder.url} -> {recorder.base_url}, fixtures in "
            f"{args.out}; point the backend's base URL here; Ctrl-C stops\n"
        )
        out.flush()
        shown = 0
        try:
            while True:
                time.sleep(0.2)
                written = recorder.written
                for path in written[shown:]:
                    out.write(f"  wrote {path}\n")
                shown = len(written)
                out.flush()
        except KeyboardInterrupt:
            out.write(f"stopped; {len(recorder.written)} fixtures written\n")
    return 0


def _gate_parser(sub: Any) -> argparse.ArgumentParser:
    # The defaults are spelt here, not imported, so that building the parser stays cheap.
    gate: argparse.ArgumentParser = sub.add_parser(
        "gate",
        help="run a target's gate and write the release report (JSON and Markdown)",
        description="Run a target's cases and write a JSON report and a Markdown summary for a pull "
        "request. Use --smoke after a configuration change (a few seconds: plain text and one tool "
        "turn, chat and stream); run the full matrix after an SDK, schema, gateway or parser change.",
        epilog="exit status: 0 all passed (or skipped), 1 a case failed, 2 a usage error",
    )
    gate.add_argument(
        "target", metavar="MODULE:NAME", help="an AgentLoopTarget or a BackendConformanceTarget"
    )
    # SUPPRESS: the same options given before "gate" stand unless given again after it.
    gate.add_argument(
        "--json",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="default: conformance-report.json in the working directory",
    )
    gate.add_argument(
        "--junit",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="also write every case's outcome as JUnit XML, the form CI systems show",
    )
    gate.add_argument(
        "--markdown", metavar="PATH", help="default: conformance-report.md in the working directory"
    )
    gate.add_argument("--smoke", action="store_true", help="the short set, for a configuration change")
    gate.add_argument("--jobs", type=int, default=argparse.SUPPRESS, metavar="N", help="cases run at once")
    gate.add_argument(
        "--client",
        metavar="PACKAGE",
        help="report this client package's version (default: the target's client attribute)",
    )
    return gate


def command_gate(args: argparse.Namespace, out: TextIO) -> int:
    from .gate.report import DEFAULT_JSON, DEFAULT_MARKDOWN, command

    junit = report_paths(argparse.Namespace(junit=getattr(args, "junit", None))).get("--junit")
    return command(
        args.target,
        json_path=getattr(args, "json", None) or DEFAULT_JSON,
        junit_path=junit,
        markdown_path=args.markdown or DEFAULT_MARKDOWN,
        smoke=args.smoke,
        jobs=args.jobs if args.jobs is not None else _default_jobs(),
        client=args.client,
        out=out,
    )


#: Options every command that runs cases takes, before or after the command's name.
_RESULT_OPTIONS = (
    ("--json", "write every case's outcome to this file as JSON (written even when cases fail)"),
    ("--junit", "write every case's outcome to this file as JUnit XML, the form CI systems show"),
)


def _shared_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options a command shares with the top level.

    Under a command they default to :data:`argparse.SUPPRESS`, so that one given
    before the command's name (``--jobs 2 run X``) is not undone by the command's
    own default.
    """
    default: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--jobs",
        type=int,
        default=default,
        metavar="N",
        help="cases run at once (per process; default: two per CPU, from 2 to 8, and twice that "
        "with the agent-loop suite, whose cases also wait on purpose)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=default,
        metavar="N",
        help="spread the targets over this many worker processes (default: two per CPU, up to "
        f"{MAX_PROCESSES}, for a matrix of at least {AUTO_PROCESSES_FROM} targets, else none)",
    )
    for option, text in _RESULT_OPTIONS:
        parser.add_argument(option, default=default, metavar="PATH", help=text)


def _misplaced(
    argv: Sequence[str], parser: argparse.ArgumentParser, commands: Dict[str, Any]
) -> Optional[str]:
    """Why an option given before the command's name cannot stand there, or ``None``.

    argparse reads such an option's value as the command (``invalid choice: 'x.json'``);
    this names the option and where it goes instead.
    """
    known = {s for action in parser._actions for s in action.option_strings}
    named = next((i for i, a in enumerate(argv) if a in commands), None)
    before = list(argv[:named]) if named is not None else list(argv)
    for arg in before:
        if not arg.startswith("--"):
            continue
        option = arg.split("=", 1)[0]
        if option in known:
            continue
        owners = [
            name
            for name, sub in commands.items()
            if option in {s for action in sub._actions for s in action.option_strings}
        ]
        if owners:
            return f"{option} belongs to the {' and '.join(owners)} command: put it after the command's name"
        return f"unknown option {option}; see --help"
    return None


def main(argv: Optional[Sequence[str]] = None, out: TextIO = sys.stdout) -> int:
    from .wires import WIRES

    wires = ", ".join(WIRES)
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m conformance",
        description=__doc__.split("\n\n")[0],
        epilog="exit status: 0 all passed (or skipped), 1 a case failed, 2 a usage error",
    )
    _shared_options(parser, suppress=False)
    parser.add_argument("--wire", action="append", help=f"only this wire (repeatable): one of {wires}")
    add_options(parser)
    parser.add_argument("--transport", action="append", choices=TRANSPORTS, help="only this transport")
    parser.add_argument(
        "--suite",
        choices=SUITES,
        default="both",
        help="the backend suite, the agent-loop suite, or both (the default)",
    )
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run a user's target or TestCase class (either suite)")
    run.add_argument(
        "target",
        metavar="MODULE:NAME",
        help="a BackendConformanceTarget, an AgentLoopTarget, or a TestCase class using either mixin",
    )
    _shared_options(run, suppress=True)
    add_options(run, suppress=True, hidden=True)  # taken only to be refused with the reason
    serve = sub.add_parser(
        "serve",
        help="serve one scenario or agent-loop stage to a client in any language, and judge it",
        description="Serve one backend scenario (--scenario) or one agent-loop stage (--stage) of the "
        "gate to a client in any language, logging each request. On the same port: GET "
        "/conformance/task says what to run, POST /conformance/tools/<name> runs the gate's tools, and "
        "POST /conformance/outcome (the client's result) ends the run with the verdict the Python "
        "suite would give, printed, answered and written to --json and --junit.",
        epilog="exit status: 0 the client passed (or the case cannot be judged from outside, or Ctrl-C), "
        "1 a check failed, 2 a usage error",
    )
    serve.add_argument("--wire", help=f"one of {wires}")
    add_options(serve, suppress=True)
    serve.add_argument("--scenario", help=f"a backend scenario: one of {', '.join(SCENARIOS)}")
    serve.add_argument(
        "--stage",
        help="an agent-loop stage of the gate (the scripted multi-turn conversations; see --list)",
    )
    serve.add_argument("--mode", default="chat", choices=MODES)
    serve.add_argument(
        "--variant",
        metavar="NAME",
        help="the real shape to answer in, where the scenario has several (default: the first; see --list)",
    )
    serve.add_argument(
        "--list",
        action="store_true",
        help="list every scenario, mode and variant, and every agent-loop stage, the wire plays (every "
        "wire without --wire), and exit",
    )
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    serve.add_argument("--http2", action="store_true", help="speak h2c only")
    serve.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="end the run after this long even if no outcome was reported (then judged as a client still "
        f"running); also the run's bound, of which the task's max_seconds is 80%% (default "
        f"{DEFAULT_CLIENT_TIMEOUT:g} s, and no end)",
    )
    serve.add_argument("--model", default="conformance-model", help="the model the client must name")
    serve.add_argument(
        "--max-result-chars",
        type=int,
        metavar="N",
        help="the client's loop cuts tool results to this many characters (the large-result stage)",
    )
    serve.add_argument(
        "--run-id", help="the tools' run id, so that fixture ids repeat from run to run (default: random)"
    )
    for option, text in _RESULT_OPTIONS:
        serve.add_argument(option, default=argparse.SUPPRESS, metavar="PATH", help="the verdict: " + text)
    record = sub.add_parser("record", help="record a real provider's answers as replayable fixtures")
    record.add_argument("--wire", required=True)
    record.add_argument(
        "--upstream", required=True, metavar="URL", help="the provider, e.g. https://api.openai.com"
    )
    record.add_argument("--out", default="fixtures", metavar="DIR", help="where fixtures are written")
    record.add_argument(
        "--scenario",
        help="stamp each fixture with the conformance scenario (or agent-loop stage) it stands for",
    )
    record.add_argument(
        "--run-id",
        help="stamp each fixture with the GateToolset run id the recorded loop ran its tools with, "
        "so that replayed tool results repeat",
    )
    record.add_argument("--port", type=int, default=0)
    add_options(record, suppress=True, hidden=True)
    record.add_argument("--cafile", help="trust this CA bundle for the upstream (default: the system's)")
    gate = _gate_parser(sub)
    add_options(gate, suppress=True, hidden=True)
    commands = {"run": run, "serve": serve, "record": record, "gate": gate}
    misplaced = _misplaced(argv, parser, commands)
    if misplaced is not None:
        parser.error(misplaced)
    args = parser.parse_args(argv)
    try:
        try:
            settings = given(args)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if settings and args.command in ("gate", "record", "run"):
            flags = " ".join(f for name in settings for f in flags_of(configured(name, settings)))
            raise UsageError(
                f"{flags} configure a shipped wire for the reference matrix and serve; {args.command} "
                f"uses the target's own wire: give the target wire={as_code(settings)}"
            )
        if args.command == "gate":
            return command_gate(args, out)
        if args.command == "record":
            return command_record(args, out)
        if args.command == "run":
            return command_run(args, out)
        if args.command == "serve":
            return command_serve(args, out, settings)
        reports = report_paths(args)
        _configured(settings, args.wire, "the matrix runs")
        transports = list(args.transport or TRANSPORTS)
        if "h2c" in transports and importlib.util.find_spec("h2") is None:
            out.write("h2 is not installed: the h2c column is left out (pip install h2)\n")
            transports.remove("h2c")
        targets: List[Tuple[str, AnyTarget]] = []
        specs: List[TargetSpec] = []
        if args.suite in ("backend", "both"):
            targets += reference_targets(args.wire, transports, settings)
            specs += [reference_spec("reference", t.wire.name, column, settings) for column, t in targets]
        if args.suite in ("loop", "both"):
            # The agent-loop suite beside the backend suite: the reference loop over each backend.
            loops = reference_loop_targets(args.wire, transports, settings)
            targets += loops
            specs += [reference_spec("reference-loop", t.wire.name, column, settings) for column, t in loops]
        processes = args.processes if args.processes is not None else _default_processes(len(targets))
        return run_matrix(
            targets,
            _jobs(args.jobs, targets),
            out,
            use_colour(out),
            processes=processes,
            specs=specs,
            reports=reports,
        )
    except UsageError as exc:
        chosen = commands.get(args.command, parser)
        chosen.error(str(exc))
    return 2  # parser.error() exits; this line is for the type checker


if __name__ == "__main__":
    sys.exit(main())
