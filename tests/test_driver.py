"""The driver: when a backend counts as async, when a case aborts, what it observes while
the backend lives, and what it leaves behind."""

from __future__ import annotations

import asyncio
import functools
import http.client
import json
import logging
import os
import re
import socket
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, List
from urllib.parse import urlsplit

from conformance._driver import Driver
from conformance._host import host
from conformance.cases import BackendConformanceTarget, ConformanceCase
from conformance.contract import ChatRequest, ChatResponse, StreamChunk
from conformance.provider import start_fake_provider
from conformance.reference.openai_chat import OpenAIChatBackend
from conformance.wires.openai_chat import openai_chat_wire

from .hygiene import blocks_on_purpose

#: Why a test that counts open descriptors is skipped.
NO_FD_LIST = "counts descriptors in /proc/self/fd, which this system lacks"


def reference(url: str) -> OpenAIChatBackend:
    return OpenAIChatBackend(f"{url}/v1")


def case(scenario: str, mode: str, create: Any = reference, **kwargs: Any) -> ConformanceCase:
    return ConformanceCase(
        BackendConformanceTarget("test", openai_chat_wire, create, **kwargs), scenario, mode
    )


def failure(c: ConformanceCase) -> str:
    try:
        c.run()
    except AssertionError as failed:
        return str(failed)
    return ""


def gave_up_after(test: unittest.TestCase, message: str, bound: float, began: float) -> None:
    """That ``message`` names the time the case waited for a hung backend: its bound or more.

    The case states what it actually waited, which on a loaded machine is some way past the
    bound it asked for, never less, and never more than the whole run around it took.
    """
    found = re.search(r"still running when the case gave up after (\d+\.\d) s", message)
    if found is None:
        test.fail(f"no 'gave up after' in {message!r}")
    waited = float(found.group(1))
    test.assertGreaterEqual(waited, bound, message)
    test.assertLessEqual(waited, time.monotonic() - began + 0.05, message)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


class BlockingPost:
    """Posts the reference's request with http.client, blocking until the reply is read."""

    def __init__(self, url: str) -> None:
        self.reference = reference(url)
        self.url = urlsplit(f"{url}/v1/chat/completions")

    def post(self, request: ChatRequest) -> bytes:
        connection = http.client.HTTPConnection(self.url.hostname or "", self.url.port, timeout=30)
        try:
            body = json.dumps(self.reference.body(request, False)).encode()
            connection.request("POST", self.url.path, body, self.reference.headers(False))
            return connection.getresponse().read()
        finally:
            connection.close()


class ExecutorBackend(BlockingPost):
    """Runs the blocking call in the loop's executor and raises the abort reason at once."""

    async def chat(self, request: ChatRequest) -> ChatResponse:
        assert request.signal is not None
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(None, self.post, request)
        # The blocked call fails once the provider closes; nobody is left to read that.
        work.add_done_callback(lambda done: done.cancelled() or done.exception())
        waiter = asyncio.ensure_future(request.signal.wait())
        done, _ = await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if waiter in done:
            request.signal.raise_if_aborted()
        waiter.cancel()
        raise AssertionError("the reply to a hanging request came")


class SyncIgnoresAbort(BlockingPost):
    """A sync backend that never looks at the signal: blocked until the provider closes."""

    def chat(self, request: ChatRequest) -> ChatResponse:
        self.post(request)
        raise ConnectionError("the provider went away")


class ParkedForever:
    """A sync backend stuck on something the case cannot reach (released by the test)."""

    release = threading.Event()

    def chat(self, request: ChatRequest) -> ChatResponse:
        self.release.wait(30)
        raise RuntimeError("released")


class BlocksItsLoop(OpenAIChatBackend):
    """Answers, then blocks its own event loop on a call that only the test's release ends.

    With ``hold`` it first opens a connection of its own to the provider and watches it
    on that loop, as a client's pooled connection is: the one thing the case must leave
    to it. ``held`` keeps those sockets, for the test to close once it has released them.
    """

    release = threading.Event()
    held: List[socket.socket] = []

    def __init__(self, url: str, hold: bool) -> None:
        super().__init__(f"{url}/v1")
        self.address = urlsplit(url)
        self.hold = hold

    async def stall(self) -> None:
        # A few turns first, so that the connection the reply came on is closed: what the
        # backend holds is then exactly what it opens here.
        for _ in range(3):
            await asyncio.sleep(0)
        if self.hold:
            connection = socket.create_connection((self.address.hostname, self.address.port), timeout=5)
            self.held.append(connection)
            asyncio.get_running_loop().add_reader(connection.fileno(), lambda: None)
        with blocks_on_purpose():
            self.release.wait(30)

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response = await super().chat(chat)
        await self.stall()
        return response

    async def chat_stream(self, chat: ChatRequest) -> Any:
        async for chunk in super().chat_stream(chat):
            yield chunk
        await self.stall()


