"""Gemini multi-turn: scripted turns played and decoded, histories read back, and the 400.

The reference backend renders a conversation; the wire reads it back into the
library's normal form and names every departure from what the Gemini API accepts.
Scripted turns are served by the fake provider and decoded by the reference backend,
which must give back exactly what was scripted.
"""

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
from conformance.gate import tool_specs
from conformance.provider import start_fake_provider
from conformance.provider.replies import JsonReply, RecordedRequest
from conformance.reference.gemini import GeminiBackend
from conformance.wires._turns import History, ScriptedCall, ScriptedTurn, play_turn
from conformance.wires.gemini import gemini_wire
from conformance.wires.gemini._turns import turn_signature

MODEL = "conformance-model"
SIGNATURE = "c2lnbmF0dXJlLW9mLXRoZS1maXJzdC1jYWxs"
THOUGHT_SIGNATURE = "dGhvdWdodC1zaWduYXR1cmU="
#: Arguments with a surrogate pair written as escapes and characters of two to four UTF-8 bytes.
ESCAPED = '{"text": "sun \\ud83c\\udf1e and \\u00e9", "count": 2, "tags": ["a"]}'
RAW = '{"path": "notes/unicode.txt \u00e9\u6f22\U0001f600"}'


def thought(text: str, signature: str) -> Reasoning:
    return Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, text=text, signature=signature, provider="gemini")


def signed(signature: str) -> Tuple[Reasoning, ...]:
    return (thought("", signature),)


def conversation() -> List[Message]:
    """User, assistant with two calls and reasoning, two results (one failed), a last user turn."""
    return [
        Message("system", "Use the tools."),
        Message("user", "Echo and read, please."),
        Message(
            "assistant",
            "Let me do both.",
            tool_calls=(
                ToolCall(
                    "whZntcQw", "echo_json", {"text": "hi \u00e9", "count": 1, "tags": []}, signed(SIGNATURE)
                ),
                ToolCall("96c1su3s", "read_fixture", {"path": "missing.txt"}),
            ),
            reasoning=(thought("Two tools at once.", THOUGHT_SIGNATURE),),
        ),
        Message.tool(ToolResult("whZntcQw", "echo_json", '{"fixture_id": "fx-1", "echo": {"text": "hi"}}')),
        Message.tool(
            ToolResult(
                "96c1su3s",
                "read_fixture",
                error=ToolError("not_found", "no such file: missing.txt", False, {"path": "missing.txt"}),
            )
        ),
        Message("user", "Thanks; now summarise."),
    ]


def rendered(messages: List[Message], stream: bool = False, **chat: Any) -> Dict[str, Any]:
    backend = GeminiBackend("http://127.0.0.1:1")
    return backend.body(ChatRequest(MODEL, messages, tools=tool_specs(gemini=True), **chat), stream)


def recorded(body: Dict[str, Any], stream: bool = False) -> RecordedRequest:
    verb = "streamGenerateContent" if stream else "generateContent"
    return RecordedRequest(
        "POST",
        f"/v1beta/models/{MODEL}:{verb}",
        "alt=sse" if stream else "",
        {"x-goog-api-key": "test", "content-type": "application/json"},
        json.dumps(body, ensure_ascii=False).encode("utf-8"),
        "HTTP/1.1",
    )


def history(body: Dict[str, Any], stream: bool = False) -> History:
    read = gemini_wire.read_history(recorded(body, stream))
    assert read is not None
    return read


