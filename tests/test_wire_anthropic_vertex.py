"""Tests of the Claude on Vertex AI wire: ids, events, failures, routes and the request check."""

from __future__ import annotations

import json
import unittest
from typing import Any, Dict, List, Optional, Tuple

from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.reference._decoders import SSEDecoder
from conformance.scenarios import SCENARIOS
from conformance.wires.anthropic_vertex import MESSAGE_ID, TOOL_USE_ID, request_id
from conformance.wires.anthropic_vertex import anthropic_vertex_wire as wire

MODEL = "claude-sonnet-4@20250514"
BASE = "/v1/projects/my-proj/locations/us-east5/publishers/anthropic/models"
WHOLE = f"{BASE}/{MODEL}:rawPredict"
STREAM = f"{BASE}/{MODEL}:streamRawPredict"
HEADERS = {"authorization": "Bearer ya29.fake-token", "content-type": "application/json"}


def good_body(stream: bool = False) -> Dict[str, Any]:
    body: Dict[str, Any] = {
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
        "anthropic_version": "vertex-2023-10-16",
    }
    if stream:
        body["stream"] = True
    return body


def recorded(path: str, body: Any = None, headers: Optional[Dict[str, str]] = None) -> RecordedRequest:
    raw = json.dumps(good_body(path.endswith("streamRawPredict")) if body is None else body).encode()
    return RecordedRequest("POST", path, "", dict(HEADERS if headers is None else headers), raw, "HTTP/1.1")


def events(reply: StreamReply) -> List[Tuple[str, Dict[str, Any]]]:
    decoder = SSEDecoder()
    return [(e.event, json.loads(e.data)) for chunk in reply.chunks for e in decoder.feed(chunk)]


def streamed(scenario: str, variant: str = "") -> StreamReply:
    reply = wire.reply(scenario, "stream", recorded(STREAM), variant)
    assert isinstance(reply, StreamReply), reply
    return reply


def whole(scenario: str, variant: str = "", path: str = WHOLE) -> JsonReply:
    reply = wire.reply(scenario, "chat", recorded(path), variant)
    assert isinstance(reply, JsonReply), reply
    return reply


