"""Anthropic multi-turn, out: a scripted turn as a whole ``message`` or as its SSE events.

Strategy: a :class:`~conformance.wires._script.ScriptedTurn` is played in Anthropic's
order (thinking blocks, then text, then ``tool_use`` blocks), by the same builders as
the single-turn replies; :func:`turn_events` also says which events carried each
call's first and last ``input_json_delta``, the protocol events the gate places
faults and checks at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ...contract import Reasoning, ReasoningKind
from .._chunks import split_text
from .._content_blocks import input_object
from .._ids import provider_id
from .._script import TurnEvents
from ._replies import BASE62, Events, message, text_block

if TYPE_CHECKING:
    from .._script import ScriptedTurn

__all__ = ["TURN_STOP_REASONS", "reasoning_block", "turn_events", "turn_message", "turn_message_id"]

#: The contract's finish reason -> Anthropic's ``stop_reason``.
TURN_STOP_REASONS: Mapping[str, str] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "refusal": "refusal",
    "content_filter": "refusal",
}


def reasoning_block(item: Reasoning) -> Dict[str, Any]:
    """A ``thinking`` block (text and signature) or a ``redacted_thinking`` block (data)."""
    if item.kind == ReasoningKind.REDACTED_THINKING:
        return {"type": "redacted_thinking", "data": item.data}
    return {"type": "thinking", "thinking": item.text, "signature": item.signature}


def turn_message(turn: ScriptedTurn, model: str) -> Dict[str, Any]:
    """The whole ``message`` playing ``turn``: thinking blocks, then text, then ``tool_use``."""
    content: List[Dict[str, Any]] = [reasoning_block(r) for r in turn.reasoning]
    if turn.text:
        content.append(text_block(turn.text))
    for call in turn.calls:
        content.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": input_object(call.arguments)}
        )
    body = message(model, content, TURN_STOP_REASONS.get(turn.finish_reason, "end_turn"))
    body["id"] = turn_message_id(turn)
    return body


def turn_message_id(turn: ScriptedTurn) -> str:
    """The ``msg_01…`` id of ``turn``'s message, the same on every run."""
    return provider_id("msg_01", f"anthropic/{turn.seed}", 22, BASE62)


def turn_events(turn: ScriptedTurn, model: str, out: Optional[Events] = None) -> TurnEvents:
    """The SSE events playing ``turn``, and which events carried each call's first and last fragment.

    ``out`` is the builder to play it with, where a host frames the events its own way
    (it must carry :func:`turn_message_id`); by default Anthropic's SSE.

    A thinking block streams ``thinking_delta`` pieces and then one ``signature_delta``
    just before its ``content_block_stop``; a ``redacted_thinking`` block arrives whole
    in its ``content_block_start``. Each ``tool_use`` block opens with an empty
    ``partial_json``, as every real one does.
    """
    if out is None:
        out = Events(model, turn_message_id(turn))
    out.message_start()
    for item in turn.reasoning:
        if item.kind == ReasoningKind.REDACTED_THINKING:
            out.content_block_start(reasoning_block(item))
        else:
            out.content_block_start({"type": "thinking", "thinking": "", "signature": ""})
            for piece in split_text(item.text, 3) if item.text else []:
                out.emit(
                    "content_block_delta",
                    index=out.index,
                    delta={"type": "thinking_delta", "thinking": piece},
                )
            out.emit(
                "content_block_delta",
                index=out.index,
                delta={"type": "signature_delta", "signature": item.signature},
            )
        out.content_block_stop()
    if turn.text:
        out.text(turn.text)
    arguments: Dict[int, Tuple[int, int]] = {}
    if turn.interleave and len(turn.calls) > 1:
        _interleaved_calls(out, turn, arguments)
    else:
        for position, call in enumerate(turn.calls):
            out.content_block_start({"type": "tool_use", "id": call.id, "name": call.name, "input": {}})
            first = last = len(out.events)
            for number, piece in enumerate(["", *call.pieces()]):
                out.emit(
                    "content_block_delta",
                    index=out.index,
                    delta={"type": "input_json_delta", "partial_json": piece},
                )
                if number == 1:
                    first = len(out.events) - 1
                last = len(out.events) - 1
            arguments[position] = (first if call.pieces() else last, last)
            out.content_block_stop()
    out.message_delta(TURN_STOP_REASONS.get(turn.finish_reason, "end_turn"))
    return TurnEvents(out.events, out.content_type, out.headers(), arguments)


def _interleaved_calls(out: Events, turn: ScriptedTurn, arguments: Dict[int, Tuple[int, int]]) -> None:
    """Open every ``tool_use`` block, send their fragments in turn, then close them.

    Every delta names its block by ``index``, and anthropic-python accumulates by it
    (``lib/streaming/_messages.py`` looks the block up as ``content[event.index]``), as
    does the reference backend, so blocks may be open together. Real streams were seen
    closing each block before opening the next (79 of 79 in pydantic-ai's cassettes),
    so this is what the format allows rather than what Claude was seen doing: a client
    that keeps "the current block" instead of the index mixes the calls up.
    """
    base = out.index
    for offset, call in enumerate(turn.calls):
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        out.emit("content_block_start", index=base + offset, content_block=block)
        out.ping()
    for offset, _call in enumerate(turn.calls):
        delta = {"type": "input_json_delta", "partial_json": ""}
        out.emit("content_block_delta", index=base + offset, delta=delta)
        arguments[offset] = (len(out.events) - 1, len(out.events) - 1)
    pieces = [call.pieces() for call in turn.calls]
    seen = set()
    for step in range(max(len(p) for p in pieces)):
        for offset, parts in enumerate(pieces):
            if step >= len(parts):
                continue
            delta = {"type": "input_json_delta", "partial_json": parts[step]}
            out.emit("content_block_delta", index=base + offset, delta=delta)
            first = arguments[offset][0] if offset in seen else len(out.events) - 1
            seen.add(offset)
            arguments[offset] = (first, len(out.events) - 1)
    for offset, _call in enumerate(turn.calls):
        out.emit("content_block_stop", index=base + offset)
    out.index = base + len(turn.calls)
