"""OpenAI Chat Completions mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from conformance.contract import ChatRequest, StreamChunk, ToolCall
from conformance.reference.openai_chat import OpenAIChatBackend, _PartialCall

from . import _common as shared
from ._common import Zoo

zoo = Zoo("openai-chat", OpenAIChatBackend, path="/v1")


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


class RetryAfterInMilliseconds(OpenAIChatBackend):
    def retry_after(self, headers: Mapping[str, str]) -> Optional[float]:
        value = headers.get("retry-after-ms")
        return float(value) if value is not None else None


class QuietOnStreamError(OpenAIChatBackend):
    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        if chunk.get("error"):
            return ""
        return super().on_chunk(chunk, partials)


MUTANTS = [
    zoo.shared(shared.DROPS_USAGE),
    zoo.mutant("stop-on-tool-turn", 'passes "stop" through on a tool turn', PassesStopThrough),
    zoo.mutant("unparsed-arguments", "returns the arguments as a JSON string", UnparsedArguments),
    zoo.mutant("keeps-truncated-call", "keeps the call cut off by the token limit", KeepsTruncatedCall),
    zoo.mutant("half-built-call", "yields a tool call before its arguments arrived", YieldsHalfBuiltCall),
    zoo.shared(shared.FILTER_AS_STOP),
    zoo.shared(shared.QUOTA_AS_RATE_LIMIT),
    zoo.shared(shared.IGNORES_RETRY_AFTER),
    zoo.mutant("retry-after-ms-as-seconds", "reads retry-after-ms as seconds", RetryAfterInMilliseconds),
    zoo.shared(shared.AUTH_AS_SERVER_ERROR),
    zoo.shared(shared.OVERLOAD_AS_SERVER_ERROR),
    zoo.shared(shared.SERVER_ERROR_AS_FATAL),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST, "misses context_length_exceeded"),
    zoo.mutant("quiet-on-stream-error", "ends quietly on a mid-stream error", QuietOnStreamError),
    zoo.shared(shared.LOSES_TEXT_BEFORE_ERROR),
    zoo.shared(shared.DECODES_PER_CHUNK),
    zoo.shared(shared.FORGETS_HEADERS),
    zoo.shared(shared.SENDS_NO_TOOLS),
    zoo.shared(shared.RETRIES),
    zoo.shared(shared.IGNORES_ABORT),
    zoo.shared(shared.ABORTS_WITHOUT_CLOSING),
    zoo.shared(shared.WRAPS_CANCELLATION),
]
