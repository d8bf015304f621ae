"""The gate's verdicts on correct loops that do things differently: each passes, and each would
fail were the rule it rests on taken back; and the failure messages name the cause."""

from __future__ import annotations

import json
import unittest
from dataclasses import replace
from typing import Any, Callable, Iterable, List, Optional, Tuple
from unittest import mock

from conformance.contract import Message, ToolResult
from conformance.gate import AgentLoopTarget, ReferenceLoop, agent_loop_cases
from conformance.gate.cases import AgentLoopCase
from conformance.gate.loop import LoopTask
from conformance.wires import WIRES

from . import gate_zoo as zoo
from .test_provider_support import asyncio_debug_off_for_module

setUpModule, tearDownModule = asyncio_debug_off_for_module()

GATE_WIRES = tuple(name for name, wire in WIRES.items() if wire.scripts_turns())


class RunsEachCallTwice(ReferenceLoop):
    """Runs every call twice under one key, the first run's result thrown away."""

    async def _execute(self, task: LoopTask, tracker: Any, call: Any, schema: Any) -> ToolResult:
        await task.toolset.aexecute(call, key=call.id, signal=task.signal)
        return await super()._execute(task, tracker, call, schema)


def target(
    loop: Callable[..., Any],
    wire: str,
    *,
    http2: bool = False,
    backend: Callable[..., Any] = zoo.plain,
    **kw: Any,
) -> AgentLoopTarget:
    def create(url: str) -> Any:
        return loop(backend(wire, url, http2), max_result_chars=zoo.LIMIT)

    return AgentLoopTarget(
        f"{loop.__name__} {wire}", WIRES[wire], create, http2=http2, max_result_chars=zoo.LIMIT, **kw
    )


def run(case: AgentLoopCase) -> Tuple[str, str]:
    try:
        case.run()
    except unittest.SkipTest as skipped:
        return "skip", str(skipped)
    except AssertionError as failed:
        return "FAIL", str(failed)
    return "pass", ""


def cases(t: AgentLoopTarget, stages: Iterable[str]) -> List[AgentLoopCase]:
    wanted = set(stages)
    return [c for c in agent_loop_cases(t) if c.stage_name in wanted and not c.skip]


def failures(results: Iterable[Tuple[AgentLoopCase, Tuple[str, str]]]) -> List[str]:
    return [f"{c.target.name} {c.name}:\n{detail}" for c, (status, detail) in results if status == "FAIL"]


def run_all(t: Iterable[AgentLoopCase]) -> List[Tuple[AgentLoopCase, Tuple[str, str]]]:
    from concurrent.futures import ThreadPoolExecutor

    todo = list(t)
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(zip(todo, pool.map(run, todo)))


# -- item: errors in other shapes ------------------------------------------------------------


class SendsFrameworkErrors(ReferenceLoop):
    """Sends each error as pydantic-ai does: a validation failure as a list of typed errors under
    "error", any other failure as a message under "error", both as the result's plain content."""

    async def _execute(self, task: LoopTask, tracker: Any, call: Any, schema: Any) -> ToolResult:
        result = await super()._execute(task, tracker, call, schema)
        if result.error is None:
            return result
        if result.error.code == "invalid_arguments":
            error: Any = [{"type": "json_invalid", "loc": [], "msg": result.error.message}]
        else:
            error = f"{result.error.code}: {result.error.message}"
        return ToolResult(result.call_id, result.name, json.dumps({"error": error}))


def _dict_errors_only(result: ToolResult) -> Optional[Any]:
    """The rule before: only an object under "error" was a structured error."""
    if result.error is not None:
        return result.error.as_dict()
    try:
        data = json.loads(result.content)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else None


ERROR_STAGES = ("error-result", "tool-error-corrects", "unknown-tool", "corrupt-arguments")


