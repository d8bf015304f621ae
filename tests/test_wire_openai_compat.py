"""The OpenAI-compatible servers' shapes on the OpenAI Chat wire: which wire plays them, and
their bytes against the recordings they come from."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import unittest
from typing import Any, Dict, List, Tuple

from conformance.cases import BackendConformanceTarget, ConformanceCase, scenario_reply
from conformance.contract import ChatRequest, LLMError, StreamChunk
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.fixture import conformance_request
from conformance.provider.replies import JsonReply, StreamReply
from conformance.reference import REFERENCE_BACKENDS
from conformance.reference.openai_chat import OpenAIChatBackend, _PartialCall
from conformance.wires.openai_chat import OpenAIChatWire, openai_chat_wire
from conformance.wires.openai_chat._servers import SERVER_ROWS, SERVERS

from .test_wire_openai_chat import events, good_body, request

COMPATIBLE = OpenAIChatWire(servers=OpenAIChatWire.SERVERS)
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
SERVER_NAMES = ("mistral", "groq", "deepseek")


def stream_of(scenario: str, variant: str, *, usage: bool = True) -> Tuple[StreamReply, List[Any]]:
    """The server's stream for ``scenario``, and its ``data:`` payloads (JSON decoded, ``[DONE]`` kept)."""
    body = good_body(True)
    if not usage:
        del body["stream_options"]
    reply = scenario_reply(COMPATIBLE, scenario, "stream", request(body), variant)
    assert isinstance(reply, StreamReply)
    return reply, [d if d == "[DONE]" else json.loads(d) for d in events(reply)]


def whole_of(scenario: str, variant: str) -> JsonReply:
    reply = scenario_reply(COMPATIBLE, scenario, "chat", request(good_body()), variant)
    assert isinstance(reply, JsonReply)
    return reply


def raw(reply: StreamReply) -> bytes:
    return b"".join(reply.chunks)


class TableTests(unittest.TestCase):
    def test_api_openai_com_alone_meets_no_server_shape(self) -> None:
        """The shipped wire and a reasoning_content wire name no server, and have no server rows."""
        for wire in (openai_chat_wire, OpenAIChatWire(reasoning_content=True)):
            with self.subTest(wire=repr(wire)):
                self.assertEqual(wire.servers, ())
                self.assertEqual([v.name for v in wire.variants("text", "stream")], [""])
                self.assertEqual([v.name for v in wire.variants("context-overflow", "stream")], [""])
                names = {v.name for rows in wire.variants_table.values() for v in rows}
                self.assertFalse(names & {"mistral", "groq", "deepseek", "llama-cpp"})

    def test_each_server_adds_its_shapes_after_api_openai_com(self) -> None:
        """Naming servers puts api.openai.com's shape first, then each named server's, in order."""
        self.assertEqual(
            [v.name for v in COMPATIBLE.variants("text", "chat")], ["openai", "mistral", "groq", "deepseek"]
        )
        self.assertEqual(
            [v.name for v in COMPATIBLE.variants("context-overflow", "stream")],
            ["openai", "deepseek", "llama-cpp", "llama-cpp-in-stream", "llama-cpp-error-field", "openrouter"],
        )
        overflow = [v.name for v in COMPATIBLE.variants("context-overflow", "chat")]
        self.assertEqual(overflow, ["openai", "deepseek", "llama-cpp", "openrouter"])
        kept = [v.name for v in COMPATIBLE.variants("stream-error", "stream")]
        own = [v.name for v in openai_chat_wire.variants("stream-error", "stream")]
        self.assertEqual(kept, own + ["llama-cpp", "openrouter", "openrouter-no-choices"])
        # A mode's own row keeps the servers' rows of both modes before it.
        self.assertEqual(
            [v.name for v in COMPATIBLE.variants("text", "stream")],
            ["openai", "mistral", "groq", "deepseek", "openrouter"],
        )
        groq = OpenAIChatWire(servers=("groq",))
        self.assertEqual([v.name for v in groq.variants("tool-call", "stream")], ["openai", "groq"])
        self.assertEqual([v.name for v in groq.variants("stream-error", "stream")], own)
        self.assertEqual(OpenAIChatWire.SERVERS, SERVERS)

    def test_deepseek_turns_the_reasoning_case_on(self) -> None:
        """A wire naming DeepSeek has the reasoning case in DeepSeek's shape, after the generic one."""
        self.assertIsNotNone(OpenAIChatWire(servers=("mistral",)).absent("reasoning"))
        deepseek = OpenAIChatWire(servers=("deepseek",))
        self.assertIsNone(deepseek.absent("reasoning"))
        self.assertEqual([v.name for v in deepseek.variants("reasoning")], ["deepseek"])
        both = OpenAIChatWire(reasoning_content=True, servers=("deepseek",))
        self.assertEqual([v.name for v in both.variants("reasoning")], ["reasoning-content", "deepseek"])
        self.assertIn("servers=('deepseek',)", repr(both))

    def test_an_unknown_server_is_refused_with_the_known_ones(self) -> None:
        """A misspelt server, or a string where a sequence is due, fails at once saying what to write."""
        with self.assertRaisesRegex(
            ValueError, "unknown OpenAI-compatible server 'mistal'.*did you mean 'mistral'"
        ):
            OpenAIChatWire(servers=("mistal",))
        with self.assertRaisesRegex(ValueError, r"write servers=\('groq',\)"):
            OpenAIChatWire(servers="groq")

    def test_every_server_row_says_where_it_was_seen(self) -> None:
        """Each server shape names its server, a source and its kind, and only a known server plays it."""
        for key, rows in SERVER_ROWS.items():
            for server, variant in rows:
                with self.subTest(key=key, variant=variant.name):
                    self.assertIn(server, SERVERS)
                    self.assertTrue(variant.title and variant.source and variant.source_kind)


