"""The Bedrock Converse wire: what it answers for each scenario and how it checks requests."""

from __future__ import annotations

import asyncio
import json
import unittest
from typing import Any, Dict, List, Optional
from urllib.parse import quote

from conformance.cases import scenario_reply
from conformance.contract import LLMError
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.fixture import conformance_request
from conformance.provider import start_fake_provider
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.reference._decoders import EventStreamDecoder, EventStreamError
from conformance.reference.bedrock import BedrockConverseBackend
from conformance.scenarios import SCENARIOS
from conformance.wires.bedrock import (
    CORRUPT_FRAME,
    ERRORS,
    GUARDRAIL_MESSAGE,
    TOOL_USE_ID,
    bedrock_converse_wire,
)
from tests.mutants.bedrock import MUTANTS

WIRE = bedrock_converse_wire
MODEL = "us.anthropic.conformance-model-v1:0"


def request_body(**changes: Any) -> Dict[str, Any]:
    """A Converse request body as a good backend sends it, with ``changes`` applied."""
    body: Dict[str, Any] = {
        "messages": [{"role": "user", "content": [{"text": FX.question}]}],
        "system": [{"text": FX.system}],
        "inferenceConfig": {"maxTokens": FX.max_tokens},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": FX.tool_name,
                        "description": FX.tool_description,
                        "inputSchema": {"json": dict(FX.tool_parameters)},
                    }
                }
            ]
        },
    }
    body.update(changes)
    return body


def recorded(
    stream: bool = False,
    body: Optional[Dict[str, Any]] = None,
    path: Optional[str] = None,
    method: str = "POST",
    headers: Optional[Dict[str, str]] = None,
) -> RecordedRequest:
    """A request as the provider would record it."""
    operation = "converse-stream" if stream else "converse"
    return RecordedRequest(
        method=method,
        path=path or f"/model/{quote(MODEL, safe='')}/{operation}",
        query="",
        headers=headers
        if headers is not None
        else {"authorization": "Bearer test", "content-type": "application/json"},
        body=json.dumps(request_body() if body is None else body).encode("utf-8"),
        http_version="HTTP/1.1",
    )


def decode(reply: StreamReply) -> List[Any]:
    """The stream's messages, fed chunk by chunk as a client reads them."""
    decoder = EventStreamDecoder()
    messages = []
    for chunk in reply.chunks:
        messages.extend(decoder.feed(chunk))
    messages.extend(decoder.close())
    return messages


def events(reply: StreamReply) -> List[Any]:
    """``(event type, payload)`` per event message; exceptions as ``("!" + type, payload)``."""
    out = []
    for message in decode(reply):
        payload = json.loads(message.payload.decode("utf-8"))
        if message.headers[":message-type"] == "exception":
            out.append(("!" + message.headers[":exception-type"], payload))
        else:
            out.append((message.headers[":event-type"], payload))
    return out


def streamed(scenario: str) -> StreamReply:
    reply = WIRE.reply(scenario, "stream", recorded(stream=True))
    assert isinstance(reply, StreamReply), reply
    return reply


def whole(scenario: str) -> JsonReply:
    reply = WIRE.reply(scenario, "chat", recorded())
    assert isinstance(reply, JsonReply), reply
    return reply


def stream_text(evts: List[Any]) -> str:
    return "".join(p["delta"]["text"] for e, p in evts if e == "contentBlockDelta" and "text" in p["delta"])


