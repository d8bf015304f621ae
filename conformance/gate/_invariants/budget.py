"""Requests, usage and budget: how many requests the loop sent, what they asked for, what it cost.

The request count a stage plans, ``task.max_requests`` and ``task.max_seconds``, the
tool the first request must force, ``stopped="budget"`` where the budget ran out, and
the usage the loop reports against what the provider reported over the conversation.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ..._bounds import BUDGET_GRACE
from ..._stall import not_counted
from ._seen import Check, LoopProblem, LoopSeen, value_of

__all__ = ["FORCED_FORMS", "ROWS"]


def check_requests(seen: LoopSeen) -> List[LoopProblem]:
    expected = seen.stage.requests
    if expected is None or seen.refused or seen.outcome.hung:
        return []
    if seen.stage.fault and seen.outcome.error is not None:
        return []  # a loop that raised at a fault stopped there: whether it may is recovered's
    got = len(seen.exchanges)
    if got == expected:
        return []
    last = seen.exchanges[-1] if seen.exchanges else None
    why = "it stopped early" if got < expected else "it asked again after the model had finished"
    evidence = seen.events_of(last) if last is not None else ""
    return [
        LoopProblem(
            "requests",
            f"expected {expected} generation request(s) for this conversation, got {got} ({why})",
            evidence,
        )
    ]


def check_max_requests(seen: LoopSeen) -> List[LoopProblem]:
    case = seen.case
    got = len(seen.exchanges)
    if got <= case.max_requests:
        return []
    return [
        LoopProblem(
            "max-requests",
            f"the loop sent {got} generation requests; task.max_requests was {case.max_requests} "
            "(count every request sent, a retry included, and stop before sending one more)",
            seen.events_of(seen.exchanges[case.max_requests - 1]),
        )
    ]


def check_budget(seen: LoopSeen) -> List[LoopProblem]:
    case, o = seen.case, seen.outcome
    if o.ended_at is not None and o.ended_at - o.started - o.stalled_in_run > case.max_seconds + BUDGET_GRACE:
        return [
            LoopProblem(
                "budget",
                f"the loop ran {o.ended_at - o.started:.2f} s{not_counted(o.stalled_in_run)}; "
                f"task.max_seconds was {case.max_seconds}",
            )
        ]
    return []


def check_stopped_budget(seen: LoopSeen) -> List[LoopProblem]:
    if not (seen.stage.budget and seen.finished_cleanly):
        return []
    result = seen.outcome.result
    if value_of(result.stopped) == "budget":
        return []
    return [
        LoopProblem(
            "stopped-budget",
            'the model kept calling always_error; expected LoopResult(stopped="budget") within '
            f"max_requests, got stopped={result.stopped!r} after {len(seen.exchanges)} requests",
        )
    ]


def _usage_words(usage: Any) -> str:
    from .._usage import usage_tuple

    i, o, t = usage_tuple(usage)
    return f"{i} in, {o} out, {t} total"


def check_usage(seen: LoopSeen) -> List[LoopProblem]:
    from .._usage import UNJUDGED, sent_usage, usage_tuple
    from ..loop import USAGE_NOT_REPORTED

    if not seen.finished_cleanly:
        return []
    reported = getattr(seen.outcome.result, "usage", USAGE_NOT_REPORTED)
    if isinstance(reported, str) and reported == USAGE_NOT_REPORTED:
        return []  # the loop says nothing of usage; the report says so
    sent, turns = sent_usage(seen.case.target.wire.name, seen.exchanges)
    if isinstance(sent, str) and sent == UNJUDGED:
        return []
    if value_of(seen.outcome.result.stopped) == "budget" and sent is not None:
        # A loop that stopped at its deadline may have given up on the last turn while
        # the provider was still sending it (or just had): that turn may count or not.
        fewer, _ = sent_usage(seen.case.target.wire.name, seen.exchanges, but_last=True)
        if reported is None and fewer is None:
            return []
        if reported is not None and fewer is not None and usage_tuple(reported) == usage_tuple(fewer):
            return []
    if sent is None:
        if reported is None:
            return []
        return [
            LoopProblem(
                "usage",
                f"the provider reported no usage in this conversation, the loop reported "
                f"{_usage_words(reported)}; report usage=None (unavailable) where no turn carried any",
            )
        ]
    if reported is None:
        return [
            LoopProblem(
                "usage",
                f"the provider reported usage on {turns} turn(s), {_usage_words(sent)} in all; the loop "
                "reported none (usage=None): read each turn's usage (ChatResponse.usage, the stream's "
                "last usage chunk) and sum it",
            )
        ]
    if usage_tuple(reported) == usage_tuple(sent):
        return []
    per_turn = usage_tuple(_one_turn(sent, turns))
    why = " (the usage of one turn only: sum every turn's)" if usage_tuple(reported) == per_turn else ""
    return [
        LoopProblem(
            "usage",
            f"expected usage {_usage_words(sent)}, summed over the {turns} turn(s) that reported it; the "
            f"loop reported {_usage_words(reported)}{why}",
        )
    ]


def _one_turn(total: Any, turns: int) -> Any:
    """One turn's share of ``total`` where every turn reported the same counts (the fixture's)."""
    from ...contract import Usage

    if turns < 1:
        return total
    return Usage(total.input_tokens // turns, total.output_tokens // turns, total.total_tokens // turns)


#: How each wire forces one tool, for the failure message (Ollama has no such setting).
FORCED_FORMS: Mapping[str, str] = {
    "openai-chat": 'tool_choice {"type": "function", "function": {"name": "%s"}}',
    "openai-responses": 'tool_choice {"type": "function", "name": "%s"}',
    "azure-openai-chat": 'tool_choice {"type": "function", "function": {"name": "%s"}}',
    "azure-openai-responses": 'tool_choice {"type": "function", "name": "%s"}',
    "anthropic": 'tool_choice {"type": "tool", "name": "%s"}',
    "anthropic-vertex": 'tool_choice {"type": "tool", "name": "%s"}',
    "bedrock-invoke": 'tool_choice {"type": "tool", "name": "%s"}',
    "gemini": 'toolConfig.functionCallingConfig {"mode": "ANY", "allowedFunctionNames": ["%s"]}',
    "gemini-vertex": 'toolConfig.functionCallingConfig {"mode": "ANY", "allowedFunctionNames": ["%s"]}',
    "bedrock-converse": 'toolConfig.toolChoice {"tool": {"name": "%s"}}',
    # Cohere's tool_choice names no tool: REQUIRED with only that tool offered forces it.
    "cohere": 'tool_choice "REQUIRED" with tools listing %s alone',
}


def check_tool_choice(seen: LoopSeen) -> List[LoopProblem]:
    forced = seen.stage.tool_choice
    form = FORCED_FORMS.get(seen.case.target.wire.name)
    if forced is None or form is None:
        return []  # nothing forced, or a wire with no way to force a tool (Ollama)
    first = next((e for e in seen.exchanges if e.history is not None and not e.problems), None)
    if first is None or first.history is None:
        return []  # a refused history is result-format's
    got = first.history.tool_choice
    if got == forced:
        return []
    field = form.split(" ", 1)[0]
    sent = "nothing" if got is None else f"{got.mode!r}" + (f" ({got.name})" if got.name else "")
    return [
        LoopProblem(
            "tool-choice",
            f"request {first.index + 1} must ask the provider to force {forced.name} in {field}; it "
            f"carried {sent} there (expected {form % forced.name}); pass task.tool_choice to the client "
            "on the first request",
        )
    ]


#: This family's rows of :data:`~conformance.gate._invariants.INVARIANTS`, in the order they run.
ROWS: Dict[str, Check] = {
    "requests": check_requests,
    "max-requests": check_max_requests,
    "budget": check_budget,
    "tool-choice": check_tool_choice,
    "stopped-budget": check_stopped_budget,
    "usage": check_usage,
}
