"""The Azure OpenAI wires, as pure functions: Azure's shapes around OpenAI's, its failures, its routes."""

from __future__ import annotations

import json
import re
import unittest
from typing import Any, Dict, List, Optional

from conformance._multiturn import MULTI_TURN, multi_turn_reply
from conformance.cases import scenario_reply
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.fixture import conformance_request
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.reference._decoders import SSEDecoder
from conformance.reference.azure_openai import AzureOpenAIChatBackend, AzureOpenAIResponsesBackend
from conformance.scenarios import SCENARIOS
from conformance.wires._turns import ScriptedCall, ScriptedTurn, play_turn
from conformance.wires.azure_openai import azure_openai_chat_wire as CHAT
from conformance.wires.azure_openai import azure_openai_responses_wire as RESPONSES

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MODEL = "conformance-model"


def sent(backend: Any, stream: bool, headers: Optional[Dict[str, str]] = None) -> RecordedRequest:
    """The request ``backend`` (a reference backend) sends for the fixture question."""
    from urllib.parse import urlsplit

    chat = conformance_request(MODEL)
    url = urlsplit(backend.url(chat, stream))
    body = json.dumps(backend.body(chat, stream)).encode()
    sent_headers = backend.headers(stream) if headers is None else headers
    return RecordedRequest("POST", url.path, url.query, sent_headers, body, "HTTP/1.1")


def chat_request(stream: bool = False, **overrides: Any) -> RecordedRequest:
    return sent(AzureOpenAIChatBackend("http://127.0.0.1:1"), stream, **overrides)


def responses_request(stream: bool = False) -> RecordedRequest:
    return sent(AzureOpenAIResponsesBackend("http://127.0.0.1:1"), stream)


def data_lines(reply: StreamReply) -> List[str]:
    decoder = SSEDecoder()
    return [event.data for chunk in reply.chunks for event in decoder.feed(chunk)]


def is_sorted(value: Any, skip: str = "prompt_filter_results") -> bool:
    """Every object's keys in alphabetical order, but for the value of ``skip`` and the offsets."""
    if isinstance(value, dict):
        keys = list(value)
        return keys == sorted(keys) and all(
            is_sorted(v) for k, v in value.items() if k not in (skip, "content_filter_offsets")
        )
    if isinstance(value, list):
        return all(is_sorted(v) for v in value)
    return True


