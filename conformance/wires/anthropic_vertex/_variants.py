"""Claude on Vertex AI: its failures and variants, each a real shape it answers a scenario with.

A failure comes from one of two places. Google's front end answers what it decides
itself, a quota or a bad token, with ``{"error": google.rpc.Status}`` (to a
``streamRawPredict`` call sometimes wrapped in a JSON array); Claude's own failures
pass through in Anthropic's shape, with a ``req_vrtx_`` request id. A variant names
another shape of the same scenario, with the capture, issue or doc it was seen in.
"""

from __future__ import annotations

from typing import Any, Mapping, Tuple

from .._variants import CONTEXT_OVERFLOW_OR_BAD_REQUEST, Variant, stream_cut_variants
from ..anthropic._variants import CORRUPT_ARGUMENTS, REDACTED_THINKING, REFUSED_TEXT, THINKING

__all__ = [
    "ANTHROPIC_ERRORS",
    "GOOGLE_ERRORS",
    "LISTED",
    "VARIANTS",
]

#: What a per-minute quota's 429 may be reported as: its status says a rate limit, and only
#: its message says the quota (of a project whose quota is 0, it never lifts).
QUOTA_OR_RATE_LIMIT = ("quota", "rate_limit")

_QUOTA_HELP = "Please submit a quota increase request. https://cloud.google.com/vertex-ai/docs/generative-ai/quotas-genai."

#: scenario -> (HTTP status, google.rpc status, message): what Google's front end answers itself.
GOOGLE_ERRORS: Mapping[str, Tuple[int, str, str]] = {
    "rate-limit": (
        429,
        "RESOURCE_EXHAUSTED",
        "Quota exceeded for aiplatform.googleapis.com/"
        "online_prediction_input_tokens_per_minute_per_base_model "
        f"with base model: anthropic-claude-opus-4. {_QUOTA_HELP}",
    ),
    "quota": (
        429,
        "RESOURCE_EXHAUSTED",
        "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base "
        f"model: anthropic-claude-sonnet-4. {_QUOTA_HELP}",
    ),
    "auth": (
        401,
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
        "other valid authentication credential. See "
        "https://developers.google.com/identity/sign-in/web/devconsole-project.",
    ),
    "server-error": (500, "INTERNAL", "Internal error encountered."),
}

#: scenario -> (HTTP status, error.type, message, with a request id): what Claude answers, passed on.
ANTHROPIC_ERRORS: Mapping[str, Tuple[int, str, str, bool]] = {
    # As quoted from Vertex, with details null and no request id (langgenius/dify#7122).
    "overloaded": (529, "overloaded_error", "Overloaded", False),
    "context-overflow": (
        400,
        "invalid_request_error",
        "prompt is too long: 208310 tokens > 200000 maximum",
        True,
    ),
}

#: The variants a ``streamRawPredict`` call is refused with in a JSON array.
LISTED = frozenset({"resource-exhausted-list"})

_VERTEX_DOCS = "https://docs.anthropic.com/en/api/claude-on-vertex-ai"
_RAW_PREDICT = "https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/use-claude"

_RESOURCE_EXHAUSTED = Variant(
    "resource-exhausted",
    "429 RESOURCE_EXHAUSTED, a google.rpc.Status object, no retry delay",
    'anthropics/claude-code#1440 (429 {"error":{"code":429,...,'
    '"status":"RESOURCE_EXHAUSTED"}}); '
    "anthropics/claude-code#1378 (its headers: application/json; charset=UTF-8, scaffolding on HTTPServer2)",
    source_kind="issue",
)

_REFUSALS = (
    "https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/"
    "handle-streaming-refusals"
)

VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    "reasoning": (
        Variant(
            "thinking",
            "a thinking block and its signature (streamed as thinking_delta, then signature_delta), "
            "then text",
            f"{_VERTEX_DOCS} (the Messages API's blocks); "
            "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking",
            reasoning=(THINKING,),
            asks="thinking",
            source_kind="docs",
        ),
        Variant(
            "redacted-thinking",
            "a thinking block, then a redacted_thinking block (its data, whole in content_block_start), "
            "then text",
            f"{_VERTEX_DOCS}; "
            "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#thinking-redaction",
            reasoning=(THINKING, REDACTED_THINKING),
            asks="thinking",
            source_kind="docs",
        ),
    ),
    **stream_cut_variants(
        "message_stop",
        f"{_RAW_PREDICT} (streamRawPredict streams Claude's events, message_stop last)",
        "charmbracelet/fantasy#245 and SamSaffron/term-llm#955 (a Claude stream that reached EOF "
        "without message_stop taken for a finished turn)",
        f"{_RAW_PREDICT} (rawPredict)",
        after_finish="message_delta with stop_reason tool_use and the usage, then the stream cut "
        "between two events, before message_stop",
    ),
    "corrupt-arguments": CORRUPT_ARGUMENTS,
    # Where vertex_event comes in the stream is recorded nowhere: after message_start is
    # read from its usage, which is message_start's (output_tokens 1).
    "text/stream": (
        Variant(
            "without-vertex-event",
            "Claude's events only, message_delta.usage with output_tokens only",
            "go-steer/mast internal/providers/anthropic/usage_detail_test.go (a measured "
            "claude-sonnet-5 turn on Vertex us-east5, 2026-09, replayed)",
            source_kind="capture",
        ),
        Variant(
            "vertex-event",
            "a vertex_event with the usage and its tiers after message_start",
            "vercel/ai#11309 and #13436, anomalyco/opencode#13914 (the event's payload); its place "
            "after message_start inferred from its usage",
            source_kind="issue",
        ),
    ),
    "rate-limit": (_RESOURCE_EXHAUSTED,),
    "rate-limit/stream": (
        _RESOURCE_EXHAUSTED,
        Variant(
            "resource-exhausted-list",
            "429 RESOURCE_EXHAUSTED, the google.rpc.Status in a JSON array, no retry delay",
            'cline/cline#651 (429 [{"error":{...}}]); Aider-AI/aider#1912 (the array, pretty-printed)',
            source_kind="issue",
        ),
    ),
    "quota": (
        Variant(
            "quota-exhausted",
            "429 RESOURCE_EXHAUSTED, the quota per base model in the message only",
            "anthropics/anthropic-sdk-python#963 and Intelligent-Internet/ii-agent#41 (a project "
            "whose quota is 0: every request gets it)",
            error_kinds=QUOTA_OR_RATE_LIMIT,
            source_kind="issue",
        ),
    ),
    "auth": (
        Variant(
            "unauthenticated",
            "401 UNAUTHENTICATED (a google.rpc.Status)",
            "googleapis/java-aiplatform#1056 (aiplatform's UNAUTHENTICATED message); "
            "https://cloud.google.com/apis/design/errors",
            source_kind="docs",
        ),
    ),
    "overloaded": (
        Variant(
            "overloaded-529",
            "529 overloaded_error, details null",
            "langgenius/dify#7122 (the body, from Vertex); "
            "https://docs.claude.com/en/api/errors (529 for overloaded_error)",
            source_kind="issue",
        ),
    ),
    "server-error": (
        Variant(
            "internal",
            "500 INTERNAL (a google.rpc.Status)",
            "https://cloud.google.com/apis/design/errors (INTERNAL, 500; no Vertex capture)",
            source_kind="docs",
        ),
    ),
    "context-overflow": (
        Variant(
            "prompt-too-long",
            "400 invalid_request_error with a req_vrtx_ request id (context overflow in the message only)",
            "anthropics/claude-code#12429 (Claude's 400 passed on by Vertex, request_id req_vrtx_…); "
            "https://docs.claude.com/en/api/errors",
            error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
            source_kind="issue",
        ),
    ),
    "stream-error": (
        Variant(
            "overloaded-event",
            "text, then event: error with overloaded_error, details null",
            "anthropics/anthropic-sdk-typescript#346 (SSE Error on Vertex); langgenius/dify#7122",
            source_kind="issue",
        ),
    ),
    # The model's refusal, as Anthropic's API gives it: a named category, or none.
    "content-filter": (
        Variant(
            "named-category",
            "text, then stop_reason refusal, stop_details with the category cyber and its explanation",
            f"{_REFUSALS} (the response format); "
            f"{_VERTEX_DOCS} (the Messages API on Vertex)",
            text=REFUSED_TEXT,
            source_kind="docs",
        ),
        Variant(
            "uncategorized",
            "text, then stop_reason refusal, stop_details with category and explanation null",
            f"{_REFUSALS} (both null where the refusal maps to no named category); "
            f"{_VERTEX_DOCS} (the Messages API on Vertex)",
            text=REFUSED_TEXT,
            source_kind="docs",
        ),
    ),
}


def overloaded_error() -> Mapping[str, Any]:
    """Claude's overload as Vertex passes it on: ``details`` null, no request id."""
    return {"type": "error", "error": {"details": None, "type": "overloaded_error", "message": "Overloaded"}}