class ErrorShapeTests(unittest.TestCase):
    def test_a_list_or_a_message_under_error_is_a_structured_error_on_every_wire(self) -> None:
        """pydantic-ai's {"error": [{type, loc, msg}]} and {"error": "..."} pass every error stage."""
        todo = [c for w in GATE_WIRES for c in cases(target(SendsFrameworkErrors, w), ERROR_STAGES)]
        self.assertTrue(any(c.stage_name == "corrupt-arguments" for c in todo))
        self.assertEqual(failures(run_all(todo)), [])
        with mock.patch("conformance.gate._invariants.results.error_payload", _dict_errors_only):
            detail = run(next(c for c in todo if c.name == "corrupt-arguments/chat"))[1]
            self.assertIn("[refused-call]", detail)
            detail = run(next(c for c in todo if c.name == "error-result/chat"))[1]
            self.assertIn("[error-result]", detail)

    def test_plain_text_errors_pass_only_with_the_knob_and_only_where_the_wire_has_no_marker(self) -> None:
        """error_results="text" accepts plain-text errors on OpenAI Chat, never on Anthropic (is_error)."""
        stage = ["error-result"]
        plain = cases(target(zoo.SendsErrorsAsText, "openai-chat"), stage)
        self.assertIn("[error-result]", run(plain[0])[1])
        self.assertIn('error_results="text"', run(plain[0])[1])
        knob = cases(target(zoo.SendsErrorsAsText, "openai-chat", error_results="text"), stage)
        self.assertEqual(failures(run_all(knob)), [])
        marked = cases(target(zoo.SendsErrorsAsText, "anthropic", error_results="text"), stage)
        detail = run(marked[0])[1]
        self.assertIn("[error-result]", detail)
        self.assertIn('"is_error": true', detail)

    def test_the_report_names_the_knob(self) -> None:
        """A run whose target declares error_results="text" says so in the stamp and the Markdown."""
        from conformance.gate.report import run_gate

        t = target(zoo.SendsErrorsAsText, "openai-chat", error_results="text")
        t = replace(t, skip={s: "not this test's" for s in _all_stages_but(("error-result",))})
        report = run_gate(t, jobs=2)
        self.assertTrue(report.passed, report.markdown())
        self.assertEqual(len(report.stamp.knobs), 1)
        self.assertIn('error_results="text"', report.stamp.knobs[0])
        self.assertIn('| knob | error_results="text"', report.markdown())
        self.assertEqual(tuple(report.stamp.as_dict()["knobs"]), report.stamp.knobs)
        plain = run_gate(replace(t, error_results="structured"), jobs=2)
        self.assertEqual(plain.stamp.knobs, ())

    def test_an_unknown_error_results_value_is_refused(self) -> None:
        """error_results takes "structured" or "text"; anything else is a declaration error."""
        from conformance.errors import TargetDefinitionError

        with self.assertRaisesRegex(TargetDefinitionError, "error_results must be one of"):
            target(ReferenceLoop, "openai-chat", error_results="plain")


# -- item: Anthropic results over consecutive user messages ------------------------------------


def split_results_backend(wire: str, url: str, http2: bool) -> Any:
    """The Anthropic reference backend, sending each tool_result in a user message of its own."""
    from conformance.reference import AnthropicBackend

    class SplitsResults(AnthropicBackend):
        def messages(self, messages: Any) -> List[Any]:
            out: List[Any] = []
            for turn in super().messages(messages):
                content = turn.get("content")
                if turn["role"] == "user" and isinstance(content, list) and len(content) > 1:
                    out += [{"role": "user", "content": [block]} for block in content]
                else:
                    out.append(turn)
            return out

    return SplitsResults(url, http2=http2)


class SplitResultsTests(unittest.TestCase):
    def test_results_in_consecutive_user_messages_pass(self) -> None:
        """A loop that answers two parallel calls in two user messages passes, as the API combines them."""
        t = target(ReferenceLoop, "anthropic", backend=split_results_backend)
        todo = cases(t, ("parallel-calls", "tool-error-corrects"))
        self.assertEqual(len(todo), 4)
        self.assertEqual(failures(run_all(todo)), [])
        from conformance.wires.anthropic import _history

        with mock.patch.object(_history, "_merge_consecutive", lambda raw: list(enumerate(raw))):
            self.assertIn("[result-format]", run(todo[0])[1])


# -- item: Gemini results without ids -----------------------------------------------------------

#: The stages where each turn calls a function once: a result without an id is unambiguous.
ONE_CALL_STAGES = (
    "forced-tool",
    "fragmented-arguments",
    "tool-error-corrects",
    "large-result",
    "empty-result",
    "non-ascii-result",
    "error-result",
    "reasoning",
    "unknown-tool",
    "close-after-execution",
)


