"""The command line: the matrix, run MODULE:NAME, serve."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import unittest
import urllib.request
from pathlib import Path

from conformance import BackendConformanceTarget, openai_chat_wire
from conformance.__main__ import main

ROOT = Path(__file__).resolve().parent.parent


class Broken:
    """A backend that fails every case."""

    def chat(self, request: object) -> None:
        raise NotImplementedError

    def chat_stream(self, request: object) -> None:
        raise NotImplementedError


BROKEN_TARGET = BackendConformanceTarget("broken", openai_chat_wire, lambda url: Broken())


class MatrixTests(unittest.TestCase):
    def test_matrix_prints_every_case_and_exits_zero(self) -> None:
        """One wire, one transport: a row per case, a pass in each, and the closing count."""
        out = io.StringIO()
        status = main(["--wire", "openai-chat", "--transport", "http/1.1"], out=out)
        text = out.getvalue()
        self.assertEqual(status, 0, text)
        self.assertRegex(text, r"text/chat\s+pass")
        self.assertRegex(text, r"corrupt-frame/stream\s+skip")
        self.assertRegex(text, r"\d+ cases: \d+ passed, 0 failed, \d+ skipped in [\d.]+ s")

    def test_unknown_wire_is_refused_with_the_known_ones(self) -> None:
        """A misspelt wire names the wires there are."""
        with self.assertRaisesRegex(SystemExit, "unknown wire 'openai'; known: openai-chat"):
            main(["--wire", "openai"], out=io.StringIO())


class RunTests(unittest.TestCase):
    def test_run_a_target_fails_with_the_messages(self) -> None:
        """run MODULE:NAME on a broken target exits 1 and prints each failure."""
        out = io.StringIO()
        status = main(["run", "tests.test_main:BROKEN_TARGET"], out=out)
        self.assertEqual(status, 1)
        self.assertIn("expected a reply, got NotImplementedError", out.getvalue())

    def test_run_a_testcase_class(self) -> None:
        """run MODULE:NAME on a TestCase class runs it with unittest."""
        out = io.StringIO()
        status = main(["run", "tests.test_testcase:HookedConformance"], out=out)
        self.assertEqual(status, 0, out.getvalue())
        self.assertIn("OK", out.getvalue())

    def test_run_refuses_what_is_not_a_target(self) -> None:
        """A name that is neither a target nor a TestCase is a clear error."""
        with self.assertRaisesRegex(SystemExit, "expected a BackendConformanceTarget"):
            main(["run", "tests.test_main:ROOT"], out=io.StringIO())
        with self.assertRaisesRegex(SystemExit, "expected MODULE:NAME"):
            main(["run", "tests.test_main"], out=io.StringIO())


class ServeTests(unittest.TestCase):
    def test_serve_refuses_a_remote_host_without_the_flag(self) -> None:
        """Binding beyond loopback needs --allow-remote."""
        argv = ["serve", "--wire", "openai-chat", "--scenario", "text", "--host", "0.0.0.0"]
        with self.assertRaisesRegex(SystemExit, "refusing to bind 0.0.0.0.*--allow-remote"):
            main(argv, out=io.StringIO())

    def test_serve_checks_scenario_and_mode(self) -> None:
        """An unknown scenario, or a mode the scenario lacks, is refused."""
        with self.assertRaisesRegex(SystemExit, "unknown scenario 'txt'"):
            main(["serve", "--wire", "openai-chat", "--scenario", "txt"], out=io.StringIO())
        with self.assertRaisesRegex(SystemExit, "stream-error runs in stream mode only"):
            main(["serve", "--wire", "openai-chat", "--scenario", "stream-error"], out=io.StringIO())

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

        with mock.patch.object(conformance.provider, "start_fake_provider", start), \
                mock.patch.object(time, "sleep", side_effect=KeyboardInterrupt):
            main(["serve", "--wire", "openai-chat", "--scenario", "text"], out=io.StringIO())
        self.assertEqual(started[0]._hub.max_requests, 1000)

    def test_serve_answers_a_client_and_logs_the_request(self) -> None:
        """serve prints its URL, answers with the wire, and logs each request."""
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
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = json.loads(response.read())
            self.assertEqual(answer["object"], "chat.completion")
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
                [sys.executable, "-m", "conformance", "record", "--wire", "openai-chat",
                 "--upstream", upstream.url, "--out", folder, "--scenario", "text"],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            try:
                assert process.stdout is not None
                first = process.stdout.readline()
                self.assertIn("recording openai-chat at http://127.0.0.1:", first)
                url = first.split(" at ", 1)[1].split(" ", 1)[0]
                request = urllib.request.Request(
                    f"{url}/v1/chat/completions", b'{"model": "m"}',
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
            self.assertEqual(json.loads(text)["stamp"]["scenario"], "text")

    def test_record_checks_its_arguments(self) -> None:
        """An unknown wire or scenario, or a bad upstream, stops with a message."""
        for argv in (["--wire", "nope", "--upstream", "http://127.0.0.1:1"],
                     ["--wire", "openai-chat", "--upstream", "http://127.0.0.1:1", "--scenario", "txt"],
                     ["--wire", "openai-chat", "--upstream", "ftp://x"]):
            with self.subTest(argv=argv), self.assertRaises(SystemExit):
                main(["record", *argv], out=io.StringIO())


if __name__ == "__main__":
    unittest.main()
