"""The agent-loop suite end to end: the reference loop passes every stage, a target is checked
as it is declared, and the mixin generates one test per stage and mode."""

from __future__ import annotations

import os
import threading
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, Optional, Tuple

from conformance._host import host
from conformance._loops import kept_loops
from conformance.errors import TargetDefinitionError
from conformance.gate import (
    STAGES,
    AgentLoopConformanceTestCase,
    AgentLoopTarget,
    LoopResult,
    ReferenceLoop,
    agent_loop_cases,
)
from conformance.gate.cases import AgentLoopCase
from conformance.gate.faults import FAULT_STAGES, fault_skip
from conformance.gate.stages import STRESS_STAGES
from conformance.reference import REFERENCE_BACKENDS
from conformance.wires import WIRES, openai_chat_wire
from conformance.wires._base import Wire

from .call_id_shapes import ID_SHAPES, id_shape
from .hygiene import blocks_on_purpose
from .test_provider_support import LONG_TESTS, asyncio_debug_in_long_runs_only

#: Why a test that counts open descriptors is skipped.
NO_FD_LIST = "counts descriptors in /proc/self/fd, which this system lacks"


def reference_target(wire: str, http2: bool, limit: Optional[int] = 4096) -> AgentLoopTarget:
    def create(url: str) -> ReferenceLoop:
        return ReferenceLoop(REFERENCE_BACKENDS[wire](url, http2), max_result_chars=limit)

    return AgentLoopTarget(
        f"reference loop {wire}",
        WIRES[wire],
        create,
        http2=http2,
        max_result_chars=limit,
        stress=STRESS_STAGES,
    )


def outcome(case: AgentLoopCase) -> Tuple[str, str]:
    try:
        case.run()
    except unittest.SkipTest as skipped:
        return "skip", str(skipped)
    except AssertionError as failed:
        return "FAIL", str(failed)
    return "pass", ""


