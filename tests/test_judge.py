"""serve as a judge: the tools over HTTP, the client's report, and the verdict it gives."""

from __future__ import annotations

import functools
import io
import json
import re
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, TextIO, Tuple

from conformance.__main__ import main
from conformance._judge import BackendSession, reported_error
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.gate._remote import STAGE_NOT_JUDGED, StageSession
from conformance.gate.log import ExecutionStatus
from conformance.gate.tools import GateToolset
from conformance.provider import start_fake_provider
from conformance.wires import WIRES

#: How long any one serve run of these tests may take.
BOUND = 20.0


def call(url: str, path: str, body: Any = None) -> Tuple[int, Any]:
    """One request to ``url + path`` (a POST of ``body`` as JSON, or a GET): its status and JSON."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data, {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


class Serve:
    """``main(["serve", ...])`` in a thread: its URL, its output and its exit status."""

    def __init__(self, *argv: str) -> None:
        self.out = self._output()
        self.status: Optional[int] = None
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, args=(["serve", *argv],), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline and self.thread.is_alive():
            # The URL ends where the line goes on ("; POST ..."): an IPv6 host keeps its brackets.
            match = re.search(r" at (http://[^\s;]+);", self.text())
            if match:
                self.url = match.group(1)
                return
            time.sleep(0.01)
        raise AssertionError(f"serve printed no URL: {self.text()} {self.error!r}")

    def _output(self) -> TextIO:
        self._printed = io.StringIO()
        return self._printed

    def text(self) -> str:
        """What serve printed so far."""
        return self._printed.getvalue()

    def _run(self, argv: List[str]) -> None:
        self.status = main(argv, out=self.out)

    def end(self, bound: float = BOUND) -> int:
        self.thread.join(bound)
        assert self.status is not None, self.text()
        return self.status


def chat_loop(url: str, *, runs: int = 1) -> Dict[str, Any]:
    """A plain loop over urllib against the OpenAI Chat wire: the task, each call run ``runs`` times."""
    _, task = call(url, "/conformance/task")
    body: Dict[str, Any] = {
        "model": task["model"],
        "messages": [{"role": "user", "content": task["prompt"]}],
        "tools": [{"type": "function", "function": t} for t in task["tools"]],
    }
    if task["tool_choice"]:
        body["tool_choice"] = {"type": "function", "function": {"name": task["tool_choice"]["name"]}}
    for _ in range(task["max_requests"]):
        _, reply = call(url, "/v1/chat/completions", body)
        body.pop("tool_choice", None)
        choice = reply["choices"][0]
        message = choice["message"]
        if not message.get("tool_calls"):
            return {"text": message["content"], "finish_reason": choice["finish_reason"], "stopped": "done"}
        body["messages"].append(message)
        for tool_call in message["tool_calls"]:
            function = tool_call["function"]
            for _ in range(runs):
                _, result = call(
                    url,
                    f"/conformance/tools/{function['name']}",
                    {"call_id": tool_call["id"], "arguments": json.loads(function["arguments"])},
                )
            body["messages"].append(
                {"role": "tool", "tool_call_id": tool_call["id"], "content": result["content"]}
            )
    return {"text": "", "finish_reason": "tool_calls", "stopped": "budget"}


class StageVerdictTests(unittest.TestCase):
    def test_a_correct_loop_passes_and_serve_exits_0(self) -> None:
        """A loop that runs each call once and returns the final text gets a pass, answered and printed."""
        serve = Serve("--wire", "openai-chat", "--stage", "forced-tool", "--timeout", str(BOUND))
        status, verdict = call(serve.url, "/conformance/outcome", chat_loop(serve.url))
        self.assertEqual((status, verdict["verdict"], verdict["checks"]), (200, "pass", []))
        self.assertEqual(serve.end(), 0)
        self.assertIn("verdict: openai-chat forced-tool/chat passed", serve.out.getvalue())

    def test_a_loop_that_runs_a_call_twice_fails_with_executions(self) -> None:
        """Two executions of one call, seen through the tools endpoint, fail the executions invariant."""
        serve = Serve("--wire", "openai-chat", "--stage", "forced-tool", "--timeout", str(BOUND))
        _, verdict = call(serve.url, "/conformance/outcome", chat_loop(serve.url, runs=2))
        self.assertEqual(verdict["verdict"], "fail")
        self.assertEqual(verdict["checks"], ["executions"])
        self.assertIn("executed 2 times", verdict["detail"])
        self.assertEqual(serve.end(), 1)
        self.assertIn("FAILED [executions]", serve.out.getvalue())

    def test_a_wrong_final_text_fails_with_final_text(self) -> None:
        """The reported result is held to the model's final text and finish reason."""
        serve = Serve("--wire", "openai-chat", "--stage", "text", "--timeout", str(BOUND))
        result = chat_loop(serve.url)
        _, verdict = call(serve.url, "/conformance/outcome", {**result, "text": result["text"][:-1]})
        self.assertEqual(verdict["checks"], ["final-text"])
        self.assertEqual(serve.end(), 1)

    def test_no_report_within_the_timeout_is_a_loop_that_did_not_finish(self) -> None:
        """A run that reports nothing is judged at --timeout as a loop still running: finished fails."""
        with tempfile.TemporaryDirectory() as folder:
            report = Path(folder) / "verdict.json"
            serve = Serve(
                "--wire", "openai-chat", "--stage", "text", "--timeout", "0.3", "--json", str(report)
            )
            self.assertEqual(serve.end(), 1)
            document = json.loads(report.read_text(encoding="utf-8"))
        self.assertIn("no outcome reported within 0.3 s", serve.out.getvalue())
        self.assertEqual(document["verdict"], "fail")
        self.assertEqual(document["cases"][0]["suite"], "loop")
        self.assertIn("[finished]", document["cases"][0]["detail"])

    def test_the_cancel_stage_is_served_but_not_judged(self) -> None:
        """The cancel stage needs the loop's own signal: its verdict is a skip that says so, exit 0."""
        serve = Serve("--wire", "openai-chat", "--stage", "cancel", "--timeout", str(BOUND))
        _, task = call(serve.url, "/conformance/task")
        self.assertFalse(task["judged"])
        _, verdict = call(serve.url, "/conformance/outcome", {"text": "", "finish_reason": "stop"})
        self.assertEqual(verdict["verdict"], "skip")
        self.assertIn("signal", verdict["detail"])
        self.assertEqual(serve.end(), 0)

    def test_the_verdict_is_written_as_json_and_junit(self) -> None:
        """--json and --junit carry the verdict through _results, whatever it is."""
        with tempfile.TemporaryDirectory() as folder:
            paths = Path(folder) / "v.json", Path(folder) / "v.xml"
            serve = Serve(
                "--wire", "openai-chat", "--stage", "forced-tool", "--mode", "stream",
                "--timeout", str(BOUND),
                "--json", str(paths[0]), "--junit", str(paths[1]),
            )  # fmt: skip
            # The stream mode answers a stream; the loop reads the whole reply without it.
            _, verdict = call(serve.url, "/conformance/outcome", {"text": "no", "finish_reason": "stop"})
            self.assertEqual(serve.end(), 1)
            document = json.loads(paths[0].read_text(encoding="utf-8"))
            junit = paths[1].read_text(encoding="utf-8")
        self.assertEqual(document["cases"][0]["case"], "forced-tool/stream")
        self.assertEqual(document["cases"][0]["outcome"], "fail")
        self.assertIn('<testcase classname="client.openai-chat" name="forced-tool/stream"', junit)
        self.assertIn("[requests]", junit)
        self.assertIn("requests", verdict["checks"])


