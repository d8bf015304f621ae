"""Multi-turn on the Cohere wire: histories rendered and read back, refused, and turns played."""

from __future__ import annotations

import asyncio
import copy
import json
import unittest
from typing import Any, Callable, Dict, List, Tuple

from conformance.contract import (
    ChatRequest,
    ChatResponse,
    Message,
    Reasoning,
    ReasoningKind,
    ToolCall,
    ToolChoice,
    ToolError,
    ToolResult,
)
from conformance.provider import start_fake_provider
from conformance.provider.replies import JsonReply
from conformance.reference.cohere import CohereBackend
from conformance.wires._turns import History, ScriptedCall, ScriptedTurn, play_turn
from conformance.wires.cohere import cohere_wire as wire

from .turns_cases import ESCAPED_ARGUMENTS, ESCAPED_FRAGMENTS, MODEL, TOOLS, recorded_at

PLAN = Reasoning(ReasoningKind.THINKING.value, text="Both tools, one after the other.", provider="cohere")
CALL_A = ToolCall("echo_json_4kq8z2m1x0ab", "echo_json", {"text": "hi \u00e9\U0001f600"})
CALL_B = ToolCall("always_error_p3n7c5v9w2yd", "always_error", {"reason": "x"})
FAILURE = ToolError("fixture_failure", "always_error always fails", False, {"attempt": 1})


def conversation(reasoning: Tuple[Reasoning, ...] = (PLAN,)) -> List[Message]:
    """system; user; a tool turn with its plan and two calls; a result and a failure; a user turn."""
    return [
        Message("system", "Be brief."),
        Message("user", "Call both tools."),
        Message("assistant", "", tool_calls=(CALL_A, CALL_B), reasoning=reasoning),
        Message.tool(ToolResult(CALL_A.id, "echo_json", '{"echo": "hi"}')),
        Message.tool(ToolResult(CALL_B.id, "always_error", error=FAILURE)),
        Message("user", "Now sum it up."),
    ]


def rendered(messages: List[Message], stream: bool = False, **kwargs: Any) -> Dict[str, Any]:
    return CohereBackend("http://127.0.0.1:9").body(
        ChatRequest(MODEL, messages, tools=TOOLS, **kwargs), stream
    )


def history(body: Dict[str, Any]) -> History:
    read = wire.read_history(recorded_at("/v2/chat", body))
    assert read is not None
    return read