class ReferenceLoopTests(unittest.TestCase):
    def test_the_reference_loop_passes_every_stage_on_every_wire_that_scripts_turns(self) -> None:
        """Every case runs and passes wherever the wire plays scripted conversations, h1 and h2c.

        Over h2c, by default, the stages whose verdict the transport can change (a cancel
        or a fault: how the request ends); every stage with CONFORMANCE_LONG_TESTS=1 (CI),
        and the main job (``python -m conformance``) runs them all as well.
        """
        cases = [
            case
            for name, wire in WIRES.items()
            if wire.scripts_turns()
            for http2 in (False, True)
            for case in agent_loop_cases(reference_target(name, http2))
            if LONG_TESTS or not http2 or case.stage.cancel or case.stage.fault
        ]
        self.assertTrue(cases, "no wire scripts turns")
        # Most stages spend their time waiting on purpose (a retry's pause, a cancel's grace, a
        # budget), not computing: as many at once as the main job runs in a process.
        with asyncio_debug_in_long_runs_only(), kept_loops(), ThreadPoolExecutor(max_workers=16) as pool:
            results = list(pool.map(outcome, cases))
        failed = [
            f"{c.target.name} http2={c.target.http2} {c.name}:\n{detail}"
            for c, (status, detail) in zip(cases, results)
            if status == "FAIL"
        ]
        self.assertEqual(failed, [], "\n".join(failed))
        skipped = {detail for status, detail in results if status == "skip"}
        allowed = {f"{w} carries no reasoning across a tool turn" for w in WIRES}
        allowed |= {f"{w} has no rate-limit reply: {WIRES[w].absent('rate-limit')}" for w in WIRES}
        allowed |= {f"{w} cannot interleave two calls' fragments: it sends each call whole" for w in WIRES}
        # No corrupt call reaches a loop there; the text-argument wires and the streams play it.
        corrupt = FAULT_STAGES["corrupt-arguments"]
        unplayed = [(w, m) for w in ("gemini", "gemini-vertex", "ollama") for m in ("chat", "stream")]
        blocks = ("anthropic", "anthropic-vertex", "bedrock-converse", "bedrock-invoke")
        unplayed += [(w, "chat") for w in blocks]
        allowed |= {str(fault_skip(corrupt, WIRES[w], mode)) for w, mode in unplayed}
        # Calls that come with stop play only where a provider sends them; Ollama and Cohere filter
        # nothing, and no Azure Responses content filter was seen.
        unplayed = [("calls-with-stop", w) for w in ("openai-responses", *blocks, "cohere")]
        unplayed += [("calls-with-stop", w) for w in ("azure-openai-chat", "azure-openai-responses")]
        unplayed += [("content-filter-turn", w) for w in ("ollama", "cohere", "azure-openai-responses")]
        allowed |= {str(AgentLoopCase(reference_target(w, False), s, "chat").skip) for s, w in unplayed}
        self.assertLessEqual(skipped, allowed)

    def test_results_go_back_whole_without_a_limit(self) -> None:
        """Without max_result_chars the large result goes back whole, and the case holds it to that."""
        target = reference_target("openai-chat", False, limit=None)
        for case in agent_loop_cases(target):
            if case.stage_name == "large-result":
                with self.subTest(case.name):
                    self.assertEqual(outcome(case), ("pass", ""))

    def test_a_cut_result_fails_a_loop_that_declares_no_limit(self) -> None:
        """A loop that cuts results but declares no limit is caught by result-content."""

        def create(url: str) -> ReferenceLoop:
            return ReferenceLoop(REFERENCE_BACKENDS["openai-chat"](url, False), max_result_chars=100)

        target = AgentLoopTarget("cuts", openai_chat_wire, create)
        case = next(c for c in agent_loop_cases(target) if c.name == "large-result/chat")
        status, detail = outcome(case)
        self.assertEqual(status, "FAIL")
        self.assertRegex(
            detail, r"read_fixture call_\w+: request 2 sent back a result that is not the tool's output"
        )
        self.assertIn("[result-content]", detail)

    def test_a_wire_that_scripts_no_turns_skips_with_the_reason(self) -> None:
        """A wire of one's own without the multi-turn hooks skips every case, saying why."""

        class Plain(Wire):
            name = "plain"

        target = AgentLoopTarget("plain", Plain(), lambda url: None)
        reasons = {case.skip for case in agent_loop_cases(target)}
        self.assertEqual(reasons, {"plain cannot play scripted conversations"})


class StreamCutTests(unittest.TestCase):
    def test_each_event_arrives_in_two_pieces_and_the_telling_cuts_are_made(self) -> None:
        """event_chunks: no event whole in one piece, a cut at every event's end, one inside the
        first multi-byte character and one inside the first JSON string; the same every run."""
        from conformance.wires._base import event_chunks

        events = [b'data: {"text":"caf\xc3\xa9"}\n\n', b"data: [DONE]\n\n", b"x"]
        chunks = event_chunks(events, "seed")
        self.assertEqual(b"".join(chunks), b"".join(events))
        self.assertEqual(chunks, event_chunks(events, "seed"))
        ends = {0}
        for chunk in chunks:
            ends.add(max(ends) + len(chunk))
        start = 0
        for event in events:
            with self.subTest(event=event):
                self.assertIn(start + len(event), ends)  # the event ends a piece
                inside = [e for e in ends if start < e < start + len(event)]
                self.assertEqual(bool(inside), len(event) > 1)  # and is cut inside
            start += len(event)
        data = b"".join(events)
        self.assertIn(data.index(b"\xc3") + 1, ends)  # inside the first multi-byte character
        self.assertIn(data.index(b'":"') + 5, ends)  # inside the first JSON string value


class BrokenLoopMessageTests(unittest.TestCase):
    def test_a_loop_that_returns_nothing_is_told_what_to_return(self) -> None:
        """A run(task) that returns None fails finished with the type it must return."""

        class Silent:
            def run(self, task: Any) -> None:
                return None

        target = AgentLoopTarget("silent", openai_chat_wire, lambda url: Silent())
        case = next(c for c in agent_loop_cases(target) if c.name == "text/chat")
        status, detail = outcome(case)
        self.assertEqual(status, "FAIL")
        self.assertIn(
            "run(task) returned NoneType, not a LoopResult(text, finish_reason, stopped) [finished]", detail
        )
        self.assertIn("hint: ", detail)

    @unittest.skipUnless(os.path.isdir("/proc/self/fd"), NO_FD_LIST)
    def test_a_loop_that_blocks_its_event_loop_leaves_none_of_the_case_open(self) -> None:
        """A loop stuck in a blocking call on its own event loop gets the loop's descriptors closed,
        and the message says what it still holds."""
        release = threading.Event()
        self.addCleanup(release.set)

        class Blocks:
            async def run(self, task: Any) -> LoopResult:
                with blocks_on_purpose():
                    release.wait(30)
                return LoopResult("", "stop")

        target = AgentLoopTarget("blocks", openai_chat_wire, lambda url: Blocks(), timeout=0.3)
        case = next(c for c in agent_loop_cases(target) if c.name == "text/chat")
        host()  # the process's provider loop outlives every case: it is not the case's to give back
        fds = len(os.listdir("/proc/self/fd"))
        status, detail = outcome(case)
        self.assertEqual(status, "FAIL")
        released = "closed that event loop's selector and wake-up sockets; the loop watched no socket"
        self.assertIn(released, detail)
        self.assertLessEqual(len(os.listdir("/proc/self/fd")), fds)

    def test_a_loop_that_never_asks_fails_requests_and_final_text(self) -> None:
        """A sync loop that answers without asking the model sent no request and no final text."""

        class Lazy:
            def run(self, task: Any) -> LoopResult:
                return LoopResult("made up", "stop")

        target = AgentLoopTarget("lazy", openai_chat_wire, lambda url: Lazy())
        case = next(c for c in agent_loop_cases(target) if c.name == "forced-tool/stream")
        status, detail = outcome(case)
        self.assertEqual(status, "FAIL")
        self.assertIn(
            "expected 2 generation request(s) for this conversation, got 0 (it stopped early) [requests]",
            detail,
        )


class LateFirstTurn:
    """A backend that sends its first request only 0.55 s in, then reads the reply for a second."""

    def __init__(self, url: str) -> None:
        self.inner = REFERENCE_BACKENDS["openai-chat"](url, False)
        self.calls = 0

    async def chat(self, request: Any) -> Any:
        import asyncio

        self.calls += 1
        if self.calls > 1:
            return await self.inner.chat(request)
        await asyncio.sleep(0.55)
        response = await self.inner.chat(request)
        await asyncio.sleep(1.0)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class BudgetStageTests(unittest.TestCase):
    def test_a_call_that_came_as_the_budget_ran_out_need_not_run(self) -> None:
        """In the timeout stage, a turn sent after the loop's budget was nearly spent owes no run."""
        target = AgentLoopTarget(
            "late first turn", openai_chat_wire, lambda url: ReferenceLoop(LateFirstTurn(url))
        )
        case = next(c for c in agent_loop_cases(target) if c.name == "timeout/chat")
        self.assertEqual(outcome(case), ("pass", ""))

    def test_a_call_that_came_in_time_must_still_run(self) -> None:
        """A loop that had the call at once and stopped at "budget" without running it fails executions."""

        class Skip(Exception):
            pass

        class SkipsTheCall(ReferenceLoop):
            async def _execute(self, task: Any, tracker: Any, call: Any, schema: Any) -> Any:
                raise Skip

            async def run(self, task: Any) -> LoopResult:
                try:
                    return await super().run(task)
                except Skip:
                    return LoopResult("", "tool_calls", stopped="budget")

        target = AgentLoopTarget(
            "skips", openai_chat_wire, lambda url: SkipsTheCall(REFERENCE_BACKENDS["openai-chat"](url, False))
        )
        case = next(c for c in agent_loop_cases(target) if c.name == "timeout/chat")
        status, message = outcome(case)
        self.assertEqual(status, "FAIL")
        self.assertIn("never executed; the model called it and waited for its result [executions]", message)


