"""The invariants: what the agent-loop suite checks in every stage, never the wording.

Strategy: as for the backend suite (``conformance._checks``), each check is one small
function in the table :data:`INVARIANTS`, under an id that failure messages end each
problem with (``[executions]``) and the stages page explains. A check reads what the
case saw (:class:`LoopSeen`: the loop's outcome, every request and the history it
carried, the turns the provider played and the execution log) and decides for itself
whether it applies. One root cause is reported once: a check whose premise another
check already failed (a refused history, a loop that never finished) stays quiet.

The checks come in families, one module each, and each family holds its rows of
the table: the loop's ending (:mod:`.ending`); requests, usage and budget
(:mod:`.budget`); executions and timing (:mod:`.executions`); abort and cancel
(:mod:`.abort`); results and call ids (:mod:`.results`); reasoning
(:mod:`.reasoning`); faults and recovery (:mod:`.recovery`). A new check goes into
its family's module and that family's ``ROWS``; a new family, into the list below.

Every problem names the call id and the tool, and where it is about a moment (an
execution, a result sent) it quotes the provider events just before it
(:func:`~conformance.provider.events_around`), the evidence below any SDK.
"""

from __future__ import annotations

from typing import Dict, List

from . import abort, budget, ending, executions, reasoning, recovery, results
from ._seen import Check, LoopProblem, LoopSeen

__all__ = ["INVARIANTS", "LoopProblem", "LoopSeen", "failure_message", "run_invariants"]

#: Every invariant, by the id failure messages show: the families' rows, one family
#: after the other, in the order they run.
INVARIANTS: Dict[str, Check] = {
    **ending.ROWS,
    **budget.ROWS,
    **executions.ROWS,
    **abort.ROWS,
    **results.ROWS,
    **reasoning.ROWS,
    **recovery.ROWS,
}


def run_invariants(seen: LoopSeen) -> List[LoopProblem]:
    """Every problem every invariant finds, in table order."""
    problems: List[LoopProblem] = []
    for check in INVARIANTS.values():
        problems.extend(check(seen))
    return problems


def failure_message(seen: LoopSeen, problems: List[LoopProblem]) -> str:
    """One message: what the loop must do, each problem with its evidence, the requests, the hint."""
    case = seen.case
    lines = [f"{case.target.wire.name}/{case.mode} {case.stage.name}: the loop must {case.stage.must}"]
    for problem in problems:
        lines.append(f"  - {problem}")
        if problem.evidence:
            lines.append(problem.evidence)
    if seen.outcome.left_behind:
        lines.append(f"  left behind: {seen.outcome.left_behind}")
    from ..log import request_records

    shown = "; ".join(str(r) for r in request_records(seen.requests)) or "none"
    lines.append(f"  requests seen: {shown}")
    if problems and all(p.check == "result-format" for p in problems):
        # What ran was fine: the history it was sent back in is what the provider refused.
        lines.append(
            "  hint: the history is what the provider refused, not what ran: send what each line above "
            "says the provider expects"
        )
    else:
        lines.append(f"  hint: {case.stage.hint}")
    return "\n".join(lines)
