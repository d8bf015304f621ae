"""Tests for the Ollama wire: its replies, read back line by line, and its request check."""

from __future__ import annotations

import json
import re
import unittest
from typing import Any, Dict, List, Optional

from conformance.cases import scenario_reply
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.provider.replies import HangReply, JsonReply, RecordedRequest, StreamReply
from conformance.scenarios import SCENARIOS
from conformance.wires.ollama import TOOL_CALL_ID, created_at, ollama_wire

MODEL = "conformance-model"
#: Go's RFC3339Nano in UTC: up to nine fraction digits, no trailing zero.
CREATED_AT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,8}[1-9])?Z$")


def sdk_body(stream: Optional[bool] = False) -> Dict[str, Any]:
    """The body ollama-python sends for the conformance request."""
    body: Dict[str, Any] = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": FX.system},
            {"role": "user", "content": FX.question},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": FX.tool_name,
                    "description": FX.tool_description,
                    "parameters": json.loads(json.dumps(dict(FX.tool_parameters))),
                },
            }
        ],
        "options": {"num_predict": FX.max_tokens},
    }
    if stream is not None:
        body["stream"] = stream
    return body


def request(
    stream: Optional[bool] = False,
    body: Optional[Dict[str, Any]] = None,
    path: str = "/api/chat",
    method: str = "POST",
) -> RecordedRequest:
    raw = json.dumps(sdk_body(stream) if body is None else body).encode()
    return RecordedRequest(method, path, "", {"content-type": "application/json"}, raw, "HTTP/1.1")


def lines(reply: StreamReply) -> List[Dict[str, Any]]:
    data = b"".join(reply.chunks)
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.split(b"\n") if line]


def whole(scenario: str) -> Dict[str, Any]:
    reply = ollama_wire.reply(scenario, "chat", request())
    assert isinstance(reply, JsonReply), reply
    body = json.loads(reply.encoded())
    assert isinstance(body, dict)
    return body


def streamed(scenario: str) -> List[Dict[str, Any]]:
    reply = ollama_wire.reply(scenario, "stream", request(stream=True))
    assert isinstance(reply, StreamReply), reply
    return lines(reply)


