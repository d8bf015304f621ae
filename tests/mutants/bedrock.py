"""Bedrock Converse mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from conformance.contract import ChatRequest, StreamChunk, ToolCall
from conformance.reference._decoders import EventStreamDecoder, EventStreamMessage
from conformance.reference.bedrock import BedrockConverseBackend, _PartialToolUse, _Turn

from . import _common as shared
from ._common import Zoo

zoo = Zoo("bedrock-converse", BedrockConverseBackend)


class StopsAtMessageStop(BedrockConverseBackend):
    """Stops reading at messageStop, so the usage in the metadata after it is lost."""

    def on_event(self, event_type: str, payload: Mapping[str, Any], turn: _Turn) -> str:
        if event_type == "metadata":
            turn.metadata = True  # the turn's end seen, its usage left unread
            return ""
        return super().on_event(event_type, payload, turn)


class EveryStreamFailureOverloaded(BedrockConverseBackend):
    """Takes any exception frame after the 200 for an overload, a throttle's too."""

    def error_kind(self, name: str, message: str, status: Optional[int]) -> str:
        return "overloaded" if status is None else super().error_kind(name, message, status)


class TextNeedsBlockStart(BedrockConverseBackend):
    """Expects a contentBlockStart before every block; Bedrock sends none for text."""

    def on_event(self, event_type: str, payload: Mapping[str, Any], turn: _Turn) -> str:
        if (
            event_type == "contentBlockDelta"
            and int(payload.get("contentBlockIndex", 0)) not in turn.tool_uses
        ):
            return ""
        return super().on_event(event_type, payload, turn)


class PassesStopThrough(BedrockConverseBackend):
    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        return {"tool_use": "tool_calls", "max_tokens": "length"}.get(
            stop_reason or "", "content_filter" if "filter" in (stop_reason or "") else "stop"
        )


class UnparsedArguments(BedrockConverseBackend):
    def complete_calls(self, tool_uses: List[_PartialToolUse], stop_reason: Optional[str]) -> List[ToolCall]:
        if stop_reason == "max_tokens":
            return []
        return [
            ToolCall(
                t.tool_use_id, t.name, json.dumps(t.parsed) if t.parsed is not None else "".join(t.input)
            )  # type: ignore[arg-type]
            for t in tool_uses
        ]


class KeepsTruncatedCall(BedrockConverseBackend):
    def complete_calls(self, tool_uses: List[_PartialToolUse], stop_reason: Optional[str]) -> List[ToolCall]:
        calls = []
        for t in tool_uses:
            arguments = t.parsed
            if arguments is None:
                try:
                    arguments = json.loads("".join(t.input))
                except ValueError:
                    arguments = {"_raw": "".join(t.input)}
            calls.append(ToolCall(t.tool_use_id, t.name, arguments))
        return calls

    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        return "tool_calls" if calls else super().finish_reason(stop_reason, calls)


class YieldsHalfBuiltCall(BedrockConverseBackend):
    """Yields the call at contentBlockStart, before its input arrived."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.started: List[ToolCall] = []
        yielded = False
        async for chunk in super().chat_stream(chat):
            if self.started and not yielded:
                yielded = True
                yield StreamChunk(tool_calls=tuple(self.started))
            yield chunk

    def on_event(self, event_type: str, payload: Mapping[str, Any], turn: _Turn) -> str:
        text = super().on_event(event_type, payload, turn)
        if event_type == "contentBlockStart":
            self.started = [ToolCall(t.tool_use_id, t.name, {}) for t in turn.tool_uses.values()]
        return text


class GuardrailAsStop(BedrockConverseBackend):
    """Knows content_filtered but not guardrail_intervened."""

    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        if stop_reason == "guardrail_intervened":
            return "stop"
        return super().finish_reason(stop_reason, calls)


class InventsRetryAfter(BedrockConverseBackend):
    """Reports a default delay of its own where Bedrock sent none."""

    def retry_after(self, headers: Mapping[str, str]) -> Optional[float]:
        return super().retry_after(headers) or 1.0


class QuietOnStreamError(BedrockConverseBackend):
    """Skips exception messages as if they were unknown events, and ends the turn."""

    def on_message(self, message: EventStreamMessage, turn: _Turn) -> str:
        if message.headers.get(":message-type") != "event":
            turn.stop_reason = turn.stop_reason or "end_turn"
            turn.metadata = True  # the exception taken for the turn's end, metadata and all
            return ""
        return super().on_message(message, turn)


class FramePerChunkDecoder(EventStreamDecoder):
    """Takes each network chunk as whole frames and drops whatever is left over."""

    def feed(self, chunk: bytes) -> List[EventStreamMessage]:
        decoder = EventStreamDecoder()
        return decoder.feed(chunk)


class FramesPerChunk(BedrockConverseBackend):
    def decoder(self) -> EventStreamDecoder:
        return FramePerChunkDecoder()


class SendsNoCredentials(BedrockConverseBackend):
    def headers(self, stream: bool) -> Dict[str, str]:
        headers = super().headers(stream)
        del headers["authorization"]
        return headers


class SystemAsMessage(BedrockConverseBackend):
    """Sends the system prompt as a message, the OpenAI way."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        system = body.pop("system", [])
        body["messages"] = [{"role": "system", "content": system}, *body["messages"]]
        return body


