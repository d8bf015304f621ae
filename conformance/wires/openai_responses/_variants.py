"""OpenAI Responses' error table and variants: each real shape it answers a scenario with.

An error before the stream is a status and ``{"error": {"message", "type", "param",
"code"}}``; after the 200 it is an ``error`` event and ``response.failed``. A variant
names another shape of the same scenario, with the capture or doc it was seen in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Tuple

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._ids import provider_id, signature
from .._variants import Variant, stream_cut_variants
from ._replies import HEX, response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply

__all__ = [
    "CONTEXT_MESSAGE",
    "ERRORS",
    "SERVERS_OVERLOADED",
    "SERVER_ERROR_MESSAGE",
    "VARIANTS",
    "VARIANT_ERRORS",
    "error_reply",
]

OVERLOADED_MESSAGE = "That model is currently overloaded with other requests. You can retry your request."
CONTEXT_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)

#: scenario -> (status, error.type, error.code, error.param, message, extra headers)
ERRORS: Mapping[str, Any] = {
    # api.openai.com's 429 carries its delay in the message only: the one raw header dump
    # of a Responses call (openai/openai-node#1477) has no retry-after or retry-after-ms.
    "rate-limit": (
        429,
        "tokens",
        "rate_limit_exceeded",
        None,
        "Rate limit reached for conformance-model in organization org-conformance on tokens "
        "per min (TPM): Limit 30000, Used 30000, Requested 845. Please try again in 7s. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
        {},
    ),
    "quota": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        None,
        FX.error_messages["quota"] + " For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors.",
        {},
    ),
    "auth": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        None,
        "Incorrect API key provided: sk-test. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        {},
    ),
    "overloaded": (503, "server_error", None, None, OVERLOADED_MESSAGE, {}),
    "server-error": (
        500,
        "server_error",
        None,
        None,
        "The server had an error while processing your request. Sorry about that!",
        {},
    ),
    "context-overflow": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "input",
        CONTEXT_MESSAGE,
        {},
    ),
}


#: The overload text of the in-stream ``service_unavailable_error`` (anomalyco/opencode#25730).
SERVERS_OVERLOADED = "Our servers are currently overloaded. Please try again later."
#: What a 503 ``server_error`` with a null code may be reported as: its type says a server
#: error, its status (or its message) an overload, and both are retryable.
OVERLOADED_OR_SERVER_ERROR = ("overloaded", "server_error")
SERVER_ERROR_MESSAGE = (
    "An error occurred while processing your request. You can retry your request, or contact us "
    "through our help center at help.openai.com if the error persists. Please include the request "
    "ID req_1332ed8a813a4caaa2f0f3c55a6a68cb in your message."
)

#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Any, Any] = {}


def _reasoning_item(seed: str, summary: Tuple[str, ...]) -> Reasoning:
    """A ``reasoning`` output item as a reasoning model returns it with its encrypted content."""
    return Reasoning(
        ReasoningKind.REASONING_ITEM.value,
        id=provider_id("rs_", f"openai-responses/reasoning/{seed}", 48, HEX),
        summary=summary,
        data=signature(f"openai-responses/reasoning/{seed}/encrypted", 240),
        provider="openai",
    )


_FIRST, _, _SECOND = FX.thinking.partition("\n\n")

VARIANTS: Mapping[str, Any] = {
    "reasoning": (
        Variant(
            "summary",
            "a reasoning item with a summary text and its encrypted_content, then the message",
            "vercel/ai packages/openai/src/responses/__fixtures__/openai-reasoning-encrypted-content.1."
            "chunks.txt; https://platform.openai.com/docs/guides/reasoning#encrypted-reasoning-items",
            reasoning=(_reasoning_item("summary", (FX.thinking,)),),
            source_kind="capture",
        ),
        Variant(
            "multi-summary",
            "a reasoning item with two summary parts and its encrypted_content, then the message",
            "vercel/ai packages/openai/src/responses/__fixtures__/"
            "azure-gpt5-reasoning-multi-summary-with-encryption.chunks.txt",
            reasoning=(_reasoning_item("multi-summary", (_FIRST, _SECOND)),),
            source_kind="capture",
        ),
        Variant(
            "encrypted-only",
            "a reasoning item with an empty summary and its encrypted_content (no summary asked for)",
            "https://platform.openai.com/docs/api-reference/responses/object (reasoning.summary is "
            "empty unless a summary is requested)",
            reasoning=(_reasoning_item("encrypted-only", ()),),
            source_kind="docs",
        ),
    ),
    # No cut falls between the finish reason and the end: a Responses turn's finish is its
    # terminal event's own (response.completed's status, response.incomplete's reason).
    **stream_cut_variants(
        "response.completed",
        "https://platform.openai.com/docs/api-reference/responses-streaming (a stream ends with "
        "response.completed, .incomplete or .failed)",
        "ollama/ollama#17118 (a Responses stream closed without a terminal event); "
        "DevDock-AI/claude-unlimited#1 (a close accepted only after response.completed)",
        "https://platform.openai.com/docs/api-reference/responses/create",
    ),
    # A completed function_call item whose arguments are not JSON: Responses returns the
    # text unchecked, in response.output and in response.function_call_arguments.done.
    "corrupt-arguments": (
        Variant(
            "unterminated-string",
            "arguments ending inside a string, the object left open",
            "https://platform.openai.com/docs/api-reference/responses/object (function_call.arguments: "
            "a JSON string as the model wrote it); vllm-project/vllm#47761 (a Responses function_call, "
            "status completed, its arguments an unterminated string, 297 output tokens: no "
            "max_output_tokens cut; from vLLM 0.25.1 serving DeepSeek-V4-Flash: no capture of this "
            "shape from api.openai.com or Azure was found)",
            source_kind="docs",
        ),
        Variant(
            "trailing-garbage",
            "a whole object, then a closing brace too many",
            "https://platform.openai.com/docs/api-reference/responses/object (function_call.arguments: "
            "a JSON string as the model wrote it); NousResearch/hermes-agent#81765 (data after the "
            "first object, Extra data)",
            source_kind="docs",
        ),
    ),
    "overloaded": (
        Variant(
            "server-error-503",
            "503 server_error, code null, overloaded in the message",
            "AutumnWhj/ChatGPT-wechat-bot#153 (raw 503 body); agi-merge/waggle-dance#53",
            error_kinds=OVERLOADED_OR_SERVER_ERROR,
            source_kind="issue",
        ),
    ),
    "stream-error": (
        Variant(
            "service-unavailable",
            "in-stream service_unavailable_error / server_is_overloaded, then response.failed "
            "(seen from the ChatGPT/Codex Responses backend)",
            "anomalyco/opencode#25730 (this error event, raw, from a Codex subscription stream); "
            "anomalyco/opencode#25884 (the same error object)",
            source_kind="issue",
        ),
        Variant(
            "server-error",
            "in-stream server_error / server_error, then response.failed: a retryable server_error",
            "openai/openai-node#1730 (error event); Wei-Shaw/sub2api#6714 (response.failed)",
            error_kind="server_error",
            source_kind="issue",
        ),
    ),
    "rate-limit": (
        Variant(
            "no-retry-after",
            "429 with the delay in its message only, no retry-after headers",
            "openai/openai-node#1477 (raw 429 header dump of a Responses call: no retry-after, "
            "no retry-after-ms); continuedev/continue#10502 (the message and its rate-limits tail)",
            source_kind="issue",
        ),
    ),
    # The only streamed quota failure recorded is a 200 that fails in-stream; the 429 is
    # the documented status of the same body, as a whole request gets it.
    "quota/stream": (
        Variant(
            "in-stream",
            "200, then error and response.failed with insufficient_quota",
            "vercel/ai packages/openai/src/responses/__fixtures__/openai-error.1.chunks.txt",
            source_kind="capture",
        ),
        Variant(
            "insufficient-quota-429",
            "429 insufficient_quota before the stream",
            "https://platform.openai.com/docs/guides/error-codes (429: You exceeded your current "
            "quota); the body as vercel/ai packages/openai/src/responses/__fixtures__/openai-error.1.json "
            "records it, without its status",
            source_kind="docs",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The error body and headers OpenAI answers ``scenario`` (in ``variant``) with."""
    from ...provider.replies import JsonReply

    status, type_, code, param, message_, extra = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    body = {"error": {"message": message_, "type": type_, "param": param, "code": code}}
    return JsonReply(body, status=status, headers=response_headers(extra))