class MistralTests(unittest.TestCase):
    def test_usage_rides_on_the_finish_chunk_asked_for_or_not(self) -> None:
        """No choices: [] chunk and no usage: null: the finish chunk carries Mistral's usage, also unasked."""
        for usage in (True, False):
            with self.subTest(include_usage=usage):
                _, chunks = stream_of("text", "mistral", usage=usage)
                self.assertEqual(chunks[-1], "[DONE]")
                bodies = chunks[:-1]
                self.assertTrue(all(b["choices"] for b in bodies))
                self.assertEqual([("usage" in b) for b in bodies], [False] * (len(bodies) - 1) + [True])
                last = bodies[-1]
                self.assertEqual(last["choices"][0]["finish_reason"], "stop")
                self.assertEqual(last["choices"][0]["delta"], {"content": ""})
                self.assertEqual(list(last["usage"]), ["prompt_tokens", "total_tokens", "completion_tokens"])
                self.assertEqual(list(last["usage"].values()), [31, 48, 17])
                self.assertEqual(
                    "".join(b["choices"][0]["delta"].get("content") or "" for b in bodies), FX.text
                )

    def test_the_envelope_is_mistrals_not_openais(self) -> None:
        """A 32-hex id, Mistral's key order, and none of api.openai.com's extra fields."""
        reply, chunks = stream_of("text", "mistral")
        first = chunks[0]
        self.assertEqual(list(first), ["id", "object", "created", "model", "choices"])
        self.assertRegex(first["id"], r"^[0-9a-f]{32}$")
        self.assertEqual(list(first["choices"][0]), ["index", "delta", "finish_reason", "logprobs"])
        self.assertNotIn(b"obfuscation", raw(reply))
        self.assertNotIn(b"service_tier", raw(reply))
        self.assertNotIn("x-request-id", reply.headers or {})

    def test_the_call_comes_whole_with_the_finish_reason_and_no_index(self) -> None:
        """One chunk carries the whole call (no index, no type), the finish reason and the usage."""
        _, chunks = stream_of("tool-call", "mistral")
        self.assertEqual(len(chunks), 3)
        choice = chunks[1]["choices"][0]
        call = choice["delta"]["tool_calls"][0]
        self.assertEqual(choice["delta"]["content"], None)
        self.assertEqual(list(call), ["id", "function"])
        self.assertRegex(call["id"], r"^[A-Za-z0-9]{9}$")
        self.assertEqual(json.loads(call["function"]["arguments"]), dict(FX.tool_arguments))
        self.assertEqual(choice["finish_reason"], "tool_calls")
        self.assertIn("usage", chunks[1])

    def test_the_whole_reply_keeps_mistrals_order(self) -> None:
        """Whole: usage before object, tool_calls null beside the text, no content key on a call."""
        text = whole_of("text", "mistral").body
        self.assertEqual(list(text), ["id", "created", "model", "usage", "object", "choices"])
        self.assertEqual(
            text["choices"][0]["message"], {"role": "assistant", "tool_calls": None, "content": FX.text}
        )
        call = whole_of("tool-call", "mistral").body["choices"][0]["message"]
        self.assertEqual(list(call), ["role", "tool_calls"])
        self.assertEqual(list(call["tool_calls"][0]), ["id", "function"])


