"""How long this whole process could not run: time a bound does not hold against a backend.

Strategy: the abort and cancel bounds (the reason within half a second, the connection
closed within a second) judge the backend, and on a loaded machine the whole process
can stop for longer than that: the operating system runs other processes, a virtual
machine's host runs other guests, a collection holds the GIL. A backend that answers
at once then misses its bound through no fault of its own. So while a timed window is
open, one thread per process sleeps in short ticks; a tick that wakes much later than
it asked for is a stretch in which no thread here could run, and that stretch is
taken off the time a bound measures.

What a backend does to itself does not stop this thread, so it is never excused: a
blocking call on its event loop (``time.sleep``, a blocking read) releases the GIL,
and Python code hands the GIL over every switch interval (5 ms), far under
:data:`LATE`. Only a stall that held every thread counts.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Deque, Optional, Tuple

__all__ = ["LATE", "MAX_EXCUSED", "TICK", "WATCH", "StallWatch", "not_counted"]

#: How long the watch sleeps between looks at the clock.
TICK = 0.01
#: How much later than asked a tick must wake to count as a stall. Twenty times the
#: GIL's default switch interval: dozens of busy threads in one process (a test runner's
#: many cases at once) keep a thread waiting for the GIL 25 to 100 ms now and then, and
#: counting that would excuse a slow backend a little in every window. A stall of the
#: whole process that fails a prompt backend is several times longer.
LATE = 0.1
#: The most a bound is ever stretched by stalls, so that a window stays bounded on a
#: machine that is stalled all the time.
MAX_EXCUSED = 5.0
#: How many stalls are remembered; older ones are long out of every open window.
KEPT = 1024


class StallWatch:
    """Records the stretches in which this process could not run, while anyone watches."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ticked = threading.Condition(self._lock)
        self._users = 0
        self._thread: Optional[threading.Thread] = None
        self._stalls: Deque[Tuple[float, float]] = collections.deque(maxlen=KEPT)
        #: When the watch last woke: every stall that ended before it is recorded.
        self._awake_at = 0.0

    def start(self) -> None:
        """Open a window: the watch runs until every :meth:`start` has had its :meth:`stop`."""
        with self._lock:
            self._users += 1
            if self._thread is None:
                self._awake_at = time.monotonic()
                self._thread = threading.Thread(target=self._run, name="conformance stall watch", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        with self._lock:
            if self._users <= 0:
                raise RuntimeError("StallWatch.stop() without a start(): every stop() closes one start()")
            self._users -= 1

    def __enter__(self) -> StallWatch:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def between(self, start: Optional[float], end: Optional[float], settle: float = 1.0) -> float:
        """Seconds of ``[start, end]`` (``time.monotonic()`` readings) in which the process stalled.

        Waits, at most ``settle`` seconds, for the watch to have woken after ``end``: a
        stall that ``end`` came right after is on record only once the watch has run.
        At most :data:`MAX_EXCUSED`; 0 where either end is ``None`` (never reached).
        """
        if start is None or end is None or end <= start:
            return 0.0
        with self._lock:
            if self._thread is not None:
                self._ticked.wait_for(lambda: self._awake_at >= end, timeout=settle)
            stalled = sum(max(0.0, min(end, to) - max(start, since)) for since, to in self._stalls)
        return min(stalled, MAX_EXCUSED)

    def _run(self) -> None:
        with self._lock:
            woke = self._awake_at
        while True:
            # Each tick is asked for from the last wake, not from whenever the sleep
            # began: a stall between the two is late all the same.
            asked = woke + TICK
            time.sleep(max(0.0, asked - time.monotonic()))
            woke = time.monotonic()
            with self._lock:
                if woke - asked > LATE:
                    self._stalls.append((asked, woke))
                self._awake_at = woke
                self._ticked.notify_all()
                if self._users == 0:
                    self._thread = None
                    return


#: The process's one watch: a stall holds every thread, so one thread sees it for all.
WATCH = StallWatch()


def not_counted(seconds: float) -> str:
    """The words a failed time bound adds for the stalls it left out ("" where there were none)."""
    if seconds <= 0:
        return ""
    return f" ({seconds:.3f} s of it this whole process could not run at all, which is not counted)"