class HangingBackend:
    async def chat(self, request: ChatRequest) -> ChatResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class AsyncByHook(unittest.TestCase):
    def test_a_plain_hook_over_an_async_backend_gets_the_cancel_case(self) -> None:
        """A plain def hook handing back a coroutine or async iterator is async, and passes cancel."""
        hooks = {
            "chat": lambda backend, request: backend.chat(request),
            "stream": lambda backend, request: backend.chat_stream(request),
        }
        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                try:
                    self.assertEqual(failure(case("cancel", mode, **hooks)), "")
                except unittest.SkipTest as skipped:
                    self.fail(f"the cancel case was skipped: {skipped}")

    def test_a_blocking_sync_backend_is_skipped_with_the_real_reason(self) -> None:
        """A plain function that blocks on the request is what makes a backend sync, and the skip says so."""
        with self.assertRaisesRegex(unittest.SkipTest, "chat blocked its thread on the request"):
            case("cancel", "chat", SyncIgnoresAbort).run()

    def test_a_sync_generator_is_skipped_without_being_called(self) -> None:
        """A generator function is sync before it runs; cancel skips it at once."""

        class SyncStream:
            def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
                raise AssertionError("not called")
                yield StreamChunk()  # pragma: no cover

        with self.assertRaisesRegex(unittest.SkipTest, "chat_stream is a generator function"):
            case("cancel", "stream", lambda url: SyncStream()).run()


class ObservedWhileAlive(unittest.TestCase):
    def test_an_executor_backend_is_told_the_connection_stayed_open(self) -> None:
        """The reason came at once, so the case says the connection stayed open, not that it hung."""
        started = time.monotonic()
        message = failure(case("abort", "chat", ExecutorBackend, timeout=5.0))
        self.assertIn("[connection-closed]", message)
        self.assertNotIn("still running", message)
        self.assertNotIn("[abort-reason]", message)
        self.assertLess(time.monotonic() - started, 4.5, "the case waited for the executor thread")

    def test_a_hung_cancel_is_checked_for_the_close_too(self) -> None:
        """A backend that swallows the cancellation and hangs fails for the open connection as well."""

        class SwallowsCancel:
            """Shields its request and goes on waiting for it whatever the caller says."""

            def __init__(self, url: str) -> None:
                self.inner = reference(url)

            async def chat(self, request: ChatRequest) -> ChatResponse:
                call = ChatRequest(request.model, request.messages, request.tools)
                task = asyncio.ensure_future(self.inner.chat(call))
                while True:
                    try:
                        return await asyncio.shield(task)
                    except asyncio.CancelledError:
                        continue

        message = failure(case("cancel", "chat", SwallowsCancel, timeout=1.5))
        self.assertIn("[finished]", message)
        self.assertIn("[connection-closed]", message)

    def test_the_abort_comes_after_the_first_chunk(self) -> None:
        """In stream mode the case aborts once the backend has yielded, not after a fixed delay."""
        yielded: List[float] = []

        class Recording(OpenAIChatBackend):
            async def chat_stream(self, chat: ChatRequest) -> Any:
                async for chunk in super().chat_stream(chat):
                    yielded.append(time.monotonic())
                    yield chunk

        target = BackendConformanceTarget("t", openai_chat_wire, lambda url: Recording(f"{url}/v1"))
        with start_fake_provider() as provider:
            provider.reply(lambda r: openai_chat_wire.reply("abort", "stream", r))
            outcome = Driver(ConformanceCase(target, "abort", "stream"), provider).run()
        self.assertTrue(yielded)
        assert outcome.abort_at is not None
        self.assertGreaterEqual(outcome.abort_at, yielded[0])
        self.assertIs(outcome.error, outcome.abort_reason)


