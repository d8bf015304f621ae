"""Running the application's own function along the one outline (``_outline``): bounded, reclaimed.

Strategy: the application is any callable: a function that calls an SDK, a coroutine
function, the application's own helper. It runs as a backend does, on a worker thread
with an event loop of its own (a coroutine there, a plain function in a thread of its
own), within the run's bound, and what it returned or raised is kept once. Where the
script asks for a cancel, the run waits for the scripted wire's generation call and
its first chunk, then cancels the application's task, and the outline watches the
connection close while the application is still alive.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._bounds import ABORT_DELAY
from .._case import Outcome
from .._loops import is_async
from .._outline import SubjectDriver

if TYPE_CHECKING:
    from ..provider import RecordedRequest

__all__ = ["AppDriver", "CancelWatch"]


class CancelWatch:
    """The generation call a cancel is placed at: set by the provider's handler when it comes."""

    def __init__(self) -> None:
        self.came = threading.Event()
        self.request: Optional[RecordedRequest] = None

    def note(self, request: RecordedRequest) -> None:
        if not self.came.is_set():
            self.request = request
            self.came.set()


class AppDriver(SubjectDriver):
    """Runs one call of the application's function; cancels its task where ``cancel`` is given."""

    what = "application function"
    label = "conformance app"
    outcome: Outcome

    def __init__(
        self,
        name: str,
        provider: Any,
        app: Callable[[], Any],
        *,
        timeout: float,
        cancel: Optional[CancelWatch] = None,
    ) -> None:
        super().__init__(
            name, provider, lambda url: app, timeout=timeout, timed=cancel is not None, outcome=Outcome()
        )
        self.cancel = cancel
        self.generation: Optional[RecordedRequest] = None

    def keep(self, result: Any) -> None:
        self.outcome.response = result

    def watched_request(self) -> Optional[RecordedRequest]:
        return self.generation

    async def drive(self, app: Any) -> None:
        if self.cancel is not None:
            await self._cancelled(app)
            return
        result = await self.call(app, app)
        if inspect.isawaitable(result):
            result = await result
        self.ended(None, result)

    async def _cancelled(self, app: Any) -> None:
        watch = self.cancel
        assert watch is not None
        if not is_async(app):
            raise TypeError(
                f"a cancel script cancels the application's task: {app!r} must be a coroutine "
                "function (async def), as only a task can be cancelled"
            )
        work: asyncio.Future[Any] = asyncio.ensure_future(app())
        came = asyncio.ensure_future(self.in_thread(watch.came.wait, self.timeout, track=False))
        await asyncio.wait({work, came}, return_when=asyncio.FIRST_COMPLETED)
        request = watch.request
        if not work.done() and request is not None:
            self.generation = request
            # A stream is cancelled once its first chunk is out; a whole reply never comes.
            flushed = asyncio.ensure_future(request.wait_flushed_async(1, ABORT_DELAY))
            await asyncio.wait({work, flushed}, return_when=asyncio.FIRST_COMPLETED)
            flushed.cancel()
            if not work.done():
                self.outcome.abort_at = time.monotonic()
                work.cancel()
        came.cancel()
        try:
            result = await work
        except BaseException as exc:  # noqa: BLE001 - CancelledError, or what the application made of it
            self.ended(exc)
        else:
            self.ended(None, result)
