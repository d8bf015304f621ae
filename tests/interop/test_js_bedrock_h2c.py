"""The AWS SDK for JavaScript v3 against the Bedrock wire, over h2c for real.

``BedrockRuntimeClient`` keeps its default request handler, ``NodeHttp2Handler``:
HTTP/2 with prior knowledge on an ``http://`` endpoint, and a GOAWAY sent as soon as
the response headers are in. The Node script in ``js/`` makes every call the SDK can
meet, one per scenario and operation, and prints what it saw as JSON; these tests
check it against what the wire sent. Install the SDK with ``npm ci --prefix
tests/interop/js`` (see ``js/install.sh``).

The two multi-turn scenarios go through the SDK's own serializer: ``tool-result``
sends the earlier call and its result (or its error, or the reasoning tied to it) as
the backend suite does, and ``parallel-tool-calls`` is a loop of two calls, the
second sending back the message the SDK returned with a ``toolResult`` per call. The
wire reads each history as Bedrock would and answers a malformed one with its 400.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import unittest
from pathlib import Path
from typing import Any, ClassVar, Dict, List, Optional, Tuple
from urllib.parse import quote

from conformance._multiturn import MULTI_TURN, expected_history, history_problems, parallel_calls
from conformance.cases import scenario_reply
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.provider import RecordedRequest, Reply, StreamReply, start_fake_provider
from conformance.reference._decoders import EventStreamDecoder
from conformance.wires._variants import AFTER_FINISH, CLEAN_ENDS
from conformance.wires.bedrock import CORRUPT_FRAME, TOOL_USE_ID, bedrock_converse_wire

JS_DIR = Path(__file__).resolve().parent / "js"
SCRIPT = JS_DIR / "bedrock_converse.mjs"
SDK_DIR = JS_DIR / "node_modules" / "@aws-sdk" / "client-bedrock-runtime"
NODE = shutil.which("node")

WIRE = bedrock_converse_wire
#: An inference-profile id, so the SDK's percent-encoding of ":" is checked too.
MODEL = "us.anthropic.conformance-model-v1:0"
SCENARIO_HEADER = "x-conformance-scenario"
#: The whole run: every call of the plan, Node's start-up included.
RUN_TIMEOUT = 60.0

OPERATIONS = ("converse", "converse-stream")
#: Scenarios the SDK can meet. ``cancel`` is asyncio task cancellation: Python only.
SCENARIOS = (
    "text",
    "tool-call",
    "tool-call-with-stop",
    "truncated-tool-call",
    "content-filter",
    # A variant rides in the same header after a colon: the stream's other real shape.
    "content-filter:content-filtered",
    "stream-error",
    "stream-error:throttling",
    "abort",
    "rate-limit",
    "quota",
    "auth",
    "overloaded",
    "server-error",
    "context-overflow",
    CORRUPT_FRAME,
)
STREAM_ONLY = ("stream-error", "stream-error:throttling", CORRUPT_FRAME)
#: The variants of ``stream-cut`` by operation: a body or a stream the provider cuts short.
CUTS = {
    operation: tuple(v.name for v in WIRE.variants("stream-cut", mode))
    for operation, mode in (("converse", "chat"), ("converse-stream", "stream"))
}
#: The variants of ``tool-result``, each an earlier turn the backend suite sends.
HISTORIES = tuple(variant.name for variant in WIRE.variants("tool-result", "chat"))
#: The second call of ``parallel-tool-calls``: the wire reads its history as it reads a
#: ``tool-result`` one, and answers it with text.
FOLLOW_UP = "tool-result:parallel-results"

#: scenario -> (the SDK's error name, HTTP status)
ERRORS: Dict[str, Tuple[str, int]] = {
    "rate-limit": ("ThrottlingException", 429),
    "quota": ("ThrottlingException", 429),
    "auth": ("UnrecognizedClientException", 403),
    "overloaded": ("ServiceUnavailableException", 503),
    "server-error": ("InternalServerException", 500),
    "context-overflow": ("ValidationException", 400),
}

USAGE = {"inputTokens": 31, "outputTokens": 17, "totalTokens": 48}


def history(variant: str) -> Dict[str, Any]:
    """The earlier turn of a ``tool-result`` case, as the Node script takes it."""
    turn, answer = expected_history(WIRE, variant)
    result = answer.tool_result
    assert result is not None
    return {
        "calls": [{"toolUseId": c.id, "name": c.name, "input": dict(c.arguments)} for c in turn.tool_calls],
        "reasoning": [{"text": r.text, "signature": r.signature} for r in turn.reasoning],
        "results": [{"toolUseId": result.call_id, "text": result.text, "error": result.is_error}],
    }


def plan() -> List[Dict[str, Any]]:
    calls: List[Dict[str, Any]] = [
        {"scenario": scenario, "operation": operation}
        for scenario in SCENARIOS
        for operation in OPERATIONS
        if not (scenario in STREAM_ONLY and operation == "converse")
    ]
    for operation in OPERATIONS:
        for variant in HISTORIES:
            calls.append(
                {"scenario": f"tool-result:{variant}", "operation": operation, "history": history(variant)}
            )
        calls.append({"scenario": "parallel-tool-calls", "operation": operation, "followUp": FOLLOW_UP})
        calls.extend({"scenario": f"stream-cut:{cut}", "operation": operation} for cut in CUTS[operation])
    return calls


def headers_sent() -> List[str]:
    """The scenario header of every request the plan makes, follow-ups included."""
    sent = [p["scenario"] for p in plan()]
    return sent + [p["followUp"] for p in plan() if "followUp" in p]


def event_names(chunks: List[bytes]) -> List[str]:
    """The event names in ``chunks`` of an AWS event stream, in order, decoded independently."""
    decoder = EventStreamDecoder()
    names = []
    for chunk in chunks:
        for message in decoder.feed(chunk):
            if message.headers.get(":message-type") == "event":
                names.append(str(message.headers[":event-type"]))
    return names


def sent_events(scenario: str) -> List[str]:
    """The event names the wire streams for ``scenario``, in order, decoded independently."""
    request = RecordedRequest(
        "POST", f"/model/{quote(MODEL, safe='')}/converse-stream", "", {}, b"{}", "HTTP/2"
    )
    name, _, variant = scenario.partition(":")
    reply = WIRE.reply(name, "stream", request, variant)
    assert isinstance(reply, StreamReply)
    return event_names(list(reply.chunks))


def skip_reason() -> Optional[str]:
    if NODE is None:
        return "node is not installed: the h2c interop test needs Node 18 or later"
    if not SDK_DIR.is_dir():
        return "@aws-sdk/client-bedrock-runtime is not installed: npm ci --prefix tests/interop/js"
    return None


def node_env() -> Dict[str, str]:
    """The environment without AWS settings that would change how the SDK authenticates."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    # The SDK warns on stderr about future Node versions; the run does not depend on it.
    env["NODE_NO_WARNINGS"] = "1"
    # Node's own HTTP/2 debug log shows when the client submits its GOAWAY.
    env["NODE_DEBUG"] = "http2"
    return env


