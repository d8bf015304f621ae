"""The threads and event loops a case runs its subject in, and how it gets them back.

Strategy: a subject (a backend, an agent loop) runs on an event loop the case makes
for it, in a thread of its own; a sync call runs in a daemon thread of its own
(:func:`in_thread`), so one that calls ``asyncio.run`` inside still works and one that
hangs holds only that thread. Once the provider has closed, :func:`reclaim` waits,
bounded, for all of them, stops a loop still stuck, and releases the descriptors of
one whose thread a blocking call holds (:func:`release_loop`), saying in words what it
could not get back. The close the contract asks for on abort is watched while the
subject still lives (:func:`observe_close`), from a thread, so that the subject's own
loop stays free. Both drivers use these through the one outline (``_outline``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import queue
import threading
import time
import weakref
from typing import Any, Awaitable, Callable, Iterator, List, Optional, Tuple

from ._bounds import ABORT_CLOSE_WITHIN, RECLAIM_WITHIN
from ._stall import WATCH
from .provider import RecordedRequest

__all__ = [
    "LoopRun",
    "SubjectLoop",
    "close_loop",
    "close_quietly",
    "closed_after",
    "in_thread",
    "is_async",
    "is_async_result",
    "give_back",
    "kept_loops",
    "observe_close",
    "reclaim",
    "release_loop",
    "subject_loop",
    "wait_closed_within",
    "wind_down",
]


def is_async(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)


def is_async_result(result: Any) -> bool:
    return inspect.isawaitable(result) or hasattr(result, "__aiter__")


def in_thread(
    function: Callable[..., Any],
    *args: Any,
    name: str,
    threads: Optional[List[threading.Thread]] = None,
) -> asyncio.Future[Any]:
    """Call a sync function in a daemon thread of its own; the future settles on the running loop.

    Sync backends and loops run off the event loop, so one that calls ``asyncio.run``
    inside (a common sync wrapper) still works, and one that hangs holds only its own
    thread. ``threads`` collects the thread, for :func:`reclaim` to wait on.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: Optional[BaseException]) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
            # Read at once, not in a done callback: where the case gave up and its loop
            # is winding down, a callback scheduled now may never run, and asyncio would
            # log the error as never retrieved. Awaiting the future still raises it.
            future.exception()
        else:
            future.set_result(result)

    def work() -> None:
        result, error = None, None
        try:
            result = function(*args)
        except BaseException as exc:  # noqa: BLE001 - handed over to the awaiting side
            error = exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the case gave up and its loop is gone
            pass

    thread = threading.Thread(target=work, name=name, daemon=True)
    if threads is not None:
        threads.append(thread)
    thread.start()
    return future


async def observe_close(
    request: Optional[RecordedRequest],
    abort_at: float,
    wait: Callable[..., Awaitable[Any]],
) -> Optional[float]:
    """Watch ``request`` from the abort on; the seconds until the provider saw it closed.

    ``wait(function, *args)`` calls the blocking :func:`wait_closed_within` elsewhere
    than the running loop, which stays free for whatever the backend or loop still has
    going. ``None`` where no close came within the bound.
    """
    if request is not None and not request.closed:
        await wait(wait_closed_within, request, abort_at)
    closed_at = request.closed_at if request is not None else None
    if closed_at is not None and closed_at - abort_at > ABORT_CLOSE_WITHIN:
        # A late close is judged with the stall watch, which may wait for its next tick.
        return await wait(closed_after, request, abort_at)  # type: ignore[no-any-return]
    return closed_after(request, abort_at)


def wait_closed_within(request: RecordedRequest, abort_at: float) -> None:
    """Block until the provider saw ``request`` closed, or :data:`ABORT_CLOSE_WITHIN` passed.

    The bound is stretched by what stalled the whole process meanwhile
    (:mod:`conformance._stall`), read once the watch has run past each moment asked
    about: a stall that just ended is on record before the bound is judged over. The
    watch is asked only once the bound as it stands has passed: reading it waits for
    its next tick, which a close that comes in time need not wait for.
    """
    while not request.closed:
        now = time.monotonic()
        left = abort_at + ABORT_CLOSE_WITHIN - now
        if left <= 0:
            left += WATCH.between(abort_at, now)
            if left <= 0:
                return
        request.wait_closed(left)


