"""The command line: the matrix, run MODULE:NAME, serve."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Dict, List
from unittest import mock

from conformance import BackendConformanceTarget, openai_chat_wire
from conformance.__main__ import main
from conformance._targets import cases_of, reference_loop_targets
from conformance.gate import STAGES

from .test_provider_support import asyncio_debug_off_for_module

ROOT = Path(__file__).resolve().parent.parent
#: The matrices here run hundreds of cases in this process and the ones it forks.
setUpModule, tearDownModule = asyncio_debug_off_for_module()


class Broken:
    """A backend that fails every case."""

    def chat(self, request: object) -> None:
        raise NotImplementedError

    def chat_stream(self, request: object) -> None:
        raise NotImplementedError


BROKEN_TARGET = BackendConformanceTarget("broken", openai_chat_wire, lambda url: Broken())

#: Set by a test to let the hanging backend go.
RELEASE = threading.Event()


class Hanging:
    """A backend whose calls wait until the test releases them."""

    def chat(self, request: object) -> None:
        RELEASE.wait(10)
        raise NotImplementedError

    def chat_stream(self, request: object) -> None:
        RELEASE.wait(10)
        raise NotImplementedError


HANGING_TARGET = BackendConformanceTarget("hanging", openai_chat_wire, lambda url: Hanging(), timeout=1.0)


class Terminal(io.StringIO):
    """Output that says it is a terminal, and tells when something was written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.written.set()
        return super().write(text)


def usage_error(argv: List[str]) -> str:
    """Run the command line expecting a usage error; return what it printed to stderr."""
    err = io.StringIO()
    with redirect_stderr(err):
        try:
            main(argv, out=io.StringIO())
        except SystemExit as exc:
            if exc.code != 2:
                raise AssertionError(f"expected exit status 2, got {exc.code!r}") from None
            return err.getvalue()
    raise AssertionError("expected a usage error, got none")