class GroqTests(unittest.TestCase):
    def test_x_groq_opens_and_closes_the_stream_with_the_usage(self) -> None:
        """x_groq (id, seed) on the first chunk; on the finish chunk, the usage in x_groq and beside it."""
        _, chunks = stream_of("text", "groq", usage=False)
        bodies = chunks[:-1]
        self.assertEqual(list(bodies[0]["x_groq"]), ["id", "seed"])
        self.assertRegex(bodies[0]["x_groq"]["id"], r"^req_01[0-9a-z]{24}$")
        self.assertTrue(all("x_groq" not in b and "usage" not in b for b in bodies[1:-1]))
        last = bodies[-1]
        self.assertEqual(last["x_groq"]["id"], bodies[0]["x_groq"]["id"])
        self.assertEqual(last["usage"], last["x_groq"]["usage"])
        self.assertEqual(
            (
                last["usage"]["prompt_tokens"],
                last["usage"]["completion_tokens"],
                last["usage"]["total_tokens"],
            ),
            (31, 17, 48),
        )
        self.assertIsInstance(last["usage"]["queue_time"], float)
        self.assertRegex(bodies[0]["id"], f"^chatcmpl-{UUID}$")

    def test_the_call_is_whole_with_its_index_last(self) -> None:
        """The role chunk says content null; the call comes whole in one chunk, index after function."""
        _, chunks = stream_of("tool-call", "groq")
        self.assertEqual(chunks[0]["choices"][0]["delta"], {"role": "assistant", "content": None})
        call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
        self.assertEqual(list(call), ["id", "type", "function", "index"])
        self.assertEqual(chunks[2]["choices"][0]["finish_reason"], "tool_calls")

    def test_the_whole_reply_names_groqs_service_tier(self) -> None:
        """Whole: service_tier on_demand, usage_breakdown null and x_groq, after the usage."""
        body = whole_of("text", "groq").body
        self.assertEqual(
            list(body),
            [
                "id",
                "object",
                "created",
                "model",
                "choices",
                "usage",
                "usage_breakdown",
                "system_fingerprint",
                "x_groq",
                "service_tier",
            ],
        )
        self.assertEqual((body["service_tier"], body["usage_breakdown"]), ("on_demand", None))