class TargetTests(unittest.TestCase):
    def test_each_misdeclaration_is_named(self) -> None:
        """A bad wire, factory, limit, timeout or skip key is refused with what to do."""
        create = lambda url: None  # noqa: E731
        table: List[Tuple[str, Any, str]] = [
            ("wire", dict(wire="openai-chat"), "wire must be a Wire"),
            ("factory", dict(create_loop=None), "create_loop must be a callable"),
            ("limit", dict(max_result_chars=0), "max_result_chars must be a positive"),
            ("timeout", dict(timeout=0), "timeout must be positive"),
            ("skip key", dict(skip={"forced-tools": "x"}), "did you mean 'forced-tool'"),
            ("skip reason", dict(skip={"cancel": " "}), "needs a reason"),
        ]
        for name, change, words in table:
            with self.subTest(name):
                kwargs = dict(name="t", wire=openai_chat_wire, create_loop=create)
                kwargs.update(change)
                with self.assertRaises(TargetDefinitionError) as raised:
                    AgentLoopTarget(**kwargs)
                self.assertIn(words, str(raised.exception))

    def test_loop_result_refuses_an_unknown_stop(self) -> None:
        """stopped is 'done' or 'budget', nothing else."""
        with self.assertRaisesRegex(ValueError, "must be 'done' or 'budget'"):
            LoopResult("", "stop", stopped="gave-up")

    def test_loop_result_usage_is_counts_none_or_unset(self) -> None:
        """usage is a Usage, None (unavailable) or unset ("not reported"); anything else is refused."""
        from conformance.contract import Usage
        from conformance.gate.loop import USAGE_NOT_REPORTED

        self.assertEqual(LoopResult("", "stop").usage, USAGE_NOT_REPORTED)
        self.assertIsNone(LoopResult("", "stop", usage=None).usage)
        self.assertEqual(LoopResult("", "stop", usage=Usage(1, 2, 3)).usage, Usage(1, 2, 3))
        for wrong in ("unavailable", {"input_tokens": 1}, 96):
            with self.subTest(usage=wrong), self.assertRaisesRegex(ValueError, "LoopResult.usage must be"):
                LoopResult("", "stop", usage=wrong)

    def test_the_usage_sent_is_summed_over_whole_turns_where_the_wire_sends_it(self) -> None:
        """Usage sent: summed over turns answered whole; none without include_usage; a cut is not judged."""
        from types import SimpleNamespace

        from conformance.contract import Usage
        from conformance.gate._usage import UNJUDGED, sent_usage

        def exchange(body: Any, end: str = "complete", fault: Optional[str] = None, cut: bool = False) -> Any:
            request = SimpleNamespace(json=body, response=SimpleNamespace(end=end))
            return SimpleNamespace(request=request, turn=object(), fault=fault, problems=(), cut=cut)

        whole, streamed = {"stream": False}, {"stream": True, "stream_options": {"include_usage": True}}
        table = [
            ("two whole turns", "openai-chat", [exchange(whole), exchange(streamed)], (Usage(62, 34, 96), 2)),
            ("no include_usage", "openai-chat", [exchange({"stream": True})], (None, 0)),
            (
                "a 429 reports none",
                "anthropic",
                [exchange({}), exchange({}, fault="rate-limit")],
                (Usage(31, 17, 48), 1),
            ),
            ("a turn never sent whole", "gemini", [exchange({}, end="reset")], (None, 0)),
            ("a cut stream", "anthropic", [exchange({}, cut=True, fault="close-after-first")], (UNJUDGED, 0)),
            ("a wire of one's own", "my-wire", [exchange({})], (UNJUDGED, 0)),
        ]
        for name, wire, exchanges, expected in table:
            with self.subTest(name):
                self.assertEqual(sent_usage(wire, exchanges), expected)

    def test_a_request_record_says_status_and_request_id_or_none(self) -> None:
        """The record of a request keeps the provider's status and request id, None where none was sent."""
        import http.client
        from urllib.parse import urlsplit

        from conformance.gate.log import RequestRecord
        from conformance.provider import DropReply, JsonReply, start_fake_provider

        def post(url: str, path: str) -> None:
            connection = http.client.HTTPConnection(urlsplit(url).netloc, timeout=5)
            try:
                connection.request("POST", path, body=b"{}", headers={"content-type": "application/json"})
                connection.getresponse().read()
            finally:
                connection.close()

        replies = iter([JsonReply({}, headers={"X-Amzn-RequestId": "1b2c"}), DropReply()])
        with start_fake_provider() as provider:
            provider.reply(lambda request: next(replies))
            post(provider.url, "/one")
            with self.assertRaises((http.client.HTTPException, ConnectionError)):
                post(provider.url, "/two")
            first, second = [RequestRecord.of(n, r) for n, r in enumerate(provider.requests, 1)]
        self.assertEqual((first.status, first.request_id, first.target), (200, "1b2c", "/one"))
        self.assertEqual((second.status, second.request_id), (None, None))
        self.assertEqual(str(second), "POST /two (HTTP/1.1) -> no status")

    def test_a_skipped_stage_is_skipped_with_the_target_reason(self) -> None:
        """skip by stage or by stage and mode skips those cases with the reason given."""
        target = AgentLoopTarget(
            "t", openai_chat_wire, lambda url: None, skip={"cancel": "no signal", "text/chat": "stream only"}
        )
        reasons = {c.name: c.skip for c in agent_loop_cases(target)}
        self.assertEqual(reasons["cancel/stream"], "no signal")
        self.assertEqual(reasons["text/chat"], "stream only")
        self.assertIsNone(reasons["text/stream"])


