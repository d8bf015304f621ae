"""Gemini API errors: the ``{"error": google.rpc.Status}`` bodies and their headers.

Reference: https://ai.google.dev/gemini-api/docs/troubleshooting and
https://cloud.google.com/apis/design/errors (``google.rpc.Status``, the ``details`` types
``QuotaFailure``, ``RetryInfo``, ``Help``, ``ErrorInfo``). Kept apart from the replies in
``gemini.py`` because the errors are a table of their own, with variants.

An error to a streamed ``?alt=sse`` request is sent with ``Content-Type:
text/event-stream`` and a plain (not SSE-framed) pretty JSON body, as the real front end
does (crewAI ``lib/crewai/tests/cassettes/llms/google/test_google_streaming_returns_usage_metrics.yaml``,
3 captures); a client that picks its parser from the content type meets it there.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ..fixture import CONFORMANCE_FIXTURE as FX
from ._base import Variant, http_date

if TYPE_CHECKING:
    from ..provider.replies import JsonReply

__all__ = [
    "ERRORS",
    "OVERLOADED_MESSAGE",
    "QUOTA_RETRY_DELAY",
    "RATE_LIMIT_VARIANTS",
    "error_body",
    "error_reply",
    "pretty_json",
    "response_headers",
    "retry_delay",
]

OVERLOADED_MESSAGE = "The model is overloaded. Please try again later."


def response_headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    headers = {
        "date": http_date(),
        "vary": "Origin, X-Origin, Referer",
        "server": "scaffolding on HTTPServer2",
        "server-timing": "gfet4t7; dur=412",
        "x-content-type-options": "nosniff",
    }
    headers.update(extra or {})
    return headers


def pretty_json(body: Any) -> bytes:
    import json

    # Google's front end indents whole JSON bodies by two spaces; SSE events stay on one line.
    return json.dumps(body, ensure_ascii=False, indent=2).encode("utf-8")


# -- errors ------------------------------------------------------------------------------

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
        _QUOTA_TEXT.format(limit=10, delay="7.0s"),
        # The detail order real 429s carry: Help, QuotaFailure, RetryInfo.
        [_HELP, quota_failure(_RATE_LIMIT_QUOTA_ID, "10"), retry_info(int(FX.retry_after))],
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
        "429 with QuotaFailure and RetryInfo details",
        "Farrice/mes-knowledge-base swarm_outputs/20260211_091747/agent_outputs/daniel-priestley.md",
        retry_after=FX.retry_after,
    ),
    Variant(
        "no-details",
        "429 RESOURCE_EXHAUSTED without details (no RetryInfo)",
        "crewAIInc/crewAI lib/crewai/tests/cassettes "
        "TestAgentMultimodalGemini.test_video_file[gemini-gemini-2.0-flash].yaml",
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


def error_body(scenario: str, variant: str = "") -> Dict[str, Any]:
    """The ``{"error": google.rpc.Status}`` body Gemini answers ``scenario`` (in ``variant``) with."""
    status, rpc_status, message, details = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    error: Dict[str, Any] = {"code": status, "message": message, "status": rpc_status}
    if details:
        error["details"] = details
    return {"error": error}


def error_reply(scenario: str, variant: str = "", sse: bool = False) -> JsonReply:
    """The whole error response for ``scenario``; ``sse`` where the request asked for ``alt=sse``."""
    from ..provider.replies import JsonReply

    body = error_body(scenario, variant)
    content_type = "text/event-stream" if sse else "application/json; charset=UTF-8"
    return JsonReply(
        pretty_json(body), status=body["error"]["code"], headers=response_headers(), content_type=content_type
    )
