"""Cohere's replies: the whole ``chat`` response, and the SSE stream of ``message-start`` to ``message-end``.

Reference: https://docs.cohere.com/reference/chat and
https://docs.cohere.com/v2/docs/streaming. The builders are named after Cohere's own
events (``message_start``, ``content_delta``, ``tool_plan_delta``, ``tool_call_start``,
``message_end``), so checking them against the docs is a grep. The shapes follow the
captures in langchain-ai/langchain-cohere ``libs/cohere/tests/integration_tests/cassettes``
(``test_stream.yaml``, ``test_streaming_tool_call.yaml``, ``test_invoke.yaml``,
``test_invoke_tool_calls.yaml``) and the payloads of vercel/ai
``packages/cohere/src/__fixtures__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import cut_events, dumps, split_text, tcp_chunks
from .._ids import fresh_id, http_date, provider_id

if TYPE_CHECKING:
    from ...provider.replies import StreamReply

__all__ = [
    "BILLED_INPUT_TOKENS",
    "CACHED_TOKENS",
    "CONTENT_TYPE",
    "MESSAGE_ID",
    "TOOL_CALL_ID",
    "TOOL_PLAN",
    "TRIAL_HEADERS",
    "Events",
    "answer_headers",
    "call_id",
    "chat_response",
    "message_id",
    "response_headers",
    "stream_headers",
    "text_item",
    "tool_call",
    "usage",
]

#: A call id is the tool's name, ``_`` and twelve of these (``get_weather_nsz5zm3w56q3`` in
#: the streaming docs, ``Person_2fnrphbsnr66`` in langchain-cohere's cassettes).
_LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"

#: A Cohere stream's content type, with no charset (langchain-cohere test_stream.yaml).
CONTENT_TYPE = "text/event-stream"

#: The model's plan before its calls: Cohere's ``tool_plan``, "a chain-of-thought style
#: reflection and plan that the model generates when working with Tools" (its API
#: reference). Every captured tool turn carries one.
TOOL_PLAN = "I will use get_weather to look up the weather in Paris."

#: The billed input: a Cohere reply bills the user's tokens only, while ``tokens`` counts
#: the prompt template too (4 billed of 70 in test_stream.yaml). The fixture's usage is
#: ``tokens``, what the model processed; a backend that reads ``billed_units`` is caught.
BILLED_INPUT_TOKENS = 9
#: What the newer replies count as served from the prompt cache (vercel/ai fixtures, 2025).
CACHED_TOKENS = 16


def call_id(name: str, seed: str) -> str:
    """A call id shaped like Cohere's: the tool's name, ``_``, twelve lower-case characters."""
    return provider_id(f"{name}_", f"cohere/{seed}", 12, _LOWER_ALNUM)


def message_id(seed: str) -> str:
    """A reply's ``id``: a version-4 UUID, the same for a seed."""
    digits = provider_id("", f"cohere/{seed}", 32, _HEX)
    # The version nibble is 4 and the variant's top bits are 10, as uuid4() makes them.
    variant = _HEX[8 + int(digits[16], 16) % 4]
    return f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{variant}{digits[17:20]}-{digits[20:]}"


TOOL_CALL_ID = call_id(FX.tool_name, "tool-call")
MESSAGE_ID = message_id("message")


def response_headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The headers every reply carries; ``x-debug-trace-id`` is fresh on each, as Cohere's is."""
    headers = {
        "date": http_date(),
        "x-debug-trace-id": fresh_id("", 32, _HEX),
        "access-control-expose-headers": "X-Debug-Trace-ID",
        "vary": "Origin",
    }
    headers.update(extra or {})
    return headers


#: What a trial key's answers say of its budget: 40 calls a minute to the endpoint, so many
#: left, 1,000 a month (langchain-cohere cassettes test_invoke.yaml and test_stream.yaml,
#: api.cohere.com/v2/chat with a trial key, 2024-11-28 and 2024-11-29, on the whole reply and
#: the stream alike). A production key's answers carry none; no capture shows them on a failure.
TRIAL_HEADERS: Mapping[str, str] = {
    "x-endpoint-monthly-call-limit": "1000",
    "x-trial-endpoint-call-limit": "40",
    "x-trial-endpoint-call-remaining": "39",
}


def answer_headers() -> Dict[str, str]:
    """An answer's headers, whole or streamed: the caching ones and a trial key's budget, as
    langchain-cohere's test_invoke.yaml and test_stream.yaml record them."""
    return response_headers(
        {
            "cache-control": "no-cache, no-store, no-transform, must-revalidate, private, max-age=0",
            "expires": "Thu, 01 Jan 1970 00:00:00 UTC",
            "pragma": "no-cache",
            "x-accel-expires": "0",
            **TRIAL_HEADERS,
        }
    )


def stream_headers() -> Dict[str, str]:
    """A stream's headers: those of every answer (:func:`answer_headers`)."""
    return answer_headers()


def usage(cached: bool = True) -> Dict[str, Any]:
    """``usage``: ``billed_units`` and ``tokens``, and ``cached_tokens`` in the newer shape."""
    body: Dict[str, Any] = {
        "billed_units": {"input_tokens": BILLED_INPUT_TOKENS, "output_tokens": FX.usage.output_tokens},
        "tokens": {"input_tokens": FX.usage.input_tokens, "output_tokens": FX.usage.output_tokens},
    }
    if cached:
        body["cached_tokens"] = CACHED_TOKENS
    return body


