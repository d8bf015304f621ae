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

import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..contract import Message, Reasoning, ReasoningKind, ToolCall, ToolChoice
from ..fixture import CONFORMANCE_FIXTURE as FX
from ._base import (
    CUT_IN_CALL,
    Variant,
    Wire,
    cut_events,
    cut_short,
    dumps,
    http_date,
    provider_id,
    signature,
    stream_cut_variants,
    tcp_chunks,
)
from ._request import fixture_tool_schema, json_object

if TYPE_CHECKING:
    from ..provider.replies import JsonReply, RecordedRequest, Reply, StreamReply
    from ._turns import History, ScriptedTurn, TurnEvents

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
    import json

    # The fragments Bedrock streams spell the input as the model wrote it.
    return json.dumps(dict(FX.tool_arguments), ensure_ascii=False)


def _usage() -> Dict[str, Any]:
    u = FX.usage
    return {"inputTokens": u.input_tokens, "outputTokens": u.output_tokens, "totalTokens": u.total_tokens}


def _headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    import uuid  # per reply, not per import: it costs a test module milliseconds

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


class _Events:
    """Builds the event-stream messages of one ConverseStream reply."""

    def __init__(self) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ..encoders import aws_event_stream_message

        self.encode = aws_event_stream_message
        self.events: List[bytes] = []
        self.block = -1

    def _event(self, event_type: str, payload: Dict[str, Any]) -> None:
        # The padding hides token lengths; its length varies from event to event.
        payload["p"] = _PADDING[: 1 + (len(self.events) * 17) % len(_PADDING)]
        headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
        self.events.append(self.encode(headers, dumps(payload).encode("utf-8")))

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
        """One ``:message-type: exception`` message: a modeled error after the 200."""
        headers = {
            ":exception-type": exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        }
        self.events.append(self.encode(headers, dumps({"message": message}).encode("utf-8")))

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (messages kept, cut inside the next) ends it short of ``messageStop``."""
        from ..provider.replies import StreamReply

        events = self.events if cut is None else cut_events(self.events, *cut)
        return StreamReply(
            tcp_chunks(events, seed),
            content_type=EVENT_STREAM,
            headers=_headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )


# -- variants ----------------------------------------------------------------------------

#: What a thinking model (Claude on Bedrock) returns before its answer: reasoningText with
#: its signature, and the redactedContent blob (base64) Bedrock sends for flagged thinking.
THINKING = Reasoning(
    ReasoningKind.THINKING.value,
    text=FX.thinking,
    signature=signature("bedrock/reasoning/signature", 180),
    provider="bedrock",
)
REDACTED_THINKING = Reasoning(
    ReasoningKind.REDACTED_THINKING.value,
    data=signature("bedrock/reasoning/redacted", 240),
    provider="bedrock",
)

#: What a ThrottlingException may be reported as: its type says a throttle, and only its
#: message ("per day") says the quota of the day is spent, so a rate limit is a fair reading.
QUOTA_OR_RATE_LIMIT = ("quota", "rate_limit")

VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    "reasoning": (
        Variant(
            "reasoning-text",
            "a reasoningContent block, reasoningText {text, signature} (streamed as text deltas, then a "
            "signature delta), then text",
            "vercel/ai packages/amazon-bedrock/src/__fixtures__/bedrock-reasoning.chunks.txt and "
            "amazon-bedrock-reasoning.json; https://docs.aws.amazon.com/bedrock/latest/APIReference/"
            "API_runtime_ReasoningContentBlock.html",
            reasoning=(THINKING,),
        ),
        Variant(
            "redacted-content",
            "a reasoningContent.redactedContent block (one delta in a stream), then text",
            "vercel/ai packages/amazon-bedrock/src/__fixtures__/amazon-bedrock-redacted-content.chunks.txt "
            "and amazon-bedrock-redacted-content.json",
            reasoning=(REDACTED_THINKING,),
        ),
    ),
    **stream_cut_variants(
        "messageStop and metadata",
        "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html "
        "(the stream's events, messageStop and metadata last)",
        "NousResearch/hermes-agent#109988 and langchain-ai/langchain-aws#1287 (a ConverseStream "
        "that ended before messageStop taken for a finished turn)",
        "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html",
    ),
    "quota": (
        Variant(
            "throttling-per-day",
            "429 ThrottlingException, per day in the message only",
            "minorun365/agent-book#29; Ivy-Interactive/Ivy-Tendril#1756 (Too many tokens per day)",
            error_kinds=QUOTA_OR_RATE_LIMIT,
        ),
    ),
    # A toolUse block's contentBlockDelta input fragments that do not join to JSON, on
    # a tool_use turn; a whole reply's input is a JSON document, so only a stream has them.
    "corrupt-arguments": (
        Variant(
            "unterminated-string",
            "toolUse input fragments ending inside a string, the object left open",
            "kagent-dev/kagent#2230 (malformed streamed toolUse input from ConverseStream); "
            "https://docs.claude.com/en/docs/agents-and-tools/tool-use/fine-grained-tool-streaming",
        ),
        Variant(
            "trailing-garbage",
            "toolUse input fragments: a whole object, then a closing brace too many",
            "vercel/ai#19023 (a Bedrock call whose input is malformed JSON, kept as text, in "
            "production traffic)",
        ),
    ),
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
    from ..provider.replies import JsonReply

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


# -- multi-turn: scripted turns ------------------------------------------------------------

#: The contract's finish reason -> Bedrock's ``stopReason``.
TURN_STOP_REASONS: Mapping[str, str] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filtered",
    "refusal": "content_filtered",
}


def _turn_input(arguments: str) -> Any:
    import json

    # Converse's whole reply carries input as a JSON document; scripted arguments that
    # do not parse (a cut-off call) arrive as the empty object.
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def reasoning_content(item: Reasoning) -> Dict[str, Any]:
    """A ``reasoningContent`` block: ``reasoningText {text, signature}`` or ``redactedContent`` (base64)."""
    if item.kind == ReasoningKind.REDACTED_THINKING:
        return {"reasoningContent": {"redactedContent": item.data}}
    return {"reasoningContent": {"reasoningText": {"text": item.text, "signature": item.signature}}}


def turn_response(turn: ScriptedTurn) -> Dict[str, Any]:
    """The whole ``ConverseResponse`` playing ``turn``: reasoning, text, then ``toolUse`` blocks."""
    content: List[Dict[str, Any]] = [reasoning_content(r) for r in turn.reasoning]
    if turn.text:
        content.append({"text": turn.text})
    for call in turn.calls:
        content.append(
            {"toolUse": {"toolUseId": call.id, "name": call.name, "input": _turn_input(call.arguments)}}
        )
    return converse_response(content, TURN_STOP_REASONS.get(turn.finish_reason, "end_turn"))


def turn_events(turn: ScriptedTurn) -> TurnEvents:
    """The event-stream messages playing ``turn``, with each call's first and last fragment event.

    A reasoning block has no ``contentBlockStart`` (the start union has no member for
    it): its text comes as ``reasoningContent.text`` deltas and its signature as one
    last ``reasoningContent.signature`` delta before ``contentBlockStop``; redacted
    reasoning is one ``reasoningContent.redactedContent`` delta.
    """
    from ._turns import TurnEvents

    out = _Events()
    out.message_start()
    for item in turn.reasoning:
        out.block += 1
        if item.kind == ReasoningKind.REDACTED_THINKING:
            deltas: List[Dict[str, Any]] = [{"redactedContent": item.data}]
        else:
            deltas = [{"text": piece} for piece in _pieces(item.text, 3)] if item.text else []
            deltas.append({"signature": item.signature})
        for delta in deltas:
            out._event(
                "contentBlockDelta", {"contentBlockIndex": out.block, "delta": {"reasoningContent": delta}}
            )
        out.content_block_stop()
    if turn.text:
        out.text_block(turn.text)
    arguments: Dict[int, Tuple[int, int]] = {}
    if turn.interleave and len(turn.calls) > 1:
        _interleaved_calls(out, turn, arguments)
    else:
        for position, call in enumerate(turn.calls):
            arguments[position] = _tool_block(out, call.id, call.name, call.pieces())
    out.finish(TURN_STOP_REASONS.get(turn.finish_reason, "end_turn"))
    return TurnEvents(out.events, EVENT_STREAM, _headers(), arguments)


def _tool_block(out: _Events, call_id: str, name: str, pieces: Sequence[str]) -> Tuple[int, int]:
    """A tool block sending exactly ``pieces``, after the empty first fragment."""
    out.block += 1
    out._event(
        "contentBlockStart",
        {"contentBlockIndex": out.block, "start": {"toolUse": {"toolUseId": call_id, "name": name}}},
    )
    span: List[int] = []
    for piece in ["", *pieces]:
        out._event(
            "contentBlockDelta", {"contentBlockIndex": out.block, "delta": {"toolUse": {"input": piece}}}
        )
        span.append(len(out.events) - 1)
    out.content_block_stop()
    real = span[1:] or span
    return (real[0], real[-1])


def _interleaved_calls(out: _Events, turn: ScriptedTurn, arguments: Dict[int, Tuple[int, int]]) -> None:
    """Start every tool block, send their fragments in turn, then stop them.

    Each delta names its block by ``contentBlockIndex``, which is all a client has to
    tell the blocks apart (boto3 hands the events over one by one, with the index).
    Real ConverseStream replies were seen closing each block before the next starts
    (the pydantic-ai and openllmetry captures), so this is what the format allows, not
    what a model was seen doing: a client that appends every fragment to "the current
    call" mixes the calls up.
    """
    base = out.block + 1
    for offset, call in enumerate(turn.calls):
        start = {"toolUse": {"toolUseId": call.id, "name": call.name}}
        out._event("contentBlockStart", {"contentBlockIndex": base + offset, "start": start})
    pieces = [call.pieces() for call in turn.calls]
    for step in range(max(len(p) for p in pieces)):
        for offset, parts in enumerate(pieces):
            if step >= len(parts):
                continue
            delta = {"toolUse": {"input": parts[step]}}
            out._event("contentBlockDelta", {"contentBlockIndex": base + offset, "delta": delta})
            first = arguments[offset][0] if offset in arguments else len(out.events) - 1
            arguments[offset] = (first, len(out.events) - 1)
    for offset, _call in enumerate(turn.calls):
        if offset not in arguments:  # a call without arguments: its block is empty
            delta = {"toolUse": {"input": ""}}
            out._event("contentBlockDelta", {"contentBlockIndex": base + offset, "delta": delta})
            arguments[offset] = (len(out.events) - 1, len(out.events) - 1)
        out._event("contentBlockStop", {"contentBlockIndex": base + offset})
    out.block = base + len(turn.calls) - 1


# -- multi-turn: reading a history ---------------------------------------------------------

#: The 400 Bedrock answers a history that does not start with a user turn.
FIRST_USER = (
    "A conversation must start with a user message. Try again with a conversation that starts "
    "with a user message."
)
#: The 400 Bedrock answers two turns of the same role in a row.
ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the conversation "
    "alternates between user and assistant roles and try again."
)


def _choice(tool_config: Any) -> Optional[ToolChoice]:
    raw = tool_config.get("toolChoice") if isinstance(tool_config, dict) else None
    if not isinstance(raw, dict) or len(raw) != 1:
        return None
    if "auto" in raw:
        return ToolChoice.AUTO
    if "any" in raw:
        return ToolChoice.REQUIRED
    name = raw["tool"].get("name") if isinstance(raw.get("tool"), dict) else None
    return ToolChoice.tool(name) if isinstance(name, str) and name else None


def _tool_names(tool_config: Any) -> Tuple[str, ...]:
    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    if not isinstance(tools, list):
        return ()
    specs = [t.get("toolSpec") for t in tools if isinstance(t, dict)]
    return tuple(str(s["name"]) for s in specs if isinstance(s, dict) and isinstance(s.get("name"), str))


def _result_text(content: Any) -> Optional[str]:
    """A toolResult's content as text: its ``text`` blocks, ``json`` blocks as compact JSON."""
    if not isinstance(content, list):
        return None
    parts: List[str] = []
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict) and "json" in block:
            parts.append(dumps(block["json"]))
        else:
            return None
    return "".join(parts)


