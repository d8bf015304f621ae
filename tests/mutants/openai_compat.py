"""Mutants of the OpenAI Chat wire that names every OpenAI-compatible server: the reference
backend with a bug that api.openai.com's shapes let pass and one server's shape catches.

Each names the variants that catch it (``variants``); it passes api.openai.com's shape
of the same case, so the server's shape is the reason it is caught.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from conformance.contract import ChatRequest, LLMError, StreamChunk
from conformance.reference._decoders import SSEDecoder, SSEEvent
from conformance.reference.openai_chat import OpenAIChatBackend, _PartialCall

from . import SERVERS_ZOO
from . import _common as shared
from ._common import Zoo
from ._openai import StreamErrorAsOverload

zoo = Zoo(SERVERS_ZOO, OpenAIChatBackend, path="/v1")

#: api.openai.com's tiers, the Literal openai-python validates ``service_tier`` against.
OPENAI_TIERS = frozenset({"auto", "default", "flex", "scale", "priority"})


class UsageFromEmptyChoicesOnly(OpenAIChatBackend):
    """Takes usage only from a chunk with ``choices: []``, where api.openai.com puts it."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.empty_choices_usage: Optional[Any] = None
        async for chunk in super().chat_stream(chat):
            if chunk.finish_reason is not None:
                chunk = dataclasses.replace(chunk, usage=self.usage(self.empty_choices_usage))
            yield chunk

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        if chunk.get("choices") == [] and chunk.get("usage"):
            self.empty_choices_usage = chunk["usage"]
        return super().on_chunk(chunk, partials)


class IndexOnEveryFragment(OpenAIChatBackend):
    """Keys every tool-call fragment by its ``index``, which Mistral's whole calls lack."""

    @staticmethod
    def call_index(fragment: Mapping[str, Any], partials: Mapping[int, _PartialCall]) -> int:
        return int(fragment["index"])


