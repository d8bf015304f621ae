"""Anthropic Messages: ``POST {base}/v1/messages``, whole or as SSE with ``event:`` names.

Reference: https://docs.anthropic.com/en/api/messages,
https://docs.anthropic.com/en/docs/build-with-claude/streaming and
https://docs.anthropic.com/en/api/errors. The shapes below are the ones
anthropic-python 1.x and 2.x were seen to accept (``anthropic/types``).

A whole reply is one ``message`` with ``content`` blocks (``text``, ``tool_use`` whose
``input`` is already an object) and a ``stop_reason``: ``end_turn``, ``tool_use``,
``max_tokens``, ``refusal`` (with ``stop_details``).

A streamed reply is SSE events whose ``event:`` name equals ``data.type`` (the SDK
drops events without the name)::

    message_start            (the message, empty content, usage.input_tokens)
    ping
    content_block_start      (index, a text block or a tool_use block with input {})
      content_block_delta ...  (text_delta.text or input_json_delta.partial_json)
    content_block_stop
    message_delta            (delta.stop_reason, usage.output_tokens)
    message_stop

Usage is split: ``input_tokens`` in ``message_start``, the final ``output_tokens`` in
``message_delta``. A failure after the 200 is ``event: error`` with an
``overloaded_error`` body, the in-stream twin of a 529.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional

from ..encoders import sse
from ..fixture import CONFORMANCE_FIXTURE as FX
from ..provider.replies import HangReply, JsonReply, RecordedRequest, Reply, StreamReply
from ._base import (
    Variant,
    Wire,
    check_json_post,
    check_question,
    dumps,
    fixture_tool_schema,
    fresh_id,
    http_date,
    provider_id,
    schema_difference,
    tcp_chunks,
    text_of,
)

__all__ = ["AnthropicWire", "anthropic_wire"]

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
MESSAGE_ID = provider_id("msg_01", "anthropic/message", 22, _BASE62)
TOOL_USE_ID = provider_id("toolu_01", "anthropic/tool-use", 22, _BASE62)


def request_id() -> str:
    """A fresh ``req_011C…`` id: Anthropic's header and its error bodies carry the same one."""
    return fresh_id("req_011C", 20, _BASE62)


REFUSAL_EXPLANATION = "This request was declined by the model's safety policies."
OVERLOADED_MESSAGE = "Overloaded"


def _headers(extra: Optional[Mapping[str, str]] = None, rid: Optional[str] = None) -> Dict[str, str]:
    headers = {
        "date": http_date(),
        "request-id": rid or request_id(),
        "anthropic-organization-id": "1f5d2c8e-6a0b-4c1d-9e3f-7a2b4c6d8e0f",
    }
    headers.update(extra or {})
    return headers


def _start_usage() -> Dict[str, Any]:
    # message_start carries the input side; output_tokens is a placeholder there.
    return {
        "input_tokens": FX.usage.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
        "service_tier": "standard",
    }


def _usage() -> Dict[str, Any]:
    return {**_start_usage(), "output_tokens": FX.usage.output_tokens}


