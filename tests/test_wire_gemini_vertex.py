"""Tests for the Gemini-on-Vertex wire: its replies as Vertex writes them, its routes, errors and turns."""

from __future__ import annotations

import json
import unittest
from typing import Any, Dict, List, Optional

from conformance.cases import scenario_reply
from conformance.contract import ChatRequest, Message, Reasoning, ReasoningKind, ToolCall, ToolResult
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.fixture import conformance_request
from conformance.provider.replies import JsonReply, RecordedRequest, StreamReply
from conformance.reference.gemini_vertex import GeminiVertexBackend
from conformance.scenarios import SCENARIOS
from conformance.wires._script import ScriptedCall, ScriptedTurn
from conformance.wires.gemini_vertex import gemini_vertex_wire as wire

MODEL = "conformance-model"
PROJECT = "/v1beta1/projects/conformance-project/locations/us-central1/publishers/google/models"
EXPRESS = "/v1beta1/publishers/google/models"
BEARER = {"authorization": "Bearer test", "content-type": "application/json"}


def body_of(express: bool = False) -> Dict[str, Any]:
    """The body the reference backend sends for the conformance request."""
    backend = GeminiVertexBackend("http://127.0.0.1:1", express=express)
    return backend.body(conformance_request(MODEL), False)


def request(
    stream: bool = False,
    base: str = PROJECT,
    query: Optional[str] = None,
    headers: Optional[Dict[str, str]] = None,
    body: Optional[Dict[str, Any]] = None,
) -> RecordedRequest:
    verb = "streamGenerateContent" if stream else "generateContent"
    query = ("alt=sse" if stream else "") if query is None else query
    raw = json.dumps(body_of() if body is None else body).encode()
    sent = BEARER if headers is None else headers
    return RecordedRequest("POST", f"{base}/{MODEL}:{verb}", query, sent, raw, "HTTP/1.1")


def events(reply: Any) -> List[Dict[str, Any]]:
    assert isinstance(reply, StreamReply), reply
    data = b"".join(reply.chunks).decode("utf-8")
    return [json.loads(block[len("data: ") :]) for block in data.split("\r\n\r\n") if block]


def whole(scenario: str, variant: str = "") -> Dict[str, Any]:
    reply = wire.reply(scenario, "chat", request(), variant)
    assert isinstance(reply, JsonReply), reply
    body = json.loads(reply.encoded())
    assert isinstance(body, dict)
    return body