class BackendVerdictTests(unittest.TestCase):
    def test_a_correct_report_passes(self) -> None:
        """A text reply reported as the fixture's text, stop and usage passes the backend checks."""
        serve = Serve("--wire", "openai-chat", "--scenario", "text", "--timeout", str(BOUND))
        _, task = call(serve.url, "/conformance/task")
        body = {
            "model": task["model"],
            "max_tokens": task["max_tokens"],
            "messages": [
                {"role": "system", "content": task["system"]},
                {"role": "user", "content": task["question"]},
            ],
            "tools": [{"type": "function", "function": t} for t in task["tools"]],
        }
        _, reply = call(serve.url, "/v1/chat/completions", body)
        usage = reply["usage"]
        report = {
            "content": reply["choices"][0]["message"]["content"],
            "finish_reason": reply["choices"][0]["finish_reason"],
            "tool_calls": [],
            "usage": {
                "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"],
                "total_tokens": usage["total_tokens"],
            },
        }
        _, verdict = call(serve.url, "/conformance/outcome", report)
        self.assertEqual(verdict["verdict"], "pass", verdict["detail"])
        self.assertEqual(serve.end(), 0)

    def test_a_quota_reported_as_retryable_fails_with_error_kind(self) -> None:
        """The reported error's kind, code and retryable are held to the quota row."""
        serve = Serve("--wire", "openai-chat", "--scenario", "quota", "--timeout", str(BOUND))
        status, _ = call(serve.url, "/v1/chat/completions", {"model": "conformance-model", "messages": []})
        self.assertEqual(status, 429)
        error = {
            "name": "RateLimitError",
            "message": "429",
            "kind": "rate_limit",
            "code": "LLM_RATE_LIMITED",
            "retryable": True,
            "retry_after": None,
            "status": 429,
            "details": {"kind": "rate_limit"},
        }
        _, verdict = call(serve.url, "/conformance/outcome", {"error": error})
        self.assertIn("error-kind", verdict["checks"])
        self.assertIn("RateLimitError(", verdict["detail"])
        self.assertEqual(serve.end(), 1)

    def test_the_request_checks_judge_what_the_provider_saw(self) -> None:
        """A request without the question and the tool fails the request check, whatever is reported."""
        serve = Serve("--wire", "openai-chat", "--scenario", "text", "--timeout", str(BOUND))
        call(serve.url, "/v1/chat/completions", {"model": "conformance-model", "messages": []})
        report = {"content": FX.text, "finish_reason": "stop", "tool_calls": [], "usage": None}
        _, verdict = call(serve.url, "/conformance/outcome", report)
        self.assertIn("request", verdict["checks"])
        self.assertEqual(serve.end(), 1)

    def test_a_malformed_report_is_refused_and_the_run_goes_on(self) -> None:
        """A report that is not an object gets a 400 that says why; a good one after it is judged."""
        serve = Serve("--wire", "openai-chat", "--scenario", "abort", "--timeout", str(BOUND))
        status, answer = call(serve.url, "/conformance/outcome", [1, 2])
        self.assertEqual(status, 400)
        self.assertIn("takes a JSON object", answer["error"]["message"])
        status, answer = call(serve.url, "/conformance/outcome", {"error": "boom"})
        self.assertEqual(status, 400)
        _, verdict = call(serve.url, "/conformance/outcome", {"error": None})
        self.assertEqual(verdict["verdict"], "skip")  # abort is served, not judged
        self.assertEqual(serve.end(), 0)

    def test_a_second_report_is_refused(self) -> None:
        """Once the run is judged, another report gets a 409 that says so."""
        # The session on a provider of the test's own: serve closes its port once the verdict
        # is out, and a report after that may find it closed or get its 409, as timing falls.
        wire = WIRES["openai-chat"]
        with GateToolset() as toolset, start_fake_provider() as provider:
            variant = wire.variants("abort", "chat")[0]
            session = BackendSession(wire, "abort", "chat", variant, toolset, model="m")
            session.attach(lambda: provider.requests)
            provider.reply(session.handle)
            _, verdict = call(provider.url, "/conformance/outcome", {"error": None})
            status, answer = call(provider.url, "/conformance/outcome", {"error": None})
        self.assertEqual(verdict["verdict"], "skip")
        self.assertEqual(status, 409)
        self.assertIn("the outcome was already reported", answer["error"]["message"])


