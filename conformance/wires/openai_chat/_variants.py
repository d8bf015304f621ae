"""OpenAI Chat Completions' error table and variants: each real shape it answers a
scenario with.

An error before the stream is a status and ``{"error": {"message", "type", "param",
"code"}}``; after the 200 it is a ``data:`` event carrying the same ``error`` object,
with no ``[DONE]`` after it. A variant names another shape of the same scenario, with
the capture or doc it was seen in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._variants import Variant, stream_cut_variants
from ._replies import response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply

__all__ = [
    "ERRORS",
    "NO_REASONING",
    "OVERLOADED_MESSAGE",
    "REASONING_VARIANTS",
    "VARIANTS",
    "VARIANT_ERRORS",
    "error_reply",
]

#: OpenAI's overload text: "overloaded" is in the message only, in the ``server_error``
#: shape whose code is null.
OVERLOADED_MESSAGE = (
    "That model is currently overloaded with other requests. You can retry your request, or "
    "contact us through our help center at help.openai.com if the error persists."
)

#: scenario -> (status, error.type, error.code, message, extra headers)
ERRORS: Mapping[str, Any] = {
    # api.openai.com's 429 carries its delay in the message only: the one raw header dump
    # (openai/openai-node#1477) has no retry-after, retry-after-ms or x-ratelimit-*.
    "rate-limit": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for conformance-model in organization org-conformance on requests "
        "per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 7s. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
        {},
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
VARIANT_ERRORS: Mapping[Any, Any] = {}

#: What a ``server_error`` with a null code may be reported as: its type says a server
#: error, its status (503) or its message an overload, and both are retryable.
OVERLOADED_OR_SERVER_ERROR = ("overloaded", "server_error")

#: The raw 503 bodies quoted in issues (type ``server_error``, code null, "overloaded"
#: only in the message); the client that reads only the code calls them server errors.
SERVER_ERROR_503 = "AutumnWhj/ChatGPT-wechat-bot#153 (raw 503 body); agi-merge/waggle-dance#53"

VARIANTS: Mapping[str, Any] = {
    **stream_cut_variants(
        "data: [DONE]",
        "https://platform.openai.com/docs/api-reference/chat-streaming (a stream ends with data: [DONE])",
        "openai/openai-python#2065 and #2356 (a stream cut short: incomplete chunked read)",
        "https://platform.openai.com/docs/api-reference/chat/create",
        after_finish="its finish_reason chunk and the usage chunk (where asked for), then the stream "
        "cut between two events, before data: [DONE]",
    ),
    # A finished call's arguments as the model wrote them, not JSON: OpenAI returns the
    # text unchecked, whole and streamed, with finish_reason "tool_calls".
    "corrupt-arguments": (
        Variant(
            "unterminated-string",
            "arguments ending inside a string, the object left open",
            "https://platform.openai.com/docs/api-reference/chat/object (function.arguments: the "
            "model does not always generate valid JSON); vllm-project/vllm#47761 (a call's "
            "arguments an unterminated string on a turn that ended normally, from vLLM 0.25.1 serving "
            "DeepSeek-V4-Flash: no capture of this shape from api.openai.com or Azure was found)",
            source_kind="docs",
        ),
        Variant(
            "trailing-garbage",
            "a whole object, then a closing brace too many",
            "Chainlit/chainlit#791 (gpt-4 arguments with data after the object, Extra data); "
            "yigit353/langchain-qwq#30 (an extra closing brace); NorthlandPositronics/Cogtrix#2290",
            source_kind="issue",
        ),
    ),
    "overloaded": (
        Variant(
            "server-error-503",
            "503 server_error, code null, overloaded in the message",
            SERVER_ERROR_503,
            error_kinds=OVERLOADED_OR_SERVER_ERROR,
            source_kind="issue",
        ),
    ),
    # No Chat Completions stream was seen failing with service_unavailable_error /
    # server_is_overloaded (that shape is the Responses error event's): a failing Chat
    # stream sends OpenAI's server_error object as its last data: line.
    "stream-error": (
        Variant(
            "server-error-overloaded",
            "in-stream server_error, code null, overloaded in the message",
            "scalaone/azure-openai-proxy#22 (this error object as a Chat stream's event data, "
            "GPT-4 on Azure); openai/openai-python#1625 (api.openai.com's Chat stream failing "
            "mid-way with a server_error)",
            error_kinds=OVERLOADED_OR_SERVER_ERROR,
            source_kind="issue",
        ),
    ),
    "rate-limit": (
        Variant(
            "no-retry-after",
            "429 with the delay in its message only, no retry-after headers",
            "openai/openai-node#1477 (raw 429 header dump: no retry-after, no retry-after-ms); "
            "continuedev/continue#10502 (the message and its rate-limits tail)",
            source_kind="issue",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The error body and headers OpenAI answers ``scenario`` (in ``variant``) with."""
    from ...provider.replies import JsonReply

    status, type_, code, message, extra = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    param = "messages" if scenario == "context-overflow" else None
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JsonReply(body, status=status, headers=response_headers(extra))


#: The ``reasoning`` shape of an OpenAI-compatible server: DeepSeek's ``reasoning_content``,
#: which vLLM, SGLang and LM Studio send too. api.openai.com itself sends no reasoning.
REASONING_VARIANTS = (
    Variant(
        "reasoning-content",
        "message.reasoning_content before the content (streamed as reasoning_content deltas)",
        "vercel/ai packages/deepseek/src/chat/__fixtures__/deepseek-reasoning.chunks.txt and "
        "deepseek-reasoning.json (deepseek-reasoner); https://api-docs.deepseek.com/guides/reasoning_model",
        reasoning=(Reasoning(ReasoningKind.THINKING.value, text=FX.thinking, provider="openai"),),
        source_kind="capture",
    ),
)
NO_REASONING = (
    "OpenAI Chat Completions has no reasoning case: api.openai.com returns none on this API (its "
    "reasoning models keep it server-side; the Responses API returns it). For an OpenAI-compatible "
    "server that sends reasoning_content (DeepSeek, vLLM, SGLang, LM Studio), use "
    "OpenAIChatWire(reasoning_content=True)"
)
