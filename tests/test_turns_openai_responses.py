"""Multi-turn on the OpenAI Responses wire: histories read back, refused, and turns played."""

from __future__ import annotations

import asyncio
import json
import unittest
from typing import Any, Dict, List, Tuple

from conformance.contract import (
    ChatRequest,
    Message,
    Reasoning,
    ReasoningKind,
    ToolCall,
    ToolChoice,
    ToolError,
    ToolResult,
)
from conformance.provider import start_fake_provider
from conformance.provider.replies import JsonReply, RecordedRequest, StreamReply
from conformance.reference._decoders import SSEDecoder
from conformance.reference.openai_responses import OpenAIResponsesBackend
from conformance.wires._turns import ScriptedCall, ScriptedTurn, play_turn
from conformance.wires.openai_responses import openai_responses_wire as wire

from .turns_cases import LOOKUP_A as CALL_A
from .turns_cases import LOOKUP_B as CALL_B
from .turns_cases import LOOKUP_TOOLS as TOOLS
from .turns_cases import lookups, recorded_at

MODEL = "conformance-model"
TIMEOUT = 10.0
REASONING = Reasoning(
    ReasoningKind.REASONING_ITEM.value,
    id="rs_0a1b2c",
    summary=("Two lookups, then answer.", "Ré-check ☀."),
    data="gAAAAABo+encrypted/content==",
    provider="openai",
)
FAILED = ToolResult("call_b2", "read_fixture", error=ToolError("not_found", "no such file", details={"p": 1}))


def conversation() -> List[Message]:
    return lookups(REASONING, FAILED)


def recorded(body: Any) -> RecordedRequest:
    return recorded_at("/v1/responses", body)


def rendered(messages: List[Message], stream: bool = False, **kwargs: Any) -> Dict[str, Any]:
    backend = OpenAIResponsesBackend("http://127.0.0.1:9/v1")
    return backend.body(ChatRequest(MODEL, messages, tools=TOOLS, **kwargs), stream)


def problems_of(body: Dict[str, Any]) -> Tuple[str, ...]:
    history = wire.read_history(recorded(body))
    assert history is not None
    return history.problems


class HistoryTest(unittest.TestCase):
    def test_round_trip_gives_the_normal_form_back(self) -> None:
        """Rendered by the reference backend and read back: the same conversation, no problems.

        Responses has no error flag on a result, so the failed tool comes back as the
        error's JSON text in content, which is what was sent.
        """
        history = wire.read_history(recorded(rendered(conversation(), tool_choice=ToolChoice.REQUIRED)))
        assert history is not None
        expected = conversation()
        expected[4] = Message.tool(ToolResult("call_b2", "read_fixture", content=FAILED.text))
        self.assertEqual(history.problems, ())
        self.assertEqual(list(history.messages), expected)
        self.assertEqual(history.tools, ("echo_json", "read_fixture"))
        self.assertEqual(history.tool_choice, ToolChoice.REQUIRED)
        self.assertFalse(history.stream)
        self.assertEqual(len(history.results), 2)

    def test_tool_choice_and_stream_flag(self) -> None:
        """A named tool, auto, and the stream flag read back."""
        for choice in (ToolChoice.AUTO, ToolChoice.tool("echo_json")):
            with self.subTest(choice=choice):
                history = wire.read_history(recorded(rendered(conversation(), True, tool_choice=choice)))
                assert history is not None
                self.assertEqual(history.tool_choice, choice)
                self.assertTrue(history.stream)

    def test_reasoning_of_another_provider_is_not_sent(self) -> None:
        """An Anthropic thinking block and a foreign reasoning item stay out of the input."""
        foreign = (
            Reasoning(ReasoningKind.THINKING.value, text="hm", signature="sig", provider="anthropic"),
            Reasoning(ReasoningKind.REASONING_ITEM.value, id="rs_x", data="zz", provider="azure"),
        )
        messages = conversation()
        messages[2] = Message("assistant", "", tool_calls=(CALL_A, CALL_B), reasoning=foreign)
        body = rendered(messages)
        self.assertFalse([i for i in body["input"] if i.get("type") == "reasoning"])
        self.assertEqual(problems_of(body), ())

    def test_what_the_api_accepts_is_not_flagged(self) -> None:
        """A plain string input, typed message items with content parts, and developer roles pass."""
        self.assertEqual(problems_of({"model": MODEL, "input": "hi"}), ())
        body = {
            "model": MODEL,
            "input": [
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "Be brief."}],
                },
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hello"}],
                },
                {"type": "item_reference", "id": "msg_1"},
            ],
        }
        history = wire.read_history(recorded(body))
        assert history is not None
        self.assertEqual(history.problems, ())
        self.assertEqual(
            list(history.messages),
            [Message("system", "Be brief."), Message("user", "hi"), Message("assistant", "Hello")],
        )


