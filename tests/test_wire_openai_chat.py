"""The OpenAI Chat Completions wire, as pure functions: shapes, streams, request checks."""

from __future__ import annotations

import json
import re
import unittest
from typing import Any, Dict, List

from conformance._multiturn import MULTI_TURN, multi_turn_reply
from conformance.cases import scenario_reply
from conformance.contract import ChatRequest, Message, ToolCall, ToolChoice, ToolError, ToolResult
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.gate import tool_specs
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.reference._decoders import SSEDecoder
from conformance.reference.openai_chat import OpenAIChatBackend
from conformance.scenarios import SCENARIOS
from conformance.wires._turns import ScriptedCall, ScriptedTurn, play_turn
from conformance.wires.openai_chat import TOOL_CALL_ID, OpenAIChatWire, openai_chat_wire

WIRE = openai_chat_wire


def good_body(stream: bool = False) -> Dict[str, Any]:
    body: Dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "system", "content": FX.system}, {"role": "user", "content": FX.question}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": FX.tool_description,
                    "parameters": dict(FX.tool_parameters),
                },
            }
        ],
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def request(body: Any, path: str = "/v1/chat/completions", method: str = "POST") -> RecordedRequest:
    raw = json.dumps(body).encode() if not isinstance(body, bytes) else body
    return RecordedRequest(method, path, "", {"content-type": "application/json"}, raw, "HTTP/1.1")


def events(reply: StreamReply) -> List[str]:
    decoder = SSEDecoder()
    out = []
    for chunk in reply.chunks:
        out += [e.data for e in decoder.feed(chunk)]
    return out


