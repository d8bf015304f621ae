"""``judge``: a client in any language, run once per stage (or scenario) and mode, and judged.

Strategy: ``serve`` judges one run of a client for one case; a CI needs every case of
a wire, in one command and one report. ``judge`` plays each case as ``serve`` does (the
same session, on a fake provider of its own) and runs the client's command once for
it, in a process group of its own, with the case's URLs in the environment
(:data:`ENVIRONMENT`). The client reports as it would to ``serve``
(``POST /conformance/outcome``), or writes the same JSON to the file
``CONFORMANCE_OUTCOME_FILE`` names and exits. A run ends with the report, the client's
exit, or its bound; a client that has not exited shortly after its verdict has its
group ended. The verdicts become one JUnit and one JSON report for the whole run.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, TextIO, Tuple

from .._results import CaseRecord
from .._targets import UsageError
from .._wire_options import add_options, configured, flags_of
from ..scenarios import MODES, SCENARIOS
from .serve import DEFAULT_CLIENT_TIMEOUT, _serve_session, default_client_name, start_served
from .shared import (
    _RESULT_OPTIONS,
    _configured,
    _paint,
    printable,
    report_paths,
    sigterm_as_interrupt,
    use_colour,
    write_quietly,
)

#: What a client finds in its environment, each run: the provider's base URL and the judge's endpoints.
ENVIRONMENT = (
    ("CONFORMANCE_URL", "the fake provider's base URL (the OpenAI wire's is this plus /v1)"),
    ("CONFORMANCE_TASK_URL", "GET it for the task: what to run"),
    ("CONFORMANCE_TOOLS_URL", "POST a tool call to it plus the tool's name"),
    ("CONFORMANCE_OUTCOME_URL", "POST the outcome to it: it ends the run, answered with the verdict"),
    ("CONFORMANCE_OUTCOME_FILE", "or write the outcome's JSON to this file and exit"),
    ("CONFORMANCE_CASE", "the case, as the reports name it (forced-tool/stream)"),
)

#: How long a client may take to start (an interpreter, its SDK's import) before its first
#: request; its run's bound (``--timeout``) counts from that request.
STARTUP_SECONDS = 30.0
#: How long a client that has its verdict may take to exit by itself before its group is ended.
EXIT_GRACE = 2.0
#: The most of a client's own output a verdict quotes, where the client reported nothing.
OUTPUT_TAIL = 2000


@dataclass(frozen=True)
class Planned:
    """One run of the client: a stage or a scenario (and its variant), a mode, and a skip reason."""

    suite: str
    name: str
    mode: str
    variant: str = ""
    skip: Optional[str] = None

    @property
    def case(self) -> str:
        shape = f" [{self.variant}]" if self.variant else ""
        return f"{self.name}/{self.mode}{shape}"


def command_judge(args: argparse.Namespace, out: TextIO, settings: Dict[str, Dict[str, Any]]) -> int:
    from ..wires import WIRES

    command = list(args.client or [])
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("judge needs the client's command after --: judge --wire W -- node loop.mjs")
    if args.wire is None or args.wire not in WIRES:
        given = f"unknown wire {args.wire!r}; " if args.wire else "judge needs --wire; "
        raise UsageError(f"{given}known: {', '.join(WIRES)}")
    _configured(settings, [args.wire], "judge plays")
    reports = report_paths(args)
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be 1 or more, got {args.jobs}")
    if args.max_result_chars is not None and args.max_result_chars < 1:
        raise UsageError(f"--max-result-chars must be 1 or more, got {args.max_result_chars}")
    suite = _suite(args)
    if settings and suite != "backend":
        flags = " ".join(flags_of(configured(args.wire, settings)))
        raise UsageError(
            f"{flags} adds shapes to the backend scenarios; an agent-loop stage plays the same "
            f"conversation on every configuration: give --suite backend, or leave {flags.split()[0]} out"
        )
    wire = configured(args.wire, settings)
    plan = _plan(wire, suite, args)
    client_name = args.client_name or default_client_name(wire.name)
    shown = " ".join(command)
    out.write(
        f"judging {printable(shown)} as {client_name} on {wire.title}: {len(plan)} runs "
        f"({sum(1 for p in plan if p.skip is None)} played), {args.jobs or 1} at a time\n"
    )
    out.flush()
    started = time.perf_counter()
    runner = _Runner(wire, command, args, client_name)
    records: List[Optional[CaseRecord]] = [None] * len(plan)
    checks: Dict[int, Tuple[str, ...]] = {}
    colour = use_colour(out)
    stopped = False
    with sigterm_as_interrupt():
        pool = ThreadPoolExecutor(max_workers=args.jobs or 1)
        try:
            futures = {pool.submit(runner.run, planned): index for index, planned in enumerate(plan)}
            for future in as_completed(futures):
                index = futures[future]
                record, failed = future.result()
                records[index], checks[index] = record, failed
                _say_run(out, record, failed, colour)
        except KeyboardInterrupt:
            stopped = True
            runner.stop()
            out.write("stopped: the clients still running were ended\n")
        finally:
            pool.shutdown(wait=True)
    done = [r for r in records if r is not None]
    elapsed = time.perf_counter() - started
    written = []
    if reports:
        line = f"python -m conformance judge --wire {args.wire} -- {shown}"
        written = write_quietly(done, reports, line, elapsed)
    failures = [r for r in done if r.outcome in ("FAIL", "ERROR")]
    for record in failures:
        out.write(f"\n{_paint(f'{record.case}:', 'FAIL', colour)}\n{printable(record.detail)}\n")
    counts = {s: sum(1 for r in done if r.outcome == s) for s in ("pass", "FAIL", "ERROR", "skip")}
    out.write(
        f"\n{len(done)} of {len(plan)} runs: {counts['pass']} passed, {counts['FAIL'] + counts['ERROR']} "
        f"failed, {counts['skip']} skipped in {elapsed:.2f} s\n"
    )
    for kind, path in written:
        out.write(f"wrote {kind} to {path}\n")
    out.flush()
    return 1 if failures or stopped else 0


def _suite(args: argparse.Namespace) -> str:
    """The suite the options ask for: ``--suite``, else what ``--stage`` and ``--scenario`` name."""
    named = {"loop": bool(args.stage), "backend": bool(args.scenario)}
    if args.suite is not None:
        other = {"loop": "backend", "backend": "loop"}.get(args.suite)
        if other is not None and named[other]:
            option = "--stage" if other == "loop" else "--scenario"
            raise UsageError(f"{option} names {other} cases, but --suite {args.suite} runs none of them")
        return str(args.suite)
    if named["loop"] and named["backend"]:
        return "both"
    return "backend" if named["backend"] else "loop"


def _plan(wire: Any, suite: str, args: argparse.Namespace) -> List[Planned]:
    """Every run, in order: the stages, then the scenarios (each variant), each mode asked for."""
    from .._judge import NOT_JUDGED
    from ..gate._remote import STAGE_NOT_JUDGED
    from ..gate.stages import STAGES
    from .listing import _stage_skip

    stages = _chosen(args.stage, STAGES, "stage", SCENARIOS)
    scenarios = _chosen(args.scenario, SCENARIOS, "scenario", STAGES)
    skips = set(args.skip or ())
    rows: Dict[str, Any] = {**STAGES, **SCENARIOS}
    known = {f"{n}/{m}" for n, row in rows.items() for m in row.modes}
    for name in skips:
        if name not in STAGES and name not in SCENARIOS and name not in known:
            close = difflib.get_close_matches(name, sorted(set(STAGES) | set(SCENARIOS) | known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else " (a stage or scenario, or NAME/MODE)"
            raise UsageError(f"--skip {name}: no such stage or scenario{hint}")
    modes = [args.mode] if args.mode else list(MODES)
    plan: List[Planned] = []

    def skipped(name: str, mode: str) -> Optional[str]:
        if name in skips or f"{name}/{mode}" in skips:
            return "left out with --skip"
        return None

    if suite in ("loop", "both"):
        for name in stages:
            for mode in (m for m in modes if m in STAGES[name].modes):
                reason = skipped(name, mode) or _stage_skip(wire, name, mode) or STAGE_NOT_JUDGED.get(name)
                plan.append(Planned("loop", name, mode, skip=reason))
    if suite in ("backend", "both"):
        for name in scenarios:
            absent = wire.absent(name)
            for mode in (m for m in modes if m in SCENARIOS[name].modes):
                reason = skipped(name, mode) or absent or NOT_JUDGED.get(name)
                variants = [v.name for v in wire.variants(name, mode)] if reason is None else [""]
                plan += [Planned("backend", name, mode, v, reason) for v in variants]
    if not plan:
        raise UsageError(f"nothing to run: no {suite} case of {wire.name} in {' or '.join(modes)} mode")
    return plan


def _chosen(
    names: Optional[Sequence[str]], table: Mapping[str, Any], kind: str, other: Mapping[str, Any]
) -> List[str]:
    """The names asked for (every one in ``table`` where none was), each checked."""
    if not names:
        return list(table)
    for name in names:
        if name not in table:
            if name in other:
                raise UsageError(f"{name} is not a {kind}: it is one of the other suite's cases")
            close = difflib.get_close_matches(name, list(table), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(table)}"
            raise UsageError(f"unknown {kind} {name!r}; {hint}")
    return list(dict.fromkeys(names))


def _say_run(out: TextIO, record: CaseRecord, checks: Tuple[str, ...], colour: bool) -> None:
    shown = f" [{', '.join(checks)}]" if checks else ""
    reason = f" ({record.detail.splitlines()[0]})" if record.outcome == "skip" and record.detail else ""
    status = _paint(f"{record.outcome:<5}", record.outcome, colour)
    out.write(f"  {status} {printable(record.case)}{shown} {record.seconds:.2f} s{printable(reason)}\n")
    out.flush()


class _Runner:
    """Runs the client once per planned case, each on a fake provider of its own."""

    def __init__(self, wire: Any, command: List[str], args: argparse.Namespace, client_name: str) -> None:
        self.wire = wire
        self.command = command
        self.args = args
        self.client_name = client_name
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._live: Dict[int, subprocess.Popen[bytes]] = {}

    def stop(self) -> None:
        """End every client still running, and start no more."""
        self.stopping.set()
        with self._lock:
            live = list(self._live.values())
        for process in live:
            _end_group(process)

    def run(self, planned: Planned) -> Tuple[CaseRecord, Tuple[str, ...]]:
        if planned.skip is not None or self.stopping.is_set():
            reason = planned.skip or "not run: the judge was stopped"
            return CaseRecord(
                self.client_name, planned.case, "skip", reason, 0.0, planned.suite, self.wire.name
            ), ()
        from ..gate.tools import GateToolset

        args = argparse.Namespace(
            **{
                **vars(self.args),
                "stage": planned.name if planned.suite == "loop" else None,
                "scenario": planned.name if planned.suite == "backend" else None,
                "mode": planned.mode,
                "variant": planned.variant or None,
                "timeout": self.args.timeout or DEFAULT_CLIENT_TIMEOUT,
                "client_name": self.client_name,
            }
        )
        with GateToolset(run_id=self.args.run_id) as toolset:
            session, _ = _serve_session(args, self.wire, toolset)
            try:
                provider = start_served(self.args.http2, "127.0.0.1", 0, False)
                with provider:
                    session.attach(lambda: provider.requests)
                    provider.reply(session.handle)
                    verdict = self._drive(session, provider.url, planned, args.timeout)
            finally:
                session.close()
        record = dataclasses.replace(verdict.record, case=planned.case)
        return record, tuple(verdict.checks)

    def _drive(self, session: Any, url: str, planned: Planned, timeout: float) -> Any:
        """Run the client against ``url`` until it reports, exits or meets its bound; the verdict."""
        from .._judge import JUDGE_PATH, cut_detail

        with tempfile.TemporaryDirectory(prefix="conformance-judge-") as folder:
            outcome_file = Path(folder) / "outcome.json"
            env = {
                **os.environ,
                "CONFORMANCE_URL": url,
                "CONFORMANCE_TASK_URL": f"{url}{JUDGE_PATH}task",
                "CONFORMANCE_TOOLS_URL": f"{url}{JUDGE_PATH}tools/",
                "CONFORMANCE_OUTCOME_URL": f"{url}{JUDGE_PATH}outcome",
                "CONFORMANCE_OUTCOME_FILE": str(outcome_file),
                "CONFORMANCE_CASE": planned.case,
            }
            with open(Path(folder) / "output", "w+b") as output:
                process = self._start(env, output)
                spawned = time.monotonic()
                try:
                    while not session.done.is_set() and process.poll() is None and not self.stopping.is_set():
                        base = session.started if session.started is not None else spawned + STARTUP_SECONDS
                        if time.monotonic() > base + timeout:
                            break
                        session.done.wait(0.02)
                    note = ""
                    if not session.done.is_set():
                        note = self._no_report(session, process, outcome_file, timeout)
                    # The client reads its verdict and exits; one that lingers is ended.
                    try:
                        process.wait(EXIT_GRACE)
                    except subprocess.TimeoutExpired:
                        pass
                finally:
                    _end_group(process)
                    with self._lock:
                        self._live.pop(process.pid, None)
                verdict = session.verdict
                if note:
                    output.seek(0)
                    tail = output.read()[-OUTPUT_TAIL:].decode("utf-8", "replace").rstrip()
                    said = f"\n  the client's last output:\n{tail}" if tail else ""
                    detail = f"{note}{said}\n{verdict.record.detail}".rstrip()
                    verdict = dataclasses.replace(
                        verdict, record=dataclasses.replace(verdict.record, detail=cut_detail(detail))
                    )
                return verdict

    def _start(self, env: Dict[str, str], output: Any) -> subprocess.Popen[bytes]:
        try:
            process = subprocess.Popen(
                self.command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=os.name == "posix",  # a group of its own, ended as one
            )
        except OSError as exc:
            raise UsageError(f"cannot run the client {self.command[0]!r}: {exc.strerror or exc}") from None
        with self._lock:
            self._live[process.pid] = process
        return process

    def _no_report(self, session: Any, process: Any, outcome_file: Path, timeout: float) -> str:
        """The verdict on a run that posted no outcome: from the outcome file if the client wrote
        one, else as a client still running; and the note that says which."""
        status = process.poll()
        if status is not None and outcome_file.exists():
            try:
                report = json.loads(outcome_file.read_text(encoding="utf-8"))
                session.submit(report, time.monotonic())
                return ""
            except (ValueError, RecursionError) as exc:
                from .._judge import ReportError

                why = str(exc) if isinstance(exc, ReportError) else f"not JSON ({exc})"
                session.give_up()
                return f"  the client's outcome file could not be read: {why}"
        session.give_up()
        if self.stopping.is_set():
            return "  the judge was stopped before the client reported"
        if status is not None:
            return f"  the client exited with status {status} without reporting an outcome"
        return f"  the client reported no outcome within {timeout:g} s, and was ended"


def _end_group(process: Any) -> None:
    """End the client's process group, and only it: SIGTERM, then SIGKILL for what lingers.

    Also where the client itself has exited: what it started in its group goes with it.
    """
    if os.name != "posix":
        if process.poll() is None:
            process.kill()
        process.wait()
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        process.wait()
        return  # nothing of the group is left
    try:
        process.wait(1.0)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _judge_parser(sub: Any, wires: str) -> argparse.ArgumentParser:
    """``judge``'s options; ``wires`` names the wires it plays."""
    judge: argparse.ArgumentParser = sub.add_parser(
        "judge",
        help="run a client in any language once per stage (or scenario) and mode, and judge every run",
        description="Run the client's command once per agent-loop stage and mode of a wire (--suite "
        "backend: per backend scenario, mode and variant), each against a fake provider of its own as "
        "serve plays it, and judge each run; one JUnit and one JSON report for the whole run. The "
        "client finds the provider's URL in CONFORMANCE_URL, the task at CONFORMANCE_TASK_URL, and "
        "reports its outcome to CONFORMANCE_OUTCOME_URL (or writes it to CONFORMANCE_OUTCOME_FILE).",
        epilog="exit status: 0 every run passed (or was skipped), 1 a run failed, 2 a usage error",
    )
    judge.add_argument("--wire", help=f"one of {wires}")
    add_options(judge, suppress=True)
    judge.add_argument(
        "--suite",
        choices=("loop", "backend", "both"),
        help="the agent-loop stages (the default), the backend scenarios, or both (the client then "
        "reads the task's kind)",
    )
    judge.add_argument("--stage", action="append", help="only this stage (repeatable)")
    judge.add_argument("--scenario", action="append", help="only this backend scenario (repeatable)")
    judge.add_argument("--mode", choices=MODES, help="only this mode (default: both)")
    judge.add_argument(
        "--skip",
        action="append",
        metavar="NAME",
        help="leave out a stage or scenario, or NAME/MODE (repeatable)",
    )
    judge.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="each run's bound from the client's first request, of which a stage's max_seconds is 80%% "
        f"(default {DEFAULT_CLIENT_TIMEOUT:g} s); the client has {STARTUP_SECONDS:g} s more to start",
    )
    judge.add_argument(
        "--jobs", type=int, default=argparse.SUPPRESS, metavar="N", help="runs at once (default 1)"
    )
    judge.add_argument(
        "--client-name", metavar="NAME", help="the client's name in the reports (default: client.<wire>)"
    )
    judge.add_argument("--http2", action="store_true", help="speak h2c only")
    judge.add_argument("--model", default="conformance-model", help="the model the client must name")
    judge.add_argument(
        "--max-result-chars", type=int, metavar="N", help="as serve's (the large-result stage)"
    )
    judge.add_argument("--run-id", help="the tools' run id, so that fixture ids repeat from run to run")
    for option, text in _RESULT_OPTIONS:
        judge.add_argument(option, default=argparse.SUPPRESS, metavar="PATH", help=text)
    judge.add_argument("client", nargs=argparse.REMAINDER, help="-- and the client's command")
    return judge