class ToolsEndpointTests(unittest.TestCase):
    def setUp(self) -> None:
        self.toolset = GateToolset(run_id="t1")
        self.addCleanup(self.toolset.close)
        self.session = StageSession(WIRES["openai-chat"], "forced-tool", "chat", self.toolset, model="m")
        provider = start_fake_provider()
        self.addCleanup(provider.close)
        provider.reply(self.session.handle)
        self.session.attach(lambda: provider.requests)
        self.url = provider.url

    def test_each_execution_is_recorded_as_the_toolset_records_it(self) -> None:
        """echo_json runs and carries its fixture id; always_error answers its structured error."""
        status, echoed = call(
            self.url,
            "/conformance/tools/echo_json",
            {"call_id": "c1", "arguments": {"text": "x", "count": 1, "tags": []}},
        )
        self.assertEqual(status, 200)
        self.assertFalse(echoed["is_error"])
        self.assertEqual(json.loads(echoed["content"])["fixture_id"], "fx-t1-0001")
        _, failed = call(
            self.url, "/conformance/tools/always_error", {"call_id": "c2", "arguments": {"reason": "r"}}
        )
        self.assertTrue(failed["is_error"])
        self.assertEqual(failed["error"]["code"], "fixture_failure")
        self.assertEqual(json.loads(failed["content"])["error"]["code"], "fixture_failure")
        records = self.toolset.log.records()
        self.assertEqual([(r.call_id, r.tool, r.status, r.ran) for r in records], [
            ("c1", "echo_json", ExecutionStatus.OK, True),
            ("c2", "always_error", ExecutionStatus.ERROR, True),
        ])  # fmt: skip

    def test_a_call_refused_at_the_door_is_recorded_as_not_run(self) -> None:
        """Unparsed arguments (sent as text) and an unknown tool are refused, recorded with ran false."""
        _, unparsed = call(
            self.url, "/conformance/tools/echo_json", {"call_id": "c1", "arguments": '{"text": "ga'}
        )
        self.assertEqual(unparsed["error"]["code"], "invalid_arguments")
        _, unknown = call(
            self.url, "/conformance/tools/read_file", {"call_id": "c2", "arguments": {}, "key": "k"}
        )
        self.assertEqual(unknown["error"]["code"], "unknown_tool")
        records = self.toolset.log.records()
        self.assertEqual([(r.key, r.ran) for r in records], [("c1", False), ("k", False)])

    def test_delayed_value_waits_without_holding_up_the_provider(self) -> None:
        """delayed_value waits its delay on the provider's loop while other requests are answered."""
        answers: List[Any] = []

        def slow() -> None:
            body = {"call_id": "d", "arguments": {"value": "v", "delay_ms": 1000}}
            answers.append(call(self.url, "/conformance/tools/delayed_value", body))
            answers.append(time.monotonic())

        waiting = threading.Thread(target=slow)
        waiting.start()
        # Asked once the delayed call is running, and answered while it still waits.
        deadline = time.monotonic() + BOUND
        while not self.toolset.log.in_flight() and time.monotonic() < deadline:
            time.sleep(0.01)
        status, task = call(self.url, "/conformance/task")
        answered = time.monotonic()
        waiting.join(BOUND)
        self.assertEqual((status, task["stage"]), (200, "forced-tool"))
        self.assertLess(answered, answers[1])
        self.assertEqual(json.loads(answers[0][1]["content"])["value"], "v")
        self.assertGreaterEqual(
            self.toolset.log.records()[0].ended - self.toolset.log.records()[0].started, 0.9
        )

    def test_a_bad_tool_request_is_refused_and_not_recorded(self) -> None:
        """A body without a call id, or arguments of the wrong type, gets a 400 and leaves no record."""
        for body in ({"arguments": {}}, {"call_id": "c", "arguments": [1]}, {"call_id": "c", "key": 3}):
            with self.subTest(body=body):
                status, answer = call(self.url, "/conformance/tools/echo_json", body)
                self.assertEqual(status, 400)
                self.assertIn("/conformance/tools/echo_json", answer["error"]["message"])
        self.assertEqual(len(self.toolset.log), 0)
        status, _ = call(self.url, "/conformance/nothing", {})
        self.assertEqual(status, 404)


