"""Tests of the Cohere Chat v2 wire: shapes, forms, streams, errors and the request check."""

from __future__ import annotations

import json
import unittest
from typing import Any, Dict, List, Mapping, Optional, Tuple

from conformance.cases import scenario_reply
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.reference._decoders import SSEDecoder
from conformance.scenarios import SCENARIOS
from conformance.wires.cohere import MESSAGE_ID, TOOL_CALL_ID
from conformance.wires.cohere import cohere_wire as wire
from conformance.wires.cohere._replies import BILLED_INPUT_TOKENS, TOOL_PLAN, message_id

MODEL = "conformance-model"
HEADERS = {"authorization": "Bearer test", "content-type": "application/json"}
UUID4 = r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"


def recorded(
    body: Any, path: str = "/v2/chat", headers: Optional[Mapping[str, str]] = None
) -> RecordedRequest:
    raw = json.dumps(body).encode("utf-8") if body is not None else b""
    return RecordedRequest("POST", path, "", dict(HEADERS if headers is None else headers), raw, "HTTP/1.1")


def good_body(stream: bool = False) -> Dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": FX.system}, {"role": "user", "content": FX.question}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": FX.tool_name,
                    "description": FX.tool_description,
                    "parameters": dict(FX.tool_parameters),
                },
            }
        ],
        "max_tokens": FX.max_tokens,
        "stream": stream,
    }


def whole(scenario: str, variant: str = "") -> JsonReply:
    reply = wire.reply(scenario, "chat", recorded(good_body()), variant)
    assert isinstance(reply, JsonReply), reply
    return reply


def streamed(scenario: str, variant: str = "") -> StreamReply:
    reply = wire.reply(scenario, "stream", recorded(good_body(stream=True)), variant)
    assert isinstance(reply, StreamReply), reply
    return reply


def events(reply: StreamReply) -> List[Tuple[str, Any]]:
    """Each event's ``event:`` name and its data (JSON, or ``[DONE]`` as it came)."""
    decoder = SSEDecoder()
    out = []
    for chunk in reply.chunks:
        for event in decoder.feed(chunk):
            out.append((event.event, event.data if event.data == "[DONE]" else json.loads(event.data)))
    return out


def joined(items: List[Tuple[str, Any]], kind: str, field: str) -> str:
    """The text a kind of delta carries, joined: ``content-delta`` text, ``tool-plan-delta`` plan..."""
    parts = []
    for name, data in items:
        if name != kind:
            continue
        message = data["delta"]["message"]
        if kind == "content-delta":
            parts.append(message["content"].get(field, ""))
        elif kind == "tool-plan-delta":
            parts.append(message["tool_plan"])
        else:
            parts.append(message["tool_calls"]["function"]["arguments"])
    return "".join(parts)


def usage_of(variant: str, stream: bool) -> Dict[str, Any]:
    """The usage a text reply reports in ``variant``, whole or streamed."""
    if stream:
        return dict(end_of(events(streamed("text", variant)))["usage"])
    return dict(whole("text", variant).body["usage"])


def end_of(items: List[Tuple[str, Any]]) -> Dict[str, Any]:
    delta: Dict[str, Any] = next(d for e, d in items if e == "message-end")["delta"]
    return delta


