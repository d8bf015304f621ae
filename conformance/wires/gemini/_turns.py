"""Gemini multi-turn, out: a scripted turn as a whole ``GenerateContentResponse`` or as its
``alt=sse`` events.

Strategy: a :class:`~conformance.wires._script.ScriptedTurn` is played in the current
(Gemini 3) shape:

- A ``functionCall`` part carries ``id``, ``name`` and ``args`` (a JSON *object*,
  never a string); its ``thoughtSignature`` is a sibling on the same part. In a turn
  of parallel calls only the first call carries one
  (https://ai.google.dev/gemini-api/docs/thought-signatures, "Parallel function
  calls"). Where a script signs no call of a turn whose calls have ids, the first
  call gets a signature derived from the turn's seed, since Gemini 3 signs every
  step; a call scripted without an id is a Gemini 2.x call and is signed only as the
  script says.
- Calls arrive whole, never as argument fragments (``partialArgs`` is Vertex only),
  so a stream cannot interleave them: each call rides one event of its own, and
  ``ScriptedCall.fragments`` and ``ScriptedTurn.interleave`` change nothing.
- A call whose arguments are not a JSON object is what Gemini answers as
  ``finishReason: "MALFORMED_FUNCTION_CALL"`` with no call at all.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...contract import Reasoning, ReasoningKind
from .._chunks import split_text
from .._ids import provider_id
from .._script import TurnEvents
from ._replies import GEMINI, Dialect, is_base64, pretty_json, sse_json, text_part

if TYPE_CHECKING:
    from ...provider.replies import JsonReply
    from .._script import ScriptedCall, ScriptedTurn

__all__ = [
    "MALFORMED_CALL",
    "TURN_FINISH",
    "call_parts",
    "malformed_message",
    "reasoning_parts",
    "splice_arguments",
    "turn_events",
    "turn_response",
    "turn_signature",
]

#: The contract's finish reason -> Gemini's ``finishReason``; a tool turn says STOP.
TURN_FINISH: Mapping[str, str] = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "error": "OTHER",
}
MALFORMED_CALL = "MALFORMED_FUNCTION_CALL"
#: The reasoning kinds a Gemini turn can carry: a thought (with or without its
#: text) and its signature. ``thinking`` uses the same two fields.
_TURN_KINDS = frozenset({ReasoningKind.THOUGHT_SIGNATURE.value, ReasoningKind.THINKING.value})


def turn_signature(seed: str) -> str:
    """The base64 ``thoughtSignature`` Gemini 3 would put on a turn's first call, from its seed."""
    digest = hashlib.sha256(f"gemini/thought-signature/{seed}".encode()).digest()
    return base64.b64encode(digest * 2).decode("ascii")


def _kind(item: Reasoning) -> str:
    return item.kind.value if isinstance(item.kind, ReasoningKind) else str(item.kind)


def reasoning_parts(items: Sequence[Reasoning], pieces: int = 1) -> List[List[Dict[str, Any]]]:
    """Each reasoning item as the parts that carry it, cut in up to ``pieces`` for a stream.

    A thought with text is ``{"text", "thought": true}`` parts, the last one carrying
    the ``thoughtSignature``; a bare signature is ``{"text": "", "thoughtSignature"}``,
    as Gemini closes a turn it signs.
    """
    out: List[List[Dict[str, Any]]] = []
    for item in items:
        if _kind(item) not in _TURN_KINDS:
            raise ValueError(
                f"a Gemini turn carries reasoning as thought_signature (or thinking) items, got "
                f"{_kind(item)!r}; script Reasoning(ReasoningKind.THOUGHT_SIGNATURE, text=..., signature=...)"
            )
        _check_signature(item.signature)
        if not item.text and not item.signature:
            raise ValueError("a Gemini reasoning item needs its thought's text, its signature or both")
        if not item.text:
            out.append([{"text": "", "thoughtSignature": item.signature}])
            continue
        parts: List[Dict[str, Any]] = [
            {"text": piece, "thought": True} for piece in split_text(item.text, pieces)
        ]
        if item.signature:
            parts[-1]["thoughtSignature"] = item.signature
        out.append(parts)
    return out