def _null(path: str) -> str:
    # The wording of AWS's request validation, whose member paths count from 1.
    return (
        f"1 validation error detected: Value null at '{path}' failed to satisfy constraint: "
        "Member must not be null"
    )


class _HistoryReader:
    """Reads a Converse request body into the normal form, noting each departure."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self.messages: List[Message] = []
        self.problems: List[str] = []
        self.names: Dict[str, str] = {}

    def read(self) -> None:
        system = self.body.get("system")
        if system is not None:
            text = _text_of(system)
            if text is None:
                self.problems.append(f'system: expected a list of {{"text": ...}} blocks, got {system!r}')
            else:
                self.messages.append(Message("system", text))
        raw = self.body.get("messages")
        if not isinstance(raw, list) or not raw:
            self.problems.append(f"messages: expected a non-empty list of messages, got {raw!r}")
            return
        roles = [m.get("role") if isinstance(m, dict) else None for m in raw]
        pending: List[str] = []
        for index, item in enumerate(raw):
            role = roles[index]
            if role not in ("user", "assistant"):
                self.problems.append(
                    f"1 validation error detected: Value {role!r} at 'messages.{index + 1}.member.role' "
                    "failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]"
                )
                continue
            content = item.get("content")
            if not isinstance(content, list) or not content:
                self.problems.append(
                    f"messages.{index}.content: expected a non-empty list of content blocks, got {content!r}"
                )
                continue
            if role == "user":
                self.user(index, content, pending)
                pending = []
            else:
                if pending:
                    self.missing(index, pending)
                pending = self.assistant(index, content)
        if roles and roles[0] != "user" and roles[0] in ("user", "assistant"):
            self.problems.insert(0, FIRST_USER)
        if any(a == b and a in ("user", "assistant") for a, b in zip(roles, roles[1:])):
            self.problems.insert(0, ALTERNATE)

    def missing(self, index: int, ids: Sequence[str]) -> None:
        self.problems.append(
            f"Expected toolResult blocks at messages.{index}.content for the following Ids: {', '.join(ids)}"
        )

    def user(self, index: int, content: List[Any], pending: Sequence[str]) -> None:
        from ._tool_results import flagged_result

        texts: List[str] = []
        answered: List[str] = []
        for number, block in enumerate(content):
            where = f"messages.{index + 1}.member.content.{number + 1}.member"
            members = list(block) if isinstance(block, dict) else []
            if members == ["text"] and isinstance(block["text"], str):
                texts.append(block["text"])
                continue
            if members != ["toolResult"] or not isinstance(block["toolResult"], dict):
                self.problems.append(
                    f"messages.{index}.content.{number}: expected a content block with one member, text or "
                    f"toolResult, in a user message, got {block!r}"
                )
                continue
            result = block["toolResult"]
            call_id = result.get("toolUseId")
            if not isinstance(call_id, str) or not call_id:
                self.problems.append(_null(f"{where}.toolResult.toolUseId"))
                continue
            if call_id not in pending:
                self.problems.append(
                    f"messages.{index}.content.{number}: the toolResult's toolUseId {call_id} matches no "
                    f"toolUse block of the previous assistant turn (its ids: {', '.join(pending) or 'none'})"
                )
            answered.append(call_id)
            text = _result_text(result.get("content"))
            if text is None:
                self.problems.append(
                    f"messages.{index}.content.{number}.toolResult.content: expected a list of "
                    f'{{"text": ...}} or {{"json": ...}} blocks, got {result.get("content")!r}'
                )
                text = ""
            status = result.get("status")
            at = f"messages.{index}.content.{number}.toolResult"
            for part, member in enumerate(result.get("content") or ()):
                if isinstance(member, dict) and "json" in member and not isinstance(member["json"], dict):
                    self.problems.append(
                        f"The format of the value at {at}.content.{part}.json is invalid. Provide a json "
                        "object for the field and try again."
                    )
            if status == "error" and not result.get("content"):
                self.problems.append(f"The content field at {at} cannot be empty when status value is error.")
            if status not in (None, "success", "error"):
                self.problems.append(
                    f"1 validation error detected: Value {status!r} at '{where}.toolResult.status' failed to "
                    "satisfy constraint: Member must satisfy enum value set: [success, error]"
                )
            self.messages.append(
                Message.tool(flagged_result(call_id, self.names.get(call_id, ""), text, status == "error"))
            )
        if len(answered) > len(pending):
            self.problems.append(
                f"The number of toolResult blocks at messages.{index}.content exceeds the number of toolUse "
                "blocks of previous turn."
            )
        missing = [i for i in pending if i not in answered]
        if missing:
            self.missing(index, missing)
        if texts:
            self.messages.append(Message("user", "".join(texts)))

    def assistant(self, index: int, content: List[Any]) -> List[str]:
        texts: List[str] = []
        calls: List[ToolCall] = []
        reasoning: List[Reasoning] = []
        for number, block in enumerate(content):
            where = f"messages.{index + 1}.member.content.{number + 1}.member"
            members = list(block) if isinstance(block, dict) else []
            if members == ["text"] and isinstance(block["text"], str):
                texts.append(block["text"])
            elif members == ["reasoningContent"] and isinstance(block["reasoningContent"], dict):
                item = self.reasoning(index, number, block["reasoningContent"])
                if item is not None:
                    reasoning.append(item)
            elif members == ["toolUse"] and isinstance(block["toolUse"], dict):
                call = self.tool_use(index, number, where, block["toolUse"])
                if call is not None:
                    self.names[call.id] = call.name
                    calls.append(call)
            else:
                self.problems.append(
                    f"messages.{index}.content.{number}: expected a content block with one member, text, "
                    f"reasoningContent or toolUse, in an assistant message, got {block!r}"
                )
        self.messages.append(Message("assistant", "".join(texts), tuple(calls), reasoning=tuple(reasoning)))
        return [c.id for c in calls]

    def reasoning(self, index: int, number: int, raw: Mapping[str, Any]) -> Optional[Reasoning]:
        where = f"messages.{index}.content.{number}.reasoningContent"
        if list(raw) == ["redactedContent"] and isinstance(raw["redactedContent"], str):
            return Reasoning(
                ReasoningKind.REDACTED_THINKING.value, data=raw["redactedContent"], provider="bedrock"
            )
        text = raw.get("reasoningText") if list(raw) == ["reasoningText"] else None
        if not isinstance(text, dict) or not isinstance(text.get("text"), str):
            self.problems.append(
                f"{where}: expected reasoningText {{text, signature}} or redactedContent, got {raw!r}"
            )
            return None
        signature = text.get("signature")
        if not isinstance(signature, str) or not signature:
            self.problems.append(
                f"{where}.reasoningText.signature: the reasoning came back without its signature; send the "
                "reasoningContent block back exactly as it came, signature included"
            )
            return None
        return Reasoning(
            ReasoningKind.THINKING.value, text=text["text"], signature=signature, provider="bedrock"
        )

    def tool_use(self, index: int, number: int, where: str, raw: Mapping[str, Any]) -> Optional[ToolCall]:
        call_id, name, input_ = raw.get("toolUseId"), raw.get("name"), raw.get("input")
        if not isinstance(call_id, str) or not call_id:
            self.problems.append(_null(f"{where}.toolUse.toolUseId"))
            return None
        if not isinstance(name, str) or not name:
            self.problems.append(_null(f"{where}.toolUse.name"))
            return None
        if not isinstance(input_, dict):
            hint = " (send the parsed arguments, not their JSON text)" if isinstance(input_, str) else ""
            self.problems.append(
                f"messages.{index}.content.{number}.toolUse.input: expected the arguments as a JSON object, "
                f"got {type(input_).__name__}{hint}"
            )
            return None
        return ToolCall(call_id, name, input_)


def read_history(request: RecordedRequest, stream: bool) -> History:
    """The conversation a Converse request carried, in normal form, with every departure."""
    from ._turns import History

    body = request.json if isinstance(request.json, dict) else {}
    reader = _HistoryReader(body)
    if not body:
        reader.problems.append("expected a JSON object body with messages, got none")
    else:
        reader.read()
    tool_config = body.get("toolConfig")
    return History(
        tuple(reader.messages), tuple(reader.problems), _tool_names(tool_config), _choice(tool_config), stream
    )


def history_error(problems: Sequence[str]) -> JsonReply:
    """Bedrock's 400 ``ValidationException`` for a malformed history, quoting the first problem."""
    from ..provider.replies import JsonReply
    from ._script import first_problem

    headers = _headers({"x-amzn-ErrorType": f"ValidationException:{ERROR_NAMESPACE}"})
    return JsonReply({"message": first_problem(problems)}, status=400, headers=headers)


