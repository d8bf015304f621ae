"""What the SDK adapters share: racing an SDK's await against the caller's abort, and
silencing the warnings an SDK's own dependencies raise about themselves."""

from __future__ import annotations

import asyncio
import warnings
from typing import Awaitable, Optional, Sequence, Type, TypeVar

from conformance.contract import AbortSignal

T = TypeVar("T")


async def race(awaitable: Awaitable[T], signal: Optional[AbortSignal]) -> T:
    """Await ``awaitable`` unless ``signal`` fires first: then cancel it and raise the reason.

    No SDK takes an abort signal. Cancelling the SDK's task makes httpx close the
    connection as it unwinds, which is what the provider must see. A cancellation of
    the caller's task cancels both and propagates unchanged.
    """
    work = asyncio.ensure_future(awaitable)
    if signal is None:
        return await work
    waiter = asyncio.ensure_future(signal.wait())
    try:
        done, _ = await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in (work, waiter):
            if not future.done():
                future.cancel()
        # Let both unwind (the connection closes in there) before going on.
        await asyncio.gather(work, waiter, return_exceptions=True)
    if work in done:
        return work.result()
    assert signal.reason is not None
    raise signal.reason  # the very object the caller aborted with


class ThirdPartyWarnings:
    """Ignore deprecation and end-of-life warnings raised from named third-party modules.

    The tests run with ``-W error`` so that a leaked socket or an un-awaited coroutine of
    ours fails; a warning an SDK's own code raises about its dependencies (google-genai
    1.47, the last release for Python 3.9, uses a pydantic validator form that pydantic
    2.12 deprecated; google-auth warns that Python 3.9 is past its end of life) says
    nothing about the wire and is not ours to fix. ``module`` is a regular expression
    matched against the module the warning is attributed to, so a warning raised from
    ``conformance`` or the tests still fails. Call :meth:`start` from the test module's
    ``setUpModule`` and :meth:`stop` from its ``tearDownModule``, so that no other test
    module runs under the filter.
    """

    def __init__(
        self,
        module: str,
        categories: Sequence[Type[Warning]] = (DeprecationWarning, PendingDeprecationWarning, FutureWarning),
    ) -> None:
        self.module = module
        self.categories = tuple(categories)
        self._saved: Optional[warnings.catch_warnings] = None

    def start(self) -> None:
        self._saved = warnings.catch_warnings()
        self._saved.__enter__()
        for category in self.categories:
            warnings.filterwarnings("ignore", category=category, module=self.module)

    def stop(self) -> None:
        if self._saved is not None:
            self._saved.__exit__(None, None, None)
            self._saved = None
