"""Faults and recovery: what the loop does when the provider breaks the conversation.

The fault stages (:mod:`conformance.gate.faults`) cut a stream at a protocol event,
answer a request with nothing, a 429 or no reply, or send a call the loop must refuse.
No call of a cut turn runs, nothing runs twice for a retry, a write lands once per
idempotency key, a 429's delay is waited out, a refused call goes back as an error,
and the loop recovers, or stops with an error that says what happened.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from .._conversation import Exchange
from ..sandbox import JournalEntry
from ._seen import Check, LoopProblem, LoopSeen, refusal
from .results import error_accepted, error_hint, results_due

__all__ = ["RETRY_TOLERANCE", "ROWS"]


def _fault_evidence(seen: LoopSeen, exchange: Exchange) -> str:
    """The events around a fault: what its reply sent, else what came before it."""
    if exchange.request.events:
        return seen.events_of(exchange)
    earlier = [e for e in seen.exchanges[: exchange.index] if e.request.events]
    return seen.events_of(earlier[-1]) if earlier else ""


def check_partial_call(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.on_cut_calls():
        if not record.ran:
            continue  # the toolset refused it at the door: nothing ran
        exchange = seen.exchanges[planned.exchange]
        problems.append(
            LoopProblem(
                "partial-call",
                f"{seen.label(planned)}: executed ({record.fixture_id}) though its stream broke "
                f"({exchange.fault}) before the turn ended; a call is complete only once its turn is",
                _fault_evidence(seen, exchange),
            )
        )
    return problems


def check_re_executed(seen: LoopSeen) -> List[LoopProblem]:
    faulted = seen.faulted()
    if not faulted:
        return []
    problems = []
    wire = seen.case.target.wire
    for planned in seen.planned():
        if refusal(planned) is not None:
            continue
        if wire.sends_call_ids:
            runs = [r for r in seen.before_abort() if r.ran and r.call_id == planned.call.id]
            allowed = 1
        else:  # no ids: more runs of the tool than calls to it, told at its last call
            same = [p for p in seen.planned() if p.call.name == planned.call.name]
            if planned != same[-1]:
                continue
            runs = [r for r in seen.before_abort() if r.ran and r.tool == planned.call.name]
            allowed = len(same)
        if len(runs) <= allowed:
            continue
        extra = runs[allowed]
        fixtures = ", ".join(r.fixture_id for r in runs)
        # The cause from the log: the last fault before the extra run, else none came first.
        before = [e for e in faulted if e.request.received_at <= extra.started]
        if before:
            fault = before[-1]
            cause = (
                f"request {fault.index + 1} got {_fault_words(fault.fault)} and the loop ran the call "
                "again; a retry sends the result it already has (key executions by the call id)"
            )
        else:
            fault = faulted[0]
            cause = (
                f"the extra run ({extra.fixture_id}) began before request {fault.index + 1} (which got "
                f"{_fault_words(fault.fault)}) was sent, so no fault caused it: the loop ran the call "
                "more than once on its own; run each call once, keyed by its call id"
            )
        problems.append(
            LoopProblem(
                "re-executed",
                f"{seen.label(planned)}: executed {len(runs)} times ({fixtures}); {cause}",
                _fault_evidence(seen, fault),
            )
        )
    return problems


def _fault_words(fault: Optional[str]) -> str:
    words = {
        "drop-close": "no response (the connection closed)",
        "drop-reset": "no response (the connection was reset)",
        "rate-limit": "a 429",
        "hang": "no reply",
    }
    return words.get(fault or "", f"a broken stream ({fault})")


def check_write_once(seen: LoopSeen) -> List[LoopProblem]:
    keys: Dict[str, List[JournalEntry]] = {}
    for entry in seen.journal:
        keys.setdefault(entry.key, []).append(entry)
    problems = []
    for key, entries in keys.items():
        if len(entries) < 2:
            continue
        writes = [r for r in seen.ran() if r.ran and r.tool == "append_record" and r.status == "ok"]
        runs = ", ".join(f"{r.call_id} ({r.fixture_id})" for r in writes)
        journal = "\n".join(f"      journal {e}" for e in seen.journal)
        problems.append(
            LoopProblem(
                "write-once",
                f"the write under idempotency key {key!r} landed {len(entries)} times (runs: {runs}); a "
                "write runs at most once per key, however many call ids ask for it: answer a repeat "
                "with the first run's result",
                journal,
            )
        )
    return problems


#: How much sooner than asked a retry may come: the clocks' resolution, and the moment
#: between the provider writing the 429 and noting the time.
RETRY_TOLERANCE = 0.02


def check_retry_wait(seen: LoopSeen) -> List[LoopProblem]:
    from ..._stall import WATCH

    problems = []
    exchanges = seen.exchanges
    for exchange, after in zip(exchanges, exchanges[1:]):
        asked = exchange.asked
        if exchange.fault != "rate-limit" or asked is None:
            continue
        log = exchange.request.response
        sent = log.times[-1] if log is not None and log.times else exchange.request.received_at
        assert sent is not None and after.request.received_at is not None
        # A stall of the whole process may have held the provider between writing the 429
        # and noting the time: it is given back to the loop.
        waited = after.request.received_at - sent + WATCH.between(sent, after.request.received_at)
        if waited < asked - RETRY_TOLERANCE:
            problems.append(
                LoopProblem(
                    "retry-wait",
                    f"request {after.index + 1} came {1000 * waited:.0f} ms after request "
                    f"{exchange.index + 1}'s 429, which asked for a retry delay of {asked:g} s; wait at "
                    "least what the provider asks (LLMError.retry_after) before asking again",
                    seen.events_of(exchange),
                )
            )
    return problems


def check_refused_call(seen: LoopSeen) -> List[LoopProblem]:
    from .executions import breaks_schema

    problems = []
    for record, planned in seen.on_refused_calls():
        if record.ran:
            problems.append(
                LoopProblem(
                    "refused-call",
                    f"{seen.label(planned)}: executed ({record.tool}, {record.fixture_id}) though "
                    f"{refusal(planned)}; such a call goes back as a structured error, never run",
                    seen.events_before(record.started),
                )
            )
        elif not breaks_schema(planned):  # handed on with arguments its schema forbids: arguments-schema's
            # The one rule for a call the loop must refuse: it never reaches the toolset. The
            # gate's refuses it at the door; a tool of the user's own would run it, or crash.
            problems.append(
                LoopProblem(
                    "refused-call",
                    f"{seen.label(planned)}: handed to the toolset ({record.fixture_id}) though "
                    f"{refusal(planned)}; the gate's toolset refused it at the door, a tool of your own "
                    "would have run on it: check that the tool is in the task and its arguments parse "
                    'before executing, and send ToolError("unknown_tool" / "invalid_arguments", ...) back',
                    seen.events_before(record.started),
                )
            )
    for planned, exchange, message in results_due(seen):
        why = refusal(planned)
        if why is None or message is None or message.tool_result is None:
            continue
        result = message.tool_result
        if not error_accepted(seen, result):
            problems.append(
                LoopProblem(
                    "refused-call",
                    f"{seen.label(planned)}: {why}; request {exchange.index + 1} sent back "
                    f"{result.content[:120]!r}, not an error; {error_hint(seen)}",
                    seen.events_of(seen.exchanges[planned.exchange]),
                )
            )
    return problems


def check_recovered(seen: LoopSeen) -> List[LoopProblem]:
    stage, o = seen.stage, seen.outcome
    if not stage.fault:
        return []
    faulted = seen.faulted()
    where = faulted[0] if faulted else (seen.exchanges[-1] if seen.exchanges else None)

    def evidence() -> str:  # only for a problem: reading the events back costs a passing case
        return _fault_evidence(seen, where) if where is not None else ""

    at = f"after request {where.index + 1} got {_fault_words(where.fault)}" if where is not None else ""
    calls = ", ".join(f"{c.name} {c.id}" for c in (where.turn.calls if where and where.turn else ()))
    about = f" (the call: {calls})" if calls else ""
    if o.hung:
        return [
            LoopProblem(
                "recovered",
                f"the loop neither recovered nor stopped {at}{about}: still running at the case's bound "
                f"of {o.waited:.1f} s (task.max_seconds was {seen.case.max_seconds})",
                evidence(),
            )
        ]
    if o.error is None or seen.refused:
        return []  # an error raised at the provider's 400 for a refused history is result-format's
    if not stage.may_stop:
        return [
            LoopProblem(
                "recovered",
                f"the loop raised {type(o.error).__name__}: {o.error}{about}; a refused call goes back "
                "as a structured error and the conversation carries on",
                evidence(),
            )
        ]
    return []


def check_error_message(seen: LoopSeen) -> List[LoopProblem]:
    stage, o = seen.stage, seen.outcome
    if not (stage.fault and stage.may_stop) or o.hung or o.error is None or str(o.error).strip():
        return []
    faulted = seen.faulted()
    where = faulted[0] if faulted else (seen.exchanges[-1] if seen.exchanges else None)
    if isinstance(o.error, TimeoutError) and where is not None and where.fault == "hang":
        # Where the provider never answered, Python's own class for a timeout says what
        # happened by its type (asyncio's and aiohttp's carry no message): a type is no wording.
        return []
    at = f" after request {where.index + 1} got {_fault_words(where.fault)}" if where is not None else ""
    return [
        LoopProblem(
            "error-message",
            f"the loop stopped{at} with {type(o.error).__name__} and no message; say what happened "
            "(the status, the timeout, the broken stream), or raise the client's own error",
            _fault_evidence(seen, where) if where is not None else "",
        )
    ]


#: This family's rows of :data:`~conformance.gate._invariants.INVARIANTS`, in the order they run.
ROWS: Dict[str, Check] = {
    "partial-call": check_partial_call,
    "re-executed": check_re_executed,
    "write-once": check_write_once,
    "retry-wait": check_retry_wait,
    "refused-call": check_refused_call,
    "recovered": check_recovered,
    "error-message": check_error_message,
}