class RoundTripTest(unittest.TestCase):
    def test_the_reference_rendering_reads_back_as_the_conversation(self) -> None:
        messages = conversation()
        body = rendered(messages, tool_choice=ToolChoice.tool("echo_json"))
        read = history(body, stream=True)
        self.assertEqual(read.problems, ())
        self.assertEqual(list(read.messages), messages)
        self.assertEqual(read.tools, ("echo_json", "read_fixture", "delayed_value", "always_error"))
        self.assertEqual(read.tool_choice, ToolChoice.tool("echo_json"))
        self.assertTrue(read.stream)

    def test_the_rendering_is_the_gemini_shape(self) -> None:
        body = rendered(conversation(), tool_choice=ToolChoice.REQUIRED)
        model, results = body["contents"][1], body["contents"][2]
        self.assertEqual(model["role"], "model")
        self.assertEqual(
            model["parts"][0],
            {"text": "Two tools at once.", "thought": True, "thoughtSignature": THOUGHT_SIGNATURE},
        )
        self.assertEqual(model["parts"][2]["thoughtSignature"], SIGNATURE)
        self.assertEqual(model["parts"][2]["functionCall"]["id"], "whZntcQw")
        self.assertNotIn("thoughtSignature", model["parts"][3])
        self.assertEqual(results["role"], "user")
        self.assertEqual([p["functionResponse"]["id"] for p in results["parts"]], ["whZntcQw", "96c1su3s"])
        self.assertEqual(results["parts"][1]["functionResponse"]["response"]["error"]["code"], "not_found")
        self.assertEqual(body["toolConfig"], {"functionCallingConfig": {"mode": "ANY"}})
        declaration = body["tools"][0]["functionDeclarations"][0]
        self.assertEqual(declaration["parameters"]["type"], "OBJECT")
        self.assertNotIn("additionalProperties", json.dumps(declaration))

    def test_reasoning_from_another_provider_is_not_sent(self) -> None:
        foreign = Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, signature=SIGNATURE, provider="anthropic")
        thinking = Reasoning(ReasoningKind.THINKING.value, text="hm", signature="sig", provider="gemini")
        body = rendered([Message("user", "hi"), Message("assistant", "yes", reasoning=(foreign, thinking))])
        self.assertEqual(body["contents"][1]["parts"], [{"text": "yes"}])

    def test_a_json_error_text_in_content_stays_content(self) -> None:
        text = '{"error": {"code": "x", "message": "not a ToolError"}}'
        messages = [
            Message("user", "go"),
            Message("assistant", "", tool_calls=(ToolCall("a1", "echo_json", {}, signed(SIGNATURE)),)),
            Message.tool(ToolResult("a1", "echo_json", text)),
        ]
        read = history(rendered(messages))
        self.assertEqual(read.problems, ())
        self.assertEqual(read.results[0].tool_result, ToolResult("a1", "echo_json", text))

    def test_a_response_of_any_object_is_content(self) -> None:
        body = rendered([Message("user", "go")])
        body["contents"] += [
            {"role": "model", "parts": [{"functionCall": {"name": "echo_json", "args": {}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "echo_json", "response": {"n": 1, "m": [2]}}}],
            },
        ]
        read = history(body)
        # Gemini 2.x: no ids and no signature, results matched by name.
        self.assertEqual(read.problems, ())
        self.assertEqual(read.results[0].tool_result, ToolResult("", "echo_json", '{"n": 1, "m": [2]}'))

    def test_a_response_under_any_key_is_its_value(self) -> None:
        """A response object's one key is the result whatever its name (the API leaves keys to the caller)."""
        for key in ("output", "result", "return_value", "content"):
            with self.subTest(key=key):
                body = rendered([Message("user", "go")])
                body["contents"] += [
                    {"role": "model", "parts": [{"functionCall": {"name": "echo_json", "args": {}}}]},
                    {
                        "role": "user",
                        "parts": [{"functionResponse": {"name": "echo_json", "response": {key: '{"a": 1}'}}}],
                    },
                ]
                read = history(body)
                self.assertEqual(read.problems, ())
                self.assertEqual(read.results[0].tool_result, ToolResult("", "echo_json", '{"a": 1}'))

    def test_a_response_without_an_id_answers_the_one_call_to_its_function(self) -> None:
        """A functionResponse with no id, where one call named that function, is read with the call's id;
        two calls to one function answered without ids answer them in order, as Gemini pairs them."""
        body = rendered([Message("user", "go")])
        calls = [
            {"functionCall": {"id": "c1", "name": "echo_json", "args": {}}, "thoughtSignature": SIGNATURE},
            {"functionCall": {"id": "c2", "name": "read_fixture", "args": {}}},
        ]
        answers = [
            {"functionResponse": {"name": "read_fixture", "response": {"output": "r"}}},
            {"functionResponse": {"name": "echo_json", "response": {"output": "e"}}},
        ]
        body["contents"] += [{"role": "model", "parts": calls}, {"role": "user", "parts": answers}]
        read = history(body)
        self.assertEqual(read.problems, ())
        self.assertEqual(
            [r.tool_result for r in read.results],
            [ToolResult("c2", "read_fixture", "r"), ToolResult("c1", "echo_json", "e")],
        )
        calls[1]["functionCall"]["name"] = "echo_json"
        answers[0]["functionResponse"]["name"] = "echo_json"
        read = history(body)
        self.assertEqual(read.problems, ())
        self.assertEqual([r.tool_result.call_id for r in read.results], ["c1", "c2"])
        self.assertEqual([r.tool_result.content for r in read.results], ["r", "e"])