def _check_signature(signature: str) -> None:
    if signature and not is_base64(signature):
        raise ValueError(
            f"a Gemini thoughtSignature is base64 (google-genai refuses a reply with any other), "
            f"got {signature!r:.60}; script one such as base64.b64encode(b'...').decode()"
        )


def _arguments_object(call: ScriptedCall) -> bool:
    try:
        return isinstance(json.loads(call.arguments), dict)
    except ValueError:
        return False


def call_parts(turn: ScriptedTurn) -> Optional[List[Dict[str, Any]]]:
    """The ``functionCall`` parts of ``turn``, ``args`` as a mark :func:`splice_arguments` fills.

    ``None`` where a call's arguments are not a JSON object: Gemini answers such a
    turn with ``MALFORMED_FUNCTION_CALL`` and no call.
    """
    if not all(_arguments_object(call) for call in turn.calls):
        return None
    signed = any(r.signature for call in turn.calls for r in call.reasoning)
    parts = []
    for position, call in enumerate(turn.calls):
        # The real key order: name, args, then the id.
        body: Dict[str, Any] = {"name": call.name, "args": _mark(position)}
        if call.id:
            body["id"] = call.id
        part: Dict[str, Any] = {"functionCall": body}
        signature = next((r.signature for r in call.reasoning if r.signature), "")
        _check_signature(signature)
        if not signature and not signed and position == 0 and call.id:
            signature = turn_signature(turn.seed)
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)
    return parts


def malformed_message(turn: ScriptedTurn) -> str:
    """The ``finishMessage`` of a turn whose call Gemini could not produce as a JSON object."""
    bad = [c for c in turn.calls if not _arguments_object(c)] or list(turn.calls)
    return (
        f"Malformed function call: {bad[0].name}({bad[0].arguments})" if bad else "Malformed function call."
    )


def _mark(position: int) -> str:
    return f"\x00conformance-arguments-{position}\x00"


def splice_arguments(text: str, turn: ScriptedTurn) -> str:
    """``text`` (JSON) with each call's mark replaced by its arguments, byte for byte as scripted.

    The arguments go out exactly as the script wrote them, escapes included, rather
    than re-encoded, so that a ``\\uXXXX`` pair or a multi-byte character reaches
    the client as the script meant it.
    """
    for position, call in enumerate(turn.calls):
        text = text.replace(json.dumps(_mark(position)), call.arguments)
    return text


def _signature_last(turn: ScriptedTurn) -> Tuple[Tuple[Reasoning, ...], Tuple[Reasoning, ...]]:
    """The turn's reasoning that comes before its text, and the bare signatures that come after.

    Gemini 3 signs a text answer (no calls) on its last part: a whole reply puts the
    ``thoughtSignature`` on the text part itself, a stream sends it in one last event
    with an empty text part (vercel/ai packages/google/src/__fixtures__/
    google-reasoning-gemini3.json and google-reasoning-gemini3.chunks.txt). Thoughts,
    and every signature of a turn with calls, come first.
    """
    if turn.calls or not turn.text:
        return tuple(turn.reasoning), ()
    bare = tuple(r for r in turn.reasoning if r.signature and not r.text)
    return tuple(r for r in turn.reasoning if r not in bare), bare


def _turn_finish(turn: ScriptedTurn) -> str:
    reason = turn.finish_reason
    if reason not in TURN_FINISH:
        raise ValueError(f"a Gemini turn cannot finish {reason!r}; script one of {sorted(TURN_FINISH)!r}")
    return TURN_FINISH[reason]


def _turn_body(
    model: str, turn: ScriptedTurn, one: Dict[str, Any], final: bool, dialect: Dialect, step: int = 1
) -> Dict[str, Any]:
    body = dialect.response(model, [one], final, usage=dialect.usage(final, step=step))
    body["responseId"] = provider_id("", f"gemini/response/{turn.seed}", 23)
    return body