def closed_after(request: Optional[RecordedRequest], abort_at: float) -> Optional[float]:
    """Seconds from the abort until the provider saw ``request`` closed, if within the bound."""
    if request is None or request.closed_at is None:
        return None
    after = request.closed_at - abort_at
    if after > ABORT_CLOSE_WITHIN and after > ABORT_CLOSE_WITHIN + WATCH.between(abort_at, request.closed_at):
        return None
    return max(0.0, after)


async def close_quietly(subject: Any) -> Optional[BaseException]:
    """Close a backend or loop (``aclose()``, else ``close()``); what it raised, not raised."""
    try:
        aclose = getattr(subject, "aclose", None)
        close = getattr(subject, "close", None)
        if callable(aclose):
            await aclose()
        elif callable(close):
            result = close()
            if inspect.isawaitable(result):
                await result
    except BaseException as exc:  # noqa: BLE001 - reported as a problem, not raised
        return exc
    return None


def reclaim(
    worker: Optional[Any],
    loop: Optional[asyncio.AbstractEventLoop],
    threads: List[threading.Thread],
    what: str,
    on_stop: Callable[[], None],
) -> Optional[str]:
    """Once the provider has closed: wait, bounded, for what the ``what`` (backend, loop) left running.

    ``worker`` is what runs the loop: a thread, or a :class:`SubjectLoop`'s run (anything
    with ``join(timeout)`` and ``is_alive()``). Closing the provider ends every
    connection, so whatever was blocked on one wakes up. An event loop still stuck after
    that is stopped (``on_stop`` runs first); one
    that cannot be stopped (a blocking call the ``what`` made on it holds its thread) has
    its descriptors released (:func:`release_loop`). What is left is named in the
    sentence returned, with what the ``what`` still holds; ``None`` where nothing is left.
    """
    deadline = time.monotonic() + RECLAIM_WITHIN
    released: Optional[str] = None
    if worker is not None:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive() and loop is not None:
            on_stop()
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:  # closed in the meantime
                pass
            worker.join(max(0.1, deadline - time.monotonic()))
            if worker.is_alive():
                released = release_loop(loop, what)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = []
    if worker is not None and worker.is_alive():
        left.append(
            f"the {what}'s event loop (a blocking call the {what} made on it holds its thread; "
            f"{released or 'its descriptors could not be released'})"
        )
    blocked = sum(thread.is_alive() for thread in threads)
    if blocked:
        left.append(
            f"{blocked} thread{'s' if blocked > 1 else ''} running the sync {what}'s call, with "
            "whatever sockets and files that call opened"
        )
    if not left:
        return None
    return (
        f"still running {RECLAIM_WITHIN} s after the provider closed, and left behind as daemon "
        f"threads: {'; '.join(left)}"
    )


