"""Anthropic's error table and variants: each real shape it answers a scenario with.

Reference: https://docs.anthropic.com/en/api/errors. An error is a status, an
``{"type": "error", "error": {"type", "message"}, "request_id"}`` body and the
``request-id`` header that repeats the body's id; a variant names another shape of
the same scenario, with the capture or doc it was seen in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._ids import signature
from .._variants import Variant, stream_cut_variants
from ._replies import OVERLOADED_MESSAGE, request_id, response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply

__all__ = ["ERRORS", "REDACTED_THINKING", "THINKING", "VARIANTS", "VARIANT_ERRORS", "error_reply"]

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

#: What a thinking model returns before its answer: a signed thinking block, and the
#: encrypted form Claude sends for thinking its safety systems flagged.
THINKING = Reasoning(
    ReasoningKind.THINKING.value,
    text=FX.thinking,
    signature=signature("anthropic/reasoning/signature", 180),
    provider="anthropic",
)
REDACTED_THINKING = Reasoning(
    ReasoningKind.REDACTED_THINKING.value,
    data=signature("anthropic/reasoning/redacted", 240),
    provider="anthropic",
)

VARIANTS: Mapping[str, Any] = {
    # A thinking model's answer: its thinking blocks first, then the text.
    "reasoning": (
        Variant(
            "thinking",
            "a thinking block and its signature (streamed as thinking_delta, then signature_delta), "
            "then text",
            "vercel/ai packages/anthropic/src/__fixtures__/anthropic-clear-thinking.1.chunks.txt "
            "(claude-sonnet-4-5); https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking",
            reasoning=(THINKING,),
            source_kind="capture",
        ),
        Variant(
            "redacted-thinking",
            "a thinking block, then a redacted_thinking block (its data, whole in content_block_start), "
            "then text",
            "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#thinking-redaction",
            reasoning=(THINKING, REDACTED_THINKING),
            source_kind="docs",
        ),
    ),
    **stream_cut_variants(
        "message_stop",
        "https://docs.anthropic.com/en/docs/build-with-claude/streaming (the event flow)",
        "charmbracelet/fantasy#245 and SamSaffron/term-llm#955 (a stream that reached EOF "
        "without message_stop taken for a finished turn)",
        "https://docs.anthropic.com/en/api/messages",
    ),
    # A tool_use block's input_json_delta fragments that do not join to JSON, on a
    # tool_use turn; a whole reply's input is an object, so only a stream carries them.
    "corrupt-arguments": (
        Variant(
            "unterminated-string",
            "input_json_delta fragments ending inside a string, the object left open",
            "https://docs.claude.com/en/docs/agents-and-tools/tool-use/fine-grained-tool-streaming "
            "(no guarantee the stream completes in a valid JSON string); earendil-works/pi#2419",
            source_kind="docs",
        ),
        Variant(
            "trailing-garbage",
            "input_json_delta fragments: a whole object, then a closing brace too many",
            "anthropics/anthropic-sdk-python#1265 (malformed input_json_delta JSON from a real "
            "stream); earendil-works/pi#3175",
            source_kind="issue",
        ),
    ),
    # Streams since about Sep 2025 repeat the input tokens and cache counts in
    # message_delta (45 of 79 in pydantic-ai tests/models/cassettes/test_anthropic); the
    # older ones count only the output there (34 of 79).
    "text/stream": (
        Variant(
            "delta-input-tokens",
            "message_delta.usage with input_tokens and cache counts",
            "vercel/ai packages/anthropic/src/__fixtures__/anthropic-message-delta-input-tokens.chunks.txt",
            source_kind="capture",
        ),
        Variant(
            "delta-output-only",
            "message_delta.usage with output_tokens only",
            "pydantic/pydantic-ai tests/models/cassettes/test_anthropic (34 of 79 streams)",
            source_kind="capture",
        ),
    ),
    "quota": (
        Variant(
            "credit-balance-400",
            "400 credit balance too low",
            "anthropics/claude-code#4684, #4208, #34522, #66314; continuedev/continue#5499",
            source_kind="issue",
        ),
        Variant(
            "spend-limit-429",
            "429 rate_limit_error with details.error_code enforced_spend_limit_reached",
            "https://docs.claude.com/en/api/rate-limits (spend limits)",
            source_kind="docs",
        ),
        Variant(
            "billing-402",
            "402 billing_error",
            "https://docs.claude.com/en/api/errors (402 billing_error)",
            source_kind="docs",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The error body and headers Anthropic answers ``scenario`` (in ``variant``) with."""
    from ...provider.replies import JsonReply

    status, type_, message_, details, extra = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    error: Dict[str, Any] = {"type": type_, "message": message_}
    if details is not None:
        error["details"] = details
    rid = request_id()
    body = {"type": "error", "error": error, "request_id": rid}
    return JsonReply(body, status=status, headers=response_headers(extra, rid))
