"""The contract types: errors, kinds, the abort signal, and the multi-turn messages."""

from __future__ import annotations

import asyncio
import json
import threading
import unittest

from conformance.contract import (
    ERROR_KINDS,
    AbortController,
    ChatRequest,
    ChatResponse,
    FinishReason,
    LLMError,
    Message,
    Reasoning,
    ReasoningKind,
    StreamChunk,
    ToolCall,
    ToolChoice,
    ToolError,
    ToolResult,
    Usage,
)


class ErrorKindsTests(unittest.TestCase):
    def test_table_matches_the_design(self) -> None:
        """Each kind has the code and retryability the contract gives it."""
        expected = {
            "rate_limit": ("LLM_RATE_LIMITED", True),
            "quota": ("LLM_QUOTA_EXCEEDED", False),
            "auth": ("LLM_AUTH_FAILED", False),
            "overloaded": ("LLM_OVERLOADED", True),
            "server_error": ("LLM_SERVER_ERROR", True),
            "context_overflow": ("LLM_CONTEXT_LENGTH_EXCEEDED", False),
            "invalid_request": ("LLM_INVALID_REQUEST", False),
        }
        self.assertEqual({k: (v.code, v.retryable) for k, v in ERROR_KINDS.items()}, expected)

    def test_from_kind_fills_code_retryable_and_details(self) -> None:
        """An error built from a kind carries that row and details["kind"]."""
        for kind, row in ERROR_KINDS.items():
            with self.subTest(kind=kind):
                error = LLMError.from_kind(kind, "boom", retry_after=1.5, status=429, provider="x")
                self.assertEqual((error.code, error.kind, error.retryable), (row.code, kind, row.retryable))
                self.assertEqual(error.details["kind"], kind)
                self.assertEqual((error.retry_after, error.status, error.provider), (1.5, 429, "x"))
                self.assertEqual(str(error), "boom")

    def test_from_kind_rejects_an_unknown_kind(self) -> None:
        """An unknown kind is a ValueError that lists the known ones."""
        with self.assertRaisesRegex(ValueError, "unknown error kind 'ratelimit'.*rate_limit"):
            LLMError.from_kind("ratelimit", "boom")

    def test_details_kind_always_matches(self) -> None:
        """A details mapping cannot contradict the kind."""
        error = LLMError("x", code="C", kind="quota", retryable=False, details={"kind": "other", "a": 1})
        self.assertEqual(dict(error.details), {"kind": "quota", "a": 1})

    def test_repr_names_every_field(self) -> None:
        """The repr shows what a failure message needs."""
        text = repr(LLMError.from_kind("auth", "nope", status=401))
        for part in ("'nope'", "LLM_AUTH_FAILED", "kind='auth'", "retryable=False", "status=401"):
            self.assertIn(part, text)


class TypesTests(unittest.TestCase):
    def test_finish_reason_compares_as_a_string(self) -> None:
        """FinishReason members equal their plain string values."""
        self.assertEqual(FinishReason.TOOL_CALLS, "tool_calls")
        self.assertEqual(str(FinishReason.CONTENT_FILTER), "content_filter")
        self.assertEqual(
            {r.value for r in FinishReason},
            {"stop", "tool_calls", "length", "content_filter", "refusal", "error"},
        )

    def test_dataclasses_are_frozen(self) -> None:
        """The result types cannot be changed after the fact."""
        response = ChatResponse("hi", "stop", (ToolCall("id", "f", {}),), Usage(1, 2, 3))
        with self.assertRaises(AttributeError):
            response.content = "changed"  # type: ignore[misc]
        self.assertEqual(StreamChunk(), StreamChunk("", (), None, None))