class ReplyTests(unittest.TestCase):
    def test_every_scenario_answers_in_both_forms(self) -> None:
        """Each scenario the wire has (all but optional ones it does not list) answers in both forms."""
        for scenario in SCENARIOS:
            if SCENARIOS[scenario].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            if WIRE.absent(scenario) is not None:
                continue  # an optional scenario only the wires that list it have
            for stream in (False, True):
                with self.subTest(scenario=scenario, stream=stream):
                    mode = "stream" if stream else "chat"
                    if scenario in MULTI_TURN:
                        # Played from the wire's scripted turns, not by reply().
                        self.assertIsNone(WIRE.reply(scenario, mode, request(good_body(stream))))
                        reply = multi_turn_reply(WIRE, scenario, request(good_body(stream)), "", [])
                    elif scenario == "corrupt-arguments":
                        self.assertIsNone(WIRE.reply(scenario, mode, request(good_body(stream))))
                        reply = scenario_reply(WIRE, scenario, mode, request(good_body(stream)))
                    else:
                        reply = WIRE.reply(scenario, mode, request(good_body(stream)))
                    self.assertIsInstance(reply, (JsonReply, StreamReply, HangReply))

    def test_whole_text_reply_has_the_required_fields(self) -> None:
        """A chat.completion carries id, object, created, model, choices and usage."""
        reply = WIRE.reply("text", "chat", request(good_body()))
        assert isinstance(reply, JsonReply)
        body = json.loads(reply.encoded())
        for key in ("id", "object", "created", "model", "choices", "usage"):
            self.assertIn(key, body)
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["choices"][0]["message"]["content"], FX.text)
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        self.assertEqual(body["usage"]["total_tokens"], FX.usage.total_tokens)
        headers = dict(reply.header_items())
        self.assertRegex(headers["x-request-id"], r"^req_[0-9a-f]{32}$")
        self.assertIn("GMT", headers["date"])

    def test_every_response_has_a_fresh_request_id(self) -> None:
        """Two answers never share an x-request-id, as OpenAI's never do."""
        first, second = (dict(WIRE.reply("text", "chat", request(good_body())).header_items()) for _ in "ab")
        self.assertNotEqual(first["x-request-id"], second["x-request-id"])

    def test_streamed_text_reassembles_and_ends_with_done(self) -> None:
        """The deltas concatenate to the fixture text, with usage before [DONE]."""
        reply = WIRE.reply("text", "stream", request(good_body(True)))
        assert isinstance(reply, StreamReply)
        data = events(reply)
        self.assertEqual(data[-1], "[DONE]")
        chunks = [json.loads(d) for d in data[:-1]]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        self.assertEqual(text, FX.text)
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"]["prompt_tokens"], FX.usage.input_tokens)

    def test_stream_without_include_usage_has_no_usage_chunk(self) -> None:
        """Usage comes only when the request asked for it, as OpenAI does."""
        body = good_body(True)
        del body["stream_options"]
        reply = WIRE.reply("text", "stream", request(body))
        assert isinstance(reply, StreamReply)
        self.assertTrue(all("usage" not in json.loads(d) for d in events(reply)[:-1]))

    def test_stream_is_cut_inside_a_character_and_a_string(self) -> None:
        """At least one chunk ends inside a UTF-8 character, and chunks split events."""
        reply = WIRE.reply("text", "stream", request(good_body(True)))
        assert isinstance(reply, StreamReply)
        broken = 0
        for chunk in reply.chunks:
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError:
                broken += 1
        self.assertGreater(broken, 0)
        self.assertTrue(any(not c.endswith(b"\n\n") for c in reply.chunks))

    def test_tool_call_arguments_arrive_in_fragments(self) -> None:
        """The call's id comes first, then argument pieces that join to the fixture's."""
        reply = WIRE.reply("tool-call", "stream", request(good_body(True)))
        assert isinstance(reply, StreamReply)
        chunks = [json.loads(d) for d in events(reply)[:-1]]
        fragments = [
            tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls") or ()
        ]
        self.assertGreater(len(fragments), 2)
        self.assertEqual(fragments[0]["id"], TOOL_CALL_ID)
        arguments = "".join(f["function"]["arguments"] for f in fragments)
        self.assertEqual(json.loads(arguments), dict(FX.tool_arguments))
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        self.assertEqual(finishes[-1], "tool_calls")

    def test_tool_call_with_stop_says_stop(self) -> None:
        """The tool-call-with-stop turn finishes with "stop" in both forms."""
        whole = WIRE.reply("tool-call-with-stop", "chat", request(good_body()))
        assert isinstance(whole, JsonReply)
        self.assertEqual(json.loads(whole.encoded())["choices"][0]["finish_reason"], "stop")

    def test_truncated_call_does_not_parse(self) -> None:
        """The cut-off call's arguments are not valid JSON and the turn says length."""
        whole = WIRE.reply("truncated-tool-call", "chat", request(good_body()))
        assert isinstance(whole, JsonReply)
        choice = json.loads(whole.encoded())["choices"][0]
        self.assertEqual(choice["finish_reason"], "length")
        with self.assertRaises(ValueError):
            json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"])

    def test_stream_error_ends_with_an_error_event_and_no_done(self) -> None:
        """A mid-stream failure is a data: {"error": ...} event after the partial text."""
        reply = WIRE.reply("stream-error", "stream", request(good_body(True)))
        assert isinstance(reply, StreamReply)
        data = events(reply)
        self.assertNotIn("[DONE]", data)
        last = json.loads(data[-1])
        self.assertEqual((last["error"]["type"], last["error"]["code"]), ("server_error", None))
        text = "".join(json.loads(d)["choices"][0]["delta"].get("content") or "" for d in data[:-1])
        self.assertEqual(text, FX.partial_text)

    def test_abort_hangs(self) -> None:
        """Abort never answers a whole request and leaves a stream open."""
        self.assertIsInstance(WIRE.reply("abort", "chat", request(good_body())), HangReply)
        streamed = WIRE.reply("abort", "stream", request(good_body(True)))
        assert isinstance(streamed, StreamReply)
        self.assertTrue(streamed.hang)

    def test_errors_have_the_real_statuses_and_codes(self) -> None:
        """Each failure is OpenAI's status, error.type and error.code."""
        table = {
            "rate-limit": (429, "rate_limit_exceeded"),
            "quota": (429, "insufficient_quota"),
            "auth": (401, "invalid_api_key"),
            "overloaded": (503, None),
            "server-error": (500, None),
            "context-overflow": (400, "context_length_exceeded"),
        }
        for scenario, (status, code) in table.items():
            with self.subTest(scenario=scenario):
                reply = WIRE.reply(scenario, "chat", request(good_body()))
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, status)
                self.assertEqual(json.loads(reply.encoded())["error"]["code"], code)
        rate = WIRE.reply("rate-limit", "chat", request(good_body()))
        assert isinstance(rate, JsonReply)
        # api.openai.com's 429 names its delay in the message only (openai/openai-node#1477).
        self.assertFalse({"retry-after", "retry-after-ms"} & set(dict(rate.header_items())))
        self.assertIsNone(WIRE.variant("rate-limit", "chat", "no-retry-after").retry_after)

    def test_ids_look_like_openai_ids(self) -> None:
        """The tool call id is call_ plus 24 letters and digits."""
        self.assertRegex(TOOL_CALL_ID, r"^call_[A-Za-z0-9]{24}$")


