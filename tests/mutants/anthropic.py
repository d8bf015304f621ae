"""Anthropic Messages mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple

from conformance.contract import ChatRequest, StreamChunk, ToolCall
from conformance.reference._base import call_from_text
from conformance.reference._errors import status_kind
from conformance.reference.anthropic import STOP_REASONS, AnthropicBackend, _Block, _Turn

from . import _common as shared
from ._common import Mutant, Zoo

zoo = Zoo("anthropic", AnthropicBackend)


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


class QuietOnStreamError(AnthropicBackend):
    """Takes event: error for the end of the stream."""

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        if name == "error":
            turn.stop_reason, turn.stopped = "end_turn", True
            return ""
        return super().on_event(name, data, turn)


class OpenAIShapedTools(AnthropicBackend):
    """Sends the tool schema as ``parameters``, the OpenAI name for it."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        body["tools"] = [
            {
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
                "eager_input_streaming": True,
            }
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


#: The server tool a backend offers to be held to a paused turn: without one the API never pauses.
WEB_SEARCH = ({"type": "web_search_20250305", "name": "web_search", "max_uses": 5},)


class ServerToolAsCall(AnthropicBackend):
    """Takes every block with input_json_delta for a call: a paused turn's server_tool_use becomes one."""

    server_tools = WEB_SEARCH

    def complete_calls(self, blocks: List[_Block], stop_reason: Optional[str]) -> List[ToolCall]:
        if stop_reason == "max_tokens":
            return []
        tools = ("tool_use", "server_tool_use")
        return [call_from_text(b.id, b.name, "".join(b.parts)) for b in blocks if b.type in tools]


class PauseTurnAsError(AnthropicBackend):
    """Knows the stop reasons of its day: pause_turn, being none of them, is an error."""

    server_tools = WEB_SEARCH

    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        if stop_reason not in STOP_REASONS or stop_reason == "pause_turn":
            return "error"
        return super().finish_reason(stop_reason, calls)


class RefusalCategoryRequired(AnthropicBackend):
    """Names a refusal by its category, as if every refusal had one: a null category crashes it."""

    refused_for = ""

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        if name == "message_delta":
            details = (json.loads(data).get("delta") or {}).get("stop_details")
            if isinstance(details, dict):
                self.refused_for = details["category"].upper()
        return super().on_event(name, data, turn)


class QuotaOnlyOn429(AnthropicBackend):
    """Knows the quota of a 429 only: a 402 billing_error is not a quota to it (nor a 400,
    which its bytes let pass as a bad request)."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        if kind == "quota" and status != 429:
            return "server_error" if status is None else status_kind(status)
        return kind


class AddsDeltaUsage(AnthropicBackend):
    """Adds message_delta's input_tokens to message_start's, as if each event counted anew."""

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        before = turn.input_tokens
        text = super().on_event(name, data, turn)
        if name == "message_delta" and before is not None and turn.input_tokens is not None:
            turn.input_tokens += before
        return text


class FlushesCallsOnCut(shared.FlushesCallsOnCut, AnthropicBackend):
    """Opens a call at its content_block_start, and hands what it has on when the stream fails."""

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        if name == "content_block_start":
            block = json.loads(data).get("content_block") or {}
            if block.get("type") == "tool_use":
                self.gathered.append(ToolCall(str(block.get("id")), str(block.get("name")), {}))
        return super().on_event(name, data, turn)


class EndsAtFinishReason(shared.EndsAtFinishReason, AnthropicBackend):
    """Takes message_delta's stop_reason for the end of the turn, message_stop or not."""

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        text = super().on_event(name, data, turn)
        self.finished = self.finished or name == "message_delta"
        return text



