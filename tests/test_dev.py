"""dev.py: the README's two commands, and the set-up they do."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
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
        table = json.loads((ROOT / "tests" / "weights.json").read_text(encoding="utf-8"))["default"]
        parts = dev.groups(3, table=table, run="default")
        members = [m for part in parts for m in part]
        self.assertEqual(sorted(members), sorted(modules))
        dealt = [part for part in parts if all(m in table for m in part)]
        weights = [sum(table[m] for m in part) for part in dealt]
        self.assertLessEqual(len(dealt), 3)
        self.assertLessEqual(max(weights) - min(weights), max(table.values()))

    def test_a_fresh_clone_knows_every_module_and_runs_four_processes(self) -> None:
        """tests/weights.json weighs every test module, so a fresh clone's run is PROCESSES processes."""
        dev = _dev()
        seed = json.loads((ROOT / "tests" / "weights.json").read_text(encoding="utf-8"))
        self.assertEqual(sorted(seed), ["default", "long"])
        for run, table in seed.items():
            with self.subTest(run=run):
                self.assertEqual(sorted(set(dev.test_modules()) - set(table)), [], "modules with no weight")
                self.assertEqual(sorted(set(table) - set(dev.test_modules())), [], "weights of no module")
                self.assertEqual(len(dev.groups(dev.PROCESSES, table=table, run=run)), dev.PROCESSES)

    def test_the_last_runs_times_replace_the_seed(self) -> None:
        """A module's time in the environment's last run of its mode is its weight; the seed, the rest."""
        dev = _dev()
        with tempfile.TemporaryDirectory() as folder:
            times = Path(folder) / dev.TIMES_FILE.format(mode="long")
            times.write_text(json.dumps({"tests.test_dev": 99.5}), encoding="utf-8")
            table = dev.weights(Path(folder), "long")
            default = dev.weights(Path(folder), "default")
        self.assertEqual(table["tests.test_dev"], 99.5)
        self.assertIn("tests.test_mutants", table)
        self.assertNotEqual(default["tests.test_dev"], 99.5, "a long run's times are not a default run's")

    def test_a_module_far_from_its_weight_is_named(self) -> None:
        """Twice its weight and more than 5 s apart is far; a new module is named as having none."""
        dev = _dev()
        far = dev.departures({"a": 30.0, "b": 11.0, "c": 3.0, "d": 1.0}, {"a": 10.0, "b": 10.0, "c": 1.0})
        self.assertEqual(len(far), 2, far)
        self.assertIn("a: 30.0 s against a weight of 10.0 s", far[0])
        self.assertIn("d: 1.0 s, no weight yet", far[1])

    def test_a_process_writes_each_modules_time(self) -> None:
        """The in-process runner times each module it ran and returns unittest's verdict."""
        dev = _dev()
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "times.json"
            status = dev.run_modules(str(out), ["tests.test_version"], stream=io.StringIO())
            written = json.loads(out.read_text(encoding="utf-8"))
        times = written["times"]
        self.assertEqual(status, 0)
        self.assertGreater(written["peak_mb"], 0)
        self.assertEqual(list(times), ["tests.test_version"])
        self.assertGreaterEqual(times["tests.test_version"], 0.0)

    def test_a_long_run_spreads_a_sliced_modules_classes_over_processes(self) -> None:
        """Each module of SLICED goes to the long run as its slices, dealt apart like modules."""
        dev = _dev()
        parts = dev.groups(4, run="long")
        members = [m for part in parts for m in part]
        self.assertEqual(sorted({dev.module_of(m) for m in members}), sorted(dev.test_modules()))
        for module, count in dev.SLICED.items():
            with self.subTest(module=module):
                pieces = [m for m in members if dev.module_of(m) == module]
                self.assertEqual(sorted(pieces), [f"{module}#{i}/{count}" for i in range(count)])
                holding = [part for part in parts if any(dev.module_of(m) == module for m in part)]
                self.assertGreater(len(holding), 1)
        self.assertNotIn("#", " ".join(m for part in dev.groups(4, run="default") for m in part))

    def test_the_slices_of_a_module_run_each_test_once(self) -> None:
        """A module's slices run its classes between them, each class in one slice, no test lost."""
        dev = _dev()
        ran = []
        with tempfile.TemporaryDirectory() as folder:
            for piece in ("", "#0/2", "#1/2"):
                stream = io.StringIO()
                dev.run_modules(str(Path(folder) / "times.json"), [f"tests.test_docs{piece}"], stream=stream)
                found = re.search(r"^Ran (\d+) tests?", stream.getvalue(), re.M)
                assert found is not None, stream.getvalue()
                ran.append(int(found.group(1)))
        whole, first, second = ran
        self.assertEqual(first + second, whole)
        self.assertGreater(first, 0)
        self.assertGreater(second, 0)

    def test_the_interop_modules_of_one_sdk_share_a_process_in_a_long_run(self) -> None:
        """In a long run each SDK is imported by one process: its modules are dealt together (but
        for the slices of SLICED, spread on purpose)."""
        dev = _dev()
        parts = dev.groups(4, run="long")
        for sdk in dev.SDKS:
            with self.subTest(sdk=sdk):
                holding = [
                    part for part in parts if any(sdk in m for m in part if ".interop." in m and "#" not in m)
                ]
                self.assertLessEqual(len(holding), 1, holding)
        self.assertGreater(len([part for part in parts if any(".interop." in m for m in part)]), 1)

    def test_a_default_run_imports_the_sdks_in_one_process(self) -> None:
        """In a default run every interop module shares one process, so each SDK is imported once."""
        dev = _dev()
        parts = dev.groups(4, run="default")
        holding = [part for part in parts if any(".interop." in m for m in part)]
        self.assertEqual(len(holding), 1, holding)
        self.assertEqual(len(parts), 4)

    def test_a_module_not_measured_yet_runs_in_a_process_of_its_own(self) -> None:
        """A new suite, with no weight yet, holds up no other module whatever its length."""
        dev = _dev()
        short, long = ["tests.test_contract", "tests.test_dev"], "tests.test_mutants"
        new = "tests.test_new_suite"
        table = {"tests.test_contract": 1.0, "tests.test_dev": 1.0, "tests.test_mutants": 30.0}
        parts = dev.groups(2, [*short, new, long], table)
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
        """With the environment and a stamp for the current pyproject.toml and lock, nothing is installed."""
        dev = _dev()
        with tempfile.TemporaryDirectory() as folder:
            env = Path(folder)
            python = dev.interpreter(env)
            python.parent.mkdir(parents=True)
            python.touch()
            dev.stamp(env.resolve(), ("test", "interop")).touch()
            with (
                mock.patch.dict(os.environ, {"CONFORMANCE_VENV": folder}),
                mock.patch.object(dev.subprocess, "run", side_effect=AssertionError("pip ran")),
            ):
                self.assertEqual(dev.ensure(("test", "interop")), python.resolve())

    def test_a_new_lock_or_installer_installs_again(self) -> None:
        """The stamp changes with the lock's content and with the installer chosen."""
        dev = _dev()
        with tempfile.TemporaryDirectory() as folder:
            lock = Path(folder) / "lock.txt"
            lock.write_text("h2==4.3.0\n", encoding="utf-8")
            first = dev.stamp(Path(folder), ("test",), lock=lock)
            lock.write_text("h2==4.4.1\n", encoding="utf-8")
            self.assertNotEqual(dev.stamp(Path(folder), ("test",), lock=lock), first)
            with mock.patch.dict(os.environ, {"CONFORMANCE_INSTALLER": "pip"}):
                with_pip = dev.stamp(Path(folder), ("test",), lock=lock)
            self.assertNotEqual(with_pip, dev.stamp(Path(folder), ("test",), lock=lock))

    def test_the_venv_interpreter_path_follows_the_platform(self) -> None:
        """The environment's Python is bin/python, or Scripts/python.exe on Windows."""
        expected = "Scripts/python.exe" if os.name == "nt" else "bin/python"
        self.assertEqual(_dev().interpreter(Path("env")), Path("env") / expected)
        self.assertTrue(sys.executable)


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


