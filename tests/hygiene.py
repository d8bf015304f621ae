"""What a test leaves behind, or says on the side, fails that test.

Under ``python -X dev -W error`` Python reports a leaked socket, an exception in a thread
and an exception in an event loop's callback on stderr only: the test that caused it
passes, and the line scrolls by among the dots, where it hides the next one. Installed
from ``tests/__init__.py`` (so ``dev.py test``, ``python -m unittest`` and tox all have
it), this module turns each into a failure of the test during which it came:

- an unraisable exception (:data:`sys.unraisablehook`): the ResourceWarning of a socket,
  transport or event loop that was never closed, as it is freed; an error in ``__del__``;
- an uncaught exception in a thread (:data:`threading.excepthook`);
- what asyncio logs as a warning or an error: an exception in a callback, a task
  destroyed while pending, an exception never retrieved;
- a blocking call made on a thread whose event loop is running: ``time.sleep``,
  ``Event.wait``, ``Condition.wait`` (and so ``Queue.get``, ``Future.result``). Found by
  the call itself, not by how long it took: asyncio's debug mode reports a callback that
  took over 0.1 s by the wall clock, which on a busy machine reports the load rather than
  the code, so those reports are dropped and this check stands in for them. A test double
  that blocks its loop on purpose says so with :func:`blocks_on_purpose`.

Strategy: an object in a reference cycle is freed only when the collector next runs,
which may be tests later, and its warning would then name the wrong test. So each test
runs with every older object frozen (:func:`gc.freeze`) and ends with a collection, which
then costs only what the test itself made: what it leaked is freed, and warns, before the
next test starts. What is still open when the process exits (held by a module-level cache,
say, where the interpreter's own teardown would warn unheard) is listed then, and the
process exits with status 1. Run with ``-X tracemalloc=N`` and a leaked object's report
says where it was made, N frames deep.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import logging
import os
import socket
import sys
import threading
import time
import traceback
import tracemalloc
import unittest
from typing import Any, Callable, Iterator, List, Optional

__all__ = ["blocks_on_purpose", "install"]

#: Leaves this module's frames out of a failure's traceback, as unittest does its own:
#: the failure's message says what happened and where.
__unittest = True

#: asyncio's debug-mode report of a slow callback (``BaseEventLoop._run_once``, 3.8 on).
SLOW_CALLBACK = "Executing %s took %.3f seconds"

_lock = threading.Lock()
_noise: List[str] = []
#: The test running (the outermost, where one test runs others), and how deep.
_running: List[str] = []
_local = threading.local()
_installed = False
_exiting = False
#: threading's own hook (threading.__excepthook__ only from 3.10 on).
_default_excepthook = threading.excepthook


def _note(what: str) -> None:
    where = f"while {_running[-1]} ran" if _running else "between tests"
    with _lock:
        _noise.append(f"{what}\n    ({where})")


def _take() -> List[str]:
    with _lock:
        taken = list(_noise)
        _noise.clear()
    return taken


# -- what Python and asyncio report on the side ------------------------------------------------


def _unraisable(unraisable: Any) -> None:
    if _exiting:
        sys.__unraisablehook__(unraisable)
        return
    what = f"{unraisable.exc_type.__name__}: {unraisable.exc_value}"
    if unraisable.object is not None:
        what += f" ({unraisable.err_msg or 'Exception ignored in'}: {unraisable.object!r})"
    if unraisable.exc_type is not ResourceWarning and unraisable.exc_traceback is not None:
        what += "\n" + "".join(traceback.format_tb(unraisable.exc_traceback)).rstrip()
    made = _allocated_at(unraisable.object)
    if made:
        what += "\n    made at (tracemalloc, most recent call last):\n" + made
    _note(what)


def _allocated_at(thing: Any) -> str:
    """Where ``thing`` was made, when the run traces allocations (``-X tracemalloc=N``)."""
    if thing is None or not tracemalloc.is_tracing():
        return ""
    made = tracemalloc.get_object_traceback(thing)
    if made is None:
        return ""
    return "\n".join(f"      {_short(frame.filename)}:{frame.lineno}" for frame in made)


def _thread_exception(args: Any) -> None:
    if _exiting or args.exc_type is SystemExit:
        _default_excepthook(args)
        return
    name = args.thread.name if args.thread is not None else "?"
    told = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
    _note(f"an exception in thread {name!r}, which nothing caught:\n{told.rstrip()}")


class _AsyncioLog(logging.Handler):
    """What asyncio logs, but for the slow-callback report: see the module's docstring."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == SLOW_CALLBACK:
            return
        what = f"asyncio logged: {record.getMessage()}"
        if record.exc_info and record.exc_info[0] is not None:
            what += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        _note(what)


# -- blocking calls on a running event loop ----------------------------------------------------


@contextlib.contextmanager
def blocks_on_purpose() -> Iterator[None]:
    """Let the code inside block the thread's event loop: a test double whose point that is."""
    _local.allowed = getattr(_local, "allowed", 0) + 1
    try:
        yield
    finally:
        _local.allowed -= 1


def _on_a_loop() -> bool:
    return asyncio.events._get_running_loop() is not None and not getattr(_local, "allowed", 0)


