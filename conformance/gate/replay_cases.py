"""Replayed agent-loop conversations: one case per recorded conversation and mode.

Strategy: a recording has no script, so the case checks only what the recording
itself settles. The provider answers each of the loop's generation requests from a
:class:`~conformance.gate.ReplayWire` holding just that conversation's fixtures
(the replay wire's own match rules, chunk for chunk), so its usage is the case's
alone. Afterwards:

* every recorded request was sent and each request matched a recording (the
  replay wire's problems: an unused recording, a request that matches none, with
  the fields that differ, a recording older than ``max_age``);
* every call the recorded responses made (the call ids of their event log) ran
  exactly once, by call id, and none ran that no recorded response made;
* none ran before the last event the replayed stream carried for its call went out
  (its last argument fragment, or the event that closes the call);
* the loop finished with a :class:`LoopResult` that says ``done``.

The task (prompt, tool choice) is the stage the conversation is stamped with, and the
toolset takes the run id the recording is stamped with, so that the results the loop
sends back name the same fixture ids as when it was recorded.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from ._case import LATE_RUN_GRACE, LoopCase, shared_sandbox
from .loop import AgentLoopTarget, LoopResult
from .replay import ReplayWire
from .stages import STAGES

if TYPE_CHECKING:
    from ..provider.events import WireEvent
    from ..provider.replies import RecordedRequest
    from ._case import LoopOutcome
    from .fixture_format import Fixture
    from .log import ExecutionRecord, InFlight

__all__ = ["ReplayLoopCase", "replay_loop_cases"]


def _recorded_calls(fixtures: Sequence[Fixture]) -> Dict[str, str]:
    """Every call id the recorded responses carry, in order, with the fixture that made it."""
    calls: Dict[str, str] = {}
    for index, fixture in enumerate(fixtures):
        for event in fixture.events:
            call_id = event.get("call_id")
            if isinstance(call_id, str) and call_id not in calls:
                calls[call_id] = fixture.source or f"recording {index + 1}"
    return calls


def _last_events(requests: Sequence[RecordedRequest]) -> Dict[str, WireEvent]:
    """For each call id, the last event of the first response that carried it, as it went out."""
    last: Dict[str, WireEvent] = {}
    for request in requests:
        seen: Dict[str, WireEvent] = {}
        for event in request.events:
            if event.call_id is not None and event.call_id not in last:
                seen[event.call_id] = event
        last.update(seen)
    return last


class ReplayLoopCase(LoopCase):
    """One recorded conversation (``stage_name``, the scenario it is stamped with) in one mode."""

    @property
    def name(self) -> str:
        """``replay/forced-tool/stream``."""
        return f"replay/{self.stage_name}/{self.mode}"

    @property
    def wire(self) -> ReplayWire:
        wire = self.target.wire
        assert isinstance(wire, ReplayWire)
        return wire

    @property
    def fixtures(self) -> Tuple[Fixture, ...]:
        return self.wire.conversations().get((self.stage_name, self.mode), ())

    @property
    def max_seconds(self) -> float:
        return round(self.target.timeout * 0.8, 2)

    @property
    def skip(self) -> Optional[str]:
        own = self.target.skip
        given = own.get(f"replay/{self.stage_name}/{self.mode}") or own.get(f"replay/{self.stage_name}")
        if given:
            return given
        stage = STAGES.get(self.stage_name)
        if stage is None:
            return (
                f"the recorded conversation {self.stage_name!r} names no stage of the agent-loop suite, "
                "so the task it was given is unknown; record it with scenario= the stage's name"
            )
        if stage.cancel:
            return f"{self.stage_name}: the abort is timed by the stage's script, which a recording lacks"
        return None

    def run(self) -> None:
        """Replay the conversation to the loop: return quietly, raise :class:`AssertionError`, or skip."""
        import unittest

        from ._conversation import Conversation
        from ._loop_driver import drive_loop
        from .tools import GateToolset

        if self.skip:
            raise unittest.SkipTest(self.skip)
        whole = self.wire
        fixtures = self.fixtures
        replay = ReplayWire(list(fixtures), whole.base, max_age=whole.max_age, now=whole._now)
        replay.source = f"{whole.source} ({self.stage_name}, {self.mode})"
        run_id = fixtures[0].stamp.run_id if fixtures else None

        def handle(request: RecordedRequest) -> object:
            if whole.base.is_generation(request):
                return replay.answer(request)
            return whole.aux_reply(request)

        with GateToolset(run_id=run_id or secrets.token_hex(3), sandbox=shared_sandbox()) as toolset:
            # The driver reads the conversation only for the cancel stage, which is not replayed.
            conversation = Conversation(whole.base, self.stage, toolset, self.max_requests)
            outcome, seen = drive_loop(self, conversation, toolset, handle, LATE_RUN_GRACE, every_run=True)
            requests = [r for r in seen if whole.base.is_generation(r)]
            records = toolset.log.records()
            running = toolset.log.in_flight()
        problems = self._outcome_problems(outcome)
        problems.extend(_late_runs(outcome, records, running))
        problems.extend(replay.problems())
        if run_id is None and replay.problems():
            problems.append(
                "the recording carries no run id, so the tool results the loop sent back name other "
                "fixture ids than when it was recorded: record with Recorder(run_id=...) and a "
                "GateToolset(run_id=...) of the same id"
            )
        problems.extend(self._execution_problems(_recorded_calls(fixtures), _last_events(requests), records))
        if problems:
            listed = "\n".join(f"  - {p}" for p in problems)
            raise AssertionError(
                f"{self.target.name} ({whole.name}) {self.name}: the loop must send every recorded "
                "request and run each recorded call once, after its last event; "
                f"{len(problems)} problem(s):\n{listed}"
            )

    def _outcome_problems(self, outcome: LoopOutcome) -> List[str]:
        timeout = self.target.timeout
        if outcome.hung:
            return [f"the loop did not finish within the case's bound of {timeout} s"]
        if outcome.error is not None:
            error = outcome.error
            return [
                f"the loop raised {type(error).__name__}: {error}; the recorded conversation ended normally"
            ]
        result = outcome.result
        if not isinstance(result, LoopResult):
            return [f"run() returned {result!r}, not a LoopResult"]
        if result.stopped != "done":
            return [
                f"the loop stopped with stopped={result.stopped!r}; the recorded conversation ran to its end"
            ]
        return []

    @staticmethod
    def _execution_problems(
        calls: Dict[str, str], last: Dict[str, WireEvent], records: Sequence[ExecutionRecord]
    ) -> List[str]:
        problems = []
        ran: Dict[str, List[ExecutionRecord]] = {}
        for record in records:
            if record.ran:
                ran.setdefault(record.call_id, []).append(record)
        for call_id, source in calls.items():
            runs = ran.get(call_id, [])
            if not runs:
                problems.append(
                    f"call {call_id} (made in {source}) was never executed; the loop must run it once"
                )
                continue
            if len(runs) > 1:
                problems.append(
                    f"call {call_id} ({runs[0].tool}) was executed {len(runs)} times; run each call once, "
                    "keyed by its call id"
                )
            event = last.get(call_id)
            if event is not None and runs[0].started < event.flushed_at:
                problems.append(
                    f"call {call_id} ({runs[0].tool}) was executed before the stream's last event for it "
                    f"(#{event.seq} {event.type}) was sent; its arguments were still arriving"
                )
        for call_id, runs in ran.items():
            if call_id not in calls:
                problems.append(
                    f"call {call_id} ({runs[0].tool}) was executed, but no recorded response made it"
                )
        return problems


def _late_runs(
    outcome: LoopOutcome, records: Sequence[ExecutionRecord], running: Sequence[InFlight]
) -> List[str]:
    """An execution begun after ``run()`` returned or raised: a tool task the loop left behind."""
    returned = outcome.ended_at
    if returned is None:
        return []  # a loop still running at the bound is reported as hung
    starts = [(r.tool, r.call_id, r.started, "") for r in records]
    starts += [(e.tool, e.call_id, e.started, " (still running when the case ended)") for e in running]
    return [
        f"{tool} {call_id}: execution began {1000 * (started - returned):.0f} ms after run() had "
        f"returned{how}; a tool task the loop left behind ran in the background (cancel or await "
        "every task before returning or raising)"
        for tool, call_id, started, how in sorted(starts, key=lambda start: start[2])
        if started > returned
    ]


def replay_loop_cases(target: AgentLoopTarget) -> List[ReplayLoopCase]:
    """One case per recorded conversation and mode of ``target``'s :class:`ReplayWire`.

    None for any other wire."""
    wire = target.wire
    if not isinstance(wire, ReplayWire):
        return []
    return [ReplayLoopCase(target, name, mode) for name, mode in wire.conversations()]
