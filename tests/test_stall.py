"""The stall watch: a stretch in which the whole process could not run is on record and left
out of the abort and budget bounds, while a backend that holds itself up is not excused."""

from __future__ import annotations

import asyncio
import re
import sys
import threading
import time
import unittest
from typing import Any, Tuple
from unittest import mock

from conformance._bounds import ABORT_RAISE_WITHIN
from conformance._stall import LATE, TICK, StallWatch
from conformance.contract import ChatRequest, ChatResponse
from conformance.gate import AgentLoopTarget, ReferenceLoop, agent_loop_cases
from conformance.gate.loop import LoopTask
from conformance.reference.openai_chat import OpenAIChatBackend
from conformance.wires import openai_chat_wire

from .hygiene import blocks_on_purpose
from .test_driver import case, failure, reference


def hold_the_gil(seconds: float) -> None:
    """Hold up every other thread of this process for ``seconds`` of wall-clock time, as a
    long call into an extension that keeps the GIL does.

    Sized by the clock, not by work: on a busy machine a given amount of work takes many
    times longer than on an idle one, and a stall must exceed the bound it tests by a known
    margin without running past the case's own. The switch interval is how long a thread
    waiting for the GIL lets the holder run before asking for it; raised past ``seconds``
    for the hold, no thread asks, so the loop below keeps the GIL to its end.
    """
    interval = sys.getswitchinterval()
    sys.setswitchinterval(seconds + 1.0)
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
    finally:
        sys.setswitchinterval(interval)
    time.sleep(0)  # give the GIL to the threads that waited, at once


async def stalled(seconds: float) -> None:
    """Hold up this process for ``seconds`` from another thread, and wait until it runs again."""
    await asyncio.get_running_loop().run_in_executor(None, hold_the_gil, seconds)


class StallsOnAbort:
    """The reference backend, whose process is held up for a while as the abort comes.

    ``then_sleeps`` seconds of its own (on the loop, or blocking it) follow.
    """

    def __init__(self, url: str, hold: float, then_sleeps: float = 0.0, blocking: bool = False) -> None:
        self.reference = reference(url)
        self.hold, self.then_sleeps, self.blocking = hold, then_sleeps, blocking

    async def chat(self, request: ChatRequest) -> ChatResponse:
        try:
            return await self.reference.chat(request)
        except BaseException as exc:
            if request.signal is not None and exc is request.signal.reason:
                if self.hold:
                    await stalled(self.hold)
                if self.blocking:
                    with blocks_on_purpose():
                        time.sleep(self.then_sleeps)
                else:
                    await asyncio.sleep(self.then_sleeps)
            raise

    async def aclose(self) -> None:
        await self.reference.aclose()


#: How late the backends below are on their own: the abort bound and a margin for what a
#: loaded machine rightly leaves out of it (a stall of the whole process), so that the
#: verdict does not turn on the machine's load.
LATE_BY = ABORT_RAISE_WITHIN + 0.7


def lateness(message: str) -> Tuple[float, float]:
    """How late the abort reason came, and how much of that was left out, as ``message`` says."""
    found = re.search(r"got it after (\d+\.\d+) s(?: \((\d+\.\d+) s of it this whole process)?", message)
    if found is None:
        raise AssertionError(f"no 'got it after' in {message!r}")
    return float(found.group(1)), float(found.group(2) or 0)