class MixinTests(unittest.TestCase):
    def test_a_subclass_gets_one_test_per_stage_and_mode(self) -> None:
        """Naming a wire generates test_<stage>_<mode> for every stage, each documented."""

        class Mine(AgentLoopConformanceTestCase, unittest.TestCase):
            wire = openai_chat_wire

            def create_loop(self, url: str) -> Any:
                return ReferenceLoop(REFERENCE_BACKENDS["openai-chat"](url, False))

        names = sorted(n for n in vars(Mine) if n.startswith("test_"))
        expected = sorted(f"test_{s.replace('-', '_')}_{m}" for s, row in STAGES.items() for m in row.modes)
        self.assertEqual(names, expected)
        self.assertIn("docs/gate-stages.md#forced-tool", Mine.test_forced_tool_stream.__doc__ or "")
        result = unittest.TestResult()
        unittest.defaultTestLoader.loadTestsFromName("test_forced_tool_chat", Mine).run(result)
        self.assertEqual((result.testsRun, result.failures, result.errors), (1, [], []))

    def test_a_misspelt_setting_or_a_missing_wire_fails_at_class_creation(self) -> None:
        """A typo in a setting, or no wire on a TestCase, is refused when the class is made."""
        with self.assertRaisesRegex(TargetDefinitionError, "did you mean 'max_result_chars'"):

            class Typo(AgentLoopConformanceTestCase, unittest.TestCase):
                wire = openai_chat_wire
                max_result_char = 10

        with self.assertRaisesRegex(TargetDefinitionError, "set wire = one of conformance's wires"):

            class NoWire(AgentLoopConformanceTestCase, unittest.TestCase):
                pass


def measured_id(wire: Wire) -> str:
    """The wire's own single-turn call id, shaped after its provider's captures."""
    found = wire.tool_call_id or next(v.call_id for v in wire.variants("tool-call", "chat") if v.call_id)
    assert found is not None
    return found


class RecordsCallIds(ReferenceLoop):
    """The reference loop, keeping the id of every call it runs."""

    seen: List[Tuple[str, str]] = []

    async def _execute(self, task: Any, tracker: Any, call: Any, schema: Any) -> Any:
        RecordsCallIds.seen.append((call.name, call.id))
        return await super()._execute(task, tracker, call, schema)