class ChatReplyTests(unittest.TestCase):
    def test_every_scenario_answers_in_both_forms(self) -> None:
        """Each scenario Azure's Chat has answers whole and streamed; quota and reasoning it has not."""
        self.assertIsNotNone(CHAT.absent("quota"))
        self.assertIn("no quota case", CHAT.absent("quota") or "")
        self.assertIsNotNone(CHAT.absent("reasoning"))
        for scenario in SCENARIOS:
            if SCENARIOS[scenario].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            if CHAT.absent(scenario) is not None:
                continue
            for stream in (False, True):
                with self.subTest(scenario=scenario, stream=stream):
                    mode = "stream" if stream else "chat"
                    if scenario in MULTI_TURN:
                        reply = multi_turn_reply(CHAT, scenario, chat_request(stream), "", [])
                    else:
                        reply = scenario_reply(CHAT, scenario, mode, chat_request(stream))
                    self.assertIsInstance(reply, (JsonReply, StreamReply, HangReply))

    def test_a_whole_reply_is_azures_body(self) -> None:
        """Alphabetical keys, prompt_filter_results with prompt_index first, filter results per choice."""
        reply = CHAT.reply("text", "chat", chat_request())
        assert isinstance(reply, JsonReply) and isinstance(reply.body, bytes)
        self.assertTrue(reply.body.endswith(b"}\n"))
        body = json.loads(reply.body)
        self.assertTrue(is_sorted(body), body)
        self.assertNotIn("service_tier", body)
        self.assertEqual(list(body["prompt_filter_results"][0]), ["prompt_index", "content_filter_results"])
        choice = body["choices"][0]
        self.assertEqual(choice["message"]["content"], FX.text)
        self.assertEqual(choice["content_filter_results"]["hate"], {"filtered": False, "severity": "safe"})
        headers = dict(reply.header_items())
        self.assertRegex(headers["apim-request-id"], UUID)
        self.assertRegex(headers["x-request-id"], UUID)

    def test_a_stream_opens_with_the_prompts_filter_results(self) -> None:
        """The first chunk has no choices, no id and the prompt's results; the role chunk follows."""
        reply = CHAT.reply("text", "stream", chat_request(True))
        assert isinstance(reply, StreamReply)
        lines = data_lines(reply)
        first = json.loads(lines[0])
        self.assertEqual(
            (first["choices"], first["created"], first["id"], first["model"], first["object"]),
            ([], 0, "", "", ""),
        )
        jailbreak = first["prompt_filter_results"][0]["content_filter_results"]["jailbreak"]
        self.assertEqual(list(jailbreak), ["filtered", "detected"])
        role = json.loads(lines[1])
        self.assertEqual(role["choices"][0]["delta"]["role"], "assistant")
        texts = [json.loads(line) for line in lines[1:-1]]
        self.assertTrue(all(is_sorted(chunk) for chunk in texts))
        for chunk in texts:
            for choice in chunk["choices"]:
                # Results on text, an empty object on the role and finish chunks.
                self.assertEqual(bool(choice["content_filter_results"]), bool(choice["delta"].get("content")))
        self.assertEqual(lines[-1], "[DONE]")
        self.assertEqual(
            "".join(c["choices"][0]["delta"].get("content") or "" for c in texts if c["choices"]), FX.text
        )

    def test_the_asynchronous_filter_sends_an_annotation_without_a_delta(self) -> None:
        """In the async-filter shape text carries no results, and one choice has no delta at all."""
        reply = CHAT.reply("text", "stream", chat_request(True), "async-filter")
        assert isinstance(reply, StreamReply)
        chunks = [json.loads(line) for line in data_lines(reply)[:-1]]
        annotations = [c for c in chunks if c["choices"] and "delta" not in c["choices"][0]]
        self.assertEqual(len(annotations), 1)
        choice = annotations[0]["choices"][0]
        self.assertEqual(
            list(choice["content_filter_offsets"]), ["check_offset", "start_offset", "end_offset"]
        )
        self.assertIsNone(choice["finish_reason"])
        self.assertFalse(
            any("content_filter_results" in c["choices"][0] for c in chunks if c["choices"] and c["id"])
        )

    def test_a_filtered_whole_reply_keeps_the_role_and_no_content(self) -> None:
        """The output filter's reply has a message with its role only, and the category it filtered
        or no filter results at all; no choice without a message is sent (its one capture is hand-edited)."""
        self.assertEqual(
            [v.name for v in CHAT.variants("content-filter", "chat")],
            ["message-without-content", "unpopulated-results", "prompt-filtered-400"],
        )
        reply = CHAT.reply("content-filter", "chat", chat_request())
        assert isinstance(reply, JsonReply) and isinstance(reply.body, bytes)
        choice = json.loads(reply.body)["choices"][0]
        self.assertEqual(choice["message"], {"role": "assistant"})
        self.assertEqual(choice["finish_reason"], "content_filter")
        self.assertEqual(choice["content_filter_results"]["hate"], {"filtered": True, "severity": "high"})
        reply = CHAT.reply("content-filter", "chat", chat_request(), "unpopulated-results")
        assert isinstance(reply, JsonReply) and isinstance(reply.body, bytes)
        choice = json.loads(reply.body)["choices"][0]
        self.assertEqual(list(choice), ["finish_reason", "index", "logprobs", "message"])
        self.assertEqual(choice["message"], {"role": "assistant"})

    def test_a_prompt_the_filter_refused_is_a_400_whole_or_streamed(self) -> None:
        """Azure's 400 content_filter: param prompt, the status in the body, the filter's inner error;
        a reply ending content_filter and a non-retryable invalid_request are both sound."""
        for mode, stream in (("chat", False), ("stream", True)):
            with self.subTest(mode=mode):
                variant = CHAT.variants("content-filter", mode)[-1]
                self.assertEqual(variant.name, "prompt-filtered-400")
                assert variant.either is not None
                self.assertEqual(variant.either.error_kinds, ("invalid_request",))
                self.assertEqual((variant.text, variant.reports_usage), ("", False))
                reply = CHAT.reply("content-filter", mode, chat_request(stream), variant.name)
                assert isinstance(reply, JsonReply)
                error = reply.body["error"]
                self.assertEqual(reply.status, 400)
                self.assertEqual(
                    (error["code"], error["param"], error["type"], error["status"]),
                    ("content_filter", "prompt", None, 400),
                )
                self.assertEqual(error["innererror"]["code"], "ResponsibleAIPolicyViolation")
                self.assertIn("apim-request-id", reply.headers or {})

    def test_a_filtered_stream_ends_with_the_filtered_category(self) -> None:
        """A streamed filter is the role chunk, then content_filter with the category filtered."""
        reply = CHAT.reply("content-filter", "stream", chat_request(True))
        assert isinstance(reply, StreamReply)
        chunks = [json.loads(line) for line in data_lines(reply)[:-1]]
        finish = [c["choices"][0] for c in chunks if c["choices"] and c["choices"][0].get("finish_reason")]
        self.assertEqual([f["finish_reason"] for f in finish], ["content_filter"])
        self.assertTrue(finish[0]["content_filter_results"]["hate"]["filtered"])

    def test_the_429_comes_with_a_delay_and_without(self) -> None:
        """Azure's own 429: a string code and no type, with retry-after (7 s, in the 2023-24 wording or
        the 2025 one) or without (with the token limit's own reset header, which no client reads)."""
        expected = {
            "retry-after": 7.0,
            "retry-after-aiservices": 7.0,
            "no-retry-after": None,
            "reset-tokens": None,
        }
        self.assertEqual({v.name: v.retry_after for v in CHAT.variants("rate-limit", "chat")}, expected)
        for name, delay in expected.items():
            with self.subTest(variant=name):
                reply = CHAT.reply("rate-limit", "chat", chat_request(), name)
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 429)
                self.assertEqual(set(reply.body["error"]), {"code", "message"})
                self.assertEqual(reply.body["error"]["code"], "429")
                self.assertEqual(CHAT.retry_after_sent(reply), delay)
        aiservices = CHAT.reply("rate-limit", "chat", chat_request(), "retry-after-aiservices")
        assert isinstance(aiservices, JsonReply)
        self.assertIn("AIServices S0 pricing tier", aiservices.body["error"]["message"])
        reset = CHAT.reply("rate-limit", "chat", chat_request(), "reset-tokens")
        assert isinstance(reset, JsonReply)
        headers = dict(reset.headers or {})
        self.assertEqual(headers["x-rate-limit-reset-tokens"], "7")
        self.assertEqual(headers["policy-id"], "DeploymentRatelimit-Token")
        self.assertNotIn("retry-after", headers)

    def test_a_bad_key_comes_in_three_bodies(self) -> None:
        """Azure's 401: code "401", code "Unauthorized", or API Management's top-level statusCode body."""
        for wire in (CHAT, RESPONSES):
            self.assertEqual(
                [v.name for v in wire.variants("auth", "chat")],
                ["access-denied-401", "unauthorized-code", "apim-missing-key"],
            )
        worded = CHAT.reply("auth", "chat", chat_request(), "unauthorized-code")
        assert isinstance(worded, JsonReply)
        self.assertEqual((worded.status, worded.body["error"]["code"]), (401, "Unauthorized"))
        apim = RESPONSES.reply("auth", "stream", responses_request(True), "apim-missing-key")
        assert isinstance(apim, JsonReply)
        self.assertEqual((apim.status, list(apim.body)), (401, ["statusCode", "message"]))
        self.assertIn("missing subscription key", apim.body["message"])

    def test_the_other_failures_have_azures_statuses_and_bodies(self) -> None:
        """A bad key is Azure's own 401; the model's failures are OpenAI's bodies with Azure's link."""
        table = {"auth": (401, "401"), "overloaded": (503, None), "server-error": (500, None)}
        table["context-overflow"] = (400, "context_length_exceeded")
        for scenario, (status, code) in table.items():
            with self.subTest(scenario=scenario):
                reply = CHAT.reply(scenario, "chat", chat_request())
                assert isinstance(reply, JsonReply)
                self.assertEqual((reply.status, reply.body["error"]["code"]), (status, code))
        overloaded = CHAT.reply("overloaded", "chat", chat_request())
        assert isinstance(overloaded, JsonReply)
        self.assertIn("Azure support request", overloaded.body["error"]["message"])

    def test_a_stream_fails_with_openais_error_object(self) -> None:
        """A failing Azure stream ends with the in-stream server_error, after the partial text."""
        reply = CHAT.reply("stream-error", "stream", chat_request(True))
        assert isinstance(reply, StreamReply)
        lines = data_lines(reply)
        self.assertNotIn("[DONE]", lines)
        error = json.loads(lines[-1])["error"]
        self.assertEqual((error["type"], error["code"]), ("server_error", None))


