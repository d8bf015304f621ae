"""App mode: the environment every SDK reads, the scripts, and an application's own function judged."""

from __future__ import annotations

import functools
import importlib.util
import io
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any, Dict, List, Set

from conformance.app import CLEARED, SDK_ENVIRONMENT, AppConformanceTestCase, FakeProviderEnvironment
from conformance.app import _checks as app_checks
from conformance.errors import ProviderInputError

from . import app_zoo
from .reporting_sites import CheckSites
from .test_judge import call

ROOT = Path(__file__).resolve().parent.parent

#: Every reporting site of app mode's own checks (``tests/reporting_sites.py``).
SITES = CheckSites((app_checks,), app_checks.APP_CHECKS)


class EnvironmentTests(unittest.TestCase):
    def test_every_sdk_variable_names_the_provider_and_is_restored(self) -> None:
        """While on, each SDK's variable names the provider and the clashing ones are gone; then as before."""
        environ = {"OPENAI_BASE_URL": "https://api.openai.com/v1", "GOOGLE_API_KEY": "real-key", "HOME": "/h"}
        before = dict(environ)
        with FakeProviderEnvironment(environ=environ) as env:
            for name, value in SDK_ENVIRONMENT.items():
                with self.subTest(name=name):
                    self.assertEqual(environ[name], value.format(url=env.url))
            self.assertTrue(environ["OPENAI_BASE_URL"].startswith("http://127.0.0.1:"))
            for name in CLEARED:
                self.assertNotIn(name, environ)
        self.assertEqual(environ, before)

    def test_an_unscripted_wire_answers_plainly_and_a_stray_path_is_told_the_routes(self) -> None:
        """An unscripted wire gets the plain answer; a path under no SDK's route a 404 naming the routes."""
        environ: Dict[str, str] = {}
        with FakeProviderEnvironment(environ=environ) as env:
            claude = environ["ANTHROPIC_BASE_URL"]
            status, body = call(claude, "/v1/messages", {"model": "m", "max_tokens": 9})
            self.assertEqual((status, body["type"], body["stop_reason"]), (200, "message", "end_turn"))
            status, body = call(env.url, "/v1/chat/completions", {"model": "m"})
            self.assertEqual(status, 404)
            self.assertIn("/openai", body["error"]["message"])
            self.assertIn("build the client from the environment", body["error"]["message"])

    def test_bad_scripts_are_refused_saying_what_to_do(self) -> None:
        """A misspelt wire or fault, a variant the wire lacks, or times on a quota is refused at once."""
        with FakeProviderEnvironment(environ={}) as env:
            cases = [
                (("openai-chatt", "text"), {}, "did you mean 'openai-chat'"),
                (("openai-chat", "rate-limt"), {}, "did you mean 'rate-limit'"),
                (("anthropic", "quota"), {"variant": "no-such"}, "its variants: billing-402"),
                (("openai-chat", "quota"), {"times": 2}, "times does not apply to 'quota'"),
                (("openai-chat", "stall"), {"read_timeout": -1}, "read_timeout is seconds"),
                (("ollama", "content-filter"), {}, "ollama has no content-filter case"),
            ]
            for args, options, words in cases:
                with self.subTest(args=args, options=options):
                    with self.assertRaisesRegex(ProviderInputError, words):
                        env.script(*args, **options)
            env.script("openai-chat", "stall", read_timeout=5.0)
            with self.assertRaisesRegex(ProviderInputError, "must leave the read timeout"):
                env.run(app_zoo.correct, timeout=2.0)

    def test_a_run_outside_the_environment_is_refused(self) -> None:
        """run() before start() says to use the environment in a with block."""
        with self.assertRaisesRegex(ProviderInputError, "with block"):
            FakeProviderEnvironment(environ={}).run(app_zoo.correct)
        with self.assertRaisesRegex(ProviderInputError, "timeout is seconds"):
            FakeProviderEnvironment(timeout=0)


