"""The ``corrupt-arguments`` scenario: a finished call whose argument text is not JSON.

Strategy: the model writes ``get_weather``'s arguments as broken JSON on a turn that
ends normally (``tool_calls``, ``tool_use``, ``completed``), and a backend must hand
the call on with that text, byte for byte, in ``ToolCall.unparsed_arguments``. The
turn is played from the wire's scripted turns (``_turns``), as the gate's own
corrupt-arguments stage is, so each wire only renders it: OpenAI Chat and Responses
carry arguments as text in both forms, Anthropic and Bedrock only in a stream (a
whole reply's ``input`` is a JSON object), Gemini and Ollama never
(:attr:`~conformance.wires.Wire.argument_text_absent` says why, per form). Each
shape of broken text is a :class:`~conformance.wires.Variant` of its own; a wire
lists them with the sources that show such text reaching clients, and a wire of
one's own that scripts turns gets :data:`DEFAULT_VARIANTS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Tuple

from ..fixture import CONFORMANCE_FIXTURE as FX
from ._script import ScriptedCall, ScriptedTurn
from ._turns import play_turn
from ._variants import UNPARSED_VARIANTS, Variant

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest, Reply
    from ._base import Wire

__all__ = [
    "CORRUPT_ARGUMENTS",
    "DEFAULT_VARIANTS",
    "UNPARSED_TEXTS",
    "corrupt_call",
    "corrupt_reply",
    "unparsed_text",
]

#: The scenario's name.
CORRUPT_ARGUMENTS = "corrupt-arguments"

#: Each variant's argument text, in the fragments a stream sends it in (they join to it).
UNPARSED_TEXTS: Mapping[str, Tuple[str, ...]] = {
    # The model stopped writing inside the unit's string, the object left open: a
    # partial-JSON parser closes it into a plausible call.
    "unterminated-string": ('{"city": ', '"Paris", "unit"', ': "celsius'),
    # A whole object, then one closing brace too many: a parser that takes the first
    # value and ignores the rest makes a plausible call of it.
    "trailing-garbage": ('{"city": "Paris", ', '"unit": "celsius"', "}}"),
}


#: The variants a wire of one's own that scripts turns plays.
DEFAULT_VARIANTS: Tuple[Variant, ...] = UNPARSED_VARIANTS


def unparsed_text(variant: str) -> str:
    """The argument text the provider sends in ``variant`` (the first where it is unnamed)."""
    return "".join(UNPARSED_TEXTS.get(variant) or next(iter(UNPARSED_TEXTS.values())))


def corrupt_call(wire: Wire, variant: str) -> ScriptedCall:
    """The ``get_weather`` call the scripted model makes in ``variant``."""
    fragments = UNPARSED_TEXTS.get(variant) or next(iter(UNPARSED_TEXTS.values()))
    call_id = wire.scripted_call_id(FX.tool_name, f"{wire.name}/{CORRUPT_ARGUMENTS}/{variant}")
    return ScriptedCall(call_id, FX.tool_name, "".join(fragments), fragments)


def corrupt_reply(wire: Wire, request: RecordedRequest, variant: str) -> Optional[Reply]:
    """The provider's answer: the turn with the broken call, whole or streamed as asked.

    ``None`` where the wire scripts no turns, or where the form the request asked for
    cannot carry argument text (:attr:`~conformance.wires.Wire.argument_text_absent`).
    """
    if not wire.scripts_turns():
        return None
    form = "stream" if wire.wants_stream(request) else "chat"
    if form in wire.argument_text_absent:
        return None
    turn = ScriptedTurn(calls=(corrupt_call(wire, variant),), seed=f"{CORRUPT_ARGUMENTS}/{variant}")
    return play_turn(wire, turn, request)
