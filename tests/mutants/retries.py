"""Retry layers with one classic bug each, around a correct reference backend, on targets that
say they retry (``retries = True``): each is caught by one check of the retries family."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, List

from conformance.contract import LLMError
from conformance.reference import REFERENCE_BACKENDS
from conformance.reference.retrying import RetryingBackend

from . import Mutant


class IgnoresRetryAfter(RetryingBackend):
    """Waits its own backoff, whatever the provider asked for."""

    def delay(self, error: LLMError, attempt: int) -> float:
        return min(self.backoff * 2.0 ** (attempt - 1), self.longest)


class RetriesAtOnce(RetryingBackend):
    """Asks again the moment a failure comes, the provider's delay and any backoff ignored."""

    def delay(self, error: LLMError, attempt: int) -> float:
        return 0.0


#: The constant backoff's wait: long enough that a quarter of it is past retry-growth's
#: slack (0.5 s) by as much again, so that load lengthening its second wait (by 250 ms,
#: seen in a whole test run with 48 such cases waiting at once) does not hide it.
CONSTANT_WAIT = 4.0


class ConstantBackoff(RetryingBackend):
    """Waits the same four seconds after every failure that names no delay: more than nothing,
    but never longer, so a failing provider meets a steady stream of requests."""

    def __init__(self, backend: Any, **options: Any) -> None:
        # Its wait is longer than the reference layer's longest: it takes its own.
        super().__init__(backend, **{"longest": CONSTANT_WAIT + 1.0, **options})

    def delay(self, error: LLMError, attempt: int) -> float:
        return max(error.retry_after or 0.0, CONSTANT_WAIT)


class RetriesEverything(RetryingBackend):
    """Retries every failure, a quota and a refused key too, until its attempts run out."""

    def _gives_up(self, error: LLMError, attempt: int) -> bool:
        return attempt >= self.attempts


class RestartsTheStream(RetryingBackend):
    """Starts a cut stream again and hands on the new attempt after what the failed one yielded."""

    async def chat_stream(self, request: Any) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                async for chunk in self.backend.chat_stream(request):
                    yield chunk
                return
            except LLMError as error:
                if self._gives_up(error, attempt):
                    raise
                wait = self.delay(error, attempt)
            await asyncio.sleep(wait)


class RetriesARefusal(RetryingBackend):
    """Asks again after a content-filtered answer, hoping for another: nothing failed there."""

    async def chat(self, request: Any) -> Any:
        response = await super().chat(request)
        for attempt in range(1, self.attempts):
            if getattr(response.finish_reason, "value", response.finish_reason) != "content_filter":
                break
            await asyncio.sleep(self.backoff * attempt)
            response = await super().chat(request)
        return response


def _layer(wire: str, layer: Callable[..., Any], **options: Any) -> Callable[[str, bool], Any]:
    def create(url: str, http2: bool) -> Any:
        return layer(REFERENCE_BACKENDS[wire](url, http2), **options)

    return create


MUTANTS: List[Mutant] = [
    Mutant(
        "retry-ignores-retry-after",
        "a retry layer that waits its own 50 ms backoff where the provider asked for 200 ms",
        "anthropic",
        _layer("anthropic", IgnoresRetryAfter),
        checks=("retry-wait",),
        cases=("rate-limit/chat", "rate-limit/stream"),
        retries=True,
    ),
    Mutant(
        "retry-at-once",
        "a retry layer that asks again at once after an overload that named no delay",
        "anthropic",
        _layer("anthropic", RetriesAtOnce),
        checks=("retry-backoff",),
        cases=("overloaded/chat", "server-error/stream"),
        retries=True,
    ),
    Mutant(
        "retry-constant-backoff",
        "a retry layer that waits four seconds after each 429 that names no delay, the second "
        "wait no longer than the first",
        "openai-chat",
        _layer("openai-chat", ConstantBackoff),
        checks=("retry-growth",),
        cases=("rate-limit/chat", "rate-limit/stream"),
        retries=True,
    ),
    Mutant(
        "retry-forever-on-quota",
        "a retry layer that retries a quota and an auth failure as if they could come back",
        "openai-chat",
        _layer("openai-chat", RetriesEverything),
        checks=("retry-permanent",),
        cases=("quota/chat", "auth/stream"),
        retries=True,
    ),
    Mutant(
        "retry-gives-up",
        "no retry layer at all on a target that says it retries: the first rate limit is raised",
        "openai-chat",
        _layer("openai-chat", RetryingBackend, attempts=1),
        checks=("retry-relent",),
        cases=("rate-limit/chat", "overloaded/stream"),
        retries=True,
    ),
    Mutant(
        "retry-repeats-the-cut-text",
        "a retry layer that starts a cut stream again after it yielded text, handing on both",
        "openai-chat",
        _layer("openai-chat", RestartsTheStream),
        checks=("retry-no-repeat",),
        cases=("stream-cut/stream",),
        variants=("after-text", "between-events", "clean-end", "clean-end-by-length"),
        retries=True,
    ),
    Mutant(
        "retry-a-refusal",
        "a retry layer that asks again after a content-filtered answer, where nothing failed",
        "openai-chat",
        _layer("openai-chat", RetriesARefusal),
        checks=("no-retry",),
        cases=("content-filter/chat",),
        retries=True,
    ),
]
