"""The replies that carry out a fault: a stream cut at an event, no response, a 429, no reply.

Strategy: each fault is a name in :data:`FAULT_REPLIES` and one small function of the
wire, the turn the model would have answered with, its stream events (``None`` for a
whole reply) and the request. A stream is cut where the events say, never at a byte
count: after the event that carried a call's first or last argument fragment, or
inside the bytes of the first; the chunks before the cut go out as TCP would cut
them, then the stream ends by a clean close or a reset. The 429 is the wire's own
``rate-limit`` reply with its delay made short, in the form the provider gives it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, Mapping, Optional

from ..provider.replies import DropReply, HangReply, JsonReply, Reply, StreamReply

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest
    from ..wires._base import Wire
    from ..wires._turns import ScriptedTurn, TurnEvents

__all__ = [
    "CUTS",
    "FAULT_REPLIES",
    "RATE_LIMIT_RETRY_AFTER",
    "asked_delay",
    "delaying_variant",
    "fault_reply",
    "rate_limit_reply",
    "scripting_wire",
    "with_delay",
]

#: The faults that cut the model's turn short: its calls never completed.
CUTS: FrozenSet[str] = frozenset(
    f"{end}-{where}" for end in ("close", "reset") for where in ("after-first", "after-last", "mid-event")
)

#: How long a cut stream waits after its last chunk before it breaks.
CUT_AFTER = 0.05

#: The delay the mid-conversation 429 asks for, in the wire's own form. Here, a floor
#: below the fault stages that name it in their text, since the reply is what asks.
RATE_LIMIT_RETRY_AFTER = 0.2

FaultReply = Callable[["Wire", "ScriptedTurn", Optional["TurnEvents"], "RecordedRequest"], Optional[Reply]]


def _cut(where: str, end: str) -> FaultReply:
    def reply(
        wire: Wire, turn: ScriptedTurn, played: Optional[TurnEvents], request: RecordedRequest
    ) -> Optional[Reply]:
        from ..wires._base import tcp_chunks

        if played is None:
            return None  # a stream fault: the stage runs in stream mode only
        first, last = played.arguments.get(0, (-1, -1))
        if first < 0:
            return None
        events: List[bytes] = list(played.events)
        if where == "after-first":
            head = events[: first + 1]
        elif where == "after-last":
            head = events[: last + 1]
        else:  # inside the first argument event: half of it goes out
            event = events[first]
            head = events[:first] + [event[: len(event) // 2]]
        chunks = tcp_chunks(head, f"{wire.name}/{turn.seed}/cut")
        # The break waits a moment after the last chunk, so that the client has read what
        # came before it: a reset discards what the client's socket had not yet handed on.
        return StreamReply(
            chunks,
            content_type=played.content_type,
            headers=dict(played.headers),
            end=end,
            pauses={len(chunks): CUT_AFTER},
        )

    return reply


def _drop(end: str) -> FaultReply:
    def reply(
        wire: Wire, turn: ScriptedTurn, played: Optional[TurnEvents], request: RecordedRequest
    ) -> Optional[Reply]:
        return DropReply(end)

    return reply


def _hang(
    wire: Wire, turn: ScriptedTurn, played: Optional[TurnEvents], request: RecordedRequest
) -> Optional[Reply]:
    return HangReply()


def _rate_limit(
    wire: Wire, turn: ScriptedTurn, played: Optional[TurnEvents], request: RecordedRequest
) -> Optional[Reply]:
    return rate_limit_reply(wire, request, RATE_LIMIT_RETRY_AFTER)


#: Every fault by name: what the provider answers the request a script marked.
FAULT_REPLIES: Mapping[str, FaultReply] = {
    **{
        f"{end}-{where}": _cut(where, end)
        for end in ("close", "reset")
        for where in ("after-first", "after-last", "mid-event")
    },
    "drop-close": _drop("close"),
    "drop-reset": _drop("reset"),
    "rate-limit": _rate_limit,
    "hang": _hang,
}


def fault_reply(
    fault: str, wire: Wire, turn: ScriptedTurn, played: Optional[TurnEvents], request: RecordedRequest
) -> Reply:
    """The reply carrying out ``fault``; an :class:`AssertionError` where the wire cannot."""
    reply = FAULT_REPLIES[fault](wire, turn, played, request)
    assert reply is not None, f"{wire.name} cannot carry out the fault {fault!r} on {request}"
    return reply


_DELAY = re.compile(rb'("retryDelay"\s*:\s*")[0-9.]+s(")')


def scripting_wire(wire: Wire) -> Wire:
    """The wire that plays the gate's scripted turns and faults on ``wire``: itself, or, for a
    replay, the wire its recordings were made with (a recording holds one conversation, not
    the 429 a fault stage asks for, and the replay plays the scripted stages through it too)."""
    from .replay import ReplayWire

    return wire.base if isinstance(wire, ReplayWire) else wire


def rate_limit_reply(wire: Wire, request: RecordedRequest, seconds: float) -> Optional[Reply]:
    """``wire``'s own 429 for ``request``, asking for ``seconds`` instead of its usual delay.

    Of the shapes the provider answers a rate limit in, the first that asks for a
    delay (:func:`delaying_variant`), so that a loop has a delay to honour wherever
    the provider has a form for one. The delay is rewritten in that form:
    ``retry-after`` (seconds, fractional as OpenAI's and Anthropic's SDKs read it),
    ``retry-after-ms``, and Gemini's ``RetryInfo.retryDelay`` (``"0.2s"``). A provider
    none of whose 429s asks for a delay (Bedrock) still sends none. ``None`` where the
    wire has no rate-limit reply.
    """
    wire = scripting_wire(wire)
    mode = "stream" if wire.wants_stream(request) else "chat"
    reply = wire.reply("rate-limit", mode, request, delaying_variant(wire, mode, request))
    if not isinstance(reply, JsonReply):
        return None
    return with_delay(reply, seconds)


def with_delay(reply: JsonReply, seconds: float) -> JsonReply:
    """``reply`` asking for ``seconds`` wherever it asks for a delay, in the form it asks in:
    ``retry-after`` (seconds, fractional as OpenAI's and Anthropic's SDKs read it),
    ``retry-after-ms``, and Gemini's ``RetryInfo.retryDelay`` (``"0.2s"``); a reply that
    asks for none is sent as it is."""
    headers: Dict[str, str] = {}
    for name, value in (reply.headers or {}).items():
        lower = name.lower()
        if lower == "retry-after":
            value = f"{seconds:g}"
        elif lower == "retry-after-ms":
            value = str(int(round(seconds * 1000)))
        headers[name] = value
    body: Any = reply.body
    delay = f"{seconds:g}".encode()
    if isinstance(body, (bytes, bytearray)):
        body = _DELAY.sub(rb"\g<1>" + delay + rb"s\g<2>", bytes(body))
    else:
        body = _shorten(body, f"{seconds:g}s")
    return dataclasses.replace(reply, body=body, headers=headers)


def delaying_variant(wire: Wire, mode: str, request: RecordedRequest) -> str:
    """The name of ``wire``'s first rate-limit shape in ``mode`` whose 429 asks for a delay; the
    first shape's where none does."""
    variants = wire.variants("rate-limit", mode)
    for variant in variants:
        reply = wire.reply("rate-limit", mode, request, variant.name)
        if reply is not None and asked_delay(reply) is not None:
            return variant.name
    return variants[0].name if variants else ""


def _shorten(value: Any, delay: str) -> Any:
    """``value`` with every ``retryDelay`` set to ``delay``."""
    if isinstance(value, dict):
        return {k: delay if k == "retryDelay" else _shorten(v, delay) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v, delay) for v in value]
    return value


def asked_delay(reply: Reply) -> Optional[float]:
    """The retry delay a 429 asks for, in seconds (``retry-after-ms``, ``retry-after``, Gemini's
    ``RetryInfo.retryDelay``), or ``None`` where it asks for none (Bedrock)."""
    if not isinstance(reply, JsonReply):
        return None
    headers = {k.lower(): v for k, v in (reply.headers or {}).items()}
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except ValueError:
        return None
    body = reply.body
    text = bytes(body) if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
    match = _DELAY_VALUE.search(text)
    return float(match.group(1)) if match else None


_DELAY_VALUE = re.compile(rb'"retryDelay"\s*:\s*"([0-9.]+)s"')
