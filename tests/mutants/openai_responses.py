"""OpenAI Responses mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Dict, List, Mapping

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall
from conformance.reference.openai_responses import OpenAIResponsesBackend, _Turn

from . import Mutant
from . import _common as shared
from ._common import Zoo
from ._openai import QuotaOnlyOn429, StreamErrorAsOverload

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


class FlushesCallsOnCut(shared.FlushesCallsOnCut, OpenAIResponsesBackend):
    """Opens a call at its output_item.added, and hands what it has on when the stream fails."""

    def on_event(self, event: Mapping[str, Any], turn: _Turn, items: List[Mapping[str, Any]]) -> str:
        item = event.get("item")
        if event.get("type") == "response.output_item.added" and isinstance(item, dict):
            if item.get("type") == "function_call":
                self.gathered.append(ToolCall(str(item.get("call_id")), str(item.get("name")), {}))
        return super().on_event(event, turn, items)

def own_mutants(zoo: Zoo) -> List[Mutant]:
    """The bugs of a Responses backend, on ``zoo``'s wire (this one's, or Azure's)."""
    return [
        zoo.shared(shared.DROPS_REASONING),
        zoo.shared(shared.DROPS_RETURNED_REASONING),
        zoo.shared(shared.DROPS_TOOL_TURN_REASONING),
        zoo.shared(shared.LOSES_SIGNATURE),
        zoo.shared(shared.THINKING_AS_TEXT),
        zoo.mutant(
            "stop-on-tool-turn",
            'calls a completed tool turn "stop"',
            StopOnToolTurn,
            checks=("finish-reason",),
            cases=(
                "tool-call/chat",
                "tool-call/stream",
                "tool-call-with-stop/chat",
                "tool-call-with-stop/stream",
            ),
        ),
        zoo.mutant(
            "uses-item-id",
            "takes the item id (fc_...) for the call id",
            UsesItemId,
            checks=("call-id",),
            cases=(
                "tool-call/chat",
                "tool-call/stream",
                "tool-call-with-stop/chat",
                "tool-call-with-stop/stream",
            ),
        ),
        zoo.mutant(
            "unparsed-arguments",
            "returns the arguments as a JSON string",
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
            "keeps the incomplete function_call",
            KeepsTruncatedCall,
            checks=("finish-reason", "tool-calls"),
            cases=("truncated-tool-call/chat", "truncated-tool-call/stream"),
        ),
        zoo.mutant(
            "half-built-call",
            "yields a call at output_item.added",
            YieldsHalfBuiltCall,
            checks=("tool-calls",),
            cases=("tool-call/stream", "tool-call-with-stop/stream", "truncated-tool-call/stream"),
        ),
        zoo.mutant(
            "filter-as-stop",
            'calls a filtered or refused turn "stop"',
            shared.reports_stop_for("content_filter", "refusal"),
            checks=("finish-reason",),
            cases=("content-filter/chat", "content-filter/stream"),
        ),
        zoo.mutant(
            "flat-error-only",
            "reads only the flat error event shape",
            ReadsFlatErrorOnly,
            checks=("error-details", "error-kind"),
            cases=("stream-error/stream", "context-overflow/stream"),
        ),
        zoo.mutant(
            "quiet-on-stream-error",
            "ends quietly on an error event",
            QuietOnStreamError,
            checks=("error-raised",),
            cases=("stream-error/stream", "context-overflow/stream"),
        ),
        zoo.shared(shared.DECODES_PER_CHUNK),
        zoo.mutant(
            "chat-shaped-tools",
            "sends tools in the Chat Completions shape",
            ChatShapedTools,
            checks=("request",),
            cases=zoo.every_case(),
        ),
        zoo.shared(shared.INVENTS_RETRY_AFTER),
        zoo.mutant(
            "stream-error-as-overload",
            "calls every in-stream error it cannot place an overload, so server_error/server_error too",
            StreamErrorAsOverload,
            checks=("error-details", "error-kind"),
            cases=("stream-error/stream",),
        ),
        zoo.shared(shared.TAKES_CUT_FOR_END, checks=("cut-raised", "cut-finish")),
        zoo.mutant(
            "flushes-calls-on-cut",
            "hands on the calls it gathered when the stream is cut, before the turn's end said they stand",
            FlushesCallsOnCut,
            checks=("cut-tool-call",),
            cases=("stream-cut/stream",),
        ),
    ]


# api.openai.com's 429 carries no delay: a backend that drops retry-after passes here. Its
# 503 is a server_error whose message alone says "overloaded" (either kind will do); only
# the in-stream server_is_overloaded must be an overload.
MUTANTS = [
    *zoo.every_wire(leave_out=(shared.OVERLOAD_AS_SERVER_ERROR,)),
    zoo.shared(shared.OVERLOAD_AS_SERVER_ERROR, cases=("stream-error/stream",)),
    *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
    *zoo.unparsed(),
    *own_mutants(zoo),
    zoo.mutant(
        "quota-only-on-429",
        "recognises insufficient_quota on a 429 only, not when it fails a stream",
        QuotaOnlyOn429,
        checks=("error-details", "error-kind"),
        cases=("quota/stream",),
    ),
]