class GeminiWithoutIdsTests(unittest.TestCase):
    def test_results_without_ids_pass_where_each_function_was_called_once(self) -> None:
        """Results sent back without ids (google-genai's automatic function calling) match by name."""
        from conformance.wires.gemini import _history

        t = target(zoo.rewrite(zoo.drop_result_ids), "gemini")
        todo = cases(t, ONE_CALL_STAGES)
        self.assertEqual(len(todo), 2 * len(ONE_CALL_STAGES))
        self.assertEqual(failures(run_all(todo)), [])
        original = _history._Reader.pair

        def unresolved(self: Any, where: str, calls: Any, results: Any, text: Any) -> Any:
            original(self, where, calls, results, text)
            return results

        with mock.patch.object(_history._Reader, "pair", unresolved):
            # The gate pairs a result without an id by name and order, as the reader does.
            self.assertEqual(run(todo[0])[1], "")
            with mock.patch.object(type(t.wire), "pairs_results_by_name", False):
                self.assertIn("[results]", run(todo[0])[1])

    def test_two_calls_to_one_function_answered_without_ids_pair_in_order(self) -> None:
        """Two read_fixture calls answered without ids answer them in order, on the wire and in the gate."""
        t = target(zoo.rewrite(zoo.drop_result_ids), "gemini")
        todo = cases(t, ("parallel-calls",))
        self.assertEqual(failures(run_all(todo)), [])
        def swap_without_ids(messages: List[Message]) -> List[Message]:
            return zoo.swap_results(zoo.drop_result_ids(messages))

        swapped = target(zoo.rewrite(swap_without_ids), "gemini")
        self.assertIn("[call-ids]", run(cases(swapped, ("parallel-calls",))[0])[1])


# -- item: parallel calls run in reverse order on a wire without ids -----------------------------


class RunsInReverse(ReferenceLoop):
    """Runs a turn's calls last first (parallel calls are unordered), then sends each call's own
    result back in the order the model made the calls."""

    def __init__(self, backend: Any, **kwargs: Any) -> None:
        super().__init__(backend, **kwargs)
        self.turn: Tuple[Any, ...] = ()
        self.done: List[Tuple[Any, ToolResult]] = []
        whole = backend.chat

        async def chat(request: Any) -> Any:
            return self._keep(await whole(request))

        self.backend = zoo._Wrapped(backend, chat=chat)

    def _keep(self, response: Any) -> Any:
        self.turn, self.done = tuple(response.tool_calls), []
        return response

    async def _stream(self, request: Any) -> Any:
        return self._keep(await super()._stream(request))

    async def _execute(self, task: LoopTask, tracker: Any, call: Any, schema: Any) -> ToolResult:
        if not self.done:
            schemas = {spec.name: spec.parameters for spec in task.tools}
            for other in reversed(self.turn):
                ran = await super()._execute(task, tracker, other, schemas.get(other.name))
                self.done.append((other, ran))
        return next(result for other, result in self.done if other is call)


def _never_the_same(planned: Any, record: Any) -> bool:
    return False


class ReverseOrderTests(unittest.TestCase):
    def test_parallel_calls_run_last_first_pass_where_the_provider_sends_no_ids(self) -> None:
        """On Ollama, runs are tied to calls by tool name and arguments first, then by order."""
        todo = [c for w in GATE_WIRES for c in cases(target(RunsInReverse, w), ("parallel-calls",))]
        self.assertEqual(len(todo), 2 * len(GATE_WIRES))
        self.assertEqual(failures(run_all(todo)), [])
        ollama = next(c for c in todo if c.target.wire.name == "ollama")
        # Where the pairing asks, and where the executions check asks again.
        pairing = mock.patch("conformance.gate._invariants._seen.same_arguments", _never_the_same)
        with pairing, mock.patch("conformance.gate._invariants.executions.same_arguments", _never_the_same):
            detail = run(ollama)[1]
        self.assertIn("[arguments]", detail)


# -- item: realistic stream order ----------------------------------------------------------------


class StreamOrderTests(unittest.TestCase):
    def test_parallel_calls_stream_one_call_after_the_other_on_every_wire(self) -> None:
        """By default no call's argument events overlap another's, as every provider streams them."""
        from conformance.gate.stages import STAGES, Step

        for name in GATE_WIRES:
            wire = WIRES[name]
            with self.subTest(wire=name):
                step = Step(0, wire, "parallel-calls", _empty_history(), 4, quote=lambda: "")
                turn = STAGES["parallel-calls"].script(step)
                played = wire.turn_stream(turn, _stream_request(wire))
                assert played is not None
                first_ends, second_starts = played.arguments[0][1], played.arguments[1][0]
                self.assertLess(first_ends, second_starts, played.arguments)

    def test_the_interleaved_order_is_opt_in_and_says_it_is_not_the_providers(self) -> None:
        """stress-interleaved-calls skips unless the target names it, saying no provider sends it."""
        plain = next(
            c
            for c in agent_loop_cases(target(ReferenceLoop, "openai-responses"))
            if c.stage_name == "stress-interleaved-calls"
        )
        self.assertIn("opt-in stress stage", str(plain.skip))
        self.assertIn("no provider was seen sending", str(plain.skip))
        t = target(ReferenceLoop, "openai-responses", stress=("stress-interleaved-calls",))
        chosen = next(c for c in agent_loop_cases(t) if c.stage_name == "stress-interleaved-calls")
        self.assertIsNone(chosen.skip)
        self.assertEqual(run(chosen), ("pass", ""))
        from conformance.errors import TargetDefinitionError

        with self.assertRaisesRegex(TargetDefinitionError, "stress must be a tuple of stress stages"):
            target(ReferenceLoop, "openai-chat", stress=("parallel-calls",))


