"""OpenAI Responses multi-turn, out: a scripted turn as a whole ``response`` or as its
SSE lifecycle.

Strategy: a :class:`~conformance.wires._script.ScriptedTurn` is played in the
provider's order (``reasoning`` items with their summary and ``encrypted_content``,
then the message, then the ``function_call`` items), with ids derived from the turn's
seed and the request's own tools echoed; :func:`turn_events` also says which events
carried each call's first and last argument delta, the protocol events the gate
places faults and checks at. Responses has no finish reason: only a ``length`` or
``content_filter`` finish shows, as ``incomplete``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from ...contract import ReasoningKind
from .._chunks import split_text
from .._ids import obfuscation, provider_id
from .._script import TurnEvents
from ._replies import HEX, Events, message, output_text, response

if TYPE_CHECKING:
    from typing import Protocol

    from ...provider.replies import JsonReply, RecordedRequest
    from .._script import ScriptedTurn

    class _Shapes(Protocol):
        """What a turn is played through: the wire's name and reply shapes (OpenAI's, or Azure's)."""

        name: str

        def events(self, model: str, response_id: str = ..., tools: Optional[List[Any]] = ...) -> Events: ...

        def response_reply(self, body: Dict[str, Any]) -> JsonReply: ...

__all__ = ["turn_events", "turn_response"]

#: The contract's finish reason -> ``incomplete_details.reason`` of a turn that ends ``incomplete``.
_INCOMPLETE: Mapping[str, str] = {"length": "max_output_tokens", "content_filter": "content_filter"}


class _Turn:
    """The ids and items of one scripted turn, derived from its seed."""

    def __init__(self, wire: str, turn: ScriptedTurn) -> None:
        self.turn = turn
        seed = f"{wire}/{turn.seed}"
        self.response_id = provider_id("resp_", f"{seed}/response", 50, HEX)
        self.message_id = provider_id("msg_", f"{seed}/message", 50, HEX)
        self.reasoning = [r for r in turn.reasoning if str(r.kind) == ReasoningKind.REASONING_ITEM.value]
        self.reasoning_ids = [
            r.id or provider_id("rs_", f"{seed}/reasoning/{n}", 50, HEX) for n, r in enumerate(self.reasoning)
        ]
        self.call_item_ids = [provider_id("fc_", f"{seed}/call/{n}", 50, HEX) for n in range(len(turn.calls))]

    @property
    def incomplete(self) -> bool:
        return self.turn.finish_reason == "length"

    @property
    def incomplete_reason(self) -> Optional[str]:
        """Why the response ends ``incomplete``: the output limit, or the content filter."""
        return _INCOMPLETE.get(self.turn.finish_reason)

    def reasoning_item(self, n: int, done: bool = True) -> Dict[str, Any]:
        """The ``reasoning`` output item; its ``encrypted_content`` only once it is done."""
        r = self.reasoning[n]
        item: Dict[str, Any] = {
            "id": self.reasoning_ids[n],
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text} for text in r.summary] if done else [],
        }
        if done and r.data:
            item["encrypted_content"] = r.data
        return item

    def call_item(self, n: int, done: bool = True) -> Dict[str, Any]:
        call = self.turn.calls[n]
        # A turn cut off by max_output_tokens leaves its last call incomplete.
        last_cut = self.incomplete and n == len(self.turn.calls) - 1
        return {
            "id": self.call_item_ids[n],
            "type": "function_call",
            "status": ("incomplete" if last_cut else "completed") if done else "in_progress",
            "arguments": call.arguments if done else "",
            "call_id": call.id,
            "name": call.name,
        }

    def output(self) -> List[Dict[str, Any]]:
        """The finished output items, in the provider's order: reasoning, message, calls."""
        items = [self.reasoning_item(n) for n in range(len(self.reasoning))]
        if self.turn.text:
            items.append(message([output_text(self.turn.text)], item_id=self.message_id))
        items.extend(self.call_item(n) for n in range(len(self.turn.calls)))
        return items


def _request_tools(request: RecordedRequest) -> Optional[List[Any]]:
    body = request.json if isinstance(request.json, dict) else {}
    tools = body.get("tools")
    return list(tools) if isinstance(tools, list) else []


def _model(request: RecordedRequest) -> str:
    body = request.json if isinstance(request.json, dict) else {}
    return str(body.get("model") or "conformance-model")


