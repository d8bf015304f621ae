"""Anthropic's error table and variants: each real shape it answers a scenario with.

Reference: https://docs.anthropic.com/en/api/errors. An error is a status, an
``{"type": "error", "error": {"type", "message"}, "request_id"}`` body and the
``request-id`` header that repeats the body's id; a variant names another shape of
the same scenario, with the capture or doc it was seen in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Tuple

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._ids import signature
from .._variants import CONTEXT_OVERFLOW_OR_BAD_REQUEST, Variant, stream_cut_variants
from ._replies import OVERLOADED_MESSAGE, request_id, response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply

__all__ = [
    "CORRUPT_ARGUMENTS",
    "ERRORS",
    "QUOTA_OR_BAD_REQUEST",
    "QUOTA_OR_RATE_LIMIT",
    "REDACTED_THINKING",
    "REFUSED_TEXT",
    "SONNET_4_5_STREAM",
    "THINKING",
    "VARIANTS",
    "VARIANT_ERRORS",
    "error_reply",
]

#: What a quota's 400 ``invalid_request_error`` may be reported as: its status and type
#: say a bad request (``invalid_request``, not retryable), and only its message says the
#: account is out of credit or at its spend limit; the message is no contract.
QUOTA_OR_BAD_REQUEST = ("quota", "invalid_request")
#: What a subscription's spend-limit 429 may be reported as: its type (``rate_limit_error``,
#: no ``details``) and its retry-after say a rate limit; only its message says the month's
#: spend is reached.
QUOTA_OR_RATE_LIMIT = ("quota", "rate_limit")
#: The text a refused turn streams before its refusal: the docs' example streams text, then
#: stops with ``refusal`` (the classifier stops the model mid-answer).
REFUSED_TEXT = FX.partial_text

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
    # The usage-tier monthly cap: a 429 told apart from a rate limit only by
    # details.error_code, and without retry-after because waiting a minute does not help.
    # Documented, body and all, in https://docs.claude.com/en/api/rate-limits; no capture
    # or quoted body of it has been found.
    "quota": (
        429,
        "rate_limit_error",
        "You have reached your API usage limits: your organization has crossed its monthly API "
        "usage threshold, set based on your organization's API tier. You will regain access on "
        "2026-09-01 at 00:00 UTC.",
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

#: Broken argument JSON in a stream of Claude's events, as the API and the hosts that
#: pass its events on (Vertex AI, Bedrock InvokeModel) send it. Only fine-grained tool
#: streaming sends a call's input unvalidated, and a request turns it on: without it the
#: API buffers and validates the JSON, so these shapes come only to a request that asks.
CORRUPT_ARGUMENTS: Tuple[Variant, ...] = (
    Variant(
        "unterminated-string",
        "input_json_delta fragments ending inside a string, the object left open",
        "https://docs.claude.com/en/docs/agents-and-tools/tool-use/fine-grained-tool-streaming "
        "(no guarantee the stream completes in a valid JSON string); earendil-works/pi#2419",
        source_kind="docs",
        asks="fine-grained-tool-streaming",
    ),
    Variant(
        "trailing-garbage",
        "input_json_delta fragments: a whole object, then a closing brace too many",
        "https://docs.claude.com/en/docs/agents-and-tools/tool-use/fine-grained-tool-streaming "
        "(no guarantee of valid JSON); NousResearch/hermes-agent#107830 (input_json_delta "
        "fragments seen on the wire that do not parse); anthropics/anthropic-sdk-python#1265 "
        "replays a real stream with one delta broken by hand",
        source_kind="docs",
        asks="fine-grained-tool-streaming",
    ),
)


#: The finish reasons a ``pause_turn`` turn may end with. The contract has no "paused"
#: reason, and the bytes fit two: ``stop``, the turn ended with nothing for the caller to
#: run (vercel/ai's and any-llm's stop-reason maps); ``length``, the turn is unfinished
#: and may be continued by sending it back (LiteLLM's ``_FINISH_REASON_MAP``). A tool
#: turn would hand the caller the API's own server_tool_use, so ``tool_calls`` never fits.
PAUSED = ("stop", "length")


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
    # A spend limit the organization or workspace set: a 400 invalid_request_error, its
    # message the only sign it is not an ordinary bad request.
    ("quota", "spend-limit-400"): (
        400,
        "invalid_request_error",
        "You have reached your specified API usage limits. You will regain access on "
        "2026-01-01 at 00:00 UTC.",
        None,
        {},
    ),
    # A Claude subscription's monthly spend limit: a plain 429 rate_limit_error with a
    # retry-after of minutes. The reports quote no value; the one here is of that order.
    ("quota", "subscription-spend-429"): (
        429,
        "rate_limit_error",
        "This request would exceed your account's monthly spend limit. Please try again later.",
        None,
        {"retry-after": "900"},
    ),
    # Documented only: no real 402 body has been quoted, so the message is the docs'
    # description of the error, not words the API was seen sending.
    ("quota", "billing-402"): (
        402,
        "billing_error",
        "There's an issue with your billing or payment information.",
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

#: The ``text`` stream played as claude-sonnet-4-5's capture of 2026-03 shows it.
SONNET_4_5_STREAM = "delta-input-tokens"

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
            asks="thinking",
            source_kind="capture",
        ),
        Variant(
            "redacted-thinking",
            "a thinking block, then a redacted_thinking block (its data, whole in content_block_start), "
            "then text",
            "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#thinking-redaction",
            reasoning=(THINKING, REDACTED_THINKING),
            asks="thinking",
            source_kind="docs",
        ),
    ),
    **stream_cut_variants(
        "message_stop",
        "https://docs.anthropic.com/en/docs/build-with-claude/streaming (the event flow)",
        "charmbracelet/fantasy#245 and SamSaffron/term-llm#955 (a stream that reached EOF "
        "without message_stop taken for a finished turn)",
        "https://docs.anthropic.com/en/api/messages",
        after_finish="message_delta with stop_reason tool_use and the usage, then the stream cut "
        "between two events, before message_stop",
    ),
    # A tool_use block's input_json_delta fragments that do not join to JSON, on a
    # tool_use turn; a whole reply's input is an object, so only a stream carries them.
    "corrupt-arguments": CORRUPT_ARGUMENTS,
    # Streams since about Sep 2025 repeat the input tokens and cache counts in
    # message_delta (45 of 79 in pydantic-ai tests/models/cassettes/test_anthropic); the
    # older ones count only the output there (34 of 79). A turn that used a server tool
    # (web search) may pause with the server's call left without its result.
    "text/chat": (
        Variant(
            "end-turn",
            "a text block, stop_reason end_turn",
            "pydantic/pydantic-ai tests/models/cassettes/test_anthropic/"
            "test_anthropic_model_instructions.yaml",
            source_kind="capture",
        ),
        Variant(
            "pause-turn",
            "a text block, then a server_tool_use block (web_search) with no result, stop_reason "
            "pause_turn: finish_reason stop or length, and no tool call",
            "pydantic/pydantic-ai tests/models/cassettes/test_anthropic/test_pause_turn_web_search_vcr.yaml "
            "(claude-sonnet-4-5, interaction 0)",
            source_kind="capture",
            finish_reasons=PAUSED,
            asks="server-tool",
        ),
    ),
    "text/stream": (
        Variant(
            SONNET_4_5_STREAM,
            "message_delta.usage with input_tokens and cache counts; as claude-sonnet-4-5 streamed "
            "in 2026-03: usage.inference_geo not_available, and no stop_details in message_start or "
            "message_delta",
            "pydantic/pydantic-ai tests/models/cassettes/test_anthropic/"
            "test_request_stream_fallback_for_high_max_tokens.yaml (claude-sonnet-4-5-20250929, raw SSE, "
            "2026-03); vercel/ai packages/anthropic/src/__fixtures__/anthropic-text.chunks.txt",
            source_kind="capture",
        ),
        Variant(
            "delta-output-only",
            "message_delta.usage with output_tokens only",
            "pydantic/pydantic-ai tests/models/cassettes/test_anthropic (34 of 79 streams)",
            source_kind="capture",
        ),
        Variant(
            "pause-turn",
            "a text block, then a server_tool_use block (web_search) and its input_json_delta, no "
            "result, message_delta stop_reason pause_turn: finish_reason stop or length, and no "
            "tool call",
            "pydantic/pydantic-ai tests/models/cassettes/test_anthropic/"
            "test_pause_turn_web_search_streaming_vcr.yaml (claude-sonnet-4-5, interaction 0, raw SSE)",
            source_kind="capture",
            finish_reasons=PAUSED,
            asks="server-tool",
        ),
    ),
    # A refusal names its category where it has one; both fields are null where not.
    "content-filter": (
        Variant(
            "named-category",
            "text, then stop_reason refusal, stop_details with the category cyber and its explanation",
            "https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/"
            "handle-streaming-refusals (the response format; in a stream, stop_details on message_delta)",
            text=REFUSED_TEXT,
            source_kind="docs",
        ),
        Variant(
            "uncategorized",
            "text, then stop_reason refusal, stop_details with category and explanation null",
            "https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/"
            "handle-streaming-refusals (category and explanation are null where the refusal maps to "
            "no named category)",
            text=REFUSED_TEXT,
            source_kind="docs",
        ),
    ),
    # A prompt past the window is a 400 invalid_request_error like any bad request: only
    # its message says the prompt is too long.
    "context-overflow": (
        Variant(
            "prompt-too-long-400",
            "400 invalid_request_error, prompt is too long (context overflow in the message only)",
            "earendil-works/pi#102 and boldsoftware/exe.dev#62 (raw 400 bodies: invalid_request_error, "
            "prompt is too long: N tokens > 200000 maximum)",
            error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
            source_kind="issue",
        ),
    ),
    # Each real quota answer, and what its bytes allow a backend to report: only the
    # 402 and the tier cap's details.error_code say quota in a machine-readable field.
    "quota": (
        Variant(
            "credit-balance-400",
            "400 invalid_request_error, credit balance too low (quota in the message only)",
            "anthropics/claude-code#4684, #4208, #34522, #66314; continuedev/continue#5499",
            error_kinds=QUOTA_OR_BAD_REQUEST,
            source_kind="issue",
        ),
        Variant(
            "spend-limit-400",
            "400 invalid_request_error, the spend limit the organization or workspace set (quota in "
            "the message only)",
            "anthropics/claude-code#2127, #38038, #38035 (workspace: #1047); "
            "https://docs.claude.com/en/api/errors (a 400 when usage reaches a spend limit you set)",
            error_kinds=QUOTA_OR_BAD_REQUEST,
            source_kind="issue",
        ),
        Variant(
            "tier-cap-429",
            "429 rate_limit_error with details.error_code enforced_spend_limit_reached and no "
            "retry-after, the usage tier's monthly cap (documented, not captured)",
            "https://docs.claude.com/en/api/rate-limits (the body, and no retry-after)",
            source_kind="docs",
        ),
        Variant(
            "subscription-spend-429",
            "429 rate_limit_error without details, retry-after of minutes, a subscription's monthly "
            "spend limit (quota in the message only)",
            "can1357/oh-my-pi#5418, NousResearch/hermes-agent#91091, earendil-works/pi#9849 (the "
            "message and a minutes-long retry-after; no value quoted, 900 here)",
            retry_after=900.0,
            error_kinds=QUOTA_OR_RATE_LIMIT,
            source_kind="issue",
        ),
        Variant(
            "billing-402",
            "402 billing_error (documented, not captured)",
            "https://docs.claude.com/en/api/errors (402 billing_error; no real 402 body has been "
            "quoted, so its message is the docs' description)",
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
