"""Tests for the Gemini wire: its replies, read back as a client would, and its request check."""

from __future__ import annotations

import json
import unittest
from typing import Any, Dict, List, Optional

from conformance.cases import scenario_reply
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.scenarios import SCENARIOS
from conformance.wires.gemini import FUNCTION_CALL_ID, gemini_wire

MODEL = "conformance-model"


def sdk_body() -> Dict[str, Any]:
    """The body google-genai sends for the conformance request."""
    return {
        "contents": [{"role": "user", "parts": [{"text": FX.question}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": FX.system}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": FX.tool_name,
                        "description": FX.tool_description,
                        "parameters_json_schema": json.loads(json.dumps(dict(FX.tool_parameters))),
                    }
                ]
            }
        ],
        "generationConfig": {"maxOutputTokens": FX.max_tokens},
    }


def request(
    stream: bool = False,
    version: str = "v1beta",
    model: str = MODEL,
    query: Optional[str] = None,
    headers: Optional[Dict[str, str]] = None,
    body: Optional[Dict[str, Any]] = None,
    method: str = "POST",
) -> RecordedRequest:
    verb = "streamGenerateContent" if stream else "generateContent"
    if query is None:
        query = "alt=sse" if stream else ""
    if headers is None:
        headers = {"x-goog-api-key": "test", "content-type": "application/json"}
    raw = json.dumps(sdk_body() if body is None else body).encode()
    return RecordedRequest(method, f"/{version}/models/{model}:{verb}", query, headers, raw, "HTTP/1.1")


def sse_events(reply: StreamReply) -> List[Dict[str, Any]]:
    """The JSON objects of a streamed reply, split as the SSE grammar says."""
    data = b"".join(reply.chunks).decode("utf-8")
    events = []
    for block in data.replace("\r\n", "\n").split("\n\n"):
        if block:
            lines = block.split("\n")
            assert all(line.startswith("data: ") for line in lines), block
            events.append(json.loads("\n".join(line[6:] for line in lines)))
    return events


def texts(body: Dict[str, Any]) -> str:
    out = ""
    for cand in body.get("candidates", []):
        for part in cand.get("content", {}).get("parts", []):
            out += part.get("text", "")
    return out