class HistoryCheckTest(unittest.TestCase):
    """The tool-result case's history check takes ids as the wire's reader does: one rule, every side."""

    def test_ids_left_out_pass_where_gemini_pairs_by_name_and_fail_elsewhere(self) -> None:
        """A call and its result sent back without ids pass on Gemini, which pairs them by name (its own
        SDK's automatic function calling sends results so); a wrong id, or ids left out on a wire that
        needs them, still fail."""
        import dataclasses

        from conformance._multiturn import expected_history, history_problems
        from conformance.wires._script import History
        from conformance.wires.openai_chat import openai_chat_wire

        def without_ids(wire: Any, call_id: str) -> List[str]:
            turn, result = expected_history(wire, "result")
            assert result.tool_result is not None
            turn = dataclasses.replace(
                turn, tool_calls=tuple(dataclasses.replace(c, id=call_id) for c in turn.tool_calls)
            )
            result = dataclasses.replace(
                result, tool_result=dataclasses.replace(result.tool_result, call_id=call_id)
            )
            variant = next(v for v in wire.variants("tool-result", "chat") if v.name == "result")
            return history_problems(wire, variant, History((turn, result)))

        self.assertEqual(without_ids(gemini_wire, ""), [])
        self.assertEqual(len(without_ids(gemini_wire, "not-the-call")), 2)
        self.assertEqual(len(without_ids(openai_chat_wire, "")), 2)


def _call_turn(body: Dict[str, Any]) -> Dict[str, Any]:
    return body["contents"][1]


def _results_turn(body: Dict[str, Any]) -> Dict[str, Any]:
    return body["contents"][2]


def _drop_signature(body: Dict[str, Any]) -> None:
    del _call_turn(body)["parts"][2]["thoughtSignature"]


def _move_signature(body: Dict[str, Any]) -> None:
    parts = _call_turn(body)["parts"]
    parts[3]["thoughtSignature"] = parts[2].pop("thoughtSignature")


def _args_as_text(body: Dict[str, Any]) -> None:
    call = _call_turn(body)["parts"][2]["functionCall"]
    call["args"] = json.dumps(call["args"])


def _results_as_text(body: Dict[str, Any]) -> None:
    _results_turn(body)["parts"] = [{"text": "echo said hi; read failed"}]


def _one_result(body: Dict[str, Any]) -> None:
    del _results_turn(body)["parts"][1]


def _wrong_id(body: Dict[str, Any]) -> None:
    _results_turn(body)["parts"][1]["functionResponse"]["id"] = "call_made_up"


def _tool_role(body: Dict[str, Any]) -> None:
    _results_turn(body)["role"] = "tool"


