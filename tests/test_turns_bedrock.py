"""Multi-turn on the Bedrock Converse wire: scripted turns, histories read back, and the 400s."""

from __future__ import annotations

import copy
import json
import unittest
from typing import Any, Callable, Dict

from conformance.provider.replies import JsonReply, RecordedRequest
from conformance.reference.bedrock import BedrockConverseBackend
from conformance.wires.bedrock import ERROR_NAMESPACE, bedrock_converse_wire

from .turns_cases import TurnCases, conversation


class BedrockTurnsTest(TurnCases, unittest.TestCase):
    wire = bedrock_converse_wire
    backend_class = BedrockConverseBackend
    provider = "bedrock"

    def good(self) -> Dict[str, Any]:
        body = self.render(conversation("bedrock")).json
        assert isinstance(body, dict)
        return body

    def mutated(self, change: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
        body = copy.deepcopy(self.good())
        change(body)
        return body

    def test_rendering_alternates_and_groups_results_with_the_next_words(self) -> None:
        messages = self.good()["messages"]
        self.assertEqual([m["role"] for m in messages], ["user", "assistant", "user"])
        members = [next(iter(b)) for b in messages[1]["content"]]
        self.assertEqual(members, ["reasoningContent", "reasoningContent", "text", "toolUse", "toolUse"])
        results = messages[2]["content"]
        self.assertEqual([next(iter(b)) for b in results], ["toolResult", "toolResult", "text"])
        self.assertNotIn("status", results[0]["toolResult"])
        self.assertEqual(results[1]["toolResult"]["status"], "error")
        self.assertEqual(results[0]["toolResult"]["content"], [{"text": '{"echo": "hi"}'}])
        self.assertEqual(messages[1]["content"][3]["toolUse"]["input"], {"text": "hi \u00e9\U0001f600"})

    def test_each_malformed_history_names_its_problem(self) -> None:
        def drop_result(body: Dict[str, Any]) -> None:
            del body["messages"][2]["content"][1]

        def extra_result(body: Dict[str, Any]) -> None:
            content = body["messages"][2]["content"]
            content.insert(2, copy.deepcopy(content[1]))

        def wrong_id(body: Dict[str, Any]) -> None:
            body["messages"][2]["content"][0]["toolResult"]["toolUseId"] = "tooluse_Zz"

        def result_as_text(body: Dict[str, Any]) -> None:
            body["messages"][2]["content"] = [{"text": '{"echo": "hi"}'}]

        def tool_role(body: Dict[str, Any]) -> None:
            body["messages"][2]["role"] = "tool"

        def two_users(body: Dict[str, Any]) -> None:
            body["messages"].append({"role": "user", "content": [{"text": "And?"}]})

        def assistant_first(body: Dict[str, Any]) -> None:
            body["messages"].insert(0, {"role": "assistant", "content": [{"text": "Hi."}]})

        def no_result_id(body: Dict[str, Any]) -> None:
            del body["messages"][2]["content"][0]["toolResult"]["toolUseId"]

        def no_call_id(body: Dict[str, Any]) -> None:
            del body["messages"][1]["content"][3]["toolUse"]["toolUseId"]

        def string_input(body: Dict[str, Any]) -> None:
            call = body["messages"][1]["content"][3]["toolUse"]
            call["input"] = json.dumps(call["input"])

        def no_signature(body: Dict[str, Any]) -> None:
            del body["messages"][1]["content"][0]["reasoningContent"]["reasoningText"]["signature"]

        def two_members(body: Dict[str, Any]) -> None:
            body["messages"][0]["content"][0]["type"] = "text"

        cases = [
            (
                drop_result,
                "Expected toolResult blocks at messages.2.content for the following Ids: toolu_01Bb",
            ),
            (
                extra_result,
                "The number of toolResult blocks at messages.2.content exceeds the number of toolUse blocks "
                "of previous turn.",
            ),
            (wrong_id, "toolUseId tooluse_Zz matches no toolUse block of the previous assistant turn"),
            (
                result_as_text,
                "Expected toolResult blocks at messages.2.content for the following Ids: toolu_01Aa",
            ),
            (tool_role, "Value 'tool' at 'messages.3.member.role' failed to satisfy constraint"),
            (two_users, "A conversation must alternate between user and assistant roles."),
            (assistant_first, "A conversation must start with a user message."),
            (no_result_id, "Value null at 'messages.3.member.content.1.member.toolResult.toolUseId'"),
            (no_call_id, "Value null at 'messages.2.member.content.4.member.toolUse.toolUseId'"),
            (
                string_input,
                "messages.1.content.3.toolUse.input: expected the arguments as a JSON object, got str",
            ),
            (no_signature, "messages.1.content.0.reasoningContent.reasoningText.signature"),
            (two_members, "expected a content block with one member"),
        ]
        for change, expected in cases:
            with self.subTest(change.__name__):
                problems = self.problems_of(self.mutated(change))
                self.assertTrue(problems, "no problem found")
                self.assertTrue(any(expected in p for p in problems), problems)
                reply = self.wire.history_error(problems)
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 400)
                self.assertEqual(reply.body, {"message": problems[0]})
                self.assertEqual(reply.headers["x-amzn-ErrorType"], f"ValidationException:{ERROR_NAMESPACE}")

    def test_what_the_api_accepts_is_not_flagged(self) -> None:
        """A json result block, and a JSON error text without status: error, which stays content."""

        def accepted(body: Dict[str, Any]) -> None:
            body["messages"][2]["content"][0]["toolResult"]["content"] = [{"json": {"echo": "hi"}}]
            body["messages"][2]["content"][1]["toolResult"].pop("status")

        history = self.history_of(self.mutated(accepted))
        self.assertEqual(history.problems, ())
        self.assertEqual(history.results[0].tool_result.content, '{"echo":"hi"}')
        self.assertIsNone(history.results[1].tool_result.error)
        self.assertIn('"fixture_failure"', history.results[1].tool_result.content)

    def test_an_empty_system_list_is_no_system_prompt(self) -> None:
        """An empty system list reads as no system prompt, while a list without text blocks is refused."""
        history = self.history_of(self.mutated(lambda body: body.update(system=[])))
        self.assertEqual(history.problems, ())
        self.assertNotIn("system", [m.role for m in history.messages])
        refused = self.history_of(self.mutated(lambda body: body.update(system=[{"image": {}}])))
        self.assertTrue(any(p.startswith("system: expected") for p in refused.problems), refused.problems)

    def history_of(self, body: Dict[str, Any]) -> Any:
        request = self.render([])
        raw = json.dumps(body).encode("utf-8")
        return self.history(RecordedRequest("POST", request.path, "", request.headers, raw, "HTTP/1.1"))


if __name__ == "__main__":
    unittest.main()