class WholeReplyTests(unittest.TestCase):
    """The Converse answers, JSON."""

    def test_text_is_one_text_block_with_end_turn_and_usage(self) -> None:
        """A text turn is one text block, stopReason end_turn, usage and metrics."""
        body = whole("text").body
        self.assertEqual(body["output"]["message"], {"role": "assistant", "content": [{"text": FX.text}]})
        self.assertEqual(body["stopReason"], "end_turn")
        self.assertEqual(body["usage"], {"inputTokens": 31, "outputTokens": 17, "totalTokens": 48})
        self.assertIn("latencyMs", body["metrics"])

    def test_tool_turns_carry_one_tool_use_block(self) -> None:
        """Both tool turns carry the toolUse block with parsed input; only the stop reason differs."""
        for scenario, stop in (("tool-call", "tool_use"), ("tool-call-with-stop", "end_turn")):
            with self.subTest(scenario=scenario):
                body = whole(scenario).body
                self.assertEqual(body["stopReason"], stop)
                content = body["output"]["message"]["content"]
                expected = {"toolUseId": TOOL_USE_ID, "name": "get_weather", "input": dict(FX.tool_arguments)}
                self.assertEqual(content, [{"toolUse": expected}])

    def test_content_blocks_have_exactly_one_member(self) -> None:
        """Every content block is a union with one member, as botocore demands."""
        for scenario in ("text", "tool-call", "truncated-tool-call", "content-filter"):
            with self.subTest(scenario=scenario):
                for block in whole(scenario).body["output"]["message"]["content"]:
                    self.assertEqual(len(block), 1, block)

    def test_truncated_call_stops_for_max_tokens(self) -> None:
        """The cut-off call comes after the preamble on a max_tokens turn."""
        body = whole("truncated-tool-call").body
        self.assertEqual(body["stopReason"], "max_tokens")
        self.assertEqual(body["output"]["message"]["content"][0], {"text": FX.preamble})

    def test_content_filter_is_a_guardrail_intervention(self) -> None:
        """The whole content-filter turn is stopped by a guardrail."""
        self.assertEqual(whole("content-filter").body["stopReason"], "guardrail_intervened")

    def test_abort_hangs_and_stream_error_fails_the_request(self) -> None:
        """A whole abort turn never answers; a whole stream-error turn is a 503."""
        self.assertIsInstance(WIRE.reply("abort", "chat", recorded()), HangReply)
        self.assertIsInstance(WIRE.reply("cancel", "chat", recorded()), HangReply)
        self.assertEqual(whole("stream-error").status, 503)

    def test_every_reply_carries_a_request_id(self) -> None:
        """Every reply has an x-amzn-RequestId UUID."""
        for scenario in ("text", "rate-limit"):
            with self.subTest(scenario=scenario):
                headers = whole(scenario).headers or {}
                self.assertRegex(headers["x-amzn-RequestId"], r"^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$")


class ErrorTests(unittest.TestCase):
    """Failures before the stream: status, x-amzn-ErrorType and a message body."""

    def test_errors_name_the_bedrock_exception(self) -> None:
        """Each error scenario answers with its status, x-amzn-ErrorType and {"message": ...}."""
        expected = {
            "rate-limit": (429, "ThrottlingException"),
            "quota": (429, "ThrottlingException"),
            "auth": (403, "UnrecognizedClientException"),
            "overloaded": (503, "ServiceUnavailableException"),
            "server-error": (500, "InternalServerException"),
            "context-overflow": (400, "ValidationException"),
        }
        for scenario, (status, name) in expected.items():
            for stream in (False, True):
                with self.subTest(scenario=scenario, stream=stream):
                    reply = WIRE.reply(scenario, "chat", recorded(stream=stream))
                    assert isinstance(reply, JsonReply)
                    self.assertEqual(reply.status, status)
                    headers = reply.headers or {}
                    self.assertEqual(headers["x-amzn-ErrorType"].split(":", 1)[0], name)
                    self.assertEqual(set(reply.body), {"message"})

    def test_quota_differs_from_rate_limit_only_by_message(self) -> None:
        """A daily token quota is a ThrottlingException whose message says per day."""
        self.assertIn("per day", whole("quota").body["message"])
        self.assertNotIn("per day", whole("rate-limit").body["message"])

    def test_rate_limit_carries_no_retry_delay(self) -> None:
        """Bedrock sends no retry-after, and the wire says so to the cases."""
        self.assertIsNone(WIRE.rate_limit_retry_after)
        headers = {k.lower() for k in (whole("rate-limit").headers or {})}
        self.assertFalse(headers & {"retry-after", "retry-after-ms"})

    def test_every_error_scenario_is_covered(self) -> None:
        """The ERRORS table answers exactly the error scenarios."""
        self.assertEqual(
            set(ERRORS), {s.name for s in SCENARIOS.values() if s.error_kind and s.name != "stream-error"}
        )