def _no_results(body: Dict[str, Any]) -> None:
    del body["contents"][2:]


def _not_base64(body: Dict[str, Any]) -> None:
    _call_turn(body)["parts"][2]["thoughtSignature"] = "not base64!"


def _additional_properties(body: Dict[str, Any]) -> None:
    body["tools"][0]["functionDeclarations"][0]["parameters"]["additionalProperties"] = False


def _orphan_result(body: Dict[str, Any]) -> None:
    body["contents"].insert(1, copy.deepcopy(_results_turn(body)))


def _calls_first(body: Dict[str, Any]) -> None:
    del body["contents"][0]


def _bad_mode(body: Dict[str, Any]) -> None:
    body["toolConfig"] = {"functionCallingConfig": {"mode": "any"}}


MALFORMED: List[Tuple[str, Callable[[Dict[str, Any]], None], str]] = [
    ("signature dropped", _drop_signature, "Function call is missing a thought_signature"),
    ("signature moved to the second call", _move_signature, "Function call is missing a thought_signature"),
    ("args sent as a JSON string", _args_as_text, "(type.googleapis.com/google.protobuf.Struct)"),
    ("results sent as plain text", _results_as_text, "it is plain text"),
    ("one result of two", _one_result, "number of function response parts is equal"),
    ("a result with an unknown id", _wrong_id, "matches no functionCall id"),
    ("results with role tool", _tool_role, "Please use a valid role: user, model."),
    ("calls with no results", _no_results, "no user turn of functionResponse parts follows"),
    ("a signature that is not base64", _not_base64, "Base64 decoding failed"),
    ("additionalProperties in parameters", _additional_properties, 'Unknown name "additionalProperties"'),
    ("a result before any call", _orphan_result, "with no function call turn right before it"),
    ("a call turn first", _calls_first, "comes immediately after a user turn"),
    ("a lower-case mode", _bad_mode, "FunctionCallingConfig.Mode"),
]


class ChunkedHistoryTest(unittest.TestCase):
    def test_a_streamed_turn_sent_back_chunk_by_chunk_is_one_turn(self) -> None:
        """google-genai's chat keeps each streamed chunk's content: a run of model contents."""
        turn = parallel_turn()
        played = gemini_wire.turn_stream(turn, recorded({}, stream=True))
        assert played is not None
        chunks = [
            json.loads(e.decode("utf-8")[len("data: ") :])["candidates"][0]["content"] for e in played.events
        ]
        results = [
            {"functionResponse": {"id": c.id, "name": c.name, "response": {"output": "ok"}}}
            for c in turn.calls
        ]
        body = {
            "contents": [
                {"role": "user", "parts": [{"text": "go"}]},
                *chunks,
                {"role": "user", "parts": results},
            ]
        }
        read = history(body)
        self.assertEqual(read.problems, ())
        (assistant,) = read.assistant_turns
        self.assertEqual(assistant.content, turn.text)
        self.assertEqual(list(assistant.reasoning), list(turn.reasoning))
        self.assertEqual([c.reasoning for c in assistant.tool_calls], [c.reasoning for c in turn.calls])
        self.assertEqual(
            [m.tool_result.call_id for m in read.results if m.tool_result], ["whZntcQw", "96c1su3s"]
        )


class MalformedHistoryTest(unittest.TestCase):
    def test_each_departure_is_named_and_answered_with_gemini_400(self) -> None:
        for label, mutate, expected in MALFORMED:
            with self.subTest(label):
                body = rendered(conversation()[1:5])
                mutate(body)
                read = history(body)
                self.assertTrue(any(expected in p for p in read.problems), (expected, read.problems))
                reply = gemini_wire.history_error(read.problems)
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 400)
                error = json.loads(reply.body)["error"]
                self.assertEqual((error["code"], error["status"]), (400, "INVALID_ARGUMENT"))
                self.assertEqual(error["message"], read.problems[0])

    def test_an_earlier_turn_without_its_signature_is_accepted(self) -> None:
        # Gemini validates the current turn only: a signature missing before the last user text passes.
        body = rendered(conversation()[1:])
        _drop_signature(body)
        self.assertEqual(history(body).problems, ())

    def test_the_results_are_still_read_when_malformed(self) -> None:
        body = rendered(conversation()[1:5])
        _args_as_text(body)
        read = history(body)
        self.assertEqual(read.assistant_turns[0].tool_calls[0].arguments["count"], 1)
        self.assertEqual(len(read.results), 2)


