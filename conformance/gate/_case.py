"""An agent-loop case's data: the case, its budgets, what the loop did, and the evidence it leaves.

Strategy: as for backends (``conformance._case``), a case's data lives a floor below
the machinery that runs it. The invariants and the loop driver read
:class:`LoopCase` and :class:`LoopOutcome` from here; the cases that run
(:class:`~conformance.gate.cases.AgentLoopCase` for a stage,
:class:`~conformance.gate.replay_cases.ReplayLoopCase` for a recorded conversation)
add ``run()`` on top, one floor up, and neither needs the other. Both read the
tools' files from one read-only sandbox per process (:func:`shared_sandbox`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from .._case import SubjectOutcome
from .loop import USAGE_NOT_REPORTED, AgentLoopTarget
from .stages import STAGES, STOP_WITH_CALLS, Stage, reasoning_for

if TYPE_CHECKING:
    from .log import RequestRecord
    from .sandbox import Sandbox

__all__ = ["LATE_RUN_GRACE", "MAX_REQUESTS", "CaseEvidence", "LoopCase", "LoopOutcome", "shared_sandbox"]

#: The request budget every task carries.
MAX_REQUESTS = 4


@dataclass
class CaseEvidence:
    """What the last run of a case leaves for the release report, pass or fail.

    ``requests``: each request the loop sent, with the status and request id the
    provider answered it with. ``usage``: what the loop's ``LoopResult.usage`` said
    (``"not reported"`` where it said nothing, or returned no result). ``sent_usage``:
    what the provider reported over the conversation (``None``: no turn reported
    any; ``"not judged"``: a stream cut short, or a wire the gate has no usage row for).
    """

    requests: Tuple[RequestRecord, ...] = ()
    usage: Any = USAGE_NOT_REPORTED
    sent_usage: Any = None
    ran: bool = False


@dataclass(frozen=True)
class LoopCase:
    """One stage in one mode for one agent-loop target: what a case is, apart from how it runs."""

    target: AgentLoopTarget
    stage_name: str
    mode: str
    #: Filled by ``run()``, for the release report.
    evidence: CaseEvidence = field(default_factory=CaseEvidence, compare=False, repr=False)

    @property
    def name(self) -> str:
        """``forced-tool/stream``."""
        return f"{self.stage_name}/{self.mode}"

    @property
    def stage(self) -> Stage:
        return STAGES[self.stage_name]

    @property
    def max_requests(self) -> int:
        return MAX_REQUESTS

    @property
    def max_seconds(self) -> float:
        """The task's time budget: most of the case's bound, so the loop's own limit acts first.

        A stage with a budget of its own (the timeout fault's) gets that, where shorter.
        """
        bound = round(self.target.timeout * 0.8, 2)
        own = self.stage.max_seconds
        return min(bound, own) if own is not None else bound

    @property
    def timed(self) -> bool:
        """Whether a time bound judges this case (the abort's, or a budget of the stage's own):
        its run then does not count what stalled the whole process (``conformance._stall``)."""
        stage = STAGES.get(self.stage_name)
        return stage is not None and (stage.cancel or stage.max_seconds is not None)

    @property
    def skip(self) -> Optional[str]:
        """Why this case is skipped, or ``None``: the target's reason, then the wire's."""
        reason = self.target.skip_reason(self.stage_name, self.mode)
        if reason:
            return reason
        wire = self.target.wire
        if not wire.scripts_turns():
            return f"{wire.name} cannot play scripted conversations"
        if self.stage.stress:
            if self.stage_name not in self.target.stress:
                return (
                    f"opt-in stress stage: {self.stage.stress}; name it in the target's stress to run it"
                )
            if not wire.interleaves_calls:
                return f"{wire.name} cannot interleave two calls' fragments: it sends each call whole"
        if self.stage.reasoning and reasoning_for(wire) is None:
            return f"{wire.name} carries no reasoning across a tool turn"
        if self.stage_name == "content-filter-turn" and wire.absent("content-filter"):
            return f"{wire.name} has no content filter: {wire.absent('content-filter')}"
        if self.stage_name == "calls-with-stop" and wire.name not in STOP_WITH_CALLS:
            return (
                f"no {wire.name} turn that calls tools ends with finish reason stop (the stage plays "
                f"where a provider's does: {', '.join(STOP_WITH_CALLS)})"
            )
        if self.stage.fault:
            from .faults import fault_skip

            return fault_skip(self.stage, wire, self.mode)
        return None

    def run(self) -> None:
        """Run the case: return quietly, raise :class:`AssertionError`, or skip (each kind its way)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.target.name} {self.target.wire.name} {self.name}>"


#: The quiet the toolset is watched for after a run that raised, was aborted or was given
#: up on at the case's bound (and after one that returned, where a tool began after it
#: returned): a tool task the loop left behind starts there. The watch goes on while the
#: loop keeps beginning executions, up to the case's bound (``_loop_driver.watch_late``).
LATE_RUN_GRACE = 0.5


@dataclass
class LoopOutcome(SubjectOutcome):
    """What a loop did in one case."""

    result: Any = None
    #: Seconds between the start and the end in which this whole process could not run
    #: (``conformance._stall``): not counted against the task's ``max_seconds``. Watched
    #: in the stages that bound is about (a stage with a budget of its own, and cancel),
    #: and read only where the run went past the budget and its grace.
    stalled_in_run: float = 0.0
    #: Seconds between the abort and the last tool running then stopping in which this
    #: whole process could not run: not counted against ``TOOL_STOP_WITHIN``.
    stalled_before_tool_stop: float = 0.0


_shared: Dict[int, Sandbox] = {}  # by process id: a forked child makes its own
_shared_lock = threading.Lock()


def shared_sandbox() -> Sandbox:
    """The read-only sandbox every case of this process reads from, made on first use.

    The files never change and no tool writes, so one directory serves every case
    (making one per case cost a case about 6 ms). It is removed when the process
    exits, a worker process of a pool included; a forked child leaves its parent's
    alone and makes its own.
    """
    import multiprocessing.util

    from .sandbox import Sandbox

    pid = os.getpid()
    with _shared_lock:
        sandbox = _shared.get(pid)
        if sandbox is None or sandbox.closed:
            for other in [p for p in _shared if p != pid]:
                _shared.pop(other).detach()  # the parent's: never removed from here
            sandbox = _shared[pid] = Sandbox()
            # A pool's worker ends with os._exit, past atexit; this runs there too.
            multiprocessing.util.Finalize(None, sandbox.close, exitpriority=0)
        return sandbox
