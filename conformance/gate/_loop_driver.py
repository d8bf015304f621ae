"""Driving one agent loop through one stage: a worker thread with an event loop of its own.

Strategy: as for backends (``conformance._driver``), the loop's ``run`` is called on
a worker's event loop when it is ``async def``, and in a daemon thread of its own
otherwise; an awaitable that a plain function returns is awaited. The caller's
thread keeps the case's time bound. For the cancel stage an aborter thread fires the
task's signal at a protocol event (once the provider has flushed the chunk that
carries the call's first argument fragment, or, for a whole reply, once the request
is in), and the connection is watched from the abort on while the loop is still
alive and unclosed: closing it in ``close()`` afterwards is too late to count. For
the cancel-in-tool stage it fires once the toolset has seen ``delayed_value`` begin;
the reply was whole by then, so no connection is watched.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from .._bounds import RECLAIM_WITHIN, ConformanceAbort
from .._driver import _is_async, close_loop, close_quietly, in_thread, observe_close, reclaim, wind_down
from .._stall import WATCH
from ..contract import AbortController
from .loop import LoopTask
from .tools import tool_specs

if TYPE_CHECKING:
    from ._conversation import Conversation
    from .cases import AgentLoopCase
    from .tools import GateToolset

__all__ = ["SEEN_WITHIN", "LoopDriver", "LoopOutcome"]

#: How long after the held chunk was flushed the cancel stage aborts.
SEEN_WITHIN = 0.05


@dataclass
class LoopOutcome:
    """What a loop did in one case."""

    result: Any = None
    error: Optional[BaseException] = None
    error_at: Optional[float] = None
    started: float = 0.0
    ended_at: Optional[float] = None
    ended: bool = False
    hung: bool = False
    waited: float = 0.0
    abort_at: Optional[float] = None
    abort_reason: Optional[BaseException] = None
    #: Seconds from the abort until the provider saw the close, observed while the
    #: loop was alive; ``None`` where it did not come within the bound.
    closed_after: Optional[float] = None
    close_error: Optional[BaseException] = None
    left_behind: Optional[str] = None
    #: Seconds in which this whole process could not run (``conformance._stall``),
    #: between the abort and the loop's error, and between the start and the end: not
    #: counted against the abort bound and the task's ``max_seconds``. Watched in the
    #: stages those bounds are about (cancel, and a stage with a budget of its own).
    stalled_after_abort: float = 0.0
    stalled_in_run: float = 0.0


def _default_run(loop: Any, task: LoopTask) -> Any:
    return loop.run(task)


class LoopDriver:
    """Runs one case's loop in a worker thread with an event loop of its own."""

    def __init__(
        self, case: AgentLoopCase, provider: Any, conversation: Conversation, toolset: GateToolset
    ) -> None:
        self.case = case
        self.provider = provider
        self.conversation = conversation
        self.toolset = toolset
        self.outcome = LoopOutcome()
        self.controller = AbortController()
        self.finished = threading.Event()
        self.lock = threading.Lock()
        self.gave_up = False
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.task: Optional[asyncio.Task[Any]] = None
        self.worker: Optional[threading.Thread] = None
        self.threads: list[threading.Thread] = []

    def task_for(self) -> LoopTask:
        case = self.case
        stage = case.stage
        return LoopTask(
            prompt=stage.prompt,
            tools=self.toolset.specs() + (tool_specs(*stage.extra_tools) if stage.extra_tools else ()),
            tool_choice=stage.tool_choice,
            toolset=self.toolset,
            signal=self.controller.signal,
            stream=case.mode == "stream",
            model=case.target.model,
            max_requests=case.max_requests,
            max_seconds=case.max_seconds,
        )

    # -- the caller's side ----------------------------------------------------------------

    def run(self) -> LoopOutcome:
        stage = self.case.stage
        if not stage.cancel and stage.max_seconds is None:
            return self._run()
        with WATCH:
            outcome = self._run()
            outcome.stalled_after_abort = WATCH.between(outcome.abort_at, outcome.error_at)
            outcome.stalled_in_run = WATCH.between(outcome.started, outcome.ended_at)
        return outcome

    def _run(self) -> LoopOutcome:
        timeout = self.case.target.timeout
        self.outcome.started = time.monotonic()
        self.worker = threading.Thread(target=self._work, name=f"gate {self.case.name}", daemon=True)
        aborter = None
        if self.case.stage.cancel:
            aborter = threading.Thread(target=self._abort, name="gate abort", daemon=True)
        self.worker.start()
        if aborter is not None:
            aborter.start()
        if not self.finished.wait(timeout):
            with self.lock:
                self.gave_up = True
                ended = self.outcome.ended
            if not ended:
                self.outcome.hung = True
                self.outcome.waited = time.monotonic() - self.outcome.started
            # Let a loop that honours its signal go, then stop what is left.
            self.controller.abort(ConformanceAbort(f"the gate gave up on {self.case.name} at its bound"))
            loop, task = self.loop, self.task
            if loop is not None and task is not None:
                try:
                    loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:
                    pass
            self.finished.wait(RECLAIM_WITHIN)
        if aborter is not None:
            aborter.join(RECLAIM_WITHIN)
        return self.outcome

    def reclaim(self) -> None:
        """Once the provider has closed: wait, bounded, for what the loop left running."""
        self.outcome.left_behind = reclaim(self.worker, self.loop, self.threads, "loop", lambda: None)

    # -- the abort ------------------------------------------------------------------------

    def _abort(self) -> None:
        """Fire the signal at the protocol event: the held chunk flushed, or the request in."""
        deadline = self.outcome.started + self.case.target.timeout
        conversation = self.conversation
        while not conversation.first_reply.wait(0.02):
            if self.finished.is_set() or time.monotonic() > deadline:
                return
        if self.case.stage.abort_in_tool:
            self._abort_in_tool(deadline)
            return
        exchange = conversation.exchanges[0]
        request = exchange.request
        if exchange.stream and exchange.head_chunks:
            wait_flushed = getattr(request, "wait_flushed", None)
            if callable(wait_flushed):
                wait_flushed(exchange.head_chunks, max(0.0, deadline - time.monotonic()))
            else:
                while not self.finished.is_set() and time.monotonic() < deadline:
                    response = request.response
                    if response is not None and len(response.times) >= exchange.head_chunks:
                        break
                    time.sleep(0.005)
            # Long enough for the loop to have read the call opening: what it does with a
            # call it knows of is what the stage is about.
            self.finished.wait(SEEN_WITHIN)
        if self.finished.is_set() or self.outcome.ended:
            return
        reason = ConformanceAbort(f"aborted by the gate's {self.case.name} case")
        self.outcome.abort_reason = reason
        self.outcome.abort_at = time.monotonic()
        self.controller.abort(reason)

    def _abort_in_tool(self, deadline: float) -> None:
        """Fire the signal while the turn's ``delayed_value`` runs: once it has begun, and a moment on."""
        log = self.toolset.log
        while log.wait_begun("delayed_value", 0.02) is None:
            if self.finished.is_set() or time.monotonic() > deadline:
                return
        # Long enough for the tool to be under way: what the loop does with a running tool
        # is what the stage is about.
        self.finished.wait(SEEN_WITHIN)
        if self.finished.is_set() or self.outcome.ended:
            return
        reason = ConformanceAbort(f"aborted by the gate's {self.case.name} case")
        self.outcome.abort_reason = reason
        self.outcome.abort_at = time.monotonic()
        self.controller.abort(reason)

    # -- the worker -----------------------------------------------------------------------

    def _ended(self, result: Any, error: Optional[BaseException]) -> None:
        with self.lock:
            if self.outcome.ended or self.gave_up:
                return
            self.outcome.ended = True
            self.outcome.result = result
            self.outcome.error = error
            self.outcome.ended_at = time.monotonic()
            if error is not None:
                self.outcome.error_at = self.outcome.ended_at

    def _work(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        loop.slow_callback_duration = 1.0
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # noqa: BLE001 - a broken loop must not kill the thread
            self._ended(None, exc)
        finally:
            try:
                wind_down(loop)
            except BaseException:  # noqa: BLE001 - stopped by reclaim(): close what can be closed
                pass
            finally:
                close_loop(loop)
                self.finished.set()

    async def _main(self) -> None:
        self.task = asyncio.current_task()
        target = self.case.target
        agent = None
        try:
            agent = target.create_loop(self.provider.url)
            if inspect.isawaitable(agent):
                agent = await agent
            task = self.task_for()
            hook = target.run or _default_run
            probe = target.run if target.run is not None else getattr(agent, "run", None)
            if _is_async(probe):
                result = hook(agent, task)
            else:
                result = await self._in_thread(hook, agent, task)
            if inspect.isawaitable(result):
                result = await result
            self._ended(result, None)
        except BaseException as exc:  # noqa: BLE001 - whatever the loop raised is the outcome
            self._ended(None, exc)
        finally:
            try:
                # An abort in a tool comes after the reply was whole: no request is open.
                watch = not self.case.stage.abort_in_tool
                if self.outcome.abort_at is not None and not self.gave_up and watch:
                    await self._observe_close()
            finally:
                if agent is not None:
                    await self._close(agent)
                self.finished.set()

    async def _observe_close(self) -> None:
        abort_at = self.outcome.abort_at
        assert abort_at is not None
        request = self.conversation.exchanges[0].request if self.conversation.exchanges else None
        self.outcome.closed_after = await observe_close(
            request, abort_at, lambda *call: self._in_thread(*call, track=False)
        )

    def _in_thread(self, function: Any, *args: Any, track: bool = True) -> asyncio.Future[Any]:
        return in_thread(function, *args, name="gate sync loop", threads=self.threads if track else None)

    async def _close(self, agent: Any) -> None:
        self.outcome.close_error = await close_quietly(agent)