class ReplyTests(unittest.TestCase):
    def test_every_scenario_answers_in_both_forms(self) -> None:
        """Every scenario has a whole and a streamed answer; the checksum one is absent (SSE has none)."""
        self.assertEqual(dict(wire.unsupported), {})
        self.assertIsNotNone(wire.absent("corrupt-frame"))
        for name, row in SCENARIOS.items():
            if SCENARIOS[name].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            if name in (
                "tool-result",
                "parallel-tool-calls",
                "reasoning",
                "corrupt-arguments",
                "corrupt-frame",
            ):
                continue  # played from the scripted turns, or absent
            for mode in row.modes:
                with self.subTest(scenario=name, mode=mode):
                    reply = wire.reply(name, mode, recorded(STREAM if mode == "stream" else WHOLE))
                    self.assertIsInstance(reply, (JsonReply, StreamReply, HangReply))

    def test_ids_carry_vertexs_infix(self) -> None:
        """msg_vrtx_01…, toolu_vrtx_01…, and request ids req_vrtx_011C…, fresh on each response."""
        self.assertRegex(MESSAGE_ID, r"^msg_vrtx_01[0-9A-Za-z]{22}$")
        self.assertRegex(TOOL_USE_ID, r"^toolu_vrtx_01[0-9A-Za-z]{22}$")
        self.assertRegex(request_id(), r"^req_vrtx_011C[0-9A-Za-z]{20}$")
        self.assertNotEqual(request_id(), request_id())

    def test_whole_reply_carries_vertexs_ids_and_headers(self) -> None:
        """Claude's message, Vertex's ids, request-id and Google's front-end headers, no service_tier."""
        reply = whole("tool-call")
        self.assertEqual(reply.body["id"], MESSAGE_ID)
        self.assertEqual(reply.body["content"][0]["id"], TOOL_USE_ID)
        self.assertNotIn("service_tier", reply.body["usage"])
        headers = reply.headers or {}
        self.assertRegex(headers["request-id"], r"^req_vrtx_")
        self.assertEqual(headers["server"], "scaffolding on HTTPServer2")

    def test_stream_is_anthropics_sse_as_vertex_measured_it(self) -> None:
        """message_start without service_tier, message_delta counting the output only, Vertex's ids."""
        got = events(streamed("tool-call"))
        self.assertTrue(all(name == data["type"] for name, data in got))
        start = got[0][1]["message"]
        self.assertEqual(start["id"], MESSAGE_ID)
        self.assertNotIn("service_tier", start["usage"])
        block = next(d for n, d in got if n == "content_block_start")
        self.assertEqual(block["content_block"]["id"], TOOL_USE_ID)
        delta = next(d for n, d in got if n == "message_delta")
        self.assertEqual(delta["usage"], {"output_tokens": FX.usage.output_tokens})
        self.assertEqual(got[-1][0], "message_stop")

    def test_vertex_keeps_its_measured_shape_where_anthropics_api_moved_on(self) -> None:
        """id first, usage without cache_creation or inference_geo, no stop_details null, no padding."""
        import re

        usage = ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"]
        got = events(streamed("text", "without-vertex-event"))
        body = whole("text").body
        for message in (got[0][1]["message"], body):
            self.assertEqual(list(message)[:4], ["id", "type", "role", "model"])
            self.assertNotIn("stop_details", message)
            self.assertEqual(list(message["usage"]), usage)
        delta = next(d for n, d in got if n == "message_delta")
        self.assertEqual(delta["delta"], {"stop_reason": "end_turn", "stop_sequence": None})
        raw = b"".join(streamed("text", "without-vertex-event").chunks).decode("utf-8")
        self.assertFalse(re.findall(r"^data: .* }$", raw, re.M))
        self.assertFalse([h for h in whole("text").headers or {} if h.startswith("anthropic-ratelimit-")])
        refusal = whole("content-filter").body
        self.assertEqual(refusal["stop_details"]["type"], "refusal")

    def test_the_vertex_event_variant_adds_its_event_after_message_start(self) -> None:
        """vertex_event carries the usage and its tiers; the plain variant has none."""
        plain = [n for n, _ in events(streamed("text", "without-vertex-event"))]
        self.assertNotIn("vertex_event", plain)
        got = events(streamed("text", "vertex-event"))
        self.assertEqual([n for n, _ in got[:2]], ["message_start", "vertex_event"])
        usage = got[1][1]["usage"]
        self.assertEqual(usage["input_tokens"], FX.usage.input_tokens)
        self.assertEqual(usage["tiers"]["0-to-200000"]["output_tokens"], 1)

    def test_a_stream_fails_with_an_error_event_whose_details_are_null(self) -> None:
        """stream-error: the partial text, then event: error with details null and no request id."""
        got = events(streamed("stream-error"))
        name, data = got[-1]
        self.assertEqual(name, "error")
        self.assertEqual(
            data,
            {
                "type": "error",
                "error": {"details": None, "type": "overloaded_error", "message": "Overloaded"},
            },
        )
        text = "".join(d["delta"]["text"] for n, d in got if n == "content_block_delta")
        self.assertEqual(text, FX.partial_text)

    def test_googles_failures_are_google_rpc_status(self) -> None:
        """A quota, a bad token and an internal error come from Google's front end, pretty-printed."""
        for scenario, status, rpc in (
            ("rate-limit", 429, "RESOURCE_EXHAUSTED"),
            ("quota", 429, "RESOURCE_EXHAUSTED"),
            ("auth", 401, "UNAUTHENTICATED"),
            ("server-error", 500, "INTERNAL"),
        ):
            with self.subTest(scenario=scenario):
                reply = whole(scenario)
                self.assertEqual(reply.status, status)
                self.assertEqual(reply.content_type, "application/json; charset=UTF-8")
                raw = reply.encoded()
                self.assertTrue(raw.startswith(b'{\n  "error": {\n    "code": '), raw[:40])
                self.assertEqual(json.loads(raw)["error"]["status"], rpc)
                self.assertIsNone(wire.retry_after_sent(reply))

    def test_a_streaming_call_may_be_refused_in_a_json_array(self) -> None:
        """The resource-exhausted-list variant wraps the status in an array, and only for streamRawPredict."""
        reply = wire.reply("rate-limit", "stream", recorded(STREAM), "resource-exhausted-list")
        assert isinstance(reply, JsonReply)
        raw = reply.encoded()
        self.assertTrue(raw.startswith(b'[{\n  "error": {'), raw[:20])
        self.assertEqual(json.loads(raw)[0]["error"]["code"], 429)
        self.assertEqual(
            [v.name for v in wire.variants("rate-limit", "chat")],
            ["resource-exhausted"],
            "chat is never listed",
        )

    def test_claudes_failures_pass_through_in_anthropics_shape(self) -> None:
        """An overload is 529 with details null; a too-long prompt a 400 with a req_vrtx_ request id."""
        overloaded = whole("overloaded")
        self.assertEqual(overloaded.status, 529)
        self.assertEqual(
            overloaded.body["error"], {"details": None, "type": "overloaded_error", "message": "Overloaded"}
        )
        overflow = whole("context-overflow")
        self.assertEqual(overflow.status, 400)
        self.assertEqual(overflow.body["error"]["type"], "invalid_request_error")
        self.assertRegex(overflow.body["request_id"], r"^req_vrtx_")
        self.assertEqual((overflow.headers or {})["request-id"], overflow.body["request_id"])
        self.assertEqual(whole("stream-error").status, 529)


