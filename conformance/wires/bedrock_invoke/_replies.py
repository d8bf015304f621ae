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
pydantic-ai's ``test_mid_conversation_system_prompt_on_bedrock.yaml`` (claude-opus-4-8: a
whole ``/invoke`` reply committed 2026-07-30, an ``/invoke-with-response-stream`` one in a
later commit, 06b71bcd). The two streams differ, and each variant plays one as recorded:
the 2025 one (``delta-output-only``) counts ``{input_tokens, output_tokens}`` alone in
``message_start`` and says no ``stop_details``; the 2026 one (``delta-input-tokens``) names
the ``model`` first, says ``container: null`` and ``stop_details: null``, repeats the input
side in ``message_delta`` with ``output_tokens_details``, and its id is ``msg_bdrk_`` and 52
lower-case letters and digits, as the 2026 whole reply's is.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._aws import EVENT_STREAM, event_frame, exception_frame, padding, response_headers
from .._chunks import dumps
from .._ids import provider_id
from ..anthropic._hosted import HostedEvents, host_id
from ..anthropic._replies import MESSAGE_ID as ANTHROPIC_MESSAGE_ID
from ..anthropic._replies import TOOL_USE_ID as ANTHROPIC_TOOL_USE_ID
from ._variants import STREAM_FAILURES

__all__ = [
    "INFIX",
    "MESSAGE_ID",
    "MESSAGE_ID_2026",
    "STREAM_2025",
    "STREAM_2026",
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
#: A message id as Bedrock's 2026 replies have it, whole and streamed: ``msg_bdrk_`` and 52
#: lower-case letters and digits (``msg_bdrk_kcnvhcllqaxbnwoxeeuevouqheddiwhx2npjyxsj34opx4j42jea``).
MESSAGE_ID_2026 = provider_id(
    "msg_bdrk_", "bedrock-invoke/message-2026", 52, "abcdefghijklmnopqrstuvwxyz0123456789"
)
#: The variants that play each recorded stream: open-telemetry's of 2025-03, pydantic-ai's of 2026.
STREAM_2025 = "delta-output-only"
STREAM_2026 = "delta-input-tokens"
#: What the 2025 stream's ``message_start`` counts: the input and output tokens alone.
_USAGE_2025 = frozenset({"input_tokens", "output_tokens"})
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
    """A whole reply's headers: the request id, and the counts Bedrock repeats as headers (the cache
    reads too, since 2026: pydantic-ai's whole reply of 2026-07-30)."""
    return response_headers(
        {
            "X-Amzn-Bedrock-Cache-Read-Input-Token-Count": "0",
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

    def __init__(self, model: str, message_id: str = ANTHROPIC_MESSAGE_ID, variant: str = "") -> None:
        super().__init__(model, message_id, variant)
        if variant == STREAM_2025:
            # As open-telemetry's 2025-03 stream: no stop_details, the two counts alone.
            self.null_stop_details = False
        elif variant == STREAM_2026 and message_id == ANTHROPIC_MESSAGE_ID:
            self.message_id = MESSAGE_ID_2026

    def emit(self, type_: str, **fields: Any) -> None:
        if type_ == "message_start" and self.variant == STREAM_2025:
            message = dict(fields["message"])
            message["usage"] = {k: v for k, v in message["usage"].items() if k in _USAGE_2025}
            fields = {**fields, "message": message}
        super().emit(type_, **fields)

    def send(self, type_: str, fields: Mapping[str, Any]) -> None:
        if self.variant == STREAM_2026:
            fields = _as_in_2026(type_, fields)
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


def _as_in_2026(type_: str, fields: Mapping[str, Any]) -> Mapping[str, Any]:
    """An event as pydantic-ai's 2026 stream shows it: ``model`` first and ``container: null`` in
    the message, ``container: null`` in ``message_delta`` and its ``output_tokens_details``."""
    if type_ == "message_start":
        message = fields["message"]
        shaped: Dict[str, Any] = {"model": message["model"]}
        for key, value in message.items():
            shaped.setdefault(key, value)
            if key == "content":
                shaped["container"] = None
        return {**fields, "message": shaped}
    if type_ == "message_delta":
        delta = {**fields["delta"], "container": None}
        usage = {**fields["usage"], "output_tokens_details": {"thinking_tokens": 0}}
        return {**fields, "delta": delta, "usage": usage}
    return fields
