"""A gate stage played to an agent loop in another process, and judged by the gate's invariants.

Strategy: as :class:`~conformance.gate.cases.AgentLoopCase` does for a Python loop, a
:class:`~conformance.gate._conversation.Conversation` answers every request the
stage's way and a :class:`~conformance.gate.GateToolset` runs the tools (here at
``POST /conformance/tools/<name>``, see ``conformance._judge``). The loop's report
stands in for what the loop driver observes (its result or error, and when; a run
that reports nothing is given up on as the driver gives up on a loop at its bound); the
invariants then read a :class:`~conformance.gate._invariants.LoopSeen` made of exactly
the parts they read for a Python loop (``cases.loop_seen``), and a timed stage leaves
out what stalled the whole process through the same window the driver opens
(``conformance._outline.StallWindow``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from .._bounds import BUDGET_GRACE
from .._judge import (
    CLIENT,
    ReportedResult,
    Session,
    Verdict,
    elsewhere,
    reported_error,
    tool_json,
    write_tools,
)
from ..provider import RecordedRequest, Reply

if TYPE_CHECKING:
    from ..wires._base import Wire
    from .tools import GateToolset

__all__ = ["STAGE_NOT_JUDGED", "StageSession"]

#: Why a stage is served but not judged: the kit cannot reach into another process.
STAGE_NOT_JUDGED = {
    "cancel": "the cancel stage aborts through the task's signal inside the loop, which a client in "
    "another process does not share: serve plays it (the stream holds after the call's first "
    "argument fragment) but cannot judge it",
    "cancel-in-tool": "the cancel-in-tool stage aborts through the task's signal while a tool runs "
    "inside the loop, which a client in another process does not share: serve plays it but cannot "
    "judge it",
}


class StageSession(Session):
    """A gate stage: the client is an agent loop, runs its tools here, and reports its result."""

    kind = "loop"

    def __init__(
        self,
        wire: Wire,
        stage: str,
        mode: str,
        toolset: GateToolset,
        *,
        max_result_chars: Optional[int] = None,
        **kw: Any,
    ) -> None:
        super().__init__(wire, mode, toolset, **kw)
        from .._outline import StallWindow
        from ._case import LoopCase
        from ._conversation import Conversation
        from .loop import AgentLoopTarget

        target = AgentLoopTarget(
            CLIENT,
            wire,
            elsewhere,
            model=self.model,
            http2=self.http2,
            max_result_chars=max_result_chars,
            timeout=self.timeout,
        )
        self.case = LoopCase(target, stage, mode)
        self.conversation = Conversation(wire, self.case.stage, toolset, self.case.max_requests)
        # As the loop driver's run is: the time this process could not run is not counted
        # against the bounds a timed stage is judged by (the loop's max_seconds).
        self.window = StallWindow(self.case.timed and stage not in STAGE_NOT_JUDGED)

    def close(self) -> None:
        self.window.close()

    @property
    def case_name(self) -> str:
        return self.case.name

    def task(self) -> Dict[str, Any]:
        stage = self.case.stage
        choice = stage.tool_choice
        tools = tool_json(self.toolset, stage.extra_tools)
        return {
            "kind": "loop",
            "wire": self.wire.name,
            "stage": stage.name,
            "mode": self.mode,
            "stream": self.mode == "stream",
            "model": self.model,
            "prompt": stage.prompt,
            "tools": tools,
            "write_tools": write_tools(tools),
            "tool_choice": None if choice is None else {"mode": choice.mode, "name": choice.name},
            "max_requests": self.case.max_requests,
            "max_seconds": self.case.max_seconds,
            "max_result_chars": self.case.target.max_result_chars,
            "must": stage.must,
            "judged": stage.name not in STAGE_NOT_JUDGED,
        }

    def answer(self, request: RecordedRequest) -> Reply:
        return self.conversation.handle(request)

    def judge(
        self, report: Optional[Mapping[str, Any]], requests: List[RecordedRequest], ended: float
    ) -> Verdict:
        from ._invariants import failure_message, run_invariants
        from .cases import loop_seen

        outcome = self.outcome(report, ended)  # a report it cannot read is refused even here
        if self.case.stage_name in STAGE_NOT_JUDGED:
            return self._record("skip", STAGE_NOT_JUDGED[self.case.stage_name], (), ended)
        if self.conversation.unasked:
            return self._record("skip", self.conversation.unasked[0], (), ended)
        seen = loop_seen(self.case, outcome, self.conversation, self.toolset, requests)
        problems = run_invariants(seen)
        if not problems:
            return self._record("pass", "", (), ended)
        return self._record("FAIL", failure_message(seen, problems), [p.check for p in problems], ended)

    def outcome(self, report: Optional[Mapping[str, Any]], ended: float) -> Any:
        """What the loop driver would have observed, from the client's report (``None``: none came)."""
        from .._outline import give_up
        from ._case import LoopOutcome

        started = self.started if self.started is not None else self.opened
        if report is None:
            # As the driver marks a loop still running at the case's bound.
            hung = LoopOutcome(started=started)
            give_up(hung, ended)
            return hung
        stalled = self.window.beyond(started, ended, self.case.max_seconds + BUDGET_GRACE)
        error = report.get("error")
        if error is not None:
            return LoopOutcome(
                error=reported_error(error),
                error_at=ended,
                started=started,
                ended_at=ended,
                ended=True,
                stalled_in_run=stalled,
            )
        result = ReportedResult(
            report.get("text"), report.get("finish_reason"), report.get("stopped", "done")
        )
        return LoopOutcome(result=result, started=started, ended_at=ended, ended=True, stalled_in_run=stalled)
