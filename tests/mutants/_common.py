"""Pieces several mutants share: a connection left open after an abort, per-chunk UTF-8."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, List, Optional, TypeVar

from conformance.contract import AbortSignal
from conformance.reference._decoders import SSEDecoder, SSEEvent

T = TypeVar("T")

#: How long a leaky mutant keeps its connection after the abort: past the case's 1 s bound.
LEAK_SECONDS = 1.2


class Leak:
    """Races reads against the abort signal but leaves the connection open when it fires."""

    def __init__(self) -> None:
        self.parked: List[asyncio.Future[Any]] = []
        self.responses: List[Any] = []

    async def race(self, awaitable: Awaitable[T], signal: Optional[AbortSignal]) -> T:
        work = asyncio.ensure_future(awaitable)
        if signal is None:
            return await work
        waiter = asyncio.ensure_future(signal.wait())
        done, _ = await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            waiter.cancel()
            return work.result()
        self.parked.append(work)
        assert signal.reason is not None
        raise signal.reason

    def wrap(self, response: Any, signal: Optional[AbortSignal]) -> LeakyResponse:
        self.responses.append(response)
        return LeakyResponse(response, signal, self)

    async def release(self) -> None:
        """Close what was left open, late."""
        if self.parked or self.responses:
            await asyncio.sleep(LEAK_SECONDS)
        for work in self.parked:
            work.cancel()
        for work in self.parked:
            try:
                await work
            except BaseException:  # noqa: BLE001 - cleanup of a deliberately broken backend
                pass
        for response in self.responses:
            await response.aclose()


class LeakyResponse:
    """A response whose reads give up on abort without closing anything."""

    def __init__(self, response: Any, signal: Optional[AbortSignal], leak: Leak) -> None:
        self.response = response
        self.signal = signal
        self.leak = leak
        self.status = response.status
        self.headers = response.headers
        self.iterator = response.__aiter__()

    def __aiter__(self) -> LeakyResponse:
        return self

    async def __anext__(self) -> bytes:
        chunk: bytes = await self.leak.race(self.iterator.__anext__(), self.signal)
        return chunk

    async def read(self) -> bytes:
        data: bytes = await self.leak.race(self.response.read(), self.signal)
        return data

    async def aclose(self) -> None:
        """Leave the connection open: that is the bug."""


class PerChunkSSEDecoder(SSEDecoder):
    """Decodes every network chunk on its own, so a character cut in two is lost."""

    def feed(self, chunk: bytes) -> List[SSEEvent]:
        return super().feed(chunk.decode("utf-8", errors="replace").encode("utf-8"))
