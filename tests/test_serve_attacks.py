"""serve under attack: what a CI meets (odd text, a second client, big bodies, SIGTERM) gets a
clear answer and a verdict, and the reports are written whatever the text holds."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, List, TextIO, Tuple

from conformance.__main__ import main
from conformance._judge import DETAIL_MAX_CHARS, JUDGE_MAX_BODY_BYTES
from conformance.gate._remote import StageSession
from conformance.gate.tools import GateToolset
from conformance.provider import start_fake_provider
from conformance.wires import WIRES
from tests.test_judge import BOUND, Serve, call, chat_loop

ROOT = Path(__file__).resolve().parent.parent


def post_raw(url: str, path: str, data: bytes) -> Tuple[int, Any]:
    """POST ``data`` as it is: the status and the JSON answer."""
    request = urllib.request.Request(url + path, data, {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            body = error.read()
        return error.code, json.loads(body) if body.startswith(b"{") else body.decode("latin-1")


class StrictServe(Serve):
    """``main(["serve", ...])`` in a thread, printing to a UTF-8 stream that refuses what UTF-8
    cannot hold, as a terminal's does; a crash is kept for the assertion."""

    def _output(self) -> TextIO:
        self.raw = io.BytesIO()
        return io.TextIOWrapper(self.raw, encoding="utf-8", errors="strict", write_through=True)

    def text(self) -> str:
        return self.raw.getvalue().decode("utf-8", "replace")

    def _run(self, argv: List[str]) -> None:
        try:
            super()._run(argv)
        except BaseException as exc:  # what a crash would be: kept for the assertion
            self.error = exc

    def end(self, bound: float = BOUND) -> int:
        self.thread.join(bound)
        assert self.error is None, f"serve raised {self.error!r}: {self.text()}"
        return super().end(0)


class ReportTextTests(unittest.TestCase):
    def test_a_lone_surrogate_in_the_outcome_leaves_the_verdict_and_the_reports_whole(self) -> None:
        """ "\\ud800" (valid JSON) in error.message: reports written, printed escaped, the verdict stands."""
        with tempfile.TemporaryDirectory() as folder:
            paths = Path(folder) / "v.json", Path(folder) / "v.xml"
            serve = StrictServe(
                "--wire", "openai-chat", "--stage", "text", "--timeout", str(BOUND),
                "--json", str(paths[0]), "--junit", str(paths[1]),
            )  # fmt: skip
            status, verdict = post_raw(
                serve.url,
                "/conformance/outcome",
                b'{"error": {"name": "Boom", "message": "bad \\ud800 byte"}}',
            )
            self.assertEqual(status, 200, verdict)
            self.assertEqual(serve.end(), 1)
            document = json.loads(paths[0].read_text(encoding="utf-8"))
            junit = paths[1].read_text(encoding="utf-8")
        self.assertEqual(document["verdict"], "fail")
        self.assertEqual(verdict["verdict"], "fail")
        self.assertIn("\ud800", document["cases"][0]["detail"])
        self.assertIn("\\ud800", junit)
        self.assertIn("bad \\ud800 byte", serve.text())
        self.assertIn("verdict: openai-chat text/chat FAILED", serve.text())

    def test_terminal_escapes_and_nul_in_the_outcome_are_printed_escaped(self) -> None:
        """ESC (ANSI CSI, OSC), BEL and NUL in a reported message reach serve's output as \\xNN."""
        serve = StrictServe("--wire", "openai-chat", "--stage", "text", "--timeout", str(BOUND))
        message = "x\x1b[2J\x1b]0;owned\x07\x00\x9by"
        call(serve.url, "/conformance/outcome", {"error": {"name": "Boom", "message": message}})
        self.assertEqual(serve.end(), 1)
        printed = serve.text()
        for raw in ("\x1b", "\x07", "\x00", "\x9b"):
            self.assertNotIn(raw, printed)
        self.assertIn("x\\x1b[2J\\x1b]0;owned\\x07\\x00\\x9by", printed)

    def test_a_huge_verdict_text_is_cut_where_it_is_printed_and_written(self) -> None:
        """A 3 MB final text that a check quotes: the verdict's text is cut, and says so."""
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "v.json"
            serve = StrictServe(
                "--wire", "openai-chat", "--stage", "text", "--timeout", str(BOUND), "--json", str(path)
            )
            report = {**chat_loop(serve.url), "text": "y" * (3 * 1024 * 1024)}
            _, verdict = call(serve.url, "/conformance/outcome", report)
            self.assertEqual(serve.end(), 1)
            document = json.loads(path.read_text(encoding="utf-8"))
        detail = document["cases"][0]["detail"]
        self.assertLess(len(detail), DETAIL_MAX_CHARS + 200)
        self.assertIn(f"a verdict's text is kept to {DETAIL_MAX_CHARS} characters", detail)
        self.assertLess(len(verdict["detail"]), DETAIL_MAX_CHARS + 200)
        self.assertLess(len(serve.text()), 2 * DETAIL_MAX_CHARS)