class MatrixTests(unittest.TestCase):
    def test_matrix_prints_every_case_and_exits_zero(self) -> None:
        """One wire, one transport: a row per case, a pass in each, and the closing count."""
        out = io.StringIO()
        status = main(["--wire", "openai-chat", "--transport", "http/1.1"], out=out)
        text = out.getvalue()
        self.assertEqual(status, 0, text)
        self.assertRegex(text, r"text/chat\s+pass")
        self.assertRegex(text, r"corrupt-frame/stream\s+skip")
        self.assertRegex(text, r"loop forced-tool/stream\s+pass")
        self.assertRegex(text, r"\d+ cases: \d+ passed, 0 failed, \d+ skipped in [\d.]+ s")

    def test_suite_runs_one_suite_of_the_matrix(self) -> None:
        """--suite backend runs the backend cases alone, --suite loop the agent-loop cases alone."""
        counts: Dict[str, int] = {}
        for suite in ("backend", "loop"):
            out = io.StringIO()
            status = main(["--suite", suite, "--wire", "openai-chat", "--transport", "h2c"], out=out)
            text = out.getvalue()
            self.assertEqual(status, 0, text)
            summary = re.search(r"^(\d+) cases: ", text, re.M)
            assert summary is not None, text
            counts[suite] = int(summary.group(1))
            if suite == "backend":
                self.assertNotRegex(text, r"loop \S+\s+(pass|FAIL|skip)")
            else:
                self.assertRegex(text, r"loop forced-tool/stream\s+pass")
                self.assertNotRegex(text, r"(?m)^text/chat\s+(pass|FAIL|skip)")
        self.assertEqual(counts["loop"], sum(len(stage.modes) for stage in STAGES.values()))
        self.assertIn("invalid choice: 'loops'", usage_error(["--suite", "loops"]))

    def test_unknown_wire_is_refused_with_the_known_ones(self) -> None:
        """A misspelt wire is a usage error (status 2) that names the wires there are."""
        self.assertIn("unknown wire 'openai'; known: openai-chat", usage_error(["--wire", "openai"]))

    def test_progress_comes_first_and_a_line_per_target(self) -> None:
        """The run says what it starts at once, then one line per target as it finishes."""
        out = io.StringIO()
        main(["--wire", "ollama"], out=out)
        lines = out.getvalue().splitlines()
        # Each transport has a backend target and a reference-loop target.
        self.assertRegex(lines[0], r"^running \d+ cases of 4 targets, \d+ at a time$")
        self.assertRegex(out.getvalue(), r"reference ollama over http/1.1: \d+ passed, 0 failed, \d+ skipped")
        self.assertRegex(out.getvalue(), r"reference ollama over h2c: \d+ passed, 0 failed, \d+ skipped")

    def test_skip_reasons_are_shown_under_the_matrix(self) -> None:
        """Each skip reason is printed once, with the cases it applies to."""
        out = io.StringIO()
        main(["--wire", "ollama", "--transport", "http/1.1"], out=out)
        text = out.getvalue()
        self.assertIn("\nskipped:\n", text)
        self.assertRegex(text, r"  Ollama has no corrupt-frame case .*: ollama http/1.1 corrupt-frame/stream")

    def test_colour_on_a_terminal_only_and_never_with_no_color(self) -> None:
        """A terminal gets coloured outcomes; piped output and NO_COLOR get none."""
        argv = ["--wire", "openai-chat", "--transport", "http/1.1"]
        # Three matrices of each target's first cases: the colours, not the cases, are at stake.
        first = mock.patch("conformance._cli.matrix.cases_of", lambda target: cases_of(target)[:3])
        with first, mock.patch.dict(os.environ, {"NO_COLOR": ""}):
            tty = Terminal()
            main(argv, out=tty)
            piped = io.StringIO()
            main(argv, out=piped)
        with first, mock.patch.dict(os.environ, {"NO_COLOR": "1"}):
            no_color = Terminal()
            main(argv, out=no_color)
        self.assertIn("\x1b[32mpass\x1b[0m", tty.getvalue())
        self.assertNotIn("\x1b[", piped.getvalue())
        self.assertNotIn("\x1b[", no_color.getvalue())

    def test_help_lists_the_wires_and_scenarios(self) -> None:
        """--help names every wire, and serve --help every scenario."""
        for argv, names in (
            (["--help"], ["openai-chat", "bedrock-converse"]),
            (["serve", "--help"], ["tool-call-with-stop", "context-overflow", "ollama"]),
        ):
            shown = io.StringIO()
            with redirect_stdout(shown), self.assertRaises(SystemExit) as done:
                main(argv, out=io.StringIO())
            self.assertEqual(done.exception.code, 0)
            text = " ".join(shown.getvalue().split()).replace("- ", "-")
            for name in names:
                self.assertIn(name, text)


