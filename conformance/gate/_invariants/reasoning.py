"""Reasoning carried across a tool turn: the turn, and each call, come back with their reasoning unaltered.

On the reasoning stages the model's tool turn carries reasoning (a thinking block
with its signature, an encrypted item, a call's own thought signature); the request
that answers the turn must send that turn back with the reasoning byte for byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from .._conversation import Exchange
from ._seen import Check, LoopProblem, LoopSeen

if TYPE_CHECKING:
    from ...contract import Message

__all__ = ["ROWS"]


def _reasoning_key(items: Sequence[Any]) -> List[Tuple[Any, ...]]:
    from ...wires._turns import reasoning_key

    return [reasoning_key(r) for r in items]


def _echo(seen: LoopSeen, exchange: Exchange) -> Tuple[Optional[Exchange], Optional[Message]]:
    """For a tool turn: the accepted request after it, and the assistant turn there that echoes it.

    ``(None, None)`` where ``exchange`` holds no tool turn or no request after it was
    accepted; ``(answer, None)`` where the answer carried no such assistant turn.
    """
    turn = exchange.turn
    if turn is None or not turn.calls:
        return None, None
    answer = next(
        (e for e in seen.exchanges[exchange.index + 1 :] if e.history is not None and not e.problems),
        None,
    )
    if answer is None or answer.history is None:
        return None, None
    ids = {c.id for c in turn.calls}
    names = {c.name for c in turn.calls}
    echoed = next(
        (
            m
            for m in answer.history.assistant_turns
            if any(c.id in ids or (not c.id and c.name in names) for c in m.tool_calls)
        ),
        None,
    )
    return answer, echoed


def check_reasoning(seen: LoopSeen) -> List[LoopProblem]:
    if not seen.stage.reasoning:
        return []
    problems = []
    for exchange in seen.exchanges:
        answer, echoed = _echo(seen, exchange)
        turn = exchange.turn
        if answer is None or turn is None:
            continue
        label = ", ".join(f"{c.name} {c.id}" for c in turn.calls)
        if echoed is None:
            problems.append(
                LoopProblem(
                    "reasoning",
                    f"request {answer.index + 1} did not send back the assistant turn that called {label}",
                )
            )
            continue
        if _reasoning_key(echoed.reasoning) != _reasoning_key(turn.reasoning):
            problems.append(
                LoopProblem(
                    "reasoning",
                    f"the turn that called {label} carried reasoning {_reasoning_key(turn.reasoning)!r}; "
                    f"request {answer.index + 1} sent back {_reasoning_key(echoed.reasoning)!r} (it must "
                    "come back byte for byte, signature included)",
                )
            )
    return problems


def check_call_reasoning(seen: LoopSeen) -> List[LoopProblem]:
    if not seen.stage.reasoning:
        return []
    problems = []
    for exchange in seen.exchanges:
        answer, echoed = _echo(seen, exchange)
        turn = exchange.turn
        if answer is None or echoed is None or turn is None:
            continue  # a turn not sent back at all is reasoning's
        for call in turn.calls:
            back = next(
                (c for c in echoed.tool_calls if c.id == call.id or (not c.id and c.name == call.name)), None
            )
            if call.reasoning and (
                back is None or _reasoning_key(back.reasoning) != _reasoning_key(call.reasoning)
            ):
                got = _reasoning_key(back.reasoning) if back is not None else "no such call"
                problems.append(
                    LoopProblem(
                        "call-reasoning",
                        f"{call.name} {call.id}: the call carried {_reasoning_key(call.reasoning)!r}; "
                        f"request {answer.index + 1} sent back {got!r} (a call's own signature comes "
                        "back with that call, byte for byte)",
                    )
                )
    return problems


#: This family's rows of :data:`~conformance.gate._invariants.INVARIANTS`, in the order they run.
ROWS: Dict[str, Check] = {
    "reasoning": check_reasoning,
    "call-reasoning": check_call_reasoning,
}
