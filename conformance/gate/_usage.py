"""The usage a provider reported over one conversation: what ``LoopResult.usage`` is checked against.

Strategy: a turn a shipped wire plays reports the fixture's counts
(``CONFORMANCE_FIXTURE.usage``) in its provider's own fields, wherever that provider
reports usage at all (the backend suite's ``[usage]`` check holds every reference
backend to reading them from the bytes). What each wire's turn reply carries is one
row of :data:`TURN_USAGE`, a function of the request it answers: OpenAI Chat
Completions streams usage only to a request that set
``stream_options.include_usage``. The conversation's usage is then the sum over the
turns the provider answered in full. A request answered with a fault (a 429, a dropped
or unanswered request, a refused history's 400) reported none; a stream cut short
may have sent some of its counts (Anthropic's ``message_start`` carries the input
tokens) and a loop may count them or not, so a conversation with such a cut is not
judged. Nor is one over a wire the table does not know (a wire of one's own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, Optional, Sequence, Tuple

from ..contract import Usage
from ..fixture import CONFORMANCE_FIXTURE

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest
    from ._conversation import Exchange

__all__ = ["TURN_USAGE", "UNJUDGED", "sent_usage", "usage_tuple"]

FX = CONFORMANCE_FIXTURE


def _always(request: RecordedRequest) -> Optional[Usage]:
    return FX.usage


def _openai_chat(request: RecordedRequest) -> Optional[Usage]:
    # A streamed Chat Completion carries usage only in the extra chunk include_usage asks for.
    body = request.json if isinstance(request.json, dict) else {}
    if body.get("stream") is not True:
        return FX.usage
    options = body.get("stream_options")
    return FX.usage if isinstance(options, dict) and options.get("include_usage") is True else None


#: The usage a wire's reply to one turn reports, by wire name: a function of the request.
TURN_USAGE: Dict[str, Callable[[RecordedRequest], Optional[Usage]]] = {
    "openai-chat": _openai_chat,
    # response.completed carries response.usage; a whole Response has it too.
    "openai-responses": _always,
    # Azure serves the same two APIs, with the same usage.
    "azure-openai-chat": _openai_chat,
    "azure-openai-responses": _always,
    # message_start carries input_tokens, message_delta the final output_tokens; the same
    # events on Claude's hosts.
    "anthropic": _always,
    "anthropic-vertex": _always,
    "bedrock-invoke": _always,
    # usageMetadata on every event; the last one's counts are the turn's.
    "gemini": _always,
    "gemini-vertex": _always,
    # prompt_eval_count and eval_count on the final (done) line.
    "ollama": _always,
    # usage in the metadata event (a whole reply's top-level usage).
    "bedrock-converse": _always,
    # usage.tokens in message-end (a whole reply's top-level usage).
    "cohere": _always,
}

#: What :func:`sent_usage` says of a conversation it cannot judge.
UNJUDGED = "unjudged"


def usage_tuple(usage: object) -> Tuple[object, object, object]:
    """``(input_tokens, output_tokens, total_tokens)`` of any usage-shaped object."""
    return (
        getattr(usage, "input_tokens", None),
        getattr(usage, "output_tokens", None),
        getattr(usage, "total_tokens", None),
    )


def sent_usage(wire_name: str, exchanges: Sequence[Exchange], but_last: bool = False) -> Tuple[object, int]:
    """The usage the provider reported over ``exchanges`` and how many turns reported it.

    The first is a :class:`~conformance.Usage` (the sum), ``None`` where no turn
    reported usage, or :data:`UNJUDGED` where the conversation cannot be judged.
    ``but_last`` leaves out the last turn that reported usage: the one a loop that
    stopped at its deadline may have given up on while it was still arriving.
    """
    row = TURN_USAGE.get(wire_name)
    if row is None or any(e.cut for e in exchanges):
        return UNJUDGED, 0
    counts = []
    for exchange in exchanges:
        log = exchange.request.response
        if exchange.turn is None or exchange.fault is not None or exchange.problems:
            continue
        if log is None or log.end != "complete":
            continue  # the turn never went out whole
        usage = row(exchange.request)
        if usage is not None:
            counts.append(usage)
    if but_last:
        counts = counts[:-1]
    if not counts:
        return None, 0
    return (
        Usage(
            sum(u.input_tokens for u in counts),
            sum(u.output_tokens for u in counts),
            sum(u.total_tokens for u in counts),
        ),
        len(counts),
    )
