"""Multi-turn on Claude's hosts (Bedrock InvokeModel, Vertex AI): scripted turns and histories read back."""

from __future__ import annotations

import base64
import json
import unittest

from conformance.contract import Message
from conformance.provider.replies import JsonReply
from conformance.reference._decoders import EventStreamDecoder
from conformance.reference.anthropic_vertex import AnthropicVertexBackend
from conformance.reference.bedrock_invoke import BedrockInvokeBackend
from conformance.wires.anthropic_vertex import anthropic_vertex_wire
from conformance.wires.bedrock_invoke import bedrock_invoke_wire

from .turns_cases import TurnCases, conversation


class BedrockInvokeTurnsTest(TurnCases, unittest.TestCase):
    wire = bedrock_invoke_wire
    backend_class = BedrockInvokeBackend
    provider = "anthropic"

    def event_text(self, event: bytes) -> bytes:
        (frame,) = EventStreamDecoder().feed(event)
        return base64.b64decode(json.loads(frame.payload)["bytes"])

    def test_the_body_is_the_messages_body_without_model_or_stream(self) -> None:
        """The history goes as Anthropic's blocks, the version in the body, the stream in the path."""
        request = self.render(conversation("anthropic"), stream=True)
        body = request.json
        assert isinstance(body, dict)
        self.assertEqual(body["anthropic_version"], "bedrock-2023-05-31")
        self.assertNotIn("model", body)
        self.assertNotIn("stream", body)
        self.assertTrue(request.path.endswith("/invoke-with-response-stream"))
        self.assertTrue(self.history(request).stream)

    def test_a_refused_history_quotes_claudes_words_in_a_validation_exception(self) -> None:
        body = self.render(conversation("anthropic")).json
        assert isinstance(body, dict)
        del body["messages"][2]["content"][1]
        request = self.render([Message("user", "x")])
        refused = request.__class__(
            "POST", request.path, "", request.headers, json.dumps(body).encode(), "HTTP/1.1"
        )
        problems = self.history(refused).problems
        self.assertTrue(any("`tool_use` ids were found without `tool_result` blocks" in p for p in problems))
        reply = self.wire.history_error(problems)
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.body, {"message": problems[0]})


class AnthropicVertexTurnsTest(TurnCases, unittest.TestCase):
    wire = anthropic_vertex_wire
    backend_class = AnthropicVertexBackend
    provider = "anthropic"

    def test_the_body_keeps_stream_and_drops_model(self) -> None:
        """Vertex's body carries the version and the stream flag, the model only in the path."""
        request = self.render([Message("user", "hi")], stream=True)
        body = request.json
        assert isinstance(body, dict)
        self.assertEqual((body["anthropic_version"], body["stream"]), ("vertex-2023-10-16", True))
        self.assertNotIn("model", body)
        self.assertTrue(request.path.endswith("/models/conformance-model:streamRawPredict"))
        self.assertEqual(request.headers["authorization"], "Bearer test")
        self.assertNotIn("anthropic-version", request.headers)


if __name__ == "__main__":
    unittest.main()
