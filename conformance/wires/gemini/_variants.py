"""Gemini API errors and variants: the ``{"error": google.rpc.Status}`` bodies, and each
real shape the API answers a scenario with.

Reference: https://ai.google.dev/gemini-api/docs/troubleshooting and
https://cloud.google.com/apis/design/errors (``google.rpc.Status``, the ``details`` types
``QuotaFailure``, ``RetryInfo``, ``Help``, ``ErrorInfo``).

An error to a streamed ``?alt=sse`` request is sent with ``Content-Type:
text/event-stream`` and a plain (not SSE-framed) pretty JSON body, as the real front end
does (crewAI ``lib/crewai/tests/cassettes/llms/google/test_google_streaming_returns_usage_metrics.yaml``,
3 captures); a client that picks its parser from the content type meets it there. A
variant names another shape of the same scenario, with the capture or doc it was seen
in.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._google import rpc_status
from .._ids import signature
from .._variants import CONTEXT_OVERFLOW_OR_BAD_REQUEST, Variant, stream_cut_variants
from ._replies import FUNCTION_CALL_ID, GEMINI, Dialect

if TYPE_CHECKING:
    from ...provider.replies import JsonReply

__all__ = [
    "ERRORS",
    "ErrorTable",
    "OVERLOADED_MESSAGE",
    "QUOTA_RETRY_DELAY",
    "RATE_LIMIT_VARIANTS",
    "REASONING_VARIANTS",
    "VARIANTS",
    "error_body",
    "error_reply",
    "retry_delay",
]

OVERLOADED_MESSAGE = "The model is overloaded. Please try again later."


_RATE_LIMIT_QUOTA_ID = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
_DAILY_QUOTA_ID = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"


def quota_failure(quota_id: str, limit: str) -> Dict[str, Any]:
    """A ``google.rpc.QuotaFailure`` detail; the ``quotaId`` says per minute or per day."""
    return {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
            {
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": quota_id,
                "quotaDimensions": {"location": "global", "model": "conformance-model"},
                "quotaValue": limit,
            }
        ],
    }


def retry_info(seconds: int) -> Dict[str, Any]:
    """A ``google.rpc.RetryInfo`` detail: ``retryDelay`` is a Duration string (``"7s"``)."""
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{seconds}s"}


_HELP = {
    "@type": "type.googleapis.com/google.rpc.Help",
    "links": [
        {
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
        }
    ],
}

#: The per-minute limit's message (RooCodeInc/Roo-Code#3883, google/langextract#50).
_RATE_LIMIT_TEXT = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)
_QUOTA_TEXT = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. "
    "To monitor your current usage, head to: https://ai.dev/usage?tab=rate-limit. \n"
    "* Quota exceeded for metric: generativelanguage.googleapis.com/"
    "generate_content_free_tier_requests, limit: {limit}, model: conformance-model\n"
    "Please retry in {delay}."
)
_INVALID_KEY = "API key not valid. Please pass a valid API key."
#: The delay an exhausted daily quota's ``RetryInfo`` names (the time left until the day
#: resets): a backend reports it as ``retry_after``, and calls the error non-retryable.
QUOTA_RETRY_DELAY = 52758.0

#: scenario -> (HTTP status, error.status, error.message, error.details)
ERRORS: Mapping[str, Tuple[int, str, str, List[Dict[str, Any]]]] = {
    # A per-minute limit and an exhausted daily quota are both 429 RESOURCE_EXHAUSTED;
    # only the QuotaFailure's quotaId (PerMinute / PerDay) and the retry delay differ.
    "rate-limit": (
        429,
        "RESOURCE_EXHAUSTED",
        _RATE_LIMIT_TEXT,
        # The detail order of the per-minute 429s quoted whole: QuotaFailure, Help, RetryInfo.
        [quota_failure(_RATE_LIMIT_QUOTA_ID, "10"), _HELP, retry_info(int(FX.retry_after))],
    ),
    "quota": (
        429,
        "RESOURCE_EXHAUSTED",
        _QUOTA_TEXT.format(limit=250, delay="52758.312448806s"),
        [_HELP, quota_failure(_DAILY_QUOTA_ID, "250"), retry_info(int(QUOTA_RETRY_DELAY))],
    ),
    # A wrong API key is a 400 INVALID_ARGUMENT with ErrorInfo.reason API_KEY_INVALID,
    # not a 401: 401 UNAUTHENTICATED is only for a bad OAuth token.
    "auth": (
        400,
        "INVALID_ARGUMENT",
        _INVALID_KEY,
        [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            },
            {
                "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                "locale": "en-US",
                "message": _INVALID_KEY,
            },
        ],
    ),
    "overloaded": (503, "UNAVAILABLE", OVERLOADED_MESSAGE, []),
    "server-error": (
        500,
        "INTERNAL",
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
        [],
    ),
    "context-overflow": (
        400,
        "INVALID_ARGUMENT",
        "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
        [],
    ),
}


#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Tuple[str, str], Tuple[int, str, str, List[Dict[str, Any]]]] = {
    # A bare 429 with no details at all, so no RetryInfo and no delay to report.
    ("rate-limit", "no-details"): (
        429,
        "RESOURCE_EXHAUSTED",
        "Resource exhausted. Please try again later. Please refer to "
        "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.",
        [],
    ),
}

RATE_LIMIT_VARIANTS = (
    Variant(
        "retry-info",
        "429 with QuotaFailure, Help and RetryInfo details",
        "RooCodeInc/Roo-Code#3883 (a whole 429 body: QuotaFailure per minute, Help, RetryInfo "
        '"26s"); google/langextract#50 (the per-minute request quota, quotaValue "10", the same '
        "order)",
        retry_after=FX.retry_after,
        source_kind="issue",
    ),
    Variant(
        "no-details",
        "429 RESOURCE_EXHAUSTED without details (no RetryInfo)",
        "crewAIInc/crewAI lib/crewai/tests/cassettes "
        "TestAgentMultimodalGemini.test_video_file[gemini-gemini-2.0-flash].yaml",
        source_kind="capture",
    ),
)


#: A ``google.protobuf.Duration`` in its JSON form: seconds with up to nine decimals, then ``s``.
_DURATION = re.compile(r"^(\d+(?:\.\d{1,9})?)s$")


def retry_delay(body: Any) -> Optional[float]:
    """The seconds of the first ``RetryInfo.retryDelay`` in an ``{"error": google.rpc.Status}``
    body (JSON text or parsed), ``None`` where it has none."""
    if isinstance(body, (bytes, bytearray, str)):
        import json

        try:
            body = json.loads(body)
        except ValueError:
            return None
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            found = _DURATION.match(str(detail.get("retryDelay", "")))
            if found:
                return float(found.group(1))
    return None


#: scenario -> (HTTP status, error.status, error.message, error.details): an error table.
ErrorTable = Mapping[str, Tuple[int, str, str, List[Dict[str, Any]]]]


def error_body(
    scenario: str,
    variant: str = "",
    errors: ErrorTable = ERRORS,
    variant_errors: Mapping[Tuple[str, str], Tuple[int, str, str, List[Dict[str, Any]]]] = VARIANT_ERRORS,
) -> Dict[str, Any]:
    """The ``{"error": google.rpc.Status}`` body Gemini answers ``scenario`` (in ``variant``) with."""
    status, rpc, message, details = variant_errors.get((scenario, variant)) or errors[scenario]
    return rpc_status(status, rpc, message, details)


def error_reply(
    scenario: str, variant: str = "", sse: bool = False, dialect: Dialect = GEMINI, body: Any = None
) -> JsonReply:
    """The whole error response for ``scenario`` (or ``body``); ``sse`` where the request asked for SSE."""
    import dataclasses

    body = error_body(scenario, variant) if body is None else body
    error = body[0] if isinstance(body, list) else body
    reply = dialect.whole(body, status=error["error"]["code"])
    return dataclasses.replace(reply, content_type="text/event-stream") if sse else reply


#: The shapes that differ by model generation or by what was blocked.
VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    # No cut falls between the finish reason and the end: the chunk with finishReason (and
    # the usage) is the stream's last event.
    **stream_cut_variants(
        "the event whose candidate carries finishReason",
        "https://ai.google.dev/api/generate-content#v1beta.Candidate (finishReason: "
        "the reason the model stopped; unset while it is generating)",
        "SamSaffron/term-llm#954 and tashfeenahmed/freellmapi#1288 (a Gemini stream that "
        "reached EOF without a finishReason taken for a finished turn)",
        "https://ai.google.dev/api/generate-content#method:-models.generatecontent",
        call="the whole functionCall part (Gemini never splits one)",
    ),
    "rate-limit": RATE_LIMIT_VARIANTS,
    # A prompt past the window is a 400 INVALID_ARGUMENT with no details, as any bad
    # argument is: only its message counts the tokens.
    "context-overflow": (
        Variant(
            "token-count-400",
            "400 INVALID_ARGUMENT, the input token count past the maximum (context overflow in the "
            "message only)",
            "google-gemini/gemini-cli#4118 and #4231 (raw 400 bodies from the Gemini API with an AI "
            "Studio key: INVALID_ARGUMENT, no details)",
            error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
            source_kind="issue",
        ),
    ),
    "tool-call": (
        Variant(
            "id",
            "functionCall with an id and a thoughtSignature",
            "simonw/llm-gemini tests/cassettes/test_gemini/test_tools_with_nested_pydantic_models.yaml",
            call_id=FUNCTION_CALL_ID,
            source_kind="capture",
        ),
        Variant(
            "signature-without-id",
            "functionCall without an id, with a thoughtSignature",
            "simonw/llm-gemini tests/cassettes/test_gemini/test_tools_with_gemini_3_thought_signatures.yaml",
            source_kind="capture",
        ),
    ),
    "truncated-tool-call/chat": (
        Variant(
            "text-before-limit",
            "the text written before the limit, MAX_TOKENS, no functionCall",
            "pydantic/pydantic-ai tests/models/cassettes/test_google/test_google_model_max_tokens.yaml",
            source_kind="capture",
        ),
        Variant(
            "no-parts",
            "MAX_TOKENS with content {role: model} and no parts: a thinking model spent the budget on "
            "thoughts (a length turn with no text, or an error)",
            "pydantic/pydantic-ai tests/models/cassettes/test_google/"
            "test_google_model_max_tokens_thinking_model_empty_response.yaml",
            source_kind="capture",
            must='report "length" with no text and no call, or fail with an error of the contract\'s '
            "kinds: the limit left nothing to return, and the bytes name no failure",
            text="",
            may_fail=True,
        ),
    ),
    "content-filter/chat": (
        Variant(
            "prompt-blocked",
            "promptFeedback.blockReason and no candidates",
            "https://ai.google.dev/api/generate-content#PromptFeedback (a Vertex MODEL_ARMOR capture)",
            source_kind="docs",
        ),
        Variant(
            "output-blocked",
            "a SAFETY candidate whose content is {}",
            "pydantic/pydantic-ai tests/models/cassettes/test_google/test_google_model_safety_settings.yaml",
            source_kind="capture",
        ),
    ),
}


#: The reasoning a Gemini thinking model returns with an answer: the bare signature
#: Gemini 3 always sends, and a thought summary (``includeThoughts``) with its signature.
SIGNATURE_ONLY = Reasoning(
    ReasoningKind.THOUGHT_SIGNATURE.value,
    signature=signature("gemini/reasoning/signature", 180),
    provider="gemini",
)
THOUGHT_SUMMARY = Reasoning(
    ReasoningKind.THOUGHT_SIGNATURE.value,
    text=FX.thinking,
    signature=signature("gemini/reasoning/thought", 180),
    provider="gemini",
)
REASONING_VARIANTS = (
    Variant(
        "signature",
        "the answer, its last part signed with a thoughtSignature (a stream: one last empty text part)",
        "vercel/ai packages/google/src/__fixtures__/google-reasoning-gemini3.chunks.txt and "
        "google-reasoning-gemini3.json (gemini-3-pro-preview); issue-18073-empty-text-thought-signature."
        "chunks.txt (gemini-3-flash-preview)",
        reasoning=(SIGNATURE_ONLY,),
        source_kind="capture",
    ),
    Variant(
        "thought-summary",
        'thought parts ("thought": true) with a thoughtSignature on the last, then the answer',
        "https://ai.google.dev/gemini-api/docs/thinking#summaries (includeThoughts); "
        "https://ai.google.dev/gemini-api/docs/thought-signatures",
        reasoning=(THOUGHT_SUMMARY,),
        asks="thinking",
        source_kind="docs",
    ),
)
