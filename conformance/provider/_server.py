"""The fake provider: a real HTTP/1.1 and h2c server on loopback, in a thread of its own.

Strategy: the listening socket is bound in the caller's thread, so ``start()`` knows
its port and raises its errors at once, and clients may connect before the loop has
even started (the backlog holds them). One asyncio loop in a daemon thread serves
every connection; tests in any thread or event loop read the record through the
thread-safe :class:`._hub.Hub`. ``asyncio`` and the protocol modules are imported on
first start, so importing the package stays cheap; ``h2`` only when h2c is used.
"""

from __future__ import annotations

import math
import os
import socket
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Type, Union

from ..errors import ProviderInputError
from ._hub import REPLY_TYPES, Hub
from .replies import RecordedRequest, Reply

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

__all__ = ["FakeProvider", "start_fake_provider"]

_MIB = 1024 * 1024
#: How long close() waits for the loop thread; it normally takes well under 1 ms.
_JOIN_SECONDS = 5.0
#: The requests a provider keeps by default, the oldest dropped first: far more than any
#: case sends, and a bound for one that serves for days. ``max_requests=None`` keeps all.
DEFAULT_MAX_REQUESTS = 10_000


class FakeProvider:
    """A scripted HTTP server on loopback: HTTP/1.1 (and h2c), or h2c only with ``http2=True``.

    Script it with :meth:`reply`, point the code under test at :attr:`url`, then read
    :attr:`requests` or wait with :meth:`next_request` / :meth:`latest_closed`. Close it
    with :meth:`close` or use it as a (sync or async) context manager.
    """

    def __init__(
        self,
        http2: bool = False,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_header_bytes: int = 65536,
        max_body_bytes: int = 64 * _MIB,
        header_timeout: float = 30.0,
        body_idle_timeout: float = 30.0,
        body_timeout: float = 300.0,
        max_requests: Optional[int] = DEFAULT_MAX_REQUESTS,
        allow_remote: bool = False,
    ) -> None:
        if not is_loopback(host) and not allow_remote:
            raise ProviderInputError(
                f"refusing to bind {host}: the fake provider answers anyone who can reach it; "
                "pass allow_remote=True if other machines are meant to"
            )
        for name, value in (("max_header_bytes", max_header_bytes), ("max_body_bytes", max_body_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ProviderInputError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ProviderInputError(f"port must be 0-65535 (0 picks a free port), got {port!r}")
        for name, seconds in (
            ("header_timeout", header_timeout),
            ("body_idle_timeout", body_idle_timeout),
            ("body_timeout", body_timeout),
        ):
            if not _is_number(seconds) or not 0 < seconds < math.inf:
                raise ProviderInputError(f"{name} must be a positive number of seconds, got {seconds!r}")
        if max_requests is not None and (
            not isinstance(max_requests, int) or isinstance(max_requests, bool) or max_requests <= 0
        ):
            raise ProviderInputError(
                f"max_requests must be a positive int (or None: keep every request), got {max_requests!r}"
            )
        self._http2 = bool(http2)
        self._host = host
        self._port = port
        self._hub = Hub(
            http2_only=self._http2,
            max_header_bytes=max_header_bytes,
            max_body_bytes=max_body_bytes,
            header_timeout=float(header_timeout),
            body_idle_timeout=float(body_idle_timeout),
            body_timeout=float(body_timeout),
            max_requests=max_requests,
        )
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._sock: Optional[socket.socket] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Future[None]] = None
        self._server: Optional[asyncio.AbstractServer] = None
        self._thread: Optional[threading.Thread] = None
        #: Where the provider serves on a loop it shares (``_start(host)``): that serving, as a future.
        self._hosted: Optional[concurrent.futures.Future[None]] = None

    # -- life cycle ----------------------------------------------------------

    def start(self) -> FakeProvider:
        """Bind, listen and start serving; returns ``self``. A second call does nothing."""
        return self._start(None)

    def _start(self, host: Optional[asyncio.AbstractEventLoop]) -> FakeProvider:
        """:meth:`start`, on ``host`` where given: an event loop that another thread runs and
        that other providers share (the cases of a process do: ``conformance._host``).
        Everything else stays this provider's own: its socket, its hub, its tasks."""
        with self._lock:
            if self._closed:
                raise ProviderInputError("this fake provider is closed; start a new one")
            if self._started:
                return self
            if self._http2 and not self._hub.h2_available():
                raise ProviderInputError(
                    "start_fake_provider(http2=True) needs the h2 package: pip install h2"
                )
            import asyncio

            from ._http1 import H1Connection

            family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
            # proto must say TCP: asyncio turns Nagle off (TCP_NODELAY) only on sockets
            # whose proto is IPPROTO_TCP, and an accepted socket inherits the listener's.
            # With proto 0, every reply written in pieces (a stream's chunks) met the
            # client's delayed ACK: about 40 ms per streamed reply through httpx.
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                if os.name == "posix":
                    # As asyncio's own servers do: a fixed port (serve --port, a test that
                    # restarts on the port it had) binds again while connections the
                    # provider closed first linger in TIME_WAIT.
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self._host, self._port))
                sock.listen(128)
                sock.setblocking(False)
            except OSError:
                sock.close()
                raise
            loop = asyncio.new_event_loop() if host is None else host
            # In debug mode (python -X dev) moving megabytes in one callback is expected.
            loop.slow_callback_duration = max(loop.slow_callback_duration, 0.5)
            hub = self._hub
            hub.loop = loop
            self._sock = sock
            self._port = sock.getsockname()[1]
            self._loop = loop
            self._stop = loop.create_future()

            def protocol() -> H1Connection:
                return H1Connection(hub)

            if host is not None:
                self._started = True
                serving = self._serve_hosted(loop, sock, protocol)
                self._hosted = asyncio.run_coroutine_threadsafe(serving, loop)
                return self
            self._thread = threading.Thread(
                target=self._run,
                args=(loop, sock, protocol),
                name=f"fake-provider:{self._port}",
                daemon=True,
            )
            self._started = True
            self._thread.start()
        return self

    def _run(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: Callable[[], Any]) -> None:
        import asyncio

        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(loop, sock, protocol))
        finally:
            sock.close()
            asyncio.set_event_loop(None)
            loop.close()

    async def _serve_hosted(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: Callable[[], Any]
    ) -> None:
        try:
            await self._serve(loop, sock, protocol)
        finally:
            sock.close()

    async def _serve(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: Callable[[], Any]
    ) -> None:
        import asyncio

        hub = self._hub
        assert self._stop is not None
        server = self._server = await loop.create_server(protocol, sock=sock)
        try:
            await self._stop
        finally:
            hub.shutting_down = True
            # No accept after this, and the ones already taken get their transport
            # while the server is still open: closing it first made each such
            # connection fail in asyncio's own code (Server._attach asserts the server
            # is serving), which logs "Error on transport creation" in debug mode and
            # leaks the accepted socket. Attached now, each aborts at once
            # (H1Connection.connection_made, as the hub is shutting down).
            self._stop_accepting(loop)
            for _ in range(2):
                await asyncio.sleep(0)
            server.close()
            for connection in list(hub.connections):
                connection.shutdown()
            current = asyncio.current_task()
            # On a loop of its own every task is this provider's; on a shared one, only the hub's.
            mine = asyncio.all_tasks(loop) if self._hosted is None else set(hub.tasks)
            tasks = [t for t in mine if t is not current]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=1.0)
            # Aborted transports close their sockets in a callback of the next turn.
            for _ in range(10):
                if not hub.connections:
                    break
                await asyncio.sleep(0)
            # Here rather than in a run of its own: one more run of the loop costs
            # a fifth of close(). A shared loop's generators are not this provider's.
            if self._hosted is None:
                await loop.shutdown_asyncgens()

    def close(self) -> None:
        """Stop serving: close every connection and the listening socket, join the thread.

        Returns in well under a millisecond when nothing misbehaves, and only once the
        port no longer accepts and the thread has ended. If the loop is blocked (a sync
        reply handler that does not return), the thread cannot end: the listening
        socket is shut at once, so the port refuses new connections, and after a few
        seconds this raises :class:`~conformance.errors.ProviderInputError` naming the
        handler. Calling it again, once the handler has returned, finishes the close.
        """
        with self._lock:
            again = self._closed
            self._closed = True
            self._hub.close()
            if not self._started:
                return
        loop, stop, thread = self._loop, self._stop, self._thread
        if self._hosted is not None:
            assert loop is not None and stop is not None
            return self._close_hosted(loop, stop, self._hosted, again)
        assert loop is not None and stop is not None and thread is not None
        if again and not thread.is_alive():
            return
        try:
            loop.call_soon_threadsafe(self._halt, stop)
        except RuntimeError:  # the loop already ended
            pass
        if threading.current_thread() is thread:
            return  # a handler closing its own provider: the loop stops once it returns
        thread.join(_JOIN_SECONDS if not again else _JOIN_SECONDS / 5)
        if thread.is_alive():
            self._refuse_new_connections()
            thread.join(_JOIN_SECONDS / 5)
        if thread.is_alive():
            raise ProviderInputError(self._blocked())

    def _close_hosted(
        self,
        loop: asyncio.AbstractEventLoop,
        stop: asyncio.Future[None],
        hosted: concurrent.futures.Future[None],
        again: bool,
    ) -> None:
        """:meth:`close` for a provider on a shared loop: its serving ends, the loop goes on."""
        import concurrent.futures

        if again and hosted.done():
            return
        try:
            loop.call_soon_threadsafe(self._halt, stop)
        except RuntimeError:  # the shared loop already ended
            return
        if _running_loop() is loop:
            return  # a handler closing its own provider: the serving ends once it returns
        try:
            hosted.result(_JOIN_SECONDS if not again else _JOIN_SECONDS / 5)
        except concurrent.futures.CancelledError:  # the shared loop was shut down meanwhile
            pass
        except concurrent.futures.TimeoutError:
            self._refuse_new_connections()
            raise ProviderInputError(self._blocked()) from None

    def _halt(self, stop: asyncio.Future[None]) -> None:
        """On the loop: stop accepting first, then let ``_serve`` wind down.

        Queued before close() may shut the listening socket, this runs ahead of the
        accept that the shut socket wakes: no longer watched, the socket wakes no
        accept, which would otherwise fail with EINVAL and print its traceback. The
        server itself is closed by ``_serve``, once the accepts already taken are attached.
        """
        if self._loop is not None:
            self._stop_accepting(self._loop)
        _resolve(stop)

    def _stop_accepting(self, loop: asyncio.AbstractEventLoop) -> None:
        """Stop watching the listening socket: no connection is accepted after this."""
        sock = self._sock
        if sock is not None and sock.fileno() != -1:
            loop.remove_reader(sock.fileno())

    def _refuse_new_connections(self) -> None:
        """Shut the listening socket from this thread, while its loop cannot: the port then refuses."""
        sock = self._sock
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _blocked(self) -> str:
        running = self._hub.running
        if running is not None:
            name = getattr(running, "__qualname__", None) or repr(running)
            culprit = f"the reply handler {name} has not returned"
        else:
            culprit = "code on its loop (an async handler that blocks without awaiting?) has not returned"
        return (
            f"the fake provider at {self.url} could not stop within {_JOIN_SECONDS:g} s: {culprit}. "
            "Its port now refuses new connections, but its thread lives until that returns "
            "(call close() again then). Reply handlers run on the provider's loop and must not "
            "block: return a reply at once, or make the handler async and await instead of "
            "sleeping or waiting"
        )

    async def aclose(self) -> None:
        """:meth:`close` for async code (it blocks for well under a millisecond)."""
        self.close()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    async def __aenter__(self) -> FakeProvider:
        return self.start()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "serving" if self._started else "not started"
        kind = "h2c" if self._http2 else "HTTP/1.1+h2c"
        return f"<FakeProvider {kind} {self.url} {state}, {self._hub.count()} requests>"

    # -- what tests use ------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, with no trailing slash."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    @property
    def http2(self) -> bool:
        """Whether this provider speaks h2c only."""
        return self._http2

    def reply(self, reply: Union[Reply, Callable[[RecordedRequest], Any], None]) -> None:
        """Script the answer: one reply for every request, or a handler called per request.

        A handler gets the :class:`RecordedRequest` on the provider's loop and returns
        a reply or an awaitable of one. If it raises, the client gets a 500 that names
        the exception, and the exception lands in :attr:`errors`. ``None`` unscripts.
        """
        if reply is not None and not isinstance(reply, REPLY_TYPES) and not callable(reply):
            raise ProviderInputError(
                "provider.reply() takes a JsonReply, StreamReply, HangReply or DropReply, or a handler "
                f"that returns one; got {type(reply).__name__}"
            )
        self._hub.script = reply

    @property
    def requests(self) -> List[RecordedRequest]:
        """Every request so far, in arrival order (a copy)."""
        return self._hub.snapshot()

    @property
    def errors(self) -> List[BaseException]:
        """Exceptions raised by reply handlers (with their tracebacks), oldest first."""
        return list(self._hub.errors)

    @property
    def dropped_requests(self) -> int:
        """How many of the oldest requests the ``max_requests`` cap has dropped."""
        return self._hub.dropped

    def clear_requests(self) -> int:
        """Forget every recorded request; returns how many there were.

        :meth:`next_request` then waits for the next request that comes. For a
        provider that runs long (``conformance serve``), ``max_requests`` bounds the
        record without anyone having to call this.
        """
        return self._hub.clear()

    def next_request(self, timeout: float = 5.0) -> RecordedRequest:
        """The next request not yet returned by this method, waiting up to ``timeout`` s.

        Raises :class:`TimeoutError` if none came in time, and
        :class:`ProviderInputError` at once if the provider is closed and none is left.
        """
        found = self._hub.wait(self._hub.take_next, _check_timeout(timeout))
        if found is None:
            self._no_request(timeout)
        assert found is not None
        return found

    async def next_request_async(self, timeout: float = 5.0) -> RecordedRequest:
        """:meth:`next_request` for any event loop, without blocking it."""
        found = await self._hub.wait_async(self._hub.take_next, _check_timeout(timeout))
        if found is None:
            self._no_request(timeout)
        assert found is not None
        return found

    def latest_closed(self, timeout: float = 1.0) -> Optional[RecordedRequest]:
        """Wait until the client closes the latest request's connection (h2: its stream).

        Returns that request, or ``None`` if it was still open after ``timeout`` s
        (at once once the provider is closed: no client can close anything then).
        """
        return self._hub.wait(self._hub.latest_if_closed, _check_timeout(timeout))

    async def latest_closed_async(self, timeout: float = 1.0) -> Optional[RecordedRequest]:
        """:meth:`latest_closed` for any event loop, without blocking it."""
        return await self._hub.wait_async(self._hub.latest_if_closed, _check_timeout(timeout))

    def _no_request(self, timeout: float) -> None:
        count = self._hub.count()
        so_far = f"{count} request{'s' if count != 1 else ''} so far, all already returned by next_request"
        if self._hub.closed:
            raise ProviderInputError(
                f"the fake provider at {self.url} is closed: requests can no longer reach it "
                f"({so_far}); wait for requests before close(), or read provider.requests"
            )
        raise TimeoutError(
            f"no new request reached the fake provider at {self.url} within {timeout:g} s ({so_far})"
        )


