"""Amazon Bedrock Converse: ``POST /model/{modelId}/converse`` and ``/converse-stream``.

Reference: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
and https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html;
the shapes are those of the service model botocore and the AWS SDK for JavaScript v3
read (``bedrock-runtime/2023-09-30/service-2.json``). The model id is percent-encoded
in the path (``us.anthropic.claude-3-5-haiku-20241022-v1%3A0``).

A whole reply is JSON: ``output.message.content`` (a list of one-member unions:
``{"text": ...}`` or ``{"toolUse": {"toolUseId", "name", "input"}}``), ``stopReason``,
``usage`` and ``metrics``. A streamed reply is ``application/vnd.amazon.eventstream``:
binary messages, each with a prelude, typed headers (``:message-type``,
``:event-type``, ``:content-type``), a JSON payload and two CRC32s. The events run
``messageStart``, then per content block an optional ``contentBlockStart`` (tool
blocks only; text blocks have none), ``contentBlockDelta`` events (``delta.text`` or
``delta.toolUse.input``, a fragment of the input's JSON *string*) and
``contentBlockStop``, then ``messageStop`` with the stop reason and ``metadata`` with
the usage. Every event payload carries a top-level ``"p"`` padding string of varying
length, which clients ignore. A failure after the 200 is a message whose
``:message-type`` is ``exception`` and whose ``:exception-type`` names the error in
lowerCamel case (``serviceUnavailableException``), payload ``{"message": ...}``.

Errors before the stream are an HTTP status, ``x-amzn-ErrorType: <Name>:<namespace>``
and a body ``{"message": ...}``. Bedrock sends no ``retry-after`` on a throttle, so
this wire's rate limit carries no delay (:attr:`BedrockConverseWire.rate_limit_retry_after`
is ``None``); a daily token quota is the same ``ThrottlingException`` told apart only by
its message.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import unquote

from ..encoders import aws_event_stream_message
from ..fixture import CONFORMANCE_FIXTURE as FX
from ..provider.replies import HangReply, JsonReply, RecordedRequest, Reply, StreamReply
from ._base import (
    Variant,
    Wire,
    dumps,
    fixture_tool_schema,
    http_date,
    json_object,
    provider_id,
    schema_difference,
    tcp_chunks,
)

__all__ = ["BedrockConverseWire", "bedrock_converse_wire"]

_BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

#: ``tooluse_`` and 22 URL-safe base64 characters, as Bedrock names a tool call.
TOOL_USE_ID = provider_id("tooluse_", "bedrock-converse/tool-use", 22, _BASE64URL)
#: The ``x-amzn-RequestId`` of every reply: a lower-case UUID.

#: What ``x-amzn-ErrorType`` carries after the error name.
ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
EVENT_STREAM = "application/vnd.amazon.eventstream"
LATENCY_MS = 412

#: The input JSON of the cut-off call: valid up to the cut, then nothing.
TRUNCATED_INPUT = '{"city": "Par'
#: The guardrail named in a trace.
GUARDRAIL_ID = "conformanceguard1"
#: The default blocked-input message of a Bedrock guardrail.
GUARDRAIL_MESSAGE = "Sorry, the model cannot answer this question."

#: Bedrock's padding alphabet for the ``"p"`` member of event payloads.
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

#: A model id segment with every reserved character percent-encoded.
_ENCODED_SEGMENT = re.compile(r"(?:[A-Za-z0-9._~-]|%[0-9A-Fa-f]{2})+")
_ROUTE = re.compile(r"/model/(?P<model>[^/]+)/(?P<operation>converse|converse-stream)\Z")


def _input_json() -> str:
    # The fragments Bedrock streams spell the input as the model wrote it.
    return json.dumps(dict(FX.tool_arguments), ensure_ascii=False)


def _usage() -> Dict[str, Any]:
    u = FX.usage
    return {"inputTokens": u.input_tokens, "outputTokens": u.output_tokens, "totalTokens": u.total_tokens}


def _headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    # A fresh request id on every response, a UUID as AWS's own.
    headers = {"date": http_date(), "x-amzn-RequestId": str(uuid.uuid4())}
    headers.update(extra or {})
    return headers


def _pieces(text: str, count: int) -> List[str]:
    step = max(1, -(-len(text) // count))
    return [text[start : start + step] for start in range(0, len(text), step)]


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
    return body


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


def event_message(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """One ``:message-type: event`` message of the event stream."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return aws_event_stream_message(headers, dumps(payload).encode("utf-8"))


