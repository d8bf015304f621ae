"""What the two OpenAI reference backends share: the key, and OpenAI's one error shape.

Chat Completions and Responses take the same ``Authorization: Bearer`` key and
answer a failure with the same body, ``{"error": {"message", "type", "param",
"code"}}``, and the same headers; this base reads them once. Each backend says only
what differs: the rate-limit codes it may see, and what a failure inside a stream
means.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Mapping, Optional

from ..contract import LLMError
from ._base import ReferenceBackend
from ._errors import decode_json, status_kind

__all__ = ["OVERLOAD_CODES", "OVERLOAD_TYPES", "QUOTA_CODES", "OpenAIBase", "failure_of"]

#: error.code values that mean the account is out of money, not out of requests per minute.
QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "credit_balance_exhausted",
        "organization_spend_limit_exceeded",
        "project_spend_limit_exceeded",
        "organization_usage_limit_exceeded",
    }
)
OVERLOAD_CODES = frozenset({"server_is_overloaded", "slow_down"})
OVERLOAD_TYPES = frozenset({"service_unavailable_error"})


def failure_of(body: Any, status: int) -> Mapping[str, Any]:
    """The error object of a failure body: OpenAI's, nested under ``error``, or one whose
    fields sit at the top level.

    Servers that speak this API do not all nest it: Mistral's API sends ``{"object":
    "error", "message", "type", "code"}`` and its gateway ``{"message": ...}`` or
    ``{"detail": ...}``; those fields are read where they are, and the status decides
    the kind where they name none the contract knows.
    """
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error
        message = body.get("message", body.get("detail"))
        if isinstance(message, str):
            return {"message": message, "type": body.get("type"), "code": body.get("code")}
    return {"message": f"HTTP {status} with a body that is not an OpenAI error"}


class OpenAIBase(ReferenceBackend):
    """A reference backend for an OpenAI endpoint."""

    provider = "openai"
    #: error.code values that mean a rate limit on this endpoint.
    rate_limit_codes: FrozenSet[str] = frozenset({"rate_limit_exceeded"})

    def headers(self, stream: bool) -> Dict[str, str]:
        """Headers of every request: the key, JSON, and the caller's own."""
        return {
            "authorization": f"Bearer {self.api_key}",
            "content-type": "application/json",
            "accept": "application/json",
            **self.extra_headers,
        }

    def stream_failure_kind(self, code: Any) -> str:
        """The kind of a failure reported inside a stream, where no status tells."""
        return "server_error"

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        """The contract's kind for an OpenAI error object (``status`` is None mid-stream).

        The body decides before the status: an exhausted quota is a 429 like a rate
        limit, and only its code tells them apart; an overload comes as
        ``server_is_overloaded`` or as a ``server_error`` whose code is null and whose
        message alone says "overloaded", in a 503 or inside a stream.
        """
        code, type_ = error.get("code"), error.get("type")
        message = str(error.get("message") or "").lower()
        if code in QUOTA_CODES or type_ in QUOTA_CODES:
            return "quota"
        if code == "context_length_exceeded" or type_ == "exceed_context_size_error":
            return "context_overflow"  # the second is llama-server's, whose code is the status
        if code in OVERLOAD_CODES or type_ in OVERLOAD_TYPES or (code is None and "overloaded" in message):
            return "overloaded"
        if code in self.rate_limit_codes:
            return "rate_limit"
        if code == "invalid_api_key":
            return "auth"
        if status == 402:
            return "quota"  # Payment Required: OpenRouter's credits ran out (its code is the status)
        if status is None:
            return self.stream_failure_kind(code)
        return status_kind(status)

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        """The error for a failure status, with ``retry_after`` the delay the reply carries, if any.

        ``retry_after`` reads ``retry-after-ms``, then ``retry-after``: the order
        openai-python reads them in.
        """
        error = failure_of(decode_json(raw), status)
        kind = self.error_kind(status, error)
        return self.make_error(
            kind,
            error,
            status=status,
            retry_after=self.retry_after(headers),
            request_id=headers.get("x-request-id"),
        )

    def make_error(
        self,
        kind: str,
        error: Mapping[str, Any],
        *,
        status: Optional[int],
        retry_after: Optional[float] = None,
        request_id: Optional[str] = None,
    ) -> LLMError:
        """The error an OpenAI error object describes, its type and code kept in ``details``."""
        details = {"type": error.get("type"), "code": error.get("code"), "request_id": request_id}
        return self.build_error(
            kind, str(error.get("message") or kind), status=status, details=details, retry_after=retry_after
        )
