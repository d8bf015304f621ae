"""Gemini mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall, Usage
from conformance.reference._decoders import SSEDecoder
from conformance.reference._transport import Response, request
from conformance.reference.gemini import GeminiBackend

from . import Mutant
from ._common import Leak, PerChunkSSEDecoder

WIRE = "gemini"
HEADERS = {"x-gateway-key": "mutant-matrix"}


class DropsUsage(GeminiBackend):
    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        return None


class FirstUsageOnly(GeminiBackend):
    """Keeps the usageMetadata of the first event, which counts only the prompt."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.first: Optional[Usage] = None
        async for chunk in super().chat_stream(chat):
            if chunk.finish_reason is not None:
                chunk = StreamChunk(chunk.content, chunk.tool_calls, chunk.finish_reason, self.first)
            yield chunk

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        if getattr(self, "first", None) is None:
            self.first = self.usage(body.get("usageMetadata"))
        return super().read_response(body)


class PassesStopThrough(GeminiBackend):
    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return super().finish_reason(reason, [])


class RequiresCallId(GeminiBackend):
    """Takes the functionCall's id as given, and Gemini 2.x sends none."""

    def tool_call(self, function_call: Mapping[str, Any]) -> Optional[ToolCall]:
        call = super().tool_call(function_call)
        if call is None:
            return None
        return ToolCall(str(function_call.get("id", "")), call.name, call.arguments)


class CallsFromFinalEventOnly(GeminiBackend):
    """Looks for function calls only on the event that carries finishReason."""

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        text, calls, reason = super().read_response(body)
        return text, (calls if reason else []), reason


class MaxTokensAsStop(GeminiBackend):
    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return super().finish_reason("STOP" if reason == "MAX_TOKENS" else reason, calls)


class FilterAsStop(GeminiBackend):
    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        result = super().finish_reason(reason, calls)
        return "stop" if result == "content_filter" else result


class IgnoresPromptBlock(GeminiBackend):
    """Reads candidates only, so a blocked prompt (no candidates) looks like a clean stop."""

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        if not body.get("candidates") and "error" not in body:
            return "", [], "STOP"
        return super().read_response(body)


class QuotaAsRateLimit(GeminiBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "rate_limit" if kind == "quota" else kind


class IgnoresRetryDelay(GeminiBackend):
    def retry_delay(self, error: Mapping[str, Any], headers: Mapping[str, str]) -> Optional[float]:
        return None


class AuthByStatusOnly(GeminiBackend):
    """Looks for 401/403 only; Gemini says a wrong key with a 400 and ErrorInfo."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "auth" and status == 400 else kind


class OverloadAsServerError(GeminiBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "server_error" if kind == "overloaded" else kind


class ServerErrorAsFatal(GeminiBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "server_error" else kind


class ContextOverflowAsBadRequest(GeminiBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "context_overflow" else kind


class QuietOnStreamError(GeminiBackend):
    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        if "error" in body:
            return "", [], "STOP"
        return super().read_response(body)


class LosesTextBeforeError(GeminiBackend):
    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = []
        async for chunk in super().chat_stream(chat):
            held.append(chunk)
        for chunk in held:
            yield chunk


class DecodesPerChunk(GeminiBackend):
    def sse_decoder(self) -> SSEDecoder:
        return PerChunkSSEDecoder()


class ForgetsHeaders(GeminiBackend):
    def headers(self, stream: bool) -> Dict[str, str]:
        return {"x-goog-api-key": self.api_key, "content-type": "application/json"}


class SystemAsContent(GeminiBackend):
    """Sends the system prompt as a content with role "system", which Gemini refuses."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        instruction = body.pop("systemInstruction")
        body["contents"].insert(0, {"role": "system", "parts": instruction["parts"]})
        return body


class ForgetsAltSse(GeminiBackend):
    """Streams without ?alt=sse, and so gets one JSON array instead of events."""

    def url(self, chat: ChatRequest, stream: bool) -> str:
        return super().url(chat, stream).replace("?alt=sse", "")


class Retries(GeminiBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        try:
            return await super().send(chat, stream)
        except LLMError as error:
            if error.status is None:
                raise
            return await super().send(chat, stream)


class IgnoresAbort(GeminiBackend):
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


class WrapsCancellation(GeminiBackend):
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
        "first-usage-only",
        "keeps the first event's usage, which counts only the prompt",
        WIRE,
        _make(FirstUsageOnly),
    ),
    Mutant("stop-on-tool-turn", 'passes "STOP" through on a tool turn', WIRE, _make(PassesStopThrough)),
    Mutant(
        "requires-call-id",
        "takes the functionCall id as given, empty on Gemini 2.x",
        WIRE,
        _make(RequiresCallId),
    ),
    Mutant(
        "calls-from-final-event-only",
        "looks for calls only on the event with finishReason",
        WIRE,
        _make(CallsFromFinalEventOnly),
    ),
    Mutant("max-tokens-as-stop", 'calls a turn cut off by MAX_TOKENS "stop"', WIRE, _make(MaxTokensAsStop)),
    Mutant("filter-as-stop", 'calls a SAFETY or blocked turn "stop"', WIRE, _make(FilterAsStop)),
    Mutant(
        "ignores-prompt-block",
        "reads candidates only and misses promptFeedback.blockReason",
        WIRE,
        _make(IgnoresPromptBlock),
    ),
    Mutant(
        "quota-as-rate-limit",
        "treats an exhausted daily quota as a retryable rate limit",
        WIRE,
        _make(QuotaAsRateLimit),
    ),
    Mutant("ignores-retry-delay", "drops RetryInfo.retryDelay", WIRE, _make(IgnoresRetryDelay)),
    Mutant("auth-by-status-only", "misses the 400 API_KEY_INVALID", WIRE, _make(AuthByStatusOnly)),
    Mutant(
        "overload-as-server-error", "calls UNAVAILABLE a server error", WIRE, _make(OverloadAsServerError)
    ),
    Mutant(
        "server-error-as-fatal", "calls a 500 a non-retryable bad request", WIRE, _make(ServerErrorAsFatal)
    ),
    Mutant(
        "context-overflow-as-bad-request",
        "misses the input token count message",
        WIRE,
        _make(ContextOverflowAsBadRequest),
    ),
    Mutant(
        "quiet-on-stream-error", 'ends quietly on a data: {"error"} event', WIRE, _make(QuietOnStreamError)
    ),
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
    Mutant(
        "system-as-content", 'sends the system prompt as a "system" content', WIRE, _make(SystemAsContent)
    ),
    Mutant("forgets-alt-sse", "streams without ?alt=sse", WIRE, _make(ForgetsAltSse)),
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
