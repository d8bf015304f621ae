"""OpenAI Chat Completions multi-turn, out: a scripted turn as a whole ``chat.completion``
or as its chunks.

Strategy: a :class:`~conformance.wires._script.ScriptedTurn` is played as OpenAI sends
it: ``reasoning_content`` first where the turn has thinking (the OpenAI-compatible
servers that send it), then the text, then the calls, each opened with its id and
name and then sent in argument fragments keyed by ``index``; interleaved, the calls
take turns fragment by fragment. :func:`turn_events` also says which chunks carried
each call's first and last fragment, the protocol events the gate places faults and
checks at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Tuple

from ...contract import ReasoningKind
from .._chunks import split_text
from .._script import TurnEvents
from ._replies import Chunks, chat_completion, wants_usage

if TYPE_CHECKING:
    from typing import Protocol

    from ...provider.replies import JsonReply, RecordedRequest
    from .._script import ScriptedCall, ScriptedTurn

    class _Shapes(Protocol):
        """What a turn is played through: the wire's reply shapes (OpenAI's, or Azure's)."""

        def chunks(self, model: str, include_usage: bool) -> Chunks: ...

        def completion_reply(self, body: Dict[str, Any]) -> JsonReply: ...

__all__ = ["turn_events", "turn_response"]

#: The contract's finish reasons as Chat Completions spells them.
_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length", "content_filter": "content_filter"}


def _thinking(turn: ScriptedTurn) -> str:
    """The turn's ``reasoning_content``: its thinking items' text (none on api.openai.com)."""
    return "".join(r.text for r in turn.reasoning if str(r.kind) == ReasoningKind.THINKING.value)


def _finish(reason: str) -> str:
    return _FINISH.get(reason, "stop")


def _model(request: RecordedRequest) -> str:
    body = request.json if isinstance(request.json, dict) else {}
    return str(body.get("model") or "conformance-model")


def _call_json(call: ScriptedCall, arguments: str) -> Dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _stream_calls(out: Chunks, turn: ScriptedTurn, role: bool) -> Dict[int, Tuple[int, int]]:
    """Emit the calls' chunks; return each call's first and last argument event.

    A call opens with its id, name and empty arguments (the first chunk of the turn
    also carries the role when no text came before), then sends its fragments, each
    keyed by ``index`` alone. Interleaved, the calls take turns fragment by fragment,
    each opening just before its first fragment.
    """
    pieces = [call.pieces() for call in turn.calls]
    first: Dict[int, int] = {}
    last: Dict[int, int] = {}

    def open_call(index: int) -> None:
        nonlocal role
        delta: Dict[str, Any] = {"tool_calls": [{"index": index, **_call_json(turn.calls[index], "")}]}
        if role:
            delta = {"role": "assistant", "content": None, **delta, "refusal": None}
            role = False
        out.chunk(delta)

    def fragment(index: int, text: str) -> None:
        out.chunk({"tool_calls": [{"index": index, "function": {"arguments": text}}]})
        first.setdefault(index, len(out.events) - 1)
        last[index] = len(out.events) - 1

    if turn.interleave:
        for index in range(len(turn.calls)):
            open_call(index)
            if pieces[index]:
                fragment(index, pieces[index][0])
        for step in range(1, max((len(p) for p in pieces), default=0)):
            for index, parts in enumerate(pieces):
                if step < len(parts):
                    fragment(index, parts[step])
    else:
        for index, parts in enumerate(pieces):
            open_call(index)
            for part in parts:
                fragment(index, part)
    return {index: (first.get(index, -1), last.get(index, -1)) for index in range(len(turn.calls))}


def turn_response(wire: _Shapes, turn: ScriptedTurn, request: RecordedRequest) -> JsonReply:
    """The whole ``chat.completion`` playing ``turn``: its reasoning, text and calls in one message."""
    message: Dict[str, Any] = {"content": turn.text or None}
    thinking = _thinking(turn)
    if thinking:
        message["reasoning_content"] = thinking
    if turn.calls:
        message["tool_calls"] = [_call_json(call, call.arguments) for call in turn.calls]
    body = chat_completion(_model(request), message, _finish(turn.finish_reason))
    return wire.completion_reply(body)


def turn_events(wire: _Shapes, turn: ScriptedTurn, request: RecordedRequest) -> TurnEvents:
    """The chunks playing ``turn``, and which chunks carried each call's first and last fragment."""
    out = wire.chunks(_model(request), wants_usage(request))
    opened = False
    thinking = _thinking(turn)
    if thinking:
        # DeepSeek opens the message with an empty reasoning delta, then streams it.
        out.chunk({"role": "assistant", "content": None, "reasoning_content": ""})
        for piece in split_text(thinking, 4):
            out.chunk({"content": None, "reasoning_content": piece})
        opened = True
    if turn.text or not turn.calls:
        if not thinking:
            out.role()
        out.text(turn.text)
        opened = True
    arguments = _stream_calls(out, turn, role=not opened)
    out.finish(_finish(turn.finish_reason))
    return TurnEvents(
        out.events, "text/event-stream; charset=utf-8", headers=out.headers(), arguments=arguments
    )