class StreamReplyTests(unittest.TestCase):
    """The ConverseStream answers, binary event-stream messages."""

    def test_text_stream_event_order(self) -> None:
        """A text turn runs messageStart, deltas, contentBlockStop, messageStop, metadata, no start event."""
        evts = events(streamed("text"))
        names = [e for e, _ in evts]
        self.assertEqual(names[0], "messageStart")
        self.assertEqual(names[-3:], ["contentBlockStop", "messageStop", "metadata"])
        self.assertNotIn("contentBlockStart", names)
        self.assertEqual(stream_text(evts), FX.text)
        self.assertEqual(evts[-2][1]["stopReason"], "end_turn")
        self.assertEqual(evts[-1][1]["usage"], {"inputTokens": 31, "outputTokens": 17, "totalTokens": 48})

    def test_tool_call_stream_sends_start_and_input_fragments(self) -> None:
        """A tool block opens with contentBlockStart and its input arrives as JSON string fragments."""
        for scenario, stop in (("tool-call", "tool_use"), ("tool-call-with-stop", "end_turn")):
            with self.subTest(scenario=scenario):
                evts = events(streamed(scenario))
                starts = [p for e, p in evts if e == "contentBlockStart"]
                self.assertEqual(
                    starts[0]["start"], {"toolUse": {"toolUseId": TOOL_USE_ID, "name": "get_weather"}}
                )
                fragments = [p["delta"]["toolUse"]["input"] for e, p in evts if e == "contentBlockDelta"]
                self.assertGreater(len(fragments), 1)
                self.assertEqual(json.loads("".join(fragments)), dict(FX.tool_arguments))
                self.assertEqual([p for e, p in evts if e == "messageStop"][0]["stopReason"], stop)

    def test_truncated_stream_ends_with_max_tokens(self) -> None:
        """The truncated turn streams the preamble, an unparseable input and max_tokens."""
        evts = events(streamed("truncated-tool-call"))
        fragments = "".join(
            p["delta"]["toolUse"]["input"]
            for e, p in evts
            if e == "contentBlockDelta" and "toolUse" in p["delta"]
        )
        with self.assertRaises(ValueError):
            json.loads(fragments)
        self.assertEqual(stream_text(evts), FX.preamble)
        self.assertEqual([p for e, p in evts if e == "messageStop"][0]["stopReason"], "max_tokens")

    def test_content_filter_stream_is_a_guardrail_after_its_text(self) -> None:
        """The streamed guardrail sends its message as text, then guardrail_intervened and a trace."""
        evts = events(streamed("content-filter"))
        self.assertEqual(
            [e for e, _ in evts],
            ["messageStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"],
        )
        self.assertEqual(stream_text(evts), GUARDRAIL_MESSAGE)
        self.assertEqual(evts[3][1]["stopReason"], "guardrail_intervened")
        self.assertIn("guardrail", evts[4][1]["trace"])

    def test_content_filter_stream_variant_stops_as_content_filtered(self) -> None:
        """The content-filtered variant stops with the model's own filter and no block."""
        reply = WIRE.reply("content-filter", "stream", recorded(stream=True), "content-filtered")
        assert isinstance(reply, StreamReply)
        evts = events(reply)
        self.assertEqual([e for e, _ in evts], ["messageStart", "messageStop", "metadata"])
        self.assertEqual(evts[1][1]["stopReason"], "content_filtered")

    def test_stream_error_is_an_exception_message_after_the_partial_text(self) -> None:
        """The failure is a serviceUnavailableException message after the partial text."""
        evts = events(streamed("stream-error"))
        self.assertEqual(stream_text(evts), FX.partial_text)
        self.assertEqual(evts[-1][0], "!serviceUnavailableException")
        self.assertEqual(set(evts[-1][1]), {"message"})

    def test_stream_error_throttling_variant_is_a_throttling_exception(self) -> None:
        """The throttling variant fails with a throttlingException message, a rate limit without a delay."""
        reply = WIRE.reply("stream-error", "stream", recorded(stream=True), "throttling")
        assert isinstance(reply, StreamReply)
        evts = events(reply)
        self.assertEqual(stream_text(evts), FX.partial_text)
        self.assertEqual(evts[-1][0], "!throttlingException")
        self.assertTrue(evts[-1][1]["message"].startswith("Too many requests, please wait"))
        variant = WIRE.variant("stream-error", "stream", "throttling")
        self.assertEqual((variant.accepted_kinds("overloaded"), variant.retry_after), (("rate_limit",), None))
        self.assertEqual(WIRE.variants("stream-error", "stream")[0].name, "service-unavailable")

    def test_objects_have_their_keys_in_sorted_order(self) -> None:
        """Every object of a stream event and of a whole reply lists its keys sorted, "p" among them."""

        def sorted_everywhere(value: Any) -> bool:
            if isinstance(value, dict):
                return list(value) == sorted(value) and all(sorted_everywhere(v) for v in value.values())
            if isinstance(value, list):
                return all(sorted_everywhere(v) for v in value)
            return True

        for scenario in ("text", "tool-call", "content-filter", "reasoning", "parallel-tool-calls"):
            with self.subTest(scenario=scenario):
                body = scenario_reply(WIRE, scenario, "chat", recorded())
                assert isinstance(body, JsonReply), body
                self.assertTrue(sorted_everywhere(json.loads(body.encoded())))
                reply = scenario_reply(WIRE, scenario, "stream", recorded(stream=True))
                assert isinstance(reply, StreamReply), reply
                for message in decode(reply):
                    self.assertTrue(sorted_everywhere(json.loads(message.payload)), message.payload)
        self.assertTrue(whole("tool-call").encoded().startswith(b'{"metrics":'))

    def test_abort_stream_hangs_after_partial_text(self) -> None:
        """The abort turn streams some text and then keeps the response open."""
        for scenario in ("abort", "cancel"):
            with self.subTest(scenario=scenario):
                reply = streamed(scenario)
                self.assertTrue(reply.hang)
                self.assertEqual(stream_text(events(reply)), FX.partial_text)

    def test_events_carry_headers_and_padding(self) -> None:
        """Every event has the three string headers and a top-level "p" padding, never inside a union."""
        for message in decode(streamed("tool-call")):
            with self.subTest(event=message.headers[":event-type"]):
                self.assertEqual(message.headers[":message-type"], "event")
                self.assertEqual(message.headers[":content-type"], "application/json")
                payload = json.loads(message.payload)
                self.assertRegex(payload["p"], r"^a[A-Za-z0-9]*$")
                for union in ("delta", "start"):
                    self.assertNotIn("p", payload.get(union, {}))

    def test_stream_reply_headers(self) -> None:
        """The stream is application/vnd.amazon.eventstream with a request id."""
        reply = streamed("text")
        self.assertEqual(reply.content_type, "application/vnd.amazon.eventstream")
        self.assertIn("x-amzn-RequestId", reply.headers or {})

    def test_frames_are_split_across_chunks(self) -> None:
        """Messages straddle chunk boundaries, so a per-chunk decoder fails."""
        reply = streamed("text")
        whole_frames = b"".join(reply.chunks)
        self.assertGreater(len(reply.chunks), len(decode(reply)))
        offsets, position = set(), 0
        for chunk in reply.chunks:
            position += len(chunk)
            offsets.add(position)
        frame_ends, position = set(), 0
        while position < len(whole_frames):
            position += int.from_bytes(whole_frames[position : position + 4], "big")
            frame_ends.add(position)
        self.assertTrue(offsets - frame_ends, "every chunk ends on a frame boundary")

    def test_same_stream_on_every_run(self) -> None:
        """The chunking is deterministic."""
        self.assertEqual(streamed("text").chunks, streamed("text").chunks)

    def test_corrupt_frame_fails_the_crc_check(self) -> None:
        """The corrupt-frame stream has one message whose CRC does not match."""
        with self.assertRaisesRegex(EventStreamError, "message CRC mismatch"):
            decode(streamed(CORRUPT_FRAME))

    def test_tool_use_id_is_shaped_like_bedrocks(self) -> None:
        """The tool call id is tooluse_ and 22 URL-safe characters."""
        self.assertRegex(TOOL_USE_ID, r"^tooluse_[A-Za-z0-9_-]{22}$")
        self.assertEqual(WIRE.tool_call_id, TOOL_USE_ID)


