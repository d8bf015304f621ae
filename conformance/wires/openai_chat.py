"""OpenAI Chat Completions: ``POST {base}/chat/completions``, whole or as SSE.

Reference: https://platform.openai.com/docs/api-reference/chat and
https://platform.openai.com/docs/api-reference/chat-streaming. The shapes below are
the ones openai-python 3.x was seen to accept (``openai/types/chat``).

A streamed reply is ``data:`` events of ``chat.completion.chunk`` objects, no
``event:`` names, ending with ``data: [DONE]``. Tool-call arguments arrive as string
fragments keyed by ``tool_calls[].index``. Usage comes in one extra chunk with empty
``choices`` right before ``[DONE]``, and only when the request asked for it with
``stream_options.include_usage``. A failure after the 200 is a ``data:`` event
carrying a top-level ``error`` object, with no ``[DONE]`` after it.
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
    check_function_tool,
    check_json_post,
    check_question,
    dumps,
    fresh_id,
    http_date,
    obfuscation,
    provider_id,
    tcp_chunks,
    text_of,
)

__all__ = ["OpenAIChatWire", "openai_chat_wire"]

CREATED = 1764403200  # 2025-11-29T08:00:00Z, seconds as OpenAI sends them
TOOL_CALL_ID = provider_id("call_", "openai-chat/tool-call")
COMPLETION_ID = provider_id("chatcmpl-", "openai-chat/completion", 29)
FINGERPRINT = provider_id("fp_", "openai-chat/fingerprint", 10, "0123456789abcdef")

#: The arguments of the cut-off call: valid up to the cut, then nothing.
TRUNCATED_ARGUMENTS = '{"city": "Par'


def _arguments() -> str:
    # OpenAI spaces its argument JSON the way json.dumps does by default.
    return json.dumps(dict(FX.tool_arguments), ensure_ascii=False)


def _usage() -> Dict[str, Any]:
    u = FX.usage
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _tool_call(arguments: str) -> Dict[str, Any]:
    return {
        "id": TOOL_CALL_ID,
        "type": "function",
        "function": {"name": FX.tool_name, "arguments": arguments},
    }


def _headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    # A fresh x-request-id on every response, as OpenAI's own: req_ + 32 hex.
    headers = {
        "date": http_date(),
        "x-request-id": fresh_id("req_", 32, "0123456789abcdef"),
        "openai-processing-ms": "412",
    }
    headers.update(extra or {})
    return headers


# -- whole replies: chat.completion ----------------------------------------------------


def chat_completion(model: str, message: Dict[str, Any], finish_reason: str) -> Dict[str, Any]:
    """A ``chat.completion`` object with one choice."""
    return {
        "id": COMPLETION_ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": _usage(),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }


# -- streamed replies: chat.completion.chunk -------------------------------------------


class _Chunks:
    """Builds the ``data:`` events of one streamed completion."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.model = model
        self.include_usage = include_usage
        self.events: List[bytes] = []

    def chunk(self, delta: Dict[str, Any], finish_reason: Optional[str] = None) -> None:
        body: Dict[str, Any] = {
            "id": COMPLETION_ID,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if self.include_usage:
            body["usage"] = None
        # Real chunks end with random padding (vercel/ai
        # packages/openai/src/chat/__fixtures__/openai-text.chunks.txt).
        body["obfuscation"] = obfuscation(f"openai-chat/{len(self.events)}")
        self.events.append(sse(dumps(body)))

    def role(self, content: Optional[str] = "") -> None:
        self.chunk({"role": "assistant", "content": content, "refusal": None})

    def text(self, text: str, pieces: int = 4) -> None:
        step = max(1, -(-len(text) // pieces))
        for start in range(0, len(text), step):
            self.chunk({"content": text[start : start + step]})

    def tool_call(self, arguments: str, pieces: int = 4, role: bool = False) -> None:
        """The call's first chunk (id, name, empty arguments), then its argument fragments.

        With ``role`` the first chunk also opens the message, as 36 of 52 recorded
        tool-call streams do (crewAI ``test_handle_streaming_tool_calls.yaml``): no
        separate role chunk comes before it.
        """
        first: Dict[str, Any] = {"tool_calls": [{"index": 0, **_tool_call("")}]}
        if role:
            first = {"role": "assistant", "content": None, **first, "refusal": None}
        self.chunk(first)
        step = max(1, -(-len(arguments) // pieces))
        for start in range(0, len(arguments), step):
            fragment = arguments[start : start + step]
            self.chunk({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})

    def finish(self, finish_reason: str) -> None:
        self.chunk({}, finish_reason)
        if self.include_usage:
            self.events.append(
                sse(
                    dumps(
                        {
                            "id": COMPLETION_ID,
                            "object": "chat.completion.chunk",
                            "created": CREATED,
                            "model": self.model,
                            "service_tier": "default",
                            "system_fingerprint": FINGERPRINT,
                            "choices": [],
                            "usage": _usage(),
                        }
                    )
                )
            )
        self.events.append(sse("[DONE]"))

    def error(self, message: str, type_: str, code: Optional[str]) -> None:
        self.events.append(
            sse(dumps({"error": {"message": message, "type": type_, "param": None, "code": code}}))
        )

    def reply(self, seed: str, hang: bool = False) -> StreamReply:
        return StreamReply(
            tcp_chunks(self.events, seed),
            content_type="text/event-stream; charset=utf-8",
            headers=_headers(),
            hang=hang,
        )


# -- errors ------------------------------------------------------------------------------

#: OpenAI's overload text: "overloaded" is in the message only, in the ``server_error``
#: shape whose code is null.
OVERLOADED_MESSAGE = (
    "That model is currently overloaded with other requests. You can retry your request, or "
    "contact us through our help center at help.openai.com if the error persists."
)
#: The newer shape's text, with a type and a code of its own.
SERVERS_OVERLOADED = "Our servers are currently overloaded. Please try again later."

#: scenario -> (status, error.type, error.code, message, extra headers)
ERRORS: Mapping[str, Any] = {
    "rate-limit": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for conformance-model in organization org-conformance on requests "
        "per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 7s.",
        {
            "retry-after": "7",
            "retry-after-ms": "7000",
            "x-ratelimit-limit-requests": "3",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "7s",
        },
    ),
    "quota": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        FX.error_messages["quota"] + " For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors.",
        {},
    ),
    "auth": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: sk-test. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        {},
    ),
    "overloaded": (503, "server_error", None, OVERLOADED_MESSAGE, {}),
    "server-error": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
        {},
    ),
    "context-overflow": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9000 tokens. Please reduce the length of the messages.",
        {},
    ),
}


