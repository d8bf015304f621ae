"""Backends that mishandle a provider slow to answer, on every wire: each is a correct reference
backend whose read timeout, or whose reading of it, is wrong, caught by one check of the
latency family. The zoo's targets declare :data:`ZOO_READ_TIMEOUT`."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable, List

from conformance.contract import ChatRequest, ChatResponse, LLMError, StreamChunk
from conformance.reference import REFERENCE_BACKENDS
from conformance.wires import WIRES

from . import Mutant

#: The read timeout every target of the zoo declares (seconds).
ZOO_READ_TIMEOUT = 0.5
#: The read timeout the backend that gives up early really uses: a quarter of the 0.2 s
#: silence, so that a client on a loaded machine that starts its wait late still gives up.
EARLY = ZOO_READ_TIMEOUT / 10


class TimeoutNotRetryable:
    """Reports a read timeout (and any answer that did not come whole) as a bad request,
    which a retry layer never tries again."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    @staticmethod
    def changed(error: LLMError) -> LLMError:
        if error.kind != "server_error" or error.status is not None:
            return error
        return LLMError.from_kind("invalid_request", str(error), provider=error.provider)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        try:
            response: ChatResponse = await self.backend.chat(request)
        except LLMError as error:
            raise self.changed(error) from error
        return response

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in self.backend.chat_stream(request):
                yield chunk
        except LLMError as error:
            raise self.changed(error) from error

    async def aclose(self) -> None:
        await self.backend.aclose()


class ReadTimeoutAsDeadline:
    """Gives the whole stream its read timeout as a deadline: a provider whose pings keep the
    stream alive past it is given up on, though no read ever waited that long."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    async def chat(self, request: ChatRequest) -> ChatResponse:
        response: ChatResponse = await self.backend.chat(request)
        return response

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ZOO_READ_TIMEOUT
        chunks = self.backend.chat_stream(request).__aiter__()
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(chunks.__anext__(), max(0.0, deadline - loop.time()))
                except StopAsyncIteration:
                    return
                except asyncio.TimeoutError:
                    message = "the reply took longer than the read timeout"
                    raise LLMError.from_kind("server_error", message) from None
                yield chunk
        finally:
            await chunks.aclose()

    async def aclose(self) -> None:
        await self.backend.aclose()


def _reading(
    wire: str, read_timeout: float, wrap: Callable[[Any], Any] = lambda b: b
) -> Callable[[str, bool], Any]:
    """The wire's reference backend waiting ``read_timeout`` seconds for a byte, wrapped."""

    def create(url: str, http2: bool) -> Any:
        backend = REFERENCE_BACKENDS[wire](url, http2)
        backend.timeout = read_timeout
        return wrap(backend)

    return create


def _for(wire: str) -> List[Mutant]:
    return [
        Mutant(
            "latency-timeout-not-retryable",
            "a backend that reports its read timeout as a non-retryable invalid_request",
            wire,
            _reading(wire, ZOO_READ_TIMEOUT, TimeoutNotRetryable),
            checks=("timeout-kind",),
            cases=("stall/chat", "stall/stream"),
        ),
        Mutant(
            "latency-gives-up-early",
            f"a backend that waits {EARLY:g} s for a byte where its target declares {ZOO_READ_TIMEOUT:g} s",
            wire,
            _reading(wire, EARLY),
            checks=("in-time",),
            cases=("slow-first-token/chat", "slow-first-token/stream"),
        ),
    ]


MUTANTS: List[Mutant] = [mutant for wire in WIRES for mutant in _for(wire)] + [
    Mutant(
        "latency-ignores-read-timeout",
        f"a backend that waits a minute for a byte where its target declares {ZOO_READ_TIMEOUT:g} s",
        wire,
        _reading(wire, 60.0),
        checks=("read-timeout",),
        cases=("stall/chat", "stall/stream"),
    )
    # One wire of each framing: SSE, NDJSON, the AWS event stream.
    for wire in ("openai-chat", "ollama", "bedrock-converse")
] + [
    Mutant(
        "latency-read-timeout-as-deadline",
        f"a backend that gives the whole stream {ZOO_READ_TIMEOUT:g} s, its read timeout, as a "
        "deadline: pings that keep the stream alive past it do not save the reply",
        wire,
        _reading(wire, ZOO_READ_TIMEOUT, ReadTimeoutAsDeadline),
        checks=("in-time",),
        cases=("slow-first-token/stream",),
        variants=("pinged",),
    )
    for wire in ("anthropic", "anthropic-vertex")
]