class RouteTests(unittest.TestCase):
    """Which requests are the generation call, and which stream."""

    def test_routes(self) -> None:
        """Converse and ConverseStream are generation calls; only converse-stream streams."""
        arn = quote("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.x-v1:0", safe="")
        table = [
            ("POST", f"/model/{arn}/converse", True, False),
            ("POST", f"/model/{arn}/converse-stream", True, True),
            ("POST", "/model/conformance-model/converse-stream", True, True),
            ("POST", "/model/conformance-model/invoke", False, False),
            ("GET", "/model/conformance-model/converse", False, False),
            ("POST", "/model/a/b/converse", False, False),
        ]
        for method, path, generation, stream in table:
            with self.subTest(path=path):
                request = recorded(path=path, method=method)
                self.assertEqual(WIRE.is_generation(request), generation)
                self.assertEqual(WIRE.wants_stream(request), stream)

    def test_other_paths_get_a_bedrock_shaped_404(self) -> None:
        """A request off the scripted routes gets a 404 naming the route."""
        reply = WIRE.aux_reply(recorded(path="/foundation-models", method="GET"))
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.status, 404)
        self.assertIn("/foundation-models", reply.body["message"])


class CheckRequestTests(unittest.TestCase):
    """check_request: one sentence per problem."""

    def test_a_good_request_has_no_problems(self) -> None:
        """The request a good backend sends passes, whole and streamed."""
        for stream in (False, True):
            with self.subTest(stream=stream):
                self.assertEqual(WIRE.check_request(recorded(stream=stream), MODEL), [])

    def test_bad_requests_are_named(self) -> None:
        """Each mistake gives one problem that names what was expected."""
        system_message = {"role": "system", "content": [{"text": FX.system}]}
        no_tools = request_body()
        del no_tools["toolConfig"]
        other_schema = request_body()
        other_schema["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] = {"json": {"type": "object"}}
        table = [
            ("method", recorded(method="PUT"), "expected POST"),
            ("unencoded model", recorded(path=f"/model/{MODEL}/converse"), "percent-encoded"),
            ("other model", recorded(path="/model/other/converse"), "expected model"),
            ("other path", recorded(path="/v1/chat/completions"), "/model/{modelId}/converse"),
            ("no authorization", recorded(headers={}), "Authorization"),
            (
                "system as a message",
                recorded(body=request_body(messages=[system_message, *request_body()["messages"]])),
                "roles",
            ),
            ("no system", recorded(body=request_body(system=None)), "expected system"),
            (
                "plain string content",
                recorded(body=request_body(messages=[{"role": "user", "content": FX.question}])),
                "user message",
            ),
            ("no tools", recorded(body=no_tools), "toolConfig.tools"),
            ("other schema", recorded(body=other_schema), "inputSchema"),
        ]
        for label, request, fragment in table:
            with self.subTest(label):
                problems = WIRE.check_request(request, MODEL)
                self.assertEqual(len(problems), 1, problems)
                self.assertIn(fragment, problems[0])

    def test_empty_body_is_a_problem(self) -> None:
        """A request without a body is reported as such."""
        request = RecordedRequest(
            "POST", f"/model/{quote(MODEL, safe='')}/converse", "", {"authorization": "x"}, b"", "HTTP/1.1"
        )
        self.assertEqual(WIRE.check_request(request, MODEL), ["expected a JSON body, got an empty body"])

    def test_every_scenario_has_a_reply_in_both_forms(self) -> None:
        """The wire answers every scenario, whole and streamed; none is unsupported."""
        self.assertEqual(dict(WIRE.unsupported), {})
        for name, row in SCENARIOS.items():
            if SCENARIOS[name].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            for stream in (False, True) if "chat" in row.modes or name == "stream-error" else (True,):
                with self.subTest(scenario=name, stream=stream):
                    mode = "stream" if stream else "chat"
                    reply = scenario_reply(WIRE, name, mode, recorded(stream=stream))
                    # A whole reply carries input as a document: no broken text in it.
                    self.assertEqual(reply is None, WIRE.absent_in(name, mode) is not None)


class CorruptFrameTests(unittest.TestCase):
    """The corrupt-frame stream: what catches a decoder that skips the CRCs."""

    def outcome(self, backend: Any) -> Any:
        """The text streamed and the error raised when ``backend`` reads the corrupt-frame stream."""

        async def consume() -> Any:
            text, error = "", None
            try:
                async for chunk in backend.chat_stream(conformance_request(MODEL)):
                    text += chunk.content
            except LLMError as exc:
                error = exc
            finally:
                await backend.aclose()
            return text, error

        return asyncio.run(consume())

    def serve(self, create: Any) -> Any:
        with start_fake_provider() as provider:
            provider.reply(lambda request: WIRE.reply(CORRUPT_FRAME, "stream", request))
            return self.outcome(create(provider.url, False))

    def test_reference_backend_refuses_the_damaged_frame(self) -> None:
        """The reference backend fails as a server error after the text before the damaged frame."""
        text, error = self.serve(lambda url, http2: BedrockConverseBackend(url, http2=http2))
        self.assertIsInstance(error, LLMError)
        self.assertEqual(error.kind, "server_error")
        self.assertIn("CRC", str(error))
        self.assertTrue(FX.partial_text.startswith(text) and text, text)

    def test_checksum_mutant_is_caught(self) -> None:
        """A backend whose decoder skips the CRCs reads the damaged stream as a normal turn."""
        mutant = next(m for m in MUTANTS if m.name == "ignores-checksums")
        text, error = self.serve(mutant.create)
        self.assertIsNone(error, "the mutant refused the frame: its bug is not what it says")
        self.assertEqual(text, FX.partial_text)


if __name__ == "__main__":
    unittest.main()
