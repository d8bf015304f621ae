"""JavaScript clients judged by ``serve``: the official ``openai`` package and the Vercel AI SDK.

Each run starts ``serve`` for one backend scenario or one agent-loop stage, points a
Node script from ``js/`` at it, and reads the verdict twice: from serve's exit status
and output, and from the answer to the script's ``POST /conformance/outcome``. A
correct client passes with exit status 0; a deliberately broken one (it runs a tool
twice, or lets the SDK retry a quota error) fails with 1 and the id of the check that
caught it. Install the packages with ``npm ci --prefix tests/interop/js`` (see
``js/install.sh``). The runs go three at a time, each bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import unittest
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Dict, Optional, Tuple

from tests.test_judge import Serve

JS_DIR = Path(__file__).resolve().parent / "js"
NODE = shutil.which("node")
#: The packages each script imports, as npm installs them under node_modules.
PACKAGES = {
    "judge_openai.mjs": ("openai",),
    "judge_ai_sdk.mjs": ("ai", "@ai-sdk/openai", "@ai-sdk/anthropic"),
}
#: One run: Node's start-up, the SDK's import and the conversation.
RUN_TIMEOUT = 30.0


@dataclass(frozen=True)
class Run:
    """One client run: serve's arguments, the script, and the flaw it is given (if any)."""

    script: str
    serve: Tuple[str, ...]
    flaw: str = ""
    #: serve's --timeout: the run's bound, and when a client that reported nothing is judged.
    timeout: float = RUN_TIMEOUT


RUNS: Dict[str, Run] = {
    "openai forced-tool": Run("judge_openai.mjs", ("--wire", "openai-chat", "--stage", "forced-tool")),
    "openai parallel-calls stream": Run(
        "judge_openai.mjs", ("--wire", "openai-chat", "--stage", "parallel-calls", "--mode", "stream")
    ),
    "openai run-twice": Run(
        "judge_openai.mjs",
        ("--wire", "openai-chat", "--stage", "forced-tool", "--mode", "stream"),
        "run-twice",
    ),
    "openai tool-call stream": Run(
        "judge_openai.mjs", ("--wire", "openai-chat", "--scenario", "tool-call", "--mode", "stream")
    ),
    "openai quota": Run("judge_openai.mjs", ("--wire", "openai-chat", "--scenario", "quota")),
    "openai retry-quota": Run(
        "judge_openai.mjs", ("--wire", "openai-chat", "--scenario", "quota"), "retry-quota"
    ),
    "ai-sdk openai tool-error-corrects": Run(
        "judge_ai_sdk.mjs", ("--wire", "openai-chat", "--stage", "tool-error-corrects")
    ),
    "ai-sdk anthropic parallel-calls stream": Run(
        "judge_ai_sdk.mjs", ("--wire", "anthropic", "--stage", "parallel-calls", "--mode", "stream")
    ),
    "ai-sdk anthropic run-twice": Run(
        "judge_ai_sdk.mjs", ("--wire", "anthropic", "--stage", "forced-tool"), "run-twice"
    ),
    # A known break of ai 5.0.277: streamText settles its result promises only when the
    # stream ends normally, so a connection closed mid-stream leaves result.text pending
    # forever (vercel/ai#15495) and Node exits on the unsettled await, reporting nothing.
    "ai-sdk openai broken stream": Run(
        "judge_ai_sdk.mjs",
        ("--wire", "openai-chat", "--stage", "close-after-first-fragment", "--mode", "stream"),
        timeout=3.0,
    ),
}
#: Node's exit status when the script's top-level await never settled.
UNSETTLED_AWAIT = 13


def skip_reason() -> Optional[str]:
    if NODE is None:
        return "node is not installed: the serve judge's JavaScript tests need Node 18 or later"
    missing = [p for names in PACKAGES.values() for p in names if not (JS_DIR / "node_modules" / p).is_dir()]
    if missing:
        return f"{', '.join(missing)} not installed: npm ci --prefix tests/interop/js"
    return None


