"""Executions and timing: each call ran once, under its own tool, on its own arguments, never early.

An execution is paired with the call it ran for (:meth:`LoopSeen.matches`); these
checks read the pairs: the tool and the arguments, the schema a refused call broke,
the count each call was run (once; none for a call that must not run), a run begun
before the call's last argument fragment was out, and a run of a call whose turn the
provider cut off at the limit.
"""

from __future__ import annotations

import json
from typing import Dict, List, Tuple

from .._conversation import PlannedCall, scripted_write_key
from ..schema import validate
from ..tools import TOOLS
from ._seen import Check, LoopProblem, LoopSeen, ended_turn, refusal, same_arguments

__all__ = ["ROWS", "breaks_schema", "repeats_a_write"]


def repeats_a_write(seen: LoopSeen, planned: PlannedCall) -> bool:
    """Whether ``planned`` repeats a write an earlier call of the model's already asked for."""
    key = scripted_write_key(planned.call)
    return key is not None and any(
        p.exchange < planned.exchange and scripted_write_key(p.call) == key for p in seen.planned()
    )


def breaks_schema(planned: PlannedCall) -> bool:
    """Whether ``planned``'s arguments are a JSON object its tool's schema forbids."""
    call = planned.call
    if call.name not in TOOLS:
        return False
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return False
    return isinstance(arguments, dict) and bool(validate(TOOLS[call.name].parameters, arguments))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def check_tool_name(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.matches():
        if planned is not None and record.tool != planned.call.name:
            problems.append(
                LoopProblem(
                    "tool-name",
                    f"call {record.call_id}: the model called {planned.call.name}, the loop ran "
                    f"{record.tool}",
                    seen.events_before(record.started),
                )
            )
    return problems


def check_arguments(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.matches():
        if planned is None or record.tool != planned.call.name or refusal(planned) is not None:
            continue
        sent = json.loads(planned.call.arguments)
        if record.arguments != sent:
            how = (
                f"ran with {record.arguments!r}"
                if record.ran
                else f"was handed to the toolset with {record.arguments!r}, which refused it at the door "
                "(it never ran)"
            )
            problems.append(
                LoopProblem(
                    "arguments",
                    f"{seen.label(planned)}: {how}; the model sent {sent!r}{seen.interleaved_cause(planned)}",
                    seen.events_before(record.started),
                )
            )
    return problems


def check_arguments_schema(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.on_refused_calls():
        if record.tool != planned.call.name or not breaks_schema(planned) or record.ran:
            continue  # a run is refused-call's
        tool = TOOLS[record.tool]
        violations = "; ".join(map(str, validate(tool.parameters, record.arguments)))
        problems.append(
            LoopProblem(
                "arguments-schema",
                f"{seen.label(planned)}: handed to the toolset with arguments that break its schema "
                f"({violations}); the gate's toolset refused them at the door, a tool of your own would "
                "have run on them: validate a call against its tool's schema before executing it, and "
                'send ToolError("invalid_arguments", ...) back instead',
                seen.events_before(record.started),
            )
        )
    return problems


def check_executions(seen: LoopSeen) -> List[LoopProblem]:
    stage, problems = seen.stage, []
    planned = seen.planned()
    for index, call in enumerate(planned):
        if refusal(call) is not None or ended_turn(seen, call):
            continue  # never to run: refused-call (or ended-turn) says whether it did
        own = seen.records_for(call)
        if any(r.tool != call.call.name for r in own):
            continue  # it ran under another tool's name: tool-name says so
        records = [r for r in own if r.ran]
        if records and seen.faulted() and len(records) > 1:
            continue  # run again after a fault: re-executed says so
        if not records and any(not same_arguments(call, r) for r in own):
            continue  # handed over on other arguments and refused at the door: arguments says so
        if stage.abort_in_tool:
            # The tool the abort came in ran once; a loop running the turn's calls side by
            # side may have begun the other before the abort (after it is after-cancel's).
            expected: Tuple[int, ...] = (1,) if call.position == 0 else (0, 1)
        elif stage.cancel:
            expected = (0,)
        elif stage.budget and index == len(planned) - 1:
            expected = (0, 1)  # the call the loop stopped at may or may not have run
        elif repeats_a_write(seen, call):
            expected = (0, 1)  # answered with the first run's result, or run again: write-once says
        elif seen.answer_of(call) is None and not seen.finished_cleanly:
            continue  # the loop stopped before this call's turn was over: others say why
        elif not records and seen.came_too_late(call):
            continue  # its turn was not all out while the loop's budget lasted: budget judges
        else:
            expected = (1,)
        if len(records) not in expected:
            if records:
                fixtures = ", ".join(r.fixture_id for r in records)
                text = f"{seen.label(call)}: executed {len(records)} times ({fixtures}); each call runs once"
                evidence = seen.events_before(records[-1].started)
            else:
                text = (
                    f"{seen.label(call)}: never executed; the model called it and waited for its result"
                    + seen.interleaved_cause(call)
                )
                evidence = ""
            problems.append(LoopProblem("executions", text, evidence))
    # A run no call of the model's accounts for: by id, or (where the provider sends no
    # ids) one run of a tool more than the model called it.
    for record, matched in seen.matches():
        if matched is None:
            made = sum(1 for p in planned if p.call.name == record.tool)
            if made and seen.faulted() and not seen.case.target.wire.sends_call_ids:
                continue  # a called tool run again after a fault: re-executed says so
            if seen.case.target.wire.sends_call_ids:
                why = "executed a call the model never made"
            elif made:
                why = f"executed {record.tool} more often than the model called it ({made} time(s))"
            else:
                why = "executed a tool the model never called"
            problems.append(
                LoopProblem(
                    "executions", f"{record.tool} {record.call_id}: {why}", seen.events_before(record.started)
                )
            )
    return problems


def check_ended_turn(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.matches():
        if planned is None or not record.ran:
            continue  # a run no call accounts for is executions'; one refused at the door ran nothing
        why = ended_turn(seen, planned)
        if why is None:
            continue
        problems.append(
            LoopProblem(
                "ended-turn",
                f"{seen.label(planned)}: executed ({record.fixture_id}) though its turn ended with "
                f"finish reason {why!r}: the provider cut the turn off, so its calls never completed; "
                "look at the finish reason before running anything",
                seen.events_of(seen.exchanges[planned.exchange]),
            )
        )
    return problems


def check_executed_early(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.matches():
        if planned is None:
            continue
        exchange = seen.exchanges[planned.exchange]
        if exchange.events is None:
            continue
        _, last = exchange.events.arguments.get(planned.position, (-1, -1))
        if last < 0:
            continue
        log = exchange.request.response
        if log is not None and log.end == "complete" and log.times and record.started >= log.times[-1]:
            continue  # after the whole reply was out: no need to work out its events
        events = exchange.request.events
        flushed = events[last] if last < len(events) else None
        if flushed is None or record.started < flushed.flushed_at:
            since = exchange.request.received_at
            ran = (
                f"execution started at +{_ms(record.started - since)} (timed from the arrival of "
                f"request {exchange.index + 1})"
            )
            if flushed is not None:
                sent = (
                    f"the provider wrote the call's last argument fragment (event #{flushed.seq}, "
                    f"{flushed.type}) at +{_ms(flushed.flushed_at - since)}, "
                    f"{_ms(flushed.flushed_at - record.started)} after the run began"
                )
            else:
                logged = f", the last at +{_ms(events[-1].flushed_at - since)}" if events else ""
                sent = (
                    f"the provider had not written the call's last argument fragment (event {last} of "
                    f"the turn) by the end of the case: it logged {len(events)} event(s){logged}"
                )
            problems.append(
                LoopProblem(
                    "executed-early",
                    f"{seen.label(planned)}: {ran}; {sent}, so its arguments were still arriving; run a "
                    "call only once its turn's end event (or its own done event) has come",
                    seen.events_before(record.started),
                )
            )
    return problems


#: This family's rows of :data:`~conformance.gate._invariants.INVARIANTS`, in the order they run.
ROWS: Dict[str, Check] = {
    "tool-name": check_tool_name,
    "arguments": check_arguments,
    "arguments-schema": check_arguments_schema,
    "executions": check_executions,
    "executed-early": check_executed_early,
    "ended-turn": check_ended_turn,
}
