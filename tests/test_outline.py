"""The one driver outline: both suites run their subject through it, alike, and their data sits below it."""

from __future__ import annotations

import ast
import threading
import unittest
from pathlib import Path
from typing import Any, List, Set
from unittest import mock

from conformance._driver import Driver
from conformance._outline import StallWindow, SubjectDriver
from conformance.cases import BackendConformanceTarget, ConformanceCase
from conformance.contract import ChatRequest, ChatResponse
from conformance.gate import AgentLoopTarget, LoopResult, LoopTask
from conformance.gate._loop_driver import LoopDriver
from conformance.gate.cases import agent_loop_cases
from conformance.wires import openai_chat_wire

from .hygiene import blocks_on_purpose
from .test_driver import failure, reference

PACKAGE = Path(__file__).resolve().parent.parent / "conformance"


class WaitsForItsSignal:
    """A sync backend or loop that does nothing but wait for its signal, then raises its reason."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def _wait(self, signal: Any) -> None:
        signal.wait_sync(30)
        self.released.set()
        signal.raise_if_aborted()

    def chat(self, request: ChatRequest) -> ChatResponse:
        self._wait(request.signal)
        raise AssertionError("unreachable")

    def run(self, task: LoopTask) -> LoopResult:
        self._wait(task.signal)
        raise AssertionError("unreachable")


class ClosesSlowly:
    """Answers at once, then takes longer than the case's bound (0.3 s) to close."""

    def __init__(self, url: str) -> None:
        self.reference = reference(url)
        self.release = threading.Event()

    def chat(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse("", "stop")

    def run(self, task: LoopTask) -> LoopResult:
        return LoopResult("", "stop")

    def close(self) -> None:
        # Blocking its loop, for less than asyncio's debug mode reports as slow there.
        with blocks_on_purpose():
            self.release.wait(0.8)


def backend_case(create: Any) -> ConformanceCase:
    target = BackendConformanceTarget("t", openai_chat_wire, create, timeout=0.3)
    return ConformanceCase(target, "text", "chat")


def loop_case(create: Any) -> Any:
    target = AgentLoopTarget("t", openai_chat_wire, create, timeout=0.3)
    return next(c for c in agent_loop_cases(target) if c.name == "text/chat")


def run_backend(create: Any) -> Any:
    from conformance._outline import run_on_provider

    case = backend_case(create)
    driver, _ = run_on_provider(lambda provider: Driver(case, provider), lambda request: None, http2=False)
    return driver.outcome


def run_loop(create: Any) -> Any:
    from conformance.gate._conversation import Conversation
    from conformance.gate._loop_driver import drive_loop
    from conformance.gate.tools import GateToolset

    case = loop_case(create)
    with GateToolset(run_id="t1") as toolset:
        conversation = Conversation(openai_chat_wire, case.stage, toolset, case.max_requests)
        outcome, _ = drive_loop(case, conversation, toolset, conversation.handle)
    return outcome


SUITES = {"backend": run_backend, "loop": run_loop}


class OneOutlineTests(unittest.TestCase):
    def test_both_drivers_leave_the_outline_to_the_outline(self) -> None:
        """Neither driver redefines the bound, the worker, the ending or the reclaim: a fix reaches both."""
        outline = {"run", "_run", "_work", "_main", "reclaim", "ended", "fire_abort", "in_thread", "call"}
        for driver in (Driver, LoopDriver):
            with self.subTest(driver=driver.__name__):
                self.assertTrue(issubclass(driver, SubjectDriver))
                self.assertEqual(outline & set(vars(driver)), set())

    def test_a_subject_waiting_for_its_signal_is_let_go_at_the_bound(self) -> None:
        """Past the bound both suites fire the subject's signal: one that honours it leaves nothing behind."""
        for suite, run in SUITES.items():
            with self.subTest(suite=suite):
                subject = WaitsForItsSignal()
                outcome = run(lambda url, subject=subject: subject)
                self.assertTrue(outcome.hung)
                self.assertTrue(subject.released.wait(2), "the signal never fired")
                self.assertIsNone(outcome.left_behind)

    def test_a_close_still_running_at_the_bound_is_said_so_in_both_suites(self) -> None:
        """A subject that answered but whose close() outlives the bound is not hung: its close is at fault."""
        for suite, run in SUITES.items():
            with self.subTest(suite=suite):
                made: List[ClosesSlowly] = []

                def create(url: str, made: List[ClosesSlowly] = made) -> ClosesSlowly:
                    made.append(ClosesSlowly(url))
                    return made[-1]

                outcome = run(create)
                made[0].release.set()
                self.assertFalse(outcome.hung)
                self.assertIsInstance(outcome.close_error, TimeoutError)
                self.assertIn("close() was still running", str(outcome.close_error))

    def test_the_bound_is_stretched_by_what_stalled_the_whole_process(self) -> None:
        """A subject that finishes late only by the time the whole process stood still is not given up on;
        one that runs on past the stalls is, and no stall stretches the bound by more than MAX_EXCUSED."""
        from conformance._stall import MAX_EXCUSED

        driver = SubjectDriver("t", None, lambda url: None, timeout=0.05, timed=False, outcome=mock.Mock())
        driver.window = mock.Mock()
        threading.Timer(0.15, driver.finished.set).start()
        driver.window.between.return_value = 0.3
        self.assertTrue(driver._finished_within(0.0))
        driver.finished.clear()
        driver.window.between.return_value = 0.0
        self.assertFalse(driver._finished_within(0.0))
        waits: List[float] = []
        driver.finished = mock.Mock(wait=lambda seconds: waits.append(seconds) or False)
        driver.window.between.side_effect = [2.0, 4.0, 9.0, 9.0]
        self.assertFalse(driver._finished_within(0.0))
        self.assertEqual(waits, [0.05, 2.0, 2.0, MAX_EXCUSED - 4.0])

    def test_a_prompt_stretch_does_not_wait_for_the_stall_watch(self) -> None:
        """A stretch within its bound is never read from the watch: nothing of it needs leaving out."""
        window = StallWindow(True)
        self.addCleanup(window.close)
        with mock.patch("conformance._outline.WATCH.between", side_effect=AssertionError("read")):
            self.assertEqual(window.beyond(10.0, 10.4, 0.5), 0.0)
            self.assertEqual(window.beyond(None, 10.4, 0.5), 0.0)
        with mock.patch("conformance._outline.WATCH.between", return_value=0.3):
            self.assertEqual(window.beyond(10.0, 10.9, 0.5), 0.3)

    def test_an_abort_case_passes_through_the_outline(self) -> None:
        """The reference backend, aborted at the protocol event, passes abort/chat through the outline."""
        case = ConformanceCase(BackendConformanceTarget("t", openai_chat_wire, reference), "abort", "chat")
        self.assertEqual(failure(case), "")


def _imports(module: str) -> Set[str]:
    """The modules of the package one module imports, anywhere in it (lazy and type-only imports too)."""
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    package = module.rsplit(".", 1)[0].split(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                found.add(f"{source}.{alias.name}")
                found.add(source)
    return found


#: The modules the two circles went through, and the data modules that took their types.
LAYERS = (
    "conformance._case",
    "conformance._checks",
    "conformance._driver",
    "conformance._outline",
    "conformance._loops",
    "conformance.cases",
    "conformance.gate._case",
    "conformance.gate._invariants",
    "conformance.gate._loop_driver",
    "conformance.gate.cases",
    "conformance.gate.replay_cases",
)


class LayeringTests(unittest.TestCase):
    def test_the_case_data_imports_none_of_the_machinery_that_runs_it(self) -> None:
        """_case and gate._case import no driver, check, outline or running case."""
        machinery = {m for m in LAYERS if not m.endswith("._case")}
        for module in ("conformance._case", "conformance.gate._case"):
            with self.subTest(module=module):
                self.assertEqual(_imports(module) & machinery, set())


if __name__ == "__main__":
    unittest.main()