def function_calls(body: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [
        part["functionCall"]
        for cand in body.get("candidates", [])
        for part in cand.get("content", {}).get("parts", [])
        if "functionCall" in part
    ]


def finish_reasons(bodies: List[Dict[str, Any]]) -> List[str]:
    return [c["finishReason"] for b in bodies for c in b.get("candidates", []) if "finishReason" in c]


def whole(scenario: str) -> JsonReply:
    reply = gemini_wire.reply(scenario, "chat", request())
    assert isinstance(reply, JsonReply), reply
    return reply


def streamed(scenario: str, **kwargs: Any) -> StreamReply:
    reply = gemini_wire.reply(scenario, "stream", request(stream=True, **kwargs))
    assert isinstance(reply, StreamReply), reply
    return reply


class GeminiRepliesTest(unittest.TestCase):
    def test_every_scenario_has_an_answer_in_both_forms(self) -> None:
        """Gemini has every case: no scenario answers None, whole or streamed."""
        self.assertEqual(dict(gemini_wire.unsupported), {})
        for name in SCENARIOS:
            if SCENARIOS[name].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            if gemini_wire.absent(name):
                continue  # an optional scenario Gemini's format has no form of
            for stream in (False, True):
                with self.subTest(scenario=name, stream=stream):
                    self.assertIsNotNone(scenario_reply(gemini_wire, name, "chat", request(stream=stream)))

    def test_form_follows_the_path_not_the_mode(self) -> None:
        """:streamGenerateContent gets a stream and :generateContent a whole body, whatever the mode."""
        self.assertIsInstance(gemini_wire.reply("text", "stream", request()), JsonReply)
        self.assertIsInstance(gemini_wire.reply("text", "chat", request(stream=True)), StreamReply)

    def test_whole_text_turn(self) -> None:
        """The whole text turn has the fixture text, STOP and the usage."""
        body = json.loads(whole("text").encoded())
        self.assertEqual(texts(body), FX.text)
        self.assertEqual(finish_reasons([body]), ["STOP"])
        usage = body["usageMetadata"]
        self.assertEqual(
            (usage["promptTokenCount"], usage["candidatesTokenCount"], usage["totalTokenCount"]),
            (31, 17, 48),
        )

    def test_streamed_text_turn(self) -> None:
        """Streamed text joins to the fixture text, STOP comes last and the last usage is whole."""
        reply = streamed("text")
        self.assertEqual(reply.content_type, "text/event-stream")
        events = sse_events(reply)
        self.assertGreater(len(events), 2)
        self.assertEqual("".join(texts(e) for e in events), FX.text)
        self.assertEqual(finish_reasons(events), ["STOP"])
        self.assertIn("finishReason", events[-1]["candidates"][0])
        self.assertEqual(events[-1]["usageMetadata"]["totalTokenCount"], 48)
        # Earlier events already count some candidate tokens; only the last is the turn's.
        self.assertLess(events[0]["usageMetadata"]["totalTokenCount"], 48)

    def test_stream_has_no_done_sentinel_and_uses_crlf(self) -> None:
        """The stream just ends, with no [DONE], and events end with CRLF CRLF."""
        data = b"".join(streamed("text").chunks)
        self.assertNotIn(b"[DONE]", data)
        self.assertTrue(data.endswith(b"}\r\n\r\n"))

    def test_stream_is_cut_inside_a_character(self) -> None:
        """Some chunk boundary falls inside a multi-byte UTF-8 character."""
        chunks = streamed("text").chunks
        broken = 0
        for chunk in chunks:
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError:
                broken += 1
        self.assertGreater(broken, 0)

    def test_tool_call_turns(self) -> None:
        """Both tool turns carry one whole functionCall and STOP; only tool-call has an id."""
        for scenario, has_id in (("tool-call", True), ("tool-call-with-stop", False)):
            for form in ("whole", "stream"):
                with self.subTest(scenario=scenario, form=form):
                    if form == "whole":
                        bodies = [json.loads(whole(scenario).encoded())]
                    else:
                        bodies = sse_events(streamed(scenario))
                    calls = [c for b in bodies for c in function_calls(b)]
                    self.assertEqual(len(calls), 1)
                    self.assertEqual(calls[0]["name"], FX.tool_name)
                    self.assertEqual(calls[0]["args"], dict(FX.tool_arguments))
                    self.assertEqual(calls[0].get("id"), FUNCTION_CALL_ID if has_id else None)
                    self.assertEqual(finish_reasons(bodies), ["STOP"])
        self.assertIsNone(gemini_wire.tool_call_id)

    def test_a_gemini_3_call_may_come_without_an_id(self) -> None:
        """The signature-without-id variant keeps the thoughtSignature and drops the id."""
        reply = gemini_wire.reply("tool-call", "stream", request(stream=True), "signature-without-id")
        assert isinstance(reply, StreamReply)
        parts = [p for b in sse_events(reply) for c in b["candidates"] for p in c["content"]["parts"]]
        call = next(p for p in parts if "functionCall" in p)
        self.assertNotIn("id", call["functionCall"])
        self.assertIn("thoughtSignature", call)
        ids = {v.name: v.call_id for v in gemini_wire.variants("tool-call", "stream")}
        self.assertEqual(ids, {"id": FUNCTION_CALL_ID, "signature-without-id": None})

    def test_truncated_tool_call_is_max_tokens_without_a_call(self) -> None:
        """The cut-off turn is the preamble and MAX_TOKENS, with no functionCall part."""
        for bodies in (
            [json.loads(whole("truncated-tool-call").encoded())],
            sse_events(streamed("truncated-tool-call")),
        ):
            with self.subTest(events=len(bodies)):
                self.assertEqual("".join(texts(b) for b in bodies), FX.preamble)
                self.assertEqual([c for b in bodies for c in function_calls(b)], [])
                self.assertEqual(finish_reasons(bodies), ["MAX_TOKENS"])

    def test_content_filter(self) -> None:
        """Whole: the prompt is blocked, or the output; streamed: the output stops with SAFETY, content {}."""
        body = json.loads(whole("content-filter").encoded())
        self.assertNotIn("candidates", body)
        self.assertEqual(body["promptFeedback"], {"blockReason": "PROHIBITED_CONTENT"})
        blocked = gemini_wire.reply("content-filter", "chat", request(), "output-blocked")
        assert isinstance(blocked, JsonReply)
        self.assertEqual(json.loads(blocked.encoded())["candidates"][0]["content"], {})
        events = sse_events(streamed("content-filter"))
        self.assertEqual(finish_reasons(events), ["SAFETY"])
        self.assertEqual(events[-1]["candidates"][0]["content"], {})
        self.assertNotIn("index", events[-1]["candidates"][0])

    def test_a_blocked_reply_counts_the_prompt_alone(self) -> None:
        """A blocked prompt or output generated nothing: no candidatesTokenCount, the prompt's total."""
        blocked = gemini_wire.reply("content-filter", "chat", request(), "output-blocked")
        assert isinstance(blocked, JsonReply)
        bodies = [json.loads(whole("content-filter").encoded()), json.loads(blocked.encoded())]
        bodies.append(sse_events(streamed("content-filter"))[-1])
        for body in bodies:
            usage = body["usageMetadata"]
            self.assertNotIn("candidatesTokenCount", usage)
            self.assertEqual((usage["promptTokenCount"], usage["totalTokenCount"]), (31, 31))
        u = gemini_wire.reported_usage("content-filter", "prompt-blocked")
        self.assertEqual((u.input_tokens, u.output_tokens, u.total_tokens), (31, 0, 31))

    def test_stream_error_event(self) -> None:
        """The partial text is followed by a data: {"error": ...} event with an integer code."""
        events = sse_events(streamed("stream-error"))
        self.assertEqual("".join(texts(e) for e in events[:-1]), FX.partial_text)
        self.assertEqual(list(events[-1]), ["error"])
        self.assertEqual(events[-1]["error"]["code"], 503)
        self.assertEqual(events[-1]["error"]["status"], "UNAVAILABLE")
        self.assertEqual(finish_reasons(events), [])

    def test_abort_hangs(self) -> None:
        """Abort hangs before answering a whole request and after some text in a stream."""
        self.assertIsInstance(gemini_wire.reply("abort", "chat", request()), HangReply)
        reply = streamed("abort")
        self.assertTrue(reply.hang)
        self.assertTrue(FX.partial_text.startswith("".join(texts(e) for e in sse_events(reply))))

    def test_error_bodies(self) -> None:
        """Each failure has Gemini's status, google.rpc status and details."""
        table = {
            "rate-limit": (429, "RESOURCE_EXHAUSTED"),
            "quota": (429, "RESOURCE_EXHAUSTED"),
            "auth": (400, "INVALID_ARGUMENT"),
            "overloaded": (503, "UNAVAILABLE"),
            "server-error": (500, "INTERNAL"),
            "context-overflow": (400, "INVALID_ARGUMENT"),
        }
        for scenario, (status, rpc_status) in table.items():
            for stream in (False, True):
                with self.subTest(scenario=scenario, stream=stream):
                    reply = gemini_wire.reply(scenario, "chat", request(stream=stream))
                    assert isinstance(reply, JsonReply)
                    self.assertEqual(reply.status, status)
                    error = json.loads(reply.encoded())["error"]
                    self.assertEqual((error["code"], error["status"]), (status, rpc_status))
                    # An error to a streamed ?alt=sse request says text/event-stream, as real ones do.
                    self.assertEqual(reply.content_type.startswith("text/event-stream"), stream)

    def test_rate_limit_without_details_has_no_delay(self) -> None:
        """The bare 429 variant carries no details, so no RetryInfo, and expects no retry_after."""
        reply = gemini_wire.reply("rate-limit", "chat", request(), "no-details")
        assert isinstance(reply, JsonReply)
        self.assertNotIn("details", json.loads(reply.encoded())["error"])
        expected = {v.name: v.retry_after for v in gemini_wire.variants("rate-limit", "chat")}
        self.assertEqual(expected, {"retry-info": FX.retry_after, "no-details": None})

    def test_rate_limit_and_quota_differ_by_details(self) -> None:
        """A rate limit says PerMinute and retryDelay 7s; an exhausted quota says PerDay."""

        def details(scenario: str) -> Dict[str, Dict[str, Any]]:
            error = json.loads(whole(scenario).encoded())["error"]
            return {d["@type"].rsplit(".", 1)[1]: d for d in error["details"]}

        rate, quota = details("rate-limit"), details("quota")
        self.assertIn("PerMinute", rate["QuotaFailure"]["violations"][0]["quotaId"])
        self.assertEqual(rate["RetryInfo"]["retryDelay"], "7s")
        self.assertIn("PerDay", quota["QuotaFailure"]["violations"][0]["quotaId"])

    def test_invalid_key_is_a_400_with_error_info(self) -> None:
        """A wrong key is 400 INVALID_ARGUMENT with ErrorInfo reason API_KEY_INVALID, as Gemini sends it."""
        error = json.loads(whole("auth").encoded())["error"]
        reasons = [d.get("reason") for d in error["details"]]
        self.assertIn("API_KEY_INVALID", reasons)

    def test_without_alt_sse_the_stream_is_a_json_array(self) -> None:
        """:streamGenerateContent without alt=sse streams one JSON array of responses."""
        reply = streamed("text", query="")
        body = json.loads(b"".join(reply.chunks))
        self.assertIsInstance(body, list)
        self.assertEqual("".join(texts(e) for e in body), FX.text)

    def test_bytes_are_written_as_google_writes_them(self) -> None:
        """SSE JSON spaces each colon, a call reads name, args, id, and a whole body ends in a newline."""
        data = b"".join(gemini_wire.reply("tool-call", "stream", request(stream=True), "id").chunks).decode()
        self.assertTrue(data.startswith('data: {"candidates": [{"content": {"parts": [{"functionCall": '))
        self.assertIn('{"name": "get_weather","args": {"city": "Paris","unit": "celsius"},"id": ', data)
        for scenario in ("text", "auth"):
            with self.subTest(scenario=scenario):
                self.assertTrue(whole(scenario).encoded().endswith(b"}\n"))

    def test_the_array_form_ends_each_element_in_a_newline(self) -> None:
        """Without alt=sse each element ends in a newline before the comma or the bracket."""
        data = b"".join(streamed("text", query="").chunks)
        self.assertTrue(data.startswith(b"[{\n"))
        self.assertEqual(data.count(b"}\n,\r\n{"), len(json.loads(data)) - 1)
        self.assertTrue(data.endswith(b"}\n]"))

    def test_earlier_events_count_the_tokens_so_far(self) -> None:
        """Each event before the last counts more candidate tokens than the one before it."""
        counts = [e["usageMetadata"]["candidatesTokenCount"] for e in sse_events(streamed("text"))]
        self.assertEqual(counts[:-1], sorted(set(counts[:-1])))
        self.assertEqual(counts[-1], FX.usage.output_tokens)

    def test_a_max_tokens_turn_may_have_no_parts(self) -> None:
        """The no-parts variant is content {role: model}, MAX_TOKENS, and every output token a thought."""
        reply = gemini_wire.reply("truncated-tool-call", "chat", request(), "no-parts")
        assert isinstance(reply, JsonReply)
        body = json.loads(reply.encoded())
        (one,) = body["candidates"]
        self.assertEqual(one["content"], {"role": "model"})
        self.assertEqual(one["finishReason"], "MAX_TOKENS")
        usage = body["usageMetadata"]
        self.assertNotIn("candidatesTokenCount", usage)
        self.assertEqual((usage["thoughtsTokenCount"], usage["totalTokenCount"]), (17, 48))
        variant = gemini_wire.variant("truncated-tool-call", "chat", "no-parts")
        self.assertEqual((variant.text, variant.may_fail), ("", True))
        self.assertEqual([v.name for v in gemini_wire.variants("truncated-tool-call", "stream")], [""])

    def test_the_rate_limit_details_come_in_the_quoted_order(self) -> None:
        """The per-minute 429 carries QuotaFailure, Help, then RetryInfo, as the bodies quoted whole do."""
        error = json.loads(whole("rate-limit").encoded())["error"]
        kinds = [d["@type"].rsplit(".", 1)[1] for d in error["details"]]
        self.assertEqual(kinds, ["QuotaFailure", "Help", "RetryInfo"])
        self.assertEqual(gemini_wire.variant("rate-limit", "chat", "retry-info").source_kind, "issue")

class GeminiRequestCheckTest(unittest.TestCase):
    def test_sdk_request_passes(self) -> None:
        """The request google-genai sends has no problems, under v1 and v1beta, key in header or query."""
        cases = {
            "v1beta": request(),
            "v1": request(version="v1"),
            "stream": request(stream=True),
            "query key": request(query="key=test", headers={}),
            "gateway prefix": RecordedRequest(
                "POST",
                f"/gateway/v1beta/models/{MODEL}:generateContent",
                "",
                {"x-goog-api-key": "k"},
                json.dumps(sdk_body()).encode(),
                "HTTP/2",
            ),
        }
        for name, req in cases.items():
            with self.subTest(name):
                self.assertTrue(gemini_wire.is_generation(req))
                self.assertEqual(gemini_wire.check_request(req, MODEL), [])

    def test_schema_form_with_upper_case_types_passes(self) -> None:
        """The Schema form (parameters, types like OBJECT) counts as the fixture schema."""
        body = sdk_body()
        decl = body["tools"][0]["functionDeclarations"][0]
        schema = decl.pop("parameters_json_schema")
        schema = json.loads(
            json.dumps(schema).replace('"object"', '"OBJECT"').replace('"string"', '"STRING"')
        )
        decl["parameters"] = schema
        self.assertEqual(gemini_wire.check_request(request(body=body), MODEL), [])

    def test_problems_are_reported(self) -> None:
        """Each wrong request yields one sentence naming what was expected."""
        no_tools = sdk_body()
        del no_tools["tools"]
        system_role = sdk_body()
        system_role["contents"].insert(0, {"role": "system", "parts": [{"text": FX.system}]})
        wrong_question = sdk_body()
        wrong_question["contents"][0]["parts"][0]["text"] = "hello"
        wrong_schema = sdk_body()
        wrong_schema["tools"][0]["functionDeclarations"][0]["parameters_json_schema"] = {"type": "object"}
        table = {
            "model 'conformance-model' in the path": request(model="other"),
            "?alt=sse": request(stream=True, query=""),
            "x-goog-api-key": request(headers={}),
            "expected POST": request(method="GET"),
            "functionDeclarations": request(body=no_tools),
            "systemInstruction": request(body=system_role),
            "What is the weather": request(body=wrong_question),
            "get_weather parameters": request(body=wrong_schema),
        }
        for expected, req in table.items():
            with self.subTest(expected):
                problems = gemini_wire.check_request(req, MODEL)
                self.assertEqual(len(problems), 1, problems)
                self.assertIn(expected, problems[0])

    def test_other_paths_are_not_generation(self) -> None:
        """countTokens and models.get are not the scenario's call and get plausible answers."""
        count = RecordedRequest("POST", f"/v1beta/models/{MODEL}:countTokens", "", {}, b"{}", "HTTP/1.1")
        get = RecordedRequest("GET", f"/v1beta/models/{MODEL}", "", {}, b"", "HTTP/1.1")
        other = RecordedRequest("GET", "/v1beta/files", "", {}, b"", "HTTP/1.1")
        self.assertFalse(gemini_wire.is_generation(count))
        self.assertEqual(json.loads(gemini_wire.aux_reply(count).encoded())["totalTokens"], 31)  # type: ignore[union-attr]
        self.assertEqual(json.loads(gemini_wire.aux_reply(get).encoded())["name"], f"models/{MODEL}")  # type: ignore[union-attr]
        missing = gemini_wire.aux_reply(other)
        assert isinstance(missing, JsonReply)
        self.assertEqual(missing.status, 404)


if __name__ == "__main__":
    unittest.main()


class ReasoningShapeTests(unittest.TestCase):
    def parts(self, body: Dict[str, Any]) -> List[Dict[str, Any]]:
        return list(body["candidates"][0]["content"]["parts"])

    def test_gemini_3_signs_the_answer_on_its_last_part(self) -> None:
        """Whole, the signature sits on the text part; streamed, on one last empty part with the finish."""
        signature = gemini_wire.variant("reasoning", "chat", "signature").reasoning[0].signature
        whole = scenario_reply(gemini_wire, "reasoning", "chat", request(), "signature")
        assert isinstance(whole, JsonReply)
        body = json.loads(whole.body)
        self.assertEqual(self.parts(body), [{"text": FX.text, "thoughtSignature": signature}])
        streamed = scenario_reply(gemini_wire, "reasoning", "stream", request(stream=True), "signature")
        assert isinstance(streamed, StreamReply)
        events = sse_events(streamed)
        self.assertEqual(self.parts(events[-1]), [{"text": "", "thoughtSignature": signature}])
        self.assertEqual(events[-1]["candidates"][0]["finishReason"], "STOP")
        self.assertEqual("".join(texts(e) for e in events), FX.text)
        self.assertTrue(all("finishReason" not in e["candidates"][0] for e in events[:-1]))

    def test_a_thought_summary_comes_before_the_answer(self) -> None:
        """The thought parts, the signature on the last, come first; the answer after them."""
        item = gemini_wire.variant("reasoning", "stream", "thought-summary").reasoning[0]
        streamed = scenario_reply(gemini_wire, "reasoning", "stream", request(stream=True), "thought-summary")
        assert isinstance(streamed, StreamReply)
        parts = [p for e in sse_events(streamed) for p in self.parts(e)]
        thoughts = [p for p in parts if p.get("thought")]
        self.assertEqual("".join(p["text"] for p in thoughts), item.text)
        self.assertEqual(thoughts[-1]["thoughtSignature"], item.signature)
        self.assertEqual(parts[: len(thoughts)], thoughts)
        self.assertEqual("".join(p["text"] for p in parts[len(thoughts) :]), FX.text)