class RunTests(unittest.TestCase):
    def test_run_a_target_fails_with_the_messages(self) -> None:
        """run MODULE:NAME on a broken target exits 1 and prints each failure."""
        out = io.StringIO()
        status = main(["run", "tests.test_main:BROKEN_TARGET"], out=out)
        self.assertEqual(status, 1)
        self.assertIn("expected a reply, got NotImplementedError", out.getvalue())

    def test_run_spreads_a_target_over_processes(self) -> None:
        """run --processes 2 splits a target's cases over two fresh worker processes, same verdict."""
        out = io.StringIO()
        status = main(["run", "tests.test_main:BROKEN_TARGET", "--processes", "2"], out=out)
        self.assertEqual(status, 1)
        self.assertIn("in each of 2 processes", out.getvalue())
        self.assertIn("expected a reply, got NotImplementedError", out.getvalue())

    def test_the_matrix_spreads_over_processes(self) -> None:
        """--processes 2 runs the reference matrix in worker processes and prints the same matrix."""
        out = io.StringIO()
        # One wire's four targets (backend and loop, over each transport) make two per process.
        status = main(["--processes", "2", "--wire", "ollama"], out=out)
        self.assertEqual(status, 0, out.getvalue())
        self.assertIn("in each of 2 processes", out.getvalue())
        self.assertIn("reference ollama over h2c:", out.getvalue())
        self.assertRegex(out.getvalue(), r"\d+ cases: \d+ passed, 0 failed")

    def test_preload_leaves_a_first_case_nothing_of_the_library_to_import(self) -> None:
        """What preload imports before the workers fork is all a first case of either suite loads."""
        # The cases are listed before the workers fork, as run_matrix lists them.
        code = (
            "import sys; from conformance._targets import cases_of, outcome, preload, "
            "reference_loop_targets, reference_targets; "
            "targets = reference_targets(['openai-chat'], ['h2c']) "
            "+ reference_loop_targets(['openai-chat'], ['h2c']); "
            "cases = [c for _, t in targets for c in cases_of(t)]; "
            "preload(targets); before = set(sys.modules); "
            "[outcome(c) for c in cases if c.name.startswith(('text/', 'tool-', 'abort/', 'cancel/'))]; "
            "print(sorted(m for m in set(sys.modules) - before if m.startswith('conformance')))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        self.assertEqual(done.stdout.strip(), "[]", done.stderr)

    def test_a_large_matrix_uses_every_cpu_by_default(self) -> None:
        """The default matrix (12 targets) gets two processes per CPU; a small one stays in-process."""
        from conformance._cli.shared import AUTO_PROCESSES_FROM, MAX_PROCESSES, _default_processes

        self.assertEqual(_default_processes(12), min(2 * (os.cpu_count() or 1), MAX_PROCESSES, 12))
        self.assertEqual(
            _default_processes(AUTO_PROCESSES_FROM),
            min(2 * (os.cpu_count() or 1), MAX_PROCESSES, AUTO_PROCESSES_FROM),
        )
        self.assertEqual(_default_processes(AUTO_PROCESSES_FROM - 1), 1)

    def test_run_a_testcase_class(self) -> None:
        """run MODULE:NAME on a TestCase class runs it with unittest."""
        out = io.StringIO()
        status = main(["run", "tests.test_testcase:HookedConformance"], out=out)
        self.assertEqual(status, 0, out.getvalue())
        self.assertIn("OK", out.getvalue())

    def test_run_refuses_what_is_not_a_target(self) -> None:
        """A name that is neither a target nor a TestCase, or does not load, is a usage error."""
        self.assertIn("expected a BackendConformanceTarget", usage_error(["run", "tests.test_main:ROOT"]))
        self.assertIn("expected MODULE:NAME", usage_error(["run", "tests.test_main"]))
        self.assertIn("cannot import 'tests.no_such_module'", usage_error(["run", "tests.no_such_module:X"]))

    def test_run_on_a_hanging_target_says_so_before_any_case_ends(self) -> None:
        """The first line is out while the backend still hangs in its first case."""
        RELEASE.clear()
        out = Terminal()
        worker = threading.Thread(target=main, args=(["run", "tests.test_main:HANGING_TARGET"], out))
        worker.start()
        try:
            self.assertTrue(out.written.wait(30))
            self.assertFalse(RELEASE.is_set())
            first = out.getvalue().splitlines()[0]
            self.assertRegex(first, r"^running \d+ cases of 1 target, \d+ at a time$")
        finally:
            RELEASE.set()
            worker.join(60)


#: The reference loop over Ollama, HTTP/1.1: an AgentLoopTarget for ``run``.
REFERENCE_LOOP = reference_loop_targets(["ollama"], ["http/1.1"])[0][1]


class ResultFileTests(unittest.TestCase):
    """--json and --junit on every command that runs cases, and options before the command."""

    def setUp(self) -> None:
        self.folder = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.folder)

    def test_a_failing_run_still_writes_both_files(self) -> None:
        """run with --json and --junit exits 1 on a broken target and writes every case to both."""
        junit, results = self.folder / "r.xml", self.folder / "r.json"
        out = io.StringIO()
        argv = ["run", "tests.test_main:BROKEN_TARGET", "--junit", str(junit), "--json", str(results)]
        status = main(argv, out=out)
        self.assertEqual(status, 1)
        root = ET.parse(junit).getroot()
        cases = len(cases_of(BROKEN_TARGET))
        self.assertEqual(root.get("tests"), str(cases))
        self.assertGreater(int(root.get("failures") or 0), 0)
        failure = root.find("testsuite/testcase[@name='text/chat']/failure")
        assert failure is not None
        self.assertIn("expected a reply, got NotImplementedError", failure.text or "")
        document = json.loads(results.read_text(encoding="utf-8"))
        self.assertEqual(document["verdict"], "fail")
        self.assertEqual(document["counts"]["cases"], cases)
        self.assertIn(f"wrote JUnit XML to {junit}", out.getvalue())

    def test_options_before_the_command_are_taken(self) -> None:
        """--json, --junit and --jobs given before the command's name count as if given after it."""
        junit = self.folder / "r.xml"
        argv = ["--jobs", "2", "--junit", str(junit), "run", "tests.test_main:BROKEN_TARGET"]
        status = main(argv, out=io.StringIO())
        self.assertEqual(status, 1)
        self.assertTrue(junit.exists())
        results = self.folder / "m.json"
        out = io.StringIO()
        argv = ["--json", str(results), "--suite", "backend", "--wire", "ollama", "--transport", "http/1.1"]
        self.assertEqual(main(argv, out=out), 0, out.getvalue())
        self.assertEqual(json.loads(results.read_text(encoding="utf-8"))["verdict"], "pass")

    def test_an_option_of_a_command_before_its_name_is_named(self) -> None:
        """An option only a command has, given before the command, is named with where it goes."""
        self.assertIn("--smoke belongs to the gate command", usage_error(["--smoke", "gate", "x:y"]))
        self.assertIn("unknown option --frobnicate", usage_error(["--frobnicate", "run", "x:y"]))

    def test_a_report_path_that_cannot_be_written_is_refused_first(self) -> None:
        """A --junit in a missing folder is a usage error before any case runs."""
        missing = str(self.folder / "no" / "r.xml")
        argv = ["run", "tests.test_main:BROKEN_TARGET", "--junit", missing]
        self.assertIn("does not exist", usage_error(argv))

    def test_run_takes_an_agent_loop_target(self) -> None:
        """run MODULE:NAME runs an AgentLoopTarget's stages, as gate does."""
        junit = self.folder / "loop.xml"
        out = io.StringIO()
        status = main(["run", "tests.test_main:REFERENCE_LOOP", "--junit", str(junit)], out=out)
        self.assertEqual(status, 0, out.getvalue())
        names = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase")]
        self.assertEqual(sorted(names), sorted(c.name for c in cases_of(REFERENCE_LOOP)))

    def test_run_a_testcase_class_writes_junit(self) -> None:
        """A TestCase class run with --junit gets a testcase per test, named by its id."""
        junit = self.folder / "tc.xml"
        argv = ["run", "tests.test_testcase:HookedConformance", "--junit", str(junit)]
        status = main(argv, out=io.StringIO())
        self.assertEqual(status, 0)
        root = ET.parse(junit).getroot()
        names = [c.get("name") for c in root.iter("testcase")]
        self.assertIn("test_text_chat", names)
        self.assertEqual(root.get("failures"), "0")