def _pieces(text: str, count: int) -> List[str]:
    step = max(1, -(-len(text) // count))
    return [text[start : start + step] for start in range(0, len(text), step)]


# -- whole replies: message ----------------------------------------------------------------


def text_block(text: str) -> Dict[str, Any]:
    """A ``text`` content block."""
    return {"type": "text", "text": text}


def tool_use_block(input_: Mapping[str, Any]) -> Dict[str, Any]:
    """A ``tool_use`` content block: ``input`` is an object, not a JSON string."""
    return {"type": "tool_use", "id": TOOL_USE_ID, "name": FX.tool_name, "input": dict(input_)}


def refusal_stop_details() -> Dict[str, Any]:
    """The ``stop_details`` of a ``refusal`` stop."""
    return {"type": "refusal", "category": None, "explanation": REFUSAL_EXPLANATION}


def message(
    model: str,
    content: List[Dict[str, Any]],
    stop_reason: Optional[str],
    usage: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """A ``message`` object, whole or (empty, no stop reason) inside ``message_start``."""
    body: Dict[str, Any] = {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage if usage is not None else _usage(),
    }
    if stop_reason == "refusal":
        body["stop_details"] = refusal_stop_details()
    return body


# -- streamed replies: the event:-named stream -----------------------------------------------


class _Events:
    """Builds the events of one streamed message."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.events: List[bytes] = []
        self.request_id = request_id()
        self.index = 0
        self.pinged = False

    def emit(self, type_: str, **fields: Any) -> None:
        self.events.append(sse(dumps({"type": type_, **fields}), event=type_))

    def message_start(self) -> None:
        self.emit("message_start", message=message(self.model, [], None, _start_usage()))

    def ping(self) -> None:
        # Real streams ping after the first content_block_start, not after message_start
        # (79 of 79 in pydantic-ai tests/models/cassettes/test_anthropic).
        if not self.pinged:
            self.pinged = True
            self.emit("ping")

    def content_block_start(self, block: Dict[str, Any]) -> None:
        self.emit("content_block_start", index=self.index, content_block=block)
        self.ping()

    def text(self, text: str, pieces: int = 4, stop: bool = True) -> None:
        self.content_block_start(text_block(""))
        for piece in _pieces(text, pieces):
            delta = {"type": "text_delta", "text": piece}
            self.emit("content_block_delta", index=self.index, delta=delta)
        if stop:
            self.content_block_stop()

    def tool_use(self, partial_json: str, pieces: int = 4, stop: bool = True) -> None:
        self.content_block_start(tool_use_block({}))
        # Anthropic opens a tool_use block with an empty fragment before the real ones.
        for piece in ["", *_pieces(partial_json, pieces)]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            self.emit("content_block_delta", index=self.index, delta=delta)
        if stop:
            self.content_block_stop()

    def content_block_stop(self) -> None:
        self.emit("content_block_stop", index=self.index)
        self.index += 1

    def message_delta(self, stop_reason: str, input_tokens: bool = True) -> None:
        delta: Dict[str, Any] = {"stop_reason": stop_reason, "stop_sequence": None}
        if stop_reason == "refusal":
            delta["stop_details"] = refusal_stop_details()
        self.ping()
        # The newer shape (since about Sep 2025) repeats the input side in message_delta;
        # the older one counts only the output there.
        usage: Dict[str, Any] = {"output_tokens": FX.usage.output_tokens}
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
        self.events.append(sse(dumps({**body, "request_id": self.request_id}), event="error"))

    def reply(self, seed: str, hang: bool = False) -> StreamReply:
        return StreamReply(
            tcp_chunks(self.events, seed),
            content_type="text/event-stream; charset=utf-8",
            headers=_headers({"cache-control": "no-cache"}, self.request_id),
            hang=hang,
        )


# -- errors ----------------------------------------------------------------------------------

#: scenario -> (status, error.type, message, error.details or None, extra headers)
ERRORS: Mapping[str, Any] = {
    "rate-limit": (
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per "
        "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
        None,
        {
            "retry-after": "7",
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2025-11-29T08:00:07Z",
        },
    ),
    # A spend limit reached is a 429 too, told apart only by details.error_code; it
    # comes without retry-after because waiting a minute does not help.
    "quota": (
        429,
        "rate_limit_error",
        "You have reached your specified API usage limits. You will regain access on "
        "2026-01-01 at 00:00 UTC.",
        {"error_code": "enforced_spend_limit_reached"},
        {},
    ),
    "auth": (401, "authentication_error", "invalid x-api-key", None, {}),
    "overloaded": (529, "overloaded_error", OVERLOADED_MESSAGE, None, {}),
    "server-error": (500, "api_error", "Internal server error", None, {}),
    "context-overflow": (
        400,
        "invalid_request_error",
        "prompt is too long: 208310 tokens > 200000 maximum",
        None,
        {},
    ),
}


#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Any, Any] = {
    # Out of prepaid credit: a 400 invalid_request_error, told apart from a bad request
    # by its message only. The common real quota answer.
    ("quota", "credit-balance-400"): (
        400,
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
        "to upgrade or purchase credits.",
        None,
        {},
    ),
    ("quota", "billing-402"): (
        402,
        "billing_error",
        "Your account has a billing issue. Please go to Plans & Billing to resolve it.",
        None,
        {},
    ),
}

VARIANTS: Mapping[str, Any] = {
    # Streams since about Sep 2025 repeat the input tokens and cache counts in
    # message_delta (45 of 79 in pydantic-ai tests/models/cassettes/test_anthropic); the
    # older ones count only the output there (34 of 79).
    "text/stream": (
        Variant(
            "delta-input-tokens",
            "message_delta.usage with input_tokens and cache counts",
            "vercel/ai packages/anthropic/src/__fixtures__/anthropic-message-delta-input-tokens.chunks.txt",
        ),
        Variant(
            "delta-output-only",
            "message_delta.usage with output_tokens only",
            "pydantic/pydantic-ai tests/models/cassettes/test_anthropic (34 of 79 streams)",
        ),
    ),
    "quota": (
        Variant(
            "credit-balance-400",
            "400 credit balance too low",
            "anthropics/claude-code#4684, #4208, #34522, #66314; continuedev/continue#5499",
        ),
        Variant(
            "spend-limit-429",
            "429 rate_limit_error with details.error_code enforced_spend_limit_reached",
            "https://docs.claude.com/en/api/rate-limits (spend limits)",
        ),
        Variant(
            "billing-402",
            "402 billing_error",
            "https://docs.claude.com/en/api/errors (402 billing_error)",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The error body and headers Anthropic answers ``scenario`` (in ``variant``) with."""
    status, type_, message_, details, extra = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    error: Dict[str, Any] = {"type": type_, "message": message_}
    if details is not None:
        error["details"] = details
    rid = request_id()
    body = {"type": "error", "error": error, "request_id": rid}
    return JsonReply(body, status=status, headers=_headers(extra, rid))


# -- the wire ----------------------------------------------------------------------------------


class AnthropicWire(Wire):
    """Anthropic Messages, whole and streamed."""

    name = "anthropic"
    provider = "anthropic"
    title = "Anthropic Messages"
    tool_call_id = TOOL_USE_ID
    generation_path = "/v1/messages"
    variants_table = VARIANTS

    def aux_reply(self, request: RecordedRequest) -> Reply:
        # client.messages.count_tokens(): POST /v1/messages/count_tokens
        if request.method == "POST" and request.path.endswith("/v1/messages/count_tokens"):
            return JsonReply({"input_tokens": FX.usage.input_tokens}, headers=_headers())
        rid = request_id()
        return JsonReply(
            {
                "type": "error",
                "error": {
                    "type": "not_found_error",
                    "message": (
                        f"the {self.title} fake provider has no route for {request.method} "
                        f"{request.path}; POST /v1/messages is what is scripted"
                    ),
                },
                "request_id": rid,
            },
            status=404,
            headers=_headers(rid=rid),
        )

    def reply(
        self, scenario: str, mode: str, request: RecordedRequest, variant: str = ""
    ) -> Optional[Reply]:
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "conformance-model")
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in ERRORS:
            return error_reply(scenario, variant)
        if not self.wants_stream(request):
            return self._whole(scenario, model)
        return self._stream(scenario, model, variant)

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        if scenario == "text":
            body = message(model, [text_block(FX.text)], "end_turn")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            stop = "tool_use" if scenario == "tool-call" else "end_turn"
            body = message(model, [tool_use_block(FX.tool_arguments)], stop)
        elif scenario == "truncated-tool-call":
            # Cut off inside the arguments: the block is there, its input is not to be trusted.
            content = [text_block(FX.preamble), tool_use_block({})]
            body = message(model, content, "max_tokens")
        elif scenario == "content-filter":
            body = message(model, [], "refusal")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return JsonReply(body, headers=_headers())

    def _stream(self, scenario: str, model: str, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = _Events(model)
        out.message_start()
        if scenario == "text":
            out.text(FX.text)
            out.message_delta("end_turn", input_tokens=variant != "delta-output-only")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.tool_use(json.dumps(dict(FX.tool_arguments), ensure_ascii=False))
            out.message_delta("tool_use" if scenario == "tool-call" else "end_turn")
        elif scenario == "truncated-tool-call":
            out.text(FX.preamble, pieces=2)
            out.tool_use('{"city": "Par', pieces=2)
            out.message_delta("max_tokens")
        elif scenario == "content-filter":
            out.message_delta("refusal")
        elif scenario == "stream-error":
            out.text(FX.partial_text, pieces=3, stop=False)
            out.error("overloaded_error", OVERLOADED_MESSAGE)
        elif scenario in ("abort", "cancel"):
            out.text(FX.partial_text, pieces=2, stop=False)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        problems, body = check_json_post(request, model, "/v1/messages")
        problems.extend(_check_headers(request.headers))
        if not body:
            return problems
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            problems.append(f"expected max_tokens, a positive integer Anthropic requires, got {max_tokens!r}")
        problems.extend(_check_messages(body.get("messages")))
        problems.extend(_check_tools(body.get("tools")))
        return problems


def _check_headers(headers: Mapping[str, str]) -> List[str]:
    problems: List[str] = []
    if not headers.get("anthropic-version"):
        problems.append("expected an anthropic-version header (any version, e.g. 2023-06-01), got none")
    bearer = headers.get("authorization", "").lower().startswith("bearer ")
    if not headers.get("x-api-key") and not bearer:
        problems.append(
            "expected an x-api-key header or Authorization: Bearer, got neither "
            f"(authorization={headers.get('authorization')!r})"
        )
    return problems


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    problems: List[str] = []
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    if "system" in roles:
        problems.append(
            'expected the system prompt in the top-level "system" field, got a message with '
            'role "system" (Anthropic rejects it with a 400)'
        )
    problems.extend(check_question(messages, text_of))
    return problems


def _check_tools(tools: Any) -> List[str]:
    if not isinstance(tools, list):
        return [f"expected tools to list get_weather, got {tools!r}"]
    named = [t for t in tools if isinstance(t, dict) and t.get("name") == FX.tool_name]
    if not named:
        names = [t.get("name") if isinstance(t, dict) else t for t in tools]
        return [
            f'expected a tool {{"name": "get_weather", "input_schema": {{...}}}}, got tool names {names!r}'
        ]
    schema = named[0].get("input_schema")
    difference = schema_difference(fixture_tool_schema(), schema)
    if difference:
        hint = " (Anthropic names it input_schema, not parameters)" if schema is None else f" ({difference})"
        return [f"expected get_weather input_schema {dict(fixture_tool_schema())!r}, got {schema!r}{hint}"]
    return []


anthropic_wire = AnthropicWire()