class WatchTests(unittest.TestCase):
    def test_a_process_held_up_is_on_record(self) -> None:
        """A process held up for about 0.4 s shows about that much stall inside the window."""
        watch = StallWatch()
        watch.start()
        try:
            time.sleep(0.05)
            began = time.monotonic()
            hold_the_gil(0.4)
            ended = time.monotonic()
            stall = watch.between(began, ended)
            # Held about 0.4 s; nearly all of it is on record, the rest is the tick's slack.
            self.assertGreater(stall, 0.75 * (ended - began))
            self.assertLessEqual(stall, ended - began)
            self.assertEqual(watch.between(ended + 1, ended + 2, settle=0), 0.0)
        finally:
            watch.stop()

    def test_a_thread_that_sleeps_or_computes_stalls_nothing(self) -> None:
        """A blocking sleep or Python work in one thread leaves the others running: no stall."""

        def compute(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                sum(range(100))

        for name, work in (("sleep", time.sleep), ("compute", compute)):
            with self.subTest(work=name):
                watch = StallWatch()
                watch.start()
                try:
                    began = time.monotonic()
                    worker = threading.Thread(target=work, args=(0.4,))
                    worker.start()
                    # This thread wakes as often as it can meanwhile, noting when it did: a
                    # loaded machine stalls the whole process now and then, which stops this
                    # thread too, while what the worker does never holds it up for long. It
                    # sleeps between looks, as the watch does, so that it waits for the CPU
                    # and the GIL as the watch waits: a thread that computed here instead
                    # would hold the GIL that the watch, woken, waits for, and the watch
                    # would see a wait this thread never had.
                    stamps = [began]
                    while worker.is_alive():
                        time.sleep(0.001)
                        stamps.append(time.monotonic())
                    worker.join()
                    ended = time.monotonic()
                    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
                    held = sum(gap for gap in gaps if gap > 4 * sys.getswitchinterval())
                    # Every stall on record held this thread up as well.
                    self.assertLessEqual(watch.between(began, ended), held + 2 * TICK)
                finally:
                    watch.stop()

    def test_what_is_left_out_is_bounded(self) -> None:
        """However long the stall, no bound is stretched by more than MAX_EXCUSED."""
        watch = StallWatch()
        watch.start()
        try:
            began = time.monotonic()
            hold_the_gil(0.3)
            with mock.patch("conformance._stall.MAX_EXCUSED", 0.1):
                self.assertEqual(watch.between(began, time.monotonic()), 0.1)
        finally:
            watch.stop()


class WatchLifeTests(unittest.TestCase):
    def test_the_watch_thread_ends_with_the_last_window(self) -> None:
        """Two windows share one thread, which ends a tick after the last one closes."""
        watch = StallWatch()
        before = set(threading.enumerate())
        watch.start()
        watch.start()
        self.assertEqual(len(set(threading.enumerate()) - before), 1)
        watch.stop()
        time.sleep(TICK + LATE)
        self.assertEqual(len(set(threading.enumerate()) - before), 1)
        watch.stop()
        deadline = time.monotonic() + 2
        while set(threading.enumerate()) - before and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(set(threading.enumerate()) - before, set())
        # Nothing watches any more: asking about later times does not wait for a tick.
        asked = time.monotonic()
        watch.between(asked, asked + 60)
        self.assertLess(time.monotonic() - asked, 0.5)

    def test_a_stop_without_a_start_is_refused(self) -> None:
        """stop() beyond the start() calls is a mistake, named as one."""
        with self.assertRaisesRegex(RuntimeError, r"stop\(\) without a start\(\)"):
            StallWatch().stop()


class AbortBoundTests(unittest.TestCase):
    def test_a_stall_as_the_abort_comes_is_not_held_against_the_backend(self) -> None:
        """The reference, held up for a second as it raises the reason, passes abort/chat."""
        self.assertEqual(failure(case("abort", "chat", lambda url: StallsOnAbort(url, hold=1.0))), "")

    def test_a_stall_before_the_close_is_not_held_against_the_backend(self) -> None:
        """The reference, held up for 1.5 s as the abort fires, still closes within the bound."""
        self.assertEqual(failure(case("abort", "chat", lambda url: StallsBeforeClosing(url, 1.5))), "")

    def test_a_backend_that_blocks_its_own_loop_is_not_excused(self) -> None:
        """A blocking sleep of LATE_BY before the reason fails abort-promptly, the sleep not left out."""
        message = failure(case("abort", "chat", lambda url: StallsOnAbort(url, 0, LATE_BY, blocking=True)))
        self.assertIn("[abort-promptly]", message)
        took, left_out = lateness(message)
        self.assertGreaterEqual(took, LATE_BY)
        # A loaded machine may stall the whole process meanwhile, and that is left out; the
        # sleep, which held up nothing but the backend's own loop, is not.
        self.assertLess(left_out, LATE_BY - ABORT_RAISE_WITHIN)

    def test_a_slow_backend_in_a_stalled_process_is_told_what_was_left_out(self) -> None:
        """A backend LATE_BY late on its own still fails, and the message gives the stall not counted."""
        message = failure(case("abort", "chat", lambda url: StallsOnAbort(url, 0.3, LATE_BY)))
        self.assertIn("[abort-promptly]", message)
        took, left_out = lateness(message)
        # The hold, less a few ticks: a thread already waiting as it begins has one more turn.
        self.assertGreaterEqual(left_out, 0.3 - 5 * TICK)
        self.assertGreaterEqual(took, 0.3 + LATE_BY)


class StallsBeforeClosing:
    """The reference backend, whose process is held up for a while as the abort fires, before it closes."""

    def __init__(self, url: str, hold: float) -> None:
        self.reference = reference(url)
        self.hold = hold

    async def chat(self, request: ChatRequest) -> ChatResponse:
        assert request.signal is not None
        # Called first, in the aborting thread: the reference hears of the abort after the stall.
        request.signal.add_callback(lambda reason: hold_the_gil(self.hold))
        return await self.reference.chat(request)

    async def aclose(self) -> None:
        await self.reference.aclose()


class StallsOnCancel(ReferenceLoop):
    """The reference loop, whose process is held up for a while as the abort comes."""

    def __init__(self, url: str, hold: float) -> None:
        super().__init__(OpenAIChatBackend(f"{url}/v1"))
        self.hold = hold

    async def run(self, task: LoopTask) -> Any:
        try:
            return await super().run(task)
        except BaseException as exc:
            if exc is task.signal.reason:
                await stalled(self.hold)
            raise


class LoopBoundTests(unittest.TestCase):
    def test_a_stall_as_the_loop_is_cancelled_is_not_held_against_it(self) -> None:
        """The reference loop, held up for a second as it raises the reason, passes cancel/chat."""
        target = AgentLoopTarget("stalls", openai_chat_wire, lambda url: StallsOnCancel(url, 1.0))
        cancel = next(c for c in agent_loop_cases(target) if c.name == "cancel/chat")
        cancel.run()
