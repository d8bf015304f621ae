"""The one outline both drivers follow: a subject run within a case's bound, watched, and reclaimed.

Strategy: a backend case and an agent-loop case run their subject the same way, and
this module is that way, once; ``_driver`` (backends) and ``gate._loop_driver``
(loops) say only what differs: how the subject is built, called and read, and when
the case aborts it.

* **Provider.** :func:`run_on_provider` gives the case a provider of its own, on the
  process's shared provider loop (``_host``), scripts it, runs the driver, keeps what
  the provider saw, closes the provider and only then reclaims what the subject left.
* **Bound.** :meth:`SubjectDriver.run` runs the subject on a worker thread with an
  event loop of its own (one a case before left as it found it, where
  ``_loops.kept_loops`` keeps them) and waits up to the target's ``timeout``; past it the case
  gives up (the subject is *hung*), fires the subject's signal so that one which
  honours it can go, and cancels its task. A case that a time bound of the contract
  judges opens a window of the stall watch (``_stall``) around the run, so that what
  stalled the whole process is not counted against the subject.
* **Abort.** A driver that aborts fires :meth:`SubjectDriver.fire_abort` from a thread
  of its own at a protocol event it waits for; the close the contract then asks for is
  watched while the subject is still alive and unclosed (``_loops.observe_close``).
* **Ending.** What the subject returned or raised is kept once, under a lock, and
  nothing it does past the bound counts. The subject is closed (``aclose()`` or
  ``close()``) on its own loop, then the loop is wound down and closed.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple, TypeVar

from ._bounds import ABORT_RAISE_WITHIN, RECLAIM_WITHIN, ConformanceAbort
from ._loops import (
    LoopRun,
    SubjectLoop,
    close_loop,
    close_quietly,
    closed_after,
    give_back,
    in_thread,
    is_async,
    observe_close,
    reclaim,
    subject_loop,
    wind_down,
)
from ._stall import LATE, MAX_EXCUSED, WATCH
from .contract import AbortController

if TYPE_CHECKING:
    from ._case import SubjectOutcome
    from .provider import RecordedRequest

__all__ = ["StallWindow", "SubjectDriver", "give_up", "run_on_provider"]

D = TypeVar("D", bound="SubjectDriver")


class StallWindow:
    """The stall watch (``_stall``) held open over a run that a time bound judges.

    Opened by a driver around its run, and by ``serve``'s judge from the moment it
    serves a timed stage until it has judged it, so that what stalled the whole
    process is left out of the bound the same way wherever the subject runs.
    """

    def __init__(self, timed: bool) -> None:
        self.open = timed
        if timed:
            WATCH.start()

    def between(self, start: Optional[float], end: Optional[float]) -> float:
        """Seconds of ``[start, end]`` in which this whole process stalled (0 in an untimed run)."""
        return WATCH.between(start, end) if self.open else 0.0

    def beyond(self, start: Optional[float], end: Optional[float], bound: float) -> float:
        """:meth:`between`, where ``[start, end]`` is longer than ``bound``; else 0, as nothing of a
        stretch within its bound needs leaving out (and the watch is not waited for)."""
        if start is None or end is None or end - start <= bound:
            return 0.0
        return self.between(start, end)

    def close(self) -> None:
        if self.open:
            self.open = False
            WATCH.stop()


def give_up(outcome: SubjectOutcome, now: float) -> None:
    """Mark a subject still running at the case's bound as hung, after what it was given."""
    outcome.hung = True
    outcome.waited = now - outcome.started


