"""Ollama multi-turn, out: a scripted turn as one ``ChatResponse`` or as its NDJSON lines.

Strategy: a :class:`~conformance.wires._script.ScriptedTurn` is played as the server
sends it: ``message.thinking`` first, then the text, then each call whole on a line of
its own (the server's parser emits a call only once it parses, so the calls cannot
interleave, and arguments that do not parse stay in the text). :func:`turn_events`
also says which line carried each call, the protocol event the gate places faults
and checks at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ...contract import ReasoningKind
from .._chunks import split_text
from .._script import TurnEvents
from ._replies import JSON_TYPE, NDJSON_TYPE, chat_response, response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest
    from .._script import ScriptedTurn

__all__ = ["turn_events", "turn_response"]


def _turn_parts(turn: ScriptedTurn) -> Tuple[str, str, List[Optional[Dict[str, Any]]]]:
    """The turn's thinking, its text, and each call's ``tool_calls`` entry.

    A call whose arguments are not a JSON object has no entry (``None``): Ollama's
    tool parser emits a call only once it parses, and passes text it cannot parse on
    as content (ollama/ollama-python#279 saw calls arrive as text).
    """
    import json

    thinking = "".join(r.text for r in turn.reasoning if str(r.kind) == ReasoningKind.THINKING.value)
    entries: List[Optional[Dict[str, Any]]] = []
    for call in turn.calls:
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = None
        if isinstance(arguments, dict):
            entries.append({"function": {"name": call.name, "arguments": arguments}})
        else:
            entries.append(None)
    return thinking, turn.text, entries


def _turn_line(
    model: str,
    index: int,
    content: str = "",
    thinking: str = "",
    tool_calls: Optional[List[Dict[str, Any]]] = None,
    done_reason: Optional[str] = None,
) -> Dict[str, Any]:
    body = chat_response(model, index, content, done_reason, tool_calls)
    if thinking:
        body["message"]["thinking"] = thinking
    return body


def _done_reason(turn: ScriptedTurn) -> str:
    # Ollama says stop for a tool turn too; only num_predict running out is length.
    return "length" if turn.finish_reason == "length" else "stop"


def _model(request: RecordedRequest) -> str:
    body = request.json if isinstance(request.json, dict) else {}
    return str(body.get("model") or "conformance-model")


def _word_pieces(text: str, pieces: int) -> List[str]:
    """``text`` in up to ``pieces`` runs of whole words, each but the first led by the
    whitespace before it, as a model's tokens stream (``" weather"``, ``"\n\nOne"``)."""
    import re

    words = re.findall(r"\s*\S+\s*$|\s*\S+", text)
    if "".join(words) != text:  # only whitespace: no words to keep whole
        return list(split_text(text, pieces))
    step = max(1, -(-len(words) // max(1, pieces)))
    return ["".join(words[start : start + step]) for start in range(0, len(words), step)]


def turn_events(turn: ScriptedTurn, request: RecordedRequest) -> TurnEvents:
    """The NDJSON lines of ``turn``: thinking, then text, then one line per whole call."""
    from ...encoders import ndjson

    model = _model(request)
    thinking, text, entries = _turn_parts(turn)
    lines: List[bytes] = []
    spans: Dict[int, Tuple[int, int]] = {}
    for piece in _word_pieces(thinking, 3):
        lines.append(ndjson(_turn_line(model, len(lines), thinking=piece)))
    for piece in split_text(text, 4):
        lines.append(ndjson(_turn_line(model, len(lines), content=piece)))
    # The calls come whole, one line each as the server's parser completes them: they
    # cannot interleave, whatever ``turn.interleave`` asks.
    for n, entry in enumerate(entries):
        spans[n] = (len(lines), len(lines))
        if entry is None:
            lines.append(ndjson(_turn_line(model, len(lines), content=turn.calls[n].arguments)))
        else:
            lines.append(ndjson(_turn_line(model, len(lines), tool_calls=[entry])))
    lines.append(ndjson(_turn_line(model, len(lines), done_reason=_done_reason(turn))))
    return TurnEvents(lines, NDJSON_TYPE, response_headers(), spans)


def turn_response(turn: ScriptedTurn, request: RecordedRequest) -> JsonReply:
    """One ``ChatResponse``: ``thinking``, ``content``, the calls whole, ``done_reason``."""
    from ...provider.replies import JsonReply

    thinking, text, entries = _turn_parts(turn)
    # A call the parser could not read stays in the text, as the server passes it on.
    text += "".join(turn.calls[n].arguments for n, entry in enumerate(entries) if entry is None)
    calls = [entry for entry in entries if entry is not None]
    body = _turn_line(_model(request), 0, text, thinking, calls, _done_reason(turn))
    return JsonReply(body, headers=response_headers(), content_type=JSON_TYPE)
