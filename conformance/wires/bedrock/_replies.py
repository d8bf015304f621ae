"""Bedrock's replies: the ``ConverseResponse``, and the event-stream messages of a
``ConverseStream`` (``ConverseStreamOutput`` events).

Reference: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
and https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html.
The builders are named after Bedrock's own shapes and events (``converse_response``,
``messageStart``, ``contentBlockDelta``, ``metadata``), so checking them against the
docs is a grep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._aws import EVENT_STREAM, corrupt, event_frame, exception_frame, padding, response_headers
from .._chunks import cut_events, split_text, tcp_chunks
from .._ids import provider_id

if TYPE_CHECKING:
    from ...provider.replies import StreamReply

__all__ = [
    "CORRUPT_FRAME",
    "EVENT_STREAM",
    "GUARDRAIL_MESSAGE",
    "TOOL_USE_ID",
    "TRUNCATED_INPUT",
    "Events",
    "converse_response",
    "corrupt",
    "guardrail_trace",
    "input_json",
    "response_headers",
    "sorted_keys",
    "tool_use",
    "tool_use_id",
]

_BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def tool_use_id(seed: str) -> str:
    """``tooluse_`` and 22 URL-safe base64 characters, as Bedrock names a tool call, the same
    for a seed."""
    return provider_id("tooluse_", seed, 22, _BASE64URL)


TOOL_USE_ID = tool_use_id("bedrock-converse/tool-use")
LATENCY_MS = 412

#: The input JSON of the cut-off call: valid up to the cut, then nothing.
TRUNCATED_INPUT = '{"city": "Par'
#: The guardrail named in a trace.
GUARDRAIL_ID = "conformanceguard1"
#: The default blocked-input message of a Bedrock guardrail.
GUARDRAIL_MESSAGE = "Sorry, the model cannot answer this question."


def sorted_keys(value: Any) -> Any:
    """``value`` with the keys of every object in sorted order, as Bedrock writes them.

    Real replies sort every level, the ``"p"`` padding of a stream event included:
    ``{"contentBlockIndex","delta","p"}``, ``{"metrics","p","usage"}`` (pydantic-ai
    ``tests/models/cassettes/test_bedrock/test_bedrock_model_stream.yaml``), and a whole
    Converse reply ``{"metrics","output","stopReason","usage"}`` with ``toolUse``
    ``{"input","name","toolUseId"}`` (opentelemetry-python-contrib
    ``instrumentation/opentelemetry-instrumentation-botocore/tests/cassettes/``
    ``test_converse_tool_call_with_content.yaml``, whose serializer keeps the order).
    """
    if isinstance(value, Mapping):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


def input_json() -> str:
    """The call's input as JSON text, for the fragments of a ``toolUse`` block."""
    import json

    # The fragments Bedrock streams spell the input as the model wrote it.
    return json.dumps(dict(FX.tool_arguments), ensure_ascii=False)


def _usage() -> Dict[str, Any]:
    u = FX.usage
    return {"inputTokens": u.input_tokens, "outputTokens": u.output_tokens, "totalTokens": u.total_tokens}


# -- whole replies: ConverseResponse -------------------------------------------------------


def tool_use(input_: Any) -> Dict[str, Any]:
    """A ``toolUse`` content block (``ToolUseBlock``)."""
    return {"toolUse": {"toolUseId": TOOL_USE_ID, "name": FX.tool_name, "input": input_}}


def converse_response(content: Sequence[Mapping[str, Any]], stop_reason: str) -> Dict[str, Any]:
    """A ``ConverseResponse``: the assistant message, the stop reason, usage and metrics.

    A guardrail's reply adds ``trace.guardrail`` (traceloop/openllmetry
    ``packages/opentelemetry-instrumentation-bedrock/tests/traces/cassettes/test_titan/``
    ``test_titan_converse_with_events_with_content.yaml``).
    """
    body: Dict[str, Any] = {
        "output": {"message": {"role": "assistant", "content": list(content)}},
        "stopReason": stop_reason,
        "usage": _usage(),
        "metrics": {"latencyMs": LATENCY_MS},
    }
    if stop_reason == "guardrail_intervened":
        body["trace"] = guardrail_trace()
    ordered: Dict[str, Any] = sorted_keys(body)
    return ordered


def guardrail_trace() -> Dict[str, Any]:
    """``trace``: which guardrail policy blocked the input (``GuardrailTraceAssessment``).

    https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_GuardrailTraceAssessment.html
    """
    assessment = {
        "contentPolicy": {
            "filters": [
                {
                    "type": "VIOLENCE",
                    "confidence": "HIGH",
                    "filterStrength": "HIGH",
                    "action": "BLOCKED",
                    "detected": True,
                }
            ]
        }
    }
    return {"guardrail": {"inputAssessment": {GUARDRAIL_ID: assessment}}}


# -- streamed replies: ConverseStreamOutput events ---------------------------------------------


class Events:
    """Builds the event-stream messages of one ConverseStream reply."""

    def __init__(self) -> None:
        self.events: List[bytes] = []
        self.block = -1

    def event(self, event_type: str, payload: Dict[str, Any]) -> None:
        payload["p"] = padding(len(self.events))
        self.events.append(event_frame(event_type, sorted_keys(payload)))

    def message_start(self) -> None:
        self.event("messageStart", {"role": "assistant"})

    def text_block(self, text: str, pieces: int = 4, stop: bool = True) -> None:
        # A text block opens with its first delta: Bedrock sends no contentBlockStart for it.
        self.block += 1
        for piece in split_text(text, pieces):
            self.event("contentBlockDelta", {"contentBlockIndex": self.block, "delta": {"text": piece}})
        if stop:
            self.content_block_stop()

    def tool_use_block(self, input_json: str, pieces: int = 4) -> None:
        self.block += 1
        start = {"toolUse": {"toolUseId": TOOL_USE_ID, "name": FX.tool_name}}
        self.event("contentBlockStart", {"contentBlockIndex": self.block, "start": start})
        # The model's first input fragment is often empty; clients must concatenate anyway.
        for piece in ["", *split_text(input_json, pieces)]:
            delta = {"toolUse": {"input": piece}}
            self.event("contentBlockDelta", {"contentBlockIndex": self.block, "delta": delta})
        self.content_block_stop()

    def content_block_stop(self) -> None:
        self.event("contentBlockStop", {"contentBlockIndex": self.block})

    def message_stop(self, stop_reason: str) -> None:
        self.event("messageStop", {"stopReason": stop_reason})

    def metadata(self, trace: bool = False) -> None:
        payload: Dict[str, Any] = {"usage": _usage(), "metrics": {"latencyMs": LATENCY_MS}}
        if trace:
            payload["trace"] = guardrail_trace()
        self.event("metadata", payload)

    def finish(self, stop_reason: str, trace: bool = False) -> None:
        self.message_stop(stop_reason)
        self.metadata(trace)

    def exception(self, exception_type: str, message: str) -> None:
        """One ``:message-type: exception`` message: a modeled error after the 200."""
        self.events.append(exception_frame(exception_type, message))

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (messages kept, cut inside the next) ends it short of ``messageStop``."""
        from ...provider.replies import StreamReply

        events = self.events if cut is None else cut_events(self.events, *cut)
        return StreamReply(
            tcp_chunks(events, seed),
            content_type=EVENT_STREAM,
            headers=response_headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )


# -- a corrupted stream, for decoders that skip the CRCs --------------------------------------

#: The optional scenario only checksummed formats have: one damaged frame, which a client must refuse.
CORRUPT_FRAME = "corrupt-frame"