class SendsNoTools(BedrockConverseBackend):
    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        del body["toolConfig"]
        return body


class IgnoresChecksums(BedrockConverseBackend):
    """Decodes frames without checking either CRC: a damaged frame passes as data.

    Real Bedrock never sends a damaged frame; the wire's optional ``corrupt-frame``
    scenario does, and catches this one.
    """

    def decoder(self) -> EventStreamDecoder:
        return _NoCRCDecoder()


class _NoCRCDecoder(EventStreamDecoder):
    def feed(self, chunk: bytes) -> List[EventStreamMessage]:
        from conformance.encoders import CRC, PRELUDE, crc32

        self._buffer += chunk
        messages: List[EventStreamMessage] = []
        fixed = bytearray()
        # Rewrites each complete frame's CRCs to the computed ones before the real
        # decoder sees it: the same as never checking them.
        while len(self._buffer) >= PRELUDE.size:
            total, _ = PRELUDE.unpack_from(self._buffer, 0)
            if len(self._buffer) < total:
                break
            frame = bytearray(self._buffer[:total])
            del self._buffer[:total]
            CRC.pack_into(frame, PRELUDE.size, crc32(bytes(frame[: PRELUDE.size])))
            CRC.pack_into(frame, total - CRC.size, crc32(bytes(frame[: total - CRC.size])))
            fixed += frame
        if fixed:
            messages = EventStreamDecoder().feed(bytes(fixed))
        return messages


class ContentFilteredAsStop(BedrockConverseBackend):
    """Knows guardrail_intervened but calls the model's own content_filtered a normal stop."""

    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        if stop_reason == "content_filtered":
            return "stop"
        return super().finish_reason(stop_reason, calls)


class FlushesCallsOnCut(shared.FlushesCallsOnCut, BedrockConverseBackend):
    """Opens a call at its contentBlockStart, and hands what it has on when the stream fails."""

    def on_event(self, event_type: str, payload: Mapping[str, Any], turn: _Turn) -> str:
        text = super().on_event(event_type, payload, turn)
        if event_type == "contentBlockStart":
            self.gathered = [ToolCall(t.tool_use_id, t.name, {}) for t in turn.tool_uses.values()]
        return text


class EndsAtFinishReason(shared.EndsAtFinishReason, BedrockConverseBackend):
    """Takes messageStop's stopReason for the end of the turn, metadata or not."""

    def on_event(self, event_type: str, payload: Mapping[str, Any], turn: _Turn) -> str:
        text = super().on_event(event_type, payload, turn)
        self.finished = self.finished or event_type == "messageStop"
        return text