def claude_event_mutants(zoo: Zoo, usage_cases: Tuple[str, ...] = ("text/stream",)) -> List[Mutant]:
    """The bugs a reader of Claude's events can have on every host that serves them (the API,
    Vertex AI, Bedrock InvokeModel); ``usage_cases``, the streams whose usage it loses."""
    return [
        zoo.mutant(
            "usage-from-delta-only",
            "loses the input tokens of message_start",
            UsageFromDeltaOnly,
            checks=("usage",),
            cases=usage_cases,
        ),
        zoo.mutant(
            "end-turn-as-stop",
            'calls end_turn "stop" with a tool_use block present',
            PassesEndTurnThrough,
            checks=("finish-reason",),
            cases=("tool-call-with-stop/chat", "tool-call-with-stop/stream"),
        ),
        zoo.mutant(
            "unparsed-arguments",
            "returns the input as a JSON string",
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
            "trusts the tool_use block of a max_tokens turn",
            KeepsTruncatedCall,
            checks=("finish-reason", "tool-calls"),
            cases=("truncated-tool-call/chat", "truncated-tool-call/stream"),
        ),
        zoo.mutant(
            "half-built-call",
            "yields a call at content_block_start",
            YieldsHalfBuiltCall,
            checks=("tool-calls",),
            cases=("tool-call/stream", "tool-call-with-stop/stream", "truncated-tool-call/stream"),
        ),
        zoo.mutant(
            "refusal-as-stop",
            'calls a refusal "stop"',
            shared.reports_stop_for("refusal"),
            checks=("finish-reason",),
            cases=("content-filter/chat", "content-filter/stream"),
        ),
    ]


def claude_cut_mutants(zoo: Zoo) -> List[Mutant]:
    """The bugs a reader of Claude's events can have with a stream cut before message_stop,
    on every host that serves them."""
    return [
        zoo.shared(shared.TAKES_CUT_FOR_END, checks=("cut-raised", "cut-finish", "cut-tool-call")),
        zoo.ends_at_finish_reason(EndsAtFinishReason),
        zoo.mutant(
            "flushes-calls-on-cut",
            "hands on the calls it gathered when the stream is cut, before the turn's end said they stand",
            FlushesCallsOnCut,
            checks=("cut-tool-call",),
            cases=("stream-cut/stream",),
        ),
    ]


#: The shared bugs whose cases differ here: a prompt too long is a 400
#: invalid_request_error, which a bad request reads as fairly as its message does.
DIFFERENT_HERE = (shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST,)

MUTANTS = [
    *zoo.every_wire(leave_out=DIFFERENT_HERE),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_SERVER_ERROR),
    *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
    *zoo.unparsed(),
    zoo.shared(shared.DROPS_REASONING),
    zoo.shared(shared.DROPS_RETURNED_REASONING),
    zoo.shared(shared.DROPS_TOOL_TURN_REASONING),
    zoo.shared(shared.LOSES_SIGNATURE),
    zoo.shared(shared.THINKING_AS_TEXT),
    *claude_event_mutants(zoo),
    zoo.shared(shared.IGNORES_RETRY_AFTER),
    zoo.mutant(
        "quiet-on-stream-error",
        "ends quietly on event: error",
        QuietOnStreamError,
        checks=("error-raised",),
        cases=("stream-error/stream",),
    ),
    zoo.shared(shared.DECODES_PER_CHUNK),
    zoo.mutant(
        "openai-shaped-tools",
        "sends the tool schema as parameters",
        OpenAIShapedTools,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "system-as-message",
        "sends the system prompt as a system message",
        SystemAsMessage,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "server-tool-as-call",
        "yields a paused turn's server_tool_use block as a tool call",
        ServerToolAsCall,
        checks=("text-finish", "no-tool-calls"),
        cases=("text/stream",),
    ),
    zoo.mutant(
        "pause-turn-as-error",
        'calls a paused turn "error"',
        PauseTurnAsError,
        checks=("text-finish",),
        cases=("text/chat", "text/stream"),
    ),
    zoo.mutant(
        "refusal-category-required",
        "crashes on a refusal whose category is null",
        RefusalCategoryRequired,
        checks=("reply",),
        cases=("content-filter/stream",),
    ),
    zoo.mutant(
        "quota-only-on-429",
        "knows the quota of a 429 only, not the 402 billing_error",
        QuotaOnlyOn429,
        checks=("error-details", "error-kind"),
        cases=("quota/chat", "quota/stream"),
    ),
    zoo.mutant(
        "adds-delta-usage",
        "adds message_delta's input_tokens to message_start's",
        AddsDeltaUsage,
        checks=("usage",),
        cases=("text/stream", "tool-call/stream"),
    ),
    *claude_cut_mutants(zoo),
]