class OllamaRepliesTest(unittest.TestCase):
    def test_unsupported_scenarios_answer_none(self) -> None:
        """Content filter and rate limit have no Ollama form: None, with a reason."""
        self.assertEqual(set(ollama_wire.unsupported), {"content-filter", "rate-limit"})
        for name in SCENARIOS:
            if SCENARIOS[name].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            for stream in (False, True):
                with self.subTest(scenario=name, stream=stream):
                    reply = scenario_reply(ollama_wire, name, "chat", request(stream=stream))
                    self.assertEqual(reply is None, ollama_wire.absent(name) is not None)

    def test_stream_is_the_default(self) -> None:
        """A request without "stream" gets NDJSON; "stream": false gets one JSON body."""
        self.assertTrue(ollama_wire.wants_stream(request(stream=None)))
        self.assertTrue(ollama_wire.wants_stream(request(stream=True)))
        self.assertFalse(ollama_wire.wants_stream(request(stream=False)))
        reply = ollama_wire.reply("text", "chat", request(stream=None))
        assert isinstance(reply, StreamReply)
        self.assertEqual(reply.content_type, "application/x-ndjson")

    def test_whole_text_turn(self) -> None:
        """The whole turn has the text, done_reason stop and both token counts."""
        body = whole("text")
        self.assertEqual(body["message"], {"role": "assistant", "content": FX.text})
        self.assertEqual((body["done"], body["done_reason"]), (True, "stop"))
        self.assertEqual((body["prompt_eval_count"], body["eval_count"]), (31, 17))

    def test_streamed_text_turn(self) -> None:
        """Lines join to the text; only the last is done, with the counts."""
        out = streamed("text")
        self.assertEqual("".join(line["message"]["content"] for line in out), FX.text)
        self.assertEqual([line["done"] for line in out], [False] * (len(out) - 1) + [True])
        self.assertEqual(out[-1]["done_reason"], "stop")
        self.assertNotIn("done_reason", out[0])
        self.assertEqual((out[-1]["prompt_eval_count"], out[-1]["eval_count"]), (31, 17))

    def test_created_at_has_nanoseconds(self) -> None:
        """created_at is RFC 3339 with a nanosecond fraction, trailing zeros trimmed like Go."""
        self.assertEqual(created_at(0), "2025-11-29T08:00:00.123456789Z")
        for line in streamed("text"):
            self.assertRegex(line["created_at"], CREATED_AT)

    def test_stream_is_cut_inside_a_character(self) -> None:
        """Some chunk boundary falls inside a multi-byte UTF-8 character."""
        reply = ollama_wire.reply("text", "stream", request(stream=True))
        assert isinstance(reply, StreamReply)
        broken = 0
        for chunk in reply.chunks:
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError:
                broken += 1
        self.assertGreater(broken, 0)

    def test_tool_call_turns(self) -> None:
        """Both tool turns carry one whole call with object arguments and stop; only tool-call has an id."""
        for scenario, has_id in (("tool-call", True), ("tool-call-with-stop", False)):
            for form in ("whole", "stream"):
                with self.subTest(scenario=scenario, form=form):
                    out = [whole(scenario)] if form == "whole" else streamed(scenario)
                    calls = [c for line in out for c in line["message"].get("tool_calls", [])]
                    self.assertEqual(len(calls), 1)
                    self.assertEqual(calls[0]["function"]["name"], FX.tool_name)
                    self.assertEqual(calls[0]["function"]["arguments"], dict(FX.tool_arguments))
                    self.assertEqual(calls[0].get("id"), TOOL_CALL_ID if has_id else None)
                    self.assertEqual(out[-1]["done_reason"], "stop")
        self.assertIsNone(ollama_wire.tool_call_id)
        self.assertRegex(TOOL_CALL_ID, r"^call_[a-z0-9]{8}$")

    def test_truncated_tool_call_is_length_without_a_call(self) -> None:
        """The cut-off turn is the preamble and done_reason length, with no tool_calls."""
        for out in ([whole("truncated-tool-call")], streamed("truncated-tool-call")):
            with self.subTest(lines=len(out)):
                self.assertEqual("".join(line["message"]["content"] for line in out), FX.preamble)
                self.assertFalse(any("tool_calls" in line["message"] for line in out))
                self.assertEqual(out[-1]["done_reason"], "length")

    def test_stream_error_line(self) -> None:
        """The partial text is followed by one {"error": ...} line and nothing else."""
        out = streamed("stream-error")
        self.assertEqual("".join(line["message"]["content"] for line in out[:-1]), FX.partial_text)
        self.assertEqual(list(out[-1]), ["error"])
        self.assertFalse(any(line.get("done") for line in out))

    def test_abort_hangs(self) -> None:
        """Abort hangs before answering a whole request and after some text in a stream."""
        self.assertIsInstance(ollama_wire.reply("abort", "chat", request()), HangReply)
        reply = ollama_wire.reply("abort", "stream", request(stream=True))
        assert isinstance(reply, StreamReply)
        self.assertTrue(reply.hang)
        self.assertTrue(FX.partial_text.startswith("".join(x["message"]["content"] for x in lines(reply))))

    def test_error_bodies(self) -> None:
        """Each failure is {"error": "..."} with Ollama's status, whole or streamed."""
        table = {"quota": 429, "auth": 401, "overloaded": 503, "server-error": 500, "context-overflow": 400}
        for scenario, status in table.items():
            for stream in (False, True):
                with self.subTest(scenario=scenario, stream=stream):
                    reply = ollama_wire.reply(scenario, "chat", request(stream=stream))
                    assert isinstance(reply, JsonReply)
                    self.assertEqual(reply.status, status)
                    self.assertTrue(reply.content_type.startswith("application/json"))
                    self.assertIsInstance(json.loads(reply.encoded())["error"], str)

    def test_done_comes_before_done_reason(self) -> None:
        """The last line writes done before done_reason, as Ollama 0.12.0 and later do."""
        for scenario in ("text", "tool-call", "truncated-tool-call"):
            with self.subTest(scenario=scenario):
                for body in (whole(scenario), streamed(scenario)[-1]):
                    keys = list(body)
                    self.assertEqual(keys.index("done_reason"), keys.index("done") + 1, keys)

    def test_a_runner_that_died_is_worded_by_version(self) -> None:
        """The default says llama-server (Ollama 0.30.0 on), a variant the runner (0.24.0 and before)."""
        words = {}
        for variant in ollama_wire.variants("server-error", "chat"):
            reply = ollama_wire.reply("server-error", "chat", request(), variant.name)
            assert isinstance(reply, JsonReply)
            words[variant.name] = (reply.status, json.loads(reply.encoded())["error"])
        self.assertEqual(
            words,
            {
                "llama-server-terminated-500": (500, "llama-server process has terminated: exit status 2"),
                "runner-terminated-500": (500, "llama runner process has terminated: exit status 2"),
                "cloud-unreachable-502": (
                    502,
                    'Post "https://ollama.com:443/api/chat": dial tcp: lookup ollama.com: no such host',
                ),
            },
        )
        self.assertEqual(list(words)[0], "llama-server-terminated-500")