class TransportTests(unittest.TestCase):
    def test_a_run_over_h2c_is_judged_alike(self) -> None:
        """With http2=True the provider speaks h2c only; a client speaking it is judged as over HTTP/1.1."""
        try:
            import httpx
        except ImportError:
            self.skipTest("httpx is not installed (it is in the test extra)")

        def ask() -> str:
            with httpx.Client(http1=False, http2=True, timeout=5.0) as client:
                reply = client.post(
                    f"{os.environ['OPENAI_BASE_URL']}/chat/completions",
                    json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
                    headers={"authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"},
                )
            if reply.status_code == 429:
                raise RuntimeError("rate limited")
            return str(reply.json()["choices"][0]["message"]["content"])

        with FakeProviderEnvironment(http2=True, environ=os.environ) as env:
            env.script("openai-chat", "text")
            run = env.run(ask)
            self.assertEqual(run.problems, [], run.report())
            self.assertEqual([r.http_version for r in run.requests], ["HTTP/2"])
            env.script("openai-chat", "rate-limit")
            run = env.run(ask)
            self.assertEqual(run.checks, ["retry-relent"], run.report())

    def test_a_function_left_running_is_named_in_the_next_runs_report(self) -> None:
        """A run given up on at its bound is named in the report of a run it overlaps."""
        with FakeProviderEnvironment(environ=os.environ, timeout=0.5) as env:
            env.script("openai-chat", "stall", read_timeout=0.1, after_chunks=0)
            first = env.run(app_zoo.no_read_timeout, timeout=1.2)
            self.assertFalse(first.ended)
            env.script("openai-chat", "text")
            second = env.run(app_zoo.asks_twice)
            self.assertIn("no_read_timeout of an earlier run was still running", second.report())


class ZooTests(unittest.TestCase):
    """The correct application function passes every script; each broken one is caught for its own reason."""

    environment: FakeProviderEnvironment
    sites_seen: Dict[str, Set[str]] = {}

    @classmethod
    def setUpClass(cls) -> None:
        cls.environment = FakeProviderEnvironment(timeout=4.0).start()
        cls.installed = SITES.installed()
        cls.installed.__enter__()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.installed.__exit__(None, None, None)
        cls.environment.close()

    def _run(self, broken: app_zoo.Broken) -> Any:
        env = self.environment
        env.reset()
        env.script(broken.wire, broken.what, **broken.script)
        return env.run(broken.app)

    def test_the_correct_function_passes_every_script(self) -> None:
        """Retries bounded and timed as asked, nothing after a quota, a cut asked again, a stall timed out."""
        for wire, what, options in app_zoo.PASSES:
            with self.subTest(wire=wire, what=what):
                self.environment.reset()
                self.environment.script(wire, what, **dict(options))
                run = self.environment.run(functools.partial(app_zoo.correct, azure=wire.startswith("azure")))
                self.assertEqual(run.problems, [], run.report())
        self.environment.reset()
        self.environment.script("openai-chat", "cancel")
        run = self.environment.run(app_zoo.correct_async)
        self.assertEqual(run.problems, [], run.report())

    def test_each_broken_function_is_caught_by_its_checks_alone(self) -> None:
        """Each classic bug fails exactly the checks it is listed with."""
        for name, broken in app_zoo.BROKEN.items():
            with self.subTest(name=name), SITES.recording() as seen:
                run = self._run(broken)
                self.assertEqual(tuple(run.checks), broken.checks, run.report())
                self.sites_seen[name] = set(seen)

    def test_the_quota_loop_is_named_with_the_request_times(self) -> None:
        """retry-permanent names how many requests came, and when."""
        run = self._run(app_zoo.BROKEN["retries-a-quota-forever"])
        text = next(p.text for _, p in run.problems if p.check == "retry-permanent")
        self.assertRegex(
            text, r"expected one request for a quota failure, which will not come back, got \d+ "
        )
        self.assertRegex(text, r"\(requests at \+0 ms, \+\d+ ms, \+\d+ ms")

    def test_every_reporting_site_is_the_only_thing_catching_some_broken_function(self) -> None:
        """Taking out any one of app mode's reporting sites lets a broken function it alone catches pass."""
        names = [site.name for site in SITES.sites]
        self.assertEqual(len(names), 4, names)
        for site in names:
            check = next(
                c for c, f in app_checks.ROWS.items() if f.__name__ == site.split(".")[1].split("#")[0]
            )
            guards = [n for n, b in app_zoo.BROKEN.items() if check in b.checks]
            self.assertTrue(guards, f"no broken function is caught by {site}")
            with self.subTest(site=site):
                broken = app_zoo.BROKEN[guards[0]]
                with SITES.recording() as seen:
                    self.assertIn(check, self._run(broken).checks)
                self.assertIn(site, seen)
                with SITES.without(site):
                    run = self._run(broken)
                self.assertNotIn(check, run.checks, f"without {site}, {guards[0]} is still caught by {check}")


