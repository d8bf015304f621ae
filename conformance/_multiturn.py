"""The two multi-turn scenarios of the backend suite, on any wire that scripts turns.

Strategy: ``tool-result`` and ``parallel-tool-calls`` are written once, here, in the
provider-neutral terms of :mod:`conformance.wires._turns`; each wire only renders
the scripted turn and reads the history back. ``tool-result`` sends a conversation
that already holds a ``get_weather`` call and its result (or its structured error,
or the reasoning the provider tied to the call) and reads back what the backend
made of it: a history the real API would refuse is answered with that API's 400,
as production would answer it. ``parallel-tool-calls`` answers with two calls in
one turn, streamed one after the other as every provider streams them (the formats
allow alternating fragments, but no provider was seen sending that order, and the
agent-loop suite keeps it to an opt-in stress stage). The
``reasoning`` scenario is played here too, by the same turn builders: the fixture's
text after the reasoning its variant carries.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from .contract import ChatRequest, Message, Reasoning, ToolCall, ToolError, ToolResult
from .fixture import CONFORMANCE_FIXTURE as FX
from .fixture import conformance_request
from .wires._turns import History, ScriptedCall, ScriptedTurn, play_turn, reasoning_key

if TYPE_CHECKING:
    from .contract import AbortSignal
    from .provider.replies import RecordedRequest, Reply
    from .wires._base import Variant, Wire

__all__ = [
    "MULTI_TURN",
    "asks_thinking",
    "earlier_turn",
    "expected_history",
    "history_problems",
    "multi_turn_reply",
    "multi_turn_request",
    "parallel_calls",
]

#: The scenarios this module plays.
MULTI_TURN = ("tool-result", "parallel-tool-calls")


def earlier_call(wire: Wire, variant: str) -> ToolCall:
    """The ``get_weather`` call the history of a ``tool-result`` case holds."""
    # What the provider ties to the call itself is always there: a Gemini 3 call comes
    # signed, and the API refuses the call back without its signature.
    reasoning = wire.call_reasoning
    call_id = wire.scripted_call_id(FX.tool_name, f"{wire.name}/tool-result")
    return ToolCall(call_id, FX.tool_name, dict(FX.tool_arguments), reasoning)


def earlier_turn(wire: Wire, variant: str) -> ScriptedTurn:
    """The turn a ``tool-result`` case plays before its own: the :func:`earlier_call`, after
    the reasoning the variant's turn carries (:meth:`~conformance.wires.Wire.tool_turn_reasoning`)."""
    call = earlier_call(wire, variant)
    arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
    scripted = ScriptedCall(call.id, call.name, arguments, reasoning=tuple(call.reasoning))
    return ScriptedTurn(
        calls=(scripted,),
        reasoning=wire.tool_turn_reasoning(variant),
        seed=f"tool-result/{variant or 'default'}/earlier",
    )


def asks_thinking(wire: Wire, scenario: str, variant: str) -> bool:
    """Whether the case's requests ask for thinking (``ChatRequest.thinking``): the
    ``reasoning`` case's, and a ``tool-result`` case's whose earlier turn carries reasoning
    the provider sends only then, as the case's headline says."""
    if scenario == "reasoning":
        return True
    return scenario == "tool-result" and bool(wire.tool_turn_reasoning(variant))


def earlier_result(wire: Wire, variant: str) -> ToolResult:
    """Its result: the weather, or a structured error in the ``error`` variant."""
    call = earlier_call(wire, variant)
    if variant == "error":
        error = ToolError(FX.tool_error_code, FX.tool_error_message, retryable=True)
        return ToolResult(call.id, call.name, error=error)
    return ToolResult(call.id, call.name, content=FX.tool_result)


