"""Tests of the Anthropic Messages wire: shapes, forms, streams and the request check."""

from __future__ import annotations

import json
import string
import unittest
from typing import Any, Dict, List, Mapping, Optional, Tuple

from conformance.cases import scenario_reply
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.reference._decoders import SSEDecoder
from conformance.scenarios import SCENARIOS
from conformance.wires.anthropic import MESSAGE_ID, TOOL_USE_ID, request_id
from conformance.wires.anthropic import anthropic_wire as wire

MODEL = "conformance-model"
HEADERS = {"x-api-key": "test", "anthropic-version": "2023-06-01", "content-type": "application/json"}


def recorded(
    body: Any, path: str = "/v1/messages", headers: Optional[Mapping[str, str]] = None
) -> RecordedRequest:
    raw = json.dumps(body).encode("utf-8") if body is not None else b""
    return RecordedRequest("POST", path, "", dict(HEADERS if headers is None else headers), raw, "HTTP/1.1")


def good_body(stream: bool = False) -> Dict[str, Any]:
    body: Dict[str, Any] = {
        "model": MODEL,
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
    if stream:
        body["stream"] = True
    return body


def whole(scenario: str) -> JsonReply:
    reply = wire.reply(scenario, "chat", recorded(good_body()))
    assert isinstance(reply, JsonReply), reply
    return reply


def streamed(scenario: str, variant: str = "") -> StreamReply:
    reply = wire.reply(scenario, "stream", recorded(good_body(stream=True)), variant)
    assert isinstance(reply, StreamReply), reply
    return reply


def events(reply: StreamReply) -> List[Tuple[str, Dict[str, Any]]]:
    decoder = SSEDecoder()
    out = []
    for chunk in reply.chunks:
        for event in decoder.feed(chunk):
            out.append((event.event, json.loads(event.data)))
    return out


def deltas(items: List[Tuple[str, Dict[str, Any]]], kind: str) -> str:
    field = "text" if kind == "text_delta" else "partial_json"
    return "".join(
        d["delta"][field] for e, d in items if e == "content_block_delta" and d["delta"]["type"] == kind
    )


class AnthropicWireTest(unittest.TestCase):
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
                    # A whole reply carries input as an object: no broken text in it.
                    absent = wire.absent_in(name, mode) is not None
                    self.assertEqual(reply is None, absent)

    def test_ids_look_like_anthropic_ids(self) -> None:
        """Ids are toolu_01 and msg_01 plus 22 characters, the same on every run."""
        self.assertRegex(TOOL_USE_ID, r"^toolu_01[A-Za-z0-9]{22}$")
        self.assertRegex(MESSAGE_ID, r"^msg_01[A-Za-z0-9]{22}$")
        self.assertEqual(wire.tool_call_id, TOOL_USE_ID)

    def test_request_ids_are_fresh_and_draw_on_all_of_base62(self) -> None:
        """req_011C plus 20 base62 characters, new each time, every character in use."""
        ids = [request_id() for _ in range(400)]
        for rid in ids[:5]:
            self.assertRegex(rid, r"^req_011C[A-Za-z0-9]{20}$")
        self.assertEqual(len(set(ids)), len(ids))
        drawn = "".join(rid[len("req_011C") :] for rid in ids)
        # 8000 draws from 62 characters: each is expected about 129 times.
        self.assertEqual(set(drawn), set(string.ascii_letters + string.digits))

    def test_whole_stop_reasons(self) -> None:
        """Each whole turn carries Anthropic's own stop_reason."""
        table = {
            "text": "end_turn",
            "tool-call": "tool_use",
            "tool-call-with-stop": "end_turn",
            "truncated-tool-call": "max_tokens",
            "content-filter": "refusal",
        }
        for name, stop in table.items():
            with self.subTest(scenario=name):
                body = whole(name).body
                self.assertEqual(body["type"], "message")
                self.assertEqual(body["stop_reason"], stop)
                self.assertEqual(body["usage"]["input_tokens"], FX.usage.input_tokens)
                # A refusal counts the tokens of the text it stopped after.
                output = 7 if name == "content-filter" else FX.usage.output_tokens
                self.assertEqual(body["usage"]["output_tokens"], output)

    def test_a_refusal_counts_the_tokens_of_the_text_it_streamed(self) -> None:
        """The refusal streams the partial text and counts its 7 tokens, not the whole answer's 17;
        the case holds the backend to that count."""
        items = events(streamed("content-filter"))
        self.assertEqual(deltas(items, "text_delta"), FX.partial_text)
        delta = next(d for e, d in items if e == "message_delta")
        self.assertEqual(delta["usage"]["output_tokens"], 7)
        usage = wire.reported_usage("content-filter", "named-category")
        self.assertEqual((usage.output_tokens, usage.total_tokens), (7, FX.usage.input_tokens + 7))
        self.assertEqual(wire.reported_usage("text", ""), FX.usage)

    def test_whole_text_and_tool_use_blocks(self) -> None:
        """Text is a text block; a call is a tool_use block whose input is an object."""
        self.assertEqual(whole("text").body["content"], [{"type": "text", "text": FX.text}])
        for name in ("tool-call", "tool-call-with-stop"):
            with self.subTest(scenario=name):
                (block,) = whole(name).body["content"]
                self.assertEqual(
                    block,
                    {
                        "type": "tool_use",
                        "id": TOOL_USE_ID,
                        "name": FX.tool_name,
                        "input": dict(FX.tool_arguments),
                    },
                )

    def test_whole_refusal_has_stop_details(self) -> None:
        """A refusal carries stop_details of type refusal."""
        self.assertEqual(whole("content-filter").body["stop_details"]["type"], "refusal")

    def test_errors_have_status_and_type(self) -> None:
        """Each failure answers Anthropic's error body with its status and request-id."""
        table = {
            "rate-limit": (429, "rate_limit_error"),
            "quota": (400, "invalid_request_error"),
            "auth": (401, "authentication_error"),
            "overloaded": (529, "overloaded_error"),
            "server-error": (500, "api_error"),
            "context-overflow": (400, "invalid_request_error"),
        }
        for name, (status, type_) in table.items():
            for stream in (False, True):
                with self.subTest(scenario=name, stream=stream):
                    reply = wire.reply(name, "chat", recorded(good_body(stream)))
                    assert isinstance(reply, JsonReply)
                    self.assertEqual(reply.status, status)
                    self.assertEqual(reply.body["type"], "error")
                    self.assertEqual(reply.body["error"]["type"], type_)
                    self.assertIn("request-id", dict(reply.headers or {}))
        self.assertEqual(float(dict(whole("rate-limit").headers or {})["retry-after"]), FX.retry_after)
        quota = wire.reply("quota", "chat", recorded(good_body()), "tier-cap-429")
        assert isinstance(quota, JsonReply)
        self.assertEqual(quota.status, 429)
        self.assertEqual(quota.body["error"]["details"], {"error_code": "enforced_spend_limit_reached"})
        self.assertNotIn("retry-after", dict(quota.headers or {}))

    def test_quota_variants(self) -> None:
        """Quota comes as the credit-balance or spend-limit 400, the tier cap's or a subscription's
        429, or a 402; each says which kinds its bytes allow."""
        table = {
            "credit-balance-400": (400, "invalid_request_error", "credit balance is too low", None),
            "spend-limit-400": (400, "invalid_request_error", "specified API usage limits", None),
            "tier-cap-429": (429, "rate_limit_error", "monthly API usage threshold", None),
            "subscription-spend-429": (429, "rate_limit_error", "monthly spend limit", "900"),
            "billing-402": (402, "billing_error", "billing", None),
        }
        kinds = {
            "credit-balance-400": ("quota", "invalid_request"),
            "spend-limit-400": ("quota", "invalid_request"),
            "tier-cap-429": ("quota",),
            "subscription-spend-429": ("quota", "rate_limit"),
            "billing-402": ("quota",),
        }
        self.assertEqual([v.name for v in wire.variants("quota", "chat")], list(table))
        for name, (status, type_, words, delay) in table.items():
            with self.subTest(variant=name):
                reply = wire.reply("quota", "chat", recorded(good_body()), name)
                assert isinstance(reply, JsonReply)
                self.assertEqual((reply.status, reply.body["error"]["type"]), (status, type_))
                self.assertIn(words, reply.body["error"]["message"])
                self.assertEqual(dict(reply.headers or {}).get("retry-after"), delay)
                self.assertEqual(wire.variant("quota", "chat", name).accepted_kinds("quota"), kinds[name])
                # Only the tier cap carries a machine-readable code.
                self.assertEqual("details" in reply.body["error"], name == "tier-cap-429")

    def test_pause_turn_leaves_a_server_tool_call_unanswered(self) -> None:
        """The pause-turn variant ends after the text with an unanswered server_tool_use block, both forms."""
        whole_reply = wire.reply("text", "chat", recorded(good_body()), "pause-turn")
        assert isinstance(whole_reply, JsonReply)
        body = whole_reply.body
        self.assertEqual(body["stop_reason"], "pause_turn")
        self.assertEqual([b["type"] for b in body["content"]], ["text", "server_tool_use"])
        self.assertTrue(body["content"][1]["id"].startswith("srvtoolu_01"))
        self.assertEqual(body["content"][0]["text"], FX.text)
        self.assertEqual(body["usage"]["server_tool_use"], {"web_search_requests": 1})
        stream_reply = wire.reply("text", "stream", recorded(good_body(stream=True)), "pause-turn")
        assert isinstance(stream_reply, StreamReply)
        items = events(stream_reply)
        self.assertEqual(deltas(items, "text_delta"), FX.text)
        starts = [d["content_block"]["type"] for e, d in items if e == "content_block_start"]
        self.assertEqual(starts, ["text", "server_tool_use"])
        self.assertEqual(json.loads(deltas(items, "input_json_delta")), {"query": "Paris weather today"})
        delta = next(d for e, d in items if e == "message_delta")
        paused = {"stop_reason": "pause_turn", "stop_sequence": None, "stop_details": None}
        self.assertEqual(delta["delta"], paused)
        self.assertEqual(delta["usage"]["output_tokens"], FX.usage.output_tokens)
        self.assertEqual(items[-1][0], "message_stop")
        self.assertEqual(wire.variants("text", "chat")[0].name, "end-turn")

    def test_a_paused_turn_reads_as_stop_or_as_length(self) -> None:
        """A paused turn called "length" passes in both modes, as one called "stop" does."""
        from conformance.cases import BackendConformanceTarget, backend_conformance_cases
        from conformance.reference.anthropic import AnthropicBackend

        class PausedIsLength(AnthropicBackend):
            def finish_reason(self, stop_reason: Optional[str], calls: List[Any]) -> str:
                paused = stop_reason == "pause_turn"
                return "length" if paused else super().finish_reason(stop_reason, calls)

        for backend in (AnthropicBackend, PausedIsLength):
            target = BackendConformanceTarget(
                name=f"pause_turn read by {backend.__name__}",
                wire=wire,
                create_backend=backend,
                skip={
                    f"{case}:{v.name}": "only the paused turn is asked about"
                    for case in ("text/chat", "text/stream")
                    for v in wire.variants(*case.split("/"))
                    if v.name != "pause-turn"
                },
            )
            for case in backend_conformance_cases(target):
                if case.name in ("text/chat", "text/stream"):
                    with self.subTest(backend=backend.__name__, case=case.name):
                        case.run()

    def test_refusal_names_its_category_or_none(self) -> None:
        """A named-category refusal carries the docs' category and explanation; uncategorized, both null."""
        for name, expected in (
            ("named-category", ("cyber", "This request was declined because it could enable cyber harm.")),
            ("uncategorized", (None, None)),
        ):
            for mode in ("chat", "stream"):
                with self.subTest(variant=name, mode=mode):
                    reply = wire.reply("content-filter", mode, recorded(good_body(mode == "stream")), name)
                    if isinstance(reply, JsonReply):
                        details = reply.body["stop_details"]
                    else:
                        assert isinstance(reply, StreamReply)
                        delta = next(d for e, d in events(reply) if e == "message_delta")
                        details = delta["delta"]["stop_details"]
                    self.assertEqual(details["type"], "refusal")
                    self.assertEqual((details["category"], details["explanation"]), expected)

    def test_abort_hangs_in_both_forms(self) -> None:
        """Abort never answers whole, and streams some text then hangs."""
        self.assertIsInstance(wire.reply("abort", "chat", recorded(good_body())), HangReply)
        reply = streamed("abort")
        self.assertTrue(reply.hang)
        text = deltas(events(reply), "text_delta")
        self.assertTrue(text and FX.partial_text.startswith(text))

    def test_stream_events_are_named_after_their_type(self) -> None:
        """Every event has an event: line equal to data.type; streams start with message_start, and
        ping comes after the first content_block_start as in real streams."""
        for name in SCENARIOS:
            reply = wire.reply(name, "stream", recorded(good_body(stream=True)))
            if not isinstance(reply, StreamReply):
                continue
            with self.subTest(scenario=name):
                items = events(reply)
                self.assertEqual(items[0][0], "message_start")
                names = [e for e, _ in items]
                self.assertEqual(names.count("ping"), 1)
                if "content_block_start" in names:
                    self.assertEqual(names.index("ping"), names.index("content_block_start") + 1)
                for event, data in items:
                    self.assertEqual(event, data["type"])

    def test_stream_usage_is_split_between_start_and_delta(self) -> None:
        """Input tokens come in message_start; message_delta repeats them beside the output tokens."""
        items = events(streamed("text"))
        start = items[0][1]["message"]["usage"]
        delta = next(d for e, d in items if e == "message_delta")
        self.assertEqual(start["input_tokens"], FX.usage.input_tokens)
        self.assertEqual(delta["usage"]["output_tokens"], FX.usage.output_tokens)
        self.assertEqual(delta["usage"]["input_tokens"], FX.usage.input_tokens)
        self.assertEqual(delta["usage"]["cache_read_input_tokens"], 0)
        self.assertEqual(items[-1][0], "message_stop")

    def test_stream_text_deltas_join_to_the_text(self) -> None:
        """The text_delta pieces join to the fixture text inside one block."""
        items = events(streamed("text"))
        self.assertEqual(deltas(items, "text_delta"), FX.text)
        self.assertEqual(
            next(d for e, d in items if e == "message_delta")["delta"]["stop_reason"], "end_turn"
        )

    def test_stream_tool_use_arrives_as_input_json_deltas(self) -> None:
        """The partial_json pieces join to the arguments; the stop reason differs per scenario."""
        for name, stop in (("tool-call", "tool_use"), ("tool-call-with-stop", "end_turn")):
            with self.subTest(scenario=name):
                items = events(streamed(name))
                start = next(d for e, d in items if e == "content_block_start")
                self.assertEqual(start["content_block"]["id"], TOOL_USE_ID)
                self.assertEqual(start["content_block"]["input"], {})
                self.assertEqual(json.loads(deltas(items, "input_json_delta")), dict(FX.tool_arguments))
                self.assertEqual(
                    next(d for e, d in items if e == "message_delta")["delta"]["stop_reason"], stop
                )

    def test_stream_truncated_tool_use_stops_for_max_tokens(self) -> None:
        """A cut-off stream's input does not parse and the stop reason is max_tokens."""
        items = events(streamed("truncated-tool-call"))
        self.assertEqual(deltas(items, "text_delta"), FX.preamble)
        with self.assertRaises(ValueError):
            json.loads(deltas(items, "input_json_delta"))
        self.assertEqual(
            next(d for e, d in items if e == "message_delta")["delta"]["stop_reason"], "max_tokens"
        )

    def test_stream_refusal(self) -> None:
        """A refused stream stops for refusal with stop_details."""
        delta = next(d for e, d in events(streamed("content-filter")) if e == "message_delta")["delta"]
        self.assertEqual(delta["stop_reason"], "refusal")
        self.assertEqual(delta["stop_details"]["type"], "refusal")

    def test_stream_error_is_an_overloaded_error_event(self) -> None:
        """The partial text comes first, then event: error with overloaded_error, and nothing after."""
        items = events(streamed("stream-error"))
        self.assertEqual(deltas(items, "text_delta"), FX.partial_text)
        self.assertEqual(items[-1][0], "error")
        error = {"details": None, "type": "overloaded_error", "message": "Overloaded"}
        self.assertEqual(items[-1][1], {"type": "error", "error": error})
        self.assertIn(b'"error":{"details":null,', b"".join(streamed("stream-error").chunks))

    def test_ping_is_spelt_as_real_streams_spell_it(self) -> None:
        """The ping event's data has a space after the colon, as api.anthropic.com writes it."""
        self.assertIn(b'event: ping\ndata: {"type": "ping"}\n\n', b"".join(streamed("text").chunks))

    def test_a_message_is_shaped_as_api_anthropic_com_writes_it(self) -> None:
        """model first, stop_details null, the cache writes by lifetime and inference_geo in usage."""
        body = whole("text").body
        start = events(streamed("text", "delta-output-only"))[0][1]["message"]
        for message in (body, start):
            order = ["model", "id", "type", "role", "content", "stop_reason", "stop_sequence", "stop_details"]
            self.assertEqual(list(message), [*order, "usage"])
            self.assertIsNone(message["stop_details"])
            self.assertEqual(
                list(message["usage"]),
                [
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                    "cache_creation",
                    "output_tokens",
                    "service_tier",
                    "inference_geo",
                ],
            )
            lifetimes = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
            self.assertEqual(message["usage"]["cache_creation"], lifetimes)
            self.assertEqual(message["usage"]["inference_geo"], "global")
        self.assertEqual(body["usage"]["output_tokens"], FX.usage.output_tokens)
        self.assertEqual(whole("content-filter").body["stop_details"]["type"], "refusal")
        shapes = (("text", "delta-output-only"), ("tool-call", ""), ("truncated-tool-call", ""))
        for scenario, variant in shapes:
            delta = next(d for e, d in events(streamed(scenario, variant)) if e == "message_delta")
            self.assertEqual(list(delta["delta"]), ["stop_reason", "stop_sequence", "stop_details"])
            self.assertIsNone(delta["delta"]["stop_details"])
            self.assertNotIn("cache_creation", delta["usage"])

    def test_the_sonnet_4_5_stream_is_played_as_its_capture_shows_it(self) -> None:
        """delta-input-tokens, claude-sonnet-4-5's stream of 2026-03: inference_geo not_available and no
        stop_details anywhere, the input side repeated in message_delta."""
        items = events(streamed("text", "delta-input-tokens"))
        start = items[0][1]["message"]
        self.assertNotIn("stop_details", start)
        self.assertEqual(start["usage"]["inference_geo"], "not_available")
        delta = next(d for e, d in items if e == "message_delta")
        self.assertEqual(list(delta["delta"]), ["stop_reason", "stop_sequence"])
        self.assertEqual(delta["usage"]["input_tokens"], FX.usage.input_tokens)
        self.assertEqual(wire.variants("text", "stream")[0].name, "delta-input-tokens")

    def test_every_event_but_ping_pads_its_json_before_the_last_brace(self) -> None:
        """Each data line ends in 0 to 15 spaces and a brace, the counts varying, and still parses."""
        import re

        for scenario in ("text", "tool-call", "content-filter"):
            body = b"".join(streamed(scenario).chunks).decode("utf-8")
            lines = re.findall(r"^event: (\w+)\ndata: (.*)$", body, re.M)
            pads = []
            for name, data in lines:
                json.loads(data)
                if name == "ping":
                    self.assertEqual(data, '{"type": "ping"}')
                    continue
                found = re.search(r"[}\]\"0-9el]( *)}$", data)
                assert found is not None, data
                pads.append(len(found.group(1)))
            with self.subTest(scenario=scenario):
                self.assertLessEqual(max(pads), 15)
                self.assertGreater(len(set(pads)), 2 if scenario != "content-filter" else 1)

    def test_a_200_carries_the_rate_limit_headers(self) -> None:
        """Every 200 reports each limit, what is left and when it resets (RFC 3339); a failure does not."""
        import datetime

        names = [
            f"anthropic-ratelimit-{kind}-{part}"
            for kind in ("requests", "input-tokens", "output-tokens", "tokens")
            for part in ("limit", "remaining", "reset")
        ]
        for reply in (whole("text"), streamed("text"), whole("tool-call")):
            headers = reply.headers or {}
            for name in names:
                self.assertIn(name, headers)
            self.assertEqual(headers["anthropic-ratelimit-requests-limit"], "4000")
            self.assertEqual(headers["anthropic-ratelimit-requests-remaining"], "3999")
            reset_at = headers["anthropic-ratelimit-tokens-reset"]
            reset = datetime.datetime.strptime(reset_at, "%Y-%m-%dT%H:%M:%SZ")
            now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
            self.assertLess(abs(reset - now), datetime.timedelta(seconds=30))
        failed = wire.reply("auth", "chat", recorded(good_body()))
        assert isinstance(failed, JsonReply)
        self.assertFalse([h for h in failed.headers or {} if h.startswith("anthropic-ratelimit-")])

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

    def test_aux_reply_answers_count_tokens_and_404s_the_rest(self) -> None:
        """count_tokens gets a plausible answer; any other path a 404 in Anthropic's error shape."""
        count = wire.aux_reply(recorded({}, "/v1/messages/count_tokens"))
        assert isinstance(count, JsonReply)
        self.assertEqual(count.body, {"input_tokens": FX.usage.input_tokens})
        missing = wire.aux_reply(recorded({}, "/v1/other"))
        assert isinstance(missing, JsonReply)
        self.assertEqual((missing.status, missing.body["error"]["type"]), (404, "not_found_error"))
        self.assertFalse(wire.is_generation(recorded({}, "/v1/messages/count_tokens")))

    def test_check_request_accepts_either_auth_and_any_version(self) -> None:
        """x-api-key or Authorization: Bearer, any anthropic-version, string or block content pass."""
        header_sets = [
            HEADERS,
            {"authorization": "Bearer test", "anthropic-version": "2026-10-21"},
        ]
        for headers in header_sets:
            with self.subTest(headers=headers):
                self.assertEqual(wire.check_request(recorded(good_body(), headers=headers), MODEL), [])
        blocks = {
            **good_body(),
            "messages": [{"role": "user", "content": [{"type": "text", "text": FX.question}]}],
        }
        self.assertEqual(wire.check_request(recorded(blocks), MODEL), [])

    def test_check_request_names_each_problem(self) -> None:
        """Missing headers, max_tokens, a system message or the OpenAI tool shape each give a sentence."""
        openai_tool = [{"name": FX.tool_name, "parameters": dict(FX.tool_parameters)}]
        system_message = [{"role": "system", "content": FX.system}, {"role": "user", "content": FX.question}]
        table = [
            (recorded(good_body(), headers={"x-api-key": "test"}), "anthropic-version"),
            (recorded(good_body(), headers={"anthropic-version": "2023-06-01"}), "x-api-key"),
            (recorded(good_body(), "/v1/chat/completions"), "/v1/messages"),
            (recorded({**good_body(), "model": "other"}), "expected model"),
            (recorded({k: v for k, v in good_body().items() if k != "max_tokens"}), "max_tokens"),
            (recorded({**good_body(), "messages": system_message}), "top-level"),
            (recorded({**good_body(), "messages": [{"role": "user", "content": "hi"}]}), "user message"),
            (recorded({**good_body(), "tools": openai_tool}), "input_schema, not parameters"),
        ]
        for request, needle in table:
            with self.subTest(needle=needle):
                problems = wire.check_request(request, MODEL)
                self.assertEqual(len(problems), 1, problems)
                self.assertIn(needle, problems[0])


if __name__ == "__main__":
    unittest.main()
