"""Anthropic's replies: the ``message`` object, and the ``event:``-named SSE stream of one.

Reference: https://docs.anthropic.com/en/api/messages and
https://docs.anthropic.com/en/docs/build-with-claude/streaming. The builders are named
after Anthropic's own objects and events (``message``, ``content_block_start``,
``message_delta``), so checking them against the docs is a grep.

The bytes are api.anthropic.com's as recorded in 2026 (vercel/ai
``packages/anthropic/src/__fixtures__/anthropic-text.json`` and ``.chunks.txt``;
pydantic-ai ``tests/models/cassettes/test_anthropic/*.yaml``, the streams of 2026-05 to
2026-08): a message names its ``model`` first, says ``stop_details: null`` where it has
none, and counts ``cache_creation`` by lifetime and the ``inference_geo`` in its usage;
each streamed event but ``ping`` pads its JSON with up to 15 spaces before the last
brace; and a 200 carries the ``anthropic-ratelimit-*`` headers. A host of the Messages
API keeps its own measured shape (``_hosted``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import cut_events, dumps, split_text, tcp_chunks
from .._ids import fresh_id, http_date, provider_id

if TYPE_CHECKING:
    from ...provider.replies import StreamReply

__all__ = [
    "BASE62",
    "INFERENCE_GEO",
    "INFERENCE_GEO_NOT_AVAILABLE",
    "MESSAGE_ID",
    "OVERLOADED_MESSAGE",
    "REFUSAL_CATEGORY",
    "REFUSAL_OUTPUT_TOKENS",
    "REFUSAL_EXPLANATION",
    "SERVER_TOOL_USE_ID",
    "TOOL_USE_ID",
    "Events",
    "message",
    "padded",
    "ratelimit_headers",
    "refusal_stop_details",
    "refusal_usage",
    "request_id",
    "response_headers",
    "server_tool_use_block",
    "text_block",
    "tool_use_block",
    "tool_use_id",
]

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def tool_use_id(seed: str) -> str:
    """A ``tool_use`` block's id as Anthropic makes one, ``toolu_01`` and 22 base-62
    characters (``toolu_01J9TjuPP5fxXpaFdH7zUe3S``), the same for a seed."""
    return provider_id("toolu_01", seed, 22, BASE62)


MESSAGE_ID = provider_id("msg_01", "anthropic/message", 22, BASE62)
TOOL_USE_ID = tool_use_id("anthropic/tool-use")
#: A server tool's call (web search), which the API runs itself: ``srvtoolu_01`` and 22.
SERVER_TOOL_USE_ID = provider_id("srvtoolu_01", "anthropic/server-tool-use", 22, BASE62)


def request_id() -> str:
    """A fresh ``req_011C…`` id: Anthropic's header and its error bodies carry the same one."""
    return fresh_id("req_011C", 20, BASE62)


#: A refusal's named category and explanation, as the docs show them:
#: https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals
REFUSAL_CATEGORY = "cyber"
REFUSAL_EXPLANATION = "This request was declined because it could enable cyber harm."
OVERLOADED_MESSAGE = "Overloaded"


def response_headers(extra: Optional[Mapping[str, str]] = None, rid: Optional[str] = None) -> Dict[str, str]:
    """The headers every reply carries: ``rid`` is the request id an error body repeats."""
    headers = {
        "date": http_date(),
        "request-id": rid or request_id(),
        "anthropic-organization-id": "1f5d2c8e-6a0b-4c1d-9e3f-7a2b4c6d8e0f",
    }
    headers.update(extra or {})
    return headers


#: Where the model ran, as the newest models' replies say it (claude-sonnet-4-6 and
#: claude-sonnet-5 in pydantic-ai's 2026 streams; older models say ``not_available``).
INFERENCE_GEO = "global"
#: The output tokens of a refusal, which stops after the fixture's partial text (19 characters,
#: 7 tokens as Claude's tokenizer cuts "It is 18 °C and sun"), where the whole text is
#: :data:`CONFORMANCE_FIXTURE.usage`'s 17: the count matches the text streamed before the stop.
REFUSAL_OUTPUT_TOKENS = 7

#: What claude-sonnet-4-5 says instead (pydantic-ai test_request_stream_fallback_for_high_max_tokens.yaml,
#: 2026-03, and test_pause_turn_web_search_streaming_vcr.yaml, 2026-07).
INFERENCE_GEO_NOT_AVAILABLE = "not_available"

