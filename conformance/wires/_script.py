"""The data of a scripted conversation, provider-neutral: the turns a scripted model plays
(:class:`ScriptedTurn`, :class:`ScriptedCall`), a streamed turn's events
(:class:`TurnEvents`) and the history a loop sent back (:class:`History`).

Strategy: these are plain frozen dataclasses and pure functions, below every wire and
below :class:`~conformance.wires.Wire` itself, so that the wires, the cases and the gate
all speak of one conversation in the same terms; ``_turns`` plays them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Sequence, Tuple

from ..contract import Message, Reasoning, ToolChoice
from ._chunks import split_text

__all__ = [
    "History",
    "ScriptedCall",
    "ScriptedTurn",
    "TurnEvents",
    "first_problem",
    "normal_roles",
    "reasoning_key",
    "split_text",
]


@dataclass(frozen=True)
class ScriptedCall:
    """One tool call the scripted model makes.

    ``arguments`` is the JSON text exactly as the provider would send it (it may be
    corrupt on purpose). ``fragments``, when given, are the pieces a stream sends it in
    (they join to ``arguments``); empty, the wire cuts it its own way. A wire whose
    provider sends the arguments whole (Gemini, Ollama) ignores ``fragments``, and one
    whose provider sends no call id (Ollama) ignores ``id``. ``reasoning`` is what the
    provider ties to this call (Gemini's ``thoughtSignature`` on the ``functionCall``
    part).
    """

    id: str
    name: str
    arguments: str
    fragments: Tuple[str, ...] = ()
    reasoning: Tuple[Reasoning, ...] = ()

    def __post_init__(self) -> None:
        if self.fragments and "".join(self.fragments) != self.arguments:
            raise ValueError(
                f"the fragments of call {self.id} join to {''.join(self.fragments)!r}, "
                f"not to its arguments {self.arguments!r}"
            )

    def pieces(self, default: int = 4) -> Tuple[str, ...]:
        """The argument fragments a stream sends: the given ones, or ``default`` equal parts."""
        return self.fragments or split_text(self.arguments, default)


@dataclass(frozen=True)
class ScriptedTurn:
    """One assistant turn the scripted model answers with, provider-neutral.

    A wire emits it in the provider's order: ``reasoning`` first, then ``text``, then
    the ``calls``. ``finish`` is the contract's finish reason (``"stop"``,
    ``"tool_calls"``, ``"length"``); empty, it is ``tool_calls`` when there are calls
    and ``stop`` otherwise, and each wire spells it as its provider does. With
    ``interleave`` a stream sends the calls' argument fragments in turn (call 0's
    first, call 1's first, call 0's second, ...) where the provider's format allows it
    (by ``index``, ``output_index``, content block index, ``contentBlockIndex``); a
    format that cannot interleave sends them one call after the other. ``seed`` makes
    the ids and the transport cuts the same on every run. ``variant`` names the shape
    the wire plays the turn in where it has several (an OpenAI-compatible server's own
    chunks); empty, the provider's own.
    """

    text: str = ""
    calls: Tuple[ScriptedCall, ...] = ()
    reasoning: Tuple[Reasoning, ...] = ()
    finish: str = ""
    interleave: bool = False
    seed: str = "turn"
    variant: str = ""

    @property
    def finish_reason(self) -> str:
        """The contract's finish reason for this turn."""
        if self.finish:
            return self.finish
        return "tool_calls" if self.calls else "stop"


@dataclass(frozen=True)
class TurnEvents:
    """A streamed turn as its events, before transport cuts.

    ``events`` are whole events (an SSE event with its blank line, an NDJSON line, an
    event-stream frame). ``arguments`` maps each call's position in
    :attr:`ScriptedTurn.calls` to the indexes in ``events`` of the event that carried
    its first argument fragment and of the one that carried its last (the same event
    where the provider sends the arguments whole): the protocol events the gate places
    faults and checks at.
    """

    events: List[bytes]
    content_type: str
    headers: Mapping[str, str] = field(default_factory=dict)
    arguments: Mapping[int, Tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class History:
    """The conversation a request carried, read back into the library's normal form.

    ``messages`` is what the backend or loop sent, as :class:`~conformance.Message`
    (system, user, assistant turns with their calls and reasoning, one ``tool``
    message per result, in order; a wire that groups a turn's results in one user
    turn is read back as consecutive tool messages). Where the provider sends no call
    id, a :class:`~conformance.ToolResult` read back carries ``call_id=""`` and is
    correlated by name and order. ``problems`` lists every departure from the
    provider's own format, each one sentence saying what the provider expects and
    what came (a result with no call before it, an unknown role, a missing
    ``tool_call_id``); a history with problems is one the real API refuses.
    """

    messages: Tuple[Message, ...]
    problems: Tuple[str, ...] = ()
    tools: Tuple[str, ...] = ()
    tool_choice: Optional[ToolChoice] = None
    stream: bool = False

    @property
    def results(self) -> Tuple[Message, ...]:
        """The tool messages, in order."""
        return tuple(m for m in self.messages if m.role == "tool")

    @property
    def assistant_turns(self) -> Tuple[Message, ...]:
        """The assistant messages, in order."""
        return tuple(m for m in self.messages if m.role == "assistant")


def _signature_bytes(signature: str) -> object:
    """A Gemini signature as the bytes it encodes: the API's JSON takes a ``bytes`` field in
    standard or URL-safe base64, padded or not, and SDKs that hold it as bytes (google-genai)
    send it back URL-safe and unpadded; the string itself where it is no base64 at all."""
    import binascii

    text = signature.replace("-", "+").replace("_", "/").rstrip("=")
    try:
        return binascii.a2b_base64(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return signature


def reasoning_key(item: Reasoning) -> Tuple[object, ...]:
    """What must come back unaltered of a reasoning item, for comparing what was sent with
    what a backend or loop sent back: every field but ``provider``. A Gemini thought
    signature is compared by the bytes it encodes, as the API reads it; every other
    signature and payload is an opaque string, compared exactly."""
    kind = getattr(item.kind, "value", item.kind)
    signature: object = item.signature
    if kind == "thought_signature" and item.signature:
        signature = _signature_bytes(item.signature)
    return (kind, item.text, signature, item.data, item.id, tuple(item.summary))


def first_problem(problems: Sequence[str]) -> str:
    """The sentence a wire's 400 quotes: the first problem, or a generic one."""
    return problems[0] if problems else "the conversation history is malformed"


def normal_roles(messages: Sequence[Message]) -> List[str]:
    """The roles in order, for a failure message: ``['user', 'assistant', 'tool']``."""
    return [m.role for m in messages]
