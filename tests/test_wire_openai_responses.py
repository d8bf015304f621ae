"""Tests of the OpenAI Responses wire: shapes, forms, streams and the request check."""

from __future__ import annotations

import json
import re
import unittest
from typing import Any, Dict, List, Tuple

from conformance.cases import scenario_reply
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.reference._decoders import SSEDecoder
from conformance.scenarios import SCENARIOS
from conformance.wires.openai_responses import CALL_ID
from conformance.wires.openai_responses import openai_responses_wire as wire

MODEL = "conformance-model"


def recorded(body: Any, path: str = "/v1/responses", method: str = "POST") -> RecordedRequest:
    raw = json.dumps(body).encode("utf-8") if body is not None else b""
    return RecordedRequest(method, path, "", {"authorization": "Bearer test"}, raw, "HTTP/1.1")


def good_body(stream: bool = False) -> Dict[str, Any]:
    body: Dict[str, Any] = {
        "model": MODEL,
        "instructions": FX.system,
        "input": [{"role": "user", "content": FX.question}],
        "tools": [
            {
                "type": "function",
                "name": FX.tool_name,
                "description": FX.tool_description,
                "parameters": dict(FX.tool_parameters),
            }
        ],
        "max_output_tokens": FX.max_tokens,
    }
    if stream:
        body["stream"] = True
    return body


def whole(scenario: str) -> JsonReply:
    reply = wire.reply(scenario, "chat", recorded(good_body()))
    assert isinstance(reply, JsonReply), reply
    return reply


def streamed(scenario: str) -> StreamReply:
    reply = wire.reply(scenario, "stream", recorded(good_body(stream=True)))
    assert isinstance(reply, StreamReply), reply
    return reply


def events(reply: StreamReply) -> List[Tuple[str, Dict[str, Any]]]:
    decoder = SSEDecoder()
    out = []
    for chunk in reply.chunks:
        for event in decoder.feed(chunk):
            out.append((event.event, json.loads(event.data)))
    return out


def joined(items: List[Tuple[str, Dict[str, Any]]], name: str, field: str = "delta") -> str:
    return "".join(data[field] for event, data in items if event == name)