def turn_response(turn: ScriptedTurn, model: str, dialect: Dialect = GEMINI) -> JsonReply:
    """The whole ``GenerateContentResponse`` for ``turn``: thoughts, text, then the calls.

    The arguments go out as scripted (see :func:`splice_arguments`);
    a call whose arguments are not a JSON object makes the turn
    ``MALFORMED_FUNCTION_CALL``, as Gemini answers one.
    """
    calls = call_parts(turn)
    if calls is None:
        body = _turn_body(model, turn, dialect.candidate(None, MALFORMED_CALL), True, dialect)
        body["candidates"][0]["finishMessage"] = malformed_message(turn)
    else:
        leading, trailing = _signature_last(turn)
        parts = [p for item in reasoning_parts(leading) for p in item]
        if turn.text:
            parts.append(text_part(turn.text))
        for number, item in enumerate(trailing):
            if number == 0:
                parts[-1]["thoughtSignature"] = item.signature
            else:
                parts.extend(reasoning_parts((item,))[0])
        parts.extend(calls)
        body = _turn_body(model, turn, dialect.candidate(parts, _turn_finish(turn)), True, dialect)
    text = splice_arguments(pretty_json(body).decode("utf-8"), turn)
    return dialect.whole(text.encode("utf-8"))


def turn_events(turn: ScriptedTurn, model: str, dialect: Dialect = GEMINI) -> TurnEvents:
    """``turn`` as ``alt=sse`` events: thought pieces, text pieces, one event per call, then the finish.

    Gemini sends every call whole, one ``functionCall`` part with its ``args``
    object (research notes: "Function calls arrive whole"; ``partialArgs`` is
    Vertex only), so the calls cannot interleave and each one's first and last
    argument event is the same event. The thought signature of a thought rides
    its last piece; a call's rides the call's own part. Where ``dialect`` signs the
    answer's last text piece itself (Vertex AI), a lone bare signature after the text
    goes there, with the finish, rather than in an event of its own.
    """

    bodies: List[Dict[str, Any]] = []
    arguments: Dict[int, Tuple[int, int]] = {}

    def event(parts: Optional[List[Dict[str, Any]]], finish: Optional[str] = None) -> None:
        one = dialect.candidate(parts, finish)
        bodies.append(_turn_body(model, turn, one, finish is not None, dialect, len(bodies) + 1))

    leading, trailing = _signature_last(turn)
    for item in reasoning_parts(leading, pieces=2):
        for part in item:
            event([part])
    texts = split_text(turn.text, 4)
    calls = call_parts(turn)
    if calls is None:
        for piece in texts:
            event([text_part(piece)])
        event(None, MALFORMED_CALL)
        bodies[-1]["candidates"][0]["finishMessage"] = malformed_message(turn)
        arguments = {position: (len(bodies) - 1, len(bodies) - 1) for position in range(len(turn.calls))}
    else:
        finish = _turn_finish(turn)
        on_text = dialect.signs_last_text and texts and not calls and len(trailing) == 1
        for number, piece in enumerate(texts):
            last = number == len(texts) - 1 and not calls and (not trailing or on_text)
            part = text_part(piece)
            if last and on_text:
                part["thoughtSignature"] = trailing[0].signature
            event([part], finish if last else None)
        if on_text:
            trailing = ()
        for number, item in enumerate(reasoning_parts(trailing)):
            # Gemini 3 signs a text answer in one last event, an empty text part
            # that carries the signature and the finish.
            event(item, finish if number == len(trailing) - 1 else None)
        for position, part in enumerate(calls):
            arguments[position] = (len(bodies), len(bodies))
            event([part])
        if calls or not texts:
            # Gemini 3 closes a tool turn with an event that only says STOP.
            event([text_part("")], finish)
    events = [f"data: {splice_arguments(sse_json(body), turn)}\r\n\r\n".encode() for body in bodies]
    return TurnEvents(events, "text/event-stream", dialect.headers(stream=True), arguments)