def _blocking(call: str) -> None:
    # The caller of the patched function, and a few frames up: where to look.
    frames = traceback.extract_stack(limit=6)[:-2]
    where = " <- ".join(f"{_short(f.filename)}:{f.lineno} in {f.name}" for f in reversed(frames))
    _note(
        f"a blocking call on a running event loop: {call} at {where}; await instead (asyncio.sleep, "
        "an asyncio.Event, loop.run_in_executor), or, in a test double that blocks its loop on "
        "purpose, wrap it in tests.hygiene.blocks_on_purpose()"
    )


def _short(path: str) -> str:
    """A path in the project from its root; any other whole."""
    here = os.getcwd()
    return os.path.relpath(path, here) if path.startswith(here + os.sep) else path


def _waits(timeout: Optional[float]) -> bool:
    return timeout is None or timeout > 0


def _patch_blocking_calls() -> None:
    sleep = time.sleep
    event_wait = threading.Event.wait
    condition_wait = threading.Condition.wait
    condition_wait_for = threading.Condition.wait_for
    start = threading.Thread.start

    def checked_sleep(seconds: float) -> None:
        if seconds > 0 and _on_a_loop():
            _blocking(f"time.sleep({seconds!r})")
        sleep(seconds)

    # Each waits on the one below it (an Event on a Condition): one report per call.
    def checked_event_wait(self: threading.Event, timeout: Optional[float] = None) -> bool:
        if _waits(timeout) and _on_a_loop():
            _blocking(f"Event.wait(timeout={timeout!r})")
        with blocks_on_purpose():
            return event_wait(self, timeout)

    def checked_condition_wait(self: threading.Condition, timeout: Optional[float] = None) -> bool:
        if _waits(timeout) and _on_a_loop():
            _blocking(f"Condition.wait(timeout={timeout!r})")
        with blocks_on_purpose():
            return condition_wait(self, timeout)

    def checked_condition_wait_for(
        self: threading.Condition, predicate: Callable[[], Any], timeout: Optional[float] = None
    ) -> Any:
        if _waits(timeout) and _on_a_loop():
            _blocking(f"Condition.wait_for(timeout={timeout!r})")
        with blocks_on_purpose():
            return condition_wait_for(self, predicate, timeout)

    def checked_start(self: threading.Thread) -> None:
        # start() waits for the new thread to run: brief, and what starting one takes.
        with blocks_on_purpose():
            start(self)

    time.sleep = checked_sleep
    threading.Event.wait = checked_event_wait  # type: ignore[method-assign]
    threading.Condition.wait = checked_condition_wait  # type: ignore[method-assign]
    threading.Condition.wait_for = checked_condition_wait_for  # type: ignore[method-assign]
    threading.Thread.start = checked_start  # type: ignore[method-assign]


# -- each test, and the end of the run ---------------------------------------------------------


def _told(noise: List[str]) -> str:
    listed = "\n  - ".join(noise)
    return f"the test left this behind or reported it on the side:\n  - {listed}"


def _check(collect: bool) -> None:
    """The test's last cleanup: what it left, or reported on the side, fails it."""
    if collect:
        gc.collect()
    noise = _take()
    if noise:
        raise AssertionError(_told(noise))


def _patch_test_run() -> None:
    run = unittest.TestCase.run

    def checked_run(self: unittest.TestCase, result: Optional[unittest.TestResult] = None) -> Any:
        outermost = not _running
        method = getattr(self, self._testMethodName, None)
        # A failure in an expected failure's cleanup would pass for the failure expected.
        if not getattr(method, "__unittest_expecting_failure__", False):
            self.addCleanup(_check, outermost)  # the first cleanup added runs last
        if outermost:
            gc.freeze()
        _running.append(self.id())
        try:
            result = run(self, result)
        finally:
            try:
                if outermost:
                    gc.collect()
                    gc.unfreeze()
            finally:
                _running.pop()
        # What came after the cleanups (an IsolatedAsyncioTestCase closes its loop then).
        noise = _take()
        if noise and result is not None:
            try:
                raise AssertionError(_told(noise))
            except AssertionError:
                result.addFailure(self, sys.exc_info())
        return result

    unittest.TestCase.run = checked_run  # type: ignore[method-assign]


def _still_open() -> List[str]:
    """What the interpreter's teardown would warn of, or never close: open sockets and loops."""
    found = []
    for thing in gc.get_objects():
        try:
            if isinstance(thing, socket.socket) and thing.fileno() != -1:
                made = _allocated_at(thing)
                found.append(f"an open socket: {thing!r}" + (f"\n    made at:\n{made}" if made else ""))
            elif isinstance(thing, asyncio.AbstractEventLoop) and not thing.is_closed():
                found.append(f"an event loop never closed: {thing!r}")
        except Exception:  # noqa: BLE001 - a half-built object: not one of ours to judge
            continue
    return found


def _at_exit() -> None:
    global _exiting
    gc.collect()
    left = [*_take(), *_still_open()]
    _exiting = True
    if not left:
        return
    sys.stdout.flush()
    told = "\n  - ".join(left)
    sys.stderr.write(f"\nThe tests left this behind at exit, so the run fails:\n  - {told}\n")
    sys.stderr.flush()
    os._exit(1)


def install() -> None:
    """Install the hooks and checks in this process (once; a second call does nothing)."""
    global _installed
    if _installed:
        return
    _installed = True
    sys.unraisablehook = _unraisable
    threading.excepthook = _thread_exception
    logging.getLogger("asyncio").addHandler(_AsyncioLog())
    _patch_blocking_calls()
    _patch_test_run()
    atexit.register(_at_exit)
