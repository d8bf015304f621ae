"""Anthropic Messages mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall, Usage
from conformance.reference._decoders import SSEDecoder
from conformance.reference._transport import Response
from conformance.reference.anthropic import AnthropicBackend, _Block, _Turn

from . import Mutant
from ._common import Leak, PerChunkSSEDecoder

WIRE = "anthropic"
HEADERS = {"x-gateway-key": "mutant-matrix"}


class DropsUsage(AnthropicBackend):
    @staticmethod
    def usage(input_tokens: Optional[int], output_tokens: Optional[int]) -> Optional[Usage]:
        return None


class UsageFromDeltaOnly(AnthropicBackend):
    """Reads usage from message_delta alone, losing the input tokens of message_start."""

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        text = super().on_event(name, data, turn)
        if name == "message_start":
            turn.input_tokens = None
        return text


class PassesEndTurnThrough(AnthropicBackend):
    """Maps stop_reason alone: end_turn is "stop" even with a tool_use block."""

    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        if stop_reason == "end_turn":
            return "stop"
        return super().finish_reason(stop_reason, calls)


class UnparsedArguments(AnthropicBackend):
    def complete_calls(self, blocks: List[_Block], stop_reason: Optional[str]) -> List[ToolCall]:
        if stop_reason == "max_tokens":
            return []
        return [
            ToolCall(b.id, b.name, "".join(b.parts))  # type: ignore[arg-type]
            for b in blocks
            if b.type == "tool_use"
        ]


class KeepsTruncatedCall(AnthropicBackend):
    """Trusts a tool_use block on a max_tokens turn, as the SDK's partial parser invites."""

    def complete_calls(self, blocks: List[_Block], stop_reason: Optional[str]) -> List[ToolCall]:
        calls = []
        for block in blocks:
            if block.type != "tool_use":
                continue
            try:
                arguments = json.loads("".join(block.parts) or "{}")
            except ValueError:
                arguments = {"_raw": "".join(block.parts)}
            calls.append(ToolCall(block.id, block.name, arguments))
        return calls

    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        return "tool_calls" if calls else super().finish_reason(stop_reason, calls)


class YieldsHalfBuiltCall(AnthropicBackend):
    """Yields the call at content_block_start, before its input arrived."""

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        if name == "content_block_start":
            block = json.loads(data).get("content_block") or {}
            if block.get("type") == "tool_use":
                self.pending.append(ToolCall(str(block.get("id")), str(block.get("name")), {}))
        return super().on_event(name, data, turn)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.pending: List[ToolCall] = []
        async for chunk in super().chat_stream(chat):
            if self.pending:
                yield StreamChunk(tool_calls=tuple(self.pending))
                self.pending = []
            yield chunk


class RefusalAsStop(AnthropicBackend):
    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        result = super().finish_reason(stop_reason, calls)
        return "stop" if result == "refusal" else result


