"""``run``: a user's target (backend or agent loop), or a TestCase class run by unittest."""

from __future__ import annotations

import argparse
import time
import unittest
from typing import Any, List, TextIO

from .._results import CaseRecord
from .._targets import UsageError, is_target, load
from .._wire_options import add_options
from .matrix import run_matrix
from .shared import _jobs, _shared_options, _write, report_paths, use_colour


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


def _run_parser(sub: Any) -> argparse.ArgumentParser:
    run: argparse.ArgumentParser = sub.add_parser(
        "run", help="run a user's target or TestCase class (either suite)")
    run.add_argument(
        "target",
        metavar="MODULE:NAME",
        help="a BackendConformanceTarget, an AgentLoopTarget, or a TestCase class using either mixin",
    )
    _shared_options(run, suppress=True)
    add_options(run, suppress=True, hidden=True)  # taken only to be refused with the reason
    return run