class SecondClientTests(unittest.TestCase):
    def test_a_second_client_is_refused_and_the_verdict_says_so(self) -> None:
        """The task goes to one client; a second gets a 409, and the first's verdict is its own."""
        serve = StrictServe("--wire", "openai-chat", "--stage", "forced-tool", "--timeout", str(BOUND))
        report = chat_loop(serve.url)  # the first client: it asked for the task first
        status, refused = call(serve.url, "/conformance/task")
        self.assertEqual(status, 409)
        self.assertIn("serve judges one client per run", refused["error"]["message"])
        _, verdict = call(serve.url, "/conformance/outcome", report)
        self.assertEqual((verdict["verdict"], verdict["checks"]), ("pass", []))
        self.assertIn("1 more client(s) asked for this run's task and were refused", verdict["detail"])
        self.assertEqual(serve.end(), 0)
        self.assertIn("were refused (409)", serve.text())


class BodyTests(unittest.TestCase):
    def setUp(self) -> None:
        self.toolset = GateToolset(run_id="t1")
        self.addCleanup(self.toolset.close)
        self.session = StageSession(WIRES["openai-chat"], "forced-tool", "chat", self.toolset, model="m")
        self.addCleanup(self.session.close)
        provider = start_fake_provider()
        self.addCleanup(provider.close)
        provider.reply(self.session.handle)
        self.session.attach(lambda: provider.requests)
        self.provider = provider
        self.url = provider.url

    def test_a_body_over_the_cap_is_refused_with_413_and_nothing_runs(self) -> None:
        """A tool call or outcome past JUDGE_MAX_BODY_BYTES gets a 413 naming the cap; the run goes on."""
        big = json.dumps({"call_id": "c1", "arguments": {"text": "z" * JUDGE_MAX_BODY_BYTES}}).encode()
        for path in ("/conformance/tools/echo_json", "/conformance/outcome"):
            with self.subTest(path=path):
                status, answer = post_raw(self.url, path, big)
                self.assertEqual(status, 413)
                self.assertIn(
                    f"larger than the judge takes ({JUDGE_MAX_BODY_BYTES} bytes)", json.dumps(answer)
                )
        self.assertEqual(self.toolset.log.records(), ())
        self.assertFalse(self.session.done.is_set())

    def test_a_tool_body_is_not_kept_after_the_reply(self) -> None:
        """A tool call's body is let go once read: the record keeps its line, not its megabytes."""
        status, _ = call(
            self.url,
            "/conformance/tools/echo_json",
            {"call_id": "c1", "arguments": {"text": "z" * 2_000_000, "count": 1, "tags": []}},
        )
        self.assertEqual(status, 200)
        kept = [r for r in self.provider.requests if r.path.startswith("/conformance/tools/")]
        self.assertEqual([len(r.body) for r in kept], [0])

    def test_json_nested_too_deeply_is_a_400_that_says_so(self) -> None:
        """100,000 nested arrays to a tool or the outcome: a 400 naming the nesting, not a 500."""
        deep = b'{"call_id": "c1", "arguments": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        for path in ("/conformance/tools/echo_json", "/conformance/outcome"):
            with self.subTest(path=path):
                status, answer = post_raw(self.url, path, deep)
                self.assertEqual(status, 400, answer)
                self.assertIn("nested too deeply", answer["error"]["message"])
        self.assertFalse(self.session.done.is_set())


class HostTests(unittest.TestCase):
    def test_an_ipv6_host_in_brackets_is_served(self) -> None:
        """--host [::1], as a URL writes it, listens on ::1 (or is a usage error where IPv6 is off)."""
        try:
            serve = StrictServe(
                "--wire", "openai-chat", "--stage", "text", "--host", "[::1]", "--timeout", "0.3"
            )
        except AssertionError as exc:
            self.assertIn("cannot listen on ::1", str(exc))
            return
        self.assertTrue(serve.url.startswith("http://[::1]:"), serve.url)
        self.assertEqual(serve.end(), 1)  # no outcome: judged as a loop still running

    def test_a_host_that_does_not_resolve_is_a_usage_error(self) -> None:
        """A name the resolver does not know is exit status 2 naming the host, not a traceback."""
        stderr = io.StringIO()
        with self.assertRaises(SystemExit) as exited:
            from contextlib import redirect_stderr

            with redirect_stderr(stderr):
                main(
                    ["serve", "--wire", "openai-chat", "--stage", "text", "--host", "localhost.invalid.",
                     "--allow-remote"],
                    out=io.StringIO(),
                )  # fmt: skip
        self.assertEqual(exited.exception.code, 2)
        self.assertIn("cannot listen on localhost.invalid.", stderr.getvalue())


class SigtermTests(unittest.TestCase):
    def test_sigterm_removes_the_sandbox_as_ctrl_c_does(self) -> None:
        """serve ended by SIGTERM leaves no conformance-gate-* folder behind."""
        with tempfile.TemporaryDirectory() as folder:
            env = {**os.environ, "TMPDIR": folder, "PYTHONPATH": str(ROOT)}
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "conformance",
                    "serve",
                    "--wire",
                    "openai-chat",
                    "--stage",
                    "forced-tool",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=folder,
            )
            try:
                assert process.stdout is not None
                line = process.stdout.readline().decode()
                self.assertIn("serving", line)
                self.assertTrue(list(Path(folder).glob("conformance-gate-*")), "no sandbox while serving")
                process.send_signal(signal.SIGTERM)
                _, stderr = process.communicate(timeout=BOUND)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.communicate()
            self.assertEqual(list(Path(folder).glob("conformance-gate-*")), [], stderr.decode())
            self.assertNotIn(b"Traceback", stderr)


if __name__ == "__main__":
    unittest.main()
