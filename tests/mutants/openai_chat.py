"""OpenAI Chat Completions mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from conformance.contract import ChatRequest, StreamChunk, ToolCall, Usage
from conformance.reference.openai_chat import OpenAIChatBackend, _PartialCall

from . import Mutant
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


class ZeroUsageUnasked(OpenAIChatBackend):
    """Never asks a stream for its usage, and reports zeros where none came."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        body.pop("stream_options", None)
        return body

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):
            if chunk.finish_reason is not None and chunk.usage is None:
                chunk = dataclasses.replace(chunk, usage=Usage(0, 0, 0))
            yield chunk


class QuietOnStreamError(OpenAIChatBackend):
    """Skips the error line, and takes the stream's end for the turn's."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        if chunk.get("error"):
            self.errored = True
            return ""
        return super().on_chunk(chunk, partials)

    def check_ended(self, ended: bool, terminal: str) -> None:
        if not getattr(self, "errored", False):
            super().check_ended(ended, terminal)


class FlushesCallsOnCut(shared.FlushesCallsOnCut, OpenAIChatBackend):
    """Opens a call at its first fragment, and hands what it has on when the stream fails."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        text = super().on_chunk(chunk, partials)
        self.gathered = [ToolCall(p.id, p.name, {}) for p in partials.values()]
        return text


class EndsAtFinishReason(shared.EndsAtFinishReason, OpenAIChatBackend):
    """Takes the chunk with a finish_reason for the end of the turn, [DONE] or not."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        text = super().on_chunk(chunk, partials)
        self.finished = self.finished or any(c.get("finish_reason") for c in chunk.get("choices") or ())
        return text


def own_mutants(zoo: Zoo) -> List[Mutant]:
    """The bugs of a Chat Completions backend, on ``zoo``'s wire (this one's, or Azure's)."""
    return [
        zoo.mutant(
            "usage-after-finish",
            "yields the usage on a chunk after the finish reason, as the provider's stream sends it",
            shared.UsageAfterFinish,
            checks=("finish-last",),
            cases=("text/stream",),
        ),
        zoo.mutant(
            "text-after-finish",
            "flushes the last of the text after the finish reason",
            shared.TextAfterFinish,
            checks=("finish-last",),
            cases=("text/stream",),
        ),
        zoo.mutant(
            "calls-after-finish",
            "yields the finish reason with the last text and the calls it assembled after it",
            shared.CallsAfterFinish,
            checks=("finish-last",),
            cases=("tool-call/stream",),
        ),
        zoo.mutant(
            "stop-on-tool-turn",
            'passes "stop" through on a tool turn',
            PassesStopThrough,
            checks=("finish-reason",),
            cases=("tool-call-with-stop/chat", "tool-call-with-stop/stream"),
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
            "keeps the call cut off by the token limit",
            KeepsTruncatedCall,
            checks=("finish-reason", "tool-calls"),
            cases=("truncated-tool-call/chat", "truncated-tool-call/stream"),
        ),
        zoo.mutant(
            "half-built-call",
            "yields a tool call before its arguments arrived",
            YieldsHalfBuiltCall,
            checks=("tool-calls",),
            cases=("tool-call/stream", "tool-call-with-stop/stream", "truncated-tool-call/stream"),
        ),
        zoo.shared(shared.FILTER_AS_STOP),
        zoo.mutant(
            "quiet-on-stream-error",
            "ends quietly on a mid-stream error",
            QuietOnStreamError,
            checks=("error-raised",),
            cases=("stream-error/stream",),
        ),
        zoo.shared(shared.DECODES_PER_CHUNK),
        zoo.shared(shared.SENDS_NO_TOOLS),
        zoo.shared(shared.INVENTS_RETRY_AFTER),
        zoo.mutant(
            "zero-usage-unasked",
            "never asks a stream for usage, and reports zeros where none came",
            ZeroUsageUnasked,
            checks=("request", "usage"),
            cases=("text/stream", "tool-call/stream"),
        ),
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


# api.openai.com's 429 carries no delay: a backend that drops or misreads retry-after
# passes here, and is caught on Azure's Chat wire, whose 429 carries one. Every overload
# api.openai.com's Chat sends is a server_error whose message alone says "overloaded": a
# backend may report it as either, so calling it a server error is no bug here.
MUTANTS = [
    *zoo.every_wire(leave_out=(shared.OVERLOAD_AS_SERVER_ERROR,)),
    *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
    *zoo.unparsed(),
    *own_mutants(zoo),
]