class OllamaRequestCheckTest(unittest.TestCase):
    def test_sdk_request_passes(self) -> None:
        """The request ollama-python sends has no problems, streamed or not."""
        for stream in (False, True, None):
            with self.subTest(stream=stream):
                req = request(stream=stream)
                self.assertTrue(ollama_wire.is_generation(req))
                self.assertEqual(ollama_wire.check_request(req, MODEL), [])

    def test_null_schema_fields_pass(self) -> None:
        """Schema fields sent as null (as pydantic models dump them) do not count as a difference."""
        body = sdk_body()
        params = body["tools"][0]["function"]["parameters"]
        params["defs"] = None
        params["properties"]["city"]["items"] = None
        self.assertEqual(ollama_wire.check_request(request(body=body), MODEL), [])

    def test_problems_are_reported(self) -> None:
        """Each wrong request yields one sentence naming what was expected."""
        wrong_model = sdk_body()
        wrong_model["model"] = "llama3.2"
        no_tools = sdk_body()
        no_tools["tools"] = []
        string_schema = sdk_body()
        string_schema["tools"][0]["function"]["parameters"] = json.dumps(dict(FX.tool_parameters))
        wrong_question = sdk_body()
        wrong_question["messages"][1]["content"] = "hi"
        table = {
            "expected model 'conformance-model'": request(body=wrong_model),
            "get_weather": request(body=no_tools),
            "get_weather parameters": request(body=string_schema),
            "What is the weather": request(body=wrong_question),
            "/api/chat": request(path="/api/generate"),
            "expected POST": request(method="PUT"),
        }
        for expected, req in table.items():
            with self.subTest(expected):
                problems = ollama_wire.check_request(req, MODEL)
                self.assertEqual(len(problems), 1, problems)
                self.assertIn(expected, problems[0])

    def test_auxiliary_requests_get_plausible_answers(self) -> None:
        """/api/show, /api/tags, /api/version and / answer as Ollama does; others 404."""
        show = ollama_wire.aux_reply(request(path="/api/show", body={"model": MODEL}))
        assert isinstance(show, JsonReply)
        self.assertIn("tools", json.loads(show.encoded())["capabilities"])
        tags = ollama_wire.aux_reply(request(path="/api/tags", method="GET", body={}))
        assert isinstance(tags, JsonReply)
        self.assertEqual(json.loads(tags.encoded())["models"][0]["name"], MODEL)
        version = ollama_wire.aux_reply(request(path="/api/version", method="GET", body={}))
        assert isinstance(version, JsonReply)
        said = tuple(int(n) for n in json.loads(version.encoded())["version"].split("."))
        # The default runner-died wording is 0.30.0's and later's: a client that reads the
        # version to tell the two wordings apart must be told a release that sends it.
        self.assertGreaterEqual(said, (0, 30, 0))
        root = ollama_wire.aux_reply(request(path="/", method="GET", body={}))
        assert isinstance(root, JsonReply)
        self.assertEqual(root.encoded(), b"Ollama is running")
        missing = ollama_wire.aux_reply(request(path="/api/pull", body={}))
        assert isinstance(missing, JsonReply)
        self.assertEqual(missing.status, 404)
        self.assertFalse(ollama_wire.is_generation(request(path="/api/show")))


if __name__ == "__main__":
    unittest.main()
