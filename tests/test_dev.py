"""dev.py: the README's two commands, and the set-up they do."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr
from pathlib import Path
from types import ModuleType
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent


def _dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_dev_script", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ParallelRunTests(unittest.TestCase):
    def test_every_module_runs_once_in_groups_of_even_weight(self) -> None:
        """The test modules, interop ones included, are dealt into groups, each exactly once."""
        dev = _dev()
        modules = [f"tests.{p.stem}" for p in (ROOT / "tests").glob("test_*.py")]
        modules += [f"tests.interop.{p.stem}" for p in (ROOT / "tests" / "interop").glob("test_*.py")]
        self.assertIn("tests.interop.test_anthropic_sdk", modules)
        parts = dev.groups(3)
        members = [m for part in parts for m in part]
        self.assertEqual(sorted(members), sorted(modules))
        dealt = [part for part in parts if all(m in dev.WEIGHTS for m in part)]
        weights = [sum(dev.WEIGHTS[m] for m in part) for part in dealt]
        self.assertLessEqual(len(dealt), 3)
        self.assertLessEqual(max(weights) - min(weights), max(dev.WEIGHTS.values()))

    def test_the_interop_modules_of_one_sdk_share_a_process(self) -> None:
        """Each SDK is imported by one process: its modules are dealt together."""
        dev = _dev()
        for sdk in dev.SDKS:
            with self.subTest(sdk=sdk):
                holding = [part for part in dev.groups(4) if any(sdk in m for m in part if ".interop." in m)]
                self.assertLessEqual(len(holding), 1, holding)

    def test_a_module_not_measured_yet_runs_in_a_process_of_its_own(self) -> None:
        """A new suite, in neither WEIGHTS nor SHORT, holds up no other module whatever its length."""
        dev = _dev()
        short, long = ["tests.test_contract", "tests.test_dev"], "tests.test_mutants"
        new = "tests.test_new_suite"
        parts = dev.groups(2, [*short, new, long])
        self.assertEqual(sorted(parts), sorted([short, [long], [new]]))
        self.assertEqual(parts[-1], [new])

    def test_closing_lines_are_summed(self) -> None:
        """Each process's "Ran N tests" and verdict add up, failures and skips included."""
        totals: dict = {}
        dev = _dev()
        dev.tally("Ran 10 tests in 1.0s\n\nOK (skipped=2)\n", totals)
        dev.tally("Ran 1 test in 0.1s\n\nFAILED (failures=1, errors=2, skipped=3)\n", totals)
        self.assertEqual(totals, {"ran": 11, "skipped": 5, "failures": 1, "errors": 2})


class NoiseTests(unittest.TestCase):
    def test_the_lines_a_leak_or_an_uncaught_error_prints_are_found(self) -> None:
        """Python's and asyncio's own report lines are noise, after unittest's dots too; others not."""
        text = (
            "..Exception ignored in: <socket.socket fd=3>\n"
            "ResourceWarning: unclosed transport <_SelectorSocketTransport fd=11>\n"
            "Exception in callback BaseSelectorEventLoop._accept_connection()\n"
            "Exception in thread worker:\n"
            "Task was destroyed but it is pending!\n"
            "the message says: Exception ignored in the middle\n"
            "OK (skipped=2)\n"
        )
        found = _dev().noise(text)
        self.assertEqual(len(found), 5, found)
        self.assertEqual(found[0], "..Exception ignored in: <socket.socket fd=3>")

    def test_a_run_that_passes_but_prints_noise_fails(self) -> None:
        """A streamed run's status is its own, or 1 where it passed but printed noise."""
        dev = _dev()
        noisy = "import sys; sys.stderr.write('..Exception in thread t:\\n')"
        runs = (
            ("print('ok')", 0, "ok\n"),
            ("import sys; sys.exit(3)", 3, ""),
            (noisy, 1, "The run fails: the tests printed what a leak or an uncaught error prints"),
        )
        for code, status, said in runs:
            with self.subTest(code=code):
                out = io.TextIOWrapper(io.BytesIO())
                with mock.patch.object(dev.sys, "stdout", out):
                    self.assertEqual(dev.run_streamed([sys.executable, "-c", code]), status)
                out.flush()
                printed = out.buffer.getvalue().decode()  # type: ignore[attr-defined]
                self.assertIn(said, printed)
                self.assertEqual("The run fails" in printed, status == 1)