class ReportTests(unittest.TestCase):
    def test_a_stage_task_names_its_write_tools_beside_the_tools(self) -> None:
        """write_tools lists append_record where the stage offers it; the tool objects stay the provider's."""
        for stage, writes in (("ambiguous-retry", ["append_record"]), ("forced-tool", [])):
            with self.subTest(stage=stage), GateToolset() as toolset:
                session = StageSession(WIRES["openai-chat"], stage, "chat", toolset, model="m")
                self.addCleanup(session.close)
                task = session.task()
                self.assertEqual(task["write_tools"], writes)
                self.assertEqual({tuple(t) for t in task["tools"]}, {("name", "description", "parameters")})

    def test_a_reported_error_carries_only_what_was_reported(self) -> None:
        """The error is named after the client's class and has exactly the fields it reported."""
        error = reported_error({"name": "APIError", "message": "no", "kind": "quota", "status": 429})
        self.assertEqual(type(error).__name__, "APIError")
        self.assertEqual((str(error), error.kind, error.status), ("no", "quota", 429))
        self.assertFalse(hasattr(error, "retryable"))

    def test_the_backend_task_is_the_conformance_request(self) -> None:
        """GET /conformance/task of a backend scenario gives the fixture's system, question and tool."""
        with GateToolset() as toolset:
            wire = WIRES["anthropic"]
            variant = wire.variants("quota", "stream")[1]
            session = BackendSession(wire, "quota", "stream", variant, toolset, model="m")
            task = session.task()
        self.assertEqual((task["question"], task["tools"][0]["name"]), (FX.question, FX.tool_name))
        self.assertEqual((task["variant"], task["stream"]), (variant.name, True))
        self.assertEqual(task["history"], [])

    def test_a_tool_result_task_carries_the_earlier_turns(self) -> None:
        """The tool-result task names the earlier call and its result, as the case's history sends them."""
        with GateToolset() as toolset:
            wire = WIRES["openai-chat"]
            variant = wire.variants("tool-result", "chat")[0]
            task = BackendSession(wire, "tool-result", "chat", variant, toolset, model="m").task()
        turn, answer = json.loads(json.dumps(task["history"]))
        self.assertEqual(turn["role"], "assistant")
        self.assertEqual(turn["tool_calls"][0]["name"], FX.tool_name)
        self.assertEqual(answer["tool_result"]["call_id"], turn["tool_calls"][0]["id"])


