"""Honouring an abort: race async work against the signal, cut a blocking read short.

Strategy: a backend honours ``request.signal`` in one of two ways. Async code races
each await against ``signal.wait()`` and cancels the losing work, which makes an
httpx- or aiohttp-based client close its connection as it unwinds
(:func:`race_abort`, :func:`race_abort_iter`). Sync code is blocked in ``recv`` on a
socket, where nothing but the socket itself can wake it; the abort callback runs in
the aborting thread and shuts the socket down there (:func:`shutdown_on_abort`).
Both then raise the signal's reason, the very object the caller aborted with.

asyncio is imported inside the async helpers, so sync users never pay for it.
"""

from __future__ import annotations

import socket
from contextlib import contextmanager
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Iterable,
    Iterator,
    Optional,
    TypeVar,
    Union,
)

from .contract import AbortSignal

if TYPE_CHECKING:
    pass

__all__ = ["race_abort", "race_abort_iter", "shutdown_on_abort", "shutdown_socket"]

T = TypeVar("T")


async def race_abort(awaitable: Awaitable[T], signal: Optional[AbortSignal]) -> T:
    """Await ``awaitable`` unless ``signal`` fires first: then cancel it and raise the reason.

    The reason raised is the very object the caller aborted with. The work is awaited
    in the caller's own task, and the abort cancels that task at the point it waits,
    so the work unwinds (an httpx- or aiohttp-based client closes its connection as it
    does) before the reason is raised. Cancelling the caller's own task propagates
    ``CancelledError`` unchanged. With ``signal=None`` this is a plain ``await``.

    No second task is made: an SDK's async generator stepped from another task, and
    cancelled before that task ever ran, is left "already running" and cannot be
    closed; awaited here, it unwinds as it would without the race.
    """
    import asyncio

    if signal is None:
        return await awaitable
    if signal.aborted:
        # Never started, so nothing to unwind; close a coroutine so it is not left unawaited.
        close = getattr(awaitable, "close", None)
        if callable(close):
            close()
        signal.raise_reason()
    task = asyncio.current_task()
    if task is None:  # not in a task: nothing to cancel at the abort
        return await awaitable
    loop = asyncio.get_running_loop()
    state = {"waiting": True, "cancelled": False}

    def cancel() -> None:
        # On the loop, so the task is certainly still at this await or has left it.
        if state["waiting"] and not task.done():
            state["cancelled"] = True
            task.cancel()

    def on_abort(_reason: BaseException) -> None:
        try:
            loop.call_soon_threadsafe(cancel)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    unregister = signal.add_callback(on_abort)
    try:
        return await awaitable
    except asyncio.CancelledError:
        if not state["cancelled"]:
            raise  # the caller's own cancellation
        uncancel = getattr(task, "uncancel", None)
        if callable(uncancel):  # Python 3.11+: this cancellation was ours, not the caller's
            uncancel()
        signal.raise_reason()
    finally:
        state["waiting"] = False
        unregister()


async def race_abort_iter(iterable: AsyncIterable[T], signal: Optional[AbortSignal]) -> AsyncIterator[T]:
    """Yield from ``iterable`` until it ends or ``signal`` fires, then raise the reason.

    Each step is raced with :func:`race_abort`, so an abort while the stream waits
    for its next event cancels that wait. The iterator is closed with ``aclose()``
    when it has one, whichever way the loop ends::

        async for event in race_abort_iter(sdk_stream, request.signal):
            yield to_chunk(event)
    """
    iterator = iterable.__aiter__()
    try:
        while True:
            try:
                item = await race_abort(iterator.__anext__(), signal)
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose: Any = getattr(iterator, "aclose", None)
        if callable(aclose):
            await aclose()


def shutdown_socket(sock: socket.socket) -> None:
    """Shut ``sock`` down both ways, from any thread; a socket already closed is left be.

    ``shutdown`` wakes a ``recv`` blocked in another thread and sends the FIN, so the
    provider sees the connection end at once. ``close`` from another thread does
    neither: it only releases the file descriptor.
    """
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # not connected any more, or closed: nothing left to cut
        pass


@contextmanager
def shutdown_on_abort(
    signal: Optional[AbortSignal], sockets: Union[socket.socket, Iterable[socket.socket]]
) -> Iterator[None]:
    """Within the block, an abort shuts ``sockets`` down, and the block raises the reason.

    ``sockets`` is one socket or a collection read at the moment of the abort, so a
    set the backend adds each new connection to works. The shutdown runs in the
    aborting thread and wakes the ``recv`` the block is blocked in; whatever the
    cut read then raises (a reset, an incomplete read) is replaced by the signal's
    reason, and a block that ends normally after the abort raises it too::

        with shutdown_on_abort(request.signal, self.sockets):
            response = self.session.post(url, json=body)
            return parse(response)

    In a generator, wrap the loop that yields; closing the generator early is not
    an abort and passes through unchanged. With ``signal=None`` nothing is done.
    """
    if signal is None:
        yield
        return

    def cut(_reason: BaseException) -> None:
        for sock in [sockets] if isinstance(sockets, socket.socket) else list(sockets):
            shutdown_socket(sock)

    unregister = signal.add_callback(cut)
    try:
        yield
    except Exception:
        if signal.aborted:
            signal.raise_reason()
        raise
    finally:
        unregister()
    if signal.aborted:
        signal.raise_reason()
