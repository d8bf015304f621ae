"""One event loop per process that serves the cases' fake providers.

Strategy: a case used to start a provider with an event loop and a thread of its own,
and to stop both at its end: about a millisecond of each case, most of it waiting for
the thread to start and to end. Cases now share the loop and its thread; everything
else stays each case's own: its listening socket and port, its hub (the reply
handler, the request record, the tasks its replies run), so nothing one case scripts
or sees reaches another, and closing a case's provider ends its connections and
tasks alone.

Two things could let one case reach the next through the shared loop, and neither
does. A reply handler that never returns blocks the loop: the case's close then fails
as a provider of its own would (``FakeProvider.close`` names the handler), and the
loop is retired, so that the next case gets a fresh one. A forked child (a worker
process of ``python -m conformance``) makes its own loop: the parent's thread did not
come with it. The loop is stopped and closed when the process exits.
"""

from __future__ import annotations

import atexit
import os
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Dict, Iterator

from .errors import ProviderInputError

if TYPE_CHECKING:
    import asyncio

    from .provider import FakeProvider

__all__ = ["ProviderHost", "case_provider", "host"]

#: How long the process's exit waits for the shared loop to close.
CLOSE_WITHIN = 1.0


class ProviderHost:
    """An event loop in a daemon thread of its own, serving the providers started on it."""

    def __init__(self) -> None:
        import asyncio

        self.loop: asyncio.AbstractEventLoop = asyncio.new_event_loop()
        self.retired = False
        self.thread = threading.Thread(target=self._run, name="conformance providers", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import asyncio

        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            # Every case closed its provider, which ended its tasks; whatever is left
            # belongs to a case that could not close (its handler blocked the loop).
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.wait(tasks, timeout=CLOSE_WITHIN))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    def retire(self) -> None:
        """Serve no new provider; the loop stops and closes as soon as it is free to."""
        self.retired = True
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # closed already
            pass

    def close(self, within: float = CLOSE_WITHIN) -> None:
        """Retire the loop and wait, bounded, for its thread to close it."""
        self.retire()
        if threading.current_thread() is not self.thread:
            self.thread.join(within)


_hosts: Dict[int, ProviderHost] = {}  # by process id: a forked child makes its own
_hosts_lock = threading.Lock()


def host() -> ProviderHost:
    """This process's provider loop, started on first use (and again after one was retired)."""
    pid = os.getpid()
    with _hosts_lock:
        current = _hosts.get(pid)
        if current is None or current.retired or not current.thread.is_alive():
            for other in [p for p in _hosts if p != pid]:
                del _hosts[other]  # the parent's: its thread is not in this process
            current = _hosts[pid] = ProviderHost()
        return current


@atexit.register
def _close_at_exit() -> None:
    with _hosts_lock:
        current = _hosts.pop(os.getpid(), None)
    if current is not None:
        current.close()


@contextmanager
def case_provider(http2: bool) -> Iterator[FakeProvider]:
    """A started provider of the case's own, served on this process's shared loop; closed on exit.

    A provider whose close fails (a reply handler blocked the loop) retires the loop,
    so that no later case is served on it.
    """
    from .provider import FakeProvider

    serving = host()
    provider = FakeProvider(http2)._start(serving.loop)
    try:
        yield provider
    finally:
        try:
            provider.close()
        except ProviderInputError:
            serving.retire()
            raise
