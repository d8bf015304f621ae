"""Abort and cancel: nothing runs or is asked after the caller cancelled, and the loop says so at once.

The cancel stages abort the task's signal while the loop waits on the model or on a
tool: no execution may start after it (nor after ``run()`` returned), a running tool
must see the signal, no request may follow it, the loop raises the abort reason
itself within the bound, and the provider sees the open request closed.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from ..._bounds import ABORT_CLOSE_WITHIN, ABORT_RAISE_WITHIN, TOOL_STOP_WITHIN
from ..._stall import not_counted
from ._seen import Check, LoopProblem, LoopSeen

__all__ = ["ROWS"]


def _starts(seen: LoopSeen) -> List[Tuple[str, str, float, str]]:
    """Every execution's (tool, call id, start, how it ended), those still running included."""
    out = [(r.tool, r.call_id, r.started, "" if r.ran else " (the toolset refused it: the signal had fired)")
           for r in seen.ran()]
    out += [(e.tool, e.call_id, e.started, " (still running when the case ended)") for e in seen.in_flight]
    return sorted(out, key=lambda start: start[2])


def check_after_cancel(seen: LoopSeen) -> List[LoopProblem]:
    abort_at = seen.outcome.abort_at
    if abort_at is None:
        return []
    returned = seen.outcome.ended_at
    problems = []
    for tool, call_id, started, how in _starts(seen):
        if started >= abort_at and (returned is None or started <= returned):
            problems.append(
                LoopProblem(
                    "after-cancel",
                    f"{tool} {call_id}: execution started {1000 * (started - abort_at):.0f} ms "
                    f"after the abort{how}; nothing may run once the caller cancelled",
                    seen.events_before(started),
                )
            )
    return problems


def check_after_return(seen: LoopSeen) -> List[LoopProblem]:
    returned = seen.outcome.ended_at
    if returned is None:
        return []  # a loop still running at the bound is finished's
    problems = []
    for tool, call_id, started, how in _starts(seen):
        if started > returned:
            after = "" if seen.outcome.abort_at is None else ", and so after the abort"
            problems.append(
                LoopProblem(
                    "after-return",
                    f"{tool} {call_id}: execution started {1000 * (started - returned):.0f} ms after "
                    f"run() had returned{after}{how}; a tool task the loop left behind ran in the "
                    "background (cancel or await every task before returning or raising)",
                )
            )
    return problems


#: How an execution ends when it saw the signal fire (or its task was cancelled).
_STOPPED = ("aborted", "cancelled")


def check_tool_signal(seen: LoopSeen) -> List[LoopProblem]:
    abort_at = seen.outcome.abort_at
    if abort_at is None:
        return []
    problems = []
    for record in seen.ran():
        if not record.ran or record.started >= abort_at or record.ended <= abort_at:
            continue  # refused, begun after the abort (after-cancel's), or over before it
        after = record.ended - abort_at
        if str(record.status) not in _STOPPED:
            problems.append(
                LoopProblem(
                    "tool-signal",
                    f"{record.tool} {record.call_id}: was running at the abort and ran on to its end "
                    f"({record.status}, {1000 * after:.0f} ms after the abort): the "
                    "toolset never saw the signal; pass task.signal to toolset.execute / aexecute",
                )
            )
        elif after - seen.outcome.stalled_before_tool_stop > TOOL_STOP_WITHIN:
            problems.append(
                LoopProblem(
                    "tool-signal",
                    f"{record.tool} {record.call_id}: was running at the abort and stopped "
                    f"({record.status}) only {1000 * after:.0f} ms after it"
                    f"{not_counted(seen.outcome.stalled_before_tool_stop)}; expected within "
                    f"{1000 * TOOL_STOP_WITHIN:.0f} ms: the tool's signal fired after the task's "
                    "(pass task.signal itself to toolset.execute / aexecute, or fire yours from it at once)",
                    seen.events_before(record.ended),
                )
            )
    for entry in seen.in_flight:
        if entry.started < abort_at:
            problems.append(
                LoopProblem(
                    "tool-signal",
                    f"{entry.tool} {entry.call_id}: was running at the abort and still ran when the case "
                    "ended: the toolset never saw the signal; pass task.signal to toolset.execute",
                )
            )
    return problems


def check_request_after_abort(seen: LoopSeen) -> List[LoopProblem]:
    abort_at = seen.outcome.abort_at
    if abort_at is None:
        return []
    late = [e for e in seen.exchanges if e.request.received_at > abort_at]
    if not late:
        return []
    first = late[0]
    return [
        LoopProblem(
            "request-after-abort",
            f"request {first.index + 1} ({first.request}) came "
            f"{1000 * (first.request.received_at - abort_at):.0f} ms after the abort"
            + (f", and {len(late) - 1} more after it" if len(late) > 1 else "")
            + "; once the caller cancelled, the loop asks the model nothing more",
            seen.events_before(first.request.received_at),
        )
    ]


def check_abort_reason(seen: LoopSeen) -> List[LoopProblem]:
    o = seen.outcome
    if not seen.stage.cancel or o.hung:
        return []
    if o.abort_at is None:
        return [
            LoopProblem(
                "abort-reason",
                "the loop ended before the gate could abort it (expected it to wait for the held call)",
            )
        ]
    if o.error is not o.abort_reason:
        got = f"{type(o.error).__name__}: {o.error}" if o.error is not None else f"a result {o.result!r}"
        return [
            LoopProblem(
                "abort-reason",
                f"expected the loop to raise the abort reason itself, got {got}",
                seen.events_before(o.abort_at),
            )
        ]
    if o.error_at is not None and o.error_at - o.abort_at - o.stalled_after_abort > ABORT_RAISE_WITHIN:
        return [
            LoopProblem(
                "abort-reason",
                f"raised the abort reason {o.error_at - o.abort_at:.2f} s after the abort"
                f"{not_counted(o.stalled_after_abort)}; expected within {ABORT_RAISE_WITHIN} s",
            )
        ]
    return []


def check_connection_closed(seen: LoopSeen) -> List[LoopProblem]:
    o = seen.outcome
    if not seen.stage.cancel or seen.stage.abort_in_tool or o.abort_at is None or o.hung:
        return []  # an abort in a tool comes after the reply was whole: no request is open
    if o.closed_after is None:
        return [
            LoopProblem(
                "connection-closed",
                "the provider did not see the connection (h2: stream) closed within "
                f"{ABORT_CLOSE_WITHIN} s of "
                "the abort, while the loop was alive; the provider keeps generating",
            )
        ]
    return []


#: This family's rows of :data:`~conformance.gate._invariants.INVARIANTS`, in the order they run.
ROWS: Dict[str, Check] = {
    "after-cancel": check_after_cancel,
    "after-return": check_after_return,
    "tool-signal": check_tool_signal,
    "request-after-abort": check_request_after_abort,
    "abort-reason": check_abort_reason,
    "connection-closed": check_connection_closed,
}