class ChatTurnTests(unittest.TestCase):
    def test_a_call_turn_opens_the_message_on_the_call_after_the_prompt_chunk(self) -> None:
        """With no text, the call's first chunk carries the role, though the prompt's chunk came first."""
        turn = ScriptedTurn(
            calls=(ScriptedCall("call_Q2x9mVb0LkE7rT4sNw8yZc1d", "echo_json", '{"text": "a"}'),)
        )
        played = play_turn(CHAT, turn, chat_request(True))
        assert isinstance(played, StreamReply)
        chunks = [json.loads(line) for line in data_lines(played)[:-1]]
        self.assertEqual(chunks[0]["choices"], [])
        delta = chunks[1]["choices"][0]["delta"]
        self.assertEqual(
            (delta["role"], delta["tool_calls"][0]["id"]), ("assistant", "call_Q2x9mVb0LkE7rT4sNw8yZc1d")
        )

    def test_a_stream_cut_inside_a_call_keeps_its_first_fragment(self) -> None:
        """inside-tool-call keeps the prompt's chunk, the call's first chunk and its first fragment."""
        reply = CHAT.reply("stream-cut", "stream", chat_request(True), "inside-tool-call")
        assert isinstance(reply, StreamReply)
        data = b"".join(reply.chunks).decode()
        whole = [e for e in data.split("\n\n")[:-1]]
        self.assertEqual(len(whole), 3)
        self.assertIn('"arguments":"{\\"city\\"', whole[2])


