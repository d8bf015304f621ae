"""Gemini-on-Vertex mutants: the Vertex reference backend with one classic bug each.

The bugs a Gemini backend can have are the Gemini zoo's, put in front of the Vertex
backend; what only Vertex's shapes catch (a usage that counts nothing, a Model Armor
block with no content, a call to an undeclared function) has classes of its own.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

from conformance.contract import ToolCall, Usage
from conformance.reference.gemini_vertex import GeminiVertexBackend

from . import _common as shared
from . import gemini as g
from ._common import Zoo

zoo = Zoo("gemini-vertex", GeminiVertexBackend)


class ZeroUsageFromTrafficType(GeminiVertexBackend):
    """Reads a usageMetadata that counts nothing ({"trafficType": ...}) as zero tokens."""

    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        if not isinstance(raw, dict):
            return None
        prompt = int(raw.get("promptTokenCount", 0))
        output = int(raw.get("candidatesTokenCount", 0)) + int(raw.get("thoughtsTokenCount", 0))
        return Usage(prompt, output, int(raw.get("totalTokenCount", prompt + output)))


class ReadsContentAlways(GeminiVertexBackend):
    """Reads ``candidate["content"]`` on every candidate, so Model Armor's, which has none, raises."""

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        for candidate in body.get("candidates") or ():
            if isinstance(candidate, dict):
                candidate["content"]
        return super().read_response(body)


class CallsMakeAToolTurn(GeminiVertexBackend):
    """Calls every turn with calls a tool turn, whatever finishReason ended it."""

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return "tool_calls" if calls else super().finish_reason(reason, calls)


class DropsArmorBlock(GeminiVertexBackend):
    """Knows Gemini's safety reasons but not Vertex's Model Armor: its block is an error turn."""

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return "error" if reason == "MODEL_ARMOR" else super().finish_reason(reason, calls)


MUTANTS = [
    # Vertex has no quota shape; the headers and the tool name are caught on cases it has, the
    # name not on tool-call/chat, whose undeclared call its renaming also changes. A prompt
    # too long is a 400 INVALID_ARGUMENT, which a bad request reads as fairly.
    *zoo.every_wire(
        leave_out=(
            shared.QUOTA_AS_RATE_LIMIT,
            shared.QUOTA_RETRYABLE,
            shared.INVENTS_QUOTA_DELAY,
            shared.FORGETS_HEADERS,
            shared.NAMESPACES_TOOL_NAME,
            shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST,
        )
    ),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_SERVER_ERROR),
    zoo.shared(shared.FORGETS_HEADERS, cases=("text/chat", "abort/stream", "rate-limit/stream")),
    zoo.shared(
        shared.NAMESPACES_TOOL_NAME,
        cases=("tool-call/stream", "parallel-tool-calls/chat", "parallel-tool-calls/stream"),
    ),
    *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
    zoo.shared(shared.DROPS_REASONING, "leaves the thought signature off the call it sends back"),
    zoo.shared(shared.DROPS_RETURNED_REASONING),
    zoo.shared(shared.DROPS_TOOL_TURN_REASONING),
    zoo.shared(shared.LOSES_SIGNATURE),
    zoo.shared(shared.THINKING_AS_TEXT),
    zoo.shared(shared.STOP_ON_TOOL_TURN, 'passes "STOP" through on a tool turn'),
    zoo.mutant(
        "makes-up-call-id",
        "replaces the functionCall id Gemini 3 sent with one of its own",
        g.MakesUpCallId,
        checks=("call-id",),
        cases=("tool-call/chat", "tool-call/stream"),
    ),
    zoo.shared(shared.REQUIRES_CALL_ID, "takes the functionCall id as given, empty where Vertex sent none"),
    zoo.mutant(
        "calls-from-final-event-only",
        "looks for calls only on the event with finishReason",
        g.CallsFromFinalEventOnly,
        checks=("finish-reason", "tool-calls"),
        cases=("tool-call/stream",),
    ),
    zoo.mutant(
        "max-tokens-as-stop",
        'calls a turn cut off by MAX_TOKENS "stop"',
        g.MaxTokensAsStop,
        checks=("finish-reason",),
        cases=("truncated-tool-call/chat", "truncated-tool-call/stream"),
    ),
    zoo.shared(shared.FILTER_AS_STOP, 'calls a Model Armor block "stop"'),
    zoo.mutant(
        "ignores-prompt-block",
        "reads candidates only and misses promptFeedback.blockReason",
        g.IgnoresPromptBlock,
        checks=("finish-reason",),
        cases=("content-filter/chat",),
    ),
    zoo.mutant(
        "quiet-on-stream-error",
        'ends quietly on a data: {"error"} event',
        g.QuietOnStreamError,
        checks=("error-raised",),
        cases=("stream-error/stream",),
    ),
    zoo.shared(shared.DECODES_PER_CHUNK),
    zoo.mutant(
        "system-as-content",
        'sends the system prompt as a "system" content',
        g.SystemAsContent,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "forgets-alt-sse",
        "streams without ?alt=sse",
        g.ForgetsAltSse,
        checks=("request",),
        cases=(
            "abort/stream",
            "cancel/stream",
            "rate-limit/stream",
            "auth/stream",
            "overloaded/stream",
            "server-error/stream",
            "context-overflow/stream",
        ),
    ),
    zoo.shared(shared.INVENTS_RETRY_AFTER),
    zoo.mutant(
        "reads-content-always",
        'reads candidate["content"] on every candidate, and a Model Armor block with none raises',
        ReadsContentAlways,
        checks=("reply",),
        cases=("content-filter/chat", "content-filter/stream"),
    ),
    zoo.mutant(
        "zero-usage-from-traffic-type",
        'reads a usageMetadata of {"trafficType"} alone as zero tokens, counts Vertex never sent',
        ZeroUsageFromTrafficType,
        checks=("usage",),
        cases=("content-filter/chat",),
    ),
    zoo.mutant(
        "calls-make-a-tool-turn",
        "calls a turn with calls a tool turn, so an UNEXPECTED_TOOL_CALL runs an undeclared function",
        CallsMakeAToolTurn,
        checks=("finish-reason",),
        cases=("tool-call/chat",),
    ),
    zoo.mutant(
        "drops-armor-block",
        "knows no MODEL_ARMOR, and calls a Model Armor block an error turn",
        DropsArmorBlock,
        checks=("finish-reason",),
        cases=("content-filter/chat", "content-filter/stream"),
    ),
    zoo.mutant(
        "id-on-every-signed-call",
        "takes the id as given on a call with a thoughtSignature, empty where Gemini 3 sent none",
        g.IdOnEverySignedCall,
        checks=("call-id",),
        cases=("tool-call/chat", "tool-call/stream"),
    ),
    # Reading an error body only under a JSON content type is no bug here: every error Vertex
    # sends reads as its status says (the prompt too long as a bad request, a fair reading).
    zoo.shared(shared.TAKES_CUT_FOR_END, checks=("cut-raised", "cut-finish", "cut-tool-call")),
    zoo.mutant(
        "flushes-calls-on-cut",
        "hands on the calls it gathered when the stream is cut, before the turn's end said they stand",
        g.FlushesCallsOnCut,
        checks=("cut-tool-call",),
        cases=("stream-cut/stream",),
    ),
    zoo.shared(shared.DROPS_CALL_REASONING),
]