class RequestCheckTests(unittest.TestCase):
    def test_a_good_request_has_no_problems(self) -> None:
        """The request the reference backend sends passes, whole and streamed."""
        self.assertEqual(WIRE.check_request(request(good_body()), "m"), [])
        self.assertEqual(WIRE.check_request(request(good_body(True)), "m"), [])

    def test_each_defect_is_named(self) -> None:
        """Every kind of wrong request yields a sentence naming it."""

        def without(key: str) -> Dict[str, Any]:
            body = good_body()
            del body[key]
            return body

        wrong_schema = good_body()
        wrong_schema["tools"][0]["function"]["parameters"] = {"type": "object"}
        no_usage = good_body(True)
        del no_usage["stream_options"]
        cases = [
            ("method", request(good_body(), method="PUT"), "expected POST"),
            ("path", request(good_body(), path="/v1/completions"), "/v1/chat/completions"),
            ("model", request({**good_body(), "model": "other"}), "expected model 'm'"),
            (
                "question",
                request({**good_body(), "messages": [{"role": "user", "content": "hi"}]}),
                "user message",
            ),
            ("tools", request(without("tools")), "get_weather function"),
            ("schema", request(wrong_schema), "parameters"),
            ("include_usage", request(no_usage), "include_usage"),
            ("not json", request(b"nope"), "JSON object"),
        ]
        for name, recorded, fragment in cases:
            with self.subTest(name):
                problems = WIRE.check_request(recorded, "m")
                self.assertTrue(problems)
                self.assertTrue(any(fragment in p for p in problems), problems)

    def test_content_parts_count_as_the_question(self) -> None:
        """A user message given as text parts is read like a plain string."""
        body = good_body()
        body["messages"][1]["content"] = [{"type": "text", "text": FX.question}]
        self.assertEqual(WIRE.check_request(request(body), "m"), [])

    def test_generation_and_stream_detection(self) -> None:
        """Only POST .../chat/completions is the call; the stream flag picks the form."""
        self.assertTrue(WIRE.is_generation(request(good_body())))
        self.assertFalse(WIRE.is_generation(request(good_body(), path="/v1/models", method="GET")))
        self.assertTrue(WIRE.wants_stream(request(good_body(True))))
        self.assertFalse(WIRE.wants_stream(request(good_body())))

    def test_model_lookup_is_answered(self) -> None:
        """GET /v1/models/{id} gets a model object; other paths a clear 404."""
        found = WIRE.aux_reply(request(b"", path="/v1/models/m", method="GET"))
        assert isinstance(found, JsonReply)
        self.assertEqual((found.status, json.loads(found.encoded())["id"]), (200, "m"))
        missing = WIRE.aux_reply(request(b"", path="/v1/embeddings"))
        assert isinstance(missing, JsonReply)
        self.assertEqual(missing.status, 404)
        self.assertTrue(re.search("no route for POST /v1/embeddings", missing.encoded().decode()))


if __name__ == "__main__":
    unittest.main()


# -- multi-turn: scripted turns and histories ---------------------------------------------

CALL_A = "call_Q2x9mVb0LkE7rT4sNw8yZc1d"
CALL_B = "call_H5pR3jKf9WqT2vXn6LmA0sYe"