class ResponsesReplyTests(unittest.TestCase):
    def test_every_scenario_answers_in_both_forms(self) -> None:
        """Each scenario Azure's Responses has answers whole and streamed; it has no quota case."""
        self.assertIsNotNone(RESPONSES.absent("quota"))
        self.assertIsNone(RESPONSES.absent("reasoning"))
        for scenario in SCENARIOS:
            if SCENARIOS[scenario].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            if RESPONSES.absent(scenario) is not None:
                continue
            for stream in (False, True):
                with self.subTest(scenario=scenario, stream=stream):
                    mode = "stream" if stream else "chat"
                    if scenario in MULTI_TURN:
                        reply = multi_turn_reply(RESPONSES, scenario, responses_request(stream), "", [])
                    else:
                        reply = scenario_reply(RESPONSES, scenario, mode, responses_request(stream))
                    self.assertIsInstance(reply, (JsonReply, StreamReply, HangReply))

    def test_a_whole_response_is_pretty_printed_with_its_content_filters(self) -> None:
        """The body is indented JSON, content_filters after completed_at: the prompt's, the completion's."""
        reply = RESPONSES.reply("text", "chat", responses_request())
        assert isinstance(reply, JsonReply) and isinstance(reply.body, bytes)
        self.assertTrue(reply.body.startswith(b'{\n  "id": "resp_'))
        body = json.loads(reply.body)
        keys = list(body)
        self.assertEqual(keys[keys.index("completed_at") + 1], "content_filters")
        self.assertEqual([f["source_type"] for f in body["content_filters"]], ["prompt", "completion"])

    def test_a_stream_says_content_filters_null_until_done(self) -> None:
        """response.created carries content_filters null; response.completed carries the results."""
        reply = RESPONSES.reply("text", "stream", responses_request(True))
        assert isinstance(reply, StreamReply)
        events = [json.loads(line) for line in data_lines(reply)]
        self.assertIsNone(events[0]["response"]["content_filters"])
        self.assertEqual(len(events[-1]["response"]["content_filters"]), 2)

    def test_every_failure_carries_azures_headers(self) -> None:
        """Each failure, the model's context overflow too, comes with apim-request-id and the region,
        never api.openai.com's req_ id or openai-processing-ms."""
        for scenario in ("auth", "rate-limit", "overloaded", "server-error", "context-overflow"):
            for stream in (False, True):
                with self.subTest(scenario=scenario, stream=stream):
                    mode = "stream" if stream else "chat"
                    reply = scenario_reply(RESPONSES, scenario, mode, responses_request(stream))
                    headers = dict(getattr(reply, "headers", None) or {})
                    self.assertIn("apim-request-id", headers)
                    self.assertIn("x-ms-region", headers)
                    self.assertNotIn("openai-processing-ms", headers)
                    self.assertFalse(headers.get("x-request-id", "").startswith("req_"), headers)

    def test_its_content_filter_is_not_played_without_a_capture(self) -> None:
        """No Azure Responses content filter was seen: the case is absent, saying why."""
        self.assertIn("no capture", RESPONSES.absent("content-filter") or "")
        self.assertIsNone(RESPONSES.reply("content-filter", "chat", responses_request()))

    def test_its_429_carries_no_delay(self) -> None:
        """Azure's Responses 429 is Azure's body without retry-after, as reported."""
        reply = RESPONSES.reply("rate-limit", "chat", responses_request())
        assert isinstance(reply, JsonReply)
        self.assertEqual((reply.status, reply.body["error"]["code"]), (429, "429"))
        self.assertIsNone(RESPONSES.retry_after_sent(reply))


