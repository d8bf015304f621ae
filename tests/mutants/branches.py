"""Bugs that each reach one reporting branch no other mutant reaches alone.

Strategy: the sabotage test works per reporting site; a branch of a check that some
mutant reaches only together with other branches proves nothing on its own. Each bug
here is one wire's reference backend with one change, caught by one branch: a 429
answered with a reply in chat mode, a chat that returns ``None``, an answer made up
without asking, an abort or a cancellation swallowed into an empty reply, reasoning
items passed on twice, and a call to a function the request never declared renamed
to one it did, a stream ended at its first chunk (over before the case could cancel it),
and HTTP/1.1 spoken to a target that asked for h2c.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, AsyncIterator, List, Optional

from conformance.contract import ChatRequest, ChatResponse, LLMError, StreamChunk, ToolCall
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.reference import (
    AnthropicBackend,
    GeminiVertexBackend,
    OpenAIChatBackend,
)

from . import Mutant
from ._common import ReasoningAfterFinish, Zoo

chat_zoo = Zoo("openai-chat", OpenAIChatBackend, path="/v1")
anthropic_zoo = Zoo("anthropic", AnthropicBackend)
vertex_zoo = Zoo("gemini-vertex", GeminiVertexBackend)


class RepliesToARateLimit:
    """Answers a 429 with an empty reply in chat mode, as if the turn had said nothing."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        try:
            return await super().chat(chat)  # type: ignore[misc, no-any-return]
        except LLMError as error:
            if error.kind != "rate_limit":
                raise
            return ChatResponse("", "stop")


class ReturnsNone:
    """Sends the request and reads the answer, then returns nothing from ``chat``."""

    async def chat(self, chat: ChatRequest) -> Optional[ChatResponse]:
        await super().chat(chat)  # type: ignore[misc]
        return None


class CannedAnswer:
    """Answers with the reply a plain question expects, without asking the provider."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        return ChatResponse(FX.text, "stop", usage=FX.usage)


class EmptyReplyOnAbort:
    """On abort, returns an empty reply (chat) or ends the stream quietly, not the reason."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        try:
            return await super().chat(chat)  # type: ignore[misc, no-any-return]
        except BaseException as error:
            if chat.signal is not None and error is chat.signal.reason:
                return ChatResponse("", "stop")
            raise

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):  # type: ignore[misc]
                yield chunk
        except BaseException as error:
            if chat.signal is not None and error is chat.signal.reason:
                return
            raise


class SwallowsCancellation:
    """Catches its task's cancellation and returns an empty reply (chat) or ends the stream."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        try:
            return await super().chat(chat)  # type: ignore[misc, no-any-return]
        except asyncio.CancelledError:
            return ChatResponse("", "stop")

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):  # type: ignore[misc]
                yield chunk
        except asyncio.CancelledError:
            return


class ReasoningTwice:
    """Passes each reasoning item on twice: once as it is, once more after it."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response: ChatResponse = await super().chat(chat)  # type: ignore[misc]
        doubled = tuple(item for item in response.reasoning for _ in range(2))
        return dataclasses.replace(response, reasoning=doubled)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):  # type: ignore[misc]
            if chunk.reasoning:
                chunk = dataclasses.replace(chunk, reasoning=chunk.reasoning + chunk.reasoning)
            yield chunk


class RenamesUndeclaredCalls:
    """Renames a call to a function the request never declared to the one it did declare."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response: ChatResponse = await super().chat(chat)  # type: ignore[misc]
        declared = [t.name for t in chat.tools]
        calls: List[ToolCall] = [
            c if c.name in declared or not declared else dataclasses.replace(c, name=declared[0])
            for c in response.tool_calls
        ]
        return dataclasses.replace(response, tool_calls=tuple(calls))


class EndsAtTheFirstChunk:
    """Yields the stream's first chunk and ends there, as if one chunk were the whole turn."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        stream = super().chat_stream(chat)  # type: ignore[misc]
        try:
            async for chunk in stream:
                yield chunk
                return
        finally:
            await stream.aclose()


def _http1_only(zoo: Zoo, name: str, bug: str) -> Mutant:
    """A mutant that speaks HTTP/1.1 whatever the target says: on h2c, the provider turns it away."""
    plain = zoo.mutant(name, bug, _Plain, checks=("request",), cases=("text/chat",), transports=("h2",))

    def create(url: str, http2: bool) -> Any:
        return plain.create(url, False)

    return dataclasses.replace(plain, create=create)


class _Plain:
    """The reference backend as it is (the bug is in how it is built)."""


def _mutants() -> List[Any]:
    out: List[Mutant] = [
        chat_zoo.mutant(
            "replies-to-a-rate-limit",
            "answers a 429 with an empty reply in chat mode",
            RepliesToARateLimit,
            checks=("error-raised",),
            cases=("rate-limit/chat",),
        ),
        chat_zoo.mutant(
            "chat-returns-none",
            "returns None from chat after reading the answer",
            ReturnsNone,
            checks=("reply",),
            cases=("text/chat",),
        ),
        chat_zoo.mutant(
            "canned-answer",
            "answers a plain question without sending a request",
            CannedAnswer,
            checks=("request",),
            cases=("text/chat",),
        ),
        chat_zoo.mutant(
            "empty-reply-on-abort",
            "returns an empty reply on abort, not the abort reason",
            EmptyReplyOnAbort,
            checks=("abort-reason",),
            cases=("abort/chat",),
        ),
        chat_zoo.mutant(
            "swallows-cancellation",
            "catches its task's cancellation and returns an empty reply",
            SwallowsCancellation,
            checks=("cancel-propagates",),
            cases=("cancel/chat",),
        ),
        anthropic_zoo.mutant(
            "reasoning-after-finish",
            "yields the turn's reasoning on a chunk of its own after the finish reason",
            ReasoningAfterFinish,
            checks=("finish-last",),
            cases=("reasoning/stream",),
        ),
        anthropic_zoo.mutant(
            "reasoning-twice",
            "passes each reasoning item on twice",
            ReasoningTwice,
            checks=("reasoning",),
            cases=("reasoning/chat", "reasoning/stream"),
        ),
        vertex_zoo.mutant(
            "renames-undeclared-calls",
            "renames a call to a function the request never declared to the declared one",
            RenamesUndeclaredCalls,
            checks=("tool-calls",),
            cases=("tool-call/chat",),
            variants=("unexpected-tool-call",),
        ),
        chat_zoo.mutant(
            "ends-at-the-first-chunk",
            "yields the stream's first chunk and ends the stream there",
            EndsAtTheFirstChunk,
            checks=("cancel-propagates",),
            cases=("cancel/stream",),
        ),
        _http1_only(chat_zoo, "http1-only", "speaks HTTP/1.1 to a target that set http2 = True"),
    ]
    return out


MUTANTS = _mutants()
