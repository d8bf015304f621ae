"""Agent-loop cases: one per stage and mode, for any test runner.

Strategy: a case starts a fresh fake provider and a fresh :class:`GateToolset`, lets
a :class:`~conformance.gate._conversation.Conversation` answer every request the
stage's way, hands the user's loop to the driver (``_loop_driver``: a worker thread
with a loop of its own, bounded by the target's timeout), and passes everything it
saw to the invariants (``_invariants``). Every problem is reported at once in one
:class:`AssertionError`. The provider and the toolset are closed whatever happened.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .loop import USAGE_NOT_REPORTED, AgentLoopTarget
from .stages import LOOP_MODES, STAGES, STOP_WITH_CALLS, Stage, reasoning_for

if TYPE_CHECKING:
    from .log import RequestRecord
    from .sandbox import Sandbox

__all__ = [
    "LATE_RUN_GRACE",
    "MAX_REQUESTS",
    "AgentLoopCase",
    "CaseEvidence",
    "agent_loop_cases",
    "shared_sandbox",
]

#: The request budget every task carries.
MAX_REQUESTS = 4
#: How long the toolset is watched after a loop that was aborted (or given up on at the
#: case's bound) has returned: a tool it left running in the background starts there.
LATE_RUN_GRACE = 0.25

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
class AgentLoopCase:
    """One stage in one mode for one agent-loop target; :meth:`run` raises on a breach."""

    target: AgentLoopTarget
    stage_name: str
    mode: str
    #: Filled by :meth:`run`, for the release report.
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

    def __repr__(self) -> str:
        return f"<AgentLoopCase {self.target.name} {self.target.wire.name} {self.name}>"

    def run(self) -> None:
        """Run the case: return quietly, raise :class:`AssertionError`, or skip."""
        import secrets
        import unittest

        from ..provider import start_fake_provider
        from ._conversation import Conversation
        from ._invariants import LoopSeen, failure_message, run_invariants
        from ._loop_driver import LoopDriver
        from .tools import GateToolset

        if self.skip:
            raise unittest.SkipTest(self.skip)
        target = self.target
        with GateToolset(run_id=secrets.token_hex(3), sandbox=shared_sandbox()) as toolset:
            conversation = Conversation(target.wire, self.stage, toolset, self.max_requests)
            with start_fake_provider(http2=target.http2) as provider:
                provider.reply(conversation.handle)
                driver = LoopDriver(self, provider, conversation, toolset)
                outcome = driver.run()
                if outcome.abort_at is not None or outcome.hung:
                    # Nothing to wait for but an absence: a run that starts here is one the
                    # loop left behind when it returned.
                    time.sleep(LATE_RUN_GRACE)
                requests = provider.requests
            driver.reclaim()
            seen = LoopSeen(
                self,
                outcome,
                conversation,
                toolset.log.records(),
                requests,
                toolset.log.in_flight(),
                toolset.journal.entries(),
            )
            self._keep_evidence(seen)
            problems = run_invariants(seen)
        if problems:
            raise AssertionError(failure_message(seen, problems))


    def _keep_evidence(self, seen: Any) -> None:
        from ._usage import UNJUDGED, sent_usage
        from .log import request_records

        sent, _ = sent_usage(self.target.wire.name, seen.exchanges)
        evidence = self.evidence
        evidence.requests = request_records(seen.requests)
        evidence.usage = getattr(seen.outcome.result, "usage", USAGE_NOT_REPORTED)
        evidence.sent_usage = "not judged" if isinstance(sent, str) and sent == UNJUDGED else sent
        evidence.ran = True


def agent_loop_cases(target: AgentLoopTarget) -> List[AgentLoopCase]:
    """Every case for ``target``: each stage in each of its modes, in table order; then, for a
    :class:`~conformance.gate.ReplayWire`, each recorded conversation in its mode."""
    from .replay_cases import replay_loop_cases

    cases = [
        AgentLoopCase(target, name, mode)
        for name, stage in STAGES.items()
        for mode in LOOP_MODES
        if mode in stage.modes
    ]
    return [*cases, *replay_loop_cases(target)]