class ServeTests(unittest.TestCase):
    def test_serve_refuses_a_remote_host_without_the_flag(self) -> None:
        """Binding beyond loopback needs --allow-remote."""
        argv = ["serve", "--wire", "openai-chat", "--scenario", "text", "--host", "0.0.0.0"]
        self.assertRegex(usage_error(argv), "refusing to bind 0.0.0.0.*--allow-remote")

    def test_serve_checks_scenario_and_mode(self) -> None:
        """An unknown scenario, or a mode the scenario lacks, is refused."""
        argv = ["serve", "--wire", "openai-chat", "--scenario", "txt"]
        self.assertIn("unknown scenario 'txt'", usage_error(argv))
        self.assertIn(
            "stream-error runs in stream mode only",
            usage_error(["serve", "--wire", "openai-chat", "--scenario", "stream-error"]),
        )

    def test_serve_asks_a_latency_scenario_for_the_read_timeout(self) -> None:
        """slow-first-token and stall need --read-timeout, in range: refused without it, saying so."""
        for scenario in ("slow-first-token", "stall"):
            with self.subTest(scenario=scenario):
                argv = ["serve", "--wire", "openai-chat", "--scenario", scenario]
                self.assertIn("pass --read-timeout SECONDS", usage_error(argv))
                self.assertIn("--read-timeout must be above 0", usage_error([*argv, "--read-timeout", "0"]))

    def test_serve_list_shows_every_variant_with_its_source(self) -> None:
        """serve --list names each scenario's variants per mode, the default first, and their sources."""
        out = io.StringIO()
        self.assertEqual(main(["serve", "--list", "--wire", "anthropic"], out=out), 0)
        shown = out.getvalue()
        self.assertIn("quota --mode chat --variant credit-balance-400 (the default): ", shown)
        self.assertIn("quota --mode stream --variant tier-cap-429: ", shown)
        self.assertIn("seen in ", shown)
        self.assertIn("  auth --mode chat\n", shown)
        everything = io.StringIO()
        self.assertEqual(main(["serve", "--list"], out=everything), 0)
        self.assertIn("ollama (Ollama", everything.getvalue())
        self.assertIn("content-filter: not played (", everything.getvalue())

    def test_serve_refuses_a_variant_the_scenario_lacks(self) -> None:
        """--variant is checked against the scenario's variants in that mode, and --wire is asked for."""
        argv = ["serve", "--wire", "anthropic", "--scenario", "quota", "--variant", "tier-cap-42"]
        self.assertIn("did you mean 'tier-cap-429'?", usage_error(argv))
        argv = ["serve", "--wire", "anthropic", "--scenario", "auth", "--variant", "x"]
        self.assertIn("one shape only", usage_error(argv))
        self.assertIn("serve needs --wire (or --list", usage_error(["serve", "--scenario", "text"]))

    def test_serve_plays_the_variant_named(self) -> None:
        """serve --variant answers in that shape: Anthropic's tier cap as its 429, not the default 400."""
        argv = ["serve", "--wire", "anthropic", "--scenario", "quota", "--variant", "tier-cap-429"]
        process = subprocess.Popen(
            [sys.executable, "-m", "conformance", *argv],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            self.assertIn("quota/chat [tier-cap-429: ", first)
            url = first.split(" at ", 1)[1].split(";", 1)[0]
            body = json.dumps({"model": "m", "max_tokens": 10, "messages": []}).encode()
            request = urllib.request.Request(f"{url}/v1/messages", body, {"content-type": "application/json"})
            with self.assertRaises(urllib.error.HTTPError) as raised:
                urllib.request.urlopen(request, timeout=10)
            self.assertEqual(raised.exception.code, 429)
            answer = json.loads(raised.exception.read())
            raised.exception.close()
            self.assertEqual(answer["error"]["type"], "rate_limit_error")
        finally:
            process.terminate()
            process.communicate(timeout=10)

    def test_serve_caps_the_request_record(self) -> None:
        """serve starts its provider with max_requests, so a long session keeps a bounded record."""
        from unittest import mock

        import conformance.provider

        started = []
        real = conformance.provider.start_fake_provider

        def start(*args: object, **kwargs: object) -> object:
            provider = real(*args, **kwargs)  # type: ignore[arg-type]
            started.append(provider)
            return provider

        with (
            mock.patch.object(conformance.provider, "start_fake_provider", start),
            mock.patch.object(time, "sleep", side_effect=KeyboardInterrupt),
        ):
            main(["serve", "--wire", "openai-chat", "--scenario", "text"], out=io.StringIO())
        self.assertEqual(started[0]._hub.max_requests, 1000)

    def test_serve_answers_a_client_and_logs_the_request(self) -> None:
        """serve prints its URL, answers with a fresh request id and date each time, and logs each request."""
        process = subprocess.Popen(
            [sys.executable, "-m", "conformance", "serve", "--wire", "openai-chat", "--scenario", "text"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            self.assertIn("serving OpenAI Chat Completions text/chat at http://127.0.0.1:", first)
            url = first.split(" at ", 1)[1].split(";", 1)[0]
            body = json.dumps({"model": "m", "messages": []}).encode()
            request = urllib.request.Request(
                f"{url}/v1/chat/completions", body, {"content-type": "application/json"}
            )
            ids = []
            for _ in range(2):
                with urllib.request.urlopen(request, timeout=10) as response:
                    answer = json.loads(response.read())
                    ids.append(response.headers["x-request-id"])
                    self.assertRegex(response.headers["date"], r"^\w{3}, \d{2} \w{3} \d{4} [\d:]{8} GMT$")
            self.assertEqual(answer["object"], "chat.completion")
            self.assertNotEqual(ids[0], ids[1])
            self.assertTrue(ids[0].startswith("req_"), ids[0])
            deadline = time.monotonic() + 10
            line = process.stdout.readline()
            while "POST" not in line and time.monotonic() < deadline:
                line = process.stdout.readline()
            self.assertIn("POST /v1/chat/completions (HTTP/1.1)", line)
            while "sent 200" not in line and time.monotonic() < deadline:
                line = process.stdout.readline()
            self.assertIn("sent 200 application/json for POST /v1/chat/completions", line)
            self.assertIn("#0 chat.completion response=chatcmpl-", process.stdout.readline())
        finally:
            process.terminate()
            process.communicate(timeout=10)

    def test_record_proxies_and_writes_a_fixture(self) -> None:
        """record prints its URL, forwards to the upstream and writes one fixture per exchange."""
        import tempfile

        from conformance.provider import JsonReply, start_fake_provider

        with tempfile.TemporaryDirectory() as folder, start_fake_provider() as upstream:
            upstream.reply(JsonReply({"object": "chat.completion"}))
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "conformance",
                    "record",
                    "--wire",
                    "openai-chat",
                    "--upstream",
                    upstream.url,
                    "--out",
                    folder,
                    "--scenario",
                    "forced-tool",
                    "--run-id",
                    "gate-run-7",
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                assert process.stdout is not None
                first = process.stdout.readline()
                self.assertIn("recording openai-chat at http://127.0.0.1:", first)
                url = first.split(" at ", 1)[1].split(" ", 1)[0]
                request = urllib.request.Request(
                    f"{url}/v1/chat/completions",
                    b'{"model": "m"}',
                    {"content-type": "application/json", "authorization": "Bearer sk-secret"},
                )
                with urllib.request.urlopen(request, timeout=10) as response:
                    self.assertEqual(json.loads(response.read()), {"object": "chat.completion"})
                self.assertIn("wrote", process.stdout.readline())
            finally:
                process.terminate()
                process.communicate(timeout=10)
            self.assertEqual(upstream.next_request().headers["authorization"], "Bearer sk-secret")
            [name] = os.listdir(folder)
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                text = handle.read()
            self.assertNotIn("sk-secret", text)
            # An agent-loop stage is a scenario to stamp too, with the loop's tool run id.
            self.assertEqual(json.loads(text)["stamp"]["scenario"], "forced-tool")
            self.assertEqual(json.loads(text)["stamp"]["run_id"], "gate-run-7")

    def test_record_checks_its_arguments(self) -> None:
        """An unknown wire or scenario, or a bad upstream, stops with a message."""
        for argv in (
            ["--wire", "nope", "--upstream", "http://127.0.0.1:1"],
            ["--wire", "openai-chat", "--upstream", "http://127.0.0.1:1", "--scenario", "txt"],
            ["--wire", "openai-chat", "--upstream", "ftp://x"],
        ):
            with self.subTest(argv=argv):
                self.assertIn("python -m conformance record", usage_error(["record", *argv]))
        self.assertIn(
            "or an agent-loop stage: text, forced-tool",
            usage_error(
                ["record", "--wire", "openai-chat", "--upstream", "http://127.0.0.1:1", "--scenario", "txt"]
            ),
        )


def sse_data(raw: str) -> List[Dict[str, object]]:
    """The JSON of each ``data:`` line of an SSE body, ``[DONE]`` left out."""
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


class WireOptionTests(unittest.TestCase):
    def served_stream(self, argv: List[str], banner: str) -> List[Dict[str, object]]:
        """Run ``serve`` with ``argv``, check its first line holds ``banner``, and return the
        SSE chunks it streams to one Chat Completions request."""
        process = subprocess.Popen(
            [sys.executable, "-m", "conformance", "serve", *argv, "--mode", "stream", "--timeout", "30"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            self.assertIn(banner, first)
            url = first.split(" at ", 1)[1].split(";", 1)[0]
            body = json.dumps({"model": "m", "messages": [], "stream": True}).encode()
            request = urllib.request.Request(
                f"{url}/v1/chat/completions", body, {"content-type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                return sse_data(response.read().decode("utf-8"))
        finally:
            process.terminate()
            process.communicate(timeout=10)

    def test_serve_plays_an_openai_compatible_servers_own_shape(self) -> None:
        """serve --servers mistral --variant mistral streams Mistral's shape: usage on the finish chunk."""
        chunks = self.served_stream(
            ["--wire", "openai-chat", "--servers", "mistral", "--scenario", "text", "--variant", "mistral"],
            "serving OpenAI Chat Completions (--servers mistral) text/stream [mistral: ",
        )
        self.assertTrue(chunks)
        self.assertTrue(all(chunk["choices"] for chunk in chunks), "Mistral sends no choices: [] chunk")
        last = chunks[-1]
        self.assertIn("usage", last, "usage rides on the finish chunk, though the request did not ask")
        self.assertEqual(last["choices"][0]["finish_reason"], "stop")  # type: ignore[index]

    def test_serve_plays_the_reasoning_of_a_server_that_sends_reasoning_content(self) -> None:
        """serve --reasoning-content plays the reasoning scenario, whose deltas carry reasoning_content."""
        chunks = self.served_stream(
            ["--wire", "openai-chat", "--reasoning-content", "--scenario", "reasoning"],
            "(--reasoning-content) reasoning/stream [reasoning-content: ",
        )
        thought = "".join(
            str(c["choices"][0]["delta"].get("reasoning_content") or "")  # type: ignore[index]
            for c in chunks
            if c["choices"]
        )
        self.assertTrue(thought)

    def test_serve_list_names_the_variants_each_option_adds(self) -> None:
        """serve --list shows each variant an option adds, with the option; a configured wire, its own."""
        out = io.StringIO()
        self.assertEqual(main(["serve", "--list", "--wire", "openai-chat"], out=out), 0)
        shown = out.getvalue()
        self.assertIn("  text --mode chat\n", shown)
        self.assertIn("with a configuration of openai-chat (give its option to serve one):", shown)
        self.assertIn("  text --mode stream --variant mistral (with --servers mistral): Mistral: ", shown)
        openai = "text --mode chat --variant openai (with --servers mistral, groq or deepseek, the default): "
        self.assertIn(openai, shown)
        in_stream = "context-overflow --mode stream --variant llama-cpp-in-stream (with --servers llama.cpp)"
        self.assertIn(in_stream, shown)
        reasoning = "reasoning --mode chat --variant reasoning-content (with --reasoning-content, the default"
        self.assertIn(reasoning, shown)
        self.assertIn("  --stage forced-tool --mode chat\n", shown)
        configured = io.StringIO()
        argv = ["serve", "--list", "--wire", "openai-chat", "--servers", "groq", "--scenario", "text"]
        self.assertEqual(main(argv, out=configured), 0)
        listed = configured.getvalue()
        self.assertIn("openai-chat (OpenAI Chat Completions), with --servers groq:\n", listed)
        self.assertIn("  text --mode chat --variant openai (the default): ", listed)
        self.assertIn("  text --mode chat --variant groq: ", listed)
        self.assertNotIn("with a configuration", listed)
        plain = io.StringIO()
        self.assertEqual(main(["serve", "--list", "--wire", "anthropic"], out=plain), 0)
        self.assertNotIn("with a configuration", plain.getvalue())

    def test_an_option_is_refused_where_it_configures_nothing(self) -> None:
        """Another wire, a stage, a bad server, a variant without its option, run and gate: each says why."""
        text = ["--scenario", "text"]
        self.assertIn(
            "--servers mistral configures the openai-chat wire, and serve plays anthropic: add --wire "
            "openai-chat",
            usage_error(["serve", "--wire", "anthropic", "--servers", "mistral", *text]),
        )
        self.assertIn(
            "the matrix runs anthropic",
            usage_error(["--wire", "anthropic", "--reasoning-content"]),
        )
        misspelt = usage_error(["serve", "--wire", "openai-chat", "--servers", "mistal", *text])
        self.assertIn("did you mean 'mistral'?", misspelt)
        self.assertIn(
            "--servers takes one or more server names",
            usage_error(["serve", "--wire", "openai-chat", "--servers", ",", *text]),
        )
        self.assertIn(
            "leave --servers out with --stage",
            usage_error(["serve", "--wire", "openai-chat", "--servers", "groq", "--stage", "forced-tool"]),
        )
        self.assertIn(
            "plays the variant 'mistral' of text/chat only with --servers mistral: add it",
            usage_error(["serve", "--wire", "openai-chat", *text, "--variant", "mistral"]),
        )
        for command in (["run", "tests.test_main:BROKEN_TARGET"], ["gate", "tests.test_main:BROKEN_TARGET"]):
            with self.subTest(command=command[0]):
                self.assertIn(
                    f"{command[0]} uses the target's own wire: give the target "
                    "wire=OpenAIChatWire(servers=('mistral', 'groq'))",
                    usage_error([*command, "--servers", "mistral,groq"]),
                )
        self.assertIn(
            "run uses the target's own wire",
            usage_error(["--reasoning-content", "run", "tests.test_main:BROKEN_TARGET"]),
        )

    def test_the_matrix_runs_a_configured_wire_in_its_workers_too(self) -> None:
        """--servers and --reasoning-content reach the reference targets, in this process and in workers."""
        argv = ["--wire", "openai-chat", "--servers", "mistral,llama.cpp", "--reasoning-content"]
        argv += ["--suite", "backend", "--transport", "http/1.1"]
        for processes in ("1", "2"):
            out = io.StringIO()
            status = main([*argv, "--processes", processes], out=out)
            text = out.getvalue()
            with self.subTest(processes=processes):
                self.assertEqual(status, 0, text)
                name = "reference openai-chat (--servers mistral,llama.cpp --reasoning-content) over http/1.1"
                self.assertIn(name, text)
                self.assertRegex(text, r"(?m)^reasoning/stream\s+pass")



if __name__ == "__main__":
    unittest.main()