class MultiTurnTests(unittest.TestCase):
    def test_single_turn_forms_still_work(self) -> None:
        """Every single-turn construction keeps its meaning, with empty multi-turn fields."""
        message = Message("user", "hi")
        self.assertEqual(message, Message(role="user", content="hi"))
        self.assertEqual((message.tool_calls, message.tool_result, message.reasoning), ((), None, ()))
        request = ChatRequest("m", (message,), (), 16, None)
        self.assertIsNone(request.tool_choice)
        self.assertEqual(ChatResponse("x", "stop").reasoning, ())
        self.assertEqual(ToolCall("c", "f", {}).reasoning, ())
        self.assertEqual(StreamChunk("", (), None, None, ()), StreamChunk())

    def test_assistant_turn_carries_calls_and_reasoning_from_the_response(self) -> None:
        """Message.from_response keeps the text, every call and every reasoning item."""
        signature = Reasoning(ReasoningKind.THOUGHT_SIGNATURE, signature="c2ln", provider="gemini")
        call = ToolCall("call_1", "echo_json", {"text": "hi"}, reasoning=(signature,))
        thinking = Reasoning("thinking", text="Let me check.", signature="EqQB", provider="anthropic")
        response = ChatResponse("", "tool_calls", [call], reasoning=[thinking])
        message = Message.from_response(response)
        self.assertEqual(message.role, "assistant")
        self.assertEqual(message.tool_calls, (call,))
        self.assertEqual(message.reasoning, (thinking,))
        self.assertEqual(message.tool_calls[0].reasoning[0].signature, "c2ln")

    def test_tool_message_sends_content_or_the_error_as_json(self) -> None:
        """Message.tool puts the result's text in content and keeps the result itself."""
        ok = ToolResult("call_1", "echo_json", '{"a": 1}')
        self.assertEqual(Message.tool(ok).content, '{"a": 1}')
        self.assertIs(Message.tool(ok).tool_result, ok)
        self.assertFalse(ok.is_error)
        error = ToolError("not_found", "no file 'x'", details={"path": "x"})
        failed = ToolResult("call_2", "read_fixture", error=error)
        self.assertTrue(failed.is_error)
        self.assertEqual(
            json.loads(Message.tool(failed).content),
            {"error": {"code": "not_found", "message": "no file 'x'", "retryable": False,
                       "details": {"path": "x"}}},
        )

    def test_message_refuses_fields_its_role_cannot_carry(self) -> None:
        """Calls and reasoning belong to assistants, results to tool messages, with a hint."""
        call = ToolCall("c", "f", {})
        result = ToolResult("c", "f", "x")
        table = [
            (lambda: Message("tool", "x"), "needs its tool_result.*Message.tool"),
            (lambda: Message("user", "x", tool_result=result), "only a tool message"),
            (lambda: Message("user", "x", tool_calls=(call,)), "only an assistant message"),
            (lambda: Message("tool", "x", reasoning=(Reasoning("thinking"),), tool_result=result),
             "only an assistant message"),
        ]
        for build, pattern in table:
            with self.subTest(pattern=pattern), self.assertRaisesRegex(ValueError, pattern):
                build()

    def test_tool_choice_forms(self) -> None:
        """auto, required and one named tool are the three choices; others are refused."""
        self.assertEqual(ToolChoice.AUTO, ToolChoice("auto"))
        self.assertEqual(ToolChoice.REQUIRED.mode, "required")
        self.assertEqual(ToolChoice.tool("echo_json"), ToolChoice("tool", "echo_json"))
        request = ChatRequest("m", (), tool_choice=ToolChoice.tool("echo_json"))
        self.assertEqual(request.tool_choice, ToolChoice("tool", "echo_json"))
        for mode, name in [("any", None), ("tool", None), ("tool", ""), ("auto", "echo_json")]:
            with self.subTest(mode=mode, name=name), self.assertRaises(ValueError):
                ToolChoice(mode, name)

    def test_reasoning_kinds_are_checked(self) -> None:
        """A reasoning item has one of the four kinds, given as the enum or its string."""
        self.assertEqual({k.value for k in ReasoningKind},
                         {"thinking", "redacted_thinking", "reasoning_item", "thought_signature"})
        for kind in list(ReasoningKind) + [k.value for k in ReasoningKind]:
            with self.subTest(kind=kind):
                self.assertEqual(Reasoning(kind).kind, kind)
        with self.assertRaisesRegex(ValueError, "unknown reasoning kind 'thought'.*thinking"):
            Reasoning("thought")

    def test_reasoning_keeps_the_opaque_payload_as_given(self) -> None:
        """A Responses reasoning item keeps its id, summary and encrypted content unchanged."""
        item = Reasoning(
            "reasoning_item", id="rs_1", summary=("Looked it up.",), data="gAAAA==", provider="openai"
        )
        self.assertEqual((item.id, tuple(item.summary), item.data), ("rs_1", ("Looked it up.",), "gAAAA=="))
        with self.assertRaises(AttributeError):
            item.data = "changed"  # type: ignore[misc]