def release_loop(loop: asyncio.AbstractEventLoop, what: str = "backend") -> Optional[str]:
    """Close the descriptors of a loop the case made, whose thread a blocking call holds.

    Such a loop cannot be closed (``close()`` refuses a running loop), yet its selector
    and its wake-up socket pair are the case's, not the ``what``'s, and would stay open
    for as long as the call blocks, which may be for ever. asyncio's selector loops keep
    them as ``_selector``, ``_ssock`` and ``_csock``; they are closed through their own
    objects, which mark themselves closed, so no descriptor number is closed twice. When
    the call returns, the loop fails at its next select and :func:`close_loop` finishes
    the close. Returns what was done and what the ``what`` still holds, in words;
    ``None`` for a loop of another kind, which is left as it is.
    """
    selector = getattr(loop, "_selector", None)
    found = [getattr(loop, name, None) for name in ("_ssock", "_csock")]
    pipe = [p for p in found if p is not None]
    if selector is None or not hasattr(selector, "get_map") or len(pipe) != len(found):
        return None
    try:
        own = {p.fileno() for p in pipe}
        held = [key.fd for key in list(selector.get_map().values()) if key.fd not in own]
    except (RuntimeError, ValueError, OSError):  # changed under us: the call just returned
        held = []
    # The blocked call is what the case reports; asyncio's debug log need not repeat it.
    loop.slow_callback_duration = float("inf")
    _RELEASED.add(loop)
    for item in (*pipe, selector):
        try:
            item.close()
        except OSError:
            pass
    if held:
        holds = (
            f"the {what} still holds {len(held)} socket{'s' if len(held) > 1 else ''} it watched "
            "on that loop (its own connections, which only it can close)"
        )
    else:
        holds = f"the {what} watched no socket of its own on it"
    return (
        f"the case closed that event loop's selector and wake-up sockets; {holds}, and whatever its "
        "blocked call keeps open (a connection it was closing closes only once the loop runs again)"
    )


#: The loops :func:`release_loop` took the descriptors of: nothing more runs on them.
_RELEASED: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close a loop the case made, also one whose descriptors :func:`release_loop` closed."""
    if loop in _RELEASED and isinstance(loop, asyncio.BaseEventLoop) and not loop.is_running():
        # The selector is closed, so the selector loop's own close would fail before it
        # marks the loop closed; the base close does that, and frees the rest.
        asyncio.BaseEventLoop.close(loop)
        return
    loop.close()


def wind_down(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what still runs on ``loop``, then close its async generators and its executor.

    The executor's shutdown waits for threads a backend or loop started; the provider's
    close ends them. A loop :func:`release_loop` released can run nothing more, and is
    left to :func:`close_loop`.
    """
    if loop in _RELEASED:
        return
    _cancel_all(loop)
    # Each shutdown is a run of the loop of its own, about a tenth of a bare case: skipped
    # where the loop has nothing for it (asyncio's selector loops say so; another kind of
    # loop is always shut down).
    if getattr(loop, "_asyncgens", True):
        loop.run_until_complete(loop.shutdown_asyncgens())
    if getattr(loop, "_default_executor", True) is not None:
        loop.run_until_complete(loop.shutdown_default_executor())


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


# -- loops kept for the next case ------------------------------------------------------------


class LoopRun:
    """One run on a :class:`SubjectLoop`, waited for as a thread is (``join``, ``is_alive``)."""

    def __init__(self) -> None:
        self.over = threading.Event()

    def join(self, timeout: Optional[float] = None) -> None:
        self.over.wait(timeout)

    def is_alive(self) -> bool:
        """Whether the run is still going (the loop's thread may live on for the next one)."""
        return not self.over.is_set()