#: The rate limits a 200 reports: Tier 4's for a Sonnet model
#: (https://docs.claude.com/en/api/rate-limits), 4000 requests a minute as crewAI's 2026
#: cassettes record it (``anthropic-ratelimit-requests-limit: '4000'``).
#: Each is ``(name, limit, what this request used of it)``: the tokens' remainders are rounded
#: to the thousand (as the docs say), so a turn of a few dozen tokens leaves them whole.
RATE_LIMITS = (
    ("requests", 4000, 1),
    ("input-tokens", 2000000, 0),
    ("output-tokens", 400000, 0),
    ("tokens", 2400000, 0),
)


def ratelimit_headers() -> Dict[str, str]:
    """The ``anthropic-ratelimit-*`` headers every 200 carries: each limit, what is left of
    it, and when it is whole again (RFC 3339, a second from now)."""
    import time

    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
    headers: Dict[str, str] = {}
    for name, limit, used in RATE_LIMITS:
        headers[f"anthropic-ratelimit-{name}-limit"] = str(limit)
        headers[f"anthropic-ratelimit-{name}-remaining"] = str(limit - used)
        headers[f"anthropic-ratelimit-{name}-reset"] = reset
    return headers


def _start_usage(inference_geo: str = INFERENCE_GEO) -> Dict[str, Any]:
    # message_start carries the input side; output_tokens is a placeholder there.
    return {
        "input_tokens": FX.usage.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 1,
        "service_tier": "standard",
        "inference_geo": inference_geo,
    }


def _usage(output_tokens: int = FX.usage.output_tokens) -> Dict[str, Any]:
    return {**_start_usage(), "output_tokens": output_tokens}


def refusal_usage() -> Dict[str, Any]:
    """A refusal's ``usage``: the tokens of the text it stopped after (:data:`REFUSAL_OUTPUT_TOKENS`)."""
    return _usage(REFUSAL_OUTPUT_TOKENS)


# -- whole replies: message ----------------------------------------------------------------


def text_block(text: str) -> Dict[str, Any]:
    """A ``text`` content block."""
    return {"type": "text", "text": text}


def tool_use_block(input_: Mapping[str, Any], id_: str = TOOL_USE_ID) -> Dict[str, Any]:
    """A ``tool_use`` content block: ``input`` is an object, not a JSON string."""
    return {"type": "tool_use", "id": id_, "name": FX.tool_name, "input": dict(input_)}


def server_tool_use_block(input_: Mapping[str, Any]) -> Dict[str, Any]:
    """A ``server_tool_use`` block: a web search the API runs itself, never the client's call."""
    return {"type": "server_tool_use", "id": SERVER_TOOL_USE_ID, "name": "web_search", "input": dict(input_)}


def refusal_stop_details(named: bool = True) -> Dict[str, Any]:
    """The ``stop_details`` of a ``refusal`` stop: a named category, or (``named=False``) none.

    The docs say ``category`` and ``explanation`` are both null where the refusal maps
    to no named category.
    """
    if not named:
        return {"type": "refusal", "category": None, "explanation": None}
    return {"type": "refusal", "category": REFUSAL_CATEGORY, "explanation": REFUSAL_EXPLANATION}


