"""OpenAI Chat Completions mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall, Usage
from conformance.reference._decoders import SSEDecoder
from conformance.reference._transport import Response, request
from conformance.reference.openai_chat import OpenAIChatBackend, _PartialCall

from . import Mutant
from ._common import Leak, PerChunkSSEDecoder

WIRE = "openai-chat"
HEADERS = {"x-gateway-key": "mutant-matrix"}


class DropsUsage(OpenAIChatBackend):
    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        return None


class PassesStopThrough(OpenAIChatBackend):
    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return {"length": "length", "content_filter": "content_filter"}.get(reason or "", reason or "stop")


class UnparsedArguments(OpenAIChatBackend):
    def complete_calls(self, partials: List[_PartialCall], reason: Optional[str]) -> List[ToolCall]:
        if reason == "length":
            return []
        return [ToolCall(p.id, p.name, "".join(p.arguments)) for p in partials]  # type: ignore[arg-type]


class KeepsTruncatedCall(OpenAIChatBackend):
    def complete_calls(self, partials: List[_PartialCall], reason: Optional[str]) -> List[ToolCall]:
        calls = []
        for p in partials:
            try:
                arguments = json.loads("".join(p.arguments))
            except ValueError:
                arguments = {"_raw": "".join(p.arguments)}
            calls.append(ToolCall(p.id, p.name, arguments))
        return calls

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return "tool_calls" if calls else super().finish_reason(reason, calls)


class YieldsHalfBuiltCall(OpenAIChatBackend):
    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        text = super().on_chunk(chunk, partials)
        self.pending = [ToolCall(p.id, p.name, {}) for p in partials.values()]
        return text

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.pending: List[ToolCall] = []
        yielded = False
        async for chunk in super().chat_stream(chat):
            if self.pending and not yielded:
                yielded = True
                yield StreamChunk(tool_calls=tuple(self.pending))
            yield chunk


class FilterAsStop(OpenAIChatBackend):
    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        result = super().finish_reason(reason, calls)
        return "stop" if result == "content_filter" else result


class QuotaAsRateLimit(OpenAIChatBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "rate_limit" if kind == "quota" else kind


class IgnoresRetryAfter(OpenAIChatBackend):
    def retry_after(self, headers: Mapping[str, str]) -> Optional[float]:
        return None


class RetryAfterInMilliseconds(OpenAIChatBackend):
    def retry_after(self, headers: Mapping[str, str]) -> Optional[float]:
        value = headers.get("retry-after-ms")
        return float(value) if value is not None else None


class AuthAsServerError(OpenAIChatBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "server_error" if kind == "auth" else kind


class OverloadAsServerError(OpenAIChatBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "server_error" if kind == "overloaded" else kind


class ServerErrorAsFatal(OpenAIChatBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "server_error" else kind


class ContextOverflowAsBadRequest(OpenAIChatBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "context_overflow" else kind


class QuietOnStreamError(OpenAIChatBackend):
    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        if chunk.get("error"):
            return ""
        return super().on_chunk(chunk, partials)


class LosesTextBeforeError(OpenAIChatBackend):
    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = []
        async for chunk in super().chat_stream(chat):
            held.append(chunk)
        for chunk in held:
            yield chunk


class DecodesPerChunk(OpenAIChatBackend):
    def sse_decoder(self) -> SSEDecoder:
        return PerChunkSSEDecoder()


class ForgetsHeaders(OpenAIChatBackend):
    def headers(self, stream: bool) -> Dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}", "content-type": "application/json"}


class SendsNoTools(OpenAIChatBackend):
    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        del body["tools"]
        return body


class Retries(OpenAIChatBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        try:
            return await super().send(chat, stream)
        except LLMError as error:
            if error.status is None:
                raise
            return await super().send(chat, stream)


class IgnoresAbort(OpenAIChatBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        payload = json.dumps(self.body(chat, stream)).encode("utf-8")
        response = await request(
            f"{self.base_url}/chat/completions",
            "POST",
            headers=self.headers(stream),
            body=payload,
            http2=self.http2,
            timeout=self.timeout,
        )
        if response.status >= 400:
            raise self.status_error(response.status, response.headers, await response.read())
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


class WrapsCancellation(OpenAIChatBackend):
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
    return lambda url, http2: cls(f"{url}/v1", http2=http2, headers=headers)


MUTANTS = [
    Mutant("drops-usage", "reports no usage", WIRE, _make(DropsUsage)),
    Mutant("stop-on-tool-turn", 'passes "stop" through on a tool turn', WIRE, _make(PassesStopThrough)),
    Mutant("unparsed-arguments", "returns the arguments as a JSON string", WIRE, _make(UnparsedArguments)),
    Mutant(
        "keeps-truncated-call", "keeps the call cut off by the token limit", WIRE, _make(KeepsTruncatedCall)
    ),
    Mutant(
        "half-built-call", "yields a tool call before its arguments arrived", WIRE, _make(YieldsHalfBuiltCall)
    ),
    Mutant("filter-as-stop", 'calls a content-filtered turn "stop"', WIRE, _make(FilterAsStop)),
    Mutant(
        "quota-as-rate-limit",
        "treats an exhausted quota as a retryable rate limit",
        WIRE,
        _make(QuotaAsRateLimit),
    ),
    Mutant("ignores-retry-after", "drops the provider's retry-after", WIRE, _make(IgnoresRetryAfter)),
    Mutant(
        "retry-after-ms-as-seconds", "reads retry-after-ms as seconds", WIRE, _make(RetryAfterInMilliseconds)
    ),
    Mutant(
        "auth-as-server-error", "calls a bad key a retryable server error", WIRE, _make(AuthAsServerError)
    ),
    Mutant(
        "overload-as-server-error", "calls an overload a server error", WIRE, _make(OverloadAsServerError)
    ),
    Mutant(
        "server-error-as-fatal", "calls a 500 a non-retryable bad request", WIRE, _make(ServerErrorAsFatal)
    ),
    Mutant(
        "context-overflow-as-bad-request",
        "misses context_length_exceeded",
        WIRE,
        _make(ContextOverflowAsBadRequest),
    ),
    Mutant("quiet-on-stream-error", "ends quietly on a mid-stream error", WIRE, _make(QuietOnStreamError)),
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
    Mutant("sends-no-tools", "leaves the tools out of the request", WIRE, _make(SendsNoTools)),
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
