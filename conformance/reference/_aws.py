"""What the Bedrock backends read the same way, whichever Bedrock API they call: its failures.

Bedrock names a failure by its exception, in ``x-amzn-ErrorType`` before the answer
(``ThrottlingException:<namespace>``) and in an ``exception`` frame's
``:exception-type`` after the 200 (``throttlingException``, lowerCamel); the message is
the only other thing it says. Converse and InvokeModel share that, so the backends of
both read it here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional, Tuple

from ._decoders import EventStreamMessage
from ._errors import status_kind

__all__ = ["ERROR_KINDS_BY_NAME", "error_kind", "error_name", "frame_failure"]

#: Bedrock's error names, as ``x-amzn-ErrorType`` spells them, by the contract's kind.
#: Mid-stream exceptions use the same names in lowerCamel case.
ERROR_KINDS_BY_NAME: Mapping[str, str] = {
    "ThrottlingException": "rate_limit",
    "ServiceQuotaExceededException": "quota",
    "AccessDeniedException": "auth",
    "UnrecognizedClientException": "auth",
    "InvalidSignatureException": "auth",
    "ExpiredTokenException": "auth",
    "IncompleteSignatureException": "auth",
    "MissingAuthenticationTokenException": "auth",
    "ServiceUnavailableException": "overloaded",
    "ModelNotReadyException": "overloaded",
    "InternalServerException": "server_error",
    "ModelStreamErrorException": "server_error",
    "ModelErrorException": "server_error",
    "ModelTimeoutException": "server_error",
    "ValidationException": "invalid_request",
}

#: How a ThrottlingException says the quota of the day is spent, not the minute's.
DAILY_QUOTA = re.compile(r"per day|daily", re.IGNORECASE)
#: How a ValidationException says the input does not fit the model's context window.
CONTEXT_OVERFLOW = re.compile(
    r"input is too long|prompt is too long|too many input tokens|context (window|length)",
    re.IGNORECASE,
)


def error_name(headers: Mapping[str, str], body: Any) -> str:
    """The error's name: ``x-amzn-ErrorType`` up to its ``:``, else the body's ``__type``."""
    raw = headers.get("x-amzn-errortype")
    if not raw and isinstance(body, dict):
        raw = body.get("__type") or body.get("code") or body.get("Code")
    name = str(raw or "").split(":", 1)[0]
    return name.rsplit("#", 1)[-1]


def error_kind(name: str, message: str, status: Optional[int]) -> str:
    """The contract's kind for a Bedrock error (``status`` is None mid-stream)."""
    # Mid-stream names are lowerCamel: throttlingException.
    name = name[:1].upper() + name[1:]
    kind = ERROR_KINDS_BY_NAME.get(name)
    if kind == "rate_limit" and DAILY_QUOTA.search(message):
        return "quota"
    if kind == "invalid_request" and CONTEXT_OVERFLOW.search(message):
        return "context_overflow"
    if kind is not None:
        return kind
    return "server_error" if status is None else status_kind(status)


def frame_failure(message: EventStreamMessage) -> Optional[Tuple[str, str]]:
    """The failure an event-stream frame carries, as its name and message; ``None`` for an event.

    An ``exception`` frame names a modeled error (``:exception-type``, the message in its
    JSON payload); an ``error`` frame a generic one (``:error-code``, ``:error-message``).
    """
    from ._errors import decode_json

    message_type = message.headers.get(":message-type")
    if message_type == "exception":
        payload = decode_json(message.payload)
        text = payload.get("message") if isinstance(payload, dict) else None
        name = str(message.headers.get(":exception-type", ""))
        return name, str(text or name)
    if message_type == "error":
        name = str(message.headers.get(":error-code", ""))
        return name, str(message.headers.get(":error-message", "") or name)
    return None