def multi_turn_request(
    wire: Wire,
    scenario: str,
    variant: str,
    model: str,
    signal: Optional[AbortSignal],
    earlier: Optional[Sequence[ToolCall]] = None,
    earlier_reasoning: Optional[Sequence[Reasoning]] = None,
) -> ChatRequest:
    """The request a case sends: the fixture's, with the earlier turn for ``tool-result``.

    ``earlier`` is what the backend returned on that turn (:func:`earlier_turn` plays
    it): the history is built from those calls, as a loop builds it, and the result
    answers the first of them by its id. ``None``, the calls the provider scripted.
    ``earlier_reasoning`` likewise: the reasoning the backend returned with those calls,
    which the turn sends back where the variant's turn carried some; ``None``, what the
    provider needs back of it.
    """
    request = conformance_request(model, signal=signal)
    if scenario != "tool-result":
        return request
    reasoning: Sequence[Reasoning] = wire.turn_reasoning if variant == "reasoning" else ()
    if wire.tool_turn_reasoning(variant):
        if earlier_reasoning is not None:
            reasoning = tuple(earlier_reasoning)
        elif wire.turn_reasoning_required:
            reasoning = wire.tool_turn_reasoning(variant)
    calls = tuple(earlier) if earlier is not None else (earlier_call(wire, variant),)
    turn = Message("assistant", "", tool_calls=calls, reasoning=tuple(reasoning))
    answered = earlier_result(wire, variant)
    returned_id = getattr(calls[0], "id", None) if calls else None
    if isinstance(returned_id, str):
        answered = dataclasses.replace(answered, call_id=returned_id)
    result = Message.tool(answered)
    return ChatRequest(
        model=request.model,
        messages=(*request.messages, turn, result),
        tools=request.tools,
        max_tokens=request.max_tokens,
        signal=signal,
        thinking=asks_thinking(wire, scenario, variant),
    )


def parallel_calls(wire: Wire) -> Tuple[ScriptedCall, ...]:
    """The two calls of a ``parallel-tool-calls`` turn."""
    return tuple(
        ScriptedCall(
            wire.scripted_call_id(FX.tool_name, f"{wire.name}/parallel-tool-calls/{index}"),
            FX.tool_name,
            json.dumps(dict(arguments), ensure_ascii=False),
        )
        for index, arguments in enumerate(FX.parallel_arguments)
    )


def expected_history(wire: Wire, variant: str) -> Tuple[Message, ...]:
    """The turns after the question that a ``tool-result`` request must carry, in normal form."""
    request = multi_turn_request(wire, "tool-result", variant, "conformance-model", None)
    return tuple(request.messages[-2:])


def multi_turn_reply(
    wire: Wire, scenario: str, request: RecordedRequest, variant: str, refusals: List[str]
) -> Optional[Reply]:
    """The provider's answer in a multi-turn scenario; ``None`` where the wire scripts no turns.

    A history the real API would refuse is answered with the wire's own 400, and its
    problems are added to ``refusals`` for the ``history`` check to report.
    """
    if not wire.scripts_turns():
        return None
    seed = f"{scenario}/{variant or 'default'}"
    if scenario == "parallel-tool-calls":
        return play_turn(wire, ScriptedTurn(calls=parallel_calls(wire), seed=seed), request)
    history = wire.read_history(request)
    if history is None:
        return None
    if not any(m.role == "tool" or m.tool_calls for m in history.messages):
        # The question alone: the turn before the case's own, answered with the call.
        return play_turn(wire, earlier_turn(wire, variant), request)
    if history.problems:
        refusals.extend(history.problems)
        return wire.history_error(history.problems)
    return play_turn(wire, ScriptedTurn(text=FX.tool_result_answer, seed=seed), request)


def reasoning_reply(wire: Wire, mode: str, request: RecordedRequest, variant: str) -> Optional[Reply]:
    """The provider's answer in a ``reasoning`` case: the fixture's text after the reasoning
    ``variant`` carries, played by the wire's own turn builders; ``None`` where it has none."""
    if not wire.scripts_turns():
        return None
    try:
        shape = wire.variant("reasoning", mode, variant) if variant else wire.variants("reasoning", mode)[0]
    except KeyError:
        return None
    if not shape.reasoning:
        return None
    seed = f"reasoning/{shape.name or 'default'}"
    turn = ScriptedTurn(text=FX.text, reasoning=shape.reasoning, seed=seed, variant=shape.name)
    return play_turn(wire, turn, request)


def _result_problems(index: int, want: ToolResult, got: Optional[ToolResult], wire: Wire) -> List[str]:
    if got is None:
        return [f"expected result {index + 1} to be a tool result, got none"]
    problems = []
    if wire.sends_call_ids and got.call_id != want.call_id and not _paired_by_name(wire, got.call_id):
        problems.append(
            f"expected the result to answer call {want.call_id!r} (the call's own id), got {got.call_id!r}"
            f"{_suffix_kept(want.call_id, got.call_id)}"
        )
    if got.name and got.name != want.name:
        problems.append(f"expected the result to name the tool {want.name!r}, got {got.name!r}")
    if want.is_error:
        if wire.marks_tool_errors and not got.is_error:
            problems.append(
                f"expected the result marked as an error ({wire.tool_error_marker}), got a plain result "
                f"with content {got.content!r}"
            )
        sent = got.content or (got.error.message if got.error else "")
        error = want.error
        assert error is not None
        # With an error flag the message is what the model reads; without one the
        # result's text is all there is, so the code must be in it too.
        wanted = [error.message] if wire.marks_tool_errors else [error.code, error.message]
        if not all(part in sent for part in wanted):
            what = "message" if wire.marks_tool_errors else "code and message"
            problems.append(
                f"expected the error's {what} {' / '.join(map(repr, wanted))} sent back, got {sent!r}"
            )
    elif got.is_error or got.content != want.content:
        shown = f"an error {got.error!r}" if got.is_error else repr(got.content)
        problems.append(f"expected the result content {want.content!r} unaltered, got {shown}")
    return problems


