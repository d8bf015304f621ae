"""Tests of the Bedrock InvokeModel wire for Claude: frames, ids, failures, routes and the request check."""

from __future__ import annotations

import base64
import json
import unittest
from typing import Any, Dict, List, Optional, Tuple

from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.reference._decoders import EventStreamDecoder, EventStreamError
from conformance.scenarios import SCENARIOS
from conformance.wires._aws import ERROR_NAMESPACE
from conformance.wires.anthropic import TOOL_USE_ID as ANTHROPIC_TOOL_USE_ID
from conformance.wires.anthropic._hosted import host_id, hosted_message
from conformance.wires.bedrock_invoke import MESSAGE_ID, TOOL_USE_ID
from conformance.wires.bedrock_invoke import bedrock_invoke_wire as wire
from conformance.wires.bedrock_invoke._replies import MESSAGE_ID_2026

MODEL = "us.anthropic.claude-sonnet-4-v1:0"
INVOKE = "/model/us.anthropic.claude-sonnet-4-v1%3A0/invoke"
STREAM = "/model/us.anthropic.claude-sonnet-4-v1:0/invoke-with-response-stream"
HEADERS = {"authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-east-1/bedrock/aws4_request"}


def good_body() -> Dict[str, Any]:
    return {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": FX.max_tokens,
        "system": FX.system,
        "messages": [{"role": "user", "content": FX.question}],
        "tools": [
            {
                "name": FX.tool_name,
                "description": FX.tool_description,
                "input_schema": dict(FX.tool_parameters),
            }
        ],
    }


def recorded(path: str, body: Any = None, headers: Optional[Dict[str, str]] = None) -> RecordedRequest:
    raw = json.dumps(good_body() if body is None else body).encode("utf-8")
    return RecordedRequest("POST", path, "", dict(HEADERS if headers is None else headers), raw, "HTTP/1.1")


def frames(reply: StreamReply) -> List[Tuple[Dict[str, Any], Any]]:
    """Each frame's headers, and its Claude event (a chunk) or its payload (an exception)."""
    decoder = EventStreamDecoder()
    out = []
    for chunk in reply.chunks:
        for frame in decoder.feed(chunk):
            if frame.headers.get(":event-type") == "chunk":
                payload = json.loads(frame.payload)
                out.append((frame.headers, json.loads(base64.b64decode(payload["bytes"]))))
            else:
                out.append((frame.headers, json.loads(frame.payload)))
    return out


def streamed(scenario: str, variant: str = "") -> StreamReply:
    reply = wire.reply(scenario, "stream", recorded(STREAM), variant)
    assert isinstance(reply, StreamReply), reply
    return reply


def whole(scenario: str, variant: str = "") -> JsonReply:
    reply = wire.reply(scenario, "chat", recorded(INVOKE), variant)
    assert isinstance(reply, JsonReply), reply
    return reply


