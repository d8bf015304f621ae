"""Driving one backend through one case, along the one outline (``_outline``).

Strategy: the outline runs the backend on a worker's event loop within the case's
bound, watches the close the abort asks for, and reclaims what is left; this module
says what is particular to a backend. Async calls run on the worker's loop; sync
calls in a daemon thread of their own, so a sync backend that runs ``asyncio.run``
inside still works. Whether a backend is async is decided by what its call gives back
(an awaitable, an async iterator), not by how the function is declared.

Abort and cancel fire on events, not after a delay: when the provider has the
generation request and, in stream mode, the backend has yielded its first chunk.
Whatever the backend returned, yielded or raised is gathered into an
:class:`~conformance._case.Outcome` for the checks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ._bounds import ABORT_CLOSE_WITHIN, ABORT_DELAY, ABORT_RAISE_WITHIN, ConformanceAbort
from ._case import Outcome
from ._loops import is_async, is_async_result
from ._outline import SubjectDriver
from .contract import ChatRequest
from .fixture import conformance_request

if TYPE_CHECKING:
    from ._case import BackendCase
    from .provider import RecordedRequest

__all__ = ["ABORT_CLOSE_WITHIN", "ABORT_DELAY", "ABORT_RAISE_WITHIN", "ConformanceAbort", "Driver", "Outcome"]

#: How often the aborter looks whether the backend ended without a generation request.
_LOOK_EVERY = 0.05


def _default_chat(backend: Any, request: ChatRequest) -> Any:
    return backend.chat(request)


def _default_stream(backend: Any, request: ChatRequest) -> Any:
    return backend.chat_stream(request)


class Driver(SubjectDriver):
    """Runs one case's backend in a worker thread with a loop of its own."""

    what = "backend"
    label = "conformance"
    outcome: Outcome

    def __init__(self, case: BackendCase, provider: Any, variant: str = "") -> None:
        target = case.target
        super().__init__(
            case.name,
            provider,
            target.create_backend,
            timeout=case.bound,
            timed=case.timed,
            outcome=Outcome(),
        )
        self.case = case
        self.variant = variant
        #: The generation request the abort or cancel was placed at.
        self.generation: Optional[RecordedRequest] = None

    def _chunk(self, chunk: Any) -> None:
        self.outcome.chunks.append(chunk)
        self.progress.set()

    def watched_request(self) -> Optional[RecordedRequest]:
        return self.generation

    # -- abort ----------------------------------------------------------------------------

    def aborts(self) -> bool:
        return self.case.scenario == "abort"

    def abort_when_due(self) -> None:
        request = self._await_generation_sync()
        if request is None:
            return
        self.generation = request
        if self.case.mode == "stream":
            self.progress.wait(ABORT_DELAY)
        self.fire_abort(f"aborted by the conformance case {self.case.name}")

    def _await_generation_sync(self) -> Optional[RecordedRequest]:
        # Each wait ends at once when a request comes; its bound only lets the thread see
        # that the backend ended without one.
        deadline = time.monotonic() + self.timeout
        while not self.finished.is_set() and not self.outcome.ended and time.monotonic() < deadline:
            try:
                request: RecordedRequest = self.provider.next_request(_LOOK_EVERY)
            except TimeoutError:
                continue
            if self.case.target.wire.is_generation(request):
                return request
        return None

    # -- the worker's loop ----------------------------------------------------------------

    async def drive(self, backend: Any) -> None:
        target = self.case.target
        from ._multiturn import asks_thinking

        if self.case.scenario in ("tool-result", "parallel-tool-calls"):
            from ._multiturn import multi_turn_request

            earlier = None
            if self.case.scenario == "tool-result":
                earlier = await self._earlier_turn(backend)
            request = multi_turn_request(
                target.wire,
                self.case.scenario,
                self.variant,
                target.model,
                self.controller.signal,
                earlier,
                self.outcome.earlier_reasoning,
            )
        else:
            request = conformance_request(target.model, signal=self.controller.signal)
        if asks_thinking(target.wire, self.case.scenario, self.variant):
            # The provider sends some reasoning only to a request that asks (Anthropic's
            # thinking): the case asks, as its headline says.
            request = dataclasses.replace(request, thinking=True)
        if self.case.scenario == "cancel":
            await self._cancel(backend, request)
        else:
            await self._call(backend, request)
            self.ended(None)

    def _hook(self, backend: Any) -> Tuple[Callable[[Any, ChatRequest], Any], Any, str]:
        """The function to call for this mode, what tells whether it is async, and its name."""
        target = self.case.target
        if self.case.mode == "chat":
            if target.chat is not None:
                return target.chat, target.chat, "the target's chat hook"
            return _default_chat, getattr(backend, "chat", None), "chat"
        if target.stream is not None:
            return target.stream, target.stream, "the target's stream hook"
        return _default_stream, getattr(backend, "chat_stream", None), "chat_stream"

    async def _start(self, backend: Any, request: ChatRequest) -> Any:
        hook, probe, _ = self._hook(backend)
        return await self.call(hook, probe, backend, request)

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
                self._chunk(chunk)
        else:
            await self.in_thread(self._drain, result)

    async def _earlier_turn(self, backend: Any) -> Tuple[Any, ...]:
        """The turn before a ``tool-result`` case's own: the question, answered with the call.

        What the backend returns is what its next turn is built from, as a loop builds it:
        the calls as the backend gave them (their ids, arguments and reasoning), and the
        reasoning it returned with them, so an id the backend changed on the way in must be
        given back as the provider issued it, and reasoning it lost cannot go back.
        """
        from ._multiturn import asks_thinking

        target = self.case.target
        request = conformance_request(target.model, signal=self.controller.signal)
        if asks_thinking(target.wire, self.case.scenario, self.variant):
            request = dataclasses.replace(request, thinking=True)
        result = await self._start(backend, request)
        calls: List[Any] = []
        reasoning: List[Any] = []
        if self.case.mode == "chat":
            if inspect.isawaitable(result):
                result = await result
            calls.extend(getattr(result, "tool_calls", None) or ())
            reasoning.extend(getattr(result, "reasoning", None) or ())
        else:
            if inspect.isawaitable(result) and not hasattr(result, "__aiter__"):
                result = await result
            chunks: List[Any] = []
            if hasattr(result, "__aiter__"):
                async for chunk in result:
                    chunks.append(chunk)
            else:
                await self.in_thread(chunks.extend, result)
            for chunk in chunks:
                calls.extend(getattr(chunk, "tool_calls", None) or ())
                reasoning.extend(getattr(chunk, "reasoning", None) or ())
        self.outcome.earlier = tuple(calls)
        self.outcome.earlier_reasoning = tuple(reasoning)
        self.outcome.earlier_requests = len(self.provider.requests)
        return self.outcome.earlier

    def _drain(self, iterable: Any) -> None:
        # Chunk by chunk, so a stream that hangs keeps what it yielded before.
        for chunk in iterable:
            self._chunk(chunk)

    # -- cancel ---------------------------------------------------------------------------------

    def _skip_sync(self, why: str) -> None:
        self.outcome.skipped = f"cancel applies to async backends only: {why}"
        self.ended(None)

    async def _cancel(self, backend: Any, request: ChatRequest) -> None:
        hook, probe, name = self._hook(backend)
        waiting = asyncio.ensure_future(self._await_generation_async())
        try:
            if inspect.isgeneratorfunction(probe):
                return self._skip_sync(f"{name} is a generator function (it returns a sync iterator)")
            if is_async(probe):
                result = hook(backend, request)
            else:
                # A plain function may hand back an awaitable or an async iterator (then
                # the backend is async in all but name), or do the blocking work itself.
                call = asyncio.ensure_future(self.in_thread(hook, backend, request))
                await asyncio.wait({call, waiting}, return_when=asyncio.FIRST_COMPLETED)
                if not call.done():
                    # Let a sync backend that honours the signal go; the case is not for it.
                    self.controller.abort(ConformanceAbort("the cancel case skipped a sync backend"))
                    return self._skip_sync(
                        f"{name} blocked its thread on the request instead of returning an awaitable"
                    )
                result = call.result()
                if not is_async_result(result):
                    return self._skip_sync(
                        f"{name} returned {type(result).__name__}, not an awaitable or async iterator"
                    )
            await self._cancel_running(result, waiting)
        finally:
            waiting.cancel()

    async def _cancel_running(self, result: Any, waiting: asyncio.Future[Optional[RecordedRequest]]) -> None:
        first = asyncio.Event()
        if self.case.mode == "chat" or not hasattr(result, "__aiter__"):

            async def settle() -> Any:
                value = await result
                if hasattr(value, "__aiter__"):  # an awaitable that gives the stream
                    await consume(value)
                return value

            async def consume(stream: Any) -> None:
                async for chunk in stream:
                    self._chunk(chunk)
                    first.set()

            work: asyncio.Future[Any] = asyncio.ensure_future(settle())
        else:

            async def consume_result() -> None:
                async for chunk in result:
                    self._chunk(chunk)
                    first.set()

            work = asyncio.ensure_future(consume_result())
        await asyncio.wait({work, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done() and waiting.done():
            self.generation = waiting.result()
            if self.case.mode == "stream":
                yielded = asyncio.ensure_future(first.wait())
                await asyncio.wait({work, yielded}, timeout=ABORT_DELAY, return_when=asyncio.FIRST_COMPLETED)
                yielded.cancel()
            if not work.done():
                self.outcome.abort_at = time.monotonic()
                work.cancel()
        try:
            await work
        except BaseException as exc:  # noqa: BLE001 - CancelledError or what wrapped it
            self.ended(exc)
        else:
            self.ended(None)

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