class DeepSeekTests(unittest.TestCase):
    def test_usage_comes_on_the_finish_chunk_with_the_cache_counts(self) -> None:
        """usage: null on every chunk but the finish chunk, which carries prompt_cache_hit/miss_tokens."""
        _, chunks = stream_of("text", "deepseek")
        bodies = chunks[:-1]
        self.assertTrue(all(b["choices"] for b in bodies))
        self.assertTrue(all(b["usage"] is None for b in bodies[:-1]))
        usage = bodies[-1]["usage"]
        self.assertEqual(
            usage["prompt_cache_hit_tokens"] + usage["prompt_cache_miss_tokens"], usage["prompt_tokens"]
        )
        self.assertRegex(bodies[0]["id"], f"^{UUID}$")

    def test_no_usage_key_unless_asked(self) -> None:
        """Without stream_options.include_usage, no chunk carries a usage key."""
        _, chunks = stream_of("text", "deepseek", usage=False)
        self.assertTrue(all("usage" not in b for b in chunks[:-1]))

    def test_reasoning_then_content_with_a_null_beside_it(self) -> None:
        """The reasoner's deltas: reasoning with content null, then content with reasoning null."""
        reply = scenario_reply(COMPATIBLE, "reasoning", "stream", request(good_body(True)), "deepseek")
        assert isinstance(reply, StreamReply)
        deltas = [json.loads(d)["choices"][0]["delta"] for d in events(reply) if d != "[DONE]"]
        self.assertEqual(deltas[0], {"role": "assistant", "content": None, "reasoning_content": ""})
        thinking = "".join(d["reasoning_content"] for d in deltas if d.get("reasoning_content"))
        self.assertEqual(thinking, FX.thinking)
        answer = [d for d in deltas if d.get("content")]
        self.assertTrue(
            answer and all("reasoning_content" in d and d["reasoning_content"] is None for d in answer)
        )
        self.assertEqual(deltas[-1], {"content": "", "reasoning_content": None})

    def test_the_reasoners_call_keeps_its_index_whole_and_streamed(self) -> None:
        """The tool turn thinks first; its call_00_ call keeps its index whole and streamed."""
        _, chunks = stream_of("tool-call", "deepseek")
        opening = next(c for c in chunks[:-1] if c["choices"][0]["delta"].get("tool_calls"))
        call = opening["choices"][0]["delta"]["tool_calls"][0]
        self.assertRegex(call["id"], r"^call_00_[A-Za-z0-9]{24}$")
        self.assertEqual(call["index"], 0)
        message = whole_of("tool-call", "deepseek").body["choices"][0]["message"]
        self.assertEqual(message["content"], "")
        self.assertEqual(message["reasoning_content"], FX.thinking)
        self.assertEqual(message["tool_calls"][0]["index"], 0)

    def test_a_prompt_too_long_is_a_400_whose_code_repeats_its_type(self) -> None:
        """Whole or streamed, a 400 before any stream, code invalid_request_error: the overflow in words."""
        for mode, body in (("chat", good_body()), ("stream", good_body(True))):
            with self.subTest(mode=mode):
                reply = scenario_reply(COMPATIBLE, "context-overflow", mode, request(body), "deepseek")
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 400)
                error = reply.body["error"]
                self.assertEqual(error["type"], "invalid_request_error")
                self.assertEqual(error["code"], "invalid_request_error")
                self.assertIsNone(error["param"])
                self.assertIn("maximum context length", error["message"])
        (deepseek,) = [v for v in COMPATIBLE.variants("context-overflow", "chat") if v.name == "deepseek"]
        self.assertEqual(deepseek.accepted_kinds("context_overflow"), ("context_overflow", "invalid_request"))