class RequestCheckTests(unittest.TestCase):
    def test_the_reference_requests_pass(self) -> None:
        """The reference backends' requests pass, whole and streamed, on both wires."""
        for stream in (False, True):
            self.assertEqual(CHAT.check_request(chat_request(stream), MODEL), [])
            self.assertEqual(RESPONSES.check_request(responses_request(stream), MODEL), [])

    def test_each_route_azure_takes_passes(self) -> None:
        """The v1 paths, and Responses' /openai/responses with its api-version, pass too."""
        chat = chat_request()
        v1 = RecordedRequest(
            "POST", "/openai/v1/chat/completions", "", {"api-key": "k"}, chat.body, "HTTP/1.1"
        )
        self.assertEqual(CHAT.check_request(v1, MODEL), [])
        body = responses_request().body
        versioned = RecordedRequest(
            "POST", "/openai/responses", "api-version=preview", {"api-key": "k"}, body, "1.1"
        )
        self.assertEqual(RESPONSES.check_request(versioned, MODEL), [])

    def test_each_defect_is_named(self) -> None:
        """A missing api-version, another deployment, api.openai.com's path and a missing key are named."""
        good = chat_request()

        def variant(path: str, query: str, headers: Dict[str, str]) -> RecordedRequest:
            return RecordedRequest("POST", path, query, headers, good.body, "HTTP/1.1")

        key = {"api-key": "k"}
        table = [
            (variant(good.path, "", key), "expected the query api-version=..."),
            (
                variant("/openai/deployments/other/chat/completions", good.query, key),
                "expected the deployment 'conformance-model' in the path, got 'other'",
            ),
            (variant("/v1/chat/completions", "", key), "that is api.openai.com's path"),
            (variant(good.path, good.query, {}), "expected the key in an api-key header"),
        ]
        for request, words in table:
            with self.subTest(words=words):
                problems = CHAT.check_request(request, MODEL)
                self.assertEqual(len(problems), 1, problems)
                self.assertIn(words, problems[0])

    def test_the_v1_path_needs_the_deployment_in_the_body(self) -> None:
        """Where the path names no deployment, the body's model must."""
        body = json.dumps({**json.loads(responses_request().body), "model": "gpt-4o"}).encode()
        request = RecordedRequest("POST", "/openai/v1/responses", "", {"api-key": "k"}, body, "HTTP/1.1")
        self.assertEqual(
            RESPONSES.check_request(request, MODEL),
            [f"expected model {MODEL!r} (the deployment, which the path does not name), got 'gpt-4o'"],
        )


if __name__ == "__main__":
    unittest.main()