class SubjectLoop:
    """A thread with an event loop, on which one case at a time runs its subject.

    Strategy: starting a thread and an event loop for every run of a subject costs a
    quarter of a short case's own work, most of it in waiting for the thread to start
    and the loop's descriptors to open and close. Where many cases run one after
    another (a matrix, a worker process, a test class), :func:`kept_loops` keeps each
    loop for the next case, but only one the subject left as it found it: no task, no
    timer, no async generator, no executor, no descriptor of its own, no handler or
    setting changed (:meth:`tidy`). Anything else, and a loop the case gave up on, is
    closed as before, its thread ending with it; nothing of one case reaches the next.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        # Sync subjects block their own threads, not this loop; stay quiet under -X dev.
        self.loop.slow_callback_duration = 1.0
        self._debug = self.loop.get_debug()
        self._jobs: queue.SimpleQueue[Optional[Tuple[Callable[[], None], LoopRun]]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="conformance subject loop", daemon=True)
        self.thread.start()

    def run(self, job: Callable[[], None]) -> LoopRun:
        """Run ``job`` on this loop's thread; what it returns says when that run is over."""
        run = LoopRun()
        self._jobs.put((job, run))
        return run

    def _serve(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, run = item
            try:
                job()
            finally:
                run.over.set()

    def tidy(self) -> bool:
        """Cancel what the subject left on the loop; whether the loop is as it was made.

        Reads asyncio's selector loop's own records (as :func:`wind_down` and
        :func:`release_loop` do); a loop of another kind is never kept.
        """
        loop = self.loop
        _cancel_all(loop)
        if not _close_asyncgens(loop):
            return False
        selector = getattr(loop, "_selector", None)
        try:
            return (
                not loop.is_closed()
                and not loop.is_running()
                and not getattr(loop, "_asyncgens", True)
                and getattr(loop, "_default_executor", True) is None
                and not getattr(loop, "_ready", True)
                and all(timer.cancelled() for timer in getattr(loop, "_scheduled", [None]))
                and selector is not None
                and len(selector.get_map()) == 1  # the loop's own wake-up socket
                and loop.get_exception_handler() is None
                and loop.get_task_factory() is None
                and loop.get_debug() == self._debug
            )
        except (AttributeError, RuntimeError, ValueError):
            return False

    def close(self) -> None:
        """Shut what the subject left down, close the loop, and let the thread end (on this thread)."""
        try:
            wind_down(self.loop)
        finally:
            close_loop(self.loop)
            self._jobs.put(None)

    def retire(self) -> None:
        """Let the thread end without touching the loop (its run closes it, or cannot)."""
        self._jobs.put(None)


def _close_asyncgens(loop: asyncio.AbstractEventLoop) -> bool:
    """Close the async generators the subject left open, as ``shutdown_asyncgens()`` does, but
    leave the loop able to run more: whether they all closed without an error."""
    gens = getattr(loop, "_asyncgens", None)
    if gens is None:
        return False
    if not gens:
        return True
    closing = list(gens)
    gens.clear()

    async def close_all() -> List[Any]:
        return await asyncio.gather(*(gen.aclose() for gen in closing), return_exceptions=True)

    results = loop.run_until_complete(close_all())
    clean = True
    for result, gen in zip(results, closing):
        if isinstance(result, Exception):
            clean = False
            loop.call_exception_handler(
                {
                    "message": f"an error occurred during closing of asynchronous generator {gen!r}",
                    "exception": result,
                    "asyncgen": gen,
                }
            )
    return clean


class _Kept:
    """The loops :func:`kept_loops` keeps, in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.keeping = 0
        self.idle: List[SubjectLoop] = []


_KEPT = _Kept()


def subject_loop() -> SubjectLoop:
    """A loop for a subject: one kept from an earlier case where :func:`kept_loops` keeps them."""
    with _KEPT.lock:
        if _KEPT.idle:
            return _KEPT.idle.pop()
    return SubjectLoop()


def give_back(worker: SubjectLoop, clean: bool) -> None:
    """The run on ``worker`` is over: keep its loop where it is ``clean`` and loops are kept, else close it.

    Called on the worker's own thread, at the end of its run.
    """
    if clean:
        worker.loop.slow_callback_duration = 1.0
        with _KEPT.lock:
            if _KEPT.keeping:
                _KEPT.idle.append(worker)
                return
    worker.close()


@contextlib.contextmanager
def kept_loops() -> Iterator[None]:
    """Keep the subjects' event loops for the next case while this lasts; close them after.

    The stall watch is kept running meanwhile too: every case opens a window on it, and a
    watch that ended with each case's window would start a thread again for the next.
    """
    with _KEPT.lock:
        _KEPT.keeping += 1
    WATCH.start()
    try:
        yield
    finally:
        WATCH.stop()
        with _KEPT.lock:
            _KEPT.keeping -= 1
            left = _KEPT.idle if not _KEPT.keeping else []
            if left:
                _KEPT.idle = []
        for worker in left:
            worker.run(worker.close)
        deadline = time.monotonic() + RECLAIM_WITHIN
        for worker in left:
            worker.thread.join(max(0.0, deadline - time.monotonic()))