def exception_message(exception_type: str, message: str) -> bytes:
    """One ``:message-type: exception`` message: a modeled error after the 200."""
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return aws_event_stream_message(headers, dumps({"message": message}).encode("utf-8"))


class _Events:
    """Builds the event-stream messages of one ConverseStream reply."""

    def __init__(self) -> None:
        self.events: List[bytes] = []
        self.block = -1

    def _event(self, event_type: str, payload: Dict[str, Any]) -> None:
        # The padding hides token lengths; its length varies from event to event.
        payload["p"] = _PADDING[: 1 + (len(self.events) * 17) % len(_PADDING)]
        self.events.append(event_message(event_type, payload))

    def message_start(self) -> None:
        self._event("messageStart", {"role": "assistant"})

    def text_block(self, text: str, pieces: int = 4, stop: bool = True) -> None:
        # A text block opens with its first delta: Bedrock sends no contentBlockStart for it.
        self.block += 1
        for piece in _pieces(text, pieces):
            self._event("contentBlockDelta", {"contentBlockIndex": self.block, "delta": {"text": piece}})
        if stop:
            self.content_block_stop()

    def tool_use_block(self, input_json: str, pieces: int = 4) -> None:
        self.block += 1
        start = {"toolUse": {"toolUseId": TOOL_USE_ID, "name": FX.tool_name}}
        self._event("contentBlockStart", {"contentBlockIndex": self.block, "start": start})
        # The model's first input fragment is often empty; clients must concatenate anyway.
        for piece in ["", *_pieces(input_json, pieces)]:
            delta = {"toolUse": {"input": piece}}
            self._event("contentBlockDelta", {"contentBlockIndex": self.block, "delta": delta})
        self.content_block_stop()

    def content_block_stop(self) -> None:
        self._event("contentBlockStop", {"contentBlockIndex": self.block})

    def message_stop(self, stop_reason: str) -> None:
        self._event("messageStop", {"stopReason": stop_reason})

    def metadata(self, trace: bool = False) -> None:
        payload: Dict[str, Any] = {"usage": _usage(), "metrics": {"latencyMs": LATENCY_MS}}
        if trace:
            payload["trace"] = guardrail_trace()
        self._event("metadata", payload)

    def finish(self, stop_reason: str, trace: bool = False) -> None:
        self.message_stop(stop_reason)
        self.metadata(trace)

    def exception(self, exception_type: str, message: str) -> None:
        self.events.append(exception_message(exception_type, message))

    def reply(self, seed: str, hang: bool = False) -> StreamReply:
        return StreamReply(
            tcp_chunks(self.events, seed), content_type=EVENT_STREAM, headers=_headers(), hang=hang
        )


# -- variants ----------------------------------------------------------------------------

VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    "content-filter/stream": (
        Variant(
            "guardrail-intervened",
            "a text block, then stopReason guardrail_intervened and trace.guardrail",
            "traceloop/openllmetry packages/opentelemetry-instrumentation-bedrock/tests/traces/"
            "cassettes/test_titan/test_titan_converse_stream_with_events_with_no_content.yaml",
        ),
        Variant(
            "content-filtered",
            "stopReason content_filtered and no content block",
            "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_MessageStopEvent.html "
            "(StopReason lists content_filtered; no capture shows it)",
        ),
    ),
}


# -- errors ------------------------------------------------------------------------------

