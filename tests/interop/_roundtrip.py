"""What an SDK adapter sends back and reads out, beyond the backend suite's cases.

The ``tool-result`` case holds an adapter to one history; these cases mixed into an
interop module's ``unittest.TestCase`` check the rest of the multi-turn contract
through the same SDK: the ``ToolChoice`` modes read back from what the SDK sent,
another provider's reasoning is not sent, and the reasoning a reply carries comes
back from the adapter (whole and streamed) exactly as the provider wrote it. A
subclass sets :attr:`wire`, :meth:`create_backend` and what its provider does.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import replace
from typing import Any, ClassVar, List, Tuple

from conformance.contract import (
    ChatRequest,
    ChatResponse,
    Message,
    Reasoning,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.fixture import conformance_request
from conformance.provider import start_fake_provider
from conformance.provider.replies import RecordedRequest
from conformance.wires._base import Wire
from conformance.wires._turns import History, ScriptedCall, ScriptedTurn, play_turn

MODEL = "conformance-model"
CHOICES = (ToolChoice.AUTO, ToolChoice.REQUIRED, ToolChoice.tool(FX.tool_name))


def run(backend: Any, request: ChatRequest, stream: bool) -> ChatResponse:
    """One call of a sync or async adapter; a stream's chunks gathered into one response."""

    async def gather_async() -> ChatResponse:
        try:
            if not stream:
                response: ChatResponse = await backend.chat(request)
                return response
            return gathered([chunk async for chunk in backend.chat_stream(request)])
        finally:
            await backend.aclose()

    if inspect.iscoroutinefunction(backend.chat):
        return asyncio.run(gather_async())
    try:
        return backend.chat(request) if not stream else gathered(list(backend.chat_stream(request)))
    finally:
        backend.close()


def gathered(chunks: List[Any]) -> ChatResponse:
    text = "".join(c.content for c in chunks)
    calls = tuple(call for c in chunks for call in c.tool_calls)
    reasoning = tuple(r for c in chunks for r in c.reasoning)
    finish = next((c.finish_reason for c in reversed(chunks) if c.finish_reason), "")
    return ChatResponse(text, str(finish), calls, None, reasoning)


class AdapterRoundTrip:
    """The cases; a subclass is also a ``unittest.TestCase``."""

    wire: ClassVar[Wire]
    #: Whether the provider has a tool choice (Ollama has none, and nothing is sent).
    has_tool_choice: ClassVar[bool] = True
    #: The reasoning a reply of this provider carries on its turn, as the provider wrote it.
    reply_reasoning: ClassVar[Tuple[Reasoning, ...]] = ()
    #: The reasoning it ties to a call (Gemini's thought signature).
    call_reasoning: ClassVar[Tuple[Reasoning, ...]] = ()
    #: What the provider's 400 says of a call sent back without its reasoning, where it
    #: refuses one (Gemini 3): dropping another provider's signature is still right.
    unsigned_call_refused: ClassVar[str] = ""

    def create_backend(self, url: str) -> Any:
        raise NotImplementedError

    # -- helpers ----------------------------------------------------------------------

    def exchange(
        self, request: ChatRequest, turn: ScriptedTurn, stream: bool
    ) -> Tuple[ChatResponse, History]:
        """``request`` sent through the adapter to a provider that answers with ``turn``."""
        seen: List[RecordedRequest] = []

        def answer(recorded: RecordedRequest) -> Any:
            if not self.wire.is_generation(recorded):
                return self.wire.aux_reply(recorded)
            seen.append(recorded)
            return play_turn(self.wire, turn, recorded)

        with start_fake_provider(http2=bool(getattr(self, "http2", False))) as provider:
            provider.reply(answer)
            response = run(self.create_backend(provider.url), request, stream)
        self.assertEqual(len(seen), 1, "expected one generation request")  # type: ignore[attr-defined]
        history = self.wire.read_history(seen[0])
        assert history is not None
        return response, history

    def request(self, messages: Tuple[Message, ...] = (), **kwargs: Any) -> ChatRequest:
        base = conformance_request(MODEL)
        return replace(base, messages=(*base.messages, *messages), **kwargs)

    # -- the cases --------------------------------------------------------------------

    def test_tool_choice_reads_back(self) -> None:
        """Each ToolChoice mode arrives as the provider's own setting (none where it has none)."""
        for choice in CHOICES:
            with self.subTest(choice=choice):  # type: ignore[attr-defined]
                _, history = self.exchange(self.request(tool_choice=choice), ScriptedTurn(text="ok."), False)
                want = choice if self.has_tool_choice else None
                self.assertEqual(history.tool_choice, want)  # type: ignore[attr-defined]

    def test_reasoning_of_another_provider_is_not_sent(self) -> None:
        """A turn's reasoning made by another provider is dropped, and the rest of the turn is sent."""
        elsewhere = tuple(
            replace(r, provider="elsewhere") for r in (*self.reply_reasoning, *self.call_reasoning)
        )
        call = ToolCall("call_elsewhere", FX.tool_name, dict(FX.tool_arguments), elsewhere)
        turn = Message("assistant", "Checking.", tool_calls=(call,), reasoning=elsewhere)
        result = Message.tool(ToolResult(call.id, call.name, content=FX.tool_result))
        _, history = self.exchange(self.request((turn, result)), ScriptedTurn(text="ok."), False)
        (assistant,) = history.assistant_turns
        if self.unsigned_call_refused:
            self.assertEqual(len(history.problems), 1, history.problems)  # type: ignore[attr-defined]
            self.assertIn(self.unsigned_call_refused, history.problems[0])  # type: ignore[attr-defined]
        else:
            self.assertEqual(history.problems, ())  # type: ignore[attr-defined]
        self.assertEqual(assistant.reasoning, ())  # type: ignore[attr-defined]
        self.assertEqual([c.reasoning for c in assistant.tool_calls], [()])  # type: ignore[attr-defined]

    def test_reply_reasoning_comes_back_exactly(self) -> None:
        """The reasoning of a tool turn comes back from the adapter byte for byte, whole and streamed."""
        if not (self.reply_reasoning or self.call_reasoning):
            self.skipTest(f"{self.wire.title} returns no reasoning")  # type: ignore[attr-defined]
        arguments = json.dumps(dict(FX.tool_arguments))
        call = ScriptedCall("call_reasoned", FX.tool_name, arguments, reasoning=self.call_reasoning)
        turn = ScriptedTurn(
            text="Checking.", calls=(call,), reasoning=self.strip(self.reply_reasoning), seed="round-trip"
        )
        for stream in (False, True):
            with self.subTest(stream=stream):  # type: ignore[attr-defined]
                response, _ = self.exchange(self.request(), turn, stream)
                self.assertEqual(list(response.reasoning), list(self.reply_reasoning))  # type: ignore[attr-defined]
                (got,) = response.tool_calls
                self.assertEqual(list(got.reasoning), list(self.call_reasoning))  # type: ignore[attr-defined]

    @staticmethod
    def strip(items: Tuple[Reasoning, ...]) -> Tuple[Reasoning, ...]:
        """As a scripted turn takes them: the provider is who reads them, not who scripts them."""
        return tuple(replace(r, provider="") for r in items)