class AbortTests(unittest.TestCase):
    def test_abort_fires_once_with_the_first_reason(self) -> None:
        """The first reason stands and a second abort reports that it changed nothing."""
        controller = AbortController()
        first, second = RuntimeError("first"), RuntimeError("second")
        self.assertFalse(controller.signal.aborted)
        self.assertTrue(controller.abort(first))
        self.assertFalse(controller.abort(second))
        self.assertIs(controller.signal.reason, first)
        with self.assertRaises(RuntimeError) as raised:
            controller.signal.raise_if_aborted()
        self.assertIs(raised.exception, first)

    def test_abort_without_reason_gives_an_exception(self) -> None:
        """abort() with no reason still leaves an exception instance to raise."""
        controller = AbortController()
        controller.abort()
        self.assertIsInstance(controller.signal.reason, BaseException)

    def test_abort_rejects_a_reason_that_is_not_an_exception(self) -> None:
        """A string reason is refused with a hint to wrap it."""
        with self.assertRaisesRegex(TypeError, "exception instance.*wrap it"):
            AbortController().abort("stop")  # type: ignore[arg-type]

    def test_callbacks_run_once_and_can_be_removed(self) -> None:
        """Registered callbacks run on abort; removed ones and late ones behave."""
        controller = AbortController()
        seen: list = []
        controller.signal.add_callback(lambda r: seen.append(("kept", r)))
        remove = controller.signal.add_callback(lambda r: seen.append(("removed", r)))
        remove()
        reason = ValueError("x")
        controller.abort(reason)
        controller.signal.add_callback(lambda r: seen.append(("late", r)))
        self.assertEqual(seen, [("kept", reason), ("late", reason)])

    def test_wait_sync_returns_when_aborted_from_another_thread(self) -> None:
        """A blocked thread wakes when another thread aborts."""
        controller = AbortController()
        timer = threading.Timer(0.01, controller.abort, args=(KeyError("k"),))
        timer.start()
        self.assertTrue(controller.signal.wait_sync(5))
        timer.join()
        self.assertFalse(AbortController().signal.wait_sync(0.001))

    def test_async_wait_wakes_on_an_abort_from_another_thread(self) -> None:
        """await signal.wait() returns the reason when another thread aborts."""
        controller = AbortController()
        reason = ConnectionAbortedError("bye")

        async def main() -> BaseException:
            timer = threading.Timer(0.01, controller.abort, args=(reason,))
            timer.start()
            try:
                return await asyncio.wait_for(controller.signal.wait(), 5)
            finally:
                timer.join()

        self.assertIs(asyncio.run(main()), reason)

    def test_async_wait_unregisters_when_cancelled(self) -> None:
        """A cancelled wait leaves no callback behind."""
        controller = AbortController()

        async def main() -> None:
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(controller.signal.wait(), 0.01)

        asyncio.run(main())
        self.assertEqual(controller.signal._callbacks, [])


if __name__ == "__main__":
    unittest.main()
