"""Cohere Chat v2 mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence

from conformance.contract import ChatRequest, StreamChunk, ToolCall
from conformance.reference.cohere import CohereBackend, _PartialCall, _Turn

from . import _common as shared
from ._common import Zoo

zoo = Zoo("cohere", CohereBackend)


class BilledUnitsAsUsage(CohereBackend):
    """Reads usage.billed_units, what Cohere bills, as the tokens the model processed."""

    @staticmethod
    def usage(raw: Any) -> Any:
        billed = raw.get("billed_units") if isinstance(raw, dict) else None
        return CohereBackend.usage({"tokens": billed}) if isinstance(billed, dict) else None


class ToolPlanAsContent(CohereBackend):
    """Hands the tool_plan on as the turn's text, as a client that maps it to OpenAI's content does."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):
            plan = "".join(r.text for r in chunk.reasoning)
            yield StreamChunk(
                content=chunk.content + plan,
                tool_calls=chunk.tool_calls,
                finish_reason=chunk.finish_reason,
                usage=chunk.usage,
            )

    async def chat(self, chat: ChatRequest) -> Any:
        import dataclasses

        response = await super().chat(chat)
        plan = "".join(r.text for r in response.reasoning)
        return dataclasses.replace(response, content=response.content + plan, reasoning=())


class UnmappedToolCall(CohereBackend):
    """Maps finish_reason by a table that lacks TOOL_CALL, calls or not (vercel/ai#5313's bug)."""

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return {"COMPLETE": "stop", "MAX_TOKENS": "length"}.get(reason or "", "error")


class KeepsTruncatedCall(CohereBackend):
    """Trusts the call of a MAX_TOKENS turn, its cut-off arguments repaired into an object."""

    def complete_calls(self, partials: Sequence[_PartialCall], reason: Optional[str]) -> List[ToolCall]:
        calls = []
        for p in partials:
            try:
                arguments = json.loads("".join(p.arguments) or "{}")
            except ValueError:
                arguments = {"_raw": "".join(p.arguments)}
            calls.append(ToolCall(p.id, p.name, arguments))
        return calls

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return "tool_calls" if calls else super().finish_reason(reason, calls)


class YieldsHalfBuiltCall(CohereBackend):
    """Yields the call at tool-call-start, before its arguments arrived."""

    def on_event(self, event: Mapping[str, Any], turn: _Turn) -> str:
        if event.get("type") == "tool-call-start":
            raw = (event.get("delta") or {}).get("message", {}).get("tool_calls") or {}
            name = (raw.get("function") or {}).get("name")
            self.pending.append(ToolCall(str(raw.get("id")), str(name), {}))
        return super().on_event(event, turn)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.pending: List[ToolCall] = []
        async for chunk in super().chat_stream(chat):
            if self.pending:
                yield StreamChunk(tool_calls=tuple(self.pending))
                self.pending = []
            yield chunk


class QuietOnFailedEnd(CohereBackend):
    """Takes a message-end that says ERROR or TIMEOUT for the end of an answer."""

    def check_finished(self, reason: Optional[str], error: Optional[str]) -> None:
        return None


class FailsOnErrorOnly(CohereBackend):
    """Knows ERROR as a failure, not TIMEOUT, which it passes on as a finish reason."""

    def check_finished(self, reason: Optional[str], error: Optional[str]) -> None:
        if reason == "ERROR":
            super().check_finished(reason, error)