# -- the wire ----------------------------------------------------------------------------


class BedrockConverseWire(Wire):
    """Amazon Bedrock Converse and ConverseStream, whole and as an AWS event stream."""

    marks_tool_errors = True
    tool_error_marker = '"status": "error"'
    turn_reasoning = (
        Reasoning(
            ReasoningKind.THINKING.value,
            text="The user asks for the weather in Paris; get_weather answers that.",
            signature=signature("bedrock/history/signature"),
            provider="bedrock",
        ),
    )

    name = "bedrock-converse"
    interleaves_calls = True
    provider = "bedrock"
    title = "Amazon Bedrock Converse"
    tool_call_id = TOOL_USE_ID
    optional_scenarios = frozenset({CORRUPT_FRAME})
    argument_text_absent = {
        "chat": (
            "a whole Converse reply carries a toolUse block's input as a JSON document; broken "
            "argument text reaches a client only as toolUse input fragments in a stream"
        ),
    }
    #: Bedrock's ThrottlingException carries no retry delay (no ``retry-after``
    #: header, nothing in the body), so a backend must report ``retry_after`` as ``None``.
    rate_limit_retry_after: Optional[float] = None
    variants_table = VARIANTS
    terminal_event = "messageStop and metadata"

    def is_generation(self, request: RecordedRequest) -> bool:
        return request.method == "POST" and _route(request.path) is not None

    def wants_stream(self, request: RecordedRequest) -> bool:
        route = _route(request.path)
        return route is not None and route.group("operation") == "converse-stream"

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ..provider.replies import JsonReply

        message = (
            f"the {self.title} fake provider has no route for {request.method} {request.path}; "
            "only Converse and ConverseStream are scripted"
        )
        headers = _headers({"x-amzn-ErrorType": f"UnknownOperationException:{ERROR_NAMESPACE}"})
        return JsonReply({"message": message}, status=404, headers=headers)

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in ERRORS:
            return error_reply(scenario)
        if scenario == "stream-cut":
            return self._cut(variant, self.wants_stream(request))
        if not self.wants_stream(request):
            return self._whole(scenario)
        return self._stream(scenario, variant)

    def _cut(self, variant: str, stream: bool) -> Reply:
        """A turn cut short: its body before its end, or its stream before ``messageStop``."""
        from ..provider.replies import JsonReply

        in_call = variant in CUT_IN_CALL
        if not stream:
            if in_call:
                body = converse_response([tool_use(dict(FX.tool_arguments))], "tool_use")
            else:
                body = converse_response([{"text": FX.text}], "end_turn")
            whole = JsonReply(body, headers=_headers())
            return cut_short(whole, next(iter(FX.tool_arguments)) if in_call else FX.text)
        out = _Events()
        out.message_start()
        if in_call:
            out.tool_use_block(_input_json())
            keep = 4  # messageStart, contentBlockStart, the empty fragment, the first real one
            out.finish("tool_use")
        else:
            out.text_block(FX.partial_text, pieces=3, stop=False)
            keep = len(out.events)
            rest = FX.text[len(FX.partial_text) :]
            out._event("contentBlockDelta", {"contentBlockIndex": out.block, "delta": {"text": rest}})
            out.content_block_stop()
            out.finish("end_turn")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _whole(self, scenario: str) -> Optional[Reply]:
        from ..provider.replies import HangReply, JsonReply

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

    # -- multi-turn ---------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        from ..provider.replies import JsonReply

        return JsonReply(turn_response(turn), headers=_headers())

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        return turn_events(turn)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        return read_history(request, self.wants_stream(request))

    def history_error(self, problems: Sequence[str]) -> Reply:
        return history_error(problems)

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
    from urllib.parse import unquote  # per check, not per import, as uuid above

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
    from ._schema import schema_difference

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
