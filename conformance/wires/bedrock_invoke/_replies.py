"""Bedrock InvokeModel's replies for Claude: Anthropic's ``message``, and its events framed as chunks.

Reference:
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html
(``ResponseStream``: a ``chunk`` is a ``PayloadPart`` whose ``bytes`` are the model's own
event) and the captures named below. A whole reply is Claude's ``message`` with Bedrock's
headers. A streamed one is the binary AWS event stream, one frame per Claude event:

- headers ``:event-type: chunk``, ``:content-type: application/json``, ``:message-type: event``;
- payload ``{"bytes": "<base64 of the event's JSON>", "p": "<padding>"}``;
- no ``ping`` event, and ``message_stop`` carrying ``amazon-bedrock-invocationMetrics``.

Seen in opentelemetry-python-contrib's botocore cassettes
(``test_invoke_model_with_response_stream_with_content_tool_call[anthropic.claude].yaml``,
2025-03, and the whole ``test_invoke_model_with_content[anthropic.claude].yaml``) and in
pydantic-ai's ``test_mid_conversation_system_prompt_on_bedrock.yaml`` (2026-10).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._aws import EVENT_STREAM, event_frame, exception_frame, padding, response_headers
from .._chunks import dumps
from ..anthropic._hosted import HostedEvents, host_id
from ..anthropic._replies import MESSAGE_ID as ANTHROPIC_MESSAGE_ID
from ..anthropic._replies import TOOL_USE_ID as ANTHROPIC_TOOL_USE_ID
from ._variants import STREAM_FAILURES

__all__ = [
    "INFIX",
    "MESSAGE_ID",
    "TOOL_USE_ID",
    "InvokeEvents",
    "chunk",
    "invocation_metrics",
    "message_headers",
]

#: Bedrock's ids put ``bdrk_`` after the type: ``msg_bdrk_01…``, ``toolu_bdrk_01…``.
INFIX = "bdrk_"
MESSAGE_ID = host_id(ANTHROPIC_MESSAGE_ID, INFIX)
TOOL_USE_ID = host_id(ANTHROPIC_TOOL_USE_ID, INFIX)
#: What the turn took, in milliseconds, as Bedrock reports it.
LATENCY_MS = 1131
FIRST_BYTE_MS = 439


def invocation_metrics(output_tokens: int = FX.usage.output_tokens) -> Dict[str, Any]:
    """``amazon-bedrock-invocationMetrics``: the counts and times Bedrock adds to ``message_stop``."""
    return {
        "inputTokenCount": FX.usage.input_tokens,
        "outputTokenCount": output_tokens,
        "invocationLatency": LATENCY_MS,
        "firstByteLatency": FIRST_BYTE_MS,
    }


def message_headers(output_tokens: int = FX.usage.output_tokens) -> Dict[str, str]:
    """A whole reply's headers: the request id, and the counts Bedrock repeats as headers."""
    return response_headers(
        {
            "X-Amzn-Bedrock-Input-Token-Count": str(FX.usage.input_tokens),
            "X-Amzn-Bedrock-Invocation-Latency": str(LATENCY_MS),
            "X-Amzn-Bedrock-Output-Token-Count": str(output_tokens),
        }
    )


def chunk(event: Mapping[str, Any], number: int) -> bytes:
    """The ``number``-th frame of a stream, carrying one Claude event as a ``PayloadPart``."""
    import base64  # per frame, not per import: naming a wire frames nothing yet

    encoded = base64.b64encode(dumps(dict(event)).encode("utf-8")).decode("ascii")
    return event_frame("chunk", {"bytes": encoded, "p": padding(number)})


class InvokeEvents(HostedEvents):
    """Builds the frames of one InvokeModelWithResponseStream reply: Claude's events, as chunks."""

    infix = INFIX
    content_type = EVENT_STREAM
    #: pydantic-ai's InvokeModel capture (claude-opus-4-8, 2026-10) has the cache counts by
    #: lifetime and stop_details: null, and no inference_geo.
    usage_absent = frozenset({"inference_geo"})

    def send(self, type_: str, fields: Mapping[str, Any]) -> None:
        event: Dict[str, Any] = {"type": type_, **fields}
        if type_ == "message_stop":
            event["amazon-bedrock-invocationMetrics"] = invocation_metrics(self.output_tokens)
        self.events.append(chunk(event, len(self.events)))

    def ping(self) -> None:
        """Bedrock sends no ``ping`` (none in any InvokeModel stream recorded)."""

    def api_error(self, type_: str, message_: str) -> None:
        """A failure after the 200 is not Claude's ``error`` event here but Bedrock's exception
        frame: the one the stream's variant names (``serviceUnavailableException`` by default)."""
        name, message = STREAM_FAILURES.get(self.variant) or next(iter(STREAM_FAILURES.values()))
        self.events.append(exception_frame(name, message))

    error = api_error

    def headers(self) -> Dict[str, str]:
        # The payload's own content type, which boto3 reports as the response's contentType.
        return response_headers({"X-Amzn-Bedrock-Content-Type": "application/json"})