class ShapeTest(unittest.TestCase):
    def test_every_scenario_answers_in_both_forms_but_those_cohere_lacks(self) -> None:
        """Every scenario but the safety stop and a tool turn ending COMPLETE has both answers."""
        self.assertEqual(sorted(wire.unsupported), ["content-filter", "tool-call-with-stop"])
        for name, row in SCENARIOS.items():
            if SCENARIOS[name].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            if row.optional:
                self.assertIn("nothing to corrupt", str(wire.absent(name)))
                continue
            for stream in (False, True):
                mode = "stream" if stream else "chat"
                if mode not in row.modes:
                    continue
                with self.subTest(scenario=name, stream=stream):
                    reply = scenario_reply(wire, name, mode, recorded(good_body(stream)))
                    self.assertEqual(reply is None, wire.absent_in(name, mode) is not None)
                    self.assertEqual(reply is None, name in wire.unsupported)

    def test_ids_look_like_cohere_ids(self) -> None:
        """A call id is the tool's name and twelve lower-case characters; a reply id a UUID4."""
        self.assertRegex(TOOL_CALL_ID, r"^get_weather_[a-z0-9]{12}$")
        self.assertEqual(wire.tool_call_id, TOOL_CALL_ID)
        scripted = wire.scripted_call_id
        self.assertRegex(scripted(FX.tool_name, "cohere/tool-result"), r"^get_weather_[a-z0-9]{12}$")
        self.assertNotEqual(scripted(FX.tool_name, "a"), scripted(FX.tool_name, "b"))
        self.assertRegex(MESSAGE_ID, UUID4)
        self.assertEqual(message_id("x"), message_id("x"))
        self.assertEqual(len({message_id(str(n)) for n in range(50)}), 50)

    def test_whole_finish_reasons(self) -> None:
        """Each whole turn carries Cohere's own finish_reason and usage."""
        for name, reason in (
            ("text", "COMPLETE"),
            ("tool-call", "TOOL_CALL"),
            ("truncated-tool-call", "MAX_TOKENS"),
        ):
            with self.subTest(scenario=name):
                body = whole(name).body
                self.assertEqual(list(body), ["id", "message", "finish_reason", "usage"])
                self.assertEqual(body["finish_reason"], reason)
                self.assertEqual(body["message"]["role"], "assistant")
                tokens = body["usage"]["tokens"]
                self.assertEqual((tokens["input_tokens"], tokens["output_tokens"]), (31, 17))
                self.assertEqual(body["usage"]["billed_units"]["input_tokens"], BILLED_INPUT_TOKENS)

    def test_text_variants_differ_in_cached_tokens_only(self) -> None:
        """The newer usage counts cached_tokens beside billed_units and tokens; the older has none."""
        self.assertEqual(
            [v.name for v in wire.variants("text", "chat")], ["cached-tokens", "billed-and-tokens"]
        )
        for stream in (False, True):
            with self.subTest(stream=stream):
                newer = usage_of("cached-tokens", stream)
                older = usage_of("billed-and-tokens", stream)
                self.assertIn("cached_tokens", newer)
                self.assertEqual(dict(older, cached_tokens=newer["cached_tokens"]), newer)

    def test_whole_text_and_tool_turn(self) -> None:
        """Text is a text item; a tool turn has a tool_plan and tool_calls whose arguments are JSON text."""
        self.assertEqual(whole("text").body["message"]["content"], [{"type": "text", "text": FX.text}])
        message = whole("tool-call").body["message"]
        self.assertNotIn("content", message)
        self.assertEqual(message["tool_plan"], TOOL_PLAN)
        (call,) = message["tool_calls"]
        self.assertEqual(
            (call["id"], call["type"], call["function"]["name"]), (TOOL_CALL_ID, "function", FX.tool_name)
        )
        self.assertIsInstance(call["function"]["arguments"], str)
        self.assertEqual(json.loads(call["function"]["arguments"]), dict(FX.tool_arguments))

    def test_answers_carry_a_trial_keys_budget_and_failures_none(self) -> None:
        """A whole or streamed answer says the trial key's limits, as the 2024-11 cassettes do; a
        failure, which no capture shows with them, does not."""
        budget = {
            "x-endpoint-monthly-call-limit": "1000",
            "x-trial-endpoint-call-limit": "40",
            "x-trial-endpoint-call-remaining": "39",
        }
        for reply in (whole("text"), whole("tool-call"), streamed("text"), streamed("tool-call")):
            with self.subTest(reply=type(reply).__name__):
                headers = dict(reply.headers or {})
                self.assertEqual({k: headers.get(k) for k in budget}, budget)
                self.assertEqual(headers.get("pragma"), "no-cache")
        failure = wire.reply("rate-limit", "chat", recorded(good_body()), "trial-key-429")
        assert isinstance(failure, JsonReply)
        self.assertFalse(set(budget) & set(failure.headers or {}))

    def test_whole_truncated_call_does_not_parse(self) -> None:
        """A MAX_TOKENS tool turn holds its plan and a call whose arguments stop halfway."""
        message = whole("truncated-tool-call").body["message"]
        self.assertEqual(message["tool_plan"], FX.preamble)
        with self.assertRaises(ValueError):
            json.loads(message["tool_calls"][0]["function"]["arguments"])
        self.assertEqual(wire.texts["truncated-tool-call"], "")

    def test_abort_hangs_in_both_forms(self) -> None:
        """Abort never answers whole, and streams some text then hangs."""
        self.assertIsInstance(wire.reply("abort", "chat", recorded(good_body())), HangReply)
        reply = streamed("abort")
        self.assertTrue(reply.hang)
        text = joined(events(reply), "content-delta", "text")
        self.assertTrue(text and FX.partial_text.startswith(text))