def turn_response(wire: _Shapes, turn: ScriptedTurn, request: RecordedRequest) -> JsonReply:
    """The ``response`` playing ``turn``: reasoning items, the message, the calls.

    Responses has no finish reason: a turn with calls ends ``completed`` like one
    without, and only a ``length`` or ``content_filter`` finish shows, as ``incomplete``
    with ``max_output_tokens`` or ``content_filter``.
    """
    t = _Turn(wire.name, turn)
    reason = t.incomplete_reason
    body = response(
        _model(request),
        "incomplete" if reason is not None else "completed",
        t.output(),
        incomplete_reason=reason,
        response_id=t.response_id,
        tools=_request_tools(request),
    )
    return wire.response_reply(body)


def turn_events(wire: _Shapes, turn: ScriptedTurn, request: RecordedRequest) -> TurnEvents:
    """The SSE events playing ``turn``, and which events carried each call's first and last delta."""
    t = _Turn(wire.name, turn)
    out = wire.events(_model(request), t.response_id, _request_tools(request))
    out.created()
    for n in range(len(t.reasoning)):
        _stream_reasoning(out, t, n)
    if turn.text:
        out.message(turn.text, item_id=t.message_id)
    first = len(out.output)
    for n in range(len(turn.calls)):
        out.emit("response.output_item.added", output_index=first + n, item=t.call_item(n, done=False))
        if not turn.interleave:
            _stream_arguments(out, t, first, [n])
            _finish_call(out, t, first, n)
    if turn.interleave:
        # Every argument delta names its item by output_index and item_id, so the calls'
        # fragments may alternate once all of them are added; openai-python's stream
        # state (lib/streaming/responses/_responses.py) appends each delta to the item
        # at its output_index, and the Agents SDK keys its call state the same way.
        _stream_arguments(out, t, first, list(range(len(turn.calls))))
        for n in range(len(turn.calls)):
            _finish_call(out, t, first, n)
    if t.incomplete_reason is not None:
        out.incomplete(t.incomplete_reason)
    else:
        out.completed()
    spans = {n: (min(at), max(at)) for n, at in out.argument_events.items()}
    return TurnEvents(out.events, "text/event-stream; charset=utf-8", out.headers(), spans)


def _stream_reasoning(out: Events, t: _Turn, n: int) -> None:
    """A reasoning item as streamed: its summary parts, then the item with its encrypted content."""
    index = len(out.output)
    where = {"item_id": t.reasoning_ids[n], "output_index": index}
    out.emit("response.output_item.added", output_index=index, item=t.reasoning_item(n, done=False))
    for at, text in enumerate(t.reasoning[n].summary):
        empty = {"type": "summary_text", "text": ""}
        out.emit("response.reasoning_summary_part.added", summary_index=at, part=empty, **where)
        for piece in split_text(text, 3):
            out.emit(
                "response.reasoning_summary_text.delta",
                summary_index=at,
                delta=piece,
                **where,
                obfuscation=obfuscation(f"openai-responses/{len(out.events)}"),
            )
        out.emit("response.reasoning_summary_text.done", summary_index=at, text=text, **where)
        part = {"type": "summary_text", "text": text}
        out.emit("response.reasoning_summary_part.done", summary_index=at, part=part, **where)
    item = t.reasoning_item(n)
    out.emit("response.output_item.done", output_index=index, item=item)
    out.output.append(item)


def _stream_arguments(out: Events, t: _Turn, first: int, calls: List[int]) -> None:
    """The argument deltas of ``calls``, taking one fragment of each in turn."""
    pieces = {n: list(t.turn.calls[n].pieces()) for n in calls}
    for step in range(max((len(p) for p in pieces.values()), default=0)):
        for n in calls:
            if step >= len(pieces[n]):
                continue
            out.argument_events.setdefault(n, []).append(len(out.events))
            out.emit(
                "response.function_call_arguments.delta",
                delta=pieces[n][step],
                item_id=t.call_item_ids[n],
                output_index=first + n,
                obfuscation=obfuscation(f"openai-responses/{len(out.events)}"),
            )


def _finish_call(out: Events, t: _Turn, first: int, n: int) -> None:
    call = t.turn.calls[n]
    where = {"item_id": t.call_item_ids[n], "output_index": first + n}
    # A call whose arguments are empty has no delta: its one argument event is .done.
    out.argument_events.setdefault(n, [len(out.events)])
    out.emit("response.function_call_arguments.done", arguments=call.arguments, **where)
    item = t.call_item(n)
    out.emit("response.output_item.done", output_index=first + n, item=item)
    out.output.append(item)