# -- whole replies ----------------------------------------------------------------------------


def text_item(text: str) -> Dict[str, Any]:
    """A ``text`` content item."""
    return {"type": "text", "text": text}


def tool_call(id_: str, name: str, arguments: str) -> Dict[str, Any]:
    """A ``tool_calls`` item: ``arguments`` is JSON text, as the model wrote it."""
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_response(
    message: Dict[str, Any], finish_reason: str, id_: str = MESSAGE_ID, cached: bool = True
) -> Dict[str, Any]:
    """The whole reply: ``id``, ``message``, ``finish_reason``, ``usage``, in Cohere's order."""
    return {
        "id": id_,
        "message": {"role": "assistant", **message},
        "finish_reason": finish_reason,
        "usage": usage(cached),
    }


# -- streamed replies ---------------------------------------------------------------------------


class Events:
    """Builds the events of one streamed reply: each ``event: <type>`` with its JSON, ``type`` inside.

    Content items and tool calls are counted apart: a reasoning reply's text is content
    item 1 after its thinking (vercel/ai cohere-reasoning.chunks.txt), while a tool turn's
    first call is ``index`` 0 whatever came before it (test_streaming_tool_call.yaml).
    """

    def __init__(self, message_id_: str = MESSAGE_ID) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ...encoders import sse

        self.sse = sse
        self.message_id = message_id_
        self.events: List[bytes] = []
        self.content_index = 0
        self.call_index = 0

    def emit(self, type_: str, **fields: Any) -> None:
        self.events.append(self.sse(dumps({"type": type_, **fields}), event=type_))

    def message_start(self) -> None:
        # Only message-start carries the reply's id, and it comes before the type.
        message = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
        body = {"id": self.message_id, "type": "message-start", "delta": {"message": message}}
        self.events.append(self.sse(dumps(body), event="message-start"))

    def content_start(self, kind: str = "text") -> None:
        item = {"type": kind, kind: ""}
        self.emit("content-start", index=self.content_index, delta={"message": {"content": item}})

    def content_delta(self, piece: str, kind: str = "text") -> None:
        self.emit("content-delta", index=self.content_index, delta={"message": {"content": {kind: piece}}})

    def content_end(self) -> None:
        self.emit("content-end", index=self.content_index)
        self.content_index += 1

    def content(self, text: str, kind: str = "text", pieces: int = 4, end: bool = True) -> None:
        """One content item (``text`` or ``thinking``): its start, its deltas, and its end."""
        self.content_start(kind)
        for piece in split_text(text, pieces):
            self.content_delta(piece, kind)
        if end:
            self.content_end()

    def tool_plan_delta(self, piece: str) -> None:
        self.emit("tool-plan-delta", delta={"message": {"tool_plan": piece}})

    def tool_plan(self, text: str, pieces: int = 4) -> None:
        for piece in split_text(text, pieces):
            self.tool_plan_delta(piece)

    def tool_call_start(self, index: int, id_: str, name: str) -> None:
        self.emit("tool-call-start", index=index, delta={"message": {"tool_calls": tool_call(id_, name, "")}})

    def tool_call_delta(self, index: int, piece: str) -> None:
        delta = {"message": {"tool_calls": {"function": {"arguments": piece}}}}
        self.emit("tool-call-delta", index=index, delta=delta)

    def tool_call_end(self, index: int) -> None:
        self.emit("tool-call-end", index=index)

    def tool_call(self, id_: str, name: str, fragments: Sequence[str], end: bool = True) -> Tuple[int, int]:
        """One call: ``tool-call-start``, a ``tool-call-delta`` per fragment, ``tool-call-end``.

        Returns the indexes of the events that carried its first and last fragment (the
        start where it has none: a call with no arguments ends at once). A call the
        token limit cut off has no ``tool-call-end`` (``end=False``).
        """
        index = self.call_index
        self.call_index += 1
        self.tool_call_start(index, id_, name)
        first = last = len(self.events) - 1
        for number, piece in enumerate(fragments):
            self.tool_call_delta(index, piece)
            last = len(self.events) - 1
            if number == 0:
                first = last
        if end:
            self.tool_call_end(index)
        return first, last

    def message_end(self, finish_reason: str, cached: bool = True, error: Optional[str] = None) -> None:
        """``message-end`` with the finish reason and usage, then the ``data: [DONE]`` after it."""
        delta: Dict[str, Any] = {"finish_reason": finish_reason, "usage": usage(cached)}
        if error is not None:
            # ChatMessageEndEvent's delta in Cohere's OpenAPI spec: error, finish_reason, usage.
            delta = {"error": error, **delta}
        self.emit("message-end", delta=delta)
        self.events.append(self.sse("[DONE]"))

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (events kept, cut inside the next) ends it short of ``message-end``."""
        from ...provider.replies import StreamReply

        events = self.events if cut is None else cut_events(self.events, *cut)
        return StreamReply(
            tcp_chunks(events, seed),
            content_type=CONTENT_TYPE,
            headers=stream_headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )
