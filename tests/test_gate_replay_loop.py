"""Recorded agent-loop conversations replayed to a loop: the reference loop passes, a loop
that runs a call twice fails naming the call, and the scripted stages still run."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
import unittest
from dataclasses import replace
from typing import Any

from conformance.contract import AbortController, ToolCall, ToolResult
from conformance.errors import TargetDefinitionError
from conformance.gate import (
    AgentLoopConformanceTestCase,
    GateToolset,
    LoopTask,
    ReferenceLoop,
    ReplayWire,
    agent_loop_cases,
)
from conformance.gate._conversation import Conversation
from conformance.gate.cases import MAX_REQUESTS, AgentLoopCase
from conformance.gate.loop import AgentLoopTarget
from conformance.gate.record import Recorder
from conformance.gate.replay_cases import ReplayLoopCase
from conformance.gate.stages import STAGES
from conformance.provider import start_fake_provider
from conformance.reference import REFERENCE_BACKENDS
from conformance.wires import openai_chat_wire

from .test_gate_loop import outcome

RUN_ID = "rec1"
STAGE = "parallel-calls"


class RunsEachCallTwice(ReferenceLoop):
    """Runs every call a second time under the same call id."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        await task.toolset.aexecute(call, key=call.id, signal=task.signal)
        return await super()._execute(task, tracker, call, schema)


class RunsTheLastCallAgainLater(ReferenceLoop):
    """Returns its answer, but leaves a thread that runs the last call again a while later."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        self.last_call = call
        return await super()._execute(task, tracker, call, schema)

    async def run(self, task: LoopTask) -> Any:
        result = await super().run(task)

        def later() -> None:
            time.sleep(0.3)
            task.toolset.execute(self.last_call)

        threading.Thread(target=later, name="runs-the-last-call-again-later", daemon=True).start()
        return result


def record(folder: str, stage: str, stream: bool, run_id: str = RUN_ID) -> None:
    """Record the reference loop carrying ``stage`` through the recorder, the fake provider upstream."""
    with GateToolset(run_id=run_id) as toolset, start_fake_provider() as provider:
        row = STAGES[stage]
        conversation = Conversation(openai_chat_wire, row, toolset, MAX_REQUESTS)
        provider.reply(conversation.handle)
        with Recorder(openai_chat_wire, provider.url, folder, scenario=stage, run_id=run_id) as recorder:
            loop = ReferenceLoop(REFERENCE_BACKENDS["openai-chat"](recorder.url, False))
            task = LoopTask(
                row.prompt,
                toolset.specs(),
                row.tool_choice,
                toolset,
                AbortController().signal,
                stream,
                "conformance-model",
                MAX_REQUESTS,
                5.0,
            )

            async def go() -> None:
                try:
                    await loop.run(task)
                finally:
                    await loop.aclose()

            asyncio.run(go())
            recorder.wait_written(len(conversation.exchanges))


def target(folder: str, loop: type = ReferenceLoop) -> AgentLoopTarget:
    def create(url: str) -> Any:
        return loop(REFERENCE_BACKENDS["openai-chat"](url, False), max_result_chars=4096)

    return AgentLoopTarget("replayed loop", ReplayWire(folder), create, max_result_chars=4096)


class ReplayedConversationTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.folder = tempfile.mkdtemp(prefix="loop-fixtures-")
        record(cls.folder, STAGE, stream=True)
        record(cls.folder, "forced-tool", stream=False)

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.folder, True)

    def replay_cases(self, loop: type = ReferenceLoop) -> dict:
        cases = agent_loop_cases(target(self.folder, loop))
        return {case.name: case for case in cases if isinstance(case, ReplayLoopCase)}

    def test_one_case_per_recorded_conversation_and_mode(self) -> None:
        self.assertEqual(sorted(self.replay_cases()), ["replay/forced-tool/chat", f"replay/{STAGE}/stream"])

    def test_the_reference_loop_passes_its_own_recordings(self) -> None:
        for name, case in self.replay_cases().items():
            with self.subTest(name):
                self.assertEqual(outcome(case), ("pass", ""))

    def test_a_loop_that_runs_a_call_twice_fails_naming_the_call(self) -> None:
        case = self.replay_cases(RunsEachCallTwice)[f"replay/{STAGE}/stream"]
        status, message = outcome(case)
        self.assertEqual(status, "FAIL")
        [first, *_] = [c for c in case.fixtures[0].events if c.get("call_id")]
        self.assertIn(f"call {first['call_id']} (read_fixture) was executed 2 times", message)
        # Its extra runs shift the fixture ids it sends back: the next request matches no recording.
        self.assertIn("matches no recording", message)
        self.assertIn("differs in messages", message)

    def test_a_tool_run_left_behind_fails_though_it_came_after_the_return(self) -> None:
        """A call run again in a thread after run() returned is seen, as in a live case."""
        case = self.replay_cases(RunsTheLastCallAgainLater)["replay/forced-tool/chat"]
        status, message = outcome(case)
        self.assertEqual(status, "FAIL")
        self.assertIn("after run() had returned", message)

    def test_a_recording_without_a_run_id_says_so(self) -> None:
        folder = tempfile.mkdtemp(prefix="loop-fixtures-")
        self.addCleanup(shutil.rmtree, folder, True)
        record(folder, "forced-tool", stream=True, run_id="other")
        replayed = target(folder)
        wire = replayed.wire
        assert isinstance(wire, ReplayWire)
        # Stamped with no run id: the replay's toolset makes other fixture ids.
        stamped = [replace(f, stamp=replace(f.stamp, run_id=None)) for f in wire.fixtures]
        replayed = AgentLoopTarget("replayed loop", ReplayWire(stamped), replayed.create_loop)
        [case] = [c for c in agent_loop_cases(replayed) if isinstance(c, ReplayLoopCase)]
        status, message = outcome(case)
        self.assertEqual(status, "FAIL")
        self.assertIn("the recording carries no run id", message)
        self.assertIn("differs in messages", message)

    def test_a_replayed_conversation_is_skipped_by_its_key(self) -> None:
        """``skip`` names a replayed conversation, or one mode of it, by its case name."""
        replayed = target(self.folder)
        for key in ("replay/forced-tool", "replay/forced-tool/chat"):
            with self.subTest(key):
                skipping = replace(replayed, skip={key: "the gateway pins another model"})
                cases = {c.name: c for c in agent_loop_cases(skipping) if isinstance(c, ReplayLoopCase)}
                self.assertEqual(cases["replay/forced-tool/chat"].skip, "the gateway pins another model")
                self.assertIsNone(cases[f"replay/{STAGE}/stream"].skip)
        with self.assertRaisesRegex(TargetDefinitionError, "unknown stage 'replay/'"):
            replace(replayed, skip={"replay/": "no conversation named"})
        with self.assertRaisesRegex(TargetDefinitionError, "needs a reason"):
            replace(replayed, skip={"replay/forced-tool": " "})

    def test_the_mixin_generates_a_test_per_recorded_conversation(self) -> None:
        """A mixin class on a ReplayWire gets test_replay_<conversation>_<mode>, which replays it."""
        folder = self.folder

        class Replayed(AgentLoopConformanceTestCase, unittest.TestCase):
            wire = ReplayWire(folder)
            max_result_chars = 4096
            skip = {"replay/forced-tool": "left out by its key"}

            def create_loop(self, url: str) -> Any:
                return ReferenceLoop(REFERENCE_BACKENDS["openai-chat"](url, False), max_result_chars=4096)

        replays = sorted(name for name in dir(Replayed) if name.startswith("test_replay_"))
        self.assertEqual(replays, ["test_replay_forced_tool_chat", "test_replay_parallel_calls_stream"])
        self.assertIn(
            "replay/parallel-calls/stream: the loop must play",
            Replayed.test_replay_parallel_calls_stream.__doc__,
        )
        result = unittest.TestResult()
        unittest.TestSuite([Replayed(name) for name in replays]).run(result)
        self.assertEqual((result.testsRun, result.failures, result.errors), (2, [], []))
        self.assertEqual([reason for _, reason in result.skipped], ["left out by its key"])

        class Twice(Replayed):
            def create_loop(self, url: str) -> Any:
                return RunsEachCallTwice(REFERENCE_BACKENDS["openai-chat"](url, False), max_result_chars=4096)

        result = unittest.TestResult()
        Twice("test_replay_parallel_calls_stream").run(result)
        [(_, failure)] = result.failures
        self.assertIn("was executed 2 times", failure)

    def test_the_mixin_refuses_a_clash_or_an_override_of_a_replayed_test(self) -> None:
        """Two conversations that make one method name, or a class defining one, fail at class creation."""
        recorded = ReplayWire(self.folder).fixtures
        [fixture, *_] = [f for f in recorded if f.stamp.scenario == "forced-tool"]
        twin = replace(fixture, stamp=replace(fixture.stamp, scenario="forced_tool"))
        with self.assertRaisesRegex(TargetDefinitionError, "'forced-tool' and 'forced_tool' would both be"):

            class Clash(AgentLoopConformanceTestCase, unittest.TestCase):
                wire = ReplayWire([*recorded, twin])

        folder = self.folder
        with self.assertRaisesRegex(TargetDefinitionError, "skip = {'replay/forced-tool': 'the reason'}"):

            class Overrides(AgentLoopConformanceTestCase, unittest.TestCase):
                wire = ReplayWire(folder)

                def test_replay_forced_tool_chat(self) -> None:
                    pass

    def test_the_scripted_stages_still_run_on_a_replayed_wire(self) -> None:
        replayed = target(self.folder)
        case = AgentLoopCase(replayed, "forced-tool", "stream")
        self.assertIsNone(case.skip)
        self.assertEqual(outcome(case), ("pass", ""))

    def test_the_rate_limited_stage_runs_on_a_replayed_wire(self) -> None:
        """The 429 the rate-limited stage sends is the recorded wire's own: a replay plays it too."""
        replayed = target(self.folder)
        for mode in ("chat", "stream"):
            with self.subTest(mode):
                case = AgentLoopCase(replayed, "rate-limited", mode)
                self.assertIsNone(case.skip)
                self.assertEqual(outcome(case), ("pass", ""))

    def test_smoke_replays_the_recordings_and_the_report_says_where_they_came_from(self) -> None:
        """Smoke on a replayed target replays every recording, and its stamp says where they came from."""
        from conformance.gate.report import run_gate

        report = run_gate(target(self.folder), smoke=True, jobs=2)
        names = sorted(r.name for r in report.results)
        self.assertIn("replay/forced-tool/chat", names)
        self.assertIn(f"replay/{STAGE}/stream", names)
        self.assertIn("forced-tool/stream", names)
        self.assertTrue(report.passed, [r.detail for r in report.results if r.verdict == "fail"])
        recording = report.stamp.recording
        assert recording is not None
        wire = target(self.folder).wire
        assert isinstance(wire, ReplayWire)
        self.assertEqual(recording["fixtures"], len(wire.fixtures))
        self.assertEqual(recording["wires"], ["openai-chat"])
        self.assertEqual(recording["models"], ["conformance-model"])
        # The two conversations were recorded from two fake upstreams, each on a port of its own.
        self.assertEqual(len(recording["base_urls"]), 2)
        self.assertTrue(all(url.startswith("http://127.0.0.1:") for url in recording["base_urls"]))
        self.assertEqual(recording["disagreements"], ["base_url"])
        self.assertLessEqual(recording["recorded_at"]["first"], recording["recorded_at"]["last"])
        markdown = report.markdown()
        self.assertIn("| recorded model | `conformance-model` |", markdown)
        self.assertIn("| replayed from | ", markdown)

    def test_fixtures_that_disagree_are_named_in_the_report(self) -> None:
        """Fixtures stamped with two models are reported as disagreeing, in the JSON and the Markdown."""
        from conformance.gate.report import run_gate

        fixtures = ReplayWire(self.folder).fixtures
        first, *rest = fixtures
        mixed = [replace(first, stamp=replace(first.stamp, model="other-model")), *rest]
        replayed = AgentLoopTarget("mixed", ReplayWire(mixed), target(self.folder).create_loop)
        report = run_gate(replayed, smoke=True, jobs=2)
        recording = report.stamp.recording
        assert recording is not None
        self.assertEqual(recording["models"], ["conformance-model", "other-model"])
        self.assertEqual(recording["disagreements"], ["model", "base_url"])
        self.assertIn("| ⚠️ fixtures disagree | on model:", report.markdown())


if __name__ == "__main__":
    unittest.main()