class DevScriptTests(unittest.TestCase):
    def test_no_command_prints_the_two_and_exits_2(self) -> None:
        """Without a command, dev.py shows the two commands and exits with the usage status."""
        err = io.StringIO()
        with redirect_stderr(err):
            status = _dev().main([])
        self.assertEqual(status, 2)
        self.assertIn("python3 dev.py main", err.getvalue())
        self.assertIn("python3 dev.py test", err.getvalue())

    def test_ci_and_readme_run_the_same_two_commands(self) -> None:
        """.ci/run calls the README's two commands, and the test command runs warnings as errors."""
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
        for command in ("dev.py main", "dev.py test"):
            with self.subTest(command=command):
                self.assertIn(f"python3 {command}", readme)
                self.assertIn(f'"$python" {command}', ci)
        self.assertEqual(_dev().TEST_COMMAND[:4], ["-X", "dev", "-W", "error"])

    def test_an_environment_already_set_up_is_reused_without_pip(self) -> None:
        """With the environment and a stamp for the current pyproject.toml, nothing is installed."""
        dev = _dev()
        with tempfile.TemporaryDirectory() as folder:
            env = Path(folder)
            python = dev.interpreter(env)
            python.parent.mkdir(parents=True)
            python.touch()
            digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
            (env / f".conformance-test-interop-{digest}").touch()
            with (
                mock.patch.dict(os.environ, {"CONFORMANCE_VENV": folder}),
                mock.patch.object(dev.subprocess, "run", side_effect=AssertionError("pip ran")),
            ):
                self.assertEqual(dev.ensure(("test", "interop")), python.resolve())

    def test_the_venv_interpreter_path_follows_the_platform(self) -> None:
        """The environment's Python is bin/python, or Scripts/python.exe on Windows."""
        expected = "Scripts/python.exe" if os.name == "nt" else "bin/python"
        self.assertEqual(_dev().interpreter(Path("env")), Path("env") / expected)
        self.assertTrue(sys.executable)


if __name__ == "__main__":
    unittest.main()


class DefaultSubsetTests(unittest.TestCase):
    """The default run's share-out of the async adapters' cases (tests/interop/_support.py)."""

    @staticmethod
    def _suite() -> unittest.TestSuite:
        def case(self: unittest.TestCase) -> None:
            pass

        methods = {f"test_{n}": case for n in ("a", "b", "c", "d", "e")}
        plain = type("Plain", (unittest.TestCase,), {"test_only": case})
        first = type("First", (unittest.TestCase,), methods)
        second = type("Second", (unittest.TestCase,), methods)
        loader = unittest.TestLoader()
        return unittest.TestSuite([loader.loadTestsFromTestCase(c) for c in (plain, first, second)])

    @staticmethod
    def _names(suite: unittest.TestSuite) -> list:
        from tests.interop._support import flatten

        return sorted(f"{type(t).__name__}.{t._testMethodName}" for t in flatten(suite))

    def test_each_case_runs_in_one_of_the_classes_and_the_rest_whole(self) -> None:
        from tests.interop._support import shared_between

        with mock.patch("tests.test_provider_support.LONG_TESTS", False):
            names = self._names(shared_between(self._suite(), ["First", "Second"]))
        self.assertEqual(
            names,
            [
                *("First.test_a", "First.test_c", "First.test_e"),
                "Plain.test_only",
                *("Second.test_b", "Second.test_d"),
            ],
        )

    def test_the_long_run_keeps_every_case(self) -> None:
        from tests.interop._support import shared_between

        with mock.patch("tests.test_provider_support.LONG_TESTS", True):
            self.assertEqual(len(self._names(shared_between(self._suite(), ["First", "Second"]))), 11)

    def test_a_class_the_module_lacks_is_an_error(self) -> None:
        from tests.interop._support import shared_between

        with mock.patch("tests.test_provider_support.LONG_TESTS", False):
            with self.assertRaisesRegex(LookupError, "Renamed"):
                shared_between(self._suite(), ["First", "Renamed"])