def conversation() -> List[Message]:
    """A user question, a turn of two calls, both results (one an error), and a final answer."""
    return [
        Message("system", "Be brief."),
        Message("user", "Read both files."),
        Message(
            "assistant",
            "",
            tool_calls=(
                ToolCall(CALL_A, "read_fixture", {"path": "weather.json"}),
                ToolCall(CALL_B, "echo_json", {"text": "h\u00e9 \U0001f600", "count": 2, "tags": ["a"]}),
            ),
        ),
        Message.tool(ToolResult(CALL_A, "read_fixture", '{"fixture_id": "fx-1"}')),
        Message.tool(ToolResult(CALL_B, "echo_json", error=ToolError("not_found", "no such file"))),
        Message("assistant", "Done."),
        Message("user", "Thanks."),
    ]


def rendered(messages: List[Message], **extra: Any) -> Dict[str, Any]:
    backend = OpenAIChatBackend("http://127.0.0.1:1/v1")
    chat = ChatRequest("m", messages, tools=tool_specs(), tool_choice=ToolChoice.tool("echo_json"))
    body = backend.body(chat, stream=False)
    body.update(extra)
    return body


class HistoryTests(unittest.TestCase):
    def test_a_rendered_history_reads_back_the_same(self) -> None:
        """The reference backend's rendering of a conversation reads back as that conversation."""
        history = WIRE.read_history(request(rendered(conversation())))
        assert history is not None
        self.assertEqual(history.problems, ())
        self.assertEqual(history.tool_choice, ToolChoice.tool("echo_json"))
        self.assertEqual(history.tools, ("echo_json", "read_fixture", "delayed_value", "always_error"))
        sent = conversation()
        self.assertEqual([m.role for m in history.messages], [m.role for m in sent])
        for got, want in zip(history.messages, sent):
            self.assertEqual(got.content, want.content)
            self.assertEqual(
                [(c.id, c.name, dict(c.arguments)) for c in got.tool_calls],
                [(c.id, c.name, dict(c.arguments)) for c in want.tool_calls],
            )
            if want.tool_result is not None:
                assert got.tool_result is not None
                self.assertEqual(got.tool_result.call_id, want.tool_result.call_id)
                self.assertEqual(got.tool_result.name, want.tool_result.name)
                self.assertEqual(got.tool_result.text, want.tool_result.text)

    def test_arguments_that_do_not_parse_are_taken_as_they_came(self) -> None:
        """A history whose call carries the model's broken argument text is taken, as api.openai.com does."""
        messages = rendered(conversation())["messages"]
        messages[2]["tool_calls"][0]["function"]["arguments"] = '{"path": "weather.json'
        history = WIRE.read_history(request({**rendered([]), "messages": messages}))
        assert history is not None
        self.assertEqual(history.problems, ())
        self.assertEqual([c.id for c in history.messages[2].tool_calls], [CALL_A, CALL_B])

    def test_a_bad_tool_choice_is_a_problem_of_the_history(self) -> None:
        """A tool_choice OpenAI does not take is among the history's problems, and refused with its 400."""
        history = WIRE.read_history(request(rendered(conversation(), tool_choice={"type": "function"})))
        assert history is not None
        self.assertEqual(len(history.problems), 1)
        self.assertIn("Invalid value for 'tool_choice'", history.problems[0])
        self.assertIsNone(history.tool_choice)
        reply = WIRE.history_error(history.problems)
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.status, 400)
        self.assertIn("tool_choice", reply.body["error"]["message"])

    def test_each_malformed_history_is_refused_as_openai_does(self) -> None:
        """Each malformed rendering gives its problem and OpenAI's own 400, pointing at the message."""
        good = rendered(conversation())["messages"]
        no_id = json.loads(json.dumps(good))
        del no_id[3]["tool_call_id"]
        stray = json.loads(json.dumps(good))
        stray[4]["tool_call_id"] = "call_unknown000000000000000"
        dropped = json.loads(json.dumps(good))
        del dropped[4]
        as_object = json.loads(json.dumps(good))
        as_object[2]["tool_calls"][0]["function"]["arguments"] = {"path": "weather.json"}
        orphan = [good[0], good[1], good[3]]
        table = [
            ("missing tool_call_id", no_id, "messages.[3].tool_call_id", "Missing required parameter"),
            ("unknown tool_call_id", stray, "messages.[4].role", "messages with role 'tool' must be"),
            ("result dropped", dropped, "messages.[2].role", "did not have response messages: " + CALL_B),
            (
                "arguments as an object",
                as_object,
                "messages.[2].tool_calls.[0].function.arguments",
                "Invalid type",
            ),
            ("tool first", orphan, "messages.[2].role", "must be a response to a preceeding message"),
        ]
        for name, messages, param, words in table:
            with self.subTest(name):
                history = WIRE.read_history(request({**rendered([]), "messages": messages}))
                assert history is not None
                self.assertTrue(history.problems, "expected a problem")
                self.assertIn(words, history.problems[0])
                reply = WIRE.history_error(history.problems)
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 400)
                error = reply.body["error"]
                self.assertEqual(error["type"], "invalid_request_error")
                self.assertEqual(error["param"], param)
                self.assertIn(words, error["message"])


