"""Driving one backend through one case: a worker thread with an event loop of its own.

Strategy: the driver serves sync and async backends alike. Async calls run on the
worker's loop; sync calls run in a daemon thread of their own (so a sync backend
that runs ``asyncio.run`` inside still works, and one that hangs holds only that
thread), and the caller's thread stays free to enforce the case's time bound.
Whatever the backend returned, yielded or raised is gathered into an
:class:`Outcome` for the checks.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from .contract import AbortController, ChatRequest
from .fixture import conformance_request
from .provider import RecordedRequest

if TYPE_CHECKING:
    from .cases import ConformanceCase

__all__ = ["ABORT_CLOSE_WITHIN", "ABORT_DELAY", "ABORT_RAISE_WITHIN", "ConformanceAbort", "Driver", "Outcome"]

#: How long after the provider received the call a case aborts or cancels it, so
#: that a streamed reply is under way (the first chunks are on the wire).
ABORT_DELAY = 0.02
#: How soon after the abort the backend must raise the reason.
ABORT_RAISE_WITHIN = 0.5
#: How soon after the abort the provider must see the connection (h2: stream) closed.
ABORT_CLOSE_WITHIN = 1.0


class ConformanceAbort(Exception):
    """The reason the abort case aborts with; the backend must raise this very object."""


@dataclass
class Outcome:
    """What a backend did in one case."""

    response: Any = None
    chunks: List[Any] = field(default_factory=list)
    error: Optional[BaseException] = None
    error_at: Optional[float] = None
    abort_at: Optional[float] = None
    abort_reason: Optional[BaseException] = None
    skipped: Optional[str] = None
    #: The backend returned or raised (as opposed to still running at the bound).
    ended: bool = False
    hung: bool = False
    close_error: Optional[BaseException] = None
    #: Seconds from the abort (or cancellation) until the provider saw the close.
    closed_after: Optional[float] = None


def await_close(outcome: Outcome, generations: List[RecordedRequest]) -> None:
    # Wait here, before the provider closes (which closes every connection itself).
    assert outcome.abort_at is not None
    if not generations:
        return
    request = generations[-1]
    request.wait_closed(max(0.0, outcome.abort_at + ABORT_CLOSE_WITHIN - time.monotonic()))
    if request.closed_at is not None and request.closed_at - outcome.abort_at <= ABORT_CLOSE_WITHIN:
        outcome.closed_after = max(0.0, request.closed_at - outcome.abort_at)


def _default_chat(backend: Any, request: ChatRequest) -> Any:
    return backend.chat(request)


def _default_stream(backend: Any, request: ChatRequest) -> Any:
    return backend.chat_stream(request)


async def _in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """Call a sync function in a daemon thread of its own and await its result.

    Sync backends run off the loop, so one that calls ``asyncio.run`` inside (a
    common sync wrapper) still works, and one that hangs holds only its own
    daemon thread.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: Optional[BaseException]) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        result, error = None, None
        try:
            result = function(*args)
        except BaseException as exc:  # noqa: BLE001 - handed over to the awaiting side
            error = exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the case gave up on this backend and its loop is gone
            pass

    threading.Thread(target=work, name="conformance sync backend", daemon=True).start()
    return await future


def _is_async(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)


