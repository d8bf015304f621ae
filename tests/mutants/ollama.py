"""Ollama mutants: the reference backend with one classic bug each."""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall, Usage
from conformance.reference._decoders import NDJSONDecoder
from conformance.reference.ollama import OllamaBackend

from . import _common as shared
from ._common import Zoo

zoo = Zoo("ollama", OllamaBackend)


class PerChunkNDJSONDecoder(NDJSONDecoder):
    """Decodes every network chunk on its own, so a character cut in two is lost."""

    def feed(self, chunk: bytes) -> List[Any]:
        return super().feed(chunk.decode("utf-8", errors="replace").encode("utf-8"))


class StripsThinkingDecoder(NDJSONDecoder):
    """Trims the whitespace off each streamed thinking piece, as a client that tidies deltas does."""

    def feed(self, chunk: bytes) -> List[Any]:
        lines = super().feed(chunk)
        for line in lines:
            message = line.get("message") if isinstance(line, dict) else None
            if isinstance(message, dict) and isinstance(message.get("thinking"), str):
                message["thinking"] = message["thinking"].strip()
        return lines


class StripsThinking(OllamaBackend):
    def ndjson_decoder(self) -> NDJSONDecoder:
        return StripsThinkingDecoder()


class CountsOutputAsTotal(OllamaBackend):
    """Reports eval_count as the total, forgetting the prompt's tokens."""

    @staticmethod
    def usage(line: Mapping[str, Any]) -> Usage:
        output = int(line.get("eval_count") or 0)
        return Usage(int(line.get("prompt_eval_count") or 0), output, output)


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


class DecodesPerChunk(OllamaBackend):
    def ndjson_decoder(self) -> NDJSONDecoder:
        return PerChunkNDJSONDecoder()


class OmitsStreamFalse(OllamaBackend):
    """Leaves "stream" out of a whole request, and the server streams by default."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        if not stream:
            del body["stream"]
        return body


class StreamErrorAsOverload(OllamaBackend):
    """Calls every mid-stream error line an overload, as the full queue's text once suggested."""

    def error_kind(self, status: Optional[int], message: str) -> str:
        kind = super().error_kind(status, message)
        return "overloaded" if status is None and kind == "server_error" else kind


class ServerErrorOn500Only(OllamaBackend):
    """Maps a 500 to server_error and any other 5xx it does not know to a bad request."""

    def error_kind(self, status: Optional[int], message: str) -> str:
        kind = super().error_kind(status, message)
        if kind == "server_error" and status not in (None, 500):
            return "invalid_request"
        return kind


class FlushesCallsOnCut(shared.FlushesCallsOnCut, OllamaBackend):
    """Gathers each call as its line arrives, and hands them on when the stream fails."""

    def read_line(self, line: Mapping[str, Any]) -> Tuple[str, List[ToolCall]]:
        text, calls = super().read_line(line)
        self.gathered.extend(calls)
        return text, calls


MUTANTS = [
    *(
        zoo.shared(bug, cases=("overloaded/chat", "overloaded/stream"))
        if bug is shared.OVERLOAD_AS_SERVER_ERROR
        else zoo.shared(bug)
        # Ollama sends no call ids: there is nothing to pair up wrongly, nor to give back.
        # Its usage limit is a 429 whose message alone says quota: a rate limit is a fair
        # reading of it. Its prompt too long is a 400 whose message alone says so: a bad
        # request is as fair.
        for bug in shared.EVERY_WIRE
        if bug
        not in (
            shared.SWAPS_CALL_IDS,
            shared.KEEPS_ID_SUFFIX,
            shared.QUOTA_AS_RATE_LIMIT,
            shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST,
        )
    ),
    zoo.trusts_clean_end(),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_SERVER_ERROR),
    # The ids are the backend's own: two calls under one is caught by that alone.
    zoo.shared(shared.ONE_ID_FOR_EVERY_CALL, checks=("distinct-ids",)),
    zoo.shared(shared.DROPS_REASONING, "leaves the thinking out of the turn it sends back"),
    zoo.shared(shared.DROPS_RETURNED_REASONING),
    zoo.shared(shared.THINKING_AS_TEXT),
    zoo.mutant(
        "strips-thinking",
        "trims the whitespace off each streamed thinking piece, so the words run together",
        StripsThinking,
        checks=("reasoning-exact",),
        cases=("reasoning/stream",),
    ),
    zoo.mutant(
        "output-as-total",
        "reports eval_count as the total",
        CountsOutputAsTotal,
        checks=("usage",),
        cases=(
            "text/chat",
            "text/stream",
            "tool-call/chat",
            "tool-call/stream",
            "tool-call-with-stop/chat",
            "tool-call-with-stop/stream",
            "truncated-tool-call/chat",
            "truncated-tool-call/stream",
        ),
    ),
    zoo.shared(shared.STOP_ON_TOOL_TURN),
    zoo.shared(shared.REQUIRES_CALL_ID, "takes the call id as given, empty from older servers"),
    zoo.mutant(
        "quiet-on-stream-error",
        'ends quietly on an {"error"} line',
        QuietOnStreamError,
        checks=("error-raised",),
        cases=("stream-error/stream",),
    ),
    zoo.mutant(
        "decodes-per-chunk",
        "decodes UTF-8 per network chunk",
        DecodesPerChunk,
        checks=("content",),
        cases=("text/stream",),
    ),
    zoo.mutant(
        "omits-stream-false",
        'leaves "stream" out of a whole request',
        OmitsStreamFalse,
        checks=("reply",),
        cases=("text/chat", "tool-call/chat", "tool-call-with-stop/chat", "truncated-tool-call/chat"),
    ),
    zoo.shared(shared.SENDS_NO_TOOLS),
    zoo.mutant(
        "stream-error-as-overload",
        "calls every mid-stream error line an overload",
        StreamErrorAsOverload,
        checks=("error-details", "error-kind"),
        cases=("stream-error/stream",),
    ),
    zoo.mutant(
        "server-error-on-500-only",
        "maps only a 500 to server_error, so the cloud proxy's 502 is a bad request",
        ServerErrorOn500Only,
        checks=("error-details", "error-kind"),
        cases=("server-error/chat", "server-error/stream"),
    ),
    zoo.shared(shared.TAKES_CUT_FOR_END, checks=('cut-raised', 'cut-finish', 'cut-tool-call')),
    zoo.mutant(
        "flushes-calls-on-cut",
        "hands on the calls it gathered when the stream is cut, before the turn's end said they stand",
        FlushesCallsOnCut,
        checks=("cut-tool-call",),
        cases=("stream-cut/stream",),
    ),
]
