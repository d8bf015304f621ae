"""The reference matrix: every case of every target run, with progress, the matrix and the failures."""

from __future__ import annotations

import argparse
import importlib.util
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from .._results import CaseRecord
from .._targets import (
    AnyCase,
    AnyTarget,
    TargetSpec,
    cases_of,
    preload,
    reference_loop_targets,
    reference_spec,
    reference_targets,
    serve_cases,
    timed_outcome,
    waits_first,
)
from ..cases import ConformanceCase
from ..scenarios import MODES, SCENARIOS
from .shared import _configured, _default_processes, _jobs, _paint, _write, report_paths, use_colour

TRANSPORTS = ("http/1.1", "h2c")
#: What the reference matrix runs: the backend suite, the agent-loop suite, or both.
SUITES = ("backend", "loop", "both")
#: The reference targets, under the name the benches use.
_reference_targets = reference_targets


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
        from .._loops import kept_loops

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
        from ..gate.stages import LOOP_MODES, STAGES

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


def command_matrix(args: argparse.Namespace, out: TextIO, settings: Dict[str, Dict[str, Any]]) -> int:
    """The reference matrix, which ``python -m conformance`` runs when no command is named."""
    reports = report_paths(args)
    _configured(settings, args.wire, "the matrix runs")
    transports = list(args.transport or TRANSPORTS)
    if "h2c" in transports and importlib.util.find_spec("h2") is None:
        out.write("h2 is not installed: the h2c column is left out (pip install h2)\n")
        transports.remove("h2c")
    targets: List[Tuple[str, AnyTarget]] = []
    specs: List[TargetSpec] = []
    if args.suite in ("backend", "both"):
        retries = bool(getattr(args, "retries", False))
        targets += reference_targets(args.wire, transports, settings, retries=retries)
        kind = "reference-retries" if retries else "reference"
        specs += [reference_spec(kind, t.wire.name, column, settings) for column, t in targets]
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
