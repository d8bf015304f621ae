"""The run's hygiene (tests/hygiene.py): what a test leaves behind, or reports on the side, fails it."""

from __future__ import annotations

import re
import subprocess
import sys
import unittest
from pathlib import Path
from typing import Dict

ROOT = Path(__file__).resolve().parent.parent


class SamplesTests(unittest.TestCase):
    """tests/hygiene_samples.py run in a process of its own, as the suite is run."""

    output = ""
    status = 0

    @classmethod
    def setUpClass(cls) -> None:
        command = [sys.executable, "-X", "dev", "-W", "error", "-m", "unittest", "-v"]
        command.append("tests.hygiene_samples")
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
        cls.output, cls.status = done.stdout + done.stderr, done.returncode

    def verdicts(self) -> Dict[str, str]:
        found = re.findall(r"^(test_\w+) \(.*?\)\n.*? \.\.\. (ok|FAIL|ERROR)$", self.output, re.M)
        return dict(found)

    def failure(self, name: str) -> str:
        found = re.search(rf"^FAIL: {name} .*?\n(.*?)(?=^={{70}}$|^-{{70}}\nRan )", self.output, re.M | re.S)
        self.assertIsNotNone(found, f"no failure for {name} in:\n{self.output}")
        assert found is not None
        return found.group(1)

    def test_each_sample_fails_or_passes_as_it_should(self) -> None:
        """The four that leave or report something fail, each once; the rest pass."""
        expected = {
            "test_a_leaks_a_socket_in_a_cycle": "FAIL",
            "test_b_runs_after_the_leak": "ok",
            "test_c_raises_in_a_thread": "FAIL",
            "test_d_fails_in_a_callback": "FAIL",
            "test_e_sleeps_on_its_loop": "FAIL",
            "test_f_blocks_its_loop_on_purpose": "ok",
            "test_g_is_slow_but_blocks_nothing": "ok",
            "test_h_starts_a_thread_and_waits_for_it_without_blocking": "ok",
            "test_i_keeps_a_socket_to_the_end": "ok",
        }
        self.assertEqual(self.verdicts(), expected, self.output)
        self.assertIn("FAILED (failures=4)", self.output)

    def test_a_leak_in_a_cycle_fails_the_test_that_leaked_it(self) -> None:
        """The collector frees the cycle before the next test: the leaking test names the socket."""
        told = self.failure("test_a_leaks_a_socket_in_a_cycle")
        self.assertIn("ResourceWarning: unclosed <socket.socket", told)
        self.assertIn("while tests.hygiene_samples.Samples.test_a_leaks_a_socket_in_a_cycle ran", told)

    def test_a_thread_and_a_callback_failing_are_named(self) -> None:
        """An exception in a thread names the thread; one in a callback, what asyncio logged."""
        self.assertIn("an exception in thread 'sample thread'", self.failure("test_c_raises_in_a_thread"))
        self.assertIn("ValueError: sample failure in a thread", self.failure("test_c_raises_in_a_thread"))
        told = self.failure("test_d_fails_in_a_callback")
        self.assertIn("asyncio logged: Exception in callback", told)
        self.assertIn("ValueError: sample failure in a callback", told)

    def test_a_blocking_call_on_a_loop_is_named_where_it_was_made(self) -> None:
        """time.sleep in a coroutine is named, with its place in the test and the way out."""
        told = self.failure("test_e_sleeps_on_its_loop")
        self.assertIn("a blocking call on a running event loop: time.sleep(0.001)", told)
        self.assertIn("tests/hygiene_samples.py:", told)
        self.assertIn("blocks_on_purpose()", told)

    def test_what_is_open_at_exit_fails_the_process(self) -> None:
        """A socket still open as the process exits is listed after the tests, and the status is 1."""
        self.assertEqual(self.status, 1)
        at_exit = r"left this behind at exit, so the run fails:\n  - an open socket: <socket"
        self.assertRegex(self.output, at_exit)

    def test_nothing_reaches_stderr_on_the_side(self) -> None:
        """The hooks took every report: none of Python's or asyncio's own lines is printed."""
        for line in ("Exception ignored in", "Exception in thread", "Exception in callback", "Executing <"):
            with self.subTest(line=line):
                self.assertNotRegex(self.output, rf"(?m)^{re.escape(line)}")


if __name__ == "__main__":
    unittest.main()
