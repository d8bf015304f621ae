"""Driving one backend through one case: a worker thread with an event loop of its own.

Strategy: the driver serves sync and async backends alike. Async calls run on the
worker's loop; sync calls run in a daemon thread of their own (so a sync backend
that runs ``asyncio.run`` inside still works, and one that hangs holds only that
thread), and the caller's thread stays free to enforce the case's time bound.
Whether a backend is async is decided by what its call gives back (an awaitable,
an async iterator), not by how the function is declared.

Abort and cancel fire on events, not after a delay: when the provider has the
generation request and, in stream mode, the backend has yielded its first chunk.
The connection is then watched while the backend is still alive and unclosed, on
its own running loop, because closing the socket in ``close()`` or at loop
teardown is too late for an application whose backend and loop live on.

Whatever the backend returned, yielded or raised is gathered into an
:class:`Outcome` for the checks. After the provider has closed, :meth:`Driver.reclaim`
waits for the worker and the backend's threads to end, and says what it could not
reclaim.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, List, Optional, Tuple

from ._bounds import ABORT_CLOSE_WITHIN, ABORT_DELAY, ABORT_RAISE_WITHIN, RECLAIM_WITHIN, ConformanceAbort
from ._stall import WATCH
from .contract import AbortController, ChatRequest
from .fixture import conformance_request
from .provider import RecordedRequest

if TYPE_CHECKING:
    from .cases import ConformanceCase

__all__ = ["ABORT_CLOSE_WITHIN", "ABORT_DELAY", "ABORT_RAISE_WITHIN", "ConformanceAbort", "Driver", "Outcome"]


@dataclass
class Outcome:
    """What a backend did in one case."""

    response: Any = None
    chunks: List[Any] = field(default_factory=list)
    error: Optional[BaseException] = None
    error_at: Optional[float] = None
    abort_at: Optional[float] = None
    abort_reason: Optional[BaseException] = None
    skipped: Optional[str] = None
    #: The backend returned or raised (as opposed to still running at the bound).
    ended: bool = False
    hung: bool = False
    #: Seconds the case waited before it gave up on a hung backend.
    waited: float = 0.0
    close_error: Optional[BaseException] = None
    #: Seconds from the abort (or cancellation) until the provider saw the close,
    #: observed while the backend was alive; ``None`` where it did not come in time.
    closed_after: Optional[float] = None
    #: What the case could not reclaim once the provider closed, in words.
    left_behind: Optional[str] = None
    #: Seconds between the abort and the backend's error in which this whole process
    #: could not run (``conformance._stall``): not counted against the bound.
    stalled_after_abort: float = 0.0


def _default_chat(backend: Any, request: ChatRequest) -> Any:
    return backend.chat(request)


def _default_stream(backend: Any, request: ChatRequest) -> Any:
    return backend.chat_stream(request)


def _is_async(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)


def _is_async_result(result: Any) -> bool:
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
    return closed_after(request, abort_at)


def wait_closed_within(request: RecordedRequest, abort_at: float) -> None:
    """Block until the provider saw ``request`` closed, or :data:`ABORT_CLOSE_WITHIN` passed.

    The bound is stretched by what stalled the whole process meanwhile
    (:mod:`conformance._stall`), read once the watch has run past each moment asked
    about: a stall that just ended is on record before the bound is judged over.
    """
    while not request.closed:
        now = time.monotonic()
        left = abort_at + ABORT_CLOSE_WITHIN + WATCH.between(abort_at, now) - now
        if left <= 0:
            return
        request.wait_closed(left)


def closed_after(request: Optional[RecordedRequest], abort_at: float) -> Optional[float]:
    """Seconds from the abort until the provider saw ``request`` closed, if within the bound."""
    if request is None or request.closed_at is None:
        return None
    after = request.closed_at - abort_at
    if after > ABORT_CLOSE_WITHIN + WATCH.between(abort_at, request.closed_at):
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
    worker: Optional[threading.Thread],
    loop: Optional[asyncio.AbstractEventLoop],
    threads: List[threading.Thread],
    what: str,
    on_stop: Callable[[], None],
) -> Optional[str]:
    """Once the provider has closed: wait, bounded, for what the ``what`` (backend, loop) left running.

    Closing the provider ends every connection, so whatever was blocked on one wakes
    up. An event loop still stuck after that is stopped (``on_stop`` runs first); one
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
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


