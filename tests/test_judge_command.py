"""``judge``: a client's command run once per stage (or scenario) and mode, each run judged as
``serve`` judges it, into one JUnit and one JSON report.

The clients here are a shell loop over curl and jq (tests/clients/openai_chat_loop.sh,
skipped where either is missing) and small Python scripts that do one thing each: report
through the outcome file, exit without a report, or hang with a child of their own. The
JavaScript loop over the openai package is judged so in tests/interop/test_js_serve_judge.py.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
import unittest
import xml.etree.ElementTree as ET
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any, Dict, List, Tuple

from conformance.__main__ import main

ROOT = Path(__file__).resolve().parent.parent
SHELL_LOOP = ROOT / "tests" / "clients" / "openai_chat_loop.sh"
LONG = os.environ.get("CONFORMANCE_LONG_TESTS") == "1"
NO_SHELL = next(
    (f"{tool} is not installed" for tool in ("sh", "curl", "jq") if shutil.which(tool) is None), ""
)

#: A backend client for the text scenario over the OpenAI Chat wire, in Python's standard
#: library: it asks the provider, and reports what came through the outcome file. With
#: "wrong" it reports another text.
TEXT_BACKEND = """
import json, os, sys, urllib.request
task = json.load(urllib.request.urlopen(os.environ["CONFORMANCE_TASK_URL"]))
body = {"model": task["model"], "max_tokens": task["max_tokens"], "tools": [
    {"type": "function", "function": t} for t in task["tools"]],
    "messages": [{"role": "system", "content": task["system"]},
                 {"role": "user", "content": task["question"]}]}
request = urllib.request.Request(os.environ["CONFORMANCE_URL"] + "/v1/chat/completions",
    json.dumps(body).encode(), {"content-type": "application/json"})
reply = json.load(urllib.request.urlopen(request))
choice, usage = reply["choices"][0], reply["usage"]
outcome = {"content": choice["message"]["content"], "finish_reason": choice["finish_reason"],
    "tool_calls": [], "usage": {"input_tokens": usage["prompt_tokens"],
    "output_tokens": usage["completion_tokens"], "total_tokens": usage["total_tokens"]}, "error": None}
if sys.argv[1:] == ["wrong"]:
    outcome["content"] = "something else"
with open(os.environ["CONFORMANCE_OUTCOME_FILE"], "w") as f:
    json.dump(outcome, f)
"""

#: A client that asks for its task, then: "exit" exits 3 saying so; "hang" starts a child
#: (its pid written to the file named second) and waits for good.
MISBEHAVES = """
import os, subprocess, sys, time, urllib.request
urllib.request.urlopen(os.environ["CONFORMANCE_TASK_URL"]).read()
if sys.argv[1] == "exit":
    print("giving up: no SDK here", file=sys.stderr)
    sys.exit(3)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(sys.argv[2], "w") as f:
    f.write(str(child.pid))