class LlamaCppTests(unittest.TestCase):
    def test_old_builds_send_an_error_field_sse_drops_then_done(self) -> None:
        """Before 2025-09-19: HTTP 200, an error: line (no data:), then data: [DONE], and nothing else."""
        reply, chunks = stream_of("context-overflow", "llama-cpp-error-field")
        self.assertEqual(reply.status, 200)
        body = raw(reply)
        self.assertTrue(body.startswith(b'error: {"code":400,"message":"the request exceeds the available'))
        self.assertTrue(body.endswith(b'"type":"invalid_request_error"}\n\ndata: [DONE]\n\n'))
        self.assertEqual(chunks, ["[DONE]"])  # what an SSE reader sees

    def test_the_in_stream_error_has_no_choices_and_a_done_after_it(self) -> None:
        """2025-09-19 to 2025-10-09: HTTP 200, one data: line with the error object, then [DONE]."""
        reply, chunks = stream_of("context-overflow", "llama-cpp-in-stream")
        self.assertEqual(reply.status, 200)
        self.assertEqual(chunks[1], "[DONE]")
        error = chunks[0]["error"]
        self.assertEqual(list(chunks[0]), ["error"])
        self.assertEqual((error["code"], error["type"]), (400, "exceed_context_size_error"))
        self.assertEqual((error["n_prompt_tokens"], error["n_ctx"]), (9000, 8192))

    def test_current_builds_answer_400_before_the_stream(self) -> None:
        """Since 2025-10-09, whole or streamed: a 400 whose code is the number 400, with both counts."""
        for mode, body in (("chat", good_body()), ("stream", good_body(True))):
            with self.subTest(mode=mode):
                reply = scenario_reply(COMPATIBLE, "context-overflow", mode, request(body), "llama-cpp")
                assert isinstance(reply, JsonReply)
                self.assertEqual((reply.status, reply.content_type), (400, "application/json; charset=utf-8"))
                self.assertEqual(reply.body["error"]["code"], 400)
                self.assertEqual(reply.body["error"]["type"], "exceed_context_size_error")
                self.assertEqual((reply.headers or {}).get("server"), "llama.cpp")

    def test_a_failure_after_text_ends_the_stream_without_done(self) -> None:
        """Text in llama-server's chunks, then a data: line holding only the error; no [DONE] follows."""
        _, chunks = stream_of("stream-error", "llama-cpp")
        self.assertNotIn("[DONE]", chunks)
        self.assertEqual(list(chunks[0])[:3], ["choices", "created", "id"])
        self.assertIn("timings", chunks[0])
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
        self.assertEqual(text, FX.partial_text)
        self.assertEqual(
            chunks[-1],
            {"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}},
        )


class OpenRouterTests(unittest.TestCase):
    def test_comment_lines_come_before_the_data(self) -> None:
        """The stream opens with two SSE comment lines, then data: chunks a comment-blind reader sees."""
        reply, chunks = stream_of("text", "openrouter")
        comment = b": OPENROUTER PROCESSING\n\n"
        self.assertTrue(raw(reply).startswith(comment + comment + b"data: {"))
        self.assertEqual(chunks[-1], "[DONE]")
        self.assertEqual(list(chunks[0])[:5], ["id", "provider", "model", "object", "created"])

    def test_each_chunk_carries_gen_id_provider_and_native_finish_reason(self) -> None:
        """Every chunk has a gen- id and the upstream's name; every delta repeats the role."""
        _, chunks = stream_of("text", "openrouter")
        for chunk in chunks[:-1]:
            self.assertRegex(chunk["id"], r"^gen-\d{10}-[A-Za-z0-9]{20}$")
            self.assertEqual(chunk["provider"], "OpenAI")
            choice = chunk["choices"][0]
            self.assertEqual(choice["delta"]["role"], "assistant")
            self.assertEqual(choice["native_finish_reason"], choice["finish_reason"])
        text = "".join(c["choices"][0]["delta"]["content"] for c in chunks[:-1])
        self.assertEqual(text, FX.text)

    def test_the_usage_comes_unasked_after_the_finish_with_a_null_reason(self) -> None:
        """The finish chunk says stop; one more carries the usage and finish_reason null, asked or not."""
        for usage in (True, False):
            with self.subTest(include_usage=usage):
                _, chunks = stream_of("text", "openrouter", usage=usage)
                finish, last = chunks[-3], chunks[-2]
                self.assertEqual(finish["choices"][0]["finish_reason"], "stop")
                self.assertNotIn("usage", finish)
                self.assertIsNone(last["choices"][0]["finish_reason"])
                self.assertEqual(last["usage"]["total_tokens"], FX.usage.total_tokens)
                self.assertIn("cost", last["usage"])
        self.assertTrue(COMPATIBLE.variant("text", "stream", "openrouter").usage_unasked)

    def test_a_failure_in_the_stream_is_a_chunk_beside_its_choice(self) -> None:
        """After the text, a chunk with a top-level error and finish_reason error; no [DONE] follows."""
        _, chunks = stream_of("stream-error", "openrouter")
        self.assertNotIn("[DONE]", chunks)
        last = chunks[-1]
        error = {"code": "server_error", "message": "Provider disconnected unexpectedly"}
        self.assertEqual(last["error"], error)
        self.assertEqual(last["choices"], [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}])
        text = "".join(c["choices"][0]["delta"]["content"] for c in chunks[:-1])
        self.assertEqual(text, FX.partial_text)
        _, bare = stream_of("stream-error", "openrouter-no-choices")
        self.assertEqual((bare[-1]["choices"], bare[-1]["error"]["code"]), ([], 502))
        self.assertNotIn("[DONE]", bare)

    def test_failures_carry_the_status_as_a_number(self) -> None:
        """401, 402, 429 and 400 in OpenRouter's envelope, whole or streamed: code a number, no type."""
        statuses = (("auth", 401), ("quota", 402), ("rate-limit", 429), ("context-overflow", 400))
        for scenario, status in statuses:
            for mode, body in (("chat", good_body()), ("stream", good_body(True))):
                with self.subTest(scenario=scenario, mode=mode):
                    reply = scenario_reply(COMPATIBLE, scenario, mode, request(body), "openrouter")
                    assert isinstance(reply, JsonReply)
                    self.assertEqual((reply.status, reply.body["error"]["code"]), (status, status))
                    self.assertNotIn("type", reply.body["error"])
                    self.assertEqual(set(reply.headers or {}), {"date"})
        quota = scenario_reply(COMPATIBLE, "quota", "chat", request(good_body()), "openrouter")
        assert isinstance(quota, JsonReply)
        self.assertRegex(quota.body["user_id"], r"^user_[A-Za-z0-9]{27}$")


