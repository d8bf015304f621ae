"""Cohere's error table and variants: each real shape it answers a scenario with, and where it is written.

Reference: https://docs.cohere.com/reference/errors (the statuses and their example
messages) and Cohere's OpenAPI spec (cohere-ai/cohere-developer-experience
``cohere-openapi.yaml``, ``/v2/chat``: the statuses, ``ChatFinishReason``,
``ChatMessageEndEvent``). An error is a status and ``{"message": ...}``, an ``id``
beside it in some; nothing else in the body says what kind it is. No capture of a
Cohere error reply was found (issue 24's research, section 19.3), so each error
variant's title says which document it is built from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Tuple

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._variants import Variant, stream_cut_variants
from ._replies import TOOL_PLAN, message_id, response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply

__all__ = [
    "ERRORS",
    "PLAN",
    "STREAM_FAILURES",
    "THINKING",
    "VARIANTS",
    "error_reply",
]

ERRORS_DOCS = "https://docs.cohere.com/reference/errors"
SPEC = "cohere-ai/cohere-developer-experience cohere-openapi.yaml"
STREAMING_DOCS = "https://docs.cohere.com/v2/docs/streaming"

#: (scenario, variant) -> (status, message, whether the body has an id beside it).
ERRORS: Mapping[Tuple[str, str], Tuple[int, str, bool]] = {
    ("rate-limit", "trial-key-429"): (
        429,
        "You are using a Trial key, which is limited to 40 API calls / minute. You can continue to use "
        "the Trial key for free or upgrade to a Production key with higher rate limits at "
        "'https://dashboard.cohere.com/api-keys'. Contact us on 'https://discord.gg/XW44jPfYJu' or "
        "email us at support@cohere.com with any questions",
        False,
    ),
    ("quota", "billing-402"): (
        402,
        "Maximum billing reached for this API key as set in your dashboard, please go to "
        "https://dashboard.cohere.com/billing?tab=payment to increase your maximum amount to continue "
        "using this API key. Your billing capacity will reset at the beginning of next month.",
        False,
    ),
    ("quota", "trial-monthly-429"): (
        429,
        "You are using a Trial key, which is limited to 1000 API calls / month.",
        True,
    ),
    ("auth", "invalid-token-401"): (401, "invalid api token", False),
    ("overloaded", "service-unavailable-503"): (503, "service unavailable", True),
    ("server-error", "internal-500"): (500, "internal server error", True),
    ("context-overflow", "too-many-tokens-400"): (
        400,
        "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 4292. Try "
        "using a shorter prompt, or enabling prompt truncating. See "
        "https://docs.cohere.com/reference/generate for more details.",
        False,
    ),
}

#: stream-error variant -> (finish_reason, delta.error) of the message-end that fails the stream.
STREAM_FAILURES: Mapping[str, Tuple[str, Optional[str]]] = {
    "finish-error": ("ERROR", "internal server error"),
    "finish-timeout": ("TIMEOUT", None),
}

#: What a reasoning model returns before its answer: a ``thinking`` content item.
THINKING = Reasoning(ReasoningKind.THINKING.value, text=FX.thinking, provider="cohere")
#: What a tool turn carries beside its calls: the ``tool_plan``, Cohere's chain of thought
#: for the calls, which its docs send back with them (https://docs.cohere.com/v2/docs/tool-use-overview).
PLAN = Reasoning(ReasoningKind.THINKING.value, text=TOOL_PLAN, provider="cohere")

VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    "text": (
        Variant(
            "cached-tokens",
            "usage with billed_units, tokens and cached_tokens",
            "vercel/ai packages/cohere/src/__fixtures__/cohere-text.json and cohere-text.chunks.txt "
            "(2025 payloads)",
            source_kind="capture",
        ),
        Variant(
            "billed-and-tokens",
            "usage with billed_units and tokens only",
            "langchain-ai/langchain-cohere libs/cohere/tests/integration_tests/cassettes/test_invoke.yaml "
            "and test_stream.yaml (2024-11, command-r)",
            source_kind="capture",
        ),
    ),
    "reasoning": (
        Variant(
            "thinking",
            "a thinking content item (streamed as content-delta thinking), then the text item",
            "vercel/ai packages/cohere/src/__fixtures__/cohere-reasoning.json and "
            "cohere-reasoning.chunks.txt (the payloads; the fixture's event: lines are vercel's "
            "own); "
            "https://docs.cohere.com/docs/reasoning",
            reasoning=(THINKING,),
            source_kind="capture",
        ),
    ),
    # No cut falls between the finish reason and the end: message-end carries the finish
    # reason and the usage and ends the turn (the data: [DONE] after it ends nothing more).
    **stream_cut_variants(
        "message-end",
        f"{STREAMING_DOCS} (message-end is the final event)",
        "cohere-ai/cohere-python src/cohere/v2/raw_client.py (Cohere's SDK: chat_stream ends quietly "
        "when the body ends, [DONE] or not, so a cut stream reads as a short one)",
        "https://docs.cohere.com/reference/chat",
        "a call's tool-call-start and its first argument fragment",
    ),
    # The argument text is the model's, unchecked, in both forms: a whole reply's
    # tool_calls[].function.arguments is a string, as every tool-call-delta is.
    "corrupt-arguments": (
        Variant(
            "unterminated-string",
            "arguments ending inside a string, the object left open",
            "https://docs.cohere.com/reference/chat (function.arguments is a string the model "
            "writes); vercel/ai packages/cohere/src/cohere-chat-language-model.ts (the comment of a "
            "client: Cohere sometimes returns null, not an object, for a call's arguments)",
            source_kind="docs",
        ),
        Variant(
            "trailing-garbage",
            "a whole object, then a closing brace too many",
            "https://docs.cohere.com/reference/chat (function.arguments is a string the model "
            "writes); vercel/ai packages/cohere/src/cohere-chat-language-model.ts (the comment of a "
            "client: Cohere sometimes returns null, not an object, for a call's arguments)",
            source_kind="docs",
        ),
    ),
    "rate-limit": (
        Variant(
            "trial-key-429",
            "429 Trial key limit, a message only, no retry-after (docs; no capture)",
            f"{ERRORS_DOCS} (429 and its example messages); no capture of a Cohere 429's headers was found",
            source_kind="docs",
        ),
    ),
    "quota": (
        Variant(
            "billing-402",
            "402 maximum billing reached (docs; no capture)",
            f"{ERRORS_DOCS} (402 Payment Required and its example messages)",
            source_kind="docs",
        ),
        Variant(
            "trial-monthly-429",
            "429 Trial key monthly limit: the same status and body shape as a rate limit (docs; no capture)",
            "https://docs.cohere.com/docs/rate-limits (trial keys are limited to 1,000 API calls a "
            f"month); {ERRORS_DOCS} (such limits answer 429)",
            # Only the message tells it from the per-minute 429: the bytes allow either.
            error_kinds=("quota", "rate_limit"),
            source_kind="docs",
        ),
    ),
    "auth": (
        Variant(
            "invalid-token-401",
            "401 invalid api token (docs; no capture)",
            f"{ERRORS_DOCS} (401 and its example messages)",
            source_kind="docs",
        ),
    ),
    "overloaded": (
        Variant(
            "service-unavailable-503",
            "503 ServiceUnavailable, an id and a message (docs; no capture)",
            f"{SPEC} (/v2/chat answers 503 ServiceUnavailable when too many users come at once)",
            source_kind="docs",
        ),
    ),
    "server-error": (
        Variant(
            "internal-500",
            "500 internal server error, an id and a message (docs; no capture)",
            f"{ERRORS_DOCS} (500 Server Error); {SPEC} (/v2/chat answers InternalServerError)",
            source_kind="docs",
        ),
    ),
    "context-overflow": (
        Variant(
            "too-many-tokens-400",
            "400 too many tokens: the prompt exceeds the limit (docs; no capture)",
            f"{ERRORS_DOCS} (400 and its example messages)",
            source_kind="docs",
            # Its status says a bad request and nothing else does; only the message's
            # documented "too many tokens:" says the prompt does not fit.
            error_kinds=("context_overflow", "invalid_request"),
        ),
    ),
    # A generation that fails after the 200 ends with message-end: Cohere has no error
    # event, and its finish reasons ERROR ("failed due to an internal error") and
    # TIMEOUT say what happened. Both are retryable server errors.
    "stream-error": (
        Variant(
            "finish-error",
            "the partial text, then message-end with finish_reason ERROR and delta.error (docs; no capture)",
            f"{SPEC} (ChatFinishReason ERROR, ChatMessageEndEvent delta.error)",
            error_kind="server_error",
            source_kind="docs",
        ),
        Variant(
            "finish-timeout",
            "the partial text, then message-end with finish_reason TIMEOUT (docs; no capture)",
            f"{SPEC} (ChatFinishReason TIMEOUT)",
            error_kind="server_error",
            source_kind="docs",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The status and ``{"message"}`` body Cohere answers ``scenario`` (in ``variant``) with."""
    from ...provider.replies import JsonReply

    names = [v.name for v in VARIANTS[scenario]]
    status, message, with_id = ERRORS[(scenario, variant or names[0])]
    body: Any = (
        {"id": message_id(f"error/{scenario}"), "message": message} if with_id else {"message": message}
    )
    return JsonReply(body, status=status, headers=response_headers())