def _paired_by_name(wire: Wire, sent: str) -> bool:
    """Whether an id left out is how the provider takes it: where it pairs a result sent without
    an id with the call to its function (Gemini, whose own SDK's automatic function calling
    sends its results so), the wire's history reader pairs it, and so does this check."""
    return wire.pairs_results_by_name and not sent


def _suffix_kept(issued: str, sent: object) -> str:
    """Why an id the backend marked came back marked, where it did: the history is built
    from the calls the backend returned, so a suffix it added on the way in must come off."""
    if isinstance(sent, str) and len(sent) > len(issued) and sent.startswith(issued):
        return (
            f" (the id the backend returned for the call, {sent!r}, carries a suffix of its own: "
            "take it off on the way back, the provider knows only the id it issued)"
        )
    return ""


def history_problems(
    wire: Wire, variant: Variant, history: History, turn_reasoning: bool = True
) -> List[str]:
    """How the history a backend sent departs from the ``tool-result`` case's, one sentence each.

    ``turn_reasoning`` ``False`` leaves the turn's reasoning out of the comparison: where the
    backend lost it on the way in, the reasoning checks say so, and the turn sent back is
    what it returned.
    """
    want_turn, want_result = expected_history(wire, variant.name)
    assistants = [m for m in history.messages if m.role == "assistant" and m.tool_calls]
    results = [m for m in history.messages if m.role == "tool"]
    problems: List[str] = []
    if len(assistants) != 1:
        problems.append(
            f"expected one assistant turn carrying the earlier get_weather call, got {len(assistants)} "
            f"(roles sent: {[m.role for m in history.messages]})"
        )
    else:
        problems.extend(_turn_problems(want_turn, assistants[0], wire, turn_reasoning))
        order = list(history.messages)
        if results and order.index(results[0]) < order.index(assistants[0]):
            problems.append("expected the tool result after the assistant turn that called the tool")
    if len(results) != 1:
        problems.append(f"expected one tool result, got {len(results)}")
    else:
        assert want_result.tool_result is not None
        problems.extend(_result_problems(0, want_result.tool_result, results[0].tool_result, wire))
    return problems


def _turn_problems(want: Message, got: Message, wire: Wire, turn_reasoning: bool = True) -> List[str]:
    problems = []
    want_call, got_calls = want.tool_calls[0], list(got.tool_calls)
    if len(got_calls) != 1:
        return [f"expected the assistant turn to carry one call, got {len(got_calls)}"]
    call = got_calls[0]
    if wire.sends_call_ids and call.id != want_call.id and not _paired_by_name(wire, call.id):
        problems.append(
            f"expected the call's id {want_call.id!r} sent back as the provider gave it, got {call.id!r}"
            f"{_suffix_kept(want_call.id, call.id)}"
        )
    if call.name != want_call.name or dict(call.arguments) != dict(want_call.arguments):
        problems.append(
            f"expected the call {want_call.name}({dict(want_call.arguments)!r}), got "
            f"{call.name}({dict(call.arguments)!r})"
        )
    if turn_reasoning:
        problems.extend(_reasoning_problems("the turn", want.reasoning, got.reasoning))
    problems.extend(_reasoning_problems("the call", want_call.reasoning, call.reasoning))
    return problems


def _reasoning_problems(where: str, want: Sequence[Reasoning], got: Sequence[Reasoning]) -> List[str]:
    if not want:
        return []
    if [reasoning_key(r) for r in want] == [reasoning_key(r) for r in got]:
        return []
    return [
        f"expected the reasoning of {where} echoed byte for byte (the provider refuses a tool turn "
        f"whose reasoning or signature changed), sent {list(want)!r}, got {list(got)!r}"
    ]