def _empty_history() -> Any:
    from conformance.wires._turns import History

    return History(())


def _stream_request(wire: Any) -> Any:
    from conformance.provider.replies import RecordedRequest

    body = json.dumps({"model": "m", "stream": True, "messages": [], "input": []}).encode()
    return RecordedRequest("POST", "/v1/x", "", {"content-type": "application/json"}, body, "HTTP/1.1")


# -- the messages ---------------------------------------------------------------------------------


def appends_to_last_opened(wire: str, url: str, http2: bool) -> Any:
    """The Chat reference backend, adding every argument fragment to the call opened last."""
    from conformance.reference import OpenAIChatBackend

    class LastOpened(OpenAIChatBackend):
        def on_chunk(self, chunk: Any, partials: Any) -> str:
            for choice in chunk.get("choices") or ():
                for fragment in (choice.get("delta") or {}).get("tool_calls") or ():
                    if not fragment.get("id") and partials:
                        fragment["index"] = max(partials)
            return str(super().on_chunk(chunk, partials))

    return LastOpened(f"{url}/v1", http2=http2)


def sends_broken_text_back(wire: str, url: str, http2: bool) -> Any:
    """The Chat reference backend, sending a call whose arguments did not parse back with the model's text."""
    from conformance.reference import OpenAIChatBackend

    class BrokenTextBack(OpenAIChatBackend):
        def body(self, chat: Any, stream: bool) -> Any:
            body = super().body(chat, stream)
            for message, sent in zip(chat.messages, body["messages"]):
                for call, raw in zip(message.tool_calls, sent.get("tool_calls") or ()):
                    if call.unparsed_arguments is not None:
                        raw["function"]["arguments"] = call.unparsed_arguments
            return body

    return BrokenTextBack(f"{url}/v1", http2=http2)


def sends_arguments_as_an_object(wire: str, url: str, http2: bool) -> Any:
    """The Chat reference backend, sending each earlier call's arguments as an object, not as text."""
    from conformance.reference import OpenAIChatBackend

    class ObjectArguments(OpenAIChatBackend):
        def body(self, chat: Any, stream: bool) -> Any:
            body = super().body(chat, stream)
            for sent in body["messages"]:
                for raw in sent.get("tool_calls") or ():
                    raw["function"]["arguments"] = json.loads(raw["function"]["arguments"])
            return body

    return ObjectArguments(f"{url}/v1", http2=http2)


class LosesTheArguments(ReferenceLoop):
    """Hands each call to the toolset with empty arguments, which it refuses at the door."""

    async def _execute(self, task: LoopTask, tracker: Any, call: Any, schema: Any) -> ToolResult:
        return await task.toolset.aexecute(replace(call, arguments={}), key=call.id, signal=task.signal)


def problems_of(detail: str) -> List[str]:
    return [line for line in detail.splitlines() if line.startswith("  - ")]