time.sleep(60)
"""


def judge(*argv: str) -> Tuple[int, str, Dict[str, Any], ET.Element]:
    """``judge`` run in-process with both reports: its status, output, JSON and JUnit root."""
    with tempfile.TemporaryDirectory() as folder:
        paths = Path(folder) / "r.json", Path(folder) / "r.xml"
        out = io.StringIO()
        options, _, command = list(argv), None, []
        if "--" in options:
            at = options.index("--")
            options, command = options[:at], options[at:]
        status = main(
            ["judge", *options, "--json", str(paths[0]), "--junit", str(paths[1]), *command], out=out
        )
        document = json.loads(paths[0].read_text(encoding="utf-8"))
        root = ET.fromstring(paths[1].read_text(encoding="utf-8"))
    return status, out.getvalue(), document, root


def outcomes(document: Dict[str, Any]) -> Dict[str, str]:
    return {c["case"]: c["outcome"] for c in document["cases"]}


def failure_messages(root: ET.Element) -> List[Tuple[str, str]]:
    return [
        (case.get("name") or "", failure.get("message") or "")
        for case in root.iter("testcase")
        for failure in case.findall("failure")
    ]


@unittest.skipIf(bool(NO_SHELL), f"{NO_SHELL}: the shell client needs sh, curl and jq")
class ShellLoopTests(unittest.TestCase):
    """A loop in shell, judged over the stages of one wire by one command."""

    def test_the_shell_loop_is_judged_stage_by_stage_in_one_report(self) -> None:
        """Passes where it is right, fails naming the check where not, skips what cannot be judged."""
        stages = [] if LONG else ["--stage", "text", "--stage", "forced-tool", "--stage", "invalid-arguments",
                                  "--stage", "cancel"]  # fmt: skip
        status, output, document, root = judge(
            "--wire",
            "openai-chat",
            *stages,
            "--jobs",
            "2",
            "--client-name",
            "sh-loop",
            "--",
            "sh",
            str(SHELL_LOOP),
        )
        self.assertEqual(status, 1, output)
        seen = outcomes(document)
        expected = {
            "text/chat": "pass",
            "text/stream": "pass",
            "forced-tool/chat": "pass",
            "forced-tool/stream": "pass",
            "invalid-arguments/chat": "fail",
            "invalid-arguments/stream": "fail",
            "cancel/chat": "skip",
        }
        self.assertEqual({k: seen[k] for k in expected}, expected, output)
        self.assertEqual([s.get("name") for s in root.findall("testsuite")], ["sh-loop"])
        self.assertEqual({c.get("classname") for c in root.iter("testcase")}, {"sh-loop"})
        messages = dict(failure_messages(root))
        self.assertTrue(messages["invalid-arguments/chat"].endswith("[arguments-schema]"), messages)
        # Every failure's message is its first problem, ending with the id of the check that found it.
        for case, message in failure_messages(root):
            self.assertRegex(message, r"\[[a-z0-9-]+\]$", case)
        self.assertEqual(int(root.get("tests") or 0), len(document["cases"]))
        if LONG:
            from conformance.gate.stages import STAGES

            self.assertEqual(len(document["cases"]), sum(len(row.modes) for row in STAGES.values()))

    def test_a_loop_that_runs_a_call_twice_fails_with_executions(self) -> None:
        """The flaw given to the client's command reaches it; the judge names executions."""
        status, output, document, root = judge(
            "--wire", "openai-chat", "--stage", "forced-tool", "--mode", "chat", "--",
            "sh", str(SHELL_LOOP), "run-twice",
        )  # fmt: skip
        self.assertEqual(status, 1, output)
        self.assertEqual(outcomes(document), {"forced-tool/chat": "fail"})
        [(_, message)] = failure_messages(root)
        self.assertIn("executed 2 times", message)
        self.assertTrue(message.endswith("[executions]"), message)


class ClientLifeTests(unittest.TestCase):
    """How a run ends: the outcome file, an exit without a report, a client that hangs."""

    def setUp(self) -> None:
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.folder = Path(folder.name)
        (self.folder / "backend.py").write_text(textwrap.dedent(TEXT_BACKEND), encoding="utf-8")
        (self.folder / "misbehaves.py").write_text(textwrap.dedent(MISBEHAVES), encoding="utf-8")

    def test_a_backend_reports_through_the_outcome_file(self) -> None:
        """--suite backend: the outcome file is the report; a right one passes, a wrong one fails content."""
        script = str(self.folder / "backend.py")
        status, output, document, _ = judge(
            "--wire", "openai-chat", "--scenario", "text", "--mode", "chat", "--", sys.executable, script
        )
        self.assertEqual((status, outcomes(document)), (0, {"text/chat": "pass"}), output)
        self.assertEqual(document["cases"][0]["suite"], "backend")
        status, output, document, root = judge(
            "--wire",
            "openai-chat",
            "--scenario",
            "text",
            "--mode",
            "chat",
            "--",
            sys.executable,
            script,
            "wrong",
        )
        self.assertEqual(status, 1, output)
        [(_, message)] = failure_messages(root)
        self.assertTrue(message.endswith("[content]"), message)

    def test_a_client_that_exits_without_a_report_is_judged_and_its_output_quoted(self) -> None:
        """Judged at once as a run that did not finish, with its exit status and last words."""
        status, output, document, _ = judge(
            "--wire", "openai-chat", "--stage", "text", "--mode", "chat", "--",
            sys.executable, str(self.folder / "misbehaves.py"), "exit",
        )  # fmt: skip
        self.assertEqual(status, 1, output)
        detail = document["cases"][0]["detail"]
        self.assertIn("the client exited with status 3 without reporting an outcome", detail)
        self.assertIn("giving up: no SDK here", detail)
        self.assertIn("[finished]", detail)
        self.assertLess(document["cases"][0]["seconds"], 10)

    def test_a_client_that_hangs_is_ended_with_its_whole_group(self) -> None:
        """Past --timeout from its first request, the client and the child it started are ended."""
        pid_file = self.folder / "child.pid"
        status, output, document, _ = judge(
            "--wire", "openai-chat", "--stage", "text", "--mode", "chat", "--timeout", "0.5", "--",
            sys.executable, str(self.folder / "misbehaves.py"), "hang", str(pid_file),
        )  # fmt: skip
        self.assertEqual(status, 1, output)
        self.assertIn("reported no outcome within 0.5 s, and was ended", document["cases"][0]["detail"])
        child = int(pid_file.read_text(encoding="utf-8"))
        self.assertFalse(_alive(child), f"the client's child {child} outlived the run")


