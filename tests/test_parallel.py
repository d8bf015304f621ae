"""Parallel runs with the tools users have: pytest-xdist over the generated tests."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HAVE_XDIST = importlib.util.find_spec("pytest") is not None and importlib.util.find_spec("xdist") is not None


@unittest.skipUnless(HAVE_XDIST, "pytest-xdist is not installed: pip install -e '.[test]'")
class XdistTests(unittest.TestCase):
    def test_a_small_target_passes_under_pytest_n(self) -> None:
        """Two xdist workers split a target's generated tests, each with its own providers, and all pass."""
        done = subprocess.run(
            [
                sys.executable, "-W", "error", "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider",
                "-k", "text or tool_call or rate_limit", "tests/xdist_sample.py",
            ],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        passed = re.search(r"(\d+) passed", done.stdout)
        self.assertIsNotNone(passed, done.stdout)
        assert passed is not None
        self.assertGreaterEqual(int(passed.group(1)), 6, done.stdout)
        self.assertIn("bringing up nodes", done.stdout)  # xdist ran them, not pytest alone


if __name__ == "__main__":
    unittest.main()