class LockTests(unittest.TestCase):
    """locks/*.txt: what the tests and the table install, every version fixed."""

    @unittest.skipIf(sys.version_info < (3, 11), "tomllib, which reads pyproject.toml, is Python 3.11 on")
    def test_the_lock_fixes_every_dependency_the_test_extras_name(self) -> None:
        """Each dependency and test extra of pyproject.toml has a version in locks/test.txt."""
        import tomllib

        dev = _dev()
        project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        named = list(project["dependencies"])
        for extra in dev.EXTRAS["test"]:
            named += project["optional-dependencies"][extra]
        locked = dev.locked_versions(dev.TEST_LOCK)
        for requirement in named:
            name = dev.canonical(re.split(r"[\[=<>~!; ]", requirement, maxsplit=1)[0])
            with self.subTest(requirement=requirement):
                self.assertIn(name, locked)

    def test_each_lock_says_the_day_it_was_made(self) -> None:
        """The first line of each lock names the day `dev.py lock` resolved it."""
        dev = _dev()
        for lock in (dev.TEST_LOCK, dev.ECOSYSTEM_LOCK):
            with self.subTest(lock=lock.name):
                first = lock.read_text(encoding="utf-8").splitlines()[0]
                self.assertRegex(first, r"^# Locked on \d{4}-\d{2}-\d{2} by `python3 dev.py lock`")

    def test_versions_are_read_per_python(self) -> None:
        """A distribution locked at two versions for two ranges of Python keeps both."""
        dev = _dev()
        with tempfile.TemporaryDirectory() as folder:
            lock = Path(folder) / "lock.txt"
            lock.write_text(
                "# Locked on 2026-01-01\nh2==4.3.0 ; python_full_version < '3.10'  # via x\n"
                "h2==4.4.1 ; python_full_version >= '3.10'\nAny_LLM.sdk[openai]==1.0\n",
                encoding="utf-8",
            )
            self.assertEqual(dev.locked_versions(lock), {"h2": ["4.3.0", "4.4.1"], "any-llm-sdk": ["1.0"]})

    def test_latest_names_each_version_the_lock_does_not(self) -> None:
        """`test --latest` reports an installed distribution whose version the lock does not name."""
        dev = _dev()
        import importlib.metadata

        pip = importlib.metadata.version("pip")
        with tempfile.TemporaryDirectory() as folder:
            lock = Path(folder) / "lock.txt"
            lock.write_text("pip==0.0.1 ; python_full_version < '3.10'\npip==0.0.2\n", encoding="utf-8")
            moved = dev.departures_from_lock(Path(sys.executable), lock)
            lock.write_text(f"pip=={pip}\n", encoding="utf-8")
            kept = dev.departures_from_lock(Path(sys.executable), lock)
        self.assertEqual(moved, [f"pip {pip} (the lock has 0.0.1 or 0.0.2)"])
        self.assertEqual(kept, [])

    def test_the_tables_newest_releases_are_asked_for_by_name(self) -> None:
        """`ecosystem --latest` installs each requirement unpinned, extras kept, into a venv of its own."""
        dev = _dev()
        extras = "any-llm-sdk[openai,anthropic]"
        self.assertEqual(dev.unpinned(f"{extras}==1.27.0"), extras)
        self.assertEqual(dev.unpinned("openai==3.57.0"), "openai")
        self.assertEqual(dev.environment("ecosystem-latest").name, ".venv-ecosystem-latest")
        done = mock.Mock(returncode=0)
        with mock.patch.object(dev, "ensure", return_value=Path("python")) as ensure, mock.patch.object(
            dev.subprocess, "run", return_value=done
        ) as run, redirect_stdout(io.StringIO()):
            self.assertEqual(dev.main(["ecosystem", "--latest", "--only", "openai_sdk"]), 0)
        extras, names, command, lock = ensure.call_args[0]
        self.assertEqual((extras, command, lock), ((), "ecosystem-latest", None))
        self.assertIn("openai", names)
        wanted = ["-m", "ecosystem.runner", "--latest", "--only", "openai_sdk"]
        self.assertEqual(run.call_args[0][0][1:], wanted)

    def test_every_adapter_declares_what_it_imports_and_the_locks_have_it(self) -> None:
        """Each table adapter's REQUIRES names distributions the requirements or the table's lock fix."""
        dev = _dev()
        adapters = sorted(p.stem for p in dev.ADAPTERS.glob("*.py") if not p.stem.startswith("_"))
        locked = dev.locked_versions(dev.ECOSYSTEM_LOCK)
        for adapter in adapters:
            with self.subTest(adapter=adapter):
                requires = dev.adapter_requires(adapter)
                self.assertTrue(requires)
                self.assertEqual([n for n in requires if dev.canonical(n) not in locked], [])
        lines = dev.ecosystem_requirements(["openai_sdk", "anthropic_sdk"])
        self.assertIn("openai==", " ".join(lines))
        self.assertNotIn("litellm", " ".join(lines))

    def test_only_names_are_read_both_ways(self) -> None:
        """`--only NAME` and `--only=NAME` both name an adapter; an unknown one is a clear error."""
        dev = _dev()
        self.assertEqual(dev.only_adapters(["--check", "--only", "a", "--only=b"]), ["a", "b"])
        with self.assertRaisesRegex(SystemExit, "no such adapter; the adapters are"):
            dev.adapter_requires("openai_skd")


if __name__ == "__main__":
    unittest.main()