def mutated(change: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
    body = copy.deepcopy(rendered(conversation()))
    change(body)
    return body


class HistoryTest(unittest.TestCase):
    def test_rendering_is_the_v2_shape(self) -> None:
        """One system message first; the tool turn's plan and calls; one tool message per result."""
        messages = rendered(conversation())["messages"]
        self.assertEqual(
            [m["role"] for m in messages], ["system", "user", "assistant", "tool", "tool", "user"]
        )
        turn = messages[2]
        self.assertEqual(list(turn), ["role", "tool_plan", "tool_calls"])
        self.assertEqual(turn["tool_plan"], PLAN.text)
        self.assertEqual(json.loads(turn["tool_calls"][0]["function"]["arguments"]), dict(CALL_A.arguments))
        self.assertEqual(
            messages[3], {"role": "tool", "tool_call_id": CALL_A.id, "content": '{"echo": "hi"}'}
        )
        self.assertEqual(json.loads(messages[4]["content"])["error"]["code"], "fixture_failure")

    def test_round_trip_gives_the_normal_form_back(self) -> None:
        """Rendered and read back: the same conversation, the plan as the turn's reasoning, no problems.

        Cohere has no error flag on a result: the failure comes back as its JSON text."""
        read = history(rendered(conversation(), tool_choice=ToolChoice.REQUIRED))
        expected = conversation()
        failed = expected[4].tool_result
        assert failed is not None
        expected[4] = Message.tool(ToolResult(CALL_B.id, "always_error", failed.text))
        self.assertEqual(read.problems, ())
        self.assertEqual(list(read.messages), expected)
        self.assertEqual(read.tools, ("echo_json", "always_error"))
        self.assertEqual(read.tool_choice, ToolChoice.REQUIRED)
        self.assertFalse(read.stream)
        self.assertFalse(wire.marks_tool_errors)

    def test_tool_choice_has_two_values_and_no_tool_name(self) -> None:
        """AUTO sends none; REQUIRED sends REQUIRED; a named tool is offered alone with REQUIRED."""
        for choice, sent, tools in (
            (ToolChoice.AUTO, None, ["echo_json", "always_error"]),
            (ToolChoice.REQUIRED, "REQUIRED", ["echo_json", "always_error"]),
            (ToolChoice.tool("always_error"), "REQUIRED", ["always_error"]),
        ):
            with self.subTest(choice=choice):
                body = rendered([Message("user", "hi")], stream=True, tool_choice=choice)
                self.assertEqual(body.get("tool_choice"), sent)
                self.assertEqual([t["function"]["name"] for t in body["tools"]], tools)
                read = history(body)
                self.assertEqual((read.tool_choice, read.stream), (choice, True))
        self.assertIsNone(
            history({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "NONE"}).tool_choice
        )
        self.assertIsNone(history({"messages": [{"role": "user", "content": "hi"}]}).tool_choice)

    def test_reasoning_of_another_provider_is_not_sent(self) -> None:
        """A plan another provider made means nothing here: the backend drops it, and keeps the calls."""
        foreign = (Reasoning(ReasoningKind.THINKING.value, text="hm", signature="sig", provider="anthropic"),)
        body = rendered(conversation(foreign))
        self.assertNotIn("tool_plan", body["messages"][2])
        self.assertEqual(history(body).assistant_turns[0].reasoning, ())

    def test_a_text_turn_s_thinking_goes_back_as_thinking_items(self) -> None:
        """An answer's thinking goes back as thinking content items before its text, and reads back so."""
        thought = Reasoning(ReasoningKind.THINKING.value, text="Sum them.", provider="cohere")
        messages = [
            Message("user", "q"),
            Message("assistant", "It is 3.", reasoning=(thought,)),
            Message("user", "ok"),
        ]
        body = rendered(messages)
        self.assertEqual(
            body["messages"][1]["content"],
            [{"type": "thinking", "thinking": "Sum them."}, {"type": "text", "text": "It is 3."}],
        )
        self.assertEqual(list(history(body).messages), messages)

    def test_what_the_api_accepts_is_not_flagged(self) -> None:
        """Results as text or document items, a call left without a result, a thinking item beside calls."""

        def accepted(body: Dict[str, Any]) -> None:
            body["messages"][3]["content"] = [{"type": "document", "document": {"data": '{"echo": "hi"}'}}]
            body["messages"][4]["content"] = [{"type": "text", "text": "failed"}]
            body["messages"][2]["content"] = [{"type": "thinking", "thinking": "First."}]
            del body["messages"][4]

        read = history(mutated(accepted))
        self.assertEqual(read.problems, ())
        self.assertEqual([m.tool_result.content for m in read.results if m.tool_result], ['{"echo": "hi"}'])
        self.assertEqual([r.text for r in read.assistant_turns[0].reasoning], ["First.", PLAN.text])
        data = history(
            mutated(
                lambda b: b["messages"][3].update(
                    content=[{"type": "document", "document": {"data": {"a": 1}}}]
                )
            )
        )
        self.assertEqual(data.results[0].tool_result.content, '{"a": 1}')  # type: ignore[union-attr]

    def test_each_malformed_history_names_its_problem(self) -> None:
        """Each departure Cohere documents refusing is named in its words and answered with its 400."""

        def no_result_id(body: Dict[str, Any]) -> None:
            del body["messages"][3]["tool_call_id"]

        def unknown_id(body: Dict[str, Any]) -> None:
            body["messages"][3]["tool_call_id"] = "echo_json_zzzzzzzzzzzz"

        def duplicate_ids(body: Dict[str, Any]) -> None:
            body["messages"][2]["tool_calls"][1]["id"] = CALL_A.id

        def not_a_function(body: Dict[str, Any]) -> None:
            body["messages"][2]["tool_calls"][0]["type"] = "tool"

        def late_system(body: Dict[str, Any]) -> None:
            body["messages"].append({"role": "system", "content": "Late."})

        def developer(body: Dict[str, Any]) -> None:
            body["messages"][0]["role"] = "developer"

        def object_arguments(body: Dict[str, Any]) -> None:
            body["messages"][2]["tool_calls"][0]["function"]["arguments"] = {"text": "hi"}

        def openai_choice(body: Dict[str, Any]) -> None:
            body["tool_choice"] = "auto"

        cases = [
            (no_result_id, "tool call id must be provided with tool message (messages[3])"),
            (unknown_id, "tool call id not found in previous tool calls (messages[3].tool_call_id"),
            (duplicate_ids, "cannot have duplicate tool ids"),
            (not_a_function, "tool call must be of type function (messages[2].tool_calls[0].type is 'tool')"),
            (late_system, "system turn must be the first in the list (messages[6]"),
            (
                developer,
                "messages[0]: role must be one of 'system', 'user', 'assistant' or 'tool', got 'developer'",
            ),
            (object_arguments, "function.arguments must be a string (the arguments as JSON text), got dict"),
            (openai_choice, "tool_choice must be 'REQUIRED' or 'NONE', got 'auto'"),
        ]
        for change, expected in cases:
            with self.subTest(change.__name__):
                problems = history(mutated(change)).problems
                self.assertTrue(any(expected in p for p in problems), problems)
                reply = wire.history_error(problems)
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 400)
                self.assertEqual(set(reply.body), {"id", "message"})
                self.assertEqual(reply.body["message"], problems[0])