class V1Tools(CohereBackend):
    """Sends tools in v1's shape, parameter_definitions, which /v2/chat does not take."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        body["tools"] = [
            {
                "name": t.name,
                "description": t.description,
                "parameter_definitions": {
                    k: {"type": v.get("type", "string"), "required": k in t.parameters.get("required", ())}
                    for k, v in dict(t.parameters.get("properties") or {}).items()
                },
            }
            for t in chat.tools
        ]
        return body


class FlushesCallsOnCut(shared.FlushesCallsOnCut, CohereBackend):
    """Opens a call at its tool-call-start, and hands what it has on when the stream fails."""

    def on_event(self, event: Mapping[str, Any], turn: _Turn) -> str:
        text = super().on_event(event, turn)
        self.gathered = [ToolCall(p.id, p.name, {}) for p in turn.calls.values()]
        return text


#: The shared bugs whose declared cases differ here: Cohere has no tool turn that says
#: COMPLETE, its stream-error is a server error, and its cut-off tool turn has no text.
#: Its context overflow is a 400 whose bytes say only "bad request", so reporting it as
#: one is no bug here.
DIFFERENT_HERE = (
    shared.ANNOUNCES_CALLS,
    shared.OVERLOAD_AS_SERVER_ERROR,
    shared.DROPS_TEXT_ON_LENGTH,
    shared.EARLY_FINISH,
    shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST,
)

MUTANTS = [
    *zoo.every_wire(leave_out=DIFFERENT_HERE),
    zoo.shared(
        shared.ANNOUNCES_CALLS,
        cases=(
            "tool-call/chat",
            "tool-call/stream",
            "parallel-tool-calls/chat",
            "parallel-tool-calls/stream",
        ),
    ),
    zoo.shared(shared.OVERLOAD_AS_SERVER_ERROR, cases=("overloaded/chat", "overloaded/stream")),
    zoo.shared(shared.EARLY_FINISH, cases=("text/stream", "tool-result/stream")),
    *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
    *zoo.unparsed(),
    zoo.shared(shared.DROPS_REASONING),
    zoo.shared(shared.DROPS_RETURNED_REASONING),
    zoo.shared(shared.THINKING_AS_TEXT),
    zoo.shared(shared.INVENTS_RETRY_AFTER),
    zoo.shared(shared.DECODES_PER_CHUNK),
    zoo.shared(shared.SENDS_NO_TOOLS),
    zoo.mutant(
        "billed-units-as-usage",
        "reads usage.billed_units as the tokens the model processed",
        BilledUnitsAsUsage,
        checks=("usage",),
        cases=("text/chat", "text/stream", "tool-call/chat", "tool-result/stream"),
    ),
    zoo.mutant(
        "tool-plan-as-content",
        "hands the tool_plan on as the turn's text",
        ToolPlanAsContent,
        checks=("tool-turn-content",),
        cases=("tool-call/chat", "tool-call/stream"),
    ),
    zoo.mutant(
        "unmapped-tool-call",
        "maps finish_reason by a table without TOOL_CALL, whatever calls came",
        UnmappedToolCall,
        checks=("finish-reason",),
        cases=("tool-call/chat", "tool-call/stream", "parallel-tool-calls/chat"),
    ),
    zoo.mutant(
        "keeps-truncated-call",
        "trusts the call of a MAX_TOKENS turn",
        KeepsTruncatedCall,
        checks=("finish-reason", "tool-calls"),
        cases=("truncated-tool-call/chat", "truncated-tool-call/stream"),
    ),
    zoo.mutant(
        "half-built-call",
        "yields a call at tool-call-start",
        YieldsHalfBuiltCall,
        checks=("tool-calls",),
        cases=("tool-call/stream", "truncated-tool-call/stream"),
    ),
    zoo.mutant(
        "quiet-on-failed-end",
        "takes a message-end saying ERROR or TIMEOUT for the end of an answer",
        QuietOnFailedEnd,
        checks=("error-raised",),
        cases=("stream-error/stream",),
    ),
    zoo.mutant(
        "fails-on-error-only",
        "fails on finish_reason ERROR but passes TIMEOUT on as an answer",
        FailsOnErrorOnly,
        checks=("error-raised",),
        cases=("stream-error/stream",),
    ),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_SERVER_ERROR),
    zoo.mutant(
        "v1-tools",
        "sends tools in v1's parameter_definitions shape",
        V1Tools,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.shared(shared.TAKES_CUT_FOR_END, checks=("cut-raised", "cut-finish", "cut-tool-call")),
    zoo.mutant(
        "flushes-calls-on-cut",
        "hands on the calls it gathered when the stream is cut, before message-end said they stand",
        FlushesCallsOnCut,
        checks=("cut-tool-call",),
        cases=("stream-cut/stream",),
    ),
]