class OpenAIResponsesWireTest(unittest.TestCase):
    def test_every_scenario_answers_in_both_forms(self) -> None:
        """Every scenario has a whole and a streamed answer; none is unsupported."""
        self.assertEqual(dict(wire.unsupported), {})
        for name, row in SCENARIOS.items():
            if SCENARIOS[name].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            if getattr(row, "optional", False) and name not in getattr(wire, "optional_scenarios", ()):
                continue  # an optional scenario only the wires that list it have
            for stream in (False, True):
                with self.subTest(scenario=name, stream=stream):
                    mode = "stream" if stream else "chat"
                    reply = scenario_reply(wire, name, mode, recorded(good_body(stream)))
                    self.assertIsNotNone(reply)

    def test_ids_look_like_openai_ids(self) -> None:
        """The call id is call_ plus 24 characters, and the same on every run."""
        self.assertRegex(CALL_ID, r"^call_[A-Za-z0-9]{24}$")
        self.assertEqual(wire.tool_call_id, CALL_ID)

    def test_whole_text_is_a_completed_message(self) -> None:
        """A text turn is a completed response with one output_text part and usage."""
        body = whole("text").body
        self.assertEqual(body["object"], "response")
        self.assertEqual(body["status"], "completed")
        self.assertIsNone(body["incomplete_details"])
        self.assertEqual(body["output"][0]["type"], "message")
        self.assertEqual(
            body["output"][0]["content"][0], {**body["output"][0]["content"][0], "text": FX.text}
        )
        usage = body["usage"]
        self.assertEqual(
            (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]),
            (FX.usage.input_tokens, FX.usage.output_tokens, FX.usage.total_tokens),
        )

    def test_whole_tool_call_is_a_function_call_item(self) -> None:
        """Both tool scenarios answer a completed function_call item with call_id and JSON arguments."""
        for name in ("tool-call", "tool-call-with-stop"):
            with self.subTest(scenario=name):
                body = whole(name).body
                self.assertEqual(body["status"], "completed")
                (item,) = body["output"]
                self.assertEqual(item["type"], "function_call")
                self.assertEqual(item["call_id"], CALL_ID)
                self.assertTrue(item["id"].startswith("fc_"))
                self.assertEqual(item["name"], FX.tool_name)
                self.assertEqual(json.loads(item["arguments"]), dict(FX.tool_arguments))

    def test_whole_truncated_call_is_incomplete(self) -> None:
        """A cut-off turn is incomplete for max_output_tokens, its call incomplete and unparseable."""
        body = whole("truncated-tool-call").body
        self.assertEqual(body["status"], "incomplete")
        self.assertEqual(body["incomplete_details"], {"reason": "max_output_tokens"})
        call = body["output"][-1]
        self.assertEqual(call["status"], "incomplete")
        with self.assertRaises(ValueError):
            json.loads(call["arguments"])

    def test_whole_content_filter_is_incomplete_with_a_refusal_part(self) -> None:
        """A filtered turn is incomplete for content_filter and carries a refusal part."""
        body = whole("content-filter").body
        self.assertEqual(body["status"], "incomplete")
        self.assertEqual(body["incomplete_details"], {"reason": "content_filter"})
        self.assertEqual(body["output"][0]["content"][0]["type"], "refusal")

    def test_errors_have_status_type_and_code(self) -> None:
        """Each failure answers OpenAI's error body with its status (quota is a 429 too)."""
        table = {
            "rate-limit": (429, "rate_limit_exceeded"),
            "quota": (429, "insufficient_quota"),
            "auth": (401, "invalid_api_key"),
            "overloaded": (503, None),
            "server-error": (500, None),
            "context-overflow": (400, "context_length_exceeded"),
        }
        for name, (status, code) in table.items():
            for stream in (False, True):
                if name == "context-overflow" and stream:
                    continue
                with self.subTest(scenario=name, stream=stream):
                    reply = wire.reply(name, "chat", recorded(good_body(stream)))
                    assert isinstance(reply, JsonReply)
                    self.assertEqual(reply.status, status)
                    self.assertEqual(reply.body["error"]["code"], code)
                    self.assertIn("x-request-id", dict(reply.headers or {}))
        # api.openai.com's 429 names its delay in the message only (openai/openai-node#1477).
        headers = dict(whole("rate-limit").headers or {})
        self.assertFalse({"retry-after", "retry-after-ms"} & set(headers))

    def test_a_streamed_quota_fails_in_stream_first(self) -> None:
        """A streamed request past its quota is a 200 failing in-stream first, as the one capture shows."""
        variants = [v.name for v in wire.variants("quota", "stream")]
        self.assertEqual(variants, ["in-stream", "insufficient-quota-429"])
        reply = wire.reply("quota", "stream", recorded(good_body(True)))
        assert isinstance(reply, StreamReply)
        data = b"".join(reply.chunks).decode()
        self.assertIn('"type":"insufficient_quota","code":"insufficient_quota"', data)
        self.assertIn("event: response.failed", data)

    def test_abort_hangs_in_both_forms(self) -> None:
        """Abort never answers whole, and streams some text then hangs."""
        self.assertIsInstance(wire.reply("abort", "chat", recorded(good_body())), HangReply)
        reply = streamed("abort")
        self.assertTrue(reply.hang)
        text = joined(events(reply), "response.output_text.delta")
        self.assertTrue(text and FX.partial_text.startswith(text))

    def test_stream_events_are_named_and_numbered(self) -> None:
        """Every event's name equals its type and sequence numbers count up from 0."""
        for name in SCENARIOS:
            reply = wire.reply(name, "stream", recorded(good_body(stream=True)))
            if not isinstance(reply, StreamReply):
                continue
            with self.subTest(scenario=name):
                items = events(reply)
                self.assertEqual(items[0][0], "response.created")
                for index, (event, data) in enumerate(items):
                    self.assertEqual(event, data["type"])
                    self.assertEqual(data["sequence_number"], index)
                self.assertNotIn(b"[DONE]", b"".join(reply.chunks))

    def test_stream_text_deltas_join_to_the_text(self) -> None:
        """The output_text deltas join to the fixture text and response.completed carries usage."""
        items = events(streamed("text"))
        self.assertEqual(joined(items, "response.output_text.delta"), FX.text)
        self.assertEqual(items[-1][0], "response.completed")
        self.assertEqual(items[-1][1]["response"]["usage"]["total_tokens"], FX.usage.total_tokens)

    def test_stream_tool_call_arguments_arrive_in_pieces(self) -> None:
        """Argument deltas join to the arguments that .done and the completed item repeat."""
        for name in ("tool-call", "tool-call-with-stop"):
            with self.subTest(scenario=name):
                items = events(streamed(name))
                names = [event for event, _ in items]
                self.assertGreater(names.count("response.function_call_arguments.delta"), 1)
                arguments = joined(items, "response.function_call_arguments.delta")
                self.assertEqual(json.loads(arguments), dict(FX.tool_arguments))
                added = next(d for e, d in items if e == "response.output_item.added")
                self.assertEqual(added["item"]["call_id"], CALL_ID)
                self.assertEqual(items[-1][0], "response.completed")
                self.assertEqual(items[-1][1]["response"]["output"][0]["arguments"], arguments)

    def test_stream_truncated_call_ends_incomplete(self) -> None:
        """A cut-off stream ends with response.incomplete for max_output_tokens."""
        items = events(streamed("truncated-tool-call"))
        self.assertEqual(items[-1][0], "response.incomplete")
        self.assertEqual(items[-1][1]["response"]["incomplete_details"], {"reason": "max_output_tokens"})
        with self.assertRaises(ValueError):
            json.loads(joined(items, "response.function_call_arguments.delta"))

    def test_stream_content_filter_streams_a_refusal(self) -> None:
        """A filtered stream sends refusal deltas and ends with response.incomplete."""
        items = events(streamed("content-filter"))
        self.assertTrue(joined(items, "response.refusal.delta"))
        self.assertEqual(items[-1][0], "response.incomplete")
        self.assertEqual(items[-1][1]["response"]["incomplete_details"], {"reason": "content_filter"})

    def test_stream_error_is_a_nested_error_event_then_failed(self) -> None:
        """The partial text comes first, then a nested overloaded error event and response.failed."""
        items = events(streamed("stream-error"))
        self.assertEqual(joined(items, "response.output_text.delta"), FX.partial_text)
        self.assertEqual([e for e, _ in items[-2:]], ["error", "response.failed"])
        self.assertEqual(items[-2][1]["error"]["code"], "server_is_overloaded")
        self.assertEqual(items[-1][1]["response"]["status"], "failed")

    def test_stream_context_overflow_fails_after_the_200(self) -> None:
        """A streamed request over the window is a 200 whose stream fails with context_length_exceeded."""
        reply = streamed("context-overflow")
        self.assertEqual(reply.status, 200)
        items = events(reply)
        self.assertEqual(
            [e for e, _ in items], ["response.created", "response.in_progress", "error", "response.failed"]
        )
        self.assertEqual(items[2][1]["error"]["code"], "context_length_exceeded")

    def test_stream_chunks_cut_inside_a_character(self) -> None:
        """Some chunk of the text stream ends inside a multi-byte UTF-8 character."""
        cut = False
        for chunk in streamed("text").chunks:
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError:
                cut = True
        self.assertTrue(cut)

    def test_stream_decodes_the_same_byte_by_byte(self) -> None:
        """Fed one byte at a time the stream decodes to the same events."""
        reply = streamed("tool-call")
        decoder = SSEDecoder()
        data = b"".join(reply.chunks)
        one_by_one = [e for i in range(len(data)) for e in decoder.feed(data[i : i + 1])]
        self.assertEqual([(e.event, json.loads(e.data)) for e in one_by_one], events(reply))

    def test_is_generation_and_wants_stream(self) -> None:
        """Only POST .../responses is the generation call; the stream flag picks the form."""
        self.assertTrue(wire.is_generation(recorded(good_body())))
        self.assertFalse(wire.is_generation(recorded(None, "/v1/models/x", "GET")))
        self.assertTrue(wire.wants_stream(recorded(good_body(stream=True))))
        self.assertFalse(wire.wants_stream(recorded(good_body())))

    def test_check_request_accepts_the_shapes_openai_takes(self) -> None:
        """A string input, a message list and input_text parts all pass the check."""
        bodies = [
            good_body(),
            {**good_body(), "input": FX.question},
            {
                **good_body(),
                "input": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": FX.question}],
                    }
                ],
            },
        ]
        for body in bodies:
            with self.subTest(input=body["input"]):
                self.assertEqual(wire.check_request(recorded(body), MODEL), [])

    def test_check_request_names_each_problem(self) -> None:
        """A wrong path, model, question or tool shape each give a sentence that names it."""
        chat_tool = [{"type": "function", "function": {"name": FX.tool_name, "parameters": {}}}]
        table = [
            (recorded(good_body(), "/v1/chat/completions"), "/v1/responses"),
            (recorded({**good_body(), "model": "other"}), "expected model"),
            (recorded({**good_body(), "input": [{"role": "user", "content": "hi"}]}), "user input message"),
            (recorded({**good_body(), "tools": chat_tool}), "Chat Completions shape"),
            (
                recorded({**good_body(), "tools": [{**good_body()["tools"][0], "parameters": {}}]}),
                "parameters",
            ),
            (recorded(None), "JSON body"),
        ]
        for request, needle in table:
            with self.subTest(needle=needle):
                problems = wire.check_request(request, MODEL)
                self.assertEqual(len(problems), 1, problems)
                self.assertTrue(re.search(re.escape(needle), problems[0]), problems)


if __name__ == "__main__":
    unittest.main()