def served(turn: ScriptedTurn, stream: bool) -> Tuple[ChatResponse, List[Reasoning]]:
    """``turn`` played by the fake provider and read by the reference backend."""
    with start_fake_provider() as provider:
        provider.reply(lambda request: play_turn(wire, turn, request))
        backend = CohereBackend(provider.url)
        request = ChatRequest(MODEL, [Message("user", "go")], tools=TOOLS)

        async def whole() -> Tuple[ChatResponse, List[Reasoning]]:
            response = await backend.chat(request)
            return response, list(response.reasoning)

        async def streamed() -> Tuple[ChatResponse, List[Reasoning]]:
            text, calls, reasoning, finish = "", [], [], None
            async for chunk in backend.chat_stream(request):
                text += chunk.content
                calls.extend(chunk.tool_calls)
                reasoning.extend(chunk.reasoning)
                finish = chunk.finish_reason or finish
            return ChatResponse(text, str(finish), tuple(calls)), reasoning

        return asyncio.run(streamed() if stream else whole())


def two_calls(interleave: bool = False, fragments: bool = False) -> ScriptedTurn:
    """A tool turn with a plan and two calls, the first cut inside an escape pair when asked."""
    first = ScriptedCall(
        "echo_json_7hd0sq2lw9ke",
        "echo_json",
        ESCAPED_ARGUMENTS,
        fragments=ESCAPED_FRAGMENTS if fragments else (),
    )
    second = ScriptedCall("always_error_c1m4x8r6t3bn", "always_error", '{"reason": "caf\u00e9 \u4e2d\u6587"}')
    plan = Reasoning(ReasoningKind.THINKING.value, text="Both at once \u2014 fine.")
    return ScriptedTurn(
        calls=(first, second), reasoning=(plan,), interleave=interleave, seed=f"turns/{interleave}"
    )