class QuotaAsRateLimit(AnthropicBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "rate_limit" if kind == "quota" else kind


class IgnoresRetryAfter(AnthropicBackend):
    def retry_after(self, headers: Mapping[str, str]) -> Optional[float]:
        return None


class AuthAsServerError(AnthropicBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "server_error" if kind == "auth" else kind


class OverloadAsServerError(AnthropicBackend):
    """Knows 503 but not 529 and overloaded_error."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "server_error" if kind == "overloaded" else kind


class ServerErrorAsFatal(AnthropicBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "server_error" else kind


class ContextOverflowAsBadRequest(AnthropicBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "context_overflow" else kind


class QuietOnStreamError(AnthropicBackend):
    """Takes event: error for the end of the stream."""

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        if name == "error":
            turn.stop_reason, turn.stopped = "end_turn", True
            return ""
        return super().on_event(name, data, turn)


class LosesTextBeforeError(AnthropicBackend):
    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = []
        async for chunk in super().chat_stream(chat):
            held.append(chunk)
        for chunk in held:
            yield chunk


class DecodesPerChunk(AnthropicBackend):
    def sse_decoder(self) -> SSEDecoder:
        return PerChunkSSEDecoder()


class ForgetsHeaders(AnthropicBackend):
    def headers(self, stream: bool) -> Dict[str, str]:
        return {
            "x-api-key": self.api_key,
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        }


class OpenAIShapedTools(AnthropicBackend):
    """Sends the tool schema as ``parameters``, the OpenAI name for it."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        body["tools"] = [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in chat.tools
        ]
        return body


class SystemAsMessage(AnthropicBackend):
    """Sends the system prompt as a message, which Anthropic rejects."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        system = body.pop("system", None)
        if system is not None:
            body["messages"].insert(0, {"role": "system", "content": system})
        return body


class Retries(AnthropicBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        try:
            return await super().send(chat, stream)
        except LLMError as error:
            if error.status is None:
                raise
            return await super().send(chat, stream)


class IgnoresAbort(AnthropicBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        return await super().send(dataclasses.replace(chat, signal=None), stream)


class AbortsWithoutClosing(IgnoresAbort):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.leak = Leak()

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        response = await self.leak.race(super().send(chat, stream), chat.signal)
        return self.leak.wrap(response, chat.signal)  # type: ignore[return-value]

    async def aclose(self) -> None:
        await self.leak.release()


class WrapsCancellation(AnthropicBackend):
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


def _make(cls: type, headers: Optional[Mapping[str, str]] = None) -> Any:
    return lambda url, http2: cls(url, http2=http2, headers=headers)


MUTANTS = [
    Mutant("drops-usage", "reports no usage", WIRE, _make(DropsUsage)),
    Mutant(
        "usage-from-delta-only", "loses the input tokens of message_start", WIRE, _make(UsageFromDeltaOnly)
    ),
    Mutant(
        "end-turn-as-stop",
        'calls end_turn "stop" with a tool_use block present',
        WIRE,
        _make(PassesEndTurnThrough),
    ),
    Mutant("unparsed-arguments", "returns the input as a JSON string", WIRE, _make(UnparsedArguments)),
    Mutant(
        "keeps-truncated-call",
        "trusts the tool_use block of a max_tokens turn",
        WIRE,
        _make(KeepsTruncatedCall),
    ),
    Mutant("half-built-call", "yields a call at content_block_start", WIRE, _make(YieldsHalfBuiltCall)),
    Mutant("refusal-as-stop", 'calls a refusal "stop"', WIRE, _make(RefusalAsStop)),
    Mutant(
        "quota-as-rate-limit", "treats a spend limit as a retryable rate limit", WIRE, _make(QuotaAsRateLimit)
    ),
    Mutant("ignores-retry-after", "drops the provider's retry-after", WIRE, _make(IgnoresRetryAfter)),
    Mutant(
        "auth-as-server-error", "calls a bad key a retryable server error", WIRE, _make(AuthAsServerError)
    ),
    Mutant("overload-as-server-error", "calls a 529 a server error", WIRE, _make(OverloadAsServerError)),
    Mutant(
        "server-error-as-fatal", "calls a 500 a non-retryable bad request", WIRE, _make(ServerErrorAsFatal)
    ),
    Mutant(
        "context-overflow-as-bad-request",
        'misses "prompt is too long"',
        WIRE,
        _make(ContextOverflowAsBadRequest),
    ),
    Mutant("quiet-on-stream-error", "ends quietly on event: error", WIRE, _make(QuietOnStreamError)),
    Mutant(
        "loses-text-before-error",
        "holds the text back until the end, then fails",
        WIRE,
        _make(LosesTextBeforeError),
    ),
    Mutant("decodes-per-chunk", "decodes UTF-8 per network chunk", WIRE, _make(DecodesPerChunk)),
    Mutant(
        "forgets-headers", "drops the caller's headers", WIRE, _make(ForgetsHeaders, HEADERS), headers=HEADERS
    ),
    Mutant("openai-shaped-tools", "sends the tool schema as parameters", WIRE, _make(OpenAIShapedTools)),
    Mutant("system-as-message", "sends the system prompt as a system message", WIRE, _make(SystemAsMessage)),
    Mutant("retries", "retries a failed request once", WIRE, _make(Retries)),
    Mutant("ignores-abort", "never looks at the abort signal", WIRE, _make(IgnoresAbort)),
    Mutant(
        "aborts-without-closing",
        "raises the reason but leaves the connection open",
        WIRE,
        _make(AbortsWithoutClosing),
    ),
    Mutant("wraps-cancellation", "turns CancelledError into an LLMError", WIRE, _make(WrapsCancellation)),
]
