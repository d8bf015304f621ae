"""Driving one agent loop through one stage, along the one outline (``conformance._outline``).

Strategy: as for backends (``conformance._driver``), the outline runs the loop on a
worker's event loop within the case's bound: its ``run`` is called there when it is
``async def``, and in a daemon thread of its own otherwise; an awaitable that a plain
function returns is awaited. This module says what is particular to a loop: the task
it is given, and when the cancel stages abort. For the cancel stage an aborter thread
fires the task's signal at a protocol event (once the provider has flushed the chunk
that carries the call's first argument fragment, or, for a whole reply, once the
request is in), and the connection is watched from the abort on while the loop is
still alive and unclosed: closing it in ``close()`` afterwards is too late to count.
For the cancel-in-tool stage the toolset fires it from ``delayed_value``'s own wait,
``SEEN_WITHIN`` into it, so no thread's scheduling can put it past the tool's end; the
reply was whole by then, so no connection is watched.
"""

from __future__ import annotations

import inspect
import time
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from .._bounds import BUDGET_GRACE, TOOL_STOP_WITHIN
from .._outline import StallWindow, SubjectDriver, run_on_provider
from ._case import LoopOutcome
from .loop import LoopTask
from .tools import tool_specs

if TYPE_CHECKING:
    from .._case import SubjectOutcome
    from ..provider import RecordedRequest
    from ._case import LoopCase
    from ._conversation import Conversation
    from .tools import GateToolset

__all__ = ["SEEN_WITHIN", "LoopDriver", "LoopOutcome", "drive_loop", "watch_late"]

#: How long after the held chunk was flushed (or the slow tool began) the cancel stages abort.
SEEN_WITHIN = 0.05
#: How often the aborter looks whether the loop ended before the event it waits for.
_LOOK_EVERY = 0.02


def _default_run(loop: Any, task: LoopTask) -> Any:
    return loop.run(task)


class LoopDriver(SubjectDriver):
    """Runs one case's loop in a worker thread with an event loop of its own."""

    what = "loop"
    label = "gate"
    outcome: LoopOutcome

    def __init__(
        self, case: LoopCase, provider: Any, conversation: Conversation, toolset: GateToolset
    ) -> None:
        target = case.target
        super().__init__(
            case.name,
            provider,
            target.create_loop,
            timeout=target.timeout,
            timed=case.timed,
            outcome=LoopOutcome(),
        )
        self.case = case
        self.conversation = conversation
        self.toolset = toolset
        if case.stage.abort_in_tool:
            # The cancel fires from the tool's own wait, SEEN_WITHIN into it: a thread of
            # ours that a loaded machine leaves unscheduled for the tool's whole run would
            # fire it only once the tool had run out, or the loop had ended.
            toolset._abort_during("delayed_value", SEEN_WITHIN, self._abort_now)

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

    # -- the outline's questions -------------------------------------------------------

    async def drive(self, agent: Any) -> None:
        target = self.case.target
        task = self.task_for()
        hook = target.run or _default_run
        probe = target.run if target.run is not None else getattr(agent, "run", None)
        result = await self.call(hook, probe, agent, task)
        if inspect.isawaitable(result):
            result = await result
        self.ended(None, result)

    def keep(self, result: Any) -> None:
        self.outcome.result = result

    def count_stalls(self, outcome: SubjectOutcome, window: StallWindow) -> None:
        super().count_stalls(outcome, window)
        assert isinstance(outcome, LoopOutcome)
        bound = self.case.max_seconds + BUDGET_GRACE
        outcome.stalled_in_run = window.beyond(outcome.started, outcome.ended_at, bound)
        abort_at = outcome.abort_at
        if abort_at is not None:
            stops = [r.ended for r in self.toolset.log.records() if r.started < abort_at < r.ended]
            if stops:
                outcome.stalled_before_tool_stop = window.beyond(abort_at, max(stops), TOOL_STOP_WITHIN)

    def watched_request(self) -> Optional[RecordedRequest]:
        # An abort in a tool comes after the reply was whole: no request is open.
        if self.case.stage.abort_in_tool or not self.conversation.exchanges:
            return None
        return self.conversation.exchanges[0].request

    # -- the abort ------------------------------------------------------------------------

    def aborts(self) -> bool:
        # A cancel in a tool is fired by the tool's wait (see __init__), not by a thread.
        return self.case.stage.cancel and not self.case.stage.abort_in_tool

    def abort_when_due(self) -> None:
        """Fire the signal at the protocol event: the held chunk flushed, or the request in."""
        deadline = self.outcome.started + self.timeout
        conversation = self.conversation
        if not self._until(conversation.first_reply.wait, deadline):
            return
        exchange = conversation.exchanges[0]
        if exchange.stream and exchange.head_chunks:
            request = exchange.request
            if not self._until(lambda wait: request.wait_flushed(exchange.head_chunks, wait), deadline):
                return
        else:
            # A whole reply: the request is in, which is the event.
            self._abort_now()
            return
        # Long enough for the loop to have read the call opening (or the tool to be under
        # way): what it does with a call it knows of is what the stage is about.
        self.finished.wait(SEEN_WITHIN)
        self._abort_now()

    def _abort_now(self) -> None:
        self.fire_abort(f"aborted by the gate's {self.case.name} case")

    def _until(self, wait: Any, deadline: float) -> bool:
        """Wait for an event by ``wait(seconds)`` (true once it came), in short spells, so that a
        loop that ended first ends the wait too; whether it came before the deadline."""
        while not self.finished.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if wait(min(left, _LOOK_EVERY)):
                return True
        return False