class ReferenceTests(unittest.TestCase):
    def test_mistral_fails_in_its_top_level_envelope(self) -> None:
        """Mistral's 429 and 401 carry their fields at the top level, no error object, no retry-after,
        the same whole or streamed."""
        for mode, body in (("chat", good_body()), ("stream", good_body(True))):
            with self.subTest(mode=mode):
                limited = scenario_reply(COMPATIBLE, "rate-limit", mode, request(body), "mistral")
                assert isinstance(limited, JsonReply)
                self.assertEqual(limited.status, 429)
                envelope = {"object": "error", "message": "Rate limit exceeded", "type": "rate_limited"}
                self.assertEqual(limited.body, {**envelope, "param": None, "code": "1300"})
                self.assertEqual(set(limited.headers or {}), {"date"})
                later = scenario_reply(COMPATIBLE, "rate-limit", mode, request(body), "mistral-raw-status")
                assert isinstance(later, JsonReply)
                self.assertEqual(later.body, {**limited.body, "raw_status_code": 429})
                gateway = scenario_reply(COMPATIBLE, "auth", mode, request(body), "mistral")
                assert isinstance(gateway, JsonReply)
                self.assertEqual((gateway.status, list(gateway.body)), (401, ["message", "request_id"]))
                self.assertRegex(gateway.body["request_id"], r"^[0-9a-f]{32}$")
                self.assertEqual(gateway.content_type, "application/json; charset=utf-8")
                detail = scenario_reply(COMPATIBLE, "auth", mode, request(body), "mistral-detail")
                assert isinstance(detail, JsonReply)
                self.assertEqual((detail.status, detail.body), (401, {"detail": "Unauthorized"}))

    def test_groq_429_types_its_token_limit_and_names_its_delay(self) -> None:
        """Groq's 429: OpenAI's nesting, type tokens, no param, retry-after in seconds and x-ratelimit-*."""
        reply = scenario_reply(COMPATIBLE, "rate-limit", "chat", request(good_body()), "groq")
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.status, 429)
        self.assertEqual(list(reply.body["error"]), ["message", "type", "code"])
        error = reply.body["error"]
        self.assertEqual((error["type"], error["code"]), ("tokens", "rate_limit_exceeded"))
        self.assertIn("Please try again in 6.780999999s", reply.body["error"]["message"])
        headers = reply.headers or {}
        self.assertEqual(headers["retry-after"], "7")
        self.assertEqual(COMPATIBLE.retry_after_sent(reply), 7.0)
        self.assertEqual(COMPATIBLE.variant("rate-limit", "chat", "groq").retry_after, 7.0)
        self.assertTrue({"x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"} <= set(headers))
        self.assertNotIn("x-request-id", headers)

    def test_a_server_without_its_own_failure_answers_as_api_openai_com(self) -> None:
        """A failure no server has a source for keeps api.openai.com's one shape; auth puts it first."""
        self.assertEqual([v.name for v in COMPATIBLE.variants("overloaded", "chat")], ["server-error-503"])
        self.assertEqual([v.name for v in COMPATIBLE.variants("quota", "chat")], ["openai", "openrouter"])
        self.assertEqual([v.name for v in OpenAIChatWire(servers=("groq",)).variants("quota", "chat")], [""])
        self.assertEqual(
            [v.name for v in COMPATIBLE.variants("auth", "chat")],
            ["openai", "mistral", "mistral-detail", "openrouter"],
        )
        self.assertEqual(
            [v.name for v in COMPATIBLE.variants("rate-limit", "stream")],
            ["no-retry-after", "mistral", "mistral-raw-status", "groq", "openrouter"],
        )

    def test_the_reference_backend_passes_every_server_shape(self) -> None:
        """The reference backend meets each server's shapes, both modes, over HTTP/1.1 and h2c."""
        create = REFERENCE_BACKENDS["openai-chat"]
        cases = {key.split("/")[0] for key in SERVER_ROWS}
        for http2 in (False, True):
            target = BackendConformanceTarget(
                "ref", COMPATIBLE, lambda url, h=http2: create(url, h), http2=http2
            )
            for scenario in sorted(cases):
                for mode in ("chat", "stream"):
                    if scenario == "stream-error" and mode == "chat":
                        continue
                    with self.subTest(http2=http2, scenario=scenario, mode=mode):
                        ConformanceCase(target, scenario, mode).run()

    def test_a_call_without_an_index_is_named_by_its_id(self) -> None:
        """Calls with no index are told apart by id; a fragment without one goes on with the last."""
        partials: Dict[int, _PartialCall] = {}
        index = OpenAIChatBackend.call_index
        self.assertEqual(index({"id": "a"}, partials), 0)
        partials[0] = _PartialCall("a")
        self.assertEqual(index({"id": "b"}, partials), 1)
        partials[1] = _PartialCall("b")
        self.assertEqual(index({"id": "a"}, partials), 0)
        self.assertEqual(index({"function": {"arguments": "}"}}, partials), 1)
        self.assertEqual(index({"index": 5}, partials), 5)

    def test_done_without_a_finish_reason_is_a_failure(self) -> None:
        """A stream that reaches [DONE] with no finish reason fails as a retryable server error."""
        from conformance.provider import start_fake_provider

        reply, _ = stream_of("context-overflow", "llama-cpp-error-field")

        async def read(url: str) -> List[StreamChunk]:
            backend = OpenAIChatBackend(f"{url}/v1")
            try:
                return [chunk async for chunk in backend.chat_stream(conformance_request("m"))]
            finally:
                await backend.aclose()

        with start_fake_provider() as provider:
            provider.reply(reply)
            with self.assertRaises(LLMError) as failed:
                asyncio.run(read(provider.url))
        self.assertEqual((failed.exception.kind, failed.exception.retryable), ("server_error", True))
        self.assertIn("the stream ended before a finish reason", str(failed.exception))

    def test_mistral_usage_is_due_even_unasked(self) -> None:
        """A backend that never asks for usage must still pass on the usage Mistral sent."""

        class NeverAsks(OpenAIChatBackend):
            def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
                body = super().body(chat, stream)
                body.pop("stream_options", None)
                return body

        class NeverAsksDropsIt(NeverAsks):
            async def chat_stream(self, chat: ChatRequest) -> Any:
                async for chunk in super().chat_stream(chat):
                    yield dataclasses.replace(chunk, usage=None)

        # Not asking is a request problem of its own; the usage Mistral sent is still due.
        mistral = OpenAIChatWire(servers=("mistral",))
        skip = {"text:openai": "api.openai.com reports no usage unasked"}
        for backend, usage_problem in ((NeverAsks, False), (NeverAsksDropsIt, True)):
            target = BackendConformanceTarget("t", mistral, lambda url, b=backend: b(f"{url}/v1"), skip=skip)
            with self.subTest(backend=backend.__name__):
                with self.assertRaises(AssertionError) as failed:
                    ConformanceCase(target, "text", "stream").run()
                message = str(failed.exception)
                self.assertIn("[mistral] request: expected stream_options.include_usage", message)
                self.assertEqual("[mistral] expected usage" in message, usage_problem, message)


if __name__ == "__main__":
    unittest.main()
