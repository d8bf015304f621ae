"""OpenAI Responses mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall, Usage
from conformance.reference._decoders import SSEDecoder
from conformance.reference._transport import Response
from conformance.reference.openai_responses import OpenAIResponsesBackend, _Turn

from . import Mutant
from ._common import Leak, PerChunkSSEDecoder

WIRE = "openai-responses"
HEADERS = {"x-gateway-key": "mutant-matrix"}


class DropsUsage(OpenAIResponsesBackend):
    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        return None


class StopOnToolTurn(OpenAIResponsesBackend):
    """Reads only the status: "completed" is "stop", calls or not."""

    def finish_reason(self, turn: _Turn, calls: List[ToolCall]) -> str:
        result = super().finish_reason(turn, calls)
        return "stop" if result == "tool_calls" else result


class UsesItemId(OpenAIResponsesBackend):
    """Takes the item's ``id`` (fc_...) for the call id instead of ``call_id``."""

    def complete_calls(self, items: List[Mapping[str, Any]], turn: _Turn) -> List[ToolCall]:
        by_call = {str(i.get("call_id")): str(i.get("id")) for i in items}
        return [
            ToolCall(by_call.get(c.id, c.id), c.name, c.arguments)
            for c in super().complete_calls(items, turn)
        ]


class UnparsedArguments(OpenAIResponsesBackend):
    def complete_calls(self, items: List[Mapping[str, Any]], turn: _Turn) -> List[ToolCall]:
        if turn.status == "incomplete":
            return []
        return [
            ToolCall(str(i.get("call_id")), str(i.get("name")), i.get("arguments"))  # type: ignore[arg-type]
            for i in items
            if i.get("type") == "function_call"
        ]


class KeepsTruncatedCall(OpenAIResponsesBackend):
    """Keeps every function_call item, cut off or not, and calls the turn a tool turn."""

    def complete_calls(self, items: List[Mapping[str, Any]], turn: _Turn) -> List[ToolCall]:
        calls = []
        for item in items:
            if item.get("type") != "function_call":
                continue
            try:
                arguments = json.loads(item.get("arguments") or "{}")
            except ValueError:
                arguments = {"_raw": item.get("arguments")}
            calls.append(ToolCall(str(item.get("call_id")), str(item.get("name")), arguments))
        return calls

    def finish_reason(self, turn: _Turn, calls: List[ToolCall]) -> str:
        return "tool_calls" if calls else super().finish_reason(turn, calls)


class YieldsHalfBuiltCall(OpenAIResponsesBackend):
    """Yields the call as soon as its item is added, before any argument arrived."""

    def on_event(self, event: Mapping[str, Any], turn: _Turn, items: List[Mapping[str, Any]]) -> str:
        item = event.get("item")
        if event.get("type") == "response.output_item.added" and isinstance(item, dict):
            if item.get("type") == "function_call":
                self.pending.append(ToolCall(str(item.get("call_id")), str(item.get("name")), {}))
        return super().on_event(event, turn, items)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.pending: List[ToolCall] = []
        async for chunk in super().chat_stream(chat):
            if self.pending:
                yield StreamChunk(tool_calls=tuple(self.pending))
                self.pending = []
            yield chunk


class FilterAsStop(OpenAIResponsesBackend):
    def finish_reason(self, turn: _Turn, calls: List[ToolCall]) -> str:
        result = super().finish_reason(turn, calls)
        return "stop" if result in ("content_filter", "refusal") else result


class QuotaAsRateLimit(OpenAIResponsesBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "rate_limit" if kind == "quota" else kind


class IgnoresRetryAfter(OpenAIResponsesBackend):
    def retry_after(self, headers: Mapping[str, str]) -> Optional[float]:
        return None


class AuthAsServerError(OpenAIResponsesBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "server_error" if kind == "auth" else kind


class OverloadAsServerError(OpenAIResponsesBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "server_error" if kind == "overloaded" else kind


class ServerErrorAsFatal(OpenAIResponsesBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "server_error" else kind


class ContextOverflowAsBadRequest(OpenAIResponsesBackend):
    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "context_overflow" else kind


class ReadsFlatErrorOnly(OpenAIResponsesBackend):
    """Reads the error event as the API reference draws it, missing the nested fields."""

    def stream_error(self, event: Mapping[str, Any]) -> LLMError:
        return self.make_error(self.error_kind(None, event), event, status=None)


class QuietOnStreamError(OpenAIResponsesBackend):
    """Takes the error event for the end of the stream."""

    def on_event(self, event: Mapping[str, Any], turn: _Turn, items: List[Mapping[str, Any]]) -> str:
        if event.get("type") in ("error", "response.failed"):
            turn.status = "completed"
            return ""
        return super().on_event(event, turn, items)


class LosesTextBeforeError(OpenAIResponsesBackend):
    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = []
        async for chunk in super().chat_stream(chat):
            held.append(chunk)
        for chunk in held:
            yield chunk


class DecodesPerChunk(OpenAIResponsesBackend):
    def sse_decoder(self) -> SSEDecoder:
        return PerChunkSSEDecoder()


class ForgetsHeaders(OpenAIResponsesBackend):
    def headers(self, stream: bool) -> Dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}", "content-type": "application/json"}


class ChatShapedTools(OpenAIResponsesBackend):
    """Sends the tools in the Chat Completions shape, which Responses rejects."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
            }
            for t in chat.tools
        ]
        return body


class Retries(OpenAIResponsesBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        try:
            return await super().send(chat, stream)
        except LLMError as error:
            if error.status is None:
                raise
            return await super().send(chat, stream)


class IgnoresAbort(OpenAIResponsesBackend):
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


class WrapsCancellation(OpenAIResponsesBackend):
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
    Mutant("stop-on-tool-turn", 'calls a completed tool turn "stop"', WIRE, _make(StopOnToolTurn)),
    Mutant("uses-item-id", "takes the item id (fc_...) for the call id", WIRE, _make(UsesItemId)),
    Mutant("unparsed-arguments", "returns the arguments as a JSON string", WIRE, _make(UnparsedArguments)),
    Mutant("keeps-truncated-call", "keeps the incomplete function_call", WIRE, _make(KeepsTruncatedCall)),
    Mutant("half-built-call", "yields a call at output_item.added", WIRE, _make(YieldsHalfBuiltCall)),
    Mutant("filter-as-stop", 'calls a filtered or refused turn "stop"', WIRE, _make(FilterAsStop)),
    Mutant(
        "quota-as-rate-limit",
        "treats insufficient_quota as a retryable rate limit",
        WIRE,
        _make(QuotaAsRateLimit),
    ),
    Mutant("ignores-retry-after", "drops the provider's retry-after", WIRE, _make(IgnoresRetryAfter)),
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
    Mutant("flat-error-only", "reads only the flat error event shape", WIRE, _make(ReadsFlatErrorOnly)),
    Mutant("quiet-on-stream-error", "ends quietly on an error event", WIRE, _make(QuietOnStreamError)),
    Mutant(
        "loses-text-before-error",
        "holds the text back until the end, then fails",
        WIRE,
        _make(LosesTextBeforeError),
    ),
    Mutant("decodes-per-chunk", "decodes UTF-8 per network chunk", WIRE, _make(DecodesPerChunk)),
    Mutant(
        "forgets-headers",
        "drops the caller's headers",
        WIRE,
        _make(ForgetsHeaders, HEADERS),
        headers=HEADERS,
    ),
    Mutant("chat-shaped-tools", "sends tools in the Chat Completions shape", WIRE, _make(ChatShapedTools)),
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
