"""Cohere multi-turn, out: a scripted turn as a whole ``chat`` response or as its SSE events.

Strategy: a :class:`~conformance.wires._script.ScriptedTurn` is played as Cohere sends
a turn. A turn that calls tools carries its reasoning as the ``tool_plan`` (streamed as
``tool-plan-delta``, before the calls, as in langchain-cohere's
``test_streaming_tool_call.yaml``); a turn that answers carries it as ``thinking``
content items before the text (vercel/ai ``cohere-reasoning.chunks.txt``). Each call
opens with ``tool-call-start`` (its id, name and empty arguments), sends its fragments
as ``tool-call-delta`` keyed by ``index``, and closes with ``tool-call-end``; a call with
no arguments ends at once (vercel/ai ``cohere-empty-tool-call.chunks.txt``). A turn's
text beside its calls, which no capture shows, goes in a ``text`` content item before
them: the assistant message's ``content`` and ``tool_calls`` sit side by side in
Cohere's API reference. :func:`turn_events` also says which events carried each call's
first and last fragment, the protocol events the gate places faults and checks at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Tuple

from ...contract import ReasoningKind
from .._script import TurnEvents
from ._replies import CONTENT_TYPE, Events, answer_headers, chat_response, message_id, stream_headers
from ._replies import text_item as _text_item
from ._replies import tool_call as _tool_call

if TYPE_CHECKING:
    from ...provider.replies import JsonReply
    from .._script import ScriptedTurn

__all__ = ["FINISH_REASONS", "turn_events", "turn_response"]

#: The contract's finish reason -> Cohere's ``finish_reason``.
FINISH_REASONS: Mapping[str, str] = {"stop": "COMPLETE", "tool_calls": "TOOL_CALL", "length": "MAX_TOKENS"}


def _finish(turn: ScriptedTurn) -> str:
    return FINISH_REASONS.get(turn.finish_reason, "COMPLETE")


def _thinking(turn: ScriptedTurn) -> List[str]:
    """The turn's reasoning texts: Cohere returns thinking as text, with nothing opaque beside it."""
    return [r.text for r in turn.reasoning if str(r.kind) == ReasoningKind.THINKING.value and r.text]


def turn_response(turn: ScriptedTurn) -> JsonReply:
    """The whole reply playing ``turn``: its plan and calls, or its thinking and text."""
    from ...provider.replies import JsonReply

    message: Dict[str, Any] = {}
    if turn.calls:
        if _thinking(turn):
            message["tool_plan"] = "".join(_thinking(turn))
        message["tool_calls"] = [_tool_call(c.id, c.name, c.arguments) for c in turn.calls]
        if turn.text:
            message["content"] = [_text_item(turn.text)]
    else:
        content = [{"type": "thinking", "thinking": text} for text in _thinking(turn)]
        if turn.text:
            content.append(_text_item(turn.text))
        message["content"] = content
    body = chat_response(message, _finish(turn), message_id(turn.seed))
    return JsonReply(body, headers=answer_headers())


def turn_events(turn: ScriptedTurn) -> TurnEvents:
    """The events playing ``turn``, and which events carried each call's first and last fragment."""
    out = Events(message_id(turn.seed))
    out.message_start()
    if turn.calls:
        for text in _thinking(turn):
            out.tool_plan(text)
    else:
        for text in _thinking(turn):
            out.content(text, kind="thinking", pieces=3)
    if turn.text:
        out.content(turn.text)
    arguments: Dict[int, Tuple[int, int]] = {}
    if turn.interleave and len(turn.calls) > 1:
        _interleaved_calls(out, turn, arguments)
    else:
        for position, call in enumerate(turn.calls):
            # A turn cut by the token limit leaves its last call open: no tool-call-end.
            cut = turn.finish_reason == "length" and position == len(turn.calls) - 1
            arguments[position] = out.tool_call(call.id, call.name, call.pieces(), end=not cut)
    out.message_end(_finish(turn))
    return TurnEvents(out.events, CONTENT_TYPE, stream_headers(), arguments)


def _interleaved_calls(out: Events, turn: ScriptedTurn, arguments: Dict[int, Tuple[int, int]]) -> None:
    """Open every call, send their fragments in turn, then close them.

    Every ``tool-call-delta`` names its call by ``index``, and cohere-python's stream
    types carry it on each event, so calls may be open together. Real streams were seen
    closing each call before opening the next (langchain-cohere and vercel/ai captures),
    so this is what the format allows rather than what Cohere was seen doing: a client
    that keeps "the current call" instead of the index mixes the calls up.
    """
    base = out.call_index
    for offset, call in enumerate(turn.calls):
        out.tool_call_start(base + offset, call.id, call.name)
        arguments[offset] = (len(out.events) - 1, len(out.events) - 1)
    pieces = [call.pieces() for call in turn.calls]
    seen = set()
    for step in range(max(len(p) for p in pieces)):
        for offset, parts in enumerate(pieces):
            if step >= len(parts):
                continue
            out.tool_call_delta(base + offset, parts[step])
            first = arguments[offset][0] if offset in seen else len(out.events) - 1
            seen.add(offset)
            arguments[offset] = (first, len(out.events) - 1)
    for offset in range(len(turn.calls)):
        out.tool_call_end(base + offset)
    out.call_index = base + len(turn.calls)