class RemoteToolset:
    """The gate's tools as a loop in another process reaches them: over serve's HTTP endpoint."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def aexecute(self, tool_call: Any, *, key: Optional[str] = None, signal: Any = None) -> Any:
        import asyncio

        from conformance.contract import ToolError, ToolResult

        if signal is not None:
            signal.raise_if_aborted()
        unparsed = tool_call.unparsed_arguments
        arguments = unparsed if unparsed is not None else dict(tool_call.arguments)
        body: Dict[str, Any] = {"call_id": tool_call.id, "arguments": arguments}
        if key is not None and key != tool_call.id:
            body["key"] = key
        _, answer = await asyncio.get_running_loop().run_in_executor(
            None, call, self.url, f"/conformance/tools/{tool_call.name}", body
        )
        error = answer.get("error")
        if error is not None:
            return ToolResult(answer["call_id"], answer["name"], error=ToolError(**error))
        return ToolResult(answer["call_id"], answer["name"], answer["content"])


def remote_run(url: str, loop: Any) -> Dict[str, Any]:
    """Run a Python loop as a client in another process would: the task, the tools and the
    provider over HTTP; return the report it would send."""
    import asyncio

    from conformance.contract import AbortController, ToolChoice, ToolSpec
    from conformance.gate.loop import LoopTask

    _, data = call(url, "/conformance/task")
    choice = data["tool_choice"]
    task = LoopTask(
        prompt=data["prompt"],
        tools=tuple(ToolSpec(t["name"], t["description"], t["parameters"]) for t in data["tools"]),
        tool_choice=None if choice is None else ToolChoice(choice["mode"], choice["name"]),
        toolset=RemoteToolset(url),  # type: ignore[arg-type]
        signal=AbortController().signal,
        stream=data["stream"],
        model=data["model"],
        max_requests=data["max_requests"],
        max_seconds=data["max_seconds"],
    )

    async def run() -> Dict[str, Any]:
        try:
            result = await loop.run(task)
        except Exception as exc:  # what the loop raised is its report
            return {"error": {"name": type(exc).__name__, "message": str(exc)}}
        finally:
            await loop.aclose()
        return {"text": result.text, "finish_reason": result.finish_reason, "stopped": result.stopped}

    return asyncio.run(run())


def zoo_loop(loop_class: Any, url: str) -> Any:
    """``loop_class`` (the reference loop or one of the zoo's) over the Anthropic reference backend."""
    from conformance.reference import REFERENCE_BACKENDS

    return loop_class(REFERENCE_BACKENDS["anthropic"](url, False), max_result_chars=4096)


class SameVerdictTests(unittest.TestCase):
    """A loop judged through serve gets the verdict the Python gate gives it."""

    def judged(self, wire: str, stage: str, mode: str, create_loop: Any) -> Dict[str, Any]:
        serve = Serve("--wire", wire, "--stage", stage, "--mode", mode, "--max-result-chars", "4096")
        report = remote_run(serve.url, create_loop(serve.url))
        _, verdict = call(serve.url, "/conformance/outcome", report)
        serve.end()
        return dict(verdict)

    def test_the_reference_loop_passes_every_stage_it_is_judged_on(self) -> None:
        """The reference loop, its tools over HTTP, passes every stage judged from outside, as in Python."""
        from conformance.gate.cases import AgentLoopCase
        from conformance.gate.loop import AgentLoopTarget
        from conformance.gate.reference_loop import ReferenceLoop
        from conformance.gate.stages import STAGES

        wire = "anthropic"
        for stage, row in STAGES.items():
            for mode in row.modes:
                probe = AgentLoopCase(AgentLoopTarget("probe", WIRES[wire], lambda url: None), stage, mode)
                if stage in STAGE_NOT_JUDGED or probe.skip:
                    continue
                with self.subTest(stage=stage, mode=mode):
                    verdict = self.judged(wire, stage, mode, functools.partial(zoo_loop, ReferenceLoop))
                    self.assertEqual(verdict["verdict"], "pass", verdict["detail"])

    def test_a_broken_loop_fails_with_the_gate_s_own_check_ids(self) -> None:
        """Zoo loops judged through serve fail with the very invariants the Python gate names."""
        from conformance.gate.cases import AgentLoopCase
        from conformance.gate.loop import AgentLoopTarget
        from tests import gate_zoo

        table = [
            ("SendsErrorsAsText", "error-result", "chat"),
            ("RerunsEarlierCalls", "tool-error-corrects", "stream"),
            ("IgnoresItsLimit", "large-result", "chat"),
        ]
        for name, stage, mode in table:
            with self.subTest(loop=name, stage=stage, mode=mode):
                create_loop = functools.partial(zoo_loop, getattr(gate_zoo, name))
                target = AgentLoopTarget("python", WIRES["anthropic"], create_loop, max_result_chars=4096)
                with self.assertRaises(AssertionError) as python:
                    AgentLoopCase(target, stage, mode).run()
                verdict = self.judged("anthropic", stage, mode, create_loop)
                self.assertEqual(verdict["verdict"], "fail")
                ids = re.findall(r"\[([a-z-]+)\]$", str(python.exception), re.MULTILINE)
                self.assertEqual(verdict["checks"], list(dict.fromkeys(ids)))


#: What a client in another process cannot show the judge: how its backend lives and ends.
OWN_LIFE = frozenset(
    {
        "finished",
        "abort-reason",
        "abort-promptly",
        "cancel-propagates",
        "connection-closed",
        "backend-closed",
        # A client that waits on past its read timeout reports nothing until serve's own bound.
        "read-timeout",
    }
)
#: The bugs a client driven by serve cannot show the judge: its task hands it the second
#: turn's history, built from the provider's own call, where the Python suite builds it
#: from what the backend returned on the turn before.
OWN_ROUND_TRIP = frozenset({"keeps-id-suffix"})
#: The error fields a backend's report carries, where its exception has them.
ERROR_FIELDS = ("kind", "code", "retryable", "retry_after", "status", "details")


def backend_report(backend: Any, request: Any, stream: bool) -> Dict[str, Any]:
    """What a backend in another process would report of one call: its reply, or its error."""
    import asyncio
    import inspect

    async def settle(value: Any) -> Any:
        return await value if inspect.isawaitable(value) else value

    def usage_of(usage: Any) -> Any:
        names = ("input_tokens", "output_tokens", "total_tokens")
        return None if usage is None else {n: getattr(usage, n, None) for n in names}

    def calls_of(calls: Any) -> List[Dict[str, Any]]:
        return [
            {"id": c.id, "name": c.name, "arguments": c.arguments, "unparsed_arguments": c.unparsed_arguments}
            for c in calls or ()
        ]

    async def run() -> Dict[str, Any]:
        content: List[str] = []
        calls: List[Dict[str, Any]] = []
        yielded: List[Dict[str, Any]] = []
        finish = usage = None
        try:
            if not stream:
                reply = await settle(backend.chat(request))
                return {
                    "content": reply.content,
                    "finish_reason": getattr(reply.finish_reason, "value", reply.finish_reason),
                    "tool_calls": calls_of(reply.tool_calls),
                    "usage": usage_of(reply.usage),
                }
            chunks = await settle(backend.chat_stream(request))

            def keep(chunk: Any) -> None:
                nonlocal finish, usage
                yielded.append(
                    {
                        "content": chunk.content,
                        "tool_calls": calls_of(chunk.tool_calls),
                        "finish_reason": getattr(chunk.finish_reason, "value", chunk.finish_reason),
                        "usage": usage_of(chunk.usage),
                    }
                )
                content.append(chunk.content)
                calls.extend(calls_of(chunk.tool_calls))
                if chunk.finish_reason is not None:
                    finish = getattr(chunk.finish_reason, "value", chunk.finish_reason)
                usage = chunk.usage if chunk.usage is not None else usage

            # Chunk by chunk, so that what came before an error is reported beside it.
            if hasattr(chunks, "__aiter__"):
                async for chunk in chunks:
                    keep(chunk)
            else:
                for chunk in chunks:
                    keep(chunk)
            return {
                "content": "".join(content),
                "finish_reason": finish,
                "tool_calls": calls,
                "usage": usage_of(usage),
                "chunks": yielded,
            }
        except Exception as exc:  # what the backend raised is its report
            error = {"name": type(exc).__name__, "message": str(exc)}
            error.update({f: getattr(exc, f) for f in ERROR_FIELDS if hasattr(exc, f)})
            if "details" in error:
                error["details"] = dict(error["details"])
            report = {"content": "".join(content), "error": error}
            if stream:
                report["chunks"] = yielded
            return report
        finally:
            close = getattr(backend, "aclose", None) or getattr(backend, "close", None)
            if close is not None:
                await settle(close())

    return asyncio.run(asyncio.wait_for(run(), BOUND))


def _reading(create: Any) -> Any:
    """``create``, its backend given the zoo's read timeout (what serve's latency scenarios are told)."""
    from tests.mutants.latency import ZOO_READ_TIMEOUT

    def reading(url: str, http2: bool) -> Any:
        backend = create(url, http2)
        backend.timeout = ZOO_READ_TIMEOUT
        return backend

    return reading


class SameBackendVerdictTests(unittest.TestCase):
    """A backend judged through serve gets the verdict the Python suite gives it."""

    wire = "openai-chat"

    def judged(
        self, scenario: str, mode: str, variant: str, create: Any, model: str = "conformance-model"
    ) -> Any:
        from conformance._multiturn import multi_turn_request
        from conformance.scenarios import SCENARIOS
        from tests.mutants.latency import ZOO_READ_TIMEOUT

        # The latency scenarios need the client's read timeout: the zoo's, which its backends use.
        latency = SCENARIOS[scenario].needs_read_timeout
        serve = Serve(
            "--wire", self.wire, "--scenario", scenario, "--mode", mode, "--model", model,
            *(("--variant", variant) if variant else ()),
            *(("--read-timeout", str(ZOO_READ_TIMEOUT)) if latency else ()),
        )  # fmt: skip
        request = multi_turn_request(WIRES[self.wire], scenario, variant, model, None)
        report = backend_report(create(serve.url, False), request, mode == "stream")
        _, verdict = call(serve.url, "/conformance/outcome", report)
        serve.end()
        return verdict

    def test_the_reference_backend_passes_every_judged_scenario(self) -> None:
        """The reference backend, reporting what it returned or raised, passes every variant."""
        from conformance.reference import REFERENCE_BACKENDS
        from conformance.scenarios import SCENARIOS

        wire = WIRES[self.wire]
        for scenario, row in SCENARIOS.items():
            if scenario in ("abort", "cancel") or wire.absent(scenario):
                continue
            for mode in row.modes:
                for variant in wire.variants(scenario, mode):
                    with self.subTest(scenario=scenario, mode=mode, variant=variant.name):
                        create = _reading(REFERENCE_BACKENDS[self.wire])
                        verdict = self.judged(scenario, mode, variant.name, create)
                        self.assertEqual(verdict["verdict"], "pass", verdict["detail"])

    def test_every_mutant_is_caught_by_the_checks_it_declares(self) -> None:
        """Each mutant of the zoo judged through serve fails its cases with exactly its declared checks."""
        from tests.test_mutants import MUTANTS

        wire = WIRES[self.wire]
        tried = 0
        for mutant in MUTANTS[self.wire]:
            if mutant.headers or "h1" not in mutant.transports or OWN_LIFE & set(mutant.checks):
                continue
            if mutant.name in OWN_ROUND_TRIP:
                continue
            if mutant.retries:
                continue  # serve plays each scenario as it is: it has no target saying it retries
            for case in mutant.cases:
                scenario, mode = case.split("/")
                if scenario in ("abort", "cancel"):
                    continue
                with self.subTest(mutant=mutant.name, case=case):
                    caught: List[str] = []
                    for variant in wire.variants(scenario, mode):
                        verdict = self.judged(scenario, mode, variant.name, mutant.create, mutant.model)
                        caught += verdict["checks"]
                    self.assertEqual(sorted(set(caught)), sorted(mutant.checks))
                    tried += 1
        self.assertGreater(tried, 10)


class ServeCommandTests(unittest.TestCase):
    def test_list_shows_stages_and_why_a_wire_skips_one(self) -> None:
        """serve --list names each stage and mode, and the gate's reason where the wire cannot play it."""
        out = io.StringIO()
        self.assertEqual(
            main(["serve", "--list", "--wire", "openai-chat", "--stage", "reasoning"], out=out), 0
        )
        self.assertIn(
            "--stage reasoning --mode chat: not played (openai-chat carries no reasoning", out.getvalue()
        )
        self.assertNotIn("text --mode chat", out.getvalue())
        out = io.StringIO()
        main(["serve", "--list", "--wire", "anthropic"], out=out)
        self.assertIn("  --stage forced-tool --mode stream\n", out.getvalue())
        self.assertIn("--stage cancel --mode chat (served, not judged", out.getvalue())
        self.assertIn("--stage cancel-in-tool --mode stream (served, not judged", out.getvalue())

    def test_stage_and_scenario_names_are_told_apart(self) -> None:
        """A stage given as a scenario (and the other way round) is refused with the right option."""
        from tests.test_main import usage_error

        self.assertIn(
            "--stage forced-tool",
            usage_error(["serve", "--wire", "openai-chat", "--scenario", "forced-tool"]),
        )
        self.assertIn(
            "--scenario tool-call", usage_error(["serve", "--wire", "openai-chat", "--stage", "tool-call"])
        )
        both = ["serve", "--wire", "openai-chat", "--stage", "text", "--scenario", "text"]
        self.assertIn("not both", usage_error(both))
        cut = ["serve", "--wire", "openai-chat", "--stage", "large-result", "--max-result-chars", "0"]
        self.assertIn("--max-result-chars must be a positive number", usage_error(cut))
        reasoning = usage_error(["serve", "--wire", "openai-chat", "--stage", "reasoning"])
        self.assertIn("does not play the reasoning stage", reasoning)
        self.assertIn(
            "stream mode only", usage_error(["serve", "--wire", "openai-chat", "--stage", "close-mid-event"])
        )


if __name__ == "__main__":
    unittest.main()