class PlayTurnTests(unittest.TestCase):
    def turn(self) -> ScriptedTurn:
        emoji = '{"text": "\\ud83d\\ude00 caf\u00e9", "count": 1, "tags": ["\u00e9t\u00e9"]}'
        # One boundary inside the surrogate pair escape, one inside its second half.
        cut = emoji.index("\\ude00")
        fragments = (emoji[:cut], emoji[cut : cut + 3], emoji[cut + 3 : cut + 20], emoji[cut + 20 :])
        return ScriptedTurn(
            text="",
            calls=(
                ScriptedCall(CALL_A, "echo_json", emoji, fragments),
                ScriptedCall(CALL_B, "read_fixture", '{"path": "notes/unicode.txt"}'),
            ),
            interleave=True,
            seed="interleaved",
        )

    def test_interleaved_events_name_each_call_once(self) -> None:
        """Interleaved, every call's id and name come on its first chunk only, fragments by index."""
        turn = self.turn()
        played = WIRE.turn_stream(turn, request(good_body(stream=True)))
        assert played is not None
        datas = [e.split(b"data: ", 1)[1].strip() for e in played.events]
        chunks = [json.loads(d) for d in datas if d != b"[DONE]"]
        deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
        calls = [f for d in deltas for f in d.get("tool_calls", ())]
        indexes = [f["index"] for f in calls]
        self.assertNotEqual(indexes, sorted(indexes), "the fragments should interleave")
        self.assertEqual([f.get("id") for f in calls if "id" in f], [CALL_A, CALL_B])
        self.assertEqual(deltas[0].get("role"), "assistant")
        for index, call in enumerate(turn.calls):
            first, last = played.arguments[index]
            joined = "".join(
                f["function"]["arguments"] for f in calls if f["index"] == index and "id" not in f
            )
            self.assertEqual(joined, call.arguments)
            self.assertIn(b'"index":%d' % index, played.events[first])
            self.assertIn(b'"index":%d' % index, played.events[last])
            self.assertLess(first, last)

    def test_the_reference_backend_reads_a_played_turn_back_exactly(self) -> None:
        """Served by the fake provider, a played turn decodes to its calls, in both forms."""
        import asyncio

        from conformance.provider import start_fake_provider

        turn = self.turn()
        for stream in (False, True):
            with self.subTest(stream=stream), start_fake_provider() as provider:
                provider.reply(lambda r: play_turn(WIRE, turn, r))
                backend = OpenAIChatBackend(f"{provider.url}/v1")
                chat = ChatRequest("m", [Message("user", "go")], tools=tool_specs())

                async def call(backend: OpenAIChatBackend, chat: ChatRequest, stream: bool) -> Any:
                    try:
                        if not stream:
                            return await backend.chat(chat)
                        return [c async for c in backend.chat_stream(chat)]
                    finally:
                        await backend.aclose()

                got = asyncio.run(call(backend, chat, stream))
                calls = got.tool_calls if not stream else [c for k in got for c in k.tool_calls]
                finish = got.finish_reason if not stream else got[-1].finish_reason
                self.assertEqual(finish, "tool_calls")
                self.assertEqual(
                    [(c.id, c.name, dict(c.arguments)) for c in calls],
                    [(c.id, c.name, json.loads(c.arguments)) for c in turn.calls],
                )

    def test_a_corrupt_call_on_a_finished_turn_reaches_the_loop_unparsed(self) -> None:
        """Arguments that are not a JSON object come unparsed, exactly; a length turn drops the call."""
        import asyncio

        from conformance.provider import start_fake_provider

        async def calls(url: str, stream: bool) -> Any:
            backend = OpenAIChatBackend(f"{url}/v1")
            chat = ChatRequest("m", [Message("user", "go")], tools=tool_specs())
            try:
                if not stream:
                    got = await backend.chat(chat)
                    return list(got.tool_calls), got.finish_reason
                chunks = [c async for c in backend.chat_stream(chat)]
                return [c for k in chunks for c in k.tool_calls], chunks[-1].finish_reason
            finally:
                await backend.aclose()

        good = ScriptedCall(CALL_B, "read_fixture", '{"path": "weather.json"}')
        for text in ('{"text": "unterminated', '["not", "an", "object"]', '{"text": "caf\u00e9", }'):
            corrupt = ScriptedCall(CALL_A, "echo_json", text, fragments=(text[:5], text[5:]))
            for finish in ("", "length"):
                turn = ScriptedTurn(calls=(corrupt, good), finish=finish, seed="corrupt")
                for stream in (False, True):
                    with (
                        self.subTest(text=text, finish=finish, stream=stream),
                        start_fake_provider() as provider,
                    ):
                        provider.reply(lambda r, t=turn: play_turn(WIRE, t, r))
                        got, reason = asyncio.run(calls(provider.url, stream))
                    if finish == "length":
                        self.assertEqual((got, reason), ([], "length"))
                        continue
                    self.assertEqual(reason, "tool_calls")
                    self.assertEqual(
                        got,
                        [
                            ToolCall(CALL_A, "echo_json", {}, unparsed_arguments=text),
                            ToolCall(CALL_B, "read_fixture", {"path": "weather.json"}),
                        ],
                    )


