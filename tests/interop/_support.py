"""What the SDK adapters share: racing an SDK's await against the caller's abort."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Optional, TypeVar

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