def _serve(turn: ScriptedTurn, stream: bool) -> Tuple[ChatResponse, List[Any]]:
    """Play ``turn`` from the fake provider; decode it with the reference backend."""

    async def run(url: str) -> Tuple[ChatResponse, List[Any]]:
        backend = GeminiBackend(url)
        request = ChatRequest(MODEL, [Message("user", "go")], tools=tool_specs(gemini=True))
        if not stream:
            return await backend.chat(request), []
        chunks = [chunk async for chunk in backend.chat_stream(request)]
        calls = [c for chunk in chunks for c in chunk.tool_calls]
        reasoning = [r for chunk in chunks for r in chunk.reasoning]
        last = chunks[-1]
        text = "".join(chunk.content for chunk in chunks)
        return ChatResponse(text, str(last.finish_reason), tuple(calls), last.usage, tuple(reasoning)), chunks

    with start_fake_provider() as provider:
        provider.reply(lambda request: play_turn(gemini_wire, turn, request))
        return asyncio.run(run(provider.url))


def parallel_turn(interleave: bool = True) -> ScriptedTurn:
    return ScriptedTurn(
        text="Checking both \u00e9\U0001f600.",
        calls=(
            ScriptedCall(
                "whZntcQw",
                "echo_json",
                ESCAPED,
                # Cut inside the escape pair and nowhere a JSON reader could rejoin by luck.
                fragments=(ESCAPED[:20], ESCAPED[20:30], ESCAPED[30:]),
                reasoning=signed(SIGNATURE),
            ),
            ScriptedCall("96c1su3s", "read_fixture", RAW, fragments=(RAW[:33], RAW[33:])),
        ),
        reasoning=(thought("Plan: call both \u6f22.", THOUGHT_SIGNATURE),),
        interleave=interleave,
        seed="parallel",
    )