class SubjectDriver:
    """Runs one case's subject on a worker thread with an event loop of its own (``_loops.SubjectLoop``).

    A driver sets :attr:`what` and :attr:`label` and implements :meth:`drive`; it may
    implement :meth:`abort_when_due` (started in a thread of its own where
    :meth:`aborts` says so), :meth:`watched_request` (the request whose close the
    abort asks for) and :meth:`keep` (a result to keep with the ending).
    """

    #: The subject in words, as the messages about what was left behind name it.
    what = "subject"
    #: The first word of the names of the threads the driver starts.
    label = "conformance"

    def __init__(
        self,
        name: str,
        provider: Any,
        create: Callable[[str], Any],
        *,
        timeout: float,
        timed: bool,
        outcome: SubjectOutcome,
    ) -> None:
        self.name = name
        self.provider = provider
        self.create = create
        self.timeout = timeout
        self.timed = timed
        self.outcome = outcome
        self.controller = AbortController()
        #: Set once the worker is over: the outcome is decided and the subject closed.
        self.finished = threading.Event()
        #: Set by each sign of progress a driver notes, and when the subject ends.
        self.progress = threading.Event()
        self.gave_up = False
        self.abandoned = False
        self.lock = threading.Lock()
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.task: Optional[asyncio.Task[Any]] = None
        #: The run of :meth:`_work` on the subject's loop, waited for as a thread is.
        self.worker: Optional[LoopRun] = None
        self.threads: List[threading.Thread] = []
        #: The stall watch held open over the run (:meth:`run`).
        self.window = StallWindow(False)

    # -- what a driver says -------------------------------------------------------------

    async def drive(self, subject: Any) -> None:
        """Call the subject and record what it did; :meth:`ended` once it returned."""
        raise NotImplementedError

    def aborts(self) -> bool:
        """Whether this run aborts the subject (:meth:`abort_when_due` then runs in a thread)."""
        return False

    def abort_when_due(self) -> None:
        """Wait for the protocol event the abort is placed at, then :meth:`fire_abort`."""

    def watched_request(self) -> Optional[RecordedRequest]:
        """The request whose close the abort asks for; ``None``: none is watched."""
        return None

    def keep(self, result: Any) -> None:
        """Keep what the subject returned with its ending (called under the lock)."""

    def count_stalls(self, outcome: SubjectOutcome, window: StallWindow) -> None:
        """Note what stalled the whole process in the stretches a bound judges.

        Only a stretch longer than its bound is read: below the bound nothing needs
        leaving out, and reading the watch waits for its next tick.
        """
        outcome.stalled_after_abort = window.beyond(outcome.abort_at, outcome.error_at, ABORT_RAISE_WITHIN)

    # -- the caller's side --------------------------------------------------------------

    def run(self) -> SubjectOutcome:
        """Run the subject within the bound; the outcome, once the worker is over or given up on."""
        # The time bounds the contract sets, and the case's own bound, do not count what
        # stalled the whole process: on a loaded machine a prompt subject is not hung.
        window = StallWindow(True)
        self.window = window
        try:
            outcome = self._run()
            if self.timed:
                self.count_stalls(outcome, window)
        finally:
            window.close()
        return outcome

    def _finished_within(self, started: float) -> bool:
        """Wait for the subject up to the case's bound, stretched by what stalled the whole process
        since it started (``_stall``: at most :data:`MAX_EXCUSED` in all); whether it finished."""
        if self.finished.wait(self.timeout):
            return True
        excused = 0.0
        while excused < MAX_EXCUSED:
            stalled = min(self.window.between(started, time.monotonic()), MAX_EXCUSED)
            if stalled - excused < LATE:
                return False
            more, excused = stalled - excused, stalled
            if self.finished.wait(more):
                return True
        return False

    def _run(self) -> SubjectOutcome:
        outcome = self.outcome
        outcome.started = started = time.monotonic()
        runner = subject_loop()
        self.loop = runner.loop
        aborter: Optional[threading.Thread] = None
        if self.aborts():
            aborter = threading.Thread(target=self.abort_when_due, name=f"{self.label} abort", daemon=True)
        self.worker = runner.run(lambda: self._work(runner))
        if aborter is not None:
            aborter.start()
        if not self._finished_within(started):
            with self.lock:
                # Past the bound, whatever the subject does next is not its answer.
                self.gave_up = True
                ended = outcome.ended
            if ended:
                outcome.close_error = TimeoutError(
                    f"close() was still running {time.monotonic() - started:.1f} s after the case began"
                )
            else:
                give_up(outcome, time.monotonic())
                if outcome.abort_at is not None:
                    outcome.closed_after = closed_after(self.watched_request(), outcome.abort_at)
            # Let a subject that honours its signal go, then stop what is left.
            self.controller.abort(ConformanceAbort(f"the case gave up on {self.name} at its bound"))
            self._cancel_task()
            self.finished.wait(RECLAIM_WITHIN)
        if aborter is not None:
            aborter.join(RECLAIM_WITHIN)
        return outcome

    def reclaim(self) -> None:
        """Once the provider has closed: wait, bounded, for what the subject left running.

        Closing the provider ends every connection, so a subject blocked on one wakes
        up. A loop still stuck after that is stopped; what cannot be stopped is named
        in :attr:`~conformance._case.SubjectOutcome.left_behind`.
        """

        def stop() -> None:
            self.abandoned = True

        self.outcome.left_behind = reclaim(self.worker, self.loop, self.threads, self.what, stop)

    def _cancel_task(self) -> None:
        loop, task = self.loop, self.task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop finished in the meantime
                pass

    # -- the abort ------------------------------------------------------------------------

    def fire_abort(self, why: str) -> None:
        """Abort the subject's signal now, unless it has already ended."""
        if self.finished.is_set() or self.outcome.ended:
            return
        reason = ConformanceAbort(why)
        self.outcome.abort_reason = reason
        self.outcome.abort_at = time.monotonic()
        self.controller.abort(reason)

    # -- the worker -----------------------------------------------------------------------

    def ended(self, error: Optional[BaseException], result: Any = None) -> None:
        """The subject returned (``error`` None) or raised: kept once, and never past the bound."""
        with self.lock:
            outcome = self.outcome
            if outcome.ended or self.gave_up:
                return
            outcome.ended = True
            outcome.error = error
            outcome.ended_at = time.monotonic()
            if error is not None:
                outcome.error_at = outcome.ended_at
            self.keep(result)
        self.progress.set()

    def _work(self, runner: SubjectLoop) -> None:
        loop = runner.loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # noqa: BLE001 - a broken subject must not kill the thread
            self.ended(exc)
        finally:
            clean = False
            try:
                if not self.abandoned:
                    # A loop the subject left as it found it may serve the next case.
                    clean = not self.gave_up and runner.tidy()
                    if not clean:
                        wind_down(loop)
            except BaseException:  # noqa: BLE001 - stopped by reclaim(): close what can be closed
                clean = False
            finally:
                if clean and not self.abandoned:
                    give_back(runner, True)
                else:
                    close_loop(loop)
                    runner.retire()
                self.finished.set()

    async def _main(self) -> None:
        self.task = asyncio.current_task()
        subject = None
        try:
            subject = self.create(self.provider.url)
            if inspect.isawaitable(subject):
                subject = await subject
            await self.drive(subject)
        except BaseException as exc:  # noqa: BLE001 - whatever the subject raised is the outcome
            self.ended(exc)
        finally:
            try:
                abort_at = self.outcome.abort_at
                if abort_at is not None and not self.gave_up:
                    # Watched while the subject is alive and unclosed: its close() comes later.
                    self.outcome.closed_after = await observe_close(
                        self.watched_request(), abort_at, lambda *call: self.in_thread(*call, track=False)
                    )
            finally:
                if subject is not None:
                    closing = await close_quietly(subject)
                    with self.lock:
                        # Past the bound the case has said what close() did: still running.
                        if not self.gave_up:
                            self.outcome.close_error = closing
                self.finished.set()

    def in_thread(self, function: Callable[..., Any], *args: Any, track: bool = True) -> asyncio.Future[Any]:
        """:func:`~conformance._loops.in_thread`; its thread is kept for :meth:`reclaim` if ``track``."""
        name = f"{self.label} sync {self.what}"
        return in_thread(function, *args, name=name, threads=self.threads if track else None)

    async def call(self, hook: Callable[..., Any], probe: Any, *args: Any) -> Any:
        """``hook(*args)``: on this loop where ``probe`` (the subject's method) is async, else in a
        thread of its own. What it gives back is not awaited here: the driver reads it."""
        if is_async(probe):
            return hook(*args)
        return await self.in_thread(hook, *args)


def run_on_provider(
    make: Callable[[Any], D],
    handler: Callable[[Any], Any],
    *,
    http2: bool,
    linger: Callable[[SubjectOutcome], None] = lambda outcome: None,
) -> Tuple[D, List[RecordedRequest]]:
    """Run a driver against a provider of the case's own; the driver, and every request it saw.

    ``make(provider)`` builds the driver once the provider serves, with ``handler`` as
    its script. ``linger(outcome)`` runs after the run with the provider still up, and
    returns when the case may end (the gate watches there for a tool a loop left
    running). The provider is closed before the subject's leftovers are reclaimed:
    closing it is what wakes them.
    """
    from ._host import case_provider

    with case_provider(http2) as provider:
        provider.reply(handler)
        driver = make(provider)
        outcome = driver.run()
        linger(outcome)
        requests = provider.requests
    driver.reclaim()
    return driver, requests
