"""Tests that leave things behind on purpose, for tests/test_hygiene.py to run in a process
of its own and read the verdicts of. Not a test module: discovery and dev.py leave it out."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import unittest
from typing import Any, Dict, List

from .hygiene import blocks_on_purpose

#: Held for the life of the process, as a module-level cache holds a client's connection.
KEPT: List[socket.socket] = []


class Samples(unittest.TestCase):
    def test_a_leaks_a_socket_in_a_cycle(self) -> None:
        """An open socket in a reference cycle, dropped: freed only by the collector."""
        holder: Dict[str, Any] = {"socket": socket.socket()}
        holder["self"] = holder

    def test_b_runs_after_the_leak(self) -> None:
        """Nothing: the leak before must not be held against this one."""

    def test_c_raises_in_a_thread(self) -> None:
        """A thread that ends with an exception nobody catches."""

        def fails() -> None:
            raise ValueError("sample failure in a thread")

        thread = threading.Thread(target=fails, name="sample thread")
        thread.start()
        thread.join()

    def test_d_fails_in_a_callback(self) -> None:
        """A loop callback that raises: asyncio logs it and goes on."""

        def fails() -> None:
            raise ValueError("sample failure in a callback")

        async def main() -> None:
            asyncio.get_running_loop().call_soon(fails)
            await asyncio.sleep(0.01)

        asyncio.run(main())

    def test_e_sleeps_on_its_loop(self) -> None:
        """A coroutine that blocks its loop with time.sleep."""

        async def main() -> None:
            time.sleep(0.001)

        asyncio.run(main())

    def test_f_blocks_its_loop_on_purpose(self) -> None:
        """The same, said to be on purpose: allowed."""

        async def main() -> None:
            with blocks_on_purpose():
                time.sleep(0.001)

        asyncio.run(main())

    def test_g_is_slow_but_blocks_nothing(self) -> None:
        """A callback asyncio's debug mode calls slow, which blocks nothing: not noise."""

        async def main() -> None:
            loop = asyncio.get_running_loop()
            loop.set_debug(True)
            loop.slow_callback_duration = 0.0
            sum(range(10000))
            await asyncio.sleep(0)

        asyncio.run(main())

    def test_h_starts_a_thread_and_waits_for_it_without_blocking(self) -> None:
        """Starting a thread from a coroutine, and awaiting its work: not a blocking call."""

        thread = threading.Thread(target=lambda: None)

        async def main() -> None:
            await asyncio.get_running_loop().run_in_executor(None, time.sleep, 0.001)
            thread.start()

        asyncio.run(main())
        thread.join()

    def test_i_keeps_a_socket_to_the_end(self) -> None:
        """A socket kept open in a module-level list: nothing to see until the process exits."""
        KEPT.append(socket.socket())
