"""Ollama mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall, Usage
from conformance.reference._decoders import NDJSONDecoder
from conformance.reference._transport import Response, request
from conformance.reference.ollama import OllamaBackend

from . import Mutant
from ._common import Leak

WIRE = "ollama"
HEADERS = {"x-gateway-key": "mutant-matrix"}


class PerChunkNDJSONDecoder(NDJSONDecoder):
    """Decodes every network chunk on its own, so a character cut in two is lost."""

    def feed(self, chunk: bytes) -> List[Any]:
        return super().feed(chunk.decode("utf-8", errors="replace").encode("utf-8"))


class DropsUsage(OllamaBackend):
    @staticmethod
    def usage(line: Mapping[str, Any]) -> Usage:
        return None  # type: ignore[return-value]


class CountsOutputAsTotal(OllamaBackend):
    """Reports eval_count as the total, forgetting the prompt's tokens."""

    @staticmethod
    def usage(line: Mapping[str, Any]) -> Usage:
        output = int(line.get("eval_count") or 0)
        return Usage(int(line.get("prompt_eval_count") or 0), output, output)


class PassesStopThrough(OllamaBackend):
    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return super().finish_reason(reason, [])


class RequiresCallId(OllamaBackend):
    """Takes the call's id as given, and servers before 0.12 send none."""

    def tool_call(self, raw: Mapping[str, Any]) -> Optional[ToolCall]:
        call = super().tool_call(raw)
        if call is None:
            return None
        return ToolCall(str(raw.get("id", "")), call.name, call.arguments)


class LengthAsStop(OllamaBackend):
    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return super().finish_reason("stop" if reason == "length" else reason, calls)


class QuotaAsRateLimit(OllamaBackend):
    def error_kind(self, status: Optional[int], message: str) -> str:
        kind = super().error_kind(status, message)
        return "rate_limit" if kind == "quota" else kind


class AuthAsServerError(OllamaBackend):
    def error_kind(self, status: Optional[int], message: str) -> str:
        kind = super().error_kind(status, message)
        return "server_error" if kind == "auth" else kind


class OverloadAsServerError(OllamaBackend):
    def error_kind(self, status: Optional[int], message: str) -> str:
        kind = super().error_kind(status, message)
        return "server_error" if kind == "overloaded" else kind


class ServerErrorAsFatal(OllamaBackend):
    def error_kind(self, status: Optional[int], message: str) -> str:
        kind = super().error_kind(status, message)
        return "invalid_request" if kind == "server_error" else kind


class ContextOverflowAsBadRequest(OllamaBackend):
    def error_kind(self, status: Optional[int], message: str) -> str:
        kind = super().error_kind(status, message)
        return "invalid_request" if kind == "context_overflow" else kind


class QuietOnStreamError(OllamaBackend):
    """Reads an {"error"} line as the end of the turn."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.ended = False
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except LLMError:
            if not self.ended:
                raise
            yield StreamChunk(finish_reason="stop")

    def read_line(self, line: Mapping[str, Any]) -> Tuple[str, List[ToolCall]]:
        if "error" in line:
            self.ended = True
        return super().read_line(line)


class LosesTextBeforeError(OllamaBackend):
    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = []
        async for chunk in super().chat_stream(chat):
            held.append(chunk)
        for chunk in held:
            yield chunk


class DecodesPerChunk(OllamaBackend):
    def ndjson_decoder(self) -> NDJSONDecoder:
        return PerChunkNDJSONDecoder()


class ForgetsHeaders(OllamaBackend):
    def headers(self, stream: bool) -> Dict[str, str]:
        return {"content-type": "application/json"}


class OmitsStreamFalse(OllamaBackend):
    """Leaves "stream" out of a whole request, and the server streams by default."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        if not stream:
            del body["stream"]
        return body


class SendsNoTools(OllamaBackend):
    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        del body["tools"]
        return body


class Retries(OllamaBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        try:
            return await super().send(chat, stream)
        except LLMError as error:
            if error.status is None:
                raise
            return await super().send(chat, stream)


class IgnoresAbort(OllamaBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        payload = json.dumps(self.body(chat, stream)).encode("utf-8")
        response = await request(
            f"{self.base_url}/api/chat",
            "POST",
            headers=self.headers(stream),
            body=payload,
            http2=self.http2,
            timeout=self.timeout,
        )
        if response.status >= 400:
            raw = await response.read()
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


class WrapsCancellation(OllamaBackend):
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
    Mutant("output-as-total", "reports eval_count as the total", WIRE, _make(CountsOutputAsTotal)),
    Mutant("stop-on-tool-turn", 'passes "stop" through on a tool turn', WIRE, _make(PassesStopThrough)),
    Mutant(
        "requires-call-id",
        "takes the call id as given, empty from older servers",
        WIRE,
        _make(RequiresCallId),
    ),
    Mutant("length-as-stop", 'calls a turn cut off by num_predict "stop"', WIRE, _make(LengthAsStop)),
    Mutant(
        "quota-as-rate-limit",
        "treats a used-up usage limit as a retryable rate limit",
        WIRE,
        _make(QuotaAsRateLimit),
    ),
    Mutant("auth-as-server-error", "calls a 401 a retryable server error", WIRE, _make(AuthAsServerError)),
    Mutant(
        "overload-as-server-error", "calls server busy a server error", WIRE, _make(OverloadAsServerError)
    ),
    Mutant(
        "server-error-as-fatal", "calls a 500 a non-retryable bad request", WIRE, _make(ServerErrorAsFatal)
    ),
    Mutant(
        "context-overflow-as-bad-request",
        "misses the context length message",
        WIRE,
        _make(ContextOverflowAsBadRequest),
    ),
    Mutant("quiet-on-stream-error", 'ends quietly on an {"error"} line', WIRE, _make(QuietOnStreamError)),
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
    Mutant("omits-stream-false", 'leaves "stream" out of a whole request', WIRE, _make(OmitsStreamFalse)),
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
