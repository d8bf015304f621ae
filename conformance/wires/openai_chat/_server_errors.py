"""The OpenAI-compatible servers' own failure replies: Mistral's envelope and Groq's 429.

Strategy: each body is the one a user quoted raw from the server, and each header one
the server's docs or a quoted dump name; nothing of api.openai.com's envelope leaks in.
Mistral's failures carry their fields at the top level, not under ``error``: its API's
``{"object": "error", "message", "type", "param", "code"}`` (``code`` a string of
digits, and since 2026 ``raw_status_code`` too), and its gateway's 401 ``{"message",
"request_id"}``. Groq keeps OpenAI's nested object but types a token limit ``tokens``,
drops ``param``, and sends ``retry-after`` (seconds) with ``x-ratelimit-*`` on a 429.
A server's failure before the stream is the same status and body whole or streamed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple

from .._ids import http_date, provider_id

if TYPE_CHECKING:
    from ...provider.replies import Reply

__all__ = ["GROQ_RETRY_AFTER", "SERVER_ERRORS", "server_error_reply"]

_HEX = "0123456789abcdef"
#: The seconds Groq's ``retry-after`` names on the played 429 (its message says 6.78s).
GROQ_RETRY_AFTER = 7.0

#: Mistral's 429 (cline/cline#9085), the fields at the top level.
_MISTRAL_RATE_LIMITED: Dict[str, Any] = {
    "object": "error",
    "message": "Rate limit exceeded",
    "type": "rate_limited",
    "param": None,
    "code": "1300",
}

#: (scenario, variant) -> (status, body, headers beside the date, content type).
SERVER_ERRORS: Mapping[Tuple[str, str], Tuple[int, Any, Mapping[str, str], str]] = {
    ("rate-limit", "mistral"): (429, _MISTRAL_RATE_LIMITED, {}, "application/json"),
    # The same envelope with the status repeated in the body (raycast/extensions#31107, 2026-09).
    ("rate-limit", "mistral-raw-status"): (
        429,
        {**_MISTRAL_RATE_LIMITED, "raw_status_code": 429},
        {},
        "application/json",
    ),
    ("rate-limit", "groq"): (
        429,
        {
            "error": {
                "message": "Rate limit reached for model `conformance-model` in organization "
                "`org_01conformance` service tier `on_demand` on tokens per minute (TPM): Limit 6000, "
                "Used 3513, Requested 3166. Please try again in 6.780999999s. Visit "
                "https://console.groq.com/docs/rate-limits for more information.",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            }
        },
        {
            "retry-after": "7",
            "x-ratelimit-limit-requests": "14400",
            "x-ratelimit-limit-tokens": "6000",
            "x-ratelimit-remaining-requests": "14399",
            "x-ratelimit-remaining-tokens": "2487",
            "x-ratelimit-reset-requests": "6s",
            "x-ratelimit-reset-tokens": "6.78s",
        },
        "application/json",
    ),
    # Mistral's gateway answers a bad key before the API does, in its own body.
    ("auth", "mistral"): (
        401,
        {"message": "Unauthorized", "request_id": provider_id("", "openai-chat/mistral/auth", 32, _HEX)},
        {},
        "application/json; charset=utf-8",
    ),
    ("auth", "mistral-detail"): (401, {"detail": "Unauthorized"}, {}, "application/json"),
}


def server_error_reply(scenario: str, variant: str) -> Optional[Reply]:
    """The failure the server shape ``variant`` answers ``scenario`` with; ``None`` where it has none."""
    from ...provider.replies import JsonReply

    row = SERVER_ERRORS.get((scenario, variant))
    if row is None:
        return None
    status, body, headers, content_type = row
    return JsonReply(body, status=status, headers={**headers, "date": http_date()}, content_type=content_type)