class RouteTests(unittest.TestCase):
    def test_the_method_says_whether_to_stream(self) -> None:
        """:streamRawPredict streams, :rawPredict does not; the model (with its @) comes from the path."""
        self.assertFalse(wire.wants_stream(recorded(WHOLE)))
        self.assertTrue(wire.wants_stream(recorded(STREAM)))
        self.assertEqual(wire.model_of(recorded(STREAM)), MODEL)
        self.assertEqual(wire.model_of(recorded(f"{BASE}/claude-sonnet-4%4020250514:rawPredict")), MODEL)
        self.assertFalse(wire.is_generation(recorded(f"{BASE}/count-tokens:rawPredict")))
        self.assertFalse(wire.is_generation(recorded("/v1/messages")))

    def test_count_tokens_is_answered_and_the_rest_is_googles_404(self) -> None:
        counted = wire.aux_reply(recorded(f"{BASE}/count-tokens:rawPredict"))
        assert isinstance(counted, JsonReply)
        self.assertEqual(counted.body, {"input_tokens": FX.usage.input_tokens})
        missing = wire.aux_reply(recorded("/v1/projects/p/locations/l/endpoints/e:predict"))
        assert isinstance(missing, JsonReply)
        self.assertEqual(missing.status, 404)
        self.assertEqual(json.loads(missing.encoded())["error"]["status"], "NOT_FOUND")


class CheckRequestTests(unittest.TestCase):
    def test_a_good_request_has_no_problems_with_either_version(self) -> None:
        """AnthropicVertex 0.x's vertex-2023-10-16 and 2.x's own version are both taken."""
        for path in (WHOLE, STREAM):
            for version in ("vertex-2023-10-16", "2026-10-21"):
                with self.subTest(path=path, version=version):
                    body = {**good_body(path == STREAM), "anthropic_version": version}
                    self.assertEqual(wire.check_request(recorded(path, body), MODEL), [])

    def test_each_problem_is_named(self) -> None:
        """No version in the body, an x-api-key instead of a token, another model, another path."""
        no_version = {k: v for k, v in good_body().items() if k != "anthropic_version"}
        cases = [
            (no_version, WHOLE, HEADERS, "expected anthropic_version in the body"),
            (good_body(), WHOLE, {"x-api-key": "k"}, "not an x-api-key"),
            (good_body(), WHOLE, {"authorization": "Basic abc"}, "Authorization: Bearer"),
            (good_body(), f"{BASE}/claude-other:rawPredict", HEADERS, "expected model"),
            (good_body(), "/v1/messages", HEADERS, ":streamRawPredict"),
            ({**good_body(), "messages": []}, WHOLE, HEADERS, "messages"),
        ]
        for body, path, headers, expected in cases:
            with self.subTest(expected=expected):
                problems = wire.check_request(recorded(path, body, headers), MODEL)
                self.assertTrue(any(expected in p for p in problems), problems)

    def test_a_refused_history_is_claudes_400_with_a_vertex_request_id(self) -> None:
        reply = wire.history_error(["messages.1: first", "second"])
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.status, 400)
        self.assertEqual(
            reply.body["error"], {"type": "invalid_request_error", "message": "messages.1: first"}
        )
        self.assertRegex(reply.body["request_id"], r"^req_vrtx_011C")


if __name__ == "__main__":
    unittest.main()
