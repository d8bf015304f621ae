"""The stall watch: a stretch in which the whole process could not run is on record and left
out of the abort and budget bounds, while a backend that holds itself up is not excused."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import unittest
from typing import Any
from unittest import mock

from conformance._stall import LATE, TICK, StallWatch
from conformance.contract import ChatRequest, ChatResponse
from conformance.gate import AgentLoopTarget, ReferenceLoop, agent_loop_cases
from conformance.gate.loop import LoopTask
from conformance.reference.openai_chat import OpenAIChatBackend
from conformance.wires import openai_chat_wire

from .test_driver import case, failure, reference


@functools.cache
def _sums_per_second() -> float:
    """How many numbers ``sum(range(n))`` adds up per second of this thread's own CPU time
    (waits for the GIL and for a CPU left out): the best of three tries."""
    count = 2_000_000
    best = float("inf")
    for _ in range(3):
        began = time.thread_time()
        sum(range(count))
        best = min(best, time.thread_time() - began)
    return count / best


def hold_the_gil(seconds: float) -> None:
    """Hold up every thread of this process for about ``seconds`` (at least, barring a faster
    CPU than the one measured), as a long call into an extension that keeps the GIL does.

    ``sum`` over a ``range`` runs in C from start to end, so no other thread gets the GIL
    before it returns, whatever the switch interval and however many threads wait.
    """
    sum(range(int(_sums_per_second() * seconds)))


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
                    time.sleep(self.then_sleeps)
                else:
                    await asyncio.sleep(self.then_sleeps)
            raise

    async def aclose(self) -> None:
        await self.reference.aclose()


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
                    worker.join()
                    ended = time.monotonic()
                    # A loaded machine may stall this process now and then, never most of it.
                    self.assertLess(watch.between(began, ended), 0.2)
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
        """A blocking sleep of 0.7 s before the reason fails abort-promptly, with nothing left out."""
        message = failure(case("abort", "chat", lambda url: StallsOnAbort(url, 0, 0.7, blocking=True)))
        self.assertRegex(message, r"expected the abort reason within 0.5 s, got it after 0\.[7-9]\d* s \[")
        self.assertIn("[abort-promptly]", message)
        self.assertNotIn("could not run", message)

    def test_a_slow_backend_in_a_stalled_process_is_told_what_was_left_out(self) -> None:
        """A backend 0.7 s late on its own still fails, and the message gives the stall not counted."""
        message = failure(case("abort", "chat", lambda url: StallsOnAbort(url, 0.3, 0.7)))
        self.assertIn("[abort-promptly]", message)
        left_out = r"got it after \d+\.\d+ s \(\d+\.\d+ s of it this whole process could not run"
        self.assertRegex(message, left_out)


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