#: scenario -> (status, x-amzn-ErrorType name, message). Bedrock sends no retry-after.
ERRORS: Mapping[str, Any] = {
    # Every real 429 found says "tokens" (aws-samples/amazon-bedrock-client-for-mac#99).
    "rate-limit": (429, "ThrottlingException", "Too many tokens, please wait before trying again."),
    # A daily token quota is a throttle too on Converse; only the message says "per day".
    "quota": (
        429,
        "ThrottlingException",
        "Too many tokens per day, please wait before trying again.",
    ),
    # What AWS answers a request signed with credentials it does not know.
    "auth": (403, "UnrecognizedClientException", "The security token included in the request is invalid."),
    "overloaded": (503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
    "server-error": (
        500,
        "InternalServerException",
        "The system encountered an unexpected error during processing. Try your request again.",
    ),
    "context-overflow": (400, "ValidationException", "Input is too long for requested model."),
}

#: The overload that a streamed reply fails with after the 200, as the exception message.
STREAM_OVERLOADED = ("serviceUnavailableException", "Bedrock is unable to process your request.")


def error_reply(scenario: str) -> JsonReply:
    """The status, ``x-amzn-ErrorType`` and ``{"message": ...}`` Bedrock answers ``scenario`` with."""
    status, name, message = ERRORS[scenario]
    headers = _headers({"x-amzn-ErrorType": f"{name}:{ERROR_NAMESPACE}"})
    return JsonReply({"message": message}, status=status, headers=headers)


# -- a corrupted stream, for decoders that skip the CRCs --------------------------------------

#: The optional scenario only checksummed formats have: one damaged frame, which a client must refuse.
CORRUPT_FRAME = "corrupt-frame"


def corrupt(message: bytes) -> bytes:
    """``message`` with one payload byte flipped, so its message CRC no longer matches."""
    damaged = bytearray(message)
    damaged[-8] ^= 0x20  # inside the JSON payload, before the message CRC
    return bytes(damaged)


# -- the wire ----------------------------------------------------------------------------


class BedrockConverseWire(Wire):
    """Amazon Bedrock Converse and ConverseStream, whole and as an AWS event stream."""

    name = "bedrock-converse"
    provider = "bedrock"
    title = "Amazon Bedrock Converse"
    tool_call_id = TOOL_USE_ID
    optional_scenarios = frozenset({CORRUPT_FRAME})
    #: Bedrock's ThrottlingException carries no retry delay (no ``retry-after``
    #: header, nothing in the body), so a backend must report ``retry_after`` as ``None``.
    rate_limit_retry_after: Optional[float] = None
    variants_table = VARIANTS

    def is_generation(self, request: RecordedRequest) -> bool:
        return request.method == "POST" and _route(request.path) is not None

    def wants_stream(self, request: RecordedRequest) -> bool:
        route = _route(request.path)
        return route is not None and route.group("operation") == "converse-stream"

    def aux_reply(self, request: RecordedRequest) -> Reply:
        message = (
            f"the {self.title} fake provider has no route for {request.method} {request.path}; "
            "only Converse and ConverseStream are scripted"
        )
        headers = _headers({"x-amzn-ErrorType": f"UnknownOperationException:{ERROR_NAMESPACE}"})
        return JsonReply({"message": message}, status=404, headers=headers)

    def reply(
        self, scenario: str, mode: str, request: RecordedRequest, variant: str = ""
    ) -> Optional[Reply]:
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in ERRORS:
            return error_reply(scenario)
        if not self.wants_stream(request):
            return self._whole(scenario)
        return self._stream(scenario, variant)

    def _whole(self, scenario: str) -> Optional[Reply]:
        if scenario == "text":
            body = converse_response([{"text": FX.text}], "end_turn")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            stop = "tool_use" if scenario == "tool-call" else "end_turn"
            body = converse_response([tool_use(dict(FX.tool_arguments))], stop)
        elif scenario == "truncated-tool-call":
            # Converse's input is a JSON document, so a cut-off call arrives as what the
            # cut left parseable: only stopReason max_tokens tells it is not a call.
            body = converse_response([{"text": FX.preamble}, tool_use({"city": "Par"})], "max_tokens")
        elif scenario == "content-filter":
            # A guardrail answers with its blocked message as the text.
            body = converse_response([{"text": GUARDRAIL_MESSAGE}], "guardrail_intervened")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return JsonReply(body, headers=_headers())

    def _stream(self, scenario: str, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = _Events()
        out.message_start()
        if scenario == "text":
            out.text_block(FX.text)
            out.finish("end_turn")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.tool_use_block(_input_json())
            out.finish("tool_use" if scenario == "tool-call" else "end_turn")
        elif scenario == "truncated-tool-call":
            out.text_block(FX.preamble, pieces=2)
            out.tool_use_block(TRUNCATED_INPUT, pieces=2)
            out.finish("max_tokens")
        elif scenario == "content-filter" and variant == "content-filtered":
            out.finish("content_filtered")
        elif scenario == "content-filter":
            # A guardrail streams its blocked message as a normal text block, then says so.
            out.text_block(GUARDRAIL_MESSAGE, pieces=1)
            out.finish("guardrail_intervened", trace=True)
        elif scenario == "stream-error":
            out.text_block(FX.partial_text, pieces=3, stop=False)
            out.exception(*STREAM_OVERLOADED)
        elif scenario in ("abort", "cancel"):
            out.text_block(FX.partial_text, pieces=2, stop=False)
            return out.reply(seed, hang=True)
        elif scenario == CORRUPT_FRAME:
            out.text_block(FX.partial_text, pieces=2, stop=False)
            out.events[-1] = corrupt(out.events[-1])
            out.content_block_stop()
            out.finish("end_turn")
        else:
            return None
        return out.reply(seed)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        problems: List[str] = []
        if request.method != "POST":
            problems.append(f"expected POST, got {request.method}")
        route = _route(request.path)
        if route is None:
            problems.append(
                "expected a path ending in /model/{modelId}/converse or /converse-stream, "
                f"got {request.path}"
            )
        else:
            problems.extend(_check_model(route.group("model"), model))
        if "authorization" not in request.headers:
            problems.append(
                "expected an Authorization header (SigV4 or a Bedrock API key as Bearer), got none"
            )
        body = json_object(request, problems)
        if not body:
            return problems
        problems.extend(_check_messages(body.get("messages")))
        problems.extend(_check_system(body.get("system")))
        problems.extend(_check_tools(body.get("toolConfig")))
        return problems


def _route(path: str) -> Optional[re.Match[str]]:
    # Matched on the raw path: the model id's own %2F must not split the route.
    return _ROUTE.search(path)


def _check_model(segment: str, model: str) -> List[str]:
    if unquote(segment) != model:
        return [f"expected model {model!r} in the path, got {unquote(segment)!r}"]
    if not _ENCODED_SEGMENT.fullmatch(segment):
        return [f"expected the model id percent-encoded in the path (e.g. ':' as %3A), got /model/{segment}/"]
    return []


def _text_of(content: Any) -> Optional[str]:
    if not isinstance(content, list):
        return None
    texts = [block.get("text") for block in content if isinstance(block, dict) and "text" in block]
    if not texts or not all(isinstance(t, str) for t in texts):
        return None
    return "".join(str(t) for t in texts)


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    odd = [r for r in roles if r not in ("user", "assistant")]
    if odd:
        return [
            "expected only user and assistant roles in messages (the system prompt goes in the "
            f"top-level system list), got roles {roles!r}"
        ]
    users = [m for m in messages if m.get("role") == "user"]
    if not any(_text_of(m.get("content")) == FX.question for m in users):
        got = [m.get("content") for m in users]
        return [
            f'expected a user message with content [{{"text": {FX.question!r}}}], got user contents {got!r}'
        ]
    return []


def _check_system(system: Any) -> List[str]:
    if _text_of(system) != FX.system:
        return [f'expected system [{{"text": {FX.system!r}}}], got {system!r}']
    return []


def _check_tools(tool_config: Any) -> List[str]:
    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    if not isinstance(tools, list):
        return [f"expected toolConfig.tools to list the get_weather toolSpec, got toolConfig={tool_config!r}"]
    specs = [t["toolSpec"] for t in tools if isinstance(t, dict) and isinstance(t.get("toolSpec"), dict)]
    named = [s for s in specs if s.get("name") == FX.tool_name]
    if not named:
        names = [s.get("name") for s in specs]
        return [
            f'expected a tool {{"toolSpec": {{"name": "get_weather", ...}}}}, got toolSpec names {names!r}'
        ]
    schema = named[0].get("inputSchema")
    expected = {"json": dict(fixture_tool_schema())}
    if not isinstance(schema, dict) or set(schema) != {"json"}:
        return [f"expected get_weather inputSchema {expected!r}, got {schema!r}"]
    difference = schema_difference(expected["json"], schema["json"])
    if difference:
        return [f"expected get_weather inputSchema {expected!r}, got {schema!r} ({difference})"]
    return []


bedrock_converse_wire = BedrockConverseWire()