def message(
    model: str,
    content: List[Dict[str, Any]],
    stop_reason: Optional[str],
    usage: Optional[Dict[str, Any]] = None,
    stop_details: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """A ``message`` object, whole or (empty, no stop reason) inside ``message_start``.

    ``stop_details`` is ``null`` but on a ``refusal``, which carries the named category
    unless given another.
    """
    if stop_reason == "refusal":
        stop_details = stop_details or refusal_stop_details()
    return {
        "model": model,
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "stop_details": stop_details if stop_reason == "refusal" else None,
        "usage": usage if usage is not None else _usage(),
    }


def padded(text: str, number: int) -> str:
    """The ``number``-th event's JSON with 0 to 15 spaces before its last brace, as
    api.anthropic.com pads every event but ``ping`` (to hide the token lengths)."""
    return f"{text[:-1]}{' ' * ((5 + 7 * number) % 16)}}}"


# -- streamed replies: the event:-named stream -----------------------------------------------


class Events:
    """Builds the events of one streamed message.

    Each event goes out through :meth:`emit`, and the stream through :meth:`reply`
    with :attr:`content_type` and :meth:`headers`: a host that serves the Messages API
    in a framing of its own (Bedrock's event stream) overrides those, and the builders
    stay the same.
    """

    content_type = "text/event-stream; charset=utf-8"
    #: The id of the one ``tool_use`` block the single-turn scenarios stream.
    tool_use_id = TOOL_USE_ID
    #: Whether each event's JSON is padded (:func:`padded`), as api.anthropic.com's is.
    padded = True
    #: The output tokens ``message_delta`` counts (a refusal's are fewer, :data:`REFUSAL_OUTPUT_TOKENS`).
    output_tokens = FX.usage.output_tokens
    #: ``usage.inference_geo`` in ``message_start``: where the model ran.
    inference_geo = INFERENCE_GEO
    #: Whether ``message_start``'s message and ``message_delta`` say ``stop_details: null``
    #: where there are none (the 2026-07 captures do; claude-sonnet-4-5's of 2026-03 does not).
    null_stop_details = True

    def __init__(self, model: str, message_id: str = MESSAGE_ID) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ...encoders import sse

        self.sse = sse
        self.model = model
        self.message_id = message_id
        self.events: List[bytes] = []
        self.request_id = request_id()
        self.index = 0
        self.pinged = False

    def emit(self, type_: str, **fields: Any) -> None:
        text = dumps({"type": type_, **fields})
        if self.padded:
            text = padded(text, len(self.events))
        self.events.append(self.sse(text, event=type_))

    def message_start(self) -> None:
        start = message(self.model, [], None, _start_usage(self.inference_geo))
        if not self.null_stop_details:
            del start["stop_details"]
        self.emit("message_start", message={**start, "id": self.message_id})

    def ping(self) -> None:
        # Real streams ping after the first content_block_start, not after message_start
        # (79 of 79 in pydantic-ai tests/models/cassettes/test_anthropic).
        if not self.pinged:
            self.pinged = True
            # Spelt with a space after the colon, as real streams send it.
            self.events.append(self.sse('{"type": "ping"}', event="ping"))

    def content_block_start(self, block: Dict[str, Any]) -> None:
        self.emit("content_block_start", index=self.index, content_block=block)
        self.ping()

    def text(self, text: str, pieces: int = 4, stop: bool = True) -> None:
        self.content_block_start(text_block(""))
        for piece in split_text(text, pieces):
            delta = {"type": "text_delta", "text": piece}
            self.emit("content_block_delta", index=self.index, delta=delta)
        if stop:
            self.content_block_stop()

    def tool_use(self, partial_json: str, pieces: int = 4, stop: bool = True) -> None:
        self.content_block_start(tool_use_block({}, self.tool_use_id))
        # Anthropic opens a tool_use block with an empty fragment before the real ones.
        for piece in ["", *split_text(partial_json, pieces)]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            self.emit("content_block_delta", index=self.index, delta=delta)
        if stop:
            self.content_block_stop()

    def content_block_stop(self) -> None:
        self.emit("content_block_stop", index=self.index)
        self.index += 1

    def message_delta(
        self, stop_reason: str, input_tokens: bool = True, stop_details: Optional[Dict[str, Any]] = None
    ) -> None:
        if stop_reason == "refusal":
            stop_details = stop_details or refusal_stop_details()
        else:
            stop_details = None
        delta: Dict[str, Any] = {"stop_reason": stop_reason, "stop_sequence": None}
        if stop_details is not None or self.null_stop_details:
            delta["stop_details"] = stop_details
        self.ping()
        # The newer shape (since about Sep 2025) repeats the input side in message_delta;
        # the older one counts only the output there.
        usage: Dict[str, Any] = {"output_tokens": self.output_tokens}
        if input_tokens:
            usage = {
                "input_tokens": FX.usage.input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                **usage,
            }
        self.emit("message_delta", delta=delta, usage=usage)
        self.emit("message_stop")

    def error(self, type_: str, message_: str) -> None:
        body = {"type": "error", "error": {"type": type_, "message": message_}}
        self.events.append(self.sse(dumps({**body, "request_id": self.request_id}), event="error"))

    def api_error(self, type_: str, message_: str) -> None:
        """``event: error`` as api.anthropic.com sends it: ``details: null`` first, no ``request_id``.

        Quoted from streams in anthropics/claude-code#302, continuedev/continue#6066 and
        nick1udwig/kibitz#145: ``{"type":"error","error":{"details":null,"type":"overloaded_error",
        "message":"Overloaded"}}``. A client that reads ``error["details"]["error_code"]``
        meets the null here.
        """
        body = {"type": "error", "error": {"details": None, "type": type_, "message": message_}}
        self.events.append(self.sse(dumps(body), event="error"))

    def headers(self) -> Dict[str, str]:
        """The headers the stream's response carries."""
        return response_headers({"cache-control": "no-cache", **ratelimit_headers()}, self.request_id)

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (events kept, cut inside the next) ends it short of ``message_stop``."""
        from ...provider.replies import StreamReply

        events = self.events if cut is None else cut_events(self.events, *cut)
        return StreamReply(
            tcp_chunks(events, seed),
            content_type=self.content_type,
            headers=self.headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )
