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


MUTANTS = [
    *(
        zoo.shared(bug, cases=("overloaded/chat", "overloaded/stream"))
        if bug is shared.OVERLOAD_AS_SERVER_ERROR
        else zoo.shared(bug)
        # Ollama sends no call ids: there is nothing to pair up wrongly. Its usage limit is
        # a 429 whose message alone says quota: a rate limit is a fair reading of it.
        for bug in shared.EVERY_WIRE
        if bug not in (shared.SWAPS_CALL_IDS, shared.QUOTA_AS_RATE_LIMIT)
    ),
    # The ids are the backend's own: two calls under one is caught by that alone.
    zoo.shared(shared.ONE_ID_FOR_EVERY_CALL, checks=("distinct-ids",)),
    zoo.shared(shared.DROPS_REASONING, "leaves the thinking out of the turn it sends back"),
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
]
