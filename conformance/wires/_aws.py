"""What Amazon Bedrock's front end puts around every answer, whichever API is called.

Strategy: Converse and InvokeModel differ in what they say, not in how Bedrock says it.
Both answer with the same request id header, fail with the same
``x-amzn-ErrorType: <Name>:<namespace>`` and ``{"message": ...}`` body, and stream in
the binary AWS event stream, each event a frame whose JSON payload carries a ``"p"``
padding string and each failure after the 200 an ``exception`` frame named in
lowerCamel case. Those are made here once, for the wires of both APIs.

Reference: https://docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html and
botocore's ``bedrock-runtime/2023-09-30/service-2.json``; the padding as recorded in
opentelemetry-python-contrib's botocore cassettes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from ._chunks import dumps
from ._ids import http_date

if TYPE_CHECKING:
    from ..provider.replies import JsonReply

__all__ = [
    "ERROR_NAMESPACE",
    "EVENT_STREAM",
    "corrupt",
    "error_reply",
    "event_frame",
    "exception_frame",
    "padding",
    "response_headers",
]

#: What ``x-amzn-ErrorType`` carries after the error name.
ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
EVENT_STREAM = "application/vnd.amazon.eventstream"

#: Bedrock's padding alphabet for the ``"p"`` member of event payloads.
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def response_headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The headers every reply carries: the date, and ``x-amzn-RequestId``, a lower-case UUID."""
    import uuid  # per reply, not per import: it costs a test module milliseconds

    # A fresh request id on every response, a UUID as AWS's own.
    headers = {"date": http_date(), "x-amzn-RequestId": str(uuid.uuid4())}
    headers.update(extra or {})
    return headers


def error_reply(status: int, name: str, message: str) -> JsonReply:
    """A failure before any answer: the status, ``x-amzn-ErrorType`` and ``{"message": ...}``."""
    from ..provider.replies import JsonReply

    headers = response_headers({"x-amzn-ErrorType": f"{name}:{ERROR_NAMESPACE}"})
    return JsonReply({"message": message}, status=status, headers=headers)


def padding(number: int) -> str:
    """The ``"p"`` of the ``number``-th event: a prefix of the alphabet whose length varies.

    The padding hides token lengths from anyone watching the traffic; clients ignore it.
    """
    return _PADDING[: 1 + (number * 17) % len(_PADDING)]


def event_frame(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """One ``:message-type: event`` frame whose payload is ``payload`` as compact JSON."""
    # Imported per frame, not with the module: naming a wire frames nothing yet.
    from ..encoders import aws_event_stream_message

    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return aws_event_stream_message(headers, dumps(payload).encode("utf-8"))


def exception_frame(exception_type: str, message: str) -> bytes:
    """One ``:message-type: exception`` frame: a modeled error after the 200."""
    from ..encoders import aws_event_stream_message

    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return aws_event_stream_message(headers, dumps({"message": message}).encode("utf-8"))


def corrupt(message: bytes) -> bytes:
    """``message`` with one payload byte flipped, so its message CRC no longer matches."""
    damaged = bytearray(message)
    damaged[-8] ^= 0x20  # inside the JSON payload, before the message CRC
    return bytes(damaged)