class ErrorTest(unittest.TestCase):
    def test_errors_are_a_status_and_a_message(self) -> None:
        """Each failure is a status and {"message"}, an id beside it in some, in both forms, with no delay."""
        table = {
            ("rate-limit", "trial-key-429"): 429,
            ("quota", "billing-402"): 402,
            ("quota", "trial-monthly-429"): 429,
            ("auth", "invalid-token-401"): 401,
            ("overloaded", "service-unavailable-503"): 503,
            ("server-error", "internal-500"): 500,
            ("context-overflow", "too-many-tokens-400"): 400,
        }
        listed = {(s, v.name) for s in {s for s, _ in table} for v in wire.variants(s, "chat")}
        self.assertEqual(listed, set(table))
        for (scenario, variant), status in table.items():
            for stream in (False, True):
                with self.subTest(scenario=scenario, variant=variant, stream=stream):
                    reply = wire.reply(scenario, "chat", recorded(good_body(stream)), variant)
                    assert isinstance(reply, JsonReply)
                    self.assertEqual(reply.status, status)
                    self.assertIn(set(reply.body), ({"message"}, {"id", "message"}))
                    self.assertIsInstance(reply.body["message"], str)
                    headers = {k.lower() for k in (reply.headers or {})}
                    self.assertIn("x-debug-trace-id", headers)
                    self.assertNotIn("retry-after", headers)
                    self.assertIsNone(wire.retry_after_sent(reply))
        self.assertIsNone(wire.rate_limit_retry_after)
        self.assertTrue(whole("context-overflow").body["message"].startswith("too many tokens"))

    def test_shapes_only_a_message_tells_apart_may_read_as_either_kind(self) -> None:
        """The monthly Trial 429 may be quota or rate_limit, the 400 about too many tokens context_overflow
        or a bad request; the 402 is a quota."""
        billing, monthly = wire.variants("quota", "chat")
        self.assertEqual(billing.accepted_kinds("quota"), ("quota",))
        self.assertEqual(monthly.accepted_kinds("quota"), ("quota", "rate_limit"))
        (overflow,) = wire.variants("context-overflow", "chat")
        self.assertEqual(overflow.accepted_kinds("context_overflow"), ("context_overflow", "invalid_request"))

    def test_a_failed_generation_ends_with_message_end(self) -> None:
        """The partial text, then message-end saying ERROR (with delta.error) or TIMEOUT, then [DONE]."""
        for variant, reason in (("finish-error", "ERROR"), ("finish-timeout", "TIMEOUT")):
            with self.subTest(variant=variant):
                items = events(streamed("stream-error", variant))
                self.assertEqual(joined(items, "content-delta", "text"), FX.partial_text)
                self.assertEqual(items[-2][0], "message-end")
                self.assertEqual(items[-1], ("message", "[DONE]"))
                delta = end_of(items)
                self.assertEqual(delta["finish_reason"], reason)
                self.assertEqual("error" in delta, reason == "ERROR")
                self.assertNotIn("content-end", [e for e, _ in items])
                self.assertEqual(wire.variant("stream-error", "stream", variant).error_kind, "server_error")
        self.assertEqual(whole("stream-error").status, 500)


