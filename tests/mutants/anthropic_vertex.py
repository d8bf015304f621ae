"""Claude on Vertex AI mutants: the reference backend with one classic bug each.

Claude's events are read by the Anthropic backend's own code, so the bugs of reading
them are the Anthropic zoo's, put in front of this wire's backend; the bugs here are
Vertex's: its event of its own, Google's failures, and the credentials and body it takes.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from conformance.contract import ChatRequest, LLMError
from conformance.reference._errors import decode_json
from conformance.reference.anthropic import _Turn
from conformance.reference.anthropic_vertex import AnthropicVertexBackend

from . import _common as shared
from ._common import Zoo
from .anthropic import (
    AddsDeltaUsage,
    OpenAIShapedTools,
    QuietOnStreamError,
    SystemAsMessage,
    claude_cut_mutants,
    claude_event_mutants,
)

zoo = Zoo("anthropic-vertex", AnthropicVertexBackend, path="/v1")

#: The cases whose stream reports usage (Vertex's message_delta counts only the output).
USAGE_STREAMS = (
    "text/stream",
    "tool-call/stream",
    "tool-call-with-stop/stream",
    "tool-result/stream",
    "parallel-tool-calls/stream",
    "truncated-tool-call/stream",
    "corrupt-arguments/stream",
    "content-filter/stream",
    "reasoning/stream",
)


class RefusesUnknownEvents(AnthropicVertexBackend):
    """Fails on an event it does not know, as vercel/ai#11309's validation did on vertex_event."""

    KNOWN = frozenset(
        {
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
            "ping",
            "error",
        }
    )

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        if name not in self.KNOWN:
            raise LLMError.from_kind("server_error", f"unknown event {name!r}", provider="anthropic")
        return super().on_event(name, data, turn)


class ErrorObjectOnly(AnthropicVertexBackend):
    """Reads an error body as one object, and fails on the JSON array a streamRawPredict call may get."""

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        body = decode_json(raw)
        if not isinstance(body, dict):
            raise TypeError(f"expected an error object, got {type(body).__name__}")
        return super().status_error(status, headers, raw)


class SendsApiKey(AnthropicVertexBackend):
    """Authenticates as on Anthropic's own API, with x-api-key."""

    def headers(self, stream: bool) -> Dict[str, str]:
        headers = {k: v for k, v in super().headers(stream).items() if k != "authorization"}
        return {**headers, "x-api-key": self.api_key}


class SendsNoVersion(AnthropicVertexBackend):
    """Sends the API version as a header, not anthropic_version in the body."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        return {k: v for k, v in super().body(chat, stream).items() if k != "anthropic_version"}

    def headers(self, stream: bool) -> Dict[str, str]:
        return {**super().headers(stream), "anthropic-version": "2023-06-01"}


class ModelInBodyOnly(AnthropicVertexBackend):
    """Puts the model in the body and a fixed one in the path."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        return {**super().body(chat, stream), "model": chat.model}

    def url(self, chat: ChatRequest, stream: bool) -> str:
        return super().url(ChatRequest("claude-sonnet-4@20250514", chat.messages, chat.tools), stream)


MUTANTS = [
    # A quota and a rate limit are the same 429 RESOURCE_EXHAUSTED on Vertex: only its words
    # tell them apart, so a rate limit is a fair reading, and this backend never reads a quota.
    # Its context overflow is Claude's 400 invalid_request_error: a bad request is a fair reading.
    *zoo.every_wire(
        leave_out=(
            shared.QUOTA_AS_RATE_LIMIT,
            shared.QUOTA_RETRYABLE,
            shared.INVENTS_QUOTA_DELAY,
            shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST,
        )
    ),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_SERVER_ERROR),
    *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
    *zoo.unparsed(),
    zoo.shared(shared.DROPS_REASONING),
    zoo.shared(shared.DROPS_RETURNED_REASONING),
    zoo.shared(shared.DROPS_TOOL_TURN_REASONING),
    zoo.shared(shared.LOSES_SIGNATURE),
    zoo.shared(shared.THINKING_AS_TEXT),
    zoo.shared(shared.DECODES_PER_CHUNK),
    zoo.shared(
        shared.INVENTS_RETRY_AFTER,
        "reports a 60-second retry_after on a RESOURCE_EXHAUSTED that carries no delay",
        cases=("rate-limit/chat", "rate-limit/stream", "quota/chat", "quota/stream"),
    ),
    *claude_event_mutants(zoo, USAGE_STREAMS),
    zoo.mutant(
        "quiet-on-stream-error",
        "ends quietly on event: error",
        QuietOnStreamError,
        checks=("error-raised",),
        cases=("stream-error/stream",),
    ),
    zoo.mutant(
        "refuses-unknown-events",
        "fails on vertex_event, an event it does not know",
        RefusesUnknownEvents,
        checks=("reply",),
        cases=("text/stream",),
    ),
    zoo.mutant(
        "error-object-only",
        "reads an error body as one object, and breaks on streamRawPredict's JSON array",
        ErrorObjectOnly,
        checks=("error-kind", "error-details", "error-status"),
        cases=("rate-limit/stream",),
    ),
    zoo.mutant(
        "adds-delta-usage",
        "adds message_delta's input_tokens to message_start's",
        AddsDeltaUsage,
        checks=("usage",),
        cases=USAGE_STREAMS,
    ),
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
        "sends-api-key",
        "authenticates with x-api-key, not a Google access token",
        SendsApiKey,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "version-as-header",
        "sends the API version as a header, not anthropic_version in the body",
        SendsNoVersion,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "model-in-body",
        "names the model in the body, and another in the path",
        ModelInBodyOnly,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    *claude_cut_mutants(zoo),
]
