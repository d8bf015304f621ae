"""The kit's version lives in the package, so a vendored copy reports it too."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from conformance._version import __version__, kit_version

ROOT = Path(__file__).resolve().parent.parent


class VersionTests(unittest.TestCase):
    def test_pyproject_takes_the_version_from_the_package(self) -> None:
        """pyproject.toml names no version of its own: it reads conformance._version."""
        text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
        self.assertIn('dynamic = ["version"]', text)
        self.assertIn('version = {attr = "conformance._version.__version__"}', text)
        self.assertIsNone(re.search(r'^version\s*=\s*"', text, re.MULTILINE))

    def test_this_copy_reports_its_version(self) -> None:
        """Run from the project (installed or not), the version is the package's own."""
        self.assertTrue(kit_version().startswith(__version__), kit_version())

    def test_a_vendored_copy_says_so(self) -> None:
        """The conformance/ folder copied alone into another project reports its version, vendored."""
        with tempfile.TemporaryDirectory() as folder:
            shutil.copytree(ROOT / "conformance", Path(folder, "conformance"))
            shown = subprocess.run(
                [sys.executable, "-c", "from conformance._version import kit_version; print(kit_version())"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout.strip()
        self.assertEqual(shown, f"{__version__} (vendored)")


if __name__ == "__main__":
    unittest.main()