@dataclass
class Result:
    """What one run came to: serve's status and output, the script's verdict and stderr."""

    status: int
    output: str
    verdict: Dict[str, Any]
    stderr: str
    node_status: int


def play(run: Run) -> Result:
    serve = Serve(*run.serve, "--timeout", str(run.timeout))
    done = subprocess.run(
        [str(NODE), run.script, serve.url, *([run.flaw] if run.flaw else [])],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        cwd=str(JS_DIR),
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
        check=False,
    )
    # A script that failed reported nothing: serve then ends at its --timeout.
    status = serve.end(run.timeout + 5)
    verdict = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
    return Result(status, serve.out.getvalue(), verdict, done.stderr, done.returncode)


@unittest.skipIf(skip_reason() is not None, skip_reason() or "")
class JavaScriptClientsJudgedByServeTests(unittest.TestCase):
    """The openai package and the AI SDK, against serve's stages and scenarios."""

    results: ClassVar[Dict[str, Result]]

    @classmethod
    def setUpClass(cls) -> None:
        with ThreadPoolExecutor(max_workers=3) as pool:
            cls.results = dict(zip(RUNS, pool.map(play, RUNS.values())))

    def assert_verdict(self, name: str, status: int, checks: Tuple[str, ...] = ()) -> None:
        """serve exited with ``status``, and the client was told the same verdict with these check ids."""
        result = self.results[name]
        context = f"{name}: {result.output[-3000:]}\n{result.stderr[-2000:]}"
        self.assertEqual(result.status, status, context)
        self.assertEqual(result.verdict.get("verdict"), "pass" if status == 0 else "fail", context)
        self.assertEqual(tuple(result.verdict["checks"]), checks, context)
        for check in checks:
            self.assertIn(f"[{check}]", result.output)

    def test_openai_loop_passes_forced_tool(self) -> None:
        """A loop over the openai package runs echo_json once and returns the final text."""
        self.assert_verdict("openai forced-tool", 0)

    def test_openai_loop_passes_parallel_calls_streamed(self) -> None:
        """The loop keeps streamed calls apart by index and answers each under its own id."""
        self.assert_verdict("openai parallel-calls stream", 0)

    def test_openai_loop_that_runs_a_call_twice_fails(self) -> None:
        """Two executions of one call, made through the tools endpoint, fail executions."""
        self.assert_verdict("openai run-twice", 1, ("executions",))
        self.assertIn("executed 2 times", self.results["openai run-twice"].verdict["detail"])

    def test_openai_backend_passes_a_streamed_tool_call(self) -> None:
        """The reported call, finish reason and usage of a streamed tool turn pass the backend checks."""
        self.assert_verdict("openai tool-call stream", 0)

    def test_openai_backend_passes_quota(self) -> None:
        """With retries off, the quota 429 is reported as a non-retryable quota error and passes."""
        self.assert_verdict("openai quota", 0)

    def test_openai_backend_that_retries_a_quota_fails(self) -> None:
        """The SDK's default retries send the quota request three times: no-retry catches it."""
        self.assert_verdict("openai retry-quota", 1, ("no-retry",))
        self.assertIn("got 3", self.results["openai retry-quota"].verdict["detail"])

    def test_ai_sdk_openai_passes_tool_error_corrects(self) -> None:
        """generateText over @ai-sdk/openai sends always_error's error back and runs the corrected call."""
        self.assert_verdict("ai-sdk openai tool-error-corrects", 0)

    def test_ai_sdk_anthropic_passes_parallel_calls_streamed(self) -> None:
        """streamText over @ai-sdk/anthropic runs both calls of one turn and answers each under its id."""
        self.assert_verdict("ai-sdk anthropic parallel-calls stream", 0)

    def test_ai_sdk_anthropic_loop_that_runs_a_call_twice_fails(self) -> None:
        """An execute that runs its tool twice fails executions, over @ai-sdk/anthropic too."""
        self.assert_verdict("ai-sdk anthropic run-twice", 1, ("executions",))

    def test_ai_sdk_stream_closed_mid_call_leaves_the_loop_pending(self) -> None:
        """The known break: streamText never settles on a stream cut short, so serve judges a hung loop."""
        result = self.results["ai-sdk openai broken stream"]
        context = f"{result.output[-3000:]}\n{result.stderr[-2000:]}"
        self.assertEqual(result.node_status, UNSETTLED_AWAIT, context)
        self.assertEqual(result.status, 1, context)
        self.assertIn("no outcome reported within 3 s", result.output)
        self.assertIn("neither recovered nor stopped", result.output)
        self.assertIn("[recovered]", result.output)