class CallIdTests(unittest.TestCase):
    def test_scripted_ids_are_shaped_like_each_providers_own(self) -> None:
        """Every wire's scripted call ids have its provider's prefix, length and alphabet, like its own id."""
        self.assertEqual(set(ID_SHAPES) | {"ollama"}, {n for n, w in WIRES.items() if w.scripts_turns()})
        self.assertFalse(WIRES["ollama"].sends_call_ids)
        for name in ID_SHAPES:
            with self.subTest(wire=name):
                self.assertRegex(measured_id(WIRES[name]), id_shape(name, "get_weather"))
                for tool in ("echo_json", "read_fixture"):
                    seeds = [f"gate/forced-tool/{index}/{pos}" for index in range(3) for pos in range(2)]
                    ids = {WIRES[name].scripted_call_id(tool, seed) for seed in seeds}
                    self.assertEqual(len(ids), len(seeds))  # one per seed, never repeated
                    for call_id in ids:
                        self.assertRegex(call_id, id_shape(name, tool))

    def test_a_wire_of_ones_own_keeps_the_prefix_of_its_tool_call_id(self) -> None:
        """The default hook is the tool_call_id's prefix (words and 01) with 24 letters and digits."""
        class Plain(Wire):
            name = "plain"

        cases = {
            None: r"call_[A-Za-z0-9]{24}",
            "toolu_01abc": r"toolu_01[A-Za-z0-9]{24}",
            "toolu_vrtx_01abc": r"toolu_vrtx_01[A-Za-z0-9]{24}",
            "fn-1": r"call_[A-Za-z0-9]{24}",
        }
        for sample, shape in cases.items():
            with self.subTest(tool_call_id=sample):
                wire = Plain()
                wire.tool_call_id = sample
                self.assertRegex(wire.scripted_call_id("echo_json", "gate/text/0/0"), "^" + shape + "$")
        self.assertEqual(
            openai_chat_wire.scripted_call_id("echo_json", "gate/x/0/0"),
            Plain().scripted_call_id("read_fixture", "gate/x/0/0"),
        )

    def test_the_loop_gets_each_providers_ids_through_its_bytes(self) -> None:
        """The ids a loop receives (parsed from the wire's bytes by the reference backend) keep that shape."""
        for name in ID_SHAPES:
            RecordsCallIds.seen = []
            wire = WIRES[name]

            def create(url: str, name: str = name) -> RecordsCallIds:
                return RecordsCallIds(REFERENCE_BACKENDS[name](url, False), max_result_chars=4096)

            target = AgentLoopTarget(f"ids {name}", wire, create, max_result_chars=4096)
            cases = [c for c in agent_loop_cases(target) if c.stage_name in ("forced-tool", "parallel-calls")]
            with self.subTest(wire=name):
                for case in cases:
                    self.assertEqual(outcome(case), ("pass", ""), case.name)
                self.assertGreaterEqual(len(RecordsCallIds.seen), 6)
                for tool, call_id in RecordsCallIds.seen:
                    self.assertRegex(call_id, id_shape(name, tool))

    def test_responses_pairs_each_call_id_with_a_function_call_item_id(self) -> None:
        """On Responses the call's call_ is paired with an fc_ item id in OpenAI's shape, one per call."""
        import json

        from conformance.gate._stage import Step
        from conformance.provider.replies import RecordedRequest
        from conformance.wires._turns import History

        wire = WIRES["openai-responses"]
        step = Step(0, wire, "parallel-calls", History([]), 4, quote=lambda: "")
        turn = step.turn(step.call("echo_json", {"text": "a"}), step.call("read_fixture", {"path": "b"}, 1))
        request = RecordedRequest("POST", "/v1/responses", "", {}, b'{"model": "m"}', "HTTP/1.1")
        reply = wire.turn_whole(turn, request)
        items = [i for i in json.loads(reply.encoded())["output"] if i["type"] == "function_call"]
        self.assertEqual([i["call_id"] for i in items], [c.id for c in turn.calls])
        for item in items:
            self.assertRegex(item["id"], r"^fc_[0-9a-f]{50}$")
            self.assertRegex(item["call_id"], r"^call_[A-Za-z0-9]{24}$")
        self.assertEqual(len({i["id"] for i in items}), 2)


if __name__ == "__main__":
    unittest.main()