class MessageTests(unittest.TestCase):
    def test_broken_text_sent_back_on_openai_chat_is_taken(self) -> None:
        """A call sent back with the model's broken argument text passes, as api.openai.com takes it."""
        t = target(ReferenceLoop, "openai-chat", backend=sends_broken_text_back)
        case = next(c for c in cases(t, ("corrupt-arguments",)) if c.mode == "chat")
        self.assertEqual(run(case), ("pass", ""))

    def test_a_refused_history_says_what_to_send_instead(self) -> None:
        """The history is named as the problem in the provider's words, with no false "answers no call"."""
        t = target(ReferenceLoop, "openai-chat", backend=sends_arguments_as_an_object)
        detail = run(next(c for c in cases(t, ("forced-tool",)) if c.mode == "chat"))[1]
        lines = problems_of(detail)
        self.assertEqual(len(lines), 1, detail)
        self.assertIn("[result-format]", lines[0])
        self.assertIn("expected a string (the arguments as JSON text)", lines[0])
        self.assertNotIn("answers no call", detail)
        self.assertIn("hint: the history is what the provider refused, not what ran", detail)

    def test_a_call_refused_at_the_door_is_one_line(self) -> None:
        """A call handed over with the wrong arguments and refused is reported once, by arguments."""
        detail = run(cases(target(LosesTheArguments, "anthropic"), ("forced-tool",))[0])[1]
        lines = problems_of(detail)
        self.assertEqual(len(lines), 1, detail)
        self.assertIn("refused it at the door (it never ran)", lines[0])
        self.assertIn("[arguments]", lines[0])
        self.assertNotIn("never executed", detail)

    def test_a_call_run_twice_before_the_fault_is_not_blamed_on_the_retry(self) -> None:
        """A loop that runs every call twice is told it did so on its own; one that reruns at a retry,
        that the fault's retry did it."""
        for stage in ("close-after-execution", "ambiguous-retry"):
            with self.subTest(stage):
                detail = run(cases(target(RunsEachCallTwice, "openai-chat", http2=True), (stage,))[0])[1]
                [line] = [p for p in problems_of(detail) if "[re-executed]" in p]
                self.assertIn("began before request 2", line)
                self.assertIn("no fault caused it", line)
                self.assertNotIn("and the loop ran the call again", line)
        rerun = target(zoo.RerunsOnRetry, "openai-chat", http2=True)
        detail = run(cases(rerun, ("close-after-execution",))[0])[1]
        [line] = [p for p in problems_of(detail) if "[re-executed]" in p]
        cause = "request 2 got no response (the connection closed) and the loop ran the call again"
        self.assertIn(cause, line)

    def test_executed_early_says_when_the_fragment_was_sent_and_when_the_loop_ran(self) -> None:
        """The line gives the loop's start and the last fragment's write, each timed from the request."""
        import re

        for http2 in (False, True):
            t = target(zoo.EagerLoop, "openai-chat", backend=zoo.tapped, http2=http2)
            detail = run(cases(t, ("fragmented-arguments",))[1])[1]
            self.assertIn("[executed-early]", detail)
            started = re.search(
                r"execution started at \+([0-9.]+) ms \(timed from the arrival of request 1\)", detail
            )
            wrote = re.search(
                r"the provider wrote the call's last argument fragment \(event #\d+, [\w.]+\) at \+([0-9.]+) "
                r"ms, ([0-9.]+) ms after the run began",
                detail,
            )
            assert started is not None and wrote is not None, detail
            self.assertLess(float(started.group(1)), float(wrote.group(1)))
            self.assertIn("run a call only once its turn's end event", detail)

    def test_evidence_on_bedrock_invoke_names_the_claude_events_inside_the_frames(self) -> None:
        """The events quoted on InvokeModel are Claude's (content_block_delta, its call), not chunk."""
        import re

        t = target(zoo.EagerLoop, "bedrock-invoke", backend=zoo.tapped)
        detail = run(cases(t, ("fragmented-arguments",))[1])[1]
        self.assertIn("[executed-early]", detail)
        self.assertRegex(detail, r"last argument fragment \(event #\d+, content_block_delta\)")
        quoted = re.findall(r"^ +>? *#\d+ (\S+)(.*)$", detail, re.M)
        self.assertTrue(quoted, detail)
        self.assertNotIn("chunk", {kind for kind, _ in quoted}, detail)
        call = re.search(r"echo_json (toolu_\w+):", detail)
        assert call is not None, detail
        deltas = [rest for kind, rest in quoted if kind == "content_block_delta"]
        self.assertTrue(deltas, detail)
        for rest in deltas:
            self.assertIn(f"call={call.group(1)}", rest)
            self.assertIn("response=msg_bdrk_", rest)

    def test_fragments_added_to_the_last_opened_call_are_named_as_the_cause(self) -> None:
        """Interleaved fragments mixed up by a parser that keeps "the current call" name that cause."""
        t = target(
            ReferenceLoop,
            "openai-chat",
            backend=appends_to_last_opened,
            stress=("stress-interleaved-calls",),
        )
        detail = run(cases(t, ("stress-interleaved-calls",))[0])[1]
        self.assertIn("never executed", detail)
        self.assertIn(
            "fragments added to the call opened last instead of to the call their index names", detail
        )
        self.assertRegex(detail, r"its argument fragments \(events #\d+ to #\d+\) alternated")
        plain = run(
            cases(target(ReferenceLoop, "openai-chat", backend=appends_to_last_opened), ("parallel-calls",))[
                1
            ]
        )
        self.assertEqual(plain, ("pass", ""))


def _all_stages_but(keep: Tuple[str, ...]) -> List[str]:
    from conformance.gate import STAGES

    return [s for s in STAGES if s not in keep]


if __name__ == "__main__":
    unittest.main()
