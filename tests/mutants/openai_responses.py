"""OpenAI Responses mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Dict, List, Mapping

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall
from conformance.reference.openai_responses import OpenAIResponsesBackend, _Turn

from . import _common as shared
from ._common import Zoo

zoo = Zoo("openai-responses", OpenAIResponsesBackend, path="/v1")


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


MUTANTS = [
    zoo.shared(shared.DROPS_USAGE),
    zoo.mutant("stop-on-tool-turn", 'calls a completed tool turn "stop"', StopOnToolTurn),
    zoo.mutant("uses-item-id", "takes the item id (fc_...) for the call id", UsesItemId),
    zoo.mutant("unparsed-arguments", "returns the arguments as a JSON string", UnparsedArguments),
    zoo.mutant("keeps-truncated-call", "keeps the incomplete function_call", KeepsTruncatedCall),
    zoo.mutant("half-built-call", "yields a call at output_item.added", YieldsHalfBuiltCall),
    zoo.mutant(
        "filter-as-stop",
        'calls a filtered or refused turn "stop"',
        shared.reports_stop_for("content_filter", "refusal"),
    ),
    zoo.shared(shared.QUOTA_AS_RATE_LIMIT, "treats insufficient_quota as a retryable rate limit"),
    zoo.shared(shared.IGNORES_RETRY_AFTER),
    zoo.shared(shared.AUTH_AS_SERVER_ERROR),
    zoo.shared(shared.OVERLOAD_AS_SERVER_ERROR),
    zoo.shared(shared.SERVER_ERROR_AS_FATAL),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST, "misses context_length_exceeded"),
    zoo.mutant("flat-error-only", "reads only the flat error event shape", ReadsFlatErrorOnly),
    zoo.mutant("quiet-on-stream-error", "ends quietly on an error event", QuietOnStreamError),
    zoo.shared(shared.LOSES_TEXT_BEFORE_ERROR),
    zoo.shared(shared.DECODES_PER_CHUNK),
    zoo.shared(shared.FORGETS_HEADERS),
    zoo.mutant("chat-shaped-tools", "sends tools in the Chat Completions shape", ChatShapedTools),
    zoo.shared(shared.RETRIES),
    zoo.shared(shared.IGNORES_ABORT),
    zoo.shared(shared.ABORTS_WITHOUT_CLOSING),
    zoo.shared(shared.WRAPS_CANCELLATION),
]