@unittest.skipIf(skip_reason() is not None, skip_reason() or "")
class JavaScriptSDKOverH2CTests(unittest.TestCase):
    """BedrockRuntimeClient with NodeHttp2Handler against the fake provider started with http2=True."""

    report: ClassVar[Dict[str, Any]]
    requests: ClassVar[List[RecordedRequest]]
    replies: ClassVar[List[Tuple[RecordedRequest, Reply]]]
    refusals: ClassVar[List[str]]
    stderr: ClassVar[str]

    @classmethod
    def setUpClass(cls) -> None:
        cls.replies, cls.refusals = [], []
        with start_fake_provider(http2=True) as provider:

            def handler(request: RecordedRequest) -> Reply:
                if not WIRE.is_generation(request):
                    return WIRE.aux_reply(request)
                scenario, _, variant = request.headers.get(SCENARIO_HEADER, "").partition(":")
                mode = "stream" if WIRE.wants_stream(request) else "chat"
                # The multi-turn scenarios read the history and refuse a malformed one with
                # Bedrock's 400, noting why in ``refusals``.
                reply = scenario_reply(WIRE, scenario, mode, request, variant, cls.refusals)
                assert reply is not None, request
                cls.replies.append((request, reply))
                return reply

            provider.reply(handler)
            done = subprocess.run(
                [str(NODE), str(SCRIPT), provider.url, MODEL, json.dumps(plan())],
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
                env=node_env(),
                cwd=str(JS_DIR),
                check=False,
            )
            cls.requests = provider.requests
        if done.returncode != 0:
            raise AssertionError(f"the Node script failed ({done.returncode}): {done.stderr[-2000:]}")
        cls.report = json.loads(done.stdout)
        cls.stderr = done.stderr

    def result(self, scenario: str, operation: str) -> Dict[str, Any]:
        for result in self.report["results"]:
            if result["scenario"] == scenario and result["operation"] == operation:
                return dict(result)
        raise AssertionError(f"no result for {scenario}/{operation}")

    def sent(self, scenario: str, operation: str) -> Tuple[RecordedRequest, Reply]:
        """The one request the SDK sent with ``scenario`` on ``operation``, and the wire's reply."""
        found = [
            (request, reply)
            for request, reply in self.replies
            if request.headers.get(SCENARIO_HEADER) == scenario and request.path.endswith(f"/{operation}")
        ]
        self.assertEqual(len(found), 1, f"expected one {scenario}/{operation} request, got {len(found)}")
        return found[0]

    def assert_history_accepted(self, request: RecordedRequest) -> None:
        """The wire reads the history the SDK serialized as Bedrock would, and finds nothing wrong."""
        read = WIRE.read_history(request)
        assert read is not None
        self.assertEqual(
            list(read.problems), [], f"the wire would refuse the SDK's history: {request.json!r}"
        )

    def assert_answer(self, result: Dict[str, Any], reply: Reply, text: str, stop: str) -> None:
        """The SDK read the wire's answer turn: the text, the stop reason, the usage, every event."""
        self.assertIsNone(result["error"])
        self.assertEqual(result["text"], text)
        self.assertEqual(result["stopReason"], stop)
        self.assertEqual(result["usage"], USAGE)
        if isinstance(reply, StreamReply):
            self.assertEqual(result["events"], event_names(list(reply.chunks)))

    def test_client_uses_the_http2_handler(self) -> None:
        """The client was left with its default NodeHttp2Handler."""
        self.assertEqual(self.report["handler"], "NodeHttp2Handler")

    def test_every_call_sent_one_well_formed_h2_request(self) -> None:
        """Each call made exactly one HTTP/2 request that the wire's request check accepts."""
        scenarios = [r.headers.get(SCENARIO_HEADER) for r in self.requests]
        self.assertEqual(sorted(scenarios), sorted(headers_sent()))
        for request in self.requests:
            with self.subTest(request=str(request), scenario=request.headers.get(SCENARIO_HEADER)):
                self.assertEqual(request.http_version, "HTTP/2")
                self.assertEqual(WIRE.check_request(request, MODEL), [])
                self.assertTrue(request.headers["authorization"].startswith("AWS4-HMAC-SHA256 "))

    def test_text(self) -> None:
        """A text turn reads as the fixture text, end_turn and the usage."""
        for operation in OPERATIONS:
            with self.subTest(operation=operation):
                result = self.result("text", operation)
                self.assertIsNone(result["error"])
                self.assertEqual(result["text"], FX.text)
                self.assertEqual(result["stopReason"], "end_turn")
                self.assertEqual(result["usage"], USAGE)

    def test_tool_calls(self) -> None:
        """Both tool turns read as one get_weather call with the parsed input."""
        expected = [{"id": TOOL_USE_ID, "name": "get_weather", "input": dict(FX.tool_arguments)}]
        for scenario, stop in (("tool-call", "tool_use"), ("tool-call-with-stop", "end_turn")):
            for operation in OPERATIONS:
                with self.subTest(scenario=scenario, operation=operation):
                    result = self.result(scenario, operation)
                    self.assertIsNone(result["error"])
                    self.assertEqual(result["toolCalls"], expected)
                    self.assertEqual(result["stopReason"], stop)
                    self.assertEqual(result["usage"], USAGE)

    def test_truncated_tool_call(self) -> None:
        """The truncated turn reads as the preamble and max_tokens; the streamed input does not parse."""
        for operation in OPERATIONS:
            with self.subTest(operation=operation):
                result = self.result("truncated-tool-call", operation)
                self.assertEqual(result["text"], FX.preamble)
                self.assertEqual(result["stopReason"], "max_tokens")
        streamed = self.result("truncated-tool-call", "converse-stream")["toolCalls"]
        self.assertEqual(streamed[0]["input"], {"unparsed": '{"city": "Par'})

    def test_content_filter(self) -> None:
        """Both turns are a guardrail intervention; the stream's other variant is content_filtered."""
        for operation in OPERATIONS:
            self.assertEqual(self.result("content-filter", operation)["stopReason"], "guardrail_intervened")
        streamed = self.result("content-filter:content-filtered", "converse-stream")
        self.assertEqual(streamed["stopReason"], "content_filtered")

    def test_client_sends_goaway_before_the_body(self) -> None:
        """The client closes each session (GOAWAY) once it has the headers, as the trap needs."""
        if "Http2Session" not in self.stderr:
            self.skipTest("this Node prints no HTTP/2 debug log under NODE_DEBUG=http2")
        self.assertIn("submitting goaway", self.stderr)

    def test_every_streamed_event_arrived(self) -> None:
        """Each complete stream delivered every event the wire sent, in order, after the client's GOAWAY."""
        streams = ("text", "tool-call", "tool-call-with-stop", "truncated-tool-call", "content-filter")
        for scenario in (*streams, "content-filter:content-filtered"):
            with self.subTest(scenario=scenario):
                self.assertEqual(self.result(scenario, "converse-stream")["events"], sent_events(scenario))

    def test_stream_error(self) -> None:
        """The text before the exception message arrives, then ServiceUnavailableException."""
        result = self.result("stream-error", "converse-stream")
        self.assertEqual(result["text"], FX.partial_text)
        self.assertEqual(result["events"], sent_events("stream-error"))
        self.assertEqual(result["error"]["name"], "ServiceUnavailableException")
        self.assertEqual(result["error"]["fault"], "server")

    def test_stream_error_throttling(self) -> None:
        """The text before a throttlingException frame arrives, then the SDK's ThrottlingException."""
        result = self.result("stream-error:throttling", "converse-stream")
        self.assertEqual(result["text"], FX.partial_text)
        self.assertEqual(result["events"], sent_events("stream-error:throttling"))
        self.assertEqual(result["error"]["name"], "ThrottlingException")
        self.assertEqual(result["error"]["fault"], "client")

    def test_stream_cut(self) -> None:
        """A body or stream cut before messageStop never reads as a finished turn: no stop reason, no call."""
        for operation, cuts in CUTS.items():
            for cut in cuts:
                # A clean end plays the events of the cut it names, then ends properly.
                played = CLEAN_ENDS.get(cut, cut)
                if played == AFTER_FINISH:
                    continue  # messageStop came: see test_stream_cut_after_message_stop_ends_quietly
                with self.subTest(operation=operation, cut=cut):
                    result = self.result(f"stream-cut:{cut}", operation)
                    self.assertIsNone(result["stopReason"])
                    self.assertEqual(result["toolCalls"], [])
                    if played != "between-events":
                        self.assertIsNotNone(result["error"])
        whole = self.result("stream-cut:text-body", "converse")["error"]
        self.assertEqual((whole["name"], whole["status"]), ("SyntaxError", 200))
        inside = self.result("stream-cut:after-text", "converse-stream")["error"]
        self.assertEqual(inside["message"], "Truncated event message received.")

    def test_stream_cut_between_events_ends_quietly(self) -> None:
        """Known break: a stream reset with NO_ERROR between two messages ends the SDK's stream quietly.

        Node hands the body of an h2 stream closed with RST_STREAM(NO_ERROR) on as ended,
        and the SDK's event-stream iterator stops at the message boundary without an
        error: only the missing messageStop tells a careful client the turn was cut.
        """
        result = self.result("stream-cut:between-events", "converse-stream")
        self.assertIsNone(result["error"])
        self.assertEqual(result["text"], FX.partial_text)
        self.assertEqual(result["events"], ["messageStart", *["contentBlockDelta"] * 3])

    def test_stream_cut_after_message_stop_ends_quietly(self) -> None:
        """Known break: a stream reset with NO_ERROR after messageStop ends the SDK's stream quietly too.

        The SDK hands each event on as it arrives, messageStop with its stopReason and the
        call before it among them, and then, as between any two messages, the reset ends
        its iterator without an error: only the missing metadata (no usage) tells a careful
        client the turn was cut, and it must raise rather than take the stop for the end.
        """
        result = self.result(f"stream-cut:{AFTER_FINISH}", "converse-stream")
        self.assertIsNone(result["error"])
        self.assertIsNone(result["usage"])
        self.assertEqual(result["events"][-2:], ["contentBlockStop", "messageStop"])
        self.assertNotIn("metadata", result["events"])

    def test_errors(self) -> None:
        """Each error scenario raises the modeled exception with its status, whole and streamed."""
        for scenario, (name, status) in ERRORS.items():
            for operation in OPERATIONS:
                with self.subTest(scenario=scenario, operation=operation):
                    error = self.result(scenario, operation)["error"]
                    self.assertEqual((error["name"], error["status"]), (name, status))

    def test_abort_closes_the_stream(self) -> None:
        """An aborted call fails and the provider sees its h2 stream closed."""
        whole = self.result("abort", "converse")
        self.assertEqual(whole["error"]["name"], "AbortError")
        # Aborting mid-stream surfaces as the event-stream decoder's truncation error.
        streamed = self.result("abort", "converse-stream")
        self.assertEqual(streamed["events"], ["messageStart"])
        self.assertIsNotNone(streamed["error"])
        for request in self.requests:
            if request.headers.get(SCENARIO_HEADER) == "abort":
                with self.subTest(path=request.path):
                    self.assertTrue(request.wait_closed(1.0), "the provider never saw the stream closed")

    def test_plan_holds_the_multi_turn_scenarios(self) -> None:
        """Both multi-turn scenarios are planned on both operations, tool-result in every variant."""
        planned = {(p["scenario"], p["operation"]) for p in plan()}
        for operation in OPERATIONS:
            self.assertIn(("parallel-tool-calls", operation), planned)
            for variant in HISTORIES:
                self.assertIn((f"tool-result:{variant}", operation), planned)
        self.assertEqual({p["scenario"].partition(":")[0] for p in plan()} & set(MULTI_TURN), set(MULTI_TURN))

    def test_no_history_was_refused(self) -> None:
        """The wire refused none of the histories the SDK serialized with Bedrock's 400."""
        self.assertEqual(self.refusals, [])

    def test_tool_result_history(self) -> None:
        """Each tool-result history reads back as the backend suite's: the call, its id, its result."""
        for variant in WIRE.variants("tool-result", "chat"):
            for operation in OPERATIONS:
                with self.subTest(variant=variant.name, operation=operation):
                    request, _ = self.sent(f"tool-result:{variant.name}", operation)
                    self.assert_history_accepted(request)
                    read = WIRE.read_history(request)
                    assert read is not None
                    self.assertEqual(history_problems(WIRE, variant, read), [])
                    turn, answer = expected_history(WIRE, variant.name)
                    result = answer.tool_result
                    assert result is not None
                    body = request.json
                    assert isinstance(body, dict)
                    sent = [block["toolResult"] for block in body["messages"][-1]["content"]]
                    expected = {"toolUseId": turn.tool_calls[0].id, "content": [{"text": result.text}]}
                    if result.is_error:
                        expected["status"] = "error"
                    self.assertEqual(sent, [expected])

    def test_tool_result_answer(self) -> None:
        """The answer to each tool-result history reads as the wire's text turn, whole and streamed."""
        for variant in HISTORIES:
            for operation in OPERATIONS:
                with self.subTest(variant=variant, operation=operation):
                    _, reply = self.sent(f"tool-result:{variant}", operation)
                    result = self.result(f"tool-result:{variant}", operation)
                    self.assert_answer(result, reply, FX.tool_result_answer, "end_turn")
                    self.assertEqual(result["toolCalls"], [])

    def test_parallel_tool_calls(self) -> None:
        """The parallel turn reads as both calls, each with its own toolUseId, in order."""
        expected = [
            {"id": call.id, "name": call.name, "input": json.loads(call.arguments)}
            for call in parallel_calls(WIRE)
        ]
        for operation in OPERATIONS:
            with self.subTest(operation=operation):
                _, reply = self.sent("parallel-tool-calls", operation)
                result = self.result("parallel-tool-calls", operation)
                self.assert_answer(result, reply, "", "tool_use")
                self.assertEqual(result["toolCalls"], expected)

    def test_parallel_results_history(self) -> None:
        """The SDK sends both calls back and answers each under its own toolUseId, in order."""
        calls = parallel_calls(WIRE)
        for operation in OPERATIONS:
            with self.subTest(operation=operation):
                request, _ = self.sent(FOLLOW_UP, operation)
                self.assert_history_accepted(request)
                body = request.json
                assert isinstance(body, dict)
                turn, answers = body["messages"][-2:]
                uses = [block["toolUse"] for block in turn["content"] if "toolUse" in block]
                self.assertEqual(
                    [(u["toolUseId"], u["name"], u["input"]) for u in uses],
                    [(c.id, c.name, json.loads(c.arguments)) for c in calls],
                )
                # Each result's JSON document holds its own call's input: a result filed
                # under the other call's id shows as the wrong city.
                self.assertEqual(
                    [block["toolResult"] for block in answers["content"]],
                    [
                        {
                            "toolUseId": c.id,
                            "content": [
                                {"json": {"request": json.loads(c.arguments), "conditions": "sunny"}}
                            ],
                        }
                        for c in calls
                    ],
                )

    def test_parallel_results_answer(self) -> None:
        """The answer to the parallel results reads as the wire's text turn, whole and streamed."""
        for operation in OPERATIONS:
            with self.subTest(operation=operation):
                _, reply = self.sent(FOLLOW_UP, operation)
                first = self.result("parallel-tool-calls", operation)
                follow_up = first.get("followUp")
                if follow_up is None:
                    self.fail(f"the second call was never made: the first failed with {first['error']}")
                self.assertEqual(follow_up["scenario"], FOLLOW_UP)
                self.assert_answer(follow_up, reply, FX.tool_result_answer, "end_turn")

    def test_corrupt_frame_is_refused(self) -> None:
        """The SDK refuses the frame whose CRC does not match, after the frames before it."""
        result = self.result(CORRUPT_FRAME, "converse-stream")
        self.assertIn("checksum", result["error"]["message"])
        self.assertEqual(result["events"], ["messageStart", "contentBlockDelta"])


if __name__ == "__main__":
    unittest.main()