class ReplyTests(unittest.TestCase):
    def test_every_scenario_answers_in_both_forms(self) -> None:
        """Every scenario but the checksum one has a whole and a streamed answer; none is unsupported."""
        self.assertEqual(dict(wire.unsupported), {})
        for name, row in SCENARIOS.items():
            if SCENARIOS[name].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            if name in ("tool-result", "parallel-tool-calls", "reasoning", "corrupt-arguments"):
                continue  # played from the scripted turns
            for mode in row.modes:
                with self.subTest(scenario=name, mode=mode):
                    path = STREAM if mode == "stream" else INVOKE
                    reply = wire.reply(name, mode, recorded(path))
                    if name == "corrupt-frame" and mode == "chat":
                        self.assertIsNone(reply)
                    else:
                        self.assertIsInstance(reply, (JsonReply, StreamReply, HangReply))

    def test_ids_carry_bedrocks_infix(self) -> None:
        """Message and call ids are Anthropic's with bdrk_ after the type: msg_bdrk_01…, toolu_bdrk_01…."""
        self.assertRegex(MESSAGE_ID, r"^msg_bdrk_01[0-9A-Za-z]{22}$")
        self.assertRegex(TOOL_USE_ID, r"^toolu_bdrk_01[0-9A-Za-z]{22}$")
        self.assertEqual(wire.tool_call_id, TOOL_USE_ID)
        self.assertRegex(wire.scripted_call_id("get_weather", "x"), r"^toolu_bdrk_01[0-9A-Za-z]{22}$")
        self.assertEqual(host_id("toolu_bdrk_01Ab", "bdrk_"), "toolu_bdrk_01Ab")
        content = [{"type": "tool_use", "id": ANTHROPIC_TOOL_USE_ID}, {"type": "tool_use", "id": "toolu_01Y"}]
        body = hosted_message({"id": "msg_01X", "content": content}, "bdrk_")
        self.assertEqual(body["id"], "msg_bdrk_01X")
        self.assertEqual([b["id"] for b in body["content"]], [TOOL_USE_ID, "toolu_01Y"], "scripted id kept")

    def test_whole_reply_is_claudes_message_with_bedrocks_headers(self) -> None:
        """A whole reply is Claude's message, with the request id and token counts as headers, its id
        msg_bdrk_ and 52 lower-case characters as in 2026."""
        reply = whole("tool-call")
        self.assertEqual(reply.body["id"], MESSAGE_ID_2026)
        self.assertRegex(MESSAGE_ID_2026, r"^msg_bdrk_[0-9a-z]{52}$")
        self.assertEqual(reply.body["content"][0]["id"], TOOL_USE_ID)
        self.assertEqual(reply.body["stop_reason"], "tool_use")
        headers = reply.headers or {}
        self.assertRegex(headers["x-amzn-RequestId"], r"^[0-9a-f-]{36}$")
        self.assertEqual(headers["X-Amzn-Bedrock-Input-Token-Count"], str(FX.usage.input_tokens))
        self.assertEqual(headers["X-Amzn-Bedrock-Output-Token-Count"], str(FX.usage.output_tokens))
        self.assertEqual(headers["X-Amzn-Bedrock-Cache-Read-Input-Token-Count"], "0")

    def test_stream_frames_are_chunks_of_claudes_events(self) -> None:
        """Each frame is a chunk whose base64 bytes are one Claude event, with padding and no ping."""
        reply = streamed("tool-call")
        self.assertEqual(reply.content_type, "application/vnd.amazon.eventstream")
        self.assertEqual((reply.headers or {})["X-Amzn-Bedrock-Content-Type"], "application/json")
        got = frames(reply)
        types = [event["type"] for _, event in got]
        self.assertEqual(types[0], "message_start")
        self.assertEqual(types[-2:], ["message_delta", "message_stop"])
        self.assertNotIn("ping", types)
        self.assertEqual(got[0][1]["message"]["id"], MESSAGE_ID)
        self.assertEqual(got[1][1]["content_block"]["id"], TOOL_USE_ID)
        metrics = got[-1][1]["amazon-bedrock-invocationMetrics"]
        self.assertEqual((metrics["inputTokenCount"], metrics["outputTokenCount"]), (31, 17))
        for headers, _ in got:
            self.assertEqual(
                headers,
                {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
            )
        paddings = set()
        decoder = EventStreamDecoder()
        for frame in decoder.feed(b"".join(reply.chunks)):
            payload = json.loads(frame.payload)
            self.assertEqual(list(payload), ["bytes", "p"])
            paddings.add(len(payload["p"]))
        self.assertGreater(len(paddings), 3, "the padding's length varies")

    def test_claudes_messages_are_as_bedrock_recorded_them(self) -> None:
        """id first, cache_creation and service_tier but no inference_geo, stop_details null, compact JSON."""
        usage = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "cache_creation",
            "output_tokens",
            "service_tier",
        ]
        body = whole("text").body
        self.assertEqual(list(body)[:4], ["id", "type", "role", "model"])
        self.assertIsNone(body["stop_details"])
        self.assertEqual(list(body["usage"]), [*usage, "output_tokens_details"])
        # The 2026 stream (pydantic-ai, claude-opus-4-8): model first, container null.
        got = frames(streamed("text", "delta-input-tokens"))
        message = got[0][1]["message"]
        self.assertEqual(list(message)[:6], ["model", "id", "type", "role", "content", "container"])
        self.assertEqual(message["id"], MESSAGE_ID_2026)
        self.assertIsNone(message["stop_details"])
        self.assertEqual(list(message["usage"]), usage)
        delta = next(e for _, e in got if e["type"] == "message_delta")
        self.assertEqual(list(delta["delta"]), ["stop_reason", "stop_sequence", "stop_details", "container"])
        self.assertEqual(delta["usage"]["output_tokens_details"], {"thinking_tokens": 0})
        self.assertEqual(delta["usage"]["input_tokens"], FX.usage.input_tokens)

    def test_the_2025_stream_is_played_as_its_capture_shows_it(self) -> None:
        """delta-output-only, open-telemetry's stream of 2025-03: id first, no stop_details, and
        message_start counting the input and output tokens alone."""
        got = frames(streamed("text", "delta-output-only"))
        message = got[0][1]["message"]
        order = ["id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"]
        self.assertEqual(list(message), order)
        self.assertEqual(message["id"], MESSAGE_ID)
        self.assertEqual(list(message["usage"]), ["input_tokens", "output_tokens"])
        delta = next(e for _, e in got if e["type"] == "message_delta")
        self.assertEqual(delta["delta"], {"stop_reason": "end_turn", "stop_sequence": None})
        self.assertEqual(delta["usage"], {"output_tokens": FX.usage.output_tokens})
        for frame in EventStreamDecoder().feed(b"".join(streamed("text").chunks)):
            inner = base64.b64decode(json.loads(frame.payload)["bytes"]).decode("utf-8")
            self.assertEqual(inner, json.dumps(json.loads(inner), separators=(",", ":"), ensure_ascii=False))
        self.assertFalse([h for h in whole("text").headers or {} if h.startswith("anthropic-ratelimit-")])

    def test_botocore_reads_the_frames(self) -> None:
        """botocore's own event-stream parser reads every frame and its CRCs, as boto3 would."""
        try:
            from botocore.eventstream import EventStreamBuffer
        except ImportError:
            self.skipTest("botocore is not installed")
        buffer = EventStreamBuffer()
        buffer.add_data(b"".join(streamed("text").chunks))
        events = [json.loads(base64.b64decode(json.loads(m.payload)["bytes"]))["type"] for m in buffer]
        self.assertEqual(events[0], "message_start")
        self.assertEqual(events[-1], "message_stop")

    def test_text_stream_variants_differ_in_message_delta_usage(self) -> None:
        """The newer capture repeats the input tokens in message_delta, the older counts the output only."""
        newer = [e for _, e in frames(streamed("text", "delta-input-tokens")) if e["type"] == "message_delta"]
        older = [e for _, e in frames(streamed("text", "delta-output-only")) if e["type"] == "message_delta"]
        self.assertEqual(newer[0]["usage"]["input_tokens"], FX.usage.input_tokens)
        self.assertEqual(older[0]["usage"], {"output_tokens": FX.usage.output_tokens})

    def test_a_stream_fails_with_an_exception_frame_after_its_text(self) -> None:
        """stream-error: text deltas, then the variant's exception frame; never Claude's error event."""
        for variant, name in (
            ("service-unavailable", "serviceUnavailableException"),
            ("throttling", "throttlingException"),
        ):
            with self.subTest(variant=variant):
                got = frames(streamed("stream-error", variant))
                headers, payload = got[-1]
                self.assertEqual(headers[":message-type"], "exception")
                self.assertEqual(headers[":exception-type"], name)
                self.assertEqual(list(payload), ["message"])
                text = "".join(
                    e["delta"]["text"] for _, e in got[:-1] if e.get("type") == "content_block_delta"
                )
                self.assertEqual(text, FX.partial_text)
                self.assertNotIn("error", [e.get("type") for _, e in got])

    def test_framed_failures_are_a_200_and_one_exception_frame(self) -> None:
        """A throttle or an oversized input may come in the stream's first frame, after a 200."""
        for scenario, variant, name in (
            ("rate-limit", "throttling-frame", "throttlingException"),
            ("context-overflow", "input-too-long-frame", "validationException"),
        ):
            with self.subTest(variant=variant):
                reply = streamed(scenario, variant)
                self.assertEqual(reply.status, 200)
                ((headers, payload),) = frames(reply)
                self.assertEqual(headers[":exception-type"], name)
                self.assertIn("message", payload)

    def test_failures_before_the_answer_are_bedrocks(self) -> None:
        """Each failure is a status, x-amzn-ErrorType and {"message"}; no retry delay on a throttle."""
        expected = {
            ("rate-limit", ""): (429, "ThrottlingException"),
            ("quota", "throttling-per-day"): (429, "ThrottlingException"),
            ("quota", "service-quota-exceeded"): (400, "ServiceQuotaExceededException"),
            ("auth", ""): (403, "UnrecognizedClientException"),
            ("overloaded", ""): (503, "ServiceUnavailableException"),
            ("server-error", ""): (500, "InternalServerException"),
            ("context-overflow", ""): (400, "ValidationException"),
            ("stream-error", ""): (503, "ServiceUnavailableException"),
        }
        for (scenario, variant), (status, name) in expected.items():
            with self.subTest(scenario=scenario, variant=variant):
                reply = whole(scenario, variant)
                self.assertEqual(reply.status, status)
                self.assertEqual((reply.headers or {})["x-amzn-ErrorType"], f"{name}:{ERROR_NAMESPACE}")
                self.assertEqual(list(reply.body), ["message"])
                self.assertIsNone(wire.retry_after_sent(reply))
        self.assertIsNone(wire.rate_limit_retry_after)

    def test_a_damaged_frame_fails_its_checksum(self) -> None:
        """corrupt-frame: one frame's payload byte flipped, which a CRC-checking decoder refuses."""
        reply = wire.reply("corrupt-frame", "stream", recorded(STREAM))
        assert isinstance(reply, StreamReply)
        with self.assertRaisesRegex(EventStreamError, "message CRC mismatch"):
            EventStreamDecoder().feed(b"".join(reply.chunks))

    def test_the_stream_decodes_the_same_byte_by_byte(self) -> None:
        """Frames cut anywhere decode to the same events."""
        reply = streamed("text")
        data = b"".join(reply.chunks)
        decoder = EventStreamDecoder()
        one_by_one = [m for i in range(len(data)) for m in decoder.feed(data[i : i + 1])]
        self.assertEqual(len(one_by_one), len(frames(reply)))