class Hygiene(unittest.TestCase):
    def setUp(self) -> None:
        # The process's provider loop outlives every case: its thread and descriptors are
        # not a case's to give back, so it is started before anything is counted.
        host()

    def test_hung_cases_leave_no_thread_or_descriptor(self) -> None:
        """Twelve hung cases, async and sync, give back every thread, loop and socket they took."""
        # Threads earlier tests left may end meanwhile: count only those this test starts.
        before, fds = set(threading.enumerate()), open_fds()

        def hung(index: int) -> str:
            create = (lambda url: HangingBackend()) if index % 2 else SyncIgnoresAbort
            scenario = "text" if index % 2 else "abort"
            return failure(case(scenario, "chat", create, timeout=0.3))

        # At once: each case spends its time waiting out its bound, and a leak shows the same.
        with ThreadPoolExecutor(max_workers=12) as pool:
            messages = list(pool.map(hung, range(12)))
        for message in messages:
            self.assertIn("[finished]", message)
            self.assertNotIn("left behind", message)
        deadline = time.monotonic() + 2
        while set(threading.enumerate()) - before and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(sorted(t.name for t in set(threading.enumerate()) - before), [])
        self.assertLessEqual(open_fds(), fds)

    @unittest.skipUnless(os.path.isdir("/proc/self/fd"), NO_FD_LIST)
    def test_a_backend_that_blocks_its_loop_keeps_only_what_it_holds(self) -> None:
        """Cases stuck in a call that blocks the backend's loop give back the loop's descriptors and
        the provider's, and each message says what the backend still holds."""
        BlocksItsLoop.release.clear()
        before, fds = set(threading.enumerate()), open_fds()

        def release() -> None:
            BlocksItsLoop.release.set()
            for thread in set(threading.enumerate()) - before:
                thread.join(5)
            while BlocksItsLoop.held:
                BlocksItsLoop.held.pop().close()

        self.addCleanup(release)
        runs = (("chat", False), ("stream", True), ("chat", True))

        def blocked(run: Any) -> str:
            mode, hold = run
            return failure(case("text", mode, functools.partial(BlocksItsLoop, hold=hold), timeout=0.3))

        # At once: each case waits out its bound and the reclaim's, whatever the others do.
        with ThreadPoolExecutor(max_workers=len(runs)) as pool:
            messages = list(pool.map(blocked, runs))
        for (mode, hold), message in zip(runs, messages):
            with self.subTest(mode=mode, hold=hold):
                self.assertIn("[finished]", message)
                self.assertIn("left behind: still running", message)
                self.assertIn("the case closed that event loop's selector and wake-up sockets", message)
                holds = "still holds 1 socket it watched" if hold else "watched no socket of its own"
                self.assertIn(f"the backend {holds}", message)
        # The threads are still stuck; all that is left open is the sockets they hold.
        self.assertEqual(len(BlocksItsLoop.held), 2)
        self.assertLessEqual(open_fds(), fds + len(BlocksItsLoop.held))

    def test_the_message_states_the_bound_waited_and_what_was_left(self) -> None:
        """A backend the case cannot reclaim is named, and the bound is the one actually waited."""
        ParkedForever.release.clear()
        self.addCleanup(ParkedForever.release.set)
        began = time.monotonic()
        message = failure(case("text", "chat", lambda url: ParkedForever(), timeout=0.3))
        gave_up_after(self, message, 0.3, began)
        self.assertIn("left behind: still running 1.0 s after the provider closed", message)
        self.assertIn("1 thread running the sync backend's call", message)


if __name__ == "__main__":
    unittest.main()


class _Collected(logging.Handler):
    """Keeps the messages logged to it."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class InThreadTests(unittest.TestCase):
    def test_an_error_nobody_awaits_is_not_logged_as_never_retrieved(self) -> None:
        """A sync call's error that lands while the case's loop winds down is read, not logged."""
        import gc

        from conformance._loops import in_thread

        go = threading.Event()

        def fails() -> None:
            go.wait(5)
            raise ValueError("from the abandoned call")

        threads: List[threading.Thread] = []
        loop = asyncio.new_event_loop()

        async def start() -> asyncio.Future[Any]:
            return in_thread(fails, name="abandoned call", threads=threads)

        collected = _Collected()
        logging.getLogger("asyncio").addHandler(collected)
        self.addCleanup(logging.getLogger("asyncio").removeHandler, collected)
        future = loop.run_until_complete(start())
        go.set()
        threads[0].join(5)
        # The settling is queued; the loop's last batch runs it and stops, so what the
        # settling schedules in turn never runs, as when a case's loop winds down.
        loop.call_soon(loop.stop)
        loop.run_forever()
        loop.close()
        self.assertTrue(future.done())
        del future
        gc.collect()
        self.assertEqual(collected.messages, [])
