"""Agent-loop cases: one per stage and mode, for any test runner.

Strategy: a case's data (its target, stage, mode and budgets) is
:class:`~conformance.gate._case.LoopCase`, a floor below the machinery that runs it;
:class:`AgentLoopCase` adds the running. A case makes a fresh :class:`GateToolset`,
lets a :class:`~conformance.gate._conversation.Conversation` answer every request
the stage's way on a fake provider of its own, hands the user's loop to the driver
(``_loop_driver``, along the one outline of ``conformance._outline``: a worker thread
with a loop of its own, bounded by the target's timeout), and passes everything it saw
to the invariants (``_invariants``). Every problem is reported at once in one
:class:`AssertionError`. The provider and the toolset are closed whatever happened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

from ._case import LATE_RUN_GRACE, MAX_REQUESTS, CaseEvidence, LoopCase, shared_sandbox
from .loop import USAGE_NOT_REPORTED, AgentLoopTarget
from .stages import LOOP_MODES, STAGES

if TYPE_CHECKING:
    from ..provider import RecordedRequest
    from ._case import LoopOutcome
    from ._conversation import Conversation
    from ._invariants import LoopSeen
    from .tools import GateToolset

__all__ = [
    "LATE_RUN_GRACE",
    "MAX_REQUESTS",
    "AgentLoopCase",
    "CaseEvidence",
    "agent_loop_cases",
    "loop_seen",
    "shared_sandbox",
]



class AgentLoopCase(LoopCase):
    """One stage in one mode for one agent-loop target; :meth:`run` raises on a breach."""

    def run(self) -> None:
        """Run the case: return quietly, raise :class:`AssertionError`, or skip."""
        import secrets
        import unittest

        from ._conversation import Conversation
        from ._invariants import failure_message, run_invariants
        from ._loop_driver import drive_loop
        from .tools import GateToolset

        if self.skip:
            raise unittest.SkipTest(self.skip)
        with GateToolset(run_id=secrets.token_hex(3), sandbox=shared_sandbox()) as toolset:
            conversation = Conversation(self.target.wire, self.stage, toolset, self.max_requests)
            outcome, requests = drive_loop(self, conversation, toolset, conversation.handle, LATE_RUN_GRACE)
            if conversation.unasked:
                raise unittest.SkipTest(conversation.unasked[0])
            seen = loop_seen(self, outcome, conversation, toolset, requests)
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


def loop_seen(
    case: LoopCase,
    outcome: LoopOutcome,
    conversation: Conversation,
    toolset: GateToolset,
    requests: List[RecordedRequest],
) -> LoopSeen:
    """Everything the invariants read of one run: what the loop did, the conversation, the
    toolset's log and journal, and the requests; the same for a Python loop and for a loop
    in another process that ``serve`` judges."""
    from ._invariants import LoopSeen

    log = toolset.log
    return LoopSeen(
        case, outcome, conversation, log.records(), requests, log.in_flight(), toolset.journal.entries()
    )


def agent_loop_cases(target: AgentLoopTarget) -> List[LoopCase]:
    """Every case for ``target``: each stage in each of its modes, in table order (an
    :class:`AgentLoopCase` each); then, for a :class:`~conformance.gate.ReplayWire`, each
    recorded conversation in its mode (a ``ReplayLoopCase``)."""
    from .replay_cases import replay_loop_cases

    cases: List[LoopCase] = [
        AgentLoopCase(target, name, mode)
        for name, stage in STAGES.items()
        for mode in LOOP_MODES
        if mode in stage.modes
    ]
    return [*cases, *replay_loop_cases(target)]
