"""Multi-turn on the Ollama wire: histories read back, refused, and turns played."""

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
from conformance.reference._decoders import NDJSONDecoder
from conformance.reference.ollama import OllamaBackend
from conformance.wires._turns import ScriptedCall, ScriptedTurn, play_turn
from conformance.wires.ollama import ollama_wire as wire

from .turns_cases import LOOKUP_A as CALL_A
from .turns_cases import LOOKUP_B as CALL_B
from .turns_cases import LOOKUP_TOOLS as TOOLS
from .turns_cases import lookups, recorded_at

MODEL = "conformance-model"
TIMEOUT = 10.0
THINKING = Reasoning(ReasoningKind.THINKING.value, text="Two lookups ☀, then answer.", provider="ollama")
FAILED = ToolResult("call_b2", "read_fixture", error=ToolError("not_found", "no such file"))


def conversation() -> List[Message]:
    return lookups(THINKING, FAILED)


def recorded(body: Any) -> RecordedRequest:
    return recorded_at("/api/chat", body)


def rendered(messages: List[Message], stream: bool = False, **kwargs: Any) -> Dict[str, Any]:
    backend = OllamaBackend("http://127.0.0.1:9")
    return backend.body(ChatRequest(MODEL, messages, tools=TOOLS, **kwargs), stream)


def problems_of(body: Dict[str, Any]) -> Tuple[str, ...]:
    history = wire.read_history(recorded(body))
    assert history is not None
    return history.problems


class HistoryTest(unittest.TestCase):
    def test_round_trip_gives_the_normal_form_back(self) -> None:
        """Rendered and read back: the same conversation, without ids, no problems.

        Ollama sends no call ids and takes none back: calls and results read back with
        an empty id and are matched by name and order. It has no error flag, so the
        failed tool comes back as the error's JSON text in content.
        """
        history = wire.read_history(recorded(rendered(conversation(), tool_choice=ToolChoice.REQUIRED)))
        assert history is not None
        expected = conversation()
        expected[2] = Message(
            "assistant",
            "Let me look.",
            tool_calls=tuple(ToolCall("", c.name, c.arguments) for c in (CALL_A, CALL_B)),
            reasoning=(THINKING,),
        )
        expected[3] = Message.tool(ToolResult("", "echo_json", content='{"echo": "sun ☀"}'))
        expected[4] = Message.tool(ToolResult("", "read_fixture", content=FAILED.text))
        self.assertEqual(history.problems, ())
        self.assertEqual(list(history.messages), expected)
        self.assertEqual(history.tools, ("echo_json", "read_fixture"))
        self.assertIsNone(history.tool_choice)  # Ollama has no such setting
        self.assertFalse(history.stream)
        self.assertFalse(wire.sends_call_ids)

    def test_stream_is_the_default(self) -> None:
        body = rendered(conversation())
        body.pop("stream")
        history = wire.read_history(recorded(body))
        assert history is not None
        self.assertTrue(history.stream)

    def test_thinking_of_another_provider_is_not_sent(self) -> None:
        messages = conversation()
        foreign = (Reasoning(ReasoningKind.THINKING.value, text="hm", signature="sig", provider="anthropic"),)
        messages[2] = Message("assistant", "", tool_calls=(CALL_A,), reasoning=foreign)
        self.assertNotIn("thinking", rendered(messages)["messages"][2])

    def test_what_the_server_accepts_is_not_flagged(self) -> None:
        """A result with no call before it, or sent as user text: Ollama checks neither."""
        body = {
            "model": MODEL,
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "tool", "content": "r"},
                {"role": "user", "content": "the tool said r"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "call_x", "function": {"name": "f"}}],
                },
                {"role": "assistant", "content": None, "thinking": None, "tool_calls": [{"id": "call_y"}]},
            ],
        }
        history = wire.read_history(recorded(body))
        assert history is not None
        self.assertEqual(history.problems, ())
        self.assertEqual(history.assistant_turns[0].tool_calls, (ToolCall("call_x", "f", {}),))
        self.assertEqual(history.assistant_turns[1].tool_calls, (ToolCall("call_y", "", {}),))


def _call(body: Dict[str, Any]) -> Dict[str, Any]:
    return body["messages"][2]["tool_calls"][0]["function"]  # type: ignore[no-any-return]


#: name -> (how the rendering is broken, the words its first problem holds).
MALFORMED: Dict[str, Tuple[Any, str]] = {
    "arguments as a JSON string": (
        lambda b: _call(b).update(arguments='{"text": "x"}'),
        "json: cannot unmarshal string into messages[2].tool_calls[0].function.arguments",
    ),
    "content as a list of parts": (
        lambda b: b["messages"][1].update(content=[{"type": "text", "text": "q"}]),
        "json: cannot unmarshal array into messages[1].content of type string",
    ),
    "tool_calls not a list": (
        lambda b: b["messages"][2].update(tool_calls={"function": {}}),
        "json: cannot unmarshal object into messages[2].tool_calls",
    ),
    "a function that is a string": (
        lambda b: b["messages"][2]["tool_calls"][1].update(function="read_fixture"),
        "json: cannot unmarshal string into messages[2].tool_calls[1].function",
    ),
    "thinking not a string": (
        lambda b: b["messages"][2].update(thinking=["a"]),
        "json: cannot unmarshal array into messages[2].thinking",
    ),
}