class StreamTest(unittest.TestCase):
    def test_events_are_named_after_their_type_and_end_with_done(self) -> None:
        """Every event's event: line equals data.type; message-start comes first with the id, message-end
        last, then a bare data: [DONE]."""
        for name in SCENARIOS:
            reply = wire.reply(name, "stream", recorded(good_body(stream=True)))
            if not isinstance(reply, StreamReply) or reply.hang or reply.end != "complete":
                continue  # a stream that never ends, or one cut short on purpose
            with self.subTest(scenario=name):
                items = events(reply)
                self.assertEqual(items[0][0], "message-start")
                self.assertEqual(items[0][1]["id"], MESSAGE_ID)
                self.assertEqual(list(items[0][1]), ["id", "type", "delta"])
                self.assertEqual(items[-1], ("message", "[DONE]"))
                self.assertEqual(items[-2][0], "message-end")
                for event, data in items[:-1]:
                    self.assertEqual(event, data["type"])
                self.assertEqual(reply.content_type, "text/event-stream")

    def test_text_deltas_join_inside_one_content_item(self) -> None:
        """content-start, the text as content-delta pieces, content-end, then message-end COMPLETE."""
        items = events(streamed("text"))
        names = [e for e, _ in items]
        self.assertEqual(names.count("content-start"), 1)
        self.assertEqual(names.count("content-end"), 1)
        self.assertEqual(joined(items, "content-delta", "text"), FX.text)
        self.assertEqual(end_of(items)["finish_reason"], "COMPLETE")
        self.assertEqual(end_of(items)["usage"]["tokens"], {"input_tokens": 31, "output_tokens": 17})

    def test_a_tool_turn_streams_its_plan_then_its_call(self) -> None:
        """tool-plan-delta pieces, tool-call-start with empty arguments, the fragments, tool-call-end."""
        items = events(streamed("tool-call"))
        names = [e for e, _ in items]
        self.assertNotIn("content-start", names)
        self.assertEqual(joined(items, "tool-plan-delta", ""), TOOL_PLAN)
        self.assertLess(names.index("tool-plan-delta"), names.index("tool-call-start"))
        start = next(d for e, d in items if e == "tool-call-start")
        self.assertEqual(start["index"], 0)
        self.assertEqual(start["delta"]["message"]["tool_calls"]["id"], TOOL_CALL_ID)
        self.assertEqual(start["delta"]["message"]["tool_calls"]["function"]["arguments"], "")
        self.assertEqual(json.loads(joined(items, "tool-call-delta", "")), dict(FX.tool_arguments))
        self.assertEqual(names.index("tool-call-end"), names.index("message-end") - 1)
        self.assertEqual(end_of(items)["finish_reason"], "TOOL_CALL")

    def test_a_truncated_call_is_left_open(self) -> None:
        """A MAX_TOKENS turn's call has no tool-call-end and its fragments do not parse."""
        items = events(streamed("truncated-tool-call"))
        self.assertNotIn("tool-call-end", [e for e, _ in items])
        self.assertEqual(joined(items, "tool-plan-delta", ""), FX.preamble)
        with self.assertRaises(ValueError):
            json.loads(joined(items, "tool-call-delta", ""))
        self.assertEqual(end_of(items)["finish_reason"], "MAX_TOKENS")

    def test_reasoning_is_a_thinking_item_before_the_text(self) -> None:
        """The reasoning case streams a thinking item at index 0, the text at index 1."""
        reply = scenario_reply(wire, "reasoning", "stream", recorded(good_body(stream=True)))
        assert isinstance(reply, StreamReply)
        items = events(reply)
        starts = [d for e, d in items if e == "content-start"]
        self.assertEqual(
            [(s["index"], s["delta"]["message"]["content"]["type"]) for s in starts],
            [(0, "thinking"), (1, "text")],
        )
        self.assertEqual(joined(items, "content-delta", "thinking"), FX.thinking)
        self.assertEqual(joined(items, "content-delta", "text"), FX.text)

    def test_chunks_cut_inside_a_character(self) -> None:
        """Some chunk of the text stream ends inside a multi-byte UTF-8 character."""
        cut = False
        for chunk in streamed("text").chunks:
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError:
                cut = True
        self.assertTrue(cut)

    def test_decodes_the_same_byte_by_byte(self) -> None:
        """Fed one byte at a time the stream decodes to the same events."""
        data = b"".join(streamed("tool-call").chunks)
        at_once = [(e.event, e.data) for e in SSEDecoder().feed(data)]
        decoder = SSEDecoder()
        one_by_one = [(e.event, e.data) for i in range(len(data)) for e in decoder.feed(data[i : i + 1])]
        self.assertEqual(one_by_one, at_once)
        self.assertGreater(len(at_once), 10)


class RequestTest(unittest.TestCase):
    def test_aux_reply_is_a_404_in_cohere_s_shape(self) -> None:
        """A path other than /v2/chat gets a 404 {"message"} naming what is scripted."""
        missing = wire.aux_reply(recorded({}, "/v1/models"))
        assert isinstance(missing, JsonReply)
        self.assertEqual(missing.status, 404)
        self.assertIn("POST /v2/chat", missing.body["message"])
        self.assertFalse(wire.is_generation(recorded({}, "/v1/models")))
        self.assertTrue(wire.is_generation(recorded({}, "/v2/chat")))

    def test_check_request_accepts_the_v2_shapes(self) -> None:
        """String or text-item content, any Bearer key, and a body with or without stream pass."""
        self.assertEqual(wire.check_request(recorded(good_body()), MODEL), [])
        items = {
            **good_body(),
            "messages": [{"role": "user", "content": [{"type": "text", "text": FX.question}]}],
        }
        self.assertEqual(
            wire.check_request(recorded(items, headers={"authorization": "bearer k"}), MODEL), []
        )

    def test_check_request_names_each_problem(self) -> None:
        """No key, another path or model, v1's body or tools, a missing question each give a sentence."""
        v1_tools = [
            {"name": FX.tool_name, "parameter_definitions": {"city": {"type": "str", "required": True}}}
        ]
        v1_body = {"model": MODEL, "message": FX.question, "chat_history": [], "tools": good_body()["tools"]}
        table = [
            (recorded(good_body(), headers={"content-type": "application/json"}), "Authorization: Bearer"),
            (recorded(good_body(), "/v1/chat"), "/v2/chat"),
            (recorded({**good_body(), "model": "other"}), "expected model"),
            (recorded(v1_body), "v1's message, chat_history"),
            (recorded({**good_body(), "messages": [{"role": "user", "content": "hi"}]}), "user message"),
            (recorded({**good_body(), "tools": v1_tools}), "parameter_definitions"),
        ]
        for request, needle in table:
            with self.subTest(needle=needle):
                problems = wire.check_request(request, MODEL)
                self.assertEqual(len(problems), 1, problems)
                self.assertIn(needle, problems[0])


if __name__ == "__main__":
    unittest.main()
