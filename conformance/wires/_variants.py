"""A variant, one real shape of a scenario, and the shapes several wires share.

Strategy: a case runs every variant of its scenario, each with its source (a capture,
or the provider's own source or docs). The shapes every provider has in common are
made here once: ``stream-cut`` (a connection that dies mid-answer, in each form) and
``corrupt-arguments`` (a finished call whose argument text is not JSON), so a wire
only names its own terminal event and sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Optional, Tuple

if TYPE_CHECKING:
    from typing import Protocol

    from ..contract import Reasoning

    class _Named(Protocol):
        """What a variant reads of its wire: the name (a :class:`~conformance.wires.Wire` is one).

        Only for the type checker: a Protocol class costs a test module's import a millisecond.
        """

        name: str


__all__ = [
    "AFTER_FINISH",
    "BY_LENGTH",
    "CLEAN_ENDS",
    "CONTEXT_OVERFLOW_OR_BAD_REQUEST",
    "CUT_KINDS",
    "EitherRule",
    "REASONING_THEN_CALL",
    "REQUEST_CONDITIONS",
    "SOURCE_KINDS",
    "UNPARSED_VARIANTS",
    "Variant",
    "reasoning_then_call",
    "stream_cut_variants",
]

#: What a variant's ``source`` is, and so how far it can be trusted: the bytes of a real
#: exchange, a raw body a user quoted, what the provider documents, or the provider's own
#: code. A shape only a client's code expects is none of these, and is no variant.
SOURCE_KINDS: Dict[str, str] = {
    "capture": "a recorded exchange with the provider (a cassette, fixture or traffic log)",
    "issue": "a raw body or header dump quoted in an issue thread",
    "docs": "the provider's own documentation",
    "provider-source": "the provider's own source code",
}


#: What a request carries that makes a provider send some shapes, by the name a variant
#: gives in ``asks``, and the words the skip reason and the wire pages use for it.
REQUEST_CONDITIONS: Dict[str, str] = {
    "server-tool": "a server tool (web search, web fetch or code execution in tools)",
    "fine-grained-tool-streaming": (
        "fine-grained tool streaming (eager_input_streaming on a tool, or the "
        "fine-grained-tool-streaming beta)"
    ),
    "thinking": (
        "thinking (Anthropic's thinking enabled or adaptive, Gemini's "
        "thinkingConfig.includeThoughts, Ollama's think; ChatRequest.thinking asks)"
    ),
}


@dataclass(frozen=True)
class EitherRule:
    """Two sound readings of one shape: a reply ending with one of ``finish_reasons``, or an
    error of one of ``error_kinds`` (with that kind's own code and ``retryable``).

    Azure's 400 for a prompt its filter refused (``code: "content_filter"``) is a request
    the provider refused, so a non-retryable ``invalid_request``, and a content filter, so
    a reply that ends ``content_filter``: a backend may report either, and no other error.
    """

    error_kinds: Tuple[str, ...]
    finish_reasons: Tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.error_kinds or not self.finish_reasons:
            raise ValueError("an EitherRule names at least one error kind and one finish reason")


@dataclass(frozen=True)
class Variant:
    """One real shape a provider answers a scenario with, and where it was seen.

    A case runs every variant of its scenario, each on a fresh provider, because a
    backend that handles one real shape of a failure and not another passes a
    single-shape test and breaks in production. What the backend must report that
    depends on the shape lives here, so the checks read it rather than the wire:
    ``retry_after``, the delay the reply carries (``None`` where it carries none),
    the tool call's ``call_id`` (``None`` where the provider sends none), and an
    ``error_kind`` where the shape means another kind than the scenario's own.

    ``error_kinds`` is the set of kinds a careful client can derive from the shape's
    machine-readable fields (type, code, status, event), where they allow more than
    one: OpenAI's in-stream ``server_error`` whose code is null, which only its
    message calls an overload, is ``("overloaded", "server_error")``; Anthropic's 400
    ``invalid_request_error`` that only its message calls a quota is ``("quota",
    "invalid_request")``, the second a bad request (code ``LLM_INVALID_REQUEST``, not
    retryable). A verdict never rests on a message's wording. Empty, the one kind is
    ``error_kind``, else the scenario's own. A ``stream-cut`` shape names the kinds a
    careful client derives from a cut that carries no status (:data:`CUT_KINDS`), or
    others where its bytes allow another reading.
    """

    #: Short, for skip keys and failure lines: ``credit-balance-400``. The empty name
    #: is the one shape of a scenario that has only one, and is not shown.
    name: str
    #: What the shape is, in a few words: ``400 credit balance too low``.
    title: str = ""
    #: Where it was seen: a capture, or the provider's own source or docs (repo and path, or URL).
    source: str = ""
    retry_after: Optional[float] = None
    call_id: Optional[str] = None
    error_kind: Optional[str] = None
    #: The reasoning the provider returns with its answer in this shape (a ``reasoning``
    #: variant), which the backend must pass on unaltered.
    reasoning: Tuple[Reasoning, ...] = ()
    error_kinds: Tuple[str, ...] = ()
    #: What ``source`` is, one of :data:`SOURCE_KINDS`: ``capture``, ``issue``, ``docs``
    #: or ``provider-source``; empty only on a wire of one's own that does not say.
    source_kind: str = ""
    #: Whether this shape reports usage in a stream that did not ask for it (Mistral's and
    #: Groq's streams always do), where the wire's own shape reports it only when asked.
    usage_unasked: bool = False
    #: What the backend must do with this shape, in words, where its scenario's rule
    #: does not fit it; the fields below say it to the checks, which read them only as
    #: the one rule ``conformance._checks._rule.rule_of`` makes of them and the scenario.
    must: str = ""
    #: The finish reasons the backend may report for this shape, where they are not its
    #: scenario's: a turn the model ended in error is ``("error",)``.
    finish_reasons: Tuple[str, ...] = ()
    #: The text this shape carries, where it is not the wire's text for its scenario:
    #: ``""`` where the provider sent none at all.
    text: Optional[str] = None
    #: Whether the backend may fail on this shape instead of replying, with an error of
    #: any of the contract's kinds: where the bytes end the turn with nothing a caller
    #: can use and name no failure, a reply and an error are both sound readings.
    may_fail: bool = False
    #: A function the request never declared that this shape calls: the backend may
    #: pass the call on as sent or drop it, but its turn is no tool turn, or a loop
    #: would run a tool nobody offered.
    undeclared_call: str = ""
    #: Whether this shape reports token counts, where its scenario's do: a prompt refused
    #: before the model ran counts nothing, and the backend must report no usage.
    reports_usage: bool = True
    #: What the request must carry for the provider to send this shape at all, one of
    #: :data:`REQUEST_CONDITIONS` (``"server-tool"``); empty where any request can get it.
    #: A request that does not carry it never meets the shape, so the case skips it with
    #: the reason "the request did not ask for ...", and the backend is not held to it.
    asks: str = ""
    #: Where the shape has two sound readings, the error kinds a backend may raise instead
    #: of the reply its scenario calls for (:class:`EitherRule`); any other error fails.
    either: Optional[EitherRule] = None

    def __post_init__(self) -> None:
        if self.asks and self.asks not in REQUEST_CONDITIONS:
            known = ", ".join(REQUEST_CONDITIONS)
            raise ValueError(f"variant {self.name!r}: asks {self.asks!r} is none of {known}")
        if self.source_kind and self.source_kind not in SOURCE_KINDS:
            known = ", ".join(SOURCE_KINDS)
            raise ValueError(
                f"variant {self.name!r}: source_kind {self.source_kind!r} is none of {known}; "
                "say whether its source is a capture, an issue's raw body, the provider's docs "
                "or the provider's own code"
            )

    def label(self, wire: _Named) -> str:
        """``anthropic: 400 credit balance too low``."""
        return f"{wire.name}: {self.title or self.name}"

    def accepted_kinds(self, scenario_kind: Optional[str]) -> Tuple[str, ...]:
        """The error kinds a backend may report for this shape; empty where it must not fail.

        ``scenario_kind`` is the scenario's own kind (``None`` for a turn that ends normally).
        """
        if self.error_kinds:
            return self.error_kinds
        kind = self.error_kind or scenario_kind
        return (kind,) if kind is not None else ()


#: The kinds a careful client gives a connection cut before the provider's terminal
#: event, where the cut's bytes say no more: it carries no status and no error type, so
#: nothing tells a server's failure from an overloaded server shedding its connections.
#: A retryable ``server_error`` is the plain reading, and ``overloaded`` is as defensible.
CUT_KINDS: Tuple[str, ...] = ("server_error", "overloaded")

#: What a plain 400 (or a provider's generic validation error) that only its message calls
#: a prompt too long may be reported as: the context overflow its message means, or the
#: bad request its status and type say. Where a field names the overflow (OpenAI's code
#: ``context_length_exceeded``), that field decides, and the one kind stands.
CONTEXT_OVERFLOW_OR_BAD_REQUEST: Tuple[str, ...] = ("context_overflow", "invalid_request")

#: The name of the ``stream-cut`` shape cut after the finish reason, before the terminal event.
AFTER_FINISH = "after-finish-reason"

#: Clients seen taking a close after the finish reason for the end of the turn.
_FINISH_TAKEN_FOR_END = (
    "yologdev/yoagent#77 and esengine/DeepSeek-Reasonix#8756 (a stream closed after its finish "
    "reason, without its terminal event, taken for a finished turn)"
)


#: The ``stream-cut`` shapes whose response ends properly (the chunked encoding's last
#: chunk over HTTP/1.1, ``END_STREAM`` over h2) short of the terminal event, each by the
#: cut whose events it sends: what a gateway sends when its upstream fails and it closes
#: its own response cleanly. No transport error tells the client anything went wrong; only
#: the missing terminal event does.
CLEAN_ENDS: Dict[str, str] = {
    "clean-end": "between-events",
    "clean-end-by-length": "between-events",
    "clean-end-after-finish": AFTER_FINISH,
}

#: The clean ends whose stream is delimited by a ``content-length`` naming the bytes sent
#: (a gateway that buffers its upstream's stream, then sends what it got), not chunked.
BY_LENGTH = frozenset({"clean-end-by-length"})

#: Clients seen taking a stream a proxy ended properly, without its terminal event, for a
#: whole turn, and a proxy seen ending one so.
_CLEAN_END_SEEN = (
    "brightwave-inc/tidebreak#1124 (a stream closed cleanly mid-response, no transport error "
    "and no finish, reported as a normal end of turn); gethnet/litellm-connector-copilot#97 "
    "(a LiteLLM proxy ending a stream without its [DONE])"
)

#: Gateways seen sending an event stream whole, under a Content-Length.
_BY_LENGTH_SEEN = (
    "nginx/nginx#1505 (a reverse proxy that buffers a text/event-stream response, as nginx does "
    "by default); braintrustdata/braintrust-proxy#1124 (a gateway that sent a text/event-stream "
    "response under a Content-Length)"
)

#: How a clean end reaches the client, for titles.
_CLEAN_END_HOW = "the response ended properly (the chunked encoding's last chunk, h2 END_STREAM)"


def stream_cut_variants(
    terminal: str,
    docs: str,
    seen: str,
    whole: str,
    call: str = "a call's first argument fragment",
    after_finish: str = "",
) -> Dict[str, Tuple[Variant, ...]]:
    """The shapes of ``stream-cut`` in each mode, for a provider whose turn ends with ``terminal``.

    ``docs`` is where the provider documents that end, ``seen`` a client's thread about a
    stream cut before it, ``whole`` where it documents the whole reply, ``call`` what of
    a call comes before the cut. A connection that
    dies mid-answer (a proxy's idle timeout, a load balancer draining, a crash) is a
    network failure every provider's clients meet.

    ``after_finish`` is, for a provider whose stream sends its finish reason before its
    terminal event, what a whole tool turn sends from its finish reason on, the cut
    included (``"message_delta with stop_reason tool_use, then the stream cut before
    message_stop"``): the shape :data:`AFTER_FINISH`. Empty where the finish reason
    comes on the terminal event itself, and no stream can be cut between the two.
    """
    source = f"{docs}; {seen}"
    body = (
        f"{whole}; Azure/azure-sdk-for-python#20888 (a client made to raise when the peer "
        "closes before the whole body: a connection that dies mid-body leaves fewer bytes "
        "than its Content-Length)"
    )
    streamed: Tuple[Variant, ...] = (
        Variant(
            "after-text",
            f"text, then the stream cut inside an event, before {terminal}",
            source,
            source_kind="docs",
            error_kinds=CUT_KINDS,
        ),
        Variant(
            "inside-tool-call",
            f"{call}, then the stream cut inside an event, before {terminal}",
            source,
            source_kind="docs",
            error_kinds=CUT_KINDS,
        ),
        Variant(
            "between-events",
            f"text, then the stream cut between two events, before {terminal}",
            source,
            source_kind="docs",
            error_kinds=CUT_KINDS,
        ),
    )
    streamed += (
        Variant(
            "clean-end",
            f"text, then {_CLEAN_END_HOW} before {terminal}, as a gateway ends its own response "
            "when its upstream fails",
            f"{source}; {_CLEAN_END_SEEN}",
            source_kind="docs",
            error_kinds=CUT_KINDS,
        ),
    )
    streamed += (
        Variant(
            "clean-end-by-length",
            f"text, then the response ended at the content-length it named, before {terminal}, as a "
            "gateway that buffers its upstream's stream sends what it got when that upstream fails",
            f"{source}; {_CLEAN_END_SEEN}; {_BY_LENGTH_SEEN}",
            source_kind="docs",
            error_kinds=CUT_KINDS,
        ),
    )
    if after_finish:
        # The finish reason came, the terminal event did not: the turn is not over (its
        # last event, and on some wires its usage, never came), so this is a cut like
        # the others, and a backend that ends the turn at the finish reason fails it.
        streamed += (
            Variant(
                AFTER_FINISH,
                f"a whole tool call, then {after_finish} (the finish reason came, the terminal "
                "event did not)",
                f"{source}; {_FINISH_TAKEN_FOR_END}",
                source_kind="docs",
                error_kinds=CUT_KINDS,
            ),
            Variant(
                "clean-end-after-finish",
                f"a whole tool call and its finish reason, then {_CLEAN_END_HOW} before {terminal}, "
                "as a gateway ends its own response when its upstream fails",
                f"{source}; {_FINISH_TAKEN_FOR_END}; {_CLEAN_END_SEEN}",
                source_kind="docs",
                error_kinds=CUT_KINDS,
            ),
        )
    return {
        "stream-cut/stream": streamed,
        "stream-cut/chat": (
            Variant(
                "text-body",
                "a text reply's body cut short inside the text",
                body,
                source_kind="docs",
                error_kinds=CUT_KINDS,
            ),
            Variant(
                "tool-call-body",
                "a tool call reply's body cut short inside the arguments",
                body,
                source_kind="docs",
                error_kinds=CUT_KINDS,
            ),
        ),
    }


#: The ``corrupt-arguments`` variants a wire of one's own that scripts turns plays (the
#: argument texts are ``_unparsed.UNPARSED_TEXTS``).
UNPARSED_VARIANTS: Tuple[Variant, ...] = (
    Variant(
        "unterminated-string",
        "arguments ending inside a string, the object left open",
        "the provider's API reference: the model does not always write valid JSON",
        source_kind="docs",
    ),
    Variant(
        "trailing-garbage",
        "a whole object, then a closing brace too many",
        "the provider's API reference: the model does not always write valid JSON",
        source_kind="docs",
    ),
)


#: The name of the ``tool-result`` shape whose earlier turn carries reasoning before its call.
REASONING_THEN_CALL = "reasoning-then-call"


def reasoning_then_call(
    title: str, source: str, reasoning: Tuple[Reasoning, ...], echoed: bool = True, asks: str = "thinking"
) -> Variant:
    """The ``tool-result`` shape whose earlier turn is ``title``: ``reasoning``, then the call.

    The case asks for thinking on both turns, as the ``reasoning`` case does; ``asks`` is
    empty where the provider sends the reasoning whatever the request says (a reasoning
    model's reasoning items), as that wire's ``reasoning`` shapes say. The backend must
    return the reasoning with the call (``ChatResponse.reasoning``, ``StreamChunk.reasoning``)
    and, where ``echoed`` (the provider needs it back), send it back with the call on the
    next turn, byte for byte. ``source`` is the provider's docs.
    """
    back = (
        "and send it back with the call on the next turn, byte for byte"
        if echoed
        else "(the provider takes the turn back without it, but never the call without its own signature)"
    )
    return Variant(
        REASONING_THEN_CALL,
        title,
        source,
        reasoning=reasoning,
        source_kind="docs",
        asks=asks,
        must=(
            "ask for thinking (ChatRequest.thinking), return the reasoning the provider sent before "
            f"the get_weather call with that call's turn, whole and unaltered{',' if echoed else ''} {back}"
        ),
    )