class RouteTests(unittest.TestCase):
    def test_the_operation_says_whether_to_stream(self) -> None:
        """/invoke is a whole reply, /invoke-with-response-stream a stream; the model is percent-decoded."""
        self.assertFalse(wire.wants_stream(recorded(INVOKE)))
        self.assertTrue(wire.wants_stream(recorded(STREAM, {**good_body(), "stream": False})))
        self.assertEqual(wire.model_of(recorded(INVOKE)), MODEL)
        self.assertEqual(wire.model_of(recorded(STREAM)), MODEL)
        self.assertFalse(wire.is_generation(recorded("/model/x/converse")))
        self.assertFalse(wire.is_generation(RecordedRequest("GET", INVOKE, "", {}, b"", "HTTP/1.1")))

    def test_other_routes_get_bedrocks_404(self) -> None:
        reply = wire.aux_reply(recorded("/model/x/count-tokens"))
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.status, 404)
        self.assertTrue((reply.headers or {})["x-amzn-ErrorType"].startswith("UnknownOperationException:"))


class CheckRequestTests(unittest.TestCase):
    def test_a_good_request_has_no_problems_whoever_sends_it(self) -> None:
        """boto3's encoded colon, AnthropicBedrock's raw one, SigV4 or a Bearer key, each version."""
        for path in (INVOKE, STREAM):
            for version in ("bedrock-2023-05-31", "2026-10-21"):
                for auth in (HEADERS, {"authorization": "Bearer ABSKQmVkcm9ja0FQSUtleQ=="}):
                    with self.subTest(path=path, version=version, auth=auth):
                        body = {**good_body(), "anthropic_version": version}
                        self.assertEqual(wire.check_request(recorded(path, body, auth), MODEL), [])

    def test_each_problem_is_named(self) -> None:
        """A model or stream in the body, no version, no credentials, another model, another path."""
        cases = [
            ({**good_body(), "model": MODEL}, INVOKE, HEADERS, "extraneous key [model]"),
            ({**good_body(), "stream": True}, INVOKE, HEADERS, "extraneous key [stream]"),
            (
                {k: v for k, v in good_body().items() if k != "anthropic_version"},
                INVOKE,
                HEADERS,
                "anthropic_version",
            ),
            (good_body(), INVOKE, {}, "expected an Authorization header"),
            (good_body(), "/model/other-model/invoke", HEADERS, "expected model"),
            (good_body(), "/v1/messages", HEADERS, "/invoke-with-response-stream"),
            ({**good_body(), "tools": []}, INVOKE, HEADERS, "get_weather"),
            ({**good_body(), "max_tokens": 0}, INVOKE, HEADERS, "max_tokens"),
        ]
        for body, path, headers, expected in cases:
            with self.subTest(expected=expected):
                problems = wire.check_request(recorded(path, body, headers), MODEL)
                self.assertTrue(any(expected in p for p in problems), problems)

    def test_a_refused_history_is_a_validation_exception(self) -> None:
        """InvokeModel passes Claude's words on in a 400 ValidationException."""
        reply = wire.history_error(
            ["messages.1: `tool_use` ids were found without `tool_result` blocks", "x"]
        )
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.status, 400)
        self.assertTrue((reply.headers or {})["x-amzn-ErrorType"].startswith("ValidationException:"))
        self.assertEqual(
            reply.body, {"message": "messages.1: `tool_use` ids were found without `tool_result` blocks"}
        )


if __name__ == "__main__":
    unittest.main()