def _mutate(change: Any) -> Dict[str, Any]:
    body = rendered(conversation())
    change(body)
    return body


def _items(body: Dict[str, Any], type_: str) -> List[Dict[str, Any]]:
    return [item for item in body["input"] if item.get("type") == type_]


def _chat_shaped(body: Dict[str, Any]) -> None:
    body["input"] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_a1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "call_a1", "content": "r"},
    ]


#: name -> (how the rendering is broken, the words its first problem starts with).
MALFORMED: Dict[str, Tuple[Any, str]] = {
    "output for an unknown call": (
        lambda b: _items(b, "function_call_output")[0].update(call_id="call_zz"),
        "No tool call found for function call output with call_id call_zz",
    ),
    "call without its output": (
        lambda b: b["input"].remove(_items(b, "function_call_output")[1]),
        "No tool output found for function call call_b2",
    ),
    "chat-shaped history": (_chat_shaped, "Unknown parameter: 'input[1].tool_calls'"),
    "arguments as an object": (
        lambda b: _items(b, "function_call")[0].update(arguments={"text": "x"}),
        "Invalid type for 'input[3].arguments': expected a string, but got an object instead",
    ),
    "output without call_id": (
        lambda b: _items(b, "function_call_output")[0].pop("call_id"),
        "Missing required parameter: 'input[5].call_id'",
    ),
    "reasoning alone": (
        lambda b: b.update(input=b["input"][:2] + [b["input"][-1]]),
        "Item 'rs_0a1b2c' of type 'reasoning' was provided without its required following item",
    ),
    "reasoning without encrypted content when store is false": (
        lambda b: (b.update(store=False), _items(b, "reasoning")[0].pop("encrypted_content")),
        "Item with id 'rs_0a1b2c' not found. Items are not persisted when `store` is set to false",
    ),
    "reasoning without its summary": (
        lambda b: _items(b, "reasoning")[0].pop("summary"),
        "Missing required parameter: 'input[1].summary'",
    ),
    "chat-shaped tool choice": (
        lambda b: b.update(tool_choice={"type": "function", "function": {"name": "echo_json"}}),
        "Missing required parameter: 'tool_choice.name'",
    ),
    "unknown item type": (
        lambda b: _items(b, "function_call_output")[0].update(type="tool_result"),
        "Invalid value: 'tool_result' at 'input[5].type'",
    ),
}


class MalformedTest(unittest.TestCase):
    def test_each_malformed_history_is_named_and_refused(self) -> None:
        """Each departure gives its sentence, and history_error the API's 400 quoting it."""
        for name, (change, words) in MALFORMED.items():
            with self.subTest(name):
                problems = problems_of(_mutate(change))
                self.assertTrue(problems, "no problem found")
                self.assertTrue(problems[0].startswith(words), problems)
                reply = wire.history_error(problems)
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 400)
                error = reply.body["error"]
                self.assertEqual(error["message"], problems[0])
                self.assertEqual(error["type"], "invalid_request_error")
                self.assertIsNone(error["code"])

    def test_history_error_names_the_offending_param(self) -> None:
        reply = wire.history_error(problems_of(_mutate(MALFORMED["arguments as an object"][0])))
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.body["error"]["param"], "input[3].arguments")