MUTANTS = [
    # A daily quota comes as a ThrottlingException: a rate limit is a fair reading of it. A
    # prompt too long is a ValidationException, whose name a bad request reads as fairly.
    *zoo.every_wire(leave_out=(shared.QUOTA_AS_RATE_LIMIT, shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST)),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_SERVER_ERROR),
    *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
    *zoo.unparsed(),
    zoo.shared(shared.DROPS_REASONING),
    zoo.shared(shared.DROPS_RETURNED_REASONING),
    zoo.shared(shared.DROPS_TOOL_TURN_REASONING),
    zoo.shared(shared.LOSES_SIGNATURE),
    zoo.shared(shared.THINKING_AS_TEXT),
    zoo.mutant(
        "stops-at-message-stop",
        "stops at messageStop, before the usage in metadata",
        StopsAtMessageStop,
        checks=("usage",),
        cases=(
            "text/stream",
            "tool-call/stream",
            "tool-call-with-stop/stream",
            "truncated-tool-call/stream",
            "content-filter/stream",
        ),
    ),
    zoo.mutant(
        "stream-throttle-as-overloaded",
        "reports a throttlingException frame as an overload",
        EveryStreamFailureOverloaded,
        checks=("error-kind", "error-details"),
        cases=("stream-error/stream",),
    ),
    zoo.mutant(
        "text-needs-block-start",
        "drops deltas of blocks that had no contentBlockStart (every text block)",
        TextNeedsBlockStart,
        checks=("content",),
        cases=("text/stream", "truncated-tool-call/stream"),
    ),
    zoo.mutant(
        "stop-on-tool-turn",
        'passes end_turn through as "stop" on a tool turn',
        PassesStopThrough,
        checks=("finish-reason",),
        cases=("tool-call-with-stop/chat", "tool-call-with-stop/stream", "content-filter/chat"),
    ),
    zoo.mutant(
        "unparsed-arguments",
        "returns the tool input as a JSON string",
        UnparsedArguments,
        checks=("tool-arguments",),
        cases=(
            "tool-call/chat",
            "tool-call/stream",
            "tool-call-with-stop/chat",
            "tool-call-with-stop/stream",
        ),
    ),
    zoo.mutant(
        "keeps-truncated-call",
        "keeps the call cut off by max_tokens",
        KeepsTruncatedCall,
        checks=("finish-reason", "tool-calls"),
        cases=("truncated-tool-call/chat", "truncated-tool-call/stream"),
    ),
    zoo.mutant(
        "half-built-call",
        "yields a tool call at contentBlockStart, before its input",
        YieldsHalfBuiltCall,
        checks=("tool-calls",),
        cases=("tool-call/stream", "tool-call-with-stop/stream", "truncated-tool-call/stream"),
    ),
    zoo.shared(shared.FILTER_AS_STOP),
    zoo.mutant(
        "guardrail-as-stop",
        'calls guardrail_intervened "stop"',
        GuardrailAsStop,
        checks=("finish-reason",),
        cases=("content-filter/chat", "content-filter/stream"),
    ),
    # Reads the ThrottlingException name but not its "per day" message.
    zoo.mutant(
        "invents-retry-after",
        "reports a retry delay Bedrock never sent",
        InventsRetryAfter,
        checks=("retry-after",),
        cases=("rate-limit/chat", "rate-limit/stream"),
    ),
    zoo.mutant(
        "quiet-on-stream-error",
        "ends quietly on an exception message mid-stream",
        QuietOnStreamError,
        checks=("error-raised",),
        cases=("stream-error/stream",),
    ),
    zoo.mutant(
        "frames-per-chunk",
        "takes each network chunk as whole frames",
        FramesPerChunk,
        checks=("reply",),
        cases=(
            "text/stream",
            "tool-call/stream",
            "tool-call-with-stop/stream",
            "truncated-tool-call/stream",
            "content-filter/stream",
        ),
    ),
    zoo.mutant(
        "sends-no-credentials",
        "sends no Authorization header",
        SendsNoCredentials,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "system-as-message",
        "sends the system prompt as a message",
        SystemAsMessage,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "sends-no-tools",
        "leaves toolConfig out of the request",
        SendsNoTools,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "ignores-checksums",
        "decodes frames without checking their CRCs",
        IgnoresChecksums,
        checks=("corrupt-frame",),
        cases=("corrupt-frame/stream",),
    ),
    zoo.mutant(
        "content-filtered-as-stop",
        'knows guardrail_intervened but calls content_filtered "stop"',
        ContentFilteredAsStop,
        checks=("finish-reason",),
        cases=("content-filter/stream",),
    ),
    zoo.shared(shared.TAKES_CUT_FOR_END, checks=('cut-raised', 'cut-finish', 'cut-tool-call')),
    zoo.ends_at_finish_reason(EndsAtFinishReason),
    zoo.mutant(
        "flushes-calls-on-cut",
        "hands on the calls it gathered when the stream is cut, before the turn's end said they stand",
        FlushesCallsOnCut,
        checks=("cut-tool-call",),
        cases=("stream-cut/stream",),
    ),
]