class Driver:
    """Runs one case's backend in a worker thread with a loop of its own."""

    def __init__(self, case: ConformanceCase, provider: Any) -> None:
        self.case = case
        self.provider = provider
        self.outcome = Outcome()
        self.controller = AbortController()
        self.done = threading.Event()
        self.gave_up = False
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.task: Optional[asyncio.Task[None]] = None

    def run(self) -> Outcome:
        worker = threading.Thread(target=self._work, name=f"conformance {self.case.name}", daemon=True)
        aborter: Optional[threading.Thread] = None
        if self.case.scenario == "abort":
            aborter = threading.Thread(target=self._abort, daemon=True)
        worker.start()
        if aborter is not None:
            aborter.start()
        worker.join(self.case.target.timeout)
        if worker.is_alive() or not self.outcome.ended:
            # Past the bound, whatever the backend does next is not its answer.
            self.gave_up = True
            self.outcome.hung = True
            self._cancel_worker()
            worker.join(1.0)
        self.done.set()
        if aborter is not None:
            aborter.join(self.case.target.timeout)
        return self.outcome

    def _cancel_worker(self) -> None:
        loop, task = self.loop, self.task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop finished in the meantime
                pass

    def _abort(self) -> None:
        if self._await_generation_sync() is None:
            return
        time.sleep(ABORT_DELAY)
        reason = ConformanceAbort(f"aborted by the conformance case {self.case.name}")
        self.outcome.abort_reason = reason
        self.outcome.abort_at = time.monotonic()
        self.controller.abort(reason)

    def _await_generation_sync(self) -> Optional[RecordedRequest]:
        # Short waits, so the thread stops as soon as the backend is done without a call.
        deadline = time.monotonic() + self.case.target.timeout
        while not self.done.is_set() and time.monotonic() < deadline:
            try:
                request: RecordedRequest = self.provider.next_request(0.05)
            except TimeoutError:
                continue
            if self.case.target.wire.is_generation(request):
                return request
        return None

    def _work(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - a broken backend must not kill the thread
            self._ended(exc)
        finally:
            self.done.set()

    def _ended(self, error: Optional[BaseException]) -> None:
        if not self.outcome.ended and not self.gave_up:
            self.outcome.ended = True
            self.outcome.error = error
            self.outcome.error_at = time.monotonic() if error is not None else None

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        # Sync backends block their own threads, not this loop; stay quiet under -X dev.
        self.loop.slow_callback_duration = 1.0
        self.task = asyncio.current_task()
        target = self.case.target
        backend = None
        try:
            backend = target.create_backend(self.provider.url)
            if inspect.isawaitable(backend):
                backend = await backend
            request = conformance_request(target.model, signal=self.controller.signal)
            if self.case.scenario == "cancel":
                await self._cancel(backend, request)
            else:
                await self._call(backend, request)
                self._ended(None)
        except BaseException as exc:  # noqa: BLE001 - whatever the backend raised is the outcome
            self._ended(exc)
        finally:
            if backend is not None:
                await self._close(backend)

    def _hook(self, backend: Any) -> Tuple[Callable[[Any, ChatRequest], Any], Any]:
        """The function to call for this mode, and what tells whether it is async."""
        target = self.case.target
        if self.case.mode == "chat":
            if target.chat is not None:
                return target.chat, target.chat
            return _default_chat, getattr(backend, "chat", None)
        if target.stream is not None:
            return target.stream, target.stream
        return _default_stream, getattr(backend, "chat_stream", None)

    async def _start(self, backend: Any, request: ChatRequest) -> Any:
        hook, probe = self._hook(backend)
        if _is_async(probe):
            return hook(backend, request)
        return await _in_thread(hook, backend, request)

    async def _call(self, backend: Any, request: ChatRequest) -> None:
        result = await self._start(backend, request)
        if self.case.mode == "chat":
            if inspect.isawaitable(result):
                result = await result
            self.outcome.response = result
            return
        if inspect.isawaitable(result) and not hasattr(result, "__aiter__"):
            result = await result
        if hasattr(result, "__aiter__"):
            async for chunk in result:
                self.outcome.chunks.append(chunk)
        else:
            await _in_thread(self._drain, result)

    def _drain(self, iterable: Any) -> None:
        # Chunk by chunk, so a stream that hangs keeps what it yielded before.
        for chunk in iterable:
            self.outcome.chunks.append(chunk)

    async def _cancel(self, backend: Any, request: ChatRequest) -> None:
        _, probe = self._hook(backend)
        if not _is_async(probe):
            what = (
                "chat is not a coroutine function"
                if self.case.mode == "chat"
                else ("chat_stream is not an async generator function")
            )
            self.outcome.skipped = f"cancel applies to async backends only: {what}"
            self._ended(None)
            return
        result = await self._start(backend, request)
        if self.case.mode == "chat":
            work: asyncio.Future[Any] = asyncio.ensure_future(result)
        else:

            async def consume() -> None:
                async for chunk in result:
                    self.outcome.chunks.append(chunk)

            work = asyncio.ensure_future(consume())
        waiting = asyncio.ensure_future(self._await_generation_async())
        await asyncio.wait({work, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            await asyncio.sleep(ABORT_DELAY)
            self.outcome.abort_at = time.monotonic()
            work.cancel()
        waiting.cancel()
        try:
            await work
        except BaseException as exc:  # noqa: BLE001 - CancelledError or what wrapped it
            self._ended(exc)
        else:
            self._ended(None)

    async def _await_generation_async(self) -> Optional[RecordedRequest]:
        deadline = time.monotonic() + self.case.target.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                request: RecordedRequest = await self.provider.next_request_async(left)
            except TimeoutError:
                return None
            if self.case.target.wire.is_generation(request):
                return request

    async def _close(self, backend: Any) -> None:
        try:
            aclose = getattr(backend, "aclose", None)
            close = getattr(backend, "close", None)
            if callable(aclose):
                await aclose()
            elif callable(close):
                result = close()
                if inspect.isawaitable(result):
                    await result
        except BaseException as exc:  # noqa: BLE001 - reported as a problem, not raised
            self.outcome.close_error = exc
