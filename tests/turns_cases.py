"""Multi-turn cases every wire that scripts turns answers the same way.

A test module of a wire mixes :class:`TurnCases` into a ``unittest.TestCase`` and sets
the wire, its reference backend and the request path; the wire's own malformed
renderings stay in that module, since what the real API refuses differs per provider.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type

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
    ToolSpec,
)
from conformance.provider import start_fake_provider
from conformance.provider.replies import JsonReply, RecordedRequest
from conformance.reference._base import ReferenceBackend
from conformance.wires._base import Wire
from conformance.wires._turns import History, ScriptedCall, ScriptedTurn, play_turn

MODEL = "conformance-model"
#: Signatures and redacted data are opaque base64 the backend must return byte for byte.
SIGNATURE = "EqQBCkgIAxABGAIiQL+7h/0sZ9wQ2m+Xk1Q=="
REDACTED = "RWtvQ0NrZ0lBeEFCR0FJaVFMKzdoLzBzWjl3UTJtK1hrMVE9PQ=="
TOOLS = (
    ToolSpec(
        "echo_json", "Echoes its arguments.", {"type": "object", "properties": {"text": {"type": "string"}}}
    ),
    ToolSpec(
        "always_error", "Always fails.", {"type": "object", "properties": {"reason": {"type": "string"}}}
    ),
)
#: ``{"text": "😀 naïve"}`` with the emoji written as a surrogate escape pair.
ESCAPED_ARGUMENTS = '{"text": "\\ud83d\\ude00 na\u00efve"}'
#: Cut inside the escape pair and right after the two-byte ``ï``, so a stream cut by
#: bytes (``tcp_chunks`` always cuts inside the first multi-byte character) is cut inside it.
ESCAPED_FRAGMENTS = ('{"text": "\\ud83d\\u', "de00 na\u00ef", 've"}')


#: The tools and calls of the conversation the wires without an error flag on a result
#: (OpenAI Responses, Ollama) render and read back.
LOOKUP_TOOLS = (
    ToolSpec("echo_json", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}}}),
    ToolSpec("read_fixture", "Read.", {"type": "object", "properties": {"path": {"type": "string"}}}),
)
LOOKUP_A = ToolCall("call_a1", "echo_json", {"text": "sun \u2600 \U0001f600", "count": 2, "tags": ["x"]})
LOOKUP_B = ToolCall("call_b2", "read_fixture", {"path": "notes/unicode.txt"})


def lookups(reasoning: Reasoning, failed: ToolResult) -> List[Message]:
    """system; user; assistant with ``reasoning`` and the two lookups; their results (the second
    ``failed``); a user turn."""
    return [
        Message("system", "Be brief."),
        Message("user", "What is in the notes?"),
        Message("assistant", "Let me look.", tool_calls=(LOOKUP_A, LOOKUP_B), reasoning=(reasoning,)),
        Message.tool(ToolResult("call_a1", "echo_json", content='{"echo": "sun \u2600"}')),
        Message.tool(failed),
        Message("user", "Thanks, and now?"),
    ]


def recorded_at(path: str, body: Any) -> RecordedRequest:
    """A JSON POST to ``path`` as the fake provider records it."""
    raw = json.dumps(body, ensure_ascii=False).encode("utf-8")
    return RecordedRequest("POST", path, "", {"content-type": "application/json"}, raw, "HTTP/1.1")


def conversation(provider: str) -> List[Message]:
    """user; assistant with reasoning, text and two calls; a result and a failure; a user turn."""
    reasoning = (
        Reasoning(
            ReasoningKind.THINKING.value,
            text="Two tools, one at a time.",
            signature=SIGNATURE,
            provider=provider,
        ),
        Reasoning(ReasoningKind.REDACTED_THINKING.value, data=REDACTED, provider=provider),
    )
    calls = (
        ToolCall("toolu_01Aa", "echo_json", {"text": "hi \u00e9\U0001f600"}),
        ToolCall("toolu_01Bb", "always_error", {"reason": "x"}),
    )
    failure = ToolError("fixture_failure", "always_error always fails", False, {"attempt": 1})
    return [
        Message("system", "Be brief."),
        Message("user", "Call both tools."),
        Message("assistant", "Calling them.", tool_calls=calls, reasoning=reasoning),
        Message.tool(ToolResult("toolu_01Aa", "echo_json", '{"echo": "hi"}')),
        Message.tool(ToolResult("toolu_01Bb", "always_error", error=failure)),
        Message("user", "Now sum it up."),
    ]


def scripted(interleave: bool, fragments: bool = False) -> ScriptedTurn:
    """A turn with reasoning, text and two calls, the first cut inside an escape pair when asked."""
    first = ScriptedCall(
        "toolu_01Cc", "echo_json", ESCAPED_ARGUMENTS, fragments=ESCAPED_FRAGMENTS if fragments else ()
    )
    second = ScriptedCall("toolu_01Dd", "always_error", '{"reason": "caf\u00e9 \u4e2d\u6587"}')
    return ScriptedTurn(
        text="Let me check. \u00e9",
        calls=(first, second),
        reasoning=(
            Reasoning(ReasoningKind.THINKING.value, text="Both at once \u2014 fine.", signature=SIGNATURE),
            Reasoning(ReasoningKind.REDACTED_THINKING.value, data=REDACTED),
        ),
        interleave=interleave,
        seed=f"turns/{interleave}/{fragments}",
    )


class TurnCases:
    """The cases; a subclass sets these and is also a ``unittest.TestCase``."""

    wire: ClassVar[Wire]
    backend_class: ClassVar[Type[ReferenceBackend]]
    #: The provider name the wire puts on the reasoning it reads.
    provider: ClassVar[str]

    # -- helpers ----------------------------------------------------------------------

    def render(self, messages: List[Message], stream: bool = False, **kwargs: Any) -> RecordedRequest:
        """The request the reference backend sends for ``messages``, as the provider records it."""
        backend = self.backend_class("http://127.0.0.1:9")
        chat = ChatRequest(MODEL, messages, tools=TOOLS, **kwargs)
        body = json.dumps(backend.body(chat, stream)).encode("utf-8")
        path = backend.url(chat, stream)[len("http://127.0.0.1:9") :]
        return RecordedRequest("POST", path, "", dict(backend.headers(stream)), body, "HTTP/1.1")

    def history(self, request: RecordedRequest) -> History:
        history = self.wire.read_history(request)
        assert history is not None
        return history

    def served(self, turn: ScriptedTurn, stream: bool) -> Tuple[ChatResponse, List[Reasoning]]:
        """``turn`` played by the fake provider and read by the reference backend."""
        with start_fake_provider() as provider:
            provider.reply(lambda request: play_turn(self.wire, turn, request))
            backend = self.backend_class(provider.url)

            async def whole() -> Tuple[ChatResponse, List[Reasoning]]:
                response = await backend.chat(ChatRequest(MODEL, [Message("user", "go")], tools=TOOLS))
                return response, list(response.reasoning)

            async def streamed() -> Tuple[ChatResponse, List[Reasoning]]:
                text, calls, reasoning, finish = "", [], [], None
                async for chunk in backend.chat_stream(
                    ChatRequest(MODEL, [Message("user", "go")], tools=TOOLS)
                ):
                    text += chunk.content
                    calls.extend(chunk.tool_calls)
                    reasoning.extend(chunk.reasoning)
                    finish = chunk.finish_reason or finish
                return ChatResponse(text, str(finish), tuple(calls)), reasoning

            return asyncio.run(streamed() if stream else whole())

    def expected_calls(self, turn: ScriptedTurn) -> List[ToolCall]:
        return [ToolCall(c.id, c.name, json.loads(c.arguments)) for c in turn.calls]

    def expected_reasoning(self, turn: ScriptedTurn) -> List[Reasoning]:
        return [
            Reasoning(r.kind, r.text, r.signature, r.data, r.id, r.summary, self.provider)
            for r in turn.reasoning
        ]

    # -- the cases --------------------------------------------------------------------

    def test_round_trip_reads_back_the_normal_form(self) -> None:
        """Calls, reasoning, a result and a ToolError rendered by the backend read back unchanged."""
        messages = conversation(self.provider)
        history = self.history(self.render(messages, tool_choice=ToolChoice.REQUIRED))
        self.assertEqual(history.problems, ())
        self.assertEqual(list(history.messages), messages)
        self.assertEqual(history.tools, ("echo_json", "always_error"))
        self.assertEqual(history.tool_choice, ToolChoice.REQUIRED)
        self.assertFalse(history.stream)

    def test_tool_choices_and_stream_flag_read_back(self) -> None:
        for choice in (ToolChoice.AUTO, ToolChoice.REQUIRED, ToolChoice.tool("echo_json")):
            history = self.history(self.render([Message("user", "hi")], stream=True, tool_choice=choice))
            self.assertEqual(history.tool_choice, choice)
            self.assertTrue(history.stream)

    def test_reasoning_of_another_provider_is_not_sent(self) -> None:
        """A signature another provider made means nothing here: the backend drops it."""
        messages = conversation("elsewhere")
        history = self.history(self.render(messages))
        self.assertEqual(history.problems, ())
        self.assertEqual(history.assistant_turns[0].reasoning, ())

    def test_unmarked_reasoning_is_sent(self) -> None:
        history = self.history(self.render(conversation("")))
        self.assertEqual(len(history.assistant_turns[0].reasoning), 2)

    def test_history_error_is_a_400_quoting_the_first_problem(self) -> None:
        reply = self.wire.history_error(["first thing wrong", "second"])
        self.assertIsInstance(reply, JsonReply)
        assert isinstance(reply, JsonReply)
        self.assertEqual(reply.status, 400)
        self.assertIn("first thing wrong", json.dumps(reply.body))
        self.assertNotIn("second", json.dumps(reply.body))

    def check_served(self, turn: ScriptedTurn, stream: bool) -> None:
        response, reasoning = self.served(turn, stream)
        self.assertEqual(response.content, turn.text)
        self.assertEqual(list(response.tool_calls), self.expected_calls(turn))
        self.assertEqual(reasoning, self.expected_reasoning(turn))
        self.assertEqual(response.finish_reason, "tool_calls")

    def test_whole_turn_reads_back_exactly(self) -> None:
        self.check_served(scripted(False), stream=False)

    def test_streamed_turn_reads_back_exactly(self) -> None:
        self.check_served(scripted(False, fragments=True), stream=True)

    def test_finish_reasons_are_spelled_as_the_provider_does(self) -> None:
        """A text turn ends as a stop; a turn cut by the limit as a length, with no call trusted."""
        for stream in (False, True):
            response, _ = self.served(ScriptedTurn(text="Done.", seed="turns/stop"), stream)
            self.assertEqual((response.content, response.finish_reason), ("Done.", "stop"))
            cut = ScriptedTurn(
                text="Cut", calls=scripted(False).calls[:1], finish="length", seed="turns/length"
            )
            response, _ = self.served(cut, stream)
            self.assertEqual((response.finish_reason, list(response.tool_calls)), ("length", []))

    def test_a_corrupt_call_reaches_the_loop_unparsed_from_a_stream(self) -> None:
        """Streamed input fragments that do not parse come as unparsed_arguments, exactly; a whole reply
        carries input as an object, so there the call is the empty one the provider sent."""
        text = '{"text": "unterminated'
        call = ScriptedCall("toolu_01Ee", "echo_json", text, fragments=(text[:6], text[6:]))
        turn = ScriptedTurn(calls=(call,), seed="turns/corrupt")
        streamed, _ = self.served(turn, stream=True)
        self.assertEqual(
            list(streamed.tool_calls), [ToolCall(call.id, "echo_json", {}, unparsed_arguments=text)]
        )
        self.assertEqual(streamed.finish_reason, "tool_calls")
        whole, _ = self.served(turn, stream=False)
        self.assertEqual(list(whole.tool_calls), [ToolCall(call.id, "echo_json", {})])
        cut, _ = self.served(ScriptedTurn(calls=(call,), finish="length", seed="turns/corrupt"), stream=True)
        self.assertEqual((list(cut.tool_calls), cut.finish_reason), ([], "length"))

    def test_interleaved_calls_read_back_apart(self) -> None:
        for fragments in (False, True):
            self.check_served(scripted(True, fragments), stream=True)

    def test_argument_indexes_name_the_first_and_last_fragment(self) -> None:
        for interleave in (False, True):
            turn = scripted(interleave, fragments=True)
            request = self.render([Message("user", "go")], stream=True)
            played = self.wire.turn_stream(turn, request)
            assert played is not None
            self.assertEqual(sorted(played.arguments), [0, 1])
            for position, call in enumerate(turn.calls):
                first, last = played.arguments[position]
                pieces = call.pieces()
                self.assertIn(self.fragment_bytes(pieces[0]), self.event_text(played.events[first]))
                self.assertIn(self.fragment_bytes(pieces[-1]), self.event_text(played.events[last]))
                self.assertLess(first, last)
            if interleave:  # the second call's first fragment comes before the first call's last
                self.assertLess(played.arguments[1][0], played.arguments[0][1])

    def event_text(self, event: bytes) -> bytes:
        """The bytes of one event a fragment is looked for in: the event itself, unless the wire
        encodes its payload again (Bedrock InvokeModel's base64 chunk)."""
        return event

    @staticmethod
    def fragment_bytes(piece: str) -> bytes:
        # As the event carries it: a JSON string's body, UTF-8.
        return json.dumps(piece, ensure_ascii=False)[1:-1].encode("utf-8")

    def problems_of(self, body: Dict[str, Any], path: Optional[str] = None) -> Tuple[str, ...]:
        request = self.render([Message("user", "x")])
        raw = json.dumps(body).encode("utf-8")
        recorded = RecordedRequest("POST", path or request.path, "", request.headers, raw, "HTTP/1.1")
        return self.history(recorded).problems
