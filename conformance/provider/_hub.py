"""The state the connections of one provider share: settings, the record, the script.

Strategy: everything here is touched from two sides. The provider's loop thread
records requests, marks them closed and asks for replies; the test's threads (and
event loops) read the record and wait on it. One lock guards the record; waiting is
a :class:`threading.Condition` for sync callers and one-shot wake-up callbacks for
async callers on any event loop, so neither side polls. Recording costs the hot path
an append and, only when someone waits, a notify.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Awaitable as _Awaitable
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Deque, List, Optional, Set, TypeVar, Union

from .replies import WATCH, DropReply, HangReply, JsonReply, RecordedRequest, Reply, StreamReply

if TYPE_CHECKING:
    import asyncio

__all__ = ["Hub", "REPLY_TYPES"]

REPLY_TYPES = (JsonReply, StreamReply, HangReply, DropReply)

T = TypeVar("T")


def error_reply(status: int, message: str, kind: str) -> JsonReply:
    """A JSON error in the OpenAI-like shape most clients can at least print."""
    return JsonReply({"error": {"message": message, "type": kind}}, status=status)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Hub:
    """What every connection of one provider reads and writes."""

    def __init__(
        self,
        *,
        http2_only: bool,
        max_header_bytes: int,
        max_body_bytes: int,
        header_timeout: float,
        body_idle_timeout: float = 30.0,
        body_timeout: float = 300.0,
        max_requests: Optional[int] = None,
    ) -> None:
        self.http2_only = http2_only
        self.max_header_bytes = max_header_bytes
        self.max_body_bytes = max_body_bytes
        self.header_timeout = header_timeout
        self.body_idle_timeout = body_idle_timeout
        self.body_timeout = body_timeout
        self.max_requests = max_requests
        #: Requests the max_requests cap dropped from the record, oldest first.
        self.dropped = 0
        #: Set once the provider is closed: waits end at once instead of timing out.
        self.closed = False
        #: The sync reply handler running on the loop right now, for close() to name.
        self.running: Any = None
        self.script: Union[Reply, Callable[[RecordedRequest], Any], None] = None
        self.errors: List[BaseException] = []
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        #: Connections (protocol objects) and tasks alive on the loop, for shutdown.
        self.connections: Set[Any] = set()
        self.tasks: Set[asyncio.Task[Any]] = set()
        self.shutting_down = False
        # The hot path takes the plain lock (a C-level context manager); waiters use
        # the condition built on it.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._requests: Deque[RecordedRequest] = deque()
        self._cursor = 0
        #: How many of the oldest requests are done with numbering (see number_events).
        self._settled = 0
        self._sync_waiting = 0
        self._wakers: List[Callable[[], None]] = []
        # One encoded reply is kept per protocol, keyed by the reply's identity:
        # a scripted reply object is usually answered many times over.
        self.h1_cache: Any = (None, None)
        self.h2_cache: Any = (None, None)
        self.h2_stream_cache: Any = (None, None)
        self.h1_stream_cache: Any = (None, None, None)
        #: The last HTTP/1.1 head that parsed cleanly, and what was read from it.
        self.h1_head: Any = None
        self._h2_available: Optional[bool] = None
        #: The next provider-wide event sequence number (see :meth:`number_events`).
        self.next_seq = 0

    def h2_available(self) -> bool:
        """Whether the h2 package can be imported (looked up once, not imported)."""
        if self._h2_available is None:
            import importlib.util

            self._h2_available = importlib.util.find_spec("h2") is not None
        return self._h2_available

    # -- the record -----------------------------------------------------------

    def record(self, request: RecordedRequest) -> None:
        """Append a request to the record and wake whoever waits."""
        with self._lock:
            requests = self._requests
            requests.append(request)
            if self.max_requests is not None and len(requests) > self.max_requests:
                requests.popleft()
                self.dropped += 1
                if self._cursor:
                    self._cursor -= 1
                if self._settled:
                    self._settled -= 1
            if self._sync_waiting:
                self._cond.notify_all()
            wakers = self._wakers
            if wakers:
                self._wakers = []
        if wakers:
            for wake in wakers:
                wake()

    def number_events(self) -> None:
        """Give every event that went out and has no number yet the next one, in flush order.

        Numbers are handed out lazily, when someone reads an event log, but in the
        order the events were flushed (ties by arrival, then position), so they are
        monotonic across the provider and an event keeps its number once it has one.
        The requests before ``_settled`` had ended and were numbered in full when last
        looked at: nothing more of theirs can come, so the next look starts after them.
        """
        with self._lock:
            requests = self._requests
            pending = []
            settled = self._settled
            for arrival in range(settled, len(requests)):
                request = requests[arrival]
                log = request.response
                if log is None or log.complete():
                    if arrival == settled and log is not None and request._end is not None:
                        settled += 1
                    continue
                sent = log.sent()
                seqs = request._seqs
                if not isinstance(seqs, list):
                    request._seqs = seqs = []
                for index in range(len(seqs), len(sent)):
                    pending.append((sent[index][2], arrival, index, seqs))
            self._settled = settled
            pending.sort(key=lambda item: item[:3])
            for _, _, _, seqs in pending:
                seqs.append(self.next_seq)
                self.next_seq += 1

    def mark_closed(self, request: RecordedRequest) -> None:
        """Mark that the client left this request's connection (or stream)."""
        if not request.closed:
            request.mark_closed()
            self.notify()

    def notify(self) -> None:
        """Wake the waiters so they check their condition again."""
        with self._lock:
            if self._sync_waiting:
                self._cond.notify_all()
            wakers = self._wakers
            if wakers:
                self._wakers = []
        if wakers:
            for wake in wakers:
                wake()

    def clear(self) -> int:
        """Empty the record (and next_request's place in it); returns how many it held."""
        with self._lock:
            count = len(self._requests)
            self._requests.clear()
            self._cursor = 0
            self._settled = 0
        return count

    def close(self) -> None:
        """No request can come any more: wake every waiter so it can say so."""
        self.closed = True
        self.notify()
        WATCH.notify()  # wait_flushed callers: a response under way goes no further

    def snapshot(self) -> List[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    def count(self) -> int:
        with self._cond:
            return len(self._requests)

    def take_next(self) -> Optional[RecordedRequest]:
        """The next request not yet handed out; call with the lock held."""
        if self._cursor < len(self._requests):
            request = self._requests[self._cursor]
            self._cursor += 1
            return request
        return None

    def latest_if_closed(self) -> Optional[RecordedRequest]:
        """The most recent request if its client has left; call with the lock held."""
        if self._requests and self._requests[-1].closed:
            return self._requests[-1]
        return None

    def wait(self, check: Callable[[], Optional[T]], timeout: float) -> Optional[T]:
        """Block until ``check()`` (run under the lock) returns a value, or time out."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._cond:
            while True:
                found = check()
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    return None
                self._sync_waiting += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._sync_waiting -= 1

    async def wait_async(self, check: Callable[[], Optional[T]], timeout: float) -> Optional[T]:
        """Like :meth:`wait`, without blocking the caller's event loop (any loop)."""
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            future: asyncio.Future[None] = loop.create_future()

            def wake(future: asyncio.Future[None] = future) -> None:
                try:
                    loop.call_soon_threadsafe(_resolve, future)
                except RuntimeError:  # the waiting loop is closed: nobody to wake
                    pass

            with self._cond:
                found = check()
                if found is not None or self.closed:
                    return found
                self._wakers.append(wake)
            try:
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    await asyncio.wait((future,), timeout=remaining)
            finally:
                with self._cond:
                    if wake in self._wakers:
                        self._wakers.remove(wake)
            if time.monotonic() >= deadline:
                with self._cond:
                    return check()

    # -- the script -----------------------------------------------------------

    def resolve(self, request: RecordedRequest) -> Union[Reply, Awaitable[Reply]]:
        """The reply for a request, or an awaitable of it; never raises.

        A sync handler is called right here, on the loop (a thread hop per request
        would cost more than most handlers, and the loop's order is the arrival
        order): one that blocks holds up every connection, which close() reports.
        What a handler does wrong
        (raises, returns something that is not a reply) becomes a 500 that says so.
        """
        script = self.script
        if isinstance(script, REPLY_TYPES):
            return script
        if script is None:
            return error_reply(
                501,
                f"no reply scripted for {request.method} {request.target}; "
                "call provider.reply(...) first",
                "conformance_no_reply",
            )
        self.running = script
        try:
            result = script(request)
        except Exception as exc:  # a test's handler: report, never crash the loop
            return self.handler_failed(exc)
        finally:
            self.running = None
        if isinstance(result, REPLY_TYPES):
            return result
        if isinstance(result, _Awaitable):  # not inspect: it is slow to import
            return self._finish(result)
        return self.not_a_reply(result)

    async def _finish(self, awaitable: Awaitable[Any]) -> Reply:
        try:
            result = await awaitable
        except Exception as exc:
            return self.handler_failed(exc)
        if isinstance(result, REPLY_TYPES):
            return result
        return self.not_a_reply(result)

    def handler_failed(self, exc: BaseException) -> JsonReply:
        self.errors.append(exc)
        return error_reply(
            500, f"the provider's reply handler raised {_describe(exc)}", "conformance_handler_error"
        )

    def not_a_reply(self, result: object) -> JsonReply:
        self.errors.append(
            TypeError(f"reply handler returned {type(result).__name__}, not a reply")
        )
        return error_reply(
            500,
            f"the provider's reply handler returned {type(result).__name__}; "
            "expected JsonReply, StreamReply, HangReply or DropReply",
            "conformance_handler_error",
        )

    def encoding_failed(self, exc: BaseException) -> JsonReply:
        self.errors.append(exc)
        return error_reply(
            500, f"the reply could not be encoded: {_describe(exc)}", "conformance_handler_error"
        )

    # -- tasks on the loop ----------------------------------------------------

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run a coroutine on the provider's loop, tracked so that close() can cancel it."""
        assert self.loop is not None
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled():
            exc = task.exception()
            if exc is not None:  # a bug of ours; keep it where a test can see it
                self.errors.append(exc)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