class MalformedTest(unittest.TestCase):
    def test_each_malformed_history_is_named_and_refused(self) -> None:
        for name, (change, words) in MALFORMED.items():
            with self.subTest(name):
                body = rendered(conversation())
                change(body)
                problems = problems_of(body)
                self.assertEqual(len(problems), 1, problems)
                self.assertTrue(problems[0].startswith(words), problems)
                reply = wire.history_error(problems)
                assert isinstance(reply, JsonReply)
                self.assertEqual((reply.status, reply.body), (400, {"error": problems[0]}))


# -- turns served and decoded ----------------------------------------------------------------

ARGS_A = '{"text": "sun ☀ and \\ud83d\\ude00", "count": 2, "tags": ["a"]}'
ARGS_B = '{"path": "notes/unicode.txt"}'


def scripted(interleave: bool = False, finish: str = "") -> ScriptedTurn:
    return ScriptedTurn(
        text="Checking ☀ twice.",
        calls=(ScriptedCall("call_a1", "echo_json", ARGS_A), ScriptedCall("call_b2", "read_fixture", ARGS_B)),
        reasoning=(THINKING,),
        finish=finish,
        interleave=interleave,
        seed="two-calls",
    )


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
    backend = OllamaBackend(url, timeout=TIMEOUT)
    request = ChatRequest(MODEL, [Message("user", "q")], tools=TOOLS)
    if not stream:
        response = await backend.chat(request)
        return response.content, list(response.tool_calls), list(response.reasoning), response.finish_reason
    text, calls, reasoning, finish = "", [], [], ""
    async for chunk in backend.chat_stream(request):
        if chunk.reasoning:
            # A streamed item only once complete: no text or call came before it.
            assert not text and not calls, (text, calls)
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
        """Text, each call once with its parsed arguments and an id of its own, thinking exact."""
        text, calls, reasoning, finish = got
        self.assertEqual(text, turn.text)
        self.assertEqual(
            [(c.name, dict(c.arguments)) for c in calls],
            [(c.name, json.loads(c.arguments)) for c in turn.calls],
        )
        self.assertEqual(len({c.id for c in calls}), 2)
        self.assertTrue(all(c.id for c in calls))
        self.assertEqual(reasoning, [THINKING])
        self.assertEqual(finish, "tool_calls")

    def test_whole_turn(self) -> None:
        turn = scripted()
        self.provider.reply(lambda r: wire.turn_whole(turn, r))
        self.assert_turn(turn, self.collect(False))

    def test_streamed_turn(self) -> None:
        """Interleaving asks for nothing Ollama can do: the calls come whole either way."""
        for interleave in (False, True):
            with self.subTest(interleave=interleave):
                turn = scripted(interleave)
                self.provider.reply(lambda r, t=turn: streamed(t, r))
                self.assert_turn(turn, self.collect(True))

    def test_cuts_inside_multibyte_characters(self) -> None:
        turn = scripted(True)
        for size in (1, 3, 7):
            with self.subTest(size=size):
                self.provider.reply(lambda r, s=size: byte_cuts(streamed(turn, r), s))
                self.assert_turn(turn, self.collect(True))

    def test_lines_and_argument_spans(self) -> None:
        """Thinking lines, text lines, one line per whole call, the done line; spans name the call lines."""
        turn = scripted(True)
        played = wire.turn_stream(turn, recorded({"model": MODEL}))
        assert played is not None
        decoder = NDJSONDecoder()
        lines = [line for chunk in played.events for line in decoder.feed(chunk)]
        self.assertEqual(len(lines), len(played.events))
        for position in (0, 1):
            first, last = played.arguments[position]
            self.assertEqual(first, last)
            [entry] = lines[first]["message"]["tool_calls"]
            self.assertEqual(entry["function"]["arguments"], json.loads(turn.calls[position].arguments))
            self.assertNotIn("id", entry)
        self.assertEqual("".join(line["message"].get("thinking", "") for line in lines), THINKING.text)
        self.assertEqual(lines[-1]["done_reason"], "stop")

    def test_unparsable_arguments_stay_text(self) -> None:
        """A call the server's parser cannot read is passed on as content, never as a call."""
        turn = ScriptedTurn(calls=(ScriptedCall("c", "echo_json", '{"text": "x"'),), seed="corrupt")
        self.provider.reply(lambda r: streamed(turn, r))
        text, calls, _, finish = self.collect(True)
        self.assertEqual((text, calls, finish), ('{"text": "x"', [], "stop"))

    def test_an_old_server_s_unparsable_string_arguments_reach_the_loop_unparsed(self) -> None:
        """Servers before 0.4 sent arguments as JSON text; text that does not parse comes unparsed."""
        body = {
            "model": MODEL,
            "created_at": "2025-01-01T00:00:00Z",
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "echo_json", "arguments": '{"text": "x"'}}],
            },
            "done": True,
            "done_reason": "stop",
        }
        self.provider.reply(JsonReply(body))
        _, calls, _, finish = self.collect(False)
        self.assertEqual(finish, "tool_calls")
        self.assertEqual(
            [(c.name, dict(c.arguments), c.unparsed_arguments) for c in calls],
            [("echo_json", {}, '{"text": "x"')],
        )

    def test_a_length_turn_keeps_no_call(self) -> None:
        turn = scripted(finish="length")
        self.provider.reply(lambda r: wire.turn_whole(turn, r))
        text, calls, _, finish = self.collect(False)
        self.assertEqual((text, calls, finish), (turn.text, [], "length"))


if __name__ == "__main__":
    unittest.main()
