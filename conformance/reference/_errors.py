"""What the reference backends share when they turn a provider failure into an LLMError.

Each wire's backend knows its provider's own error codes; what is the same
everywhere (the status families, the retry-after headers) lives here once.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any, Mapping, Optional

__all__ = ["decode_json", "retry_after_seconds", "status_kind"]


def status_kind(status: int) -> str:
    """The error kind a bare HTTP status means, before any provider code refines it.

    A 429 is a rate limit until the body says it is an exhausted quota; a 503 (and
    Anthropic's 529) is an overload; any other 5xx a server error; any other status a
    request the provider refused as bad (``invalid_request``).
    """
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server_error"
    return "invalid_request"


def retry_after_seconds(headers: Mapping[str, str]) -> Optional[float]:
    """Seconds to wait from ``retry-after-ms``, then ``retry-after`` (seconds or an HTTP-date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def decode_json(body: bytes) -> Any:
    """The body as JSON, or ``None`` where it is not JSON (an HTML error page, say)."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