class ReasoningContentTests(unittest.TestCase):
    def test_api_openai_com_has_no_reasoning_case(self) -> None:
        """The official wire skips reasoning, saying why and how to opt in."""
        reason = WIRE.absent("reasoning")
        self.assertIsNotNone(reason)
        self.assertIn("OpenAIChatWire(reasoning_content=True)", str(reason))

    def test_an_opted_in_wire_sends_reasoning_content_first(self) -> None:
        """Whole, the message carries reasoning_content; streamed, its deltas come before the content."""
        wire = OpenAIChatWire(reasoning_content=True)
        self.assertIsNone(wire.absent("reasoning"))
        variant = wire.variants("reasoning")[0]
        whole = scenario_reply(wire, "reasoning", "chat", request(good_body()), variant.name)
        assert isinstance(whole, JsonReply)
        message = whole.body["choices"][0]["message"]
        self.assertEqual((message["reasoning_content"], message["content"]), (FX.thinking, FX.text))
        streamed = scenario_reply(wire, "reasoning", "stream", request(good_body(True)), variant.name)
        assert isinstance(streamed, StreamReply)
        chunks = [json.loads(d) for d in events(streamed) if d != "[DONE]"]
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        thinking = [d["reasoning_content"] for d in deltas if d.get("reasoning_content") is not None]
        text = [d["content"] for d in deltas if d.get("content")]
        self.assertEqual(("".join(thinking), "".join(text)), (FX.thinking, FX.text))
        first_text = next(i for i, d in enumerate(deltas) if d.get("content"))
        self.assertTrue(all(d.get("reasoning_content") is None for d in deltas[first_text:]))

    def test_the_reference_backend_passes_the_opted_in_case(self) -> None:
        """The reference backend returns reasoning_content as one thinking item, both modes and transports."""
        from conformance.cases import BackendConformanceTarget, ConformanceCase
        from conformance.reference import REFERENCE_BACKENDS

        create = REFERENCE_BACKENDS["openai-chat"]
        for http2 in (False, True):
            wire = OpenAIChatWire(reasoning_content=True)
            target = BackendConformanceTarget("ref", wire, lambda url, h=http2: create(url, h), http2=http2)
            for mode in ("chat", "stream"):
                with self.subTest(http2=http2, mode=mode):
                    ConformanceCase(target, "reasoning", mode).run()