class PlayedTurnTest(unittest.TestCase):
    def assert_played(self, turn: ScriptedTurn, response: ChatResponse) -> None:
        self.assertEqual(response.content, turn.text)
        self.assertEqual(response.finish_reason, turn.finish_reason)
        expected = [ToolCall(c.id, c.name, json.loads(c.arguments), tuple(c.reasoning)) for c in turn.calls]
        self.assertEqual(list(response.tool_calls), expected)
        self.assertEqual(list(response.reasoning), list(turn.reasoning))

    def test_a_whole_turn_is_decoded_as_scripted(self) -> None:
        turn = parallel_turn()
        response, _ = _serve(turn, stream=False)
        self.assert_played(turn, response)

    def test_a_streamed_turn_is_decoded_as_scripted(self) -> None:
        for interleave in (True, False):
            with self.subTest(interleave=interleave):
                turn = parallel_turn(interleave)
                response, chunks = _serve(turn, stream=True)
                self.assert_played(turn, response)
                # The thought came out whole, once, before any text.
                self.assertEqual([bool(c.reasoning) for c in chunks].count(True), 1)
                self.assertTrue(chunks[0].reasoning)

    def test_the_arguments_go_out_byte_for_byte(self) -> None:
        turn = parallel_turn()
        played = gemini_wire.turn_stream(turn, recorded({}, stream=True))
        assert played is not None
        self.assertEqual(sorted(played.arguments), [0, 1])
        for position, call in enumerate(turn.calls):
            first, last = played.arguments[position]
            self.assertEqual(first, last)
            self.assertIn(call.arguments.encode("utf-8"), played.events[first])
        self.assertIn(b"\\ud83c\\udf1e", played.events[played.arguments[0][0]])
        whole = gemini_wire.turn_whole(turn, recorded({}))
        assert isinstance(whole, JsonReply)
        self.assertIn(ESCAPED.encode("utf-8"), whole.body)

    def test_the_signature_sits_on_the_first_call_part_only(self) -> None:
        turn = ScriptedTurn(
            calls=(ScriptedCall("a1", "echo_json", "{}"), ScriptedCall("a2", "echo_json", "{}")),
            seed="unsigned",
        )
        whole = gemini_wire.turn_whole(turn, recorded({}))
        assert isinstance(whole, JsonReply)
        parts = json.loads(whole.body)["candidates"][0]["content"]["parts"]
        self.assertEqual(parts[0]["thoughtSignature"], turn_signature("unsigned"))
        self.assertNotIn("thoughtSignature", parts[1])
        # A Gemini 2.x call (no id) is not signed unless the script says so.
        bare = ScriptedTurn(calls=(ScriptedCall("", "echo_json", "{}"),))
        whole = gemini_wire.turn_whole(bare, recorded({}))
        assert isinstance(whole, JsonReply)
        self.assertEqual(
            json.loads(whole.body)["candidates"][0]["content"]["parts"],
            [{"functionCall": {"name": "echo_json", "args": {}}}],
        )

    def test_a_call_that_is_not_a_json_object_is_a_malformed_function_call(self) -> None:
        turn = ScriptedTurn(calls=(ScriptedCall("a1", "echo_json", '{"text": "cut'),), seed="broken")
        for stream in (False, True):
            with self.subTest(stream=stream):
                response, _ = _serve(turn, stream)
                self.assertEqual((response.finish_reason, list(response.tool_calls)), ("error", []))

    def test_a_text_turn_and_a_length_turn(self) -> None:
        for turn in (
            ScriptedTurn(text="Done: \u00e9\u6f22\U0001f600", seed="text"),
            ScriptedTurn(text="Cut", calls=(ScriptedCall("a1", "echo_json", "{}"),), finish="length"),
        ):
            for stream in (False, True):
                with self.subTest(turn=turn.seed, stream=stream):
                    response, _ = _serve(turn, stream)
                    self.assertEqual(response.content, turn.text)
                    self.assertEqual(response.finish_reason, turn.finish_reason)

    def test_the_next_request_echoes_what_was_played(self) -> None:
        turn = parallel_turn()
        for stream in (False, True):
            with self.subTest(stream=stream):
                response, _ = _serve(turn, stream)
                messages = [Message("user", "go"), Message.from_response(response)]
                messages += [Message.tool(ToolResult(c.id, c.name, "ok")) for c in response.tool_calls]
                read = history(rendered(messages))
                self.assertEqual(read.problems, ())
                self.assertEqual(read.assistant_turns[0], Message.from_response(response))

    def test_what_gemini_cannot_send_is_refused_clearly(self) -> None:
        bad_signature = (thought("", "not base64!"),)
        for turn, message in (
            (ScriptedTurn(text="x", finish="refusal"), "cannot finish 'refusal'"),
            (ScriptedTurn(reasoning=bad_signature), "thoughtSignature is base64"),
            (ScriptedTurn(calls=(ScriptedCall("a", "echo_json", "{}", reasoning=bad_signature),)), "base64"),
            (ScriptedTurn(reasoning=(thought("", ""),)), "needs its thought's text, its signature or both"),
            (
                ScriptedTurn(reasoning=(Reasoning(ReasoningKind.REASONING_ITEM.value, data="x"),)),
                "got 'reasoning_item'",
            ),
        ):
            with self.subTest(message), self.assertRaisesRegex(ValueError, message):
                gemini_wire.turn_whole(turn, recorded({}))


if __name__ == "__main__":
    unittest.main()
