"""The abort helpers: race_abort, race_abort_iter, shutdown_on_abort, shutdown_socket, raise_reason."""

from __future__ import annotations

import asyncio
import socket
import threading
import unittest
from typing import AsyncIterator, List

from conformance import (
    AbortController,
    race_abort,
    race_abort_iter,
    shutdown_on_abort,
    shutdown_socket,
)


class Reason(Exception):
    """The caller's abort reason."""


def _abort_soon(controller: AbortController, reason: BaseException, loop: asyncio.AbstractEventLoop) -> None:
    # From another thread, as a caller's abort would come.
    loop.call_later(0.02, lambda: threading.Thread(target=controller.abort, args=(reason,)).start())


class RaiseReasonTests(unittest.TestCase):
    def test_raise_reason_raises_the_very_object(self) -> None:
        """After an abort, raise_reason() raises the reason given, not a copy."""
        controller, reason = AbortController(), Reason("stop")
        controller.abort(reason)
        with self.assertRaises(Reason) as raised:
            controller.signal.raise_reason()
        self.assertIs(raised.exception, reason)

    def test_raise_reason_before_an_abort_says_so(self) -> None:
        """Before any abort there is no reason, and the error says what to check."""
        with self.assertRaisesRegex(RuntimeError, "has not fired; check signal.aborted"):
            AbortController().signal.raise_reason()


class RaceAbortTests(unittest.TestCase):
    def test_the_work_wins_without_an_abort(self) -> None:
        """Without an abort, race_abort returns the work's result; with no signal it is a plain await."""

        async def main() -> List[int]:
            async def work() -> int:
                await asyncio.sleep(0)
                return 7

            return [await race_abort(work(), AbortController().signal), await race_abort(work(), None)]

        self.assertEqual(asyncio.run(main()), [7, 7])

    def test_an_abort_cancels_the_work_and_raises_the_reason(self) -> None:
        """An abort from another thread cancels the pending work, lets it unwind, and raises the reason."""
        unwound: List[str] = []
        reason = Reason("stop")

        async def main() -> None:
            controller = AbortController()

            async def work() -> None:
                try:
                    await asyncio.sleep(30)
                finally:
                    unwound.append("closed")

            _abort_soon(controller, reason, asyncio.get_running_loop())
            await race_abort(work(), controller.signal)

        with self.assertRaises(Reason) as raised:
            asyncio.run(main())
        self.assertIs(raised.exception, reason)
        self.assertEqual(unwound, ["closed"])

    def test_cancelling_the_caller_propagates_cancelled_error(self) -> None:
        """A cancelled caller cancels the work too, and CancelledError comes through unchanged."""
        unwound: List[str] = []

        async def main() -> None:
            async def work() -> None:
                try:
                    await asyncio.sleep(30)
                finally:
                    unwound.append("closed")

            task = asyncio.ensure_future(race_abort(work(), AbortController().signal))
            await asyncio.sleep(0.01)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        self.assertEqual(unwound, ["closed"])

    def test_an_async_iterator_stops_at_the_abort_and_is_closed(self) -> None:
        """race_abort_iter yields until the abort, raises the reason, and closes the iterator."""
        reason = Reason("stop")
        closed: List[str] = []
        got: List[int] = []

        async def events() -> AsyncIterator[int]:
            try:
                yield 1
                yield 2
                await asyncio.sleep(30)
                yield 3
            finally:
                closed.append("closed")

        async def main() -> None:
            controller = AbortController()
            async for item in race_abort_iter(events(), controller.signal):
                got.append(item)
                if item == 2:
                    _abort_soon(controller, reason, asyncio.get_running_loop())

        with self.assertRaises(Reason) as raised:
            asyncio.run(main())
        self.assertIs(raised.exception, reason)
        self.assertEqual((got, closed), ([1, 2], ["closed"]))

    def test_an_async_iterator_runs_to_its_end_without_an_abort(self) -> None:
        """Without an abort, race_abort_iter yields every item and ends."""

        async def events() -> AsyncIterator[int]:
            for item in range(3):
                yield item

        async def main() -> List[int]:
            return [item async for item in race_abort_iter(events(), AbortController().signal)]

        self.assertEqual(asyncio.run(main()), [0, 1, 2])


class ShutdownOnAbortTests(unittest.TestCase):
    def test_an_abort_wakes_a_blocked_recv_and_the_block_raises_the_reason(self) -> None:
        """A recv blocked on a socket returns once the aborting thread shuts it down; the reason is raised."""
        ours, theirs = socket.socketpair()
        controller, reason = AbortController(), Reason("stop")
        timer = threading.Timer(0.05, controller.abort, args=(reason,))
        try:
            ours.settimeout(10)  # a bound, should the shutdown not wake the read
            timer.start()
            with self.assertRaises(Reason) as raised:
                with shutdown_on_abort(controller.signal, [ours]):
                    ours.recv(1024)  # returns b"" at the shutdown: the block ends normally
            self.assertIs(raised.exception, reason)
            self.assertEqual(theirs.recv(1024), b"")  # the other side saw the FIN
        finally:
            timer.join()
            ours.close()
            theirs.close()

    def test_the_error_of_a_cut_read_is_replaced_by_the_reason(self) -> None:
        """Whatever the cut read raised gives way to the abort reason."""
        controller, reason = AbortController(), Reason("stop")
        sockets: List[socket.socket] = []
        with self.assertRaises(Reason) as raised:
            with shutdown_on_abort(controller.signal, sockets):
                controller.abort(reason)
                raise ConnectionResetError("the read was cut")
        self.assertIs(raised.exception, reason)

    def test_without_an_abort_nothing_changes(self) -> None:
        """No abort: the block's own errors pass unchanged and the callback is unregistered."""
        controller = AbortController()
        ours, theirs = socket.socketpair()
        try:
            with self.assertRaises(KeyError):
                with shutdown_on_abort(controller.signal, ours):
                    raise KeyError("own")
            controller.abort(Reason("later"))
            ours.sendall(b"x")  # still open: the late abort did not shut it down
            self.assertEqual(theirs.recv(1), b"x")
            with shutdown_on_abort(None, ours):
                pass
        finally:
            ours.close()
            theirs.close()

    def test_shutdown_socket_leaves_a_closed_socket_be(self) -> None:
        """Shutting down a socket that is already closed is not an error."""
        ours, theirs = socket.socketpair()
        ours.close()
        theirs.close()
        shutdown_socket(ours)


if __name__ == "__main__":
    unittest.main()