class VertexRepliesTest(unittest.TestCase):
    def test_every_scenario_answers_but_quota(self) -> None:
        """Every scenario has a reply but the quota, which Vertex cannot tell from a rate limit."""
        self.assertEqual(set(wire.unsupported), {"quota"})
        for name in SCENARIOS:
            if SCENARIOS[name].needs_read_timeout:
                continue  # played from the text reply by the case, held back (tests/test_latency.py)
            with self.subTest(scenario=name):
                reply = scenario_reply(wire, name, "chat", request())
                self.assertEqual(reply is None, wire.absent(name) is not None)

    def test_a_stream_is_written_as_vertex_writes_it(self) -> None:
        """Role before parts, no index, createTime on each event alike, and usage counted on the last only."""
        out = events(wire.reply("text", "stream", request(stream=True)))
        parts = [p for e in out for p in e["candidates"][0]["content"]["parts"]]
        self.assertEqual("".join(p["text"] for p in parts), FX.text)
        for event in out:
            (one,) = event["candidates"]
            self.assertEqual(list(one["content"]), ["role", "parts"])
            self.assertNotIn("index", one)
            self.assertEqual(list(event)[-3:], ["modelVersion", "createTime", "responseId"])
        self.assertEqual({e["createTime"] for e in out}, {out[0]["createTime"]})
        earlier = [e["usageMetadata"] for e in out[:-1]]
        self.assertEqual(earlier, [{"trafficType": "ON_DEMAND"}] * (len(out) - 1))
        last = out[-1]["usageMetadata"]
        counts = (last["promptTokenCount"], last["candidatesTokenCount"], last["totalTokenCount"])
        self.assertEqual(counts, (31, 17, 48))
        self.assertEqual(last["trafficType"], "ON_DEMAND")

    def test_the_undeclared_call_ends_the_turn_in_error(self) -> None:
        """unexpected-tool-call: a call to list_files, UNEXPECTED_TOOL_CALL, a finishMessage, whole only."""
        (one,) = whole("tool-call", "unexpected-tool-call")["candidates"]
        (part,) = one["content"]["parts"]
        self.assertEqual(part["functionCall"], {"name": "list_files", "args": {}})
        self.assertIn("thoughtSignature", part)
        self.assertEqual(one["finishReason"], "UNEXPECTED_TOOL_CALL")
        self.assertIn("undeclared function: list_files", one["finishMessage"])
        variant = wire.variant("tool-call", "chat", "unexpected-tool-call")
        self.assertEqual((variant.finish_reasons, variant.undeclared_call), (("error",), "list_files"))
        self.assertNotIn("unexpected-tool-call", [v.name for v in wire.variants("tool-call", "stream")])

    def test_model_armor_blocks_a_prompt_or_an_output(self) -> None:
        """A blocked prompt has no candidates and no counts; a blocked output no content at all."""
        prompt = whole("content-filter", "prompt-blocked")
        self.assertNotIn("candidates", prompt)
        self.assertEqual(prompt["promptFeedback"]["blockReason"], "MODEL_ARMOR")
        self.assertEqual(prompt["usageMetadata"], {"trafficType": "ON_DEMAND"})
        self.assertFalse(wire.variant("content-filter", "chat", "prompt-blocked").reports_usage)
        (one,) = whole("content-filter", "output-blocked")["candidates"]
        self.assertEqual(sorted(one), ["finishMessage", "finishReason"])
        (streamed,) = events(wire.reply("content-filter", "stream", request(stream=True)))
        self.assertEqual(streamed["candidates"], [one])

    def test_errors_are_vertex_own(self) -> None:
        """A 429 with no details and no delay, a 401 CREDENTIALS_MISSING, and an array without alt=sse."""
        limit = whole("rate-limit")["error"]
        self.assertEqual((limit["code"], limit["status"]), (429, "RESOURCE_EXHAUSTED"))
        self.assertNotIn("details", limit)
        self.assertIsNone(wire.variant("rate-limit", "chat", "resource-exhausted").retry_after)
        auth = whole("auth")["error"]
        self.assertEqual((auth["code"], auth["details"][0]["reason"]), (401, "CREDENTIALS_MISSING"))
        plain = wire.reply("overloaded", "stream", request(stream=True, query=""))
        assert isinstance(plain, JsonReply)
        self.assertEqual([list(e) for e in json.loads(plain.encoded())], [["error"]])
        sse = wire.reply("overloaded", "stream", request(stream=True))
        assert isinstance(sse, JsonReply)
        self.assertEqual(sse.content_type, "text/event-stream")
        self.assertEqual(json.loads(sse.encoded())["error"]["code"], 503)

    def test_count_tokens_and_unknown_routes(self) -> None:
        """:countTokens answers with the prompt's count; any other route is a 404 NOT_FOUND."""
        count = RecordedRequest("POST", f"{PROJECT}/{MODEL}:countTokens", "", BEARER, b"{}", "HTTP/1.1")
        self.assertFalse(wire.is_generation(count))
        reply = wire.aux_reply(count)
        assert isinstance(reply, JsonReply)
        self.assertEqual(json.loads(reply.encoded())["totalTokens"], 31)
        missing = wire.aux_reply(RecordedRequest("GET", "/v1beta1/models", "", {}, b"", "HTTP/1.1"))
        assert isinstance(missing, JsonReply)
        status = json.loads(missing.encoded())["error"]["status"]
        self.assertEqual((missing.status, status), (404, "NOT_FOUND"))