class PlayedTurnTest(unittest.TestCase):
    def check(self, turn: ScriptedTurn, stream: bool) -> None:
        response, reasoning = served(turn, stream)
        self.assertEqual(response.content, turn.text)
        self.assertEqual(
            list(response.tool_calls), [ToolCall(c.id, c.name, json.loads(c.arguments)) for c in turn.calls]
        )
        self.assertEqual(
            [(r.kind, r.text, r.provider) for r in reasoning],
            [("thinking", r.text, "cohere") for r in turn.reasoning],
        )
        self.assertEqual(response.finish_reason, "tool_calls")

    def test_a_tool_turn_reads_back_exactly(self) -> None:
        """The plan comes back as reasoning and the calls whole, both forms, sequential or interleaved."""
        self.check(two_calls(), stream=False)
        for interleave in (False, True):
            with self.subTest(interleave=interleave):
                self.check(two_calls(interleave, fragments=True), stream=True)

    def test_a_tool_turn_plays_its_plan_as_tool_plan(self) -> None:
        """A turn with calls plays its reasoning as the tool_plan; one without, as thinking items."""
        request = recorded_at("/v2/chat", {"model": MODEL, "messages": [], "stream": False})
        reply = wire.turn_whole(two_calls(), request)
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.body["message"]["tool_plan"], "Both at once \u2014 fine.")
        self.assertEqual(reply.body["finish_reason"], "TOOL_CALL")
        answer = ScriptedTurn(text="Done.", reasoning=two_calls().reasoning, seed="turns/answer")
        reply = wire.turn_whole(answer, request)
        assert isinstance(reply, JsonReply)
        self.assertEqual([c["type"] for c in reply.body["message"]["content"]], ["thinking", "text"])

    def test_finish_reasons_are_spelled_as_cohere_does(self) -> None:
        """A text turn ends COMPLETE and reads as stop; a turn cut by the limit as length, with no call."""
        for stream in (False, True):
            with self.subTest(stream=stream):
                response, _ = served(ScriptedTurn(text="Done.", seed="turns/stop"), stream)
                self.assertEqual((response.content, response.finish_reason), ("Done.", "stop"))
                cut = ScriptedTurn(
                    text="Cut", calls=two_calls().calls[:1], finish="length", seed="turns/length"
                )
                response, _ = served(cut, stream)
                self.assertEqual(
                    (response.content, response.finish_reason, list(response.tool_calls)),
                    ("Cut", "length", []),
                )

    def test_a_corrupt_call_reaches_the_loop_unparsed_in_both_forms(self) -> None:
        """Argument text that does not parse comes as unparsed_arguments, exactly, whole or streamed."""
        text = '{"text": "unterminated'
        call = ScriptedCall("echo_json_e0e0e0e0e0e0", "echo_json", text, fragments=(text[:6], text[6:]))
        for stream in (False, True):
            with self.subTest(stream=stream):
                response, _ = served(ScriptedTurn(calls=(call,), seed="turns/corrupt"), stream)
                self.assertEqual(
                    list(response.tool_calls), [ToolCall(call.id, "echo_json", {}, unparsed_arguments=text)]
                )
                self.assertEqual(response.finish_reason, "tool_calls")

    def test_argument_indexes_name_the_first_and_last_fragment(self) -> None:
        """Each call's span names the events of its first and last fragment, interleaved or not."""
        request = recorded_at("/v2/chat", {"model": MODEL, "messages": [], "stream": True})
        for interleave in (False, True):
            turn = two_calls(interleave, fragments=True)
            played = wire.turn_stream(turn, request)
            assert played is not None
            for position, call in enumerate(turn.calls):
                first, last = played.arguments[position]
                for index, piece in ((first, call.pieces()[0]), (last, call.pieces()[-1])):
                    self.assertIn(
                        json.dumps(piece, ensure_ascii=False)[1:-1].encode("utf-8"), played.events[index]
                    )
                    self.assertIn(b"event: tool-call-delta", played.events[index])
            if interleave:
                self.assertLess(played.arguments[1][0], played.arguments[0][1])

    def test_a_call_without_arguments_ends_at_once(self) -> None:
        """A call with empty arguments is tool-call-start then tool-call-end, and reads back as {}."""
        call = ScriptedCall("echo_json_n0n0n0n0n0n0", "echo_json", "")
        request = recorded_at("/v2/chat", {"model": MODEL, "messages": [], "stream": True})
        played = wire.turn_stream(ScriptedTurn(calls=(call,), seed="turns/empty"), request)
        assert played is not None
        names = [e.split(b"\n", 1)[0] for e in played.events]
        start = names.index(b"event: tool-call-start")
        self.assertEqual(names[start + 1], b"event: tool-call-end")
        self.assertEqual(played.arguments[0], (start, start))
        response, _ = served(ScriptedTurn(calls=(call,), seed="turns/empty"), stream=True)
        self.assertEqual(list(response.tool_calls), [ToolCall(call.id, "echo_json", {})])


if __name__ == "__main__":
    unittest.main()
