"""Bedrock multi-turn, out: a scripted turn as a whole ``ConverseResponse`` or as its
event-stream messages.

Strategy: a :class:`~conformance.wires._script.ScriptedTurn` is played in Bedrock's
order (reasoning, then text, then ``toolUse`` blocks), by the same builders as the
single-turn replies; :func:`turn_events` also says which messages carried each
call's first and last input fragment, the protocol events the gate places faults
and checks at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Sequence, Tuple

from ...contract import Reasoning, ReasoningKind
from .._chunks import split_text
from .._content_blocks import input_object
from .._script import TurnEvents
from ._replies import EVENT_STREAM, Events, converse_response, response_headers

if TYPE_CHECKING:
    from .._script import ScriptedTurn

__all__ = ["TURN_STOP_REASONS", "reasoning_content", "turn_events", "turn_response"]

#: The contract's finish reason -> Bedrock's ``stopReason``.
TURN_STOP_REASONS: Mapping[str, str] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filtered",
    "refusal": "content_filtered",
}


def reasoning_content(item: Reasoning) -> Dict[str, Any]:
    """A ``reasoningContent`` block: ``reasoningText {text, signature}`` or ``redactedContent`` (base64)."""
    if item.kind == ReasoningKind.REDACTED_THINKING:
        return {"reasoningContent": {"redactedContent": item.data}}
    return {"reasoningContent": {"reasoningText": {"text": item.text, "signature": item.signature}}}


def turn_response(turn: ScriptedTurn) -> Dict[str, Any]:
    """The whole ``ConverseResponse`` playing ``turn``: reasoning, text, then ``toolUse`` blocks."""
    content: List[Dict[str, Any]] = [reasoning_content(r) for r in turn.reasoning]
    if turn.text:
        content.append({"text": turn.text})
    for call in turn.calls:
        content.append(
            {"toolUse": {"toolUseId": call.id, "name": call.name, "input": input_object(call.arguments)}}
        )
    return converse_response(content, TURN_STOP_REASONS.get(turn.finish_reason, "end_turn"))


def turn_events(turn: ScriptedTurn) -> TurnEvents:
    """The event-stream messages playing ``turn``, with each call's first and last fragment event.

    A reasoning block has no ``contentBlockStart`` (the start union has no member for
    it): its text comes as ``reasoningContent.text`` deltas and its signature as one
    last ``reasoningContent.signature`` delta before ``contentBlockStop``; redacted
    reasoning is one ``reasoningContent.redactedContent`` delta.
    """
    out = Events()
    out.message_start()
    for item in turn.reasoning:
        out.block += 1
        if item.kind == ReasoningKind.REDACTED_THINKING:
            deltas: List[Dict[str, Any]] = [{"redactedContent": item.data}]
        else:
            deltas = [{"text": piece} for piece in split_text(item.text, 3)] if item.text else []
            deltas.append({"signature": item.signature})
        for delta in deltas:
            out.event(
                "contentBlockDelta", {"contentBlockIndex": out.block, "delta": {"reasoningContent": delta}}
            )
        out.content_block_stop()
    if turn.text:
        out.text_block(turn.text)
    arguments: Dict[int, Tuple[int, int]] = {}
    if turn.interleave and len(turn.calls) > 1:
        _interleaved_calls(out, turn, arguments)
    else:
        for position, call in enumerate(turn.calls):
            arguments[position] = _tool_block(out, call.id, call.name, call.pieces())
    out.finish(TURN_STOP_REASONS.get(turn.finish_reason, "end_turn"))
    return TurnEvents(out.events, EVENT_STREAM, response_headers(), arguments)


def _tool_block(out: Events, call_id: str, name: str, pieces: Sequence[str]) -> Tuple[int, int]:
    """A tool block sending exactly ``pieces``, after the empty first fragment."""
    out.block += 1
    out.event(
        "contentBlockStart",
        {"contentBlockIndex": out.block, "start": {"toolUse": {"toolUseId": call_id, "name": name}}},
    )
    span: List[int] = []
    for piece in ["", *pieces]:
        out.event(
            "contentBlockDelta", {"contentBlockIndex": out.block, "delta": {"toolUse": {"input": piece}}}
        )
        span.append(len(out.events) - 1)
    out.content_block_stop()
    real = span[1:] or span
    return (real[0], real[-1])


def _interleaved_calls(out: Events, turn: ScriptedTurn, arguments: Dict[int, Tuple[int, int]]) -> None:
    """Start every tool block, send their fragments in turn, then stop them.

    Each delta names its block by ``contentBlockIndex``, which is all a client has to
    tell the blocks apart (boto3 hands the events over one by one, with the index).
    Real ConverseStream replies were seen closing each block before the next starts
    (the pydantic-ai and openllmetry captures), so this is what the format allows, not
    what a model was seen doing: a client that appends every fragment to "the current
    call" mixes the calls up.
    """
    base = out.block + 1
    for offset, call in enumerate(turn.calls):
        start = {"toolUse": {"toolUseId": call.id, "name": call.name}}
        out.event("contentBlockStart", {"contentBlockIndex": base + offset, "start": start})
    pieces = [call.pieces() for call in turn.calls]
    for step in range(max(len(p) for p in pieces)):
        for offset, parts in enumerate(pieces):
            if step >= len(parts):
                continue
            delta = {"toolUse": {"input": parts[step]}}
            out.event("contentBlockDelta", {"contentBlockIndex": base + offset, "delta": delta})
            first = arguments[offset][0] if offset in arguments else len(out.events) - 1
            arguments[offset] = (first, len(out.events) - 1)
    for offset, _call in enumerate(turn.calls):
        if offset not in arguments:  # a call without arguments: its block is empty
            delta = {"toolUse": {"input": ""}}
            out.event("contentBlockDelta", {"contentBlockIndex": base + offset, "delta": delta})
            arguments[offset] = (len(out.events) - 1, len(out.events) - 1)
        out.event("contentBlockStop", {"contentBlockIndex": base + offset})
    out.block = base + len(turn.calls) - 1