#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Any, Any] = {
    ("overloaded", "service-unavailable"): (503, "service_unavailable_error", "server_is_overloaded",
                                            SERVERS_OVERLOADED, {}),
    ("rate-limit", "no-retry-after"): (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for conformance-model in organization org-conformance on requests "
        "per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 7s. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
        {},
    ),
}

#: The raw 503 bodies quoted in issues (type ``server_error``, code null, "overloaded"
#: only in the message); the client that reads only the code calls them server errors.
SERVER_ERROR_503 = "AutumnWhj/ChatGPT-wechat-bot#153 (raw 503 body); agi-merge/waggle-dance#53"

VARIANTS: Mapping[str, Any] = {
    "overloaded": (
        Variant("server-error-503", "503 server_error, code null, overloaded in the message",
                SERVER_ERROR_503),
        Variant(
            "service-unavailable",
            "503 service_unavailable_error / server_is_overloaded",
            "openai/codex codex-rs (maps a 503 body with code server_is_overloaded); openai/openai-node#1730",
        ),
    ),
    "stream-error": (
        Variant(
            "service-unavailable",
            "in-stream service_unavailable_error / server_is_overloaded",
            "openai/codex codex-rs (in-stream server_is_overloaded); openai/openai-python#1625",
        ),
        Variant(
            "server-error-overloaded",
            "in-stream server_error, code null, overloaded in the message",
            SERVER_ERROR_503 + "; openai/openai-python#1625 (mid-stream server_error text)",
        ),
    ),
    "rate-limit": (
        Variant(
            "retry-after",
            "429 with retry-after and retry-after-ms",
            "openai/openai-python src/openai/_base_client.py (reads retry-after-ms, then retry-after)",
            retry_after=FX.retry_after,
        ),
        Variant(
            "no-retry-after",
            "429 without retry-after headers",
            "openai/openai-node#1477 (raw 429 header dump: no retry-after, no retry-after-ms)",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The error body and headers OpenAI answers ``scenario`` (in ``variant``) with."""
    status, type_, code, message, extra = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    param = "messages" if scenario == "context-overflow" else None
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JsonReply(body, status=status, headers=_headers(extra))


# -- the wire ----------------------------------------------------------------------------


class OpenAIChatWire(Wire):
    """OpenAI Chat Completions, whole and streamed."""

    name = "openai-chat"
    provider = "openai"
    title = "OpenAI Chat Completions"
    tool_call_id = TOOL_CALL_ID
    generation_path = "/chat/completions"
    variants_table = VARIANTS

    def aux_reply(self, request: RecordedRequest) -> Reply:
        # openai-python's client.models.retrieve(): GET {base}/models/{model}
        if request.method == "GET" and "/models/" in request.path:
            model = request.path.rsplit("/models/", 1)[1]
            return JsonReply(
                {"id": model, "object": "model", "created": CREATED, "owned_by": "system"},
                headers=_headers(),
            )
        return super().aux_reply(request)

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
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        return self._stream(scenario, model, include_usage, variant)

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        if scenario == "text":
            body = chat_completion(model, {"content": FX.text}, "stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            finish = "tool_calls" if scenario == "tool-call" else "stop"
            message: Dict[str, Any] = {"content": None, "tool_calls": [_tool_call(_arguments())]}
            body = chat_completion(model, message, finish)
        elif scenario == "truncated-tool-call":
            message = {"content": FX.preamble, "tool_calls": [_tool_call(TRUNCATED_ARGUMENTS)]}
            body = chat_completion(model, message, "length")
        elif scenario == "content-filter":
            body = chat_completion(model, {"content": None}, "content_filter")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return JsonReply(body, headers=_headers())

    def _stream(self, scenario: str, model: str, include_usage: bool, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = _Chunks(model, include_usage)
        if scenario == "text":
            out.role()
            out.text(FX.text)
            out.finish("stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.tool_call(_arguments(), role=True)
            out.finish("tool_calls" if scenario == "tool-call" else "stop")
        elif scenario == "truncated-tool-call":
            out.role()
            out.text(FX.preamble, pieces=2)
            out.tool_call(TRUNCATED_ARGUMENTS, pieces=2)
            out.finish("length")
        elif scenario == "content-filter":
            out.role()
            out.finish("content_filter")
        elif scenario == "stream-error":
            out.role()
            out.text(FX.partial_text, pieces=3)
            if variant == "server-error-overloaded":
                out.error(OVERLOADED_MESSAGE, "server_error", None)
            else:
                out.error(SERVERS_OVERLOADED, "service_unavailable_error", "server_is_overloaded")
        elif scenario in ("abort", "cancel"):
            out.role()
            out.text(FX.partial_text, pieces=2)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        problems, body = check_json_post(request, model, "/v1/chat/completions")
        if not body:
            return problems
        problems.extend(_check_messages(body.get("messages")))
        problems.extend(check_function_tool(body.get("tools")))
        if body.get("stream") is True:
            options = body.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage") is True):
                problems.append(
                    "expected stream_options.include_usage true on a streamed request (without "
                    f"it OpenAI reports no usage), got stream_options={options!r}"
                )
        return problems


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    return check_question(messages, text_of)


openai_chat_wire = OpenAIChatWire()
