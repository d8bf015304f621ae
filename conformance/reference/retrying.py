"""A retry layer around any reference backend: what a target with ``retries = True`` is held to.

Strategy: the layer sits outside the backend, as an SDK's does, and decides on the
contract's error alone: ``LLMError.retryable`` says whether a failure can come back,
``LLMError.retry_after`` how long the provider asked to wait. It waits at least that,
and never less than a backoff that doubles each time; it gives up after a bounded
number of attempts, or where the provider asks for longer than it will wait, raising
the last failure as it came. A stream is retried only while it has yielded nothing:
once text went out, a retry would hand the answer on after it, so the cut is raised.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from ..contract import ChatRequest, ChatResponse, LLMError, StreamChunk

__all__ = ["RetryingBackend"]


class RetryingBackend:
    """``backend`` with retries: ``attempts`` in all, the first wait ``backoff`` seconds, doubling.

    ``longest`` is the longest single wait it takes: a failure asking for more is raised.
    """

    def __init__(
        self, backend: Any, *, attempts: int = 4, backoff: float = 0.05, longest: float = 2.0
    ) -> None:
        if attempts < 1 or backoff <= 0 or longest < backoff:
            raise ValueError(
                f"attempts >= 1 and 0 < backoff <= longest, got {attempts}, {backoff}, {longest}"
            )
        self.backend = backend
        self.attempts = attempts
        self.backoff = backoff
        self.longest = longest

    def delay(self, error: LLMError, attempt: int) -> float:
        """How long to wait after ``attempt`` (1 for the first) failed with ``error``."""
        backoff = min(self.backoff * 2.0 ** (attempt - 1), self.longest)
        return max(error.retry_after or 0.0, backoff)

    def _gives_up(self, error: LLMError, attempt: int) -> bool:
        return not error.retryable or attempt >= self.attempts or self.delay(error, attempt) > self.longest

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """The backend's reply, asked again after each failure that can come back."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response: ChatResponse = await self.backend.chat(request)
                return response
            except LLMError as error:
                if self._gives_up(error, attempt):
                    raise
                await asyncio.sleep(self.delay(error, attempt))

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        """The backend's stream, started again after a failure that can come back and came
        before anything was yielded."""
        attempt = 0
        while True:
            attempt += 1
            yielded = False
            try:
                async for chunk in self.backend.chat_stream(request):
                    yielded = True
                    yield chunk
                return
            except LLMError as error:
                if yielded or self._gives_up(error, attempt):
                    raise
                wait = self.delay(error, attempt)
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        """Close the backend it wraps."""
        await self.backend.aclose()
