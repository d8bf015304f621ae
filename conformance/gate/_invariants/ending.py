"""The loop's ending: it finished in time, with the model's last text, finish reason and ``stopped``.

Each check here reads the loop's result against the model's last turn; the budget
stage's ending is judged with the budget (``stopped-budget``), and a fault stage's
with the fault (``recovered``), so these stay quiet there.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from .._conversation import Exchange
from ..stages import ENDED_FINISHES
from ._seen import Check, LoopProblem, LoopSeen, is_result, value_of

__all__ = ["ROWS"]


def check_finished(seen: LoopSeen) -> List[LoopProblem]:
    o = seen.outcome
    if seen.stage.fault and (o.hung or o.error is not None):
        return []  # whether the loop recovered or stopped well is recovered's to say
    if o.hung:
        return [
            LoopProblem(
                "finished",
                f"the loop did not finish within {o.waited:.1f} s (the case's bound)",
                seen.events_before(o.started + o.waited),
            )
        ]
    if seen.stage.cancel or seen.refused:
        return []  # the cancel stage must raise; a refused history is result-format's
    if o.error is not None and seen.stage.may_stop and not seen.stage.fault:
        if str(o.error).strip():
            return []  # a turn the provider ended may end the loop with an error that says why
        return [
            LoopProblem(
                "finished",
                f"the loop stopped with {type(o.error).__name__} and no message; say why (the turn was "
                "cut off at the limit, or filtered), or return LoopResult with the turn's finish reason",
            )
        ]
    if o.error is not None:
        return [LoopProblem("finished", f"the loop raised {type(o.error).__name__}: {o.error}")]
    if not is_result(o.result):
        return [
            LoopProblem(
                "finished",
                f"run(task) returned {type(o.result).__name__}, not a "
                "LoopResult(text, finish_reason, stopped)",
            )
        ]
    return []


#: The finish reasons a loop may report for the model's last turn, by the turn's own: a turn
#: the content filter ended is content_filter or refusal (Anthropic's word for it).
_FINAL_FINISHES: Mapping[str, Tuple[str, ...]] = {
    "length": ("length",),
    "content_filter": ("content_filter", "refusal"),
}


def _final_turn(seen: LoopSeen) -> Optional[Tuple[Any, Exchange, Any]]:
    """The loop's result, the last exchange and the model's turn there, where the final
    answer is to be judged: a clean finish of a stage that ends in the model's text."""
    stage = seen.stage
    if stage.budget or stage.cancel or not seen.finished_cleanly:
        return None
    result = seen.outcome.result
    if stage.fault and stage.may_stop and value_of(result.stopped) == "budget":
        return None  # stopping at a fault is allowed; recovered says whether it stopped well
    last = seen.exchanges[-1] if seen.exchanges else None
    if last is None or last.turn is None:
        return None
    return result, last, last.turn


def check_final_text(seen: LoopSeen) -> List[LoopProblem]:
    final = _final_turn(seen)
    if final is None:
        return []
    result, last, turn = final
    if turn.calls and turn.finish_reason not in ENDED_FINISHES:
        calls = ", ".join(f"{c.name} {c.id}" for c in turn.calls)
        return [
            LoopProblem(
                "final-text",
                f"the loop returned while the model's last turn still called {calls}",
                seen.events_of(last),
            )
        ]
    if result.text != turn.text:
        return [
            LoopProblem(
                "final-text",
                f"expected the model's final text {turn.text!r}, got {result.text!r}",
                seen.events_of(last),
            )
        ]
    return []


def _answered(final: Optional[Tuple[Any, Exchange, Any]]) -> bool:
    """Whether the model's last turn ended the conversation: it called nothing, or it was cut
    off (length) or filtered, so its calls never completed."""
    return final is not None and (not final[2].calls or final[2].finish_reason in ENDED_FINISHES)


def check_finish_reason(seen: LoopSeen) -> List[LoopProblem]:
    final = _final_turn(seen)
    if final is None or not _answered(final):
        return []  # a turn still calling is final-text's
    result, last, turn = final
    wanted = _FINAL_FINISHES.get(turn.finish_reason, ("stop",))
    if value_of(result.finish_reason) not in wanted:
        said = " or ".join(repr(w) for w in wanted)
        return [
            LoopProblem(
                "finish-reason",
                f"expected finish reason {said} (the model's last turn's), got "
                f"{result.finish_reason!r}; map the provider's own spelling (end_turn, STOP, "
                "stop_sequence, max_tokens) to the contract's, and report the last turn's, not an "
                "earlier one's",
                seen.events_of(last),
            )
        ]
    return []


def check_stopped_done(seen: LoopSeen) -> List[LoopProblem]:
    final = _final_turn(seen)
    if final is None or not _answered(final):
        return []
    result = final[0]
    if value_of(result.stopped) != "done":
        return [
            LoopProblem(
                "stopped-done",
                f"expected stopped='done' (the model finished within the budget), got {result.stopped!r}; "
                'say stopped="budget" only when max_requests or max_seconds ran out',
            )
        ]
    return []


#: This family's rows of :data:`~conformance.gate._invariants.INVARIANTS`, in the order they run.
ROWS: Dict[str, Check] = {
    "finished": check_finished,
    "final-text": check_final_text,
    "finish-reason": check_finish_reason,
    "stopped-done": check_stopped_done,
}