class VertexRequestCheckTest(unittest.TestCase):
    def test_each_route_with_its_credential_passes(self) -> None:
        """A bearer under a project, v1 or v1beta1, and an API key in express mode pass."""
        key = {"x-goog-api-key": "k", "content-type": "application/json"}
        cases = {
            "project": request(),
            "project stream": request(stream=True),
            "v1": request(base=PROJECT.replace("v1beta1", "v1")),
            "express key": request(base=EXPRESS, headers=key),
            "express query key": request(base=EXPRESS, query="key=k", headers={}),
            "express bearer": request(base=EXPRESS),
        }
        for name, req in cases.items():
            with self.subTest(name):
                self.assertTrue(wire.is_generation(req))
                self.assertEqual(wire.check_request(req, MODEL), [])

    def test_problems_are_reported(self) -> None:
        """A key on a project's path, no credential, the Gemini API's path, a stream without alt=sse."""
        key = {"x-goog-api-key": "k"}
        table = {
            "API keys are not supported": request(headers=key),
            "expected Authorization: Bearer": request(headers={}),
            "expected ?alt=sse": request(stream=True, query=""),
        }
        for expected, req in table.items():
            with self.subTest(expected):
                problems = wire.check_request(req, MODEL)
                self.assertEqual(len(problems), 1, problems)
                self.assertIn(expected, problems[0])
        gemini_api = RecordedRequest(
            "POST", f"/v1beta/models/{MODEL}:generateContent", "", BEARER, b"{}", "HTTP/1.1"
        )
        self.assertFalse(wire.is_generation(gemini_api))
        self.assertIn("/publishers/google/models/", wire.check_request(gemini_api, MODEL)[0])


class VertexTurnsTest(unittest.TestCase):
    def test_a_signed_answer_streams_its_signature_on_the_last_text_part(self) -> None:
        """Vertex signs the answer's last text piece itself, beside STOP, with no event of its own."""
        signature = Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, signature="c2lnbmVk", provider="gemini")
        turn = ScriptedTurn(text="Sunny.", reasoning=(signature,), seed="vertex-signed")
        played = wire.turn_stream(turn, request(stream=True))
        assert played is not None
        out = [json.loads(e.decode()[len("data: ") :]) for e in played.events]
        parts = [p for e in out for p in e["candidates"][0]["content"]["parts"]]
        self.assertEqual("".join(p["text"] for p in parts), "Sunny.")
        self.assertEqual(out[-1]["candidates"][0]["finishReason"], "STOP")
        self.assertEqual(parts[-1]["thoughtSignature"], "c2lnbmVk")
        self.assertNotEqual(parts[-1]["text"], "", "the signature rides a text piece, not an empty part")
        self.assertEqual([p for p in parts if "thoughtSignature" in p], [parts[-1]])

    def test_a_tool_turn_and_its_history_round_trip(self) -> None:
        """A scripted call plays in Vertex's dialect; the reference backend's next request reads back."""
        call = ScriptedCall("vcyiitct", FX.tool_name, json.dumps(dict(FX.tool_arguments)))
        whole_reply = wire.turn_whole(ScriptedTurn(calls=(call,), seed="vertex-call"), request())
        assert isinstance(whole_reply, JsonReply)
        (one,) = json.loads(whole_reply.encoded())["candidates"]
        self.assertEqual(one["content"]["parts"][0]["functionCall"]["id"], "vcyiitct")
        self.assertIn("createTime", json.loads(whole_reply.encoded()))
        backend = GeminiVertexBackend("http://127.0.0.1:1")
        signed = Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, signature="c2lnbmVk", provider="gemini")
        arguments = dict(FX.tool_arguments)
        messages = [
            Message("user", FX.question),
            Message("assistant", "", tool_calls=(ToolCall("vcyiitct", FX.tool_name, arguments, (signed,)),)),
            Message.tool(ToolResult("vcyiitct", FX.tool_name, "18 °C")),
        ]
        body = backend.body(ChatRequest(MODEL, messages), False)
        history = wire.read_history(request(body=body))
        assert history is not None
        self.assertEqual(history.problems, ())
        (assistant,) = history.assistant_turns
        self.assertEqual([c.id for c in assistant.tool_calls], ["vcyiitct"])
        refused = wire.history_error(["Please use a valid role: user, model."])
        assert isinstance(refused, JsonReply)
        error = json.loads(refused.encoded())["error"]
        self.assertEqual((refused.status, error["status"]), (400, "INVALID_ARGUMENT"))


if __name__ == "__main__":
    unittest.main()
