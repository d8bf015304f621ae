"""Multi-turn on the Anthropic wire: scripted turns, histories read back, and the 400s."""

from __future__ import annotations

import copy
import json
import unittest
from typing import Any, Callable, Dict

from conformance.contract import Message
from conformance.provider.replies import JsonReply, RecordedRequest
from conformance.reference.anthropic import AnthropicBackend
from conformance.wires.anthropic import anthropic_wire

from .turns_cases import TurnCases, conversation


class AnthropicTurnsTest(TurnCases, unittest.TestCase):
    wire = anthropic_wire
    backend_class = AnthropicBackend
    provider = "anthropic"

    def good(self) -> Dict[str, Any]:
        body = self.render(conversation("anthropic")).json
        assert isinstance(body, dict)
        return body

    def mutated(self, change: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
        body = copy.deepcopy(self.good())
        change(body)
        return body

    def test_rendering_groups_results_first_in_one_user_turn(self) -> None:
        messages = self.good()["messages"]
        self.assertEqual([m["role"] for m in messages], ["user", "assistant", "user"])
        types = [b["type"] for b in messages[1]["content"]]
        self.assertEqual(types, ["thinking", "redacted_thinking", "text", "tool_use", "tool_use"])
        results = messages[2]["content"]
        self.assertEqual([b["type"] for b in results], ["tool_result", "tool_result", "text"])
        self.assertNotIn("is_error", results[0])
        self.assertIs(results[1]["is_error"], True)
        self.assertEqual(messages[1]["content"][3]["input"], {"text": "hi \u00e9\U0001f600"})

    def test_each_malformed_history_names_its_problem(self) -> None:
        def drop_result(body: Dict[str, Any]) -> None:
            del body["messages"][2]["content"][1]

        def wrong_id(body: Dict[str, Any]) -> None:
            body["messages"][2]["content"][0]["tool_use_id"] = "toolu_01Zz"

        def result_as_text(body: Dict[str, Any]) -> None:
            body["messages"][2]["content"] = [{"type": "text", "text": '{"echo": "hi"}'}]

        def text_first(body: Dict[str, Any]) -> None:
            content = body["messages"][2]["content"]
            content.insert(0, content.pop())

        def tool_role(body: Dict[str, Any]) -> None:
            body["messages"][2] = {"role": "tool", "tool_call_id": "toolu_01Aa", "content": "hi"}

        def system_role(body: Dict[str, Any]) -> None:
            body["messages"].insert(0, {"role": "system", "content": "Be brief."})

        def no_result_id(body: Dict[str, Any]) -> None:
            del body["messages"][2]["content"][0]["tool_use_id"]

        def no_call_id(body: Dict[str, Any]) -> None:
            del body["messages"][1]["content"][3]["id"]

        def string_input(body: Dict[str, Any]) -> None:
            call = body["messages"][1]["content"][3]
            call["input"] = json.dumps(call["input"])

        def no_signature(body: Dict[str, Any]) -> None:
            del body["messages"][1]["content"][0]["signature"]

        def empty_content(body: Dict[str, Any]) -> None:
            body["messages"][0]["content"] = []

        cases = [
            (
                drop_result,
                "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
                "toolu_01Bb",
            ),
            (
                wrong_id,
                "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01Zz",
            ),
            (
                result_as_text,
                "`tool_use` ids were found without `tool_result` blocks immediately after: "
                "toolu_01Aa, toolu_01Bb",
            ),
            (text_first, "`tool_use` ids were found without `tool_result` blocks immediately after"),
            (tool_role, "messages.2.role: Input should be 'user' or 'assistant'"),
            (system_role, 'Unexpected role "system"'),
            (no_result_id, "messages.2.content.0.tool_result.tool_use_id: Field required"),
            (no_call_id, "messages.1.content.3.tool_use.id: Field required"),
            (
                string_input,
                "messages.1.content.3.tool_use.input: Input should be a valid dictionary (send the parsed",
            ),
            (no_signature, "messages.1.content.0.thinking.signature: Field required"),
            (empty_content, "messages.0: all messages must have non-empty content"),
        ]
        for change, expected in cases:
            with self.subTest(change.__name__):
                problems = self.problems_of(self.mutated(change))
                self.assertTrue(problems, "no problem found")
                self.assertTrue(any(expected in p for p in problems), problems)
                reply = self.wire.history_error(problems)
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 400)
                self.assertEqual(reply.body["type"], "error")
                self.assertEqual(
                    reply.body["error"], {"type": "invalid_request_error", "message": problems[0]}
                )

    def test_thinking_enabled_needs_the_thinking_block_back(self) -> None:
        def strip(body: Dict[str, Any]) -> None:
            body["thinking"] = {"type": "enabled", "budget_tokens": 2048}
            body["messages"][1]["content"] = body["messages"][1]["content"][2:]

        problems = self.problems_of(self.mutated(strip))
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("Expected `thinking` or `redacted_thinking`, but found `text`", problems[0])

        # An earlier tool turn without its thinking is accepted: the API holds only the last one to it.
        def earlier(body: Dict[str, Any]) -> None:
            strip(body)
            body["messages"] += [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "t", "signature": "s"},
                        {"type": "tool_use", "id": "toolu_01Ee", "name": "echo_json", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_01Ee", "content": "ok"}],
                },
            ]

        self.assertEqual(self.problems_of(self.mutated(earlier)), ())
        # Without thinking enabled, the same turn is accepted.
        self.assertEqual(
            self.problems_of(
                self.mutated(lambda b: b["messages"][1].update(content=b["messages"][1]["content"][2:]))
            ),
            (),
        )

    def test_what_the_api_accepts_is_not_flagged(self) -> None:
        """Consecutive user turns (the API merges them) and a JSON error text without is_error."""

        def accepted(body: Dict[str, Any]) -> None:
            body["messages"].insert(0, {"role": "user", "content": [{"type": "text", "text": "Hello."}]})
            body["messages"][3]["content"][0]["content"] = '{"error": {"code": "x", "message": "y"}}'

        history = self.history_of(self.mutated(accepted))
        self.assertEqual(history.problems, ())
        self.assertEqual(history.results[0].tool_result.content, '{"error": {"code": "x", "message": "y"}}')
        self.assertIsNone(history.results[0].tool_result.error)

    def test_results_split_over_consecutive_user_messages_answer_the_turn(self) -> None:
        """One tool_result per user message: the API combines consecutive user turns, so both calls
        are answered; a call left without any result is still refused."""

        def split(body: Dict[str, Any]) -> None:
            first, second, text = body["messages"][2]["content"]
            body["messages"][2:] = [
                {"role": "user", "content": [first]},
                {"role": "user", "content": [second]},
                {"role": "user", "content": [text]},
            ]

        history = self.history_of(self.mutated(split))
        self.assertEqual(history.problems, ())
        self.assertEqual([m.tool_result.call_id for m in history.results], ["toolu_01Aa", "toolu_01Bb"])
        self.assertIs(history.results[1].tool_result.is_error, True)

        def split_and_drop(body: Dict[str, Any]) -> None:
            split(body)
            del body["messages"][3]

        history = self.history_of(self.mutated(split_and_drop))
        self.assertEqual(len(history.problems), 1)
        unanswered = "messages.1: `tool_use` ids were found without `tool_result` blocks"
        self.assertIn(unanswered, history.problems[0])

    def history_of(self, body: Dict[str, Any]) -> Any:
        request = self.render([Message("user", "x")])
        raw = json.dumps(body).encode("utf-8")
        return self.history(RecordedRequest("POST", request.path, "", request.headers, raw, "HTTP/1.1"))


if __name__ == "__main__":
    unittest.main()