# -- turns served and decoded ----------------------------------------------------------------

ARGS_A = '{"text": "sun ☀ and \\ud83d\\ude00", "count": 2, "tags": ["a"]}'
ARGS_B = '{"path": "notes/unicode.txt"}'
# Cut inside a \uXXXX escape, between the two escapes of a surrogate pair, and mid-value.
SPLIT_A = ARGS_A.index("\\ud83d") + 3
PAIR_A = ARGS_A.index("\\ude00")
FRAGMENTS_A = (ARGS_A[:10], ARGS_A[10:SPLIT_A], ARGS_A[SPLIT_A:PAIR_A], ARGS_A[PAIR_A:])


def scripted(interleave: bool, finish: str = "") -> ScriptedTurn:
    return ScriptedTurn(
        text="Checking ☀ twice.",
        calls=(
            ScriptedCall("call_a1", "echo_json", ARGS_A, FRAGMENTS_A),
            ScriptedCall("call_b2", "read_fixture", ARGS_B),
        ),
        reasoning=(REASONING,),
        finish=finish,
        interleave=interleave,
        seed="two-calls",
    )


def expected_calls(turn: ScriptedTurn) -> List[ToolCall]:
    return [ToolCall(c.id, c.name, json.loads(c.arguments)) for c in turn.calls]


def streamed(turn: ScriptedTurn, request: RecordedRequest) -> StreamReply:
    reply = play_turn(wire, turn, request)
    assert isinstance(reply, StreamReply), reply
    return reply


def byte_cuts(reply: StreamReply, size: int) -> StreamReply:
    """The same stream in ``size``-byte chunks: cuts inside every multi-byte character."""
    data = b"".join(reply.chunks)
    chunks = [data[at : at + size] for at in range(0, len(data), size)]
    return StreamReply(chunks, content_type=reply.content_type, headers=dict(reply.headers))


async def _collect(url: str, stream: bool) -> Tuple[str, List[ToolCall], List[Reasoning], str]:
    backend = OpenAIResponsesBackend(url + "/v1", timeout=TIMEOUT)
    request = ChatRequest(MODEL, [Message("user", "q")], tools=TOOLS)
    if not stream:
        response = await backend.chat(request)
        return response.content, list(response.tool_calls), list(response.reasoning), response.finish_reason
    text, calls, reasoning, finish = "", [], [], ""
    async for chunk in backend.chat_stream(request):
        text += chunk.content
        calls.extend(chunk.tool_calls)
        reasoning.extend(chunk.reasoning)
        finish = chunk.finish_reason or finish
    return text, calls, reasoning, finish