def start_fake_provider(
    http2: bool = False,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_header_bytes: int = 65536,
    max_body_bytes: int = 64 * _MIB,
    header_timeout: float = 30.0,
    body_idle_timeout: float = 30.0,
    body_timeout: float = 300.0,
    max_requests: Optional[int] = DEFAULT_MAX_REQUESTS,
    allow_remote: bool = False,
) -> FakeProvider:
    """Start a :class:`FakeProvider` and return it, serving.

    ``http2=False`` serves HTTP/1.1 and also h2c (prior knowledge or Upgrade) on the
    same port; ``http2=True`` serves h2c only and answers HTTP/1.1 with a 505. It
    binds loopback; a ``host`` other machines can reach needs ``allow_remote=True``.

    Limits on what clients send: ``max_header_bytes`` (431), ``max_body_bytes``
    (413); ``header_timeout`` for a request head to arrive, ``body_idle_timeout`` for
    the next byte of a body and ``body_timeout`` for the whole of it (408).
    ``max_requests`` caps the record: past it the oldest requests are dropped and counted
    in :attr:`FakeProvider.dropped_requests`. By default the newest 10,000 are kept
    (:data:`DEFAULT_MAX_REQUESTS`: far more than a case sends, and a bound for a provider
    that serves for days); ``None`` keeps every one.
    """
    return FakeProvider(
        http2,
        host=host,
        port=port,
        max_header_bytes=max_header_bytes,
        max_body_bytes=max_body_bytes,
        header_timeout=header_timeout,
        body_idle_timeout=body_idle_timeout,
        body_timeout=body_timeout,
        max_requests=max_requests,
        allow_remote=allow_remote,
    ).start()


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: localhost, 127.0.0.0/8 or ::1."""
    import ipaddress  # here: only a provider being set up pays for it

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_timeout(timeout: object) -> float:
    """A wait's timeout as a float, or a ProviderInputError that says what was wrong."""
    if _is_number(timeout) and 0 <= timeout < math.inf:  # type: ignore[operator]
        return float(timeout)  # type: ignore[arg-type]
    hint = (
        "; these waits are always bounded: pass a number such as 5.0"
        if timeout is None or (_is_number(timeout) and math.isinf(timeout))  # type: ignore[arg-type]
        else ""
    )
    raise ProviderInputError(f"timeout must be a finite number of seconds >= 0, got {timeout!r}{hint}")


def _running_loop() -> Optional[asyncio.AbstractEventLoop]:
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