def drive_loop(
    case: LoopCase,
    conversation: Conversation,
    toolset: GateToolset,
    handler: Any,
    quiet: float = 0.0,
    every_run: bool = False,
) -> Tuple[LoopOutcome, List[RecordedRequest]]:
    """Run ``case``'s loop against a provider of its own scripted by ``handler``; what the loop
    did, and every request the provider saw. With ``quiet`` the provider stays up and the
    toolset watched after the run (:func:`watch_late`) until the case may end; after every
    run where ``every_run``, else after one that raised, was aborted or given up on."""

    def make(provider: Any) -> LoopDriver:
        return LoopDriver(case, provider, conversation, toolset)

    def linger(outcome: SubjectOutcome) -> None:
        if quiet > 0:
            watch_late(toolset, outcome, quiet, outcome.started + case.target.timeout, every_run)

    driver, requests = run_on_provider(make, handler, http2=case.target.http2, linger=linger)
    return driver.outcome, requests


def watch_late(
    toolset: GateToolset, outcome: SubjectOutcome, quiet: float, bound: float, every_run: bool = False
) -> None:
    """Watch the toolset after a run for what the loop left running; return when the case may end.

    A run that raised, was aborted or was given up on may have left a tool task
    behind: the toolset is watched until ``quiet`` seconds have passed with no
    execution begun, from the run's end (or now, for a run given up on) or from the
    last execution begun, whichever is later, so that a loop still running calls in
    the background keeps the case open; never past the case's ``bound`` (its start
    plus the target's timeout) once the first ``quiet`` seconds are over. A run that
    returned is watched so where ``every_run`` (a replayed conversation: few cases, each
    worth the wait), else only where an execution began after it returned. The
    toolset is read once the provider has closed and the loop's threads are
    reclaimed, so what begins before then counts too.
    """
    log = toolset.log
    now = time.monotonic()
    ended = outcome.ended_at if outcome.ended_at is not None else now
    last = log.last_start()
    if not every_run and outcome.error is None and outcome.abort_at is None and not outcome.hung:
        if last is None or last <= ended:
            return
    bound = max(bound, ended + quiet)
    while True:
        moment = max(ended, last if last is not None else ended)
        due = min(moment + quiet, bound)
        left = due - time.monotonic()
        if left <= 0 or not log.wait_begun_after(moment, left):
            return
        last = log.last_start()
