"""Bedrock Converse mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall, Usage
from conformance.reference._decoders import EventStreamDecoder, EventStreamMessage
from conformance.reference._transport import Response, request
from conformance.reference.bedrock import BedrockConverseBackend, _PartialToolUse, _Turn

from . import Mutant
from ._common import Leak

WIRE = "bedrock-converse"
HEADERS = {"x-gateway-key": "mutant-matrix"}


class DropsUsage(BedrockConverseBackend):
    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        return None


class StopsAtMessageStop(BedrockConverseBackend):
    """Stops reading at messageStop, so the usage in the metadata after it is lost."""

    def on_event(self, event_type: str, payload: Mapping[str, Any], turn: _Turn) -> str:
        if event_type == "metadata":
            return ""
        return super().on_event(event_type, payload, turn)


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


class FilterAsStop(BedrockConverseBackend):
    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        reason = super().finish_reason(stop_reason, calls)
        return "stop" if reason == "content_filter" else reason


class GuardrailAsStop(BedrockConverseBackend):
    """Knows content_filtered but not guardrail_intervened."""

    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        if stop_reason == "guardrail_intervened":
            return "stop"
        return super().finish_reason(stop_reason, calls)


class QuotaAsRateLimit(BedrockConverseBackend):
    """Reads the ThrottlingException name but not its "per day" message."""

    def error_kind(self, name: str, message: str, status: Optional[int]) -> str:
        kind = super().error_kind(name, message, status)
        return "rate_limit" if kind == "quota" else kind


class InventsRetryAfter(BedrockConverseBackend):
    """Reports a default delay of its own where Bedrock sent none."""

    def retry_after(self, headers: Mapping[str, str]) -> Optional[float]:
        return super().retry_after(headers) or 1.0


class AuthAsServerError(BedrockConverseBackend):
    def error_kind(self, name: str, message: str, status: Optional[int]) -> str:
        kind = super().error_kind(name, message, status)
        return "server_error" if kind == "auth" else kind


class OverloadAsServerError(BedrockConverseBackend):
    def error_kind(self, name: str, message: str, status: Optional[int]) -> str:
        kind = super().error_kind(name, message, status)
        return "server_error" if kind == "overloaded" else kind


class ServerErrorAsFatal(BedrockConverseBackend):
    def error_kind(self, name: str, message: str, status: Optional[int]) -> str:
        kind = super().error_kind(name, message, status)
        return "invalid_request" if kind == "server_error" else kind


class ContextOverflowAsBadRequest(BedrockConverseBackend):
    def error_kind(self, name: str, message: str, status: Optional[int]) -> str:
        kind = super().error_kind(name, message, status)
        return "invalid_request" if kind == "context_overflow" else kind


class QuietOnStreamError(BedrockConverseBackend):
    """Skips exception messages as if they were unknown events, and ends the turn."""

    def on_message(self, message: EventStreamMessage, turn: _Turn) -> str:
        if message.headers.get(":message-type") != "event":
            turn.stop_reason = turn.stop_reason or "end_turn"
            return ""
        return super().on_message(message, turn)


class LosesTextBeforeError(BedrockConverseBackend):
    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = []
        async for chunk in super().chat_stream(chat):
            held.append(chunk)
        for chunk in held:
            yield chunk


class FramePerChunkDecoder(EventStreamDecoder):
    """Takes each network chunk as whole frames and drops whatever is left over."""

    def feed(self, chunk: bytes) -> List[EventStreamMessage]:
        decoder = EventStreamDecoder()
        return decoder.feed(chunk)


class FramesPerChunk(BedrockConverseBackend):
    def decoder(self) -> EventStreamDecoder:
        return FramePerChunkDecoder()


class ForgetsHeaders(BedrockConverseBackend):
    def headers(self, stream: bool) -> Dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}", "content-type": "application/json"}


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


class Retries(BedrockConverseBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        try:
            return await super().send(chat, stream)
        except LLMError as error:
            if error.status is None:
                raise
            return await super().send(chat, stream)


class IgnoresAbort(BedrockConverseBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        payload = json.dumps(self.body(chat, stream)).encode("utf-8")
        response = await request(
            self.url(chat, stream),
            "POST",
            headers=self.headers(stream),
            body=payload,
            http2=self.http2,
            timeout=self.timeout,
        )
        if response.status >= 400:
            raw = await response.read()
            await response.aclose()
            raise self.status_error(response.status, response.headers, raw)
        return response


class AbortsWithoutClosing(IgnoresAbort):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.leak = Leak()

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        response = await self.leak.race(super().send(chat, stream), chat.signal)
        return self.leak.wrap(response, chat.signal)  # type: ignore[return-value]

    async def aclose(self) -> None:
        await self.leak.release()


class WrapsCancellation(BedrockConverseBackend):
    async def chat(self, chat: ChatRequest) -> Any:
        try:
            return await super().chat(chat)
        except asyncio.CancelledError:
            raise LLMError.from_kind("server_error", "cancelled") from None

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except asyncio.CancelledError:
            raise LLMError.from_kind("server_error", "cancelled") from None


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


def _make(cls: type, headers: Optional[Mapping[str, str]] = None) -> Any:
    return lambda url, http2: cls(url, http2=http2, headers=headers)


MUTANTS = [
    Mutant("drops-usage", "reports no usage", WIRE, _make(DropsUsage)),
    Mutant(
        "stops-at-message-stop",
        "stops at messageStop, before the usage in metadata",
        WIRE,
        _make(StopsAtMessageStop),
    ),
    Mutant(
        "text-needs-block-start",
        "drops deltas of blocks that had no contentBlockStart (every text block)",
        WIRE,
        _make(TextNeedsBlockStart),
    ),
    Mutant(
        "stop-on-tool-turn",
        'passes end_turn through as "stop" on a tool turn',
        WIRE,
        _make(PassesStopThrough),
    ),
    Mutant("unparsed-arguments", "returns the tool input as a JSON string", WIRE, _make(UnparsedArguments)),
    Mutant("keeps-truncated-call", "keeps the call cut off by max_tokens", WIRE, _make(KeepsTruncatedCall)),
    Mutant(
        "half-built-call",
        "yields a tool call at contentBlockStart, before its input",
        WIRE,
        _make(YieldsHalfBuiltCall),
    ),
    Mutant("filter-as-stop", 'calls a content-filtered turn "stop"', WIRE, _make(FilterAsStop)),
    Mutant("guardrail-as-stop", 'calls guardrail_intervened "stop"', WIRE, _make(GuardrailAsStop)),
    Mutant(
        "quota-as-rate-limit",
        'treats a "per day" ThrottlingException as a retryable rate limit',
        WIRE,
        _make(QuotaAsRateLimit),
    ),
    Mutant("invents-retry-after", "reports a retry delay Bedrock never sent", WIRE, _make(InventsRetryAfter)),
    Mutant(
        "auth-as-server-error",
        "calls bad credentials a retryable server error",
        WIRE,
        _make(AuthAsServerError),
    ),
    Mutant(
        "overload-as-server-error", "calls an overload a server error", WIRE, _make(OverloadAsServerError)
    ),
    Mutant(
        "server-error-as-fatal", "calls a 500 a non-retryable bad request", WIRE, _make(ServerErrorAsFatal)
    ),
    Mutant(
        "context-overflow-as-bad-request",
        'misses "Input is too long" in a ValidationException',
        WIRE,
        _make(ContextOverflowAsBadRequest),
    ),
    Mutant(
        "quiet-on-stream-error",
        "ends quietly on an exception message mid-stream",
        WIRE,
        _make(QuietOnStreamError),
    ),
    Mutant(
        "loses-text-before-error",
        "holds the text back until the end, then fails",
        WIRE,
        _make(LosesTextBeforeError),
    ),
    Mutant("frames-per-chunk", "takes each network chunk as whole frames", WIRE, _make(FramesPerChunk)),
    Mutant(
        "forgets-headers", "drops the caller's headers", WIRE, _make(ForgetsHeaders, HEADERS), headers=HEADERS
    ),
    Mutant("sends-no-credentials", "sends no Authorization header", WIRE, _make(SendsNoCredentials)),
    Mutant("system-as-message", "sends the system prompt as a message", WIRE, _make(SystemAsMessage)),
    Mutant("sends-no-tools", "leaves toolConfig out of the request", WIRE, _make(SendsNoTools)),
    Mutant("retries", "retries a failed request once", WIRE, _make(Retries)),
    Mutant("ignores-abort", "never looks at the abort signal", WIRE, _make(IgnoresAbort)),
    Mutant(
        "aborts-without-closing",
        "raises the reason but leaves the connection open",
        WIRE,
        _make(AbortsWithoutClosing),
    ),
    Mutant("wraps-cancellation", "turns CancelledError into an LLMError", WIRE, _make(WrapsCancellation)),
    Mutant("ignores-checksums", "decodes frames without checking their CRCs", WIRE, _make(IgnoresChecksums)),
]