class PlayedTurnTest(unittest.TestCase):
    def setUp(self) -> None:
        self.provider = start_fake_provider()
        self.addCleanup(self.provider.close)

    def collect(self, stream: bool) -> Tuple[str, List[ToolCall], List[Reasoning], str]:
        return asyncio.run(asyncio.wait_for(_collect(self.provider.url, stream), TIMEOUT))

    def assert_turn(self, turn: ScriptedTurn, got: Tuple[str, List[ToolCall], List[Reasoning], str]) -> None:
        text, calls, reasoning, finish = got
        self.assertEqual(text, turn.text)
        self.assertEqual(calls, expected_calls(turn))
        self.assertEqual(reasoning, [REASONING])
        self.assertEqual(finish, "tool_calls")

    def test_whole_turn(self) -> None:
        turn = scripted(False)
        self.provider.reply(lambda r: wire.turn_whole(turn, r))
        self.assert_turn(turn, self.collect(False))
        self.assertFalse(wire.wants_stream(self.provider.next_request()))

    def test_streamed_turn_sequential_and_interleaved(self) -> None:
        for interleave in (False, True):
            with self.subTest(interleave=interleave):
                turn = scripted(interleave)
                self.provider.reply(lambda r, t=turn: play_turn(wire, t, r))
                self.assert_turn(turn, self.collect(True))

    def test_cuts_inside_multibyte_characters(self) -> None:
        """Every byte boundary of the stream cut, for the UTF-8 of the sun and the grinning face."""
        turn = scripted(True)
        for size in (1, 3, 7):
            with self.subTest(size=size):
                self.provider.reply(lambda r, s=size: byte_cuts(streamed(turn, r), s))
                self.assert_turn(turn, self.collect(True))

    def test_interleaved_events_and_argument_spans(self) -> None:
        """Deltas alternate between the calls' output indexes; the spans name their first and last."""
        turn = scripted(True)
        played = wire.turn_stream(turn, recorded({"model": MODEL, "stream": True}))
        assert played is not None
        decoder = SSEDecoder()
        events = [json.loads(e.data) for chunk in played.events for e in decoder.feed(chunk)]
        self.assertEqual(len(events), len(played.events))
        deltas = [
            (n, e["output_index"]) for n, e in enumerate(events) if e["type"].endswith("arguments.delta")
        ]
        owners = [index for _, index in deltas]
        self.assertEqual(owners[:4], [2, 3, 2, 3])  # reasoning 0, message 1, then the calls
        for position, index in ((0, 2), (1, 3)):
            mine = [n for n, owner in deltas if owner == index]
            self.assertEqual(played.arguments[position], (mine[0], mine[-1]))
            joined = "".join(events[n]["delta"] for n in mine)
            self.assertEqual(joined, turn.calls[position].arguments)
        self.assertEqual([e["sequence_number"] for e in events], list(range(len(events))))
        self.assertEqual(events[-1]["type"], "response.completed")

    def test_a_length_turn_keeps_no_call(self) -> None:
        turn = scripted(False, finish="length")
        self.provider.reply(lambda r: play_turn(wire, turn, r))
        text, calls, reasoning, finish = self.collect(True)
        self.assertEqual((text, calls, finish), (turn.text, [], "length"))

    def test_a_filtered_turn_ends_incomplete_for_the_content_filter(self) -> None:
        """A content_filter turn ends incomplete with reason content_filter, whole and streamed."""
        turn = ScriptedTurn(finish="content_filter", seed="filtered")
        whole = wire.turn_whole(turn, recorded({"model": MODEL}))
        assert isinstance(whole, JsonReply) and isinstance(whole.body, dict)
        details = (whole.body["status"], whole.body["incomplete_details"])
        self.assertEqual(details, ("incomplete", {"reason": "content_filter"}))
        played = wire.turn_stream(turn, recorded({"model": MODEL, "stream": True}))
        assert played is not None
        last = [json.loads(e.data) for chunk in played.events for e in SSEDecoder().feed(chunk)][-1]
        self.assertEqual(last["type"], "response.incomplete")
        self.assertEqual(last["response"]["incomplete_details"], {"reason": "content_filter"})
        for stream in (False, True):
            with self.subTest(stream=stream):
                self.provider.reply(lambda r: play_turn(wire, turn, r))
                self.assertEqual(self.collect(stream)[3], "content_filter")

    def test_a_corrupt_call_reaches_the_loop_unparsed(self) -> None:
        """A finished function_call whose arguments do not parse comes unparsed, whole and streamed."""
        text = '{"text": "unterminated'
        turn = ScriptedTurn(
            calls=(ScriptedCall("call_corrupt", "echo_json", text, fragments=(text[:4], text[4:])),),
            seed="corrupt",
        )
        for stream in (False, True):
            with self.subTest(stream=stream):
                self.provider.reply(lambda r: play_turn(wire, turn, r))
                _, calls, _, finish = self.collect(stream)
                self.assertEqual(calls, [ToolCall("call_corrupt", "echo_json", {}, unparsed_arguments=text)])
                self.assertEqual(finish, "tool_calls")

    def test_runs_are_identical(self) -> None:
        """The same seed gives the same events, ids included."""
        request = recorded({"model": MODEL, "stream": True})
        first, second = (wire.turn_stream(scripted(True), request) for _ in range(2))
        assert first is not None and second is not None
        self.assertEqual(first.events, second.events)


if __name__ == "__main__":
    unittest.main()