class SigtermTests(unittest.TestCase):
    def test_sigterm_ends_the_running_clients_and_leaves_no_sandbox(self) -> None:
        """judge ended by SIGTERM ends its client's group, and removes the tools' sandbox, as Ctrl-C does."""
        import signal
        import subprocess
        import time

        with tempfile.TemporaryDirectory() as folder:
            script = Path(folder) / "misbehaves.py"
            script.write_text(textwrap.dedent(MISBEHAVES), encoding="utf-8")
            pid_file = Path(folder) / "child.pid"
            env = {**os.environ, "TMPDIR": folder, "PYTHONPATH": str(ROOT)}
            judge = subprocess.Popen(
                [sys.executable, "-m", "conformance", "judge", "--wire", "openai-chat", "--stage", "text",
                 "--timeout", "60", "--", sys.executable, str(script), "hang", str(pid_file)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=folder,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 30
                while not pid_file.exists() and time.monotonic() < deadline and judge.poll() is None:
                    time.sleep(0.05)
                self.assertTrue(pid_file.exists(), "the client never started")
                child = int(pid_file.read_text(encoding="utf-8"))
                judge.send_signal(signal.SIGTERM)
                out, err = judge.communicate(timeout=30)
            finally:
                if judge.poll() is None:
                    judge.kill()
                    judge.communicate()
            self.assertEqual(judge.returncode, 1, err.decode())
            self.assertIn(b"stopped", out)
            self.assertNotIn(b"Traceback", err)
            self.assertFalse(_alive(child), "the client's child outlived judge")
            self.assertEqual(list(Path(folder).glob("conformance-*")), [])


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class UsageTests(unittest.TestCase):
    def refused(self, *argv: str) -> str:
        stderr = io.StringIO()
        with self.assertRaises(SystemExit) as exited, redirect_stderr(stderr):
            main(["judge", *argv], out=io.StringIO())
        self.assertEqual(exited.exception.code, 2)
        return stderr.getvalue()

    def test_what_is_wrong_is_named(self) -> None:
        """A missing command, a misspelt stage, a suite that contradicts a name, a bad --skip."""
        table = [
            (("--wire", "openai-chat"), "judge needs the client's command after --"),
            (("--wire", "openai-chat", "--stage", "forced-tol", "--", "true"), "did you mean 'forced-tool'?"),
            (("--wire", "openai-chat", "--stage", "quota", "--", "true"), "quota is not a stage"),
            (("--wire", "openai-chat", "--suite", "loop", "--scenario", "text", "--", "true"),
             "--scenario names backend cases, but --suite loop runs none of them"),
            (("--wire", "openai-chat", "--skip", "txet", "--", "true"), "--skip txet: no such stage"),
            (("--wire", "nope", "--", "true"), "unknown wire 'nope'"),
            (("--wire", "openai-chat", "--max-result-chars", "0", "--", "true"), "--max-result-chars must"),
            (("--wire", "openai-chat", "--jobs", "0", "--", "true"), "--jobs must be 1 or more"),
            (("--wire", "openai-chat", "--stage", "text", "--", "/no/such/client"), "cannot run the client"),
        ]  # fmt: skip
        for argv, words in table:
            with self.subTest(argv=argv):
                self.assertIn(words, self.refused(*argv))

    def test_skip_leaves_a_run_out_and_says_so(self) -> None:
        """--skip NAME/MODE is a skipped row with its reason; the rest runs."""
        status, output, document, _ = judge(
            "--wire", "openai-chat", "--stage", "text", "--skip", "text/stream", "--", "sh", "-c", "exit 0"
        )
        self.assertEqual(status, 1, output)  # text/chat: the client reported nothing
        self.assertEqual(outcomes(document), {"text/chat": "fail", "text/stream": "skip"})
        self.assertEqual(document["cases"][1]["detail"], "left out with --skip")
        self.assertTrue(re.search(r"2 of 2 runs: 0 passed, 1 failed, 1 skipped", output), output)


if __name__ == "__main__":
    unittest.main()