class MixinTests(unittest.TestCase):
    def test_the_mixin_sets_the_environment_for_the_class_and_names_each_finding_once(self) -> None:
        """setUpClass points the SDKs at the provider, tearDownClass restores it and writes the summary."""
        before = os.environ.get("OPENAI_BASE_URL")
        outcome: List[str] = []

        class Application(AppConformanceTestCase, unittest.TestCase):
            app_timeout = 4.0

            def test_asks_twice(self) -> None:
                outcome.append(os.environ["OPENAI_BASE_URL"])
                self.script("openai-chat", "text")
                self.assertAppConforms(app_zoo.asks_twice)

            def test_asks_twice_again(self) -> None:
                self.script("openai-chat", "text")
                self.assertAppConforms(app_zoo.asks_twice)

            def test_correct(self) -> None:
                self.script("openai-chat", "overloaded")
                self.assertTrue(self.assertAppConforms(app_zoo.correct).ok)

        stderr = io.StringIO()
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Application)
        with redirect_stderr(stderr):
            result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
        self.assertEqual((result.testsRun, len(result.failures), len(result.errors)), (3, 2, 0))
        self.assertIn("[no-retry]", result.failures[0][1])
        self.assertTrue(outcome[0].startswith("http://127.0.0.1:"))
        self.assertEqual(os.environ.get("OPENAI_BASE_URL"), before)
        summary = stderr.getvalue()
        self.assertIn("conformance app mode: 1 finding", summary)
        self.assertEqual(summary.count("[no-retry]"), 1, summary)
        self.assertIn("(seen 2 times)", summary)


HAVE_PYTEST = importlib.util.find_spec("pytest") is not None

#: A test file of a project's own: a stdlib application function, the fixture, no import of the kit.
PYTEST_FILE = textwrap.dedent(
    """
    import json, os, urllib.request

    def ask():
        body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
        request = urllib.request.Request(
            os.environ["OPENAI_BASE_URL"] + "/chat/completions", body.encode(),
            {"authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())["choices"][0]["message"]["content"]

    def ask_twice():
        ask()
        return ask()

    def test_answers(fake_provider_environment):
        fake_provider_environment.script("openai-chat", "text")
        run = fake_provider_environment.run(ask)
        assert run.ok, run.report()
        assert run.result.startswith("It is")

    def test_asks_twice(fake_provider_environment):
        fake_provider_environment.script("openai-chat", "text")
        fake_provider_environment.run(ask_twice).raise_for_problems()

    def test_asks_twice_again(fake_provider_environment):
        fake_provider_environment.script("openai-chat", "text")
        fake_provider_environment.run(ask_twice).raise_for_problems()
    """
)


@unittest.skipUnless(HAVE_PYTEST, "pytest is not installed (it is in the test extra and locks/test.txt)")
class PytestPluginTests(unittest.TestCase):
    def test_the_fixture_comes_from_the_entry_point_and_the_summary_names_each_finding_once(self) -> None:
        """pytest finds fake_provider_environment with no conftest, and its summary lists no-retry once."""
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "test_application.py"
            path.write_text(PYTEST_FILE, encoding="utf-8")
            done = subprocess.run(
                [sys.executable, "-W", "error", "-m", "pytest", "-p", "no:cacheprovider", "-q", str(path)],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=120,
            )
        out = done.stdout
        self.assertEqual(done.returncode, 1, out + done.stderr)
        self.assertIn("1 passed", out)
        self.assertIn("2 failed", out)
        # The plugin's own section only: pytest's short summary after it repeats each failing
        # test's message, cut to the terminal's width, except where CI is set in the
        # environment: there pytest prints the messages whole, [no-retry] included.
        start = out.index("conformance app mode")
        end = out.find("short test summary info", start)
        summary = out[start : end if end != -1 else len(out)]
        self.assertIn("conformance app mode: 1 finding", summary)
        self.assertEqual(summary.count("[no-retry]"), 1, summary)
        self.assertIn("(seen 2 times)", summary)

    def test_the_package_imports_without_pytest(self) -> None:
        """conformance and conformance.app load without pytest: only pytest loads the plugin."""
        code = (
            "import sys; sys.modules['pytest'] = None; import conformance, conformance.app; "
            "from conformance.app import AppConformanceTestCase, FakeProviderEnvironment; print('ok')"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.stdout.strip(), "ok", done.stderr)


if __name__ == "__main__":
    unittest.main()