class Driver:
    """Runs one case's backend in a worker thread with a loop of its own."""

    def __init__(self, case: ConformanceCase, provider: Any, variant: str = "") -> None:
        self.case = case
        self.provider = provider
        self.variant = variant
        self.outcome = Outcome()
        self.controller = AbortController()
        #: Set once ``_main`` is over: the outcome is decided and the backend closed.
        self.finished = threading.Event()
        #: Set by the first chunk the backend yields, and when it ends.
        self.progress = threading.Event()
        self.gave_up = False
        self.abandoned = False
        self.lock = threading.Lock()
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.task: Optional[asyncio.Task[Any]] = None
        self.worker: Optional[threading.Thread] = None
        self.threads: List[threading.Thread] = []
        self.generation: Optional[RecordedRequest] = None

    # -- the caller's side ----------------------------------------------------------------------

    def run(self) -> Outcome:
        if self.case.scenario not in ("abort", "cancel"):
            return self._run()
        # The abort and cancel bounds do not count what stalled the whole process.
        with WATCH:
            outcome = self._run()
            outcome.stalled_after_abort = WATCH.between(outcome.abort_at, outcome.error_at)
        return outcome

    def _run(self) -> Outcome:
        started = time.monotonic()
        timeout = self.case.target.timeout
        self.worker = threading.Thread(target=self._work, name=f"conformance {self.case.name}", daemon=True)
        aborter: Optional[threading.Thread] = None
        if self.case.scenario == "abort":
            aborter = threading.Thread(target=self._abort, name="conformance abort", daemon=True)
        self.worker.start()
        if aborter is not None:
            aborter.start()
        if not self.finished.wait(timeout):
            with self.lock:
                # Past the bound, whatever the backend does next is not its answer.
                self.gave_up = True
                ended = self.outcome.ended
            if ended:
                self.outcome.close_error = TimeoutError(
                    f"close() was still running {time.monotonic() - started:.1f} s after the case began"
                )
            else:
                self.outcome.hung = True
                self.outcome.waited = time.monotonic() - started
                self._note_close()
            self._cancel_worker()
            self.finished.wait(RECLAIM_WITHIN)
        if aborter is not None:
            aborter.join(timeout)
        return self.outcome

    def reclaim(self) -> None:
        """Once the provider has closed: wait for what the backend left running, bounded.

        Closing the provider ends every connection, so a backend blocked on one wakes
        up. A loop still stuck after that is stopped; a thread that cannot be stopped
        is named in :attr:`Outcome.left_behind`.
        """

        def stop() -> None:
            self.abandoned = True

        self.outcome.left_behind = reclaim(self.worker, self.loop, self.threads, "backend", stop)

    def _cancel_worker(self) -> None:
        loop, task = self.loop, self.task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop finished in the meantime
                pass

    def _note_close(self) -> None:
        abort_at = self.outcome.abort_at
        if abort_at is not None:
            self.outcome.closed_after = closed_after(self.generation, abort_at)

    def _ended(self, error: Optional[BaseException]) -> None:
        with self.lock:
            if self.outcome.ended or self.gave_up:
                return
            self.outcome.ended = True
            self.outcome.error = error
            self.outcome.error_at = time.monotonic() if error is not None else None
        self.progress.set()

    def _chunk(self, chunk: Any) -> None:
        self.outcome.chunks.append(chunk)
        self.progress.set()

    # -- abort ----------------------------------------------------------------------------------

    def _abort(self) -> None:
        request = self._await_generation_sync()
        if request is None:
            return
        self.generation = request
        if self.case.mode == "stream":
            self.progress.wait(ABORT_DELAY)
        if self.outcome.ended or self.finished.is_set():
            return
        reason = ConformanceAbort(f"aborted by the conformance case {self.case.name}")
        self.outcome.abort_reason = reason
        self.outcome.abort_at = time.monotonic()
        self.controller.abort(reason)

    def _await_generation_sync(self) -> Optional[RecordedRequest]:
        # Short waits, so the thread stops as soon as the backend is done without a call.
        deadline = time.monotonic() + self.case.target.timeout
        while not self.finished.is_set() and not self.outcome.ended and time.monotonic() < deadline:
            try:
                request: RecordedRequest = self.provider.next_request(0.05)
            except TimeoutError:
                continue
            if self.case.target.wire.is_generation(request):
                return request
        return None

    # -- the worker's loop ----------------------------------------------------------------------

    def _work(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        # Sync backends block their own threads, not this loop; stay quiet under -X dev.
        loop.slow_callback_duration = 1.0
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # noqa: BLE001 - a broken backend must not kill the thread
            self._ended(exc)
        finally:
            try:
                if not self.abandoned:
                    wind_down(loop)
            except BaseException:  # noqa: BLE001 - stopped by reclaim(): close what can be closed
                pass
            finally:
                close_loop(loop)
                self.finished.set()

    async def _main(self) -> None:
        self.task = asyncio.current_task()
        target = self.case.target
        backend = None
        try:
            backend = target.create_backend(self.provider.url)
            if inspect.isawaitable(backend):
                backend = await backend
            if self.case.scenario in ("tool-result", "parallel-tool-calls"):
                from ._multiturn import multi_turn_request

                request = multi_turn_request(
                    target.wire, self.case.scenario, self.variant, target.model, self.controller.signal
                )
            else:
                request = conformance_request(target.model, signal=self.controller.signal)
            if self.case.scenario == "cancel":
                await self._cancel(backend, request)
            else:
                await self._call(backend, request)
                self._ended(None)
        except BaseException as exc:  # noqa: BLE001 - whatever the backend raised is the outcome
            self._ended(exc)
        finally:
            try:
                if self.outcome.abort_at is not None and not self.gave_up:
                    await self._observe_close()
            finally:
                if backend is not None:
                    await self._close(backend)
                self.finished.set()

    async def _observe_close(self) -> None:
        """Watch the connection from the abort on, while the backend is alive and unclosed."""
        abort_at = self.outcome.abort_at
        assert abort_at is not None
        # A blocking wait in a thread of its own costs nothing while it waits, and
        # leaves this loop free to run whatever the backend still has going.
        self.outcome.closed_after = await observe_close(
            self.generation, abort_at, lambda *call: self._in_thread(*call, track=False)
        )

    def _in_thread(self, function: Callable[..., Any], *args: Any, track: bool = True) -> asyncio.Future[Any]:
        threads = self.threads if track else None
        return in_thread(function, *args, name="conformance sync backend", threads=threads)

    def _hook(self, backend: Any) -> Tuple[Callable[[Any, ChatRequest], Any], Any, str]:
        """The function to call for this mode, what tells whether it is async, and its name."""
        target = self.case.target
        if self.case.mode == "chat":
            if target.chat is not None:
                return target.chat, target.chat, "the target's chat hook"
            return _default_chat, getattr(backend, "chat", None), "chat"
        if target.stream is not None:
            return target.stream, target.stream, "the target's stream hook"
        return _default_stream, getattr(backend, "chat_stream", None), "chat_stream"

    async def _start(self, backend: Any, request: ChatRequest) -> Any:
        hook, probe, _ = self._hook(backend)
        if _is_async(probe):
            return hook(backend, request)
        return await self._in_thread(hook, backend, request)

    async def _call(self, backend: Any, request: ChatRequest) -> None:
        result = await self._start(backend, request)
        if self.case.mode == "chat":
            if inspect.isawaitable(result):
                result = await result
            self.outcome.response = result
            return
        if inspect.isawaitable(result) and not hasattr(result, "__aiter__"):
            result = await result
        if hasattr(result, "__aiter__"):
            async for chunk in result:
                self._chunk(chunk)
        else:
            await self._in_thread(self._drain, result)

    def _drain(self, iterable: Any) -> None:
        # Chunk by chunk, so a stream that hangs keeps what it yielded before.
        for chunk in iterable:
            self._chunk(chunk)

    # -- cancel ---------------------------------------------------------------------------------

    def _skip_sync(self, why: str) -> None:
        self.outcome.skipped = f"cancel applies to async backends only: {why}"
        self._ended(None)

    async def _cancel(self, backend: Any, request: ChatRequest) -> None:
        hook, probe, name = self._hook(backend)
        waiting = asyncio.ensure_future(self._await_generation_async())
        try:
            if inspect.isgeneratorfunction(probe):
                return self._skip_sync(f"{name} is a generator function (it returns a sync iterator)")
            if _is_async(probe):
                result = hook(backend, request)
            else:
                # A plain function may hand back an awaitable or an async iterator (then
                # the backend is async in all but name), or do the blocking work itself.
                call = asyncio.ensure_future(self._in_thread(hook, backend, request))
                await asyncio.wait({call, waiting}, return_when=asyncio.FIRST_COMPLETED)
                if not call.done():
                    # Let a sync backend that honours the signal go; the case is not for it.
                    self.controller.abort(ConformanceAbort("the cancel case skipped a sync backend"))
                    return self._skip_sync(
                        f"{name} blocked its thread on the request instead of returning an awaitable"
                    )
                result = call.result()
                if not _is_async_result(result):
                    return self._skip_sync(
                        f"{name} returned {type(result).__name__}, not an awaitable or async iterator"
                    )
            await self._cancel_running(result, waiting)
        finally:
            waiting.cancel()

    async def _cancel_running(self, result: Any, waiting: asyncio.Future[Optional[RecordedRequest]]) -> None:
        first = asyncio.Event()
        if self.case.mode == "chat" or not hasattr(result, "__aiter__"):

            async def settle() -> Any:
                value = await result
                if hasattr(value, "__aiter__"):  # an awaitable that gives the stream
                    await consume(value)
                return value

            async def consume(stream: Any) -> None:
                async for chunk in stream:
                    self._chunk(chunk)
                    first.set()

            work: asyncio.Future[Any] = asyncio.ensure_future(settle())
        else:

            async def consume_result() -> None:
                async for chunk in result:
                    self._chunk(chunk)
                    first.set()

            work = asyncio.ensure_future(consume_result())
        await asyncio.wait({work, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done() and waiting.done():
            self.generation = waiting.result()
            if self.case.mode == "stream":
                yielded = asyncio.ensure_future(first.wait())
                await asyncio.wait({work, yielded}, timeout=ABORT_DELAY, return_when=asyncio.FIRST_COMPLETED)
                yielded.cancel()
            if not work.done():
                self.outcome.abort_at = time.monotonic()
                work.cancel()
        try:
            await work
        except BaseException as exc:  # noqa: BLE001 - CancelledError or what wrapped it
            self._ended(exc)
        else:
            self._ended(None)

    async def _await_generation_async(self) -> Optional[RecordedRequest]:
        deadline = time.monotonic() + self.case.target.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                request: RecordedRequest = await self.provider.next_request_async(left)
            except TimeoutError:
                return None
            if self.case.target.wire.is_generation(request):
                return request

    async def _close(self, backend: Any) -> None:
        self.outcome.close_error = await close_quietly(backend)