class DoneEndsTheTurn(OpenAIChatBackend):
    """Takes ``data: [DONE]`` for a finished turn, finish reason or not ("stop" where none came)."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except LLMError as error:
            if "before a finish reason" not in str(error):
                raise
            yield StreamChunk(finish_reason="stop")


class ErrorChunkTakenForAnEnd(DoneEndsTheTurn):
    """Skips a chunk without ``choices`` (llama-server's error chunk), then takes ``[DONE]`` for the end."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        if "choices" not in chunk:
            return ""
        return super().on_chunk(chunk, partials)


class _PeeksAtTheBody(OpenAIChatBackend):
    """Looks at a whole reply's JSON before the reference reads it (:meth:`peek`)."""

    async def send(self, chat: ChatRequest, stream: bool) -> Any:
        response = await super().send(chat, stream)
        if not stream:
            read = response.read

            async def peeked() -> bytes:
                raw: bytes = await read()
                self.peek(json.loads(raw))
                return raw

            response.read = peeked
        return response

    def peek(self, body: Any) -> None:
        raise NotImplementedError


class ContextOverflowByCodeOnly(OpenAIChatBackend):
    """Knows a context overflow only by OpenAI's ``context_length_exceeded`` code."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        if error.get("type") == "exceed_context_size_error":
            error = {**error, "type": None}
        return super().error_kind(status, error)


class StrictServiceTier(_PeeksAtTheBody):
    """Refuses a reply whose ``service_tier`` is none of api.openai.com's, as strict validation does."""

    def peek(self, body: Any) -> None:
        tier = body.get("service_tier")
        if tier is not None and tier not in OPENAI_TIERS:
            raise ValueError(f"service_tier {tier!r} is none of {sorted(OPENAI_TIERS)}")


class CallsTypedFunctionOnly(_PeeksAtTheBody):
    """Keeps only the calls whose ``type`` says ``function``; Mistral's say no type at all."""

    def peek(self, body: Any) -> None:
        for choice in body.get("choices") or ():
            self.typed.update(self.typed_ids((choice.get("message") or {}).get("tool_calls")))

    @staticmethod
    def typed_ids(calls: Any) -> List[str]:
        return [c.get("id") for c in calls or () if c.get("type") == "function"]

    async def chat(self, chat: ChatRequest) -> Any:
        self.typed: set = set()
        return await super().chat(chat)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.typed = set()
        async for chunk in super().chat_stream(chat):
            yield chunk

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        for choice in chunk.get("choices") or ():
            self.typed.update(self.typed_ids((choice.get("delta") or {}).get("tool_calls")))
        return super().on_chunk(chunk, partials)

    def complete_calls(self, partials: List[_PartialCall], reason: Optional[str]) -> List[Any]:
        return [c for c in super().complete_calls(partials, reason) if c.id in self.typed]


class RefusalKeyRequired(_PeeksAtTheBody):
    """Reads ``message["refusal"]``, which api.openai.com always sends and no compatible server does."""

    def peek(self, body: Any) -> None:
        for choice in body.get("choices") or ():
            if choice["message"]["refusal"]:
                raise ValueError("the model refused")


class NullToolCallsIterated(_PeeksAtTheBody):
    """Iterates ``message.get("tool_calls", [])``, which is ``None`` where the key is there and null."""

    def peek(self, body: Any) -> None:
        for choice in body.get("choices") or ():
            for call in choice["message"].get("tool_calls", []):
                call.get("id")


class ReasoningKeyTakenForText(OpenAIChatBackend):
    """Gathers ``reasoning_content`` wherever the key is, so DeepSeek's ``null`` beside each content delta
    breaks the join."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if "reasoning_content" in delta:
                self.pieces.append(delta["reasoning_content"])
        return super().on_chunk(chunk, partials)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.pieces: List[Any] = []
        async for chunk in super().chat_stream(chat):
            "".join(self.pieces)  # the join a str-only buffer makes
            yield chunk


class ErrorCodeAsText(OpenAIChatBackend):
    """Reads ``error.code`` as text, as OpenAI's codes are; llama-server's is the status, a number."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        code = error.get("code")
        if code is not None:
            code.lower()  # OpenAI's codes are strings: rate_limit_exceeded, ...
        return super().error_kind(status, error)


class NestedErrorOnly(OpenAIChatBackend):
    """Reads a failure's fields only under ``error``, as api.openai.com nests them; Mistral's
    sit at the top level, and ``body["error"]`` raises there."""

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        error = json.loads(raw)["error"]
        kind = self.error_kind(status, error)
        return self.make_error(kind, error, status=status, retry_after=self.retry_after(headers))


class _CommentsAsData(SSEDecoder):
    """Takes a comment line for data, as a reader that splits on ``data:`` alone would not."""

    def _line(self, line: str) -> SSEEvent | None:
        if line.startswith(":"):
            line = "data" + line
        return super()._line(line)


class CommentLineParsed(OpenAIChatBackend):
    """Parses every line of the stream as JSON, the comment lines OpenRouter sends first too."""

    def sse_decoder(self) -> SSEDecoder:
        return _CommentsAsData()


class LastFinishReasonWins(OpenAIChatBackend):
    """Takes the last choice's ``finish_reason`` for the turn's, null or not: OpenRouter's usage
    chunk comes after the finish and says ``null`` again, so no finish reason seems to have come."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        for choice in chunk.get("choices") or ():
            self.last = choice.get("finish_reason")
        return super().on_chunk(chunk, partials)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.last: Optional[str] = None
        async for chunk in super().chat_stream(chat):
            if chunk.finish_reason is not None and self.last is None:
                ended = {"message": "the stream ended before a finish reason"}
                raise self.make_error("server_error", ended, status=None)
            yield chunk


class InBandErrorTakenForAnEnd(OpenAIChatBackend):
    """Reads a chunk's choices before its ``error``: OpenRouter's failure chunk, whose choice says
    ``finish_reason: "error"``, ends the turn as a finished one."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        choices = chunk.get("choices") or ()
        if chunk.get("error") and choices:
            self.ended = any(c.get("finish_reason") == "error" for c in choices)
            chunk = {key: value for key, value in chunk.items() if key != "error"}
        return super().on_chunk(chunk, partials)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.ended = False
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except LLMError:
            if not self.ended:
                raise
            yield StreamChunk(finish_reason="error")


class InBandErrorAsText(OpenAIChatBackend):
    """Shows the message of an error that comes with choices as the turn's text, and reads on."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        error = chunk.get("error")
        if isinstance(error, dict) and chunk.get("choices"):
            rest = {key: value for key, value in chunk.items() if key != "error"}
            return str(error.get("message")) + super().on_chunk(rest, partials)
        return super().on_chunk(chunk, partials)


class PaymentRequiredAsBadRequest(OpenAIChatBackend):
    """Places a failure by its status alone where the body names no kind it knows: a 402 is then
    a bad request, though OpenRouter's means the credits ran out."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        if status == 402:
            return "invalid_request"
        return super().error_kind(status, error)


MUTANTS = [
    zoo.mutant(
        "usage-from-empty-choices-only",
        "takes usage only from a choices: [] chunk, where api.openai.com puts it",
        UsageFromEmptyChoicesOnly,
        checks=("usage",),
        cases=("text/stream", "tool-call/stream", "reasoning/stream"),
        variants=("mistral", "groq", "deepseek", "openrouter"),
    ),
    zoo.mutant(
        "index-on-every-fragment",
        "keys every tool-call fragment by its index, which Mistral's whole calls lack",
        IndexOnEveryFragment,
        checks=("reply",),
        cases=("tool-call/stream",),
        variants=("mistral",),
    ),
    zoo.mutant(
        "error-chunk-taken-for-an-end",
        "skips a chunk without choices and takes [DONE] for the end: llama-server's in-stream error",
        ErrorChunkTakenForAnEnd,
        checks=("error-raised",),
        cases=("context-overflow/stream",),
        variants=("llama-cpp-in-stream", "llama-cpp-error-field"),
    ),
    zoo.mutant(
        "done-ends-the-turn",
        "takes [DONE] for a finished turn though no finish reason came",
        DoneEndsTheTurn,
        checks=("error-raised",),
        cases=("context-overflow/stream",),
        variants=("llama-cpp-error-field",),
    ),
    zoo.mutant(
        "context-overflow-by-code-only",
        "knows a context overflow only by OpenAI's context_length_exceeded code",
        ContextOverflowByCodeOnly,
        checks=("error-details", "error-kind"),
        cases=("context-overflow/chat", "context-overflow/stream"),
        variants=("llama-cpp", "llama-cpp-in-stream"),
    ),
    zoo.mutant(
        "strict-service-tier",
        "refuses a service_tier none of api.openai.com's (Groq's on_demand)",
        StrictServiceTier,
        checks=("reply",),
        cases=("text/chat", "tool-call/chat"),
        variants=("groq",),
    ),
    zoo.mutant(
        "refusal-key-required",
        "reads message.refusal, which only api.openai.com sends",
        RefusalKeyRequired,
        checks=("reply",),
        cases=("text/chat", "tool-call/chat", "reasoning/chat"),
        variants=("mistral", "groq", "deepseek"),
    ),
    zoo.mutant(
        "null-tool-calls-iterated",
        'iterates message.get("tool_calls", []), null in Mistral\'s text reply',
        NullToolCallsIterated,
        checks=("reply",),
        cases=("text/chat",),
        variants=("mistral",),
    ),
    zoo.mutant(
        "calls-typed-function-only",
        "keeps only calls whose type says function; Mistral's carry no type",
        CallsTypedFunctionOnly,
        checks=("tool-calls",),
        cases=("tool-call/chat", "tool-call/stream"),
        variants=("mistral",),
    ),
    zoo.mutant(
        "reasoning-key-taken-for-text",
        "gathers reasoning_content wherever the key is, null or not",
        ReasoningKeyTakenForText,
        checks=("reply",),
        cases=("reasoning/stream", "tool-call/stream"),
        variants=("deepseek",),
    ),
    zoo.mutant(
        "plain-400-as-server-error",
        "calls a 400 it cannot place a retryable server error: DeepSeek's prompt too long",
        shared.mislabels("invalid_request", "server_error"),
        checks=("error-details", "error-kind"),
        cases=("context-overflow/chat", "context-overflow/stream"),
        variants=("deepseek", "openrouter"),
    ),
    zoo.mutant(
        "error-code-as-text",
        "reads error.code as text; llama-server's is a number",
        ErrorCodeAsText,
        checks=("error-details", "error-kind", "error-status"),
        cases=(
            "context-overflow/chat",
            "rate-limit/chat",
            "rate-limit/stream",
            "quota/chat",
            "quota/stream",
            "auth/chat",
            "auth/stream",
        ),
        variants=("llama-cpp", "openrouter"),
    ),
    zoo.mutant(
        "in-stream-server-error-as-overload",
        "calls every in-stream error it cannot place an overload",
        StreamErrorAsOverload,
        checks=("error-details", "error-kind"),
        cases=("stream-error/stream",),
        variants=("llama-cpp", "openrouter", "openrouter-no-choices"),
    ),
    zoo.mutant(
        "nested-error-only",
        'reads a failure only as body["error"], where api.openai.com nests it; Mistral\'s is top-level',
        NestedErrorOnly,
        checks=("error-details", "error-kind", "error-status"),
        cases=("rate-limit/chat", "rate-limit/stream", "auth/chat", "auth/stream"),
        variants=("mistral", "mistral-raw-status", "mistral-detail"),
    ),
    zoo.mutant(
        "retry-after-header-ignored",
        "reads no delay from a 429's headers, as api.openai.com's carries none; Groq's sends retry-after",
        shared.IgnoresRetryAfter,
        checks=("retry-after",),
        cases=("rate-limit/chat", "rate-limit/stream"),
        variants=("groq",),
    ),
    zoo.mutant(
        "comment-line-parsed",
        "parses every line of a stream as JSON, the SSE comment lines OpenRouter sends first too",
        CommentLineParsed,
        checks=("reply",),
        cases=("text/stream",),
        variants=("openrouter",),
    ),
    zoo.mutant(
        "last-finish-reason-wins",
        "takes the last choice's finish_reason, null on OpenRouter's usage chunk after the finish",
        LastFinishReasonWins,
        checks=("reply",),
        cases=("text/stream",),
        variants=("openrouter",),
    ),
    zoo.mutant(
        "in-band-error-taken-for-an-end",
        'reads choices before error: OpenRouter\'s finish_reason "error" chunk ends the turn as finished',
        InBandErrorTakenForAnEnd,
        checks=("error-raised",),
        cases=("stream-error/stream",),
        variants=("openrouter",),
    ),
    zoo.mutant(
        "in-band-error-as-text",
        "shows the message of an error that comes with choices as text, and reads on",
        InBandErrorAsText,
        checks=("text-before-error",),
        cases=("stream-error/stream",),
        variants=("openrouter",),
    ),
    zoo.mutant(
        "payment-required-as-bad-request",
        "calls a 402 a bad request: OpenRouter's credits ran out",
        PaymentRequiredAsBadRequest,
        checks=("error-details", "error-kind"),
        cases=("quota/chat", "quota/stream"),
        variants=("openrouter",),
    ),
]