@unittest.skipIf(skip_reason() is not None, skip_reason() or "")
class JavaScriptLoopJudgedByOneCommandTests(unittest.TestCase):
    """``judge``: the openai package's loop over every stage of one wire, one command, one report."""

    def judge(self, *argv: str) -> Tuple[int, str, Dict[str, Any], Any]:
        import io
        import tempfile
        import xml.etree.ElementTree as ET

        from conformance.__main__ import main

        with tempfile.TemporaryDirectory() as folder:
            paths = Path(folder) / "r.json", Path(folder) / "r.xml"
            out = io.StringIO()
            status = main(
                ["judge", *argv, "--jobs", "2", "--json", str(paths[0]), "--junit", str(paths[1]),
                 "--", str(NODE), str(JS_DIR / "judge_openai.mjs")],
                out=out,
            )  # fmt: skip
            document = json.loads(paths[0].read_text(encoding="utf-8"))
            return status, out.getvalue(), document, ET.fromstring(paths[1].read_text(encoding="utf-8"))

    def test_every_stage_of_openai_chat_in_one_run(self) -> None:
        """Every stage and mode judged; each failure's JUnit message names its check."""
        from conformance.gate.stages import STAGES

        status, output, document, root = self.judge("--wire", "openai-chat", "--client-name", "js-openai")
        self.assertEqual(status, 1, output)  # the loop checks no tool name nor schema before running
        self.assertEqual(len(document["cases"]), sum(len(row.modes) for row in STAGES.values()))
        seen = {c["case"]: c["outcome"] for c in document["cases"]}
        for case, outcome in [
            ("forced-tool/stream", "pass"),
            ("parallel-calls/chat", "pass"),
            ("cancel/chat", "skip"),
            ("unknown-tool/chat", "fail"),
            ("invalid-arguments/stream", "fail"),
        ]:
            self.assertEqual(seen[case], outcome, f"{case}: {output[-3000:]}")
        messages = {
            case.get("name"): failure.get("message") or ""
            for case in root.iter("testcase")
            for failure in case.findall("failure")
        }
        self.assertTrue(messages["unknown-tool/chat"].endswith("[refused-call]"), messages)
        self.assertTrue(messages["invalid-arguments/stream"].endswith("[arguments-schema]"), messages)
        for case, message in messages.items():
            self.assertRegex(message, r"\[[a-z0-9-]+\]$", case)
        self.assertEqual({c.get("classname") for c in root.iter("testcase")}, {"js-openai"})

    def test_backend_scenarios_in_one_run(self) -> None:
        """--suite backend: the same script as a backend, each scenario's variants each a run."""
        status, output, document, _ = self.judge(
            "--wire", "openai-chat", "--suite", "backend", "--scenario", "text", "--scenario", "tool-call",
            "--scenario", "quota",
        )  # fmt: skip
        self.assertEqual(status, 0, output)
        self.assertEqual({c["outcome"] for c in document["cases"]}, {"pass"}, output)
        self.assertGreaterEqual(len(document["cases"]), 5)


if __name__ == "__main__":
    unittest.main()
