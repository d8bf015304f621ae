"""A reference backend for OpenAI Responses, standard library plus ``h2``.

It is the smallest backend that meets the whole contract on this wire, and so the
plainest account of how to read it:

- Responses has no finish reason. The turn's ``status`` and
  ``incomplete_details.reason`` say how it ended; the ``output`` items say what it
  holds. A ``function_call`` item makes a ``tool_calls`` turn; an ``incomplete``
  turn cut off by ``max_output_tokens`` keeps no call; a ``refusal`` part or a
  ``content_filter`` reason is a refusal.
- The id a tool result must echo is the item's ``call_id``, not its ``id``.
- Streamed events are told apart by ``data.type`` (the ``event:`` line says the
  same). Usage comes only with the terminal event. A stream that ends without
  ``response.completed``, ``response.incomplete`` or ``response.failed`` was cut.
- A failure after the 200 is an ``error`` event (its fields nested under ``error``
  in production, flat in the API reference: read both) or ``response.failed``.
- Tell an exhausted quota from a rate limit by ``error.code``, never by the 429.
- A history is a list of input items: each ``reasoning`` item back as it came (id,
  summary, ``encrypted_content``) before the message or call it preceded, one
  ``function_call`` per call, one ``function_call_output`` per result echoing its
  ``call_id``. There is no tool role and no error flag on a result.
- A streamed reasoning item is passed on at its ``response.output_item.done``, the
  event that carries it whole; calls are taken from finished items, so fragments of
  parallel calls never mix whatever order their deltas came in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from ..contract import (
    ChatRequest,
    ChatResponse,
    LLMError,
    Message,
    Reasoning,
    ReasoningKind,
    StreamChunk,
    ToolCall,
    ToolChoice,
    Usage,
)
from ._base import call_from_text
from ._decoders import SSEDecoder
from ._errors import decode_json
from ._openai import OpenAIBase

__all__ = ["OpenAIResponsesBackend"]

#: The events that end a streamed response.
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})

#: ``response.error.code`` (of a failed response) -> the contract's kind.
FAILED_CODES: Mapping[str, str] = {
    "rate_limit_exceeded": "rate_limit",
    "server_error": "server_error",
    "vector_store_timeout": "server_error",
}


@dataclass
class _Turn:
    """What a response says, gathered from a whole body or from stream events."""

    text: str = ""
    status: Optional[str] = None
    incomplete_reason: Optional[str] = None
    refused: bool = False
    usage: Optional[Usage] = None


class OpenAIResponsesBackend(OpenAIBase):
    """Talks to ``{base_url}/responses``; ``base_url`` ends in ``/v1``."""

    rate_limit_codes = frozenset({"rate_limit_exceeded", "too_many_requests"})
    path = "/responses"

    # -- the request ------------------------------------------------------------------

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The Responses request body: system prompts become ``instructions``."""
        system = [m.content for m in chat.messages if m.role in ("system", "developer")]
        body: Dict[str, Any] = {
            "model": chat.model,
            "input": [
                item for m in chat.messages if m.role not in ("system", "developer") for item in self.items(m)
            ],
        }
        if system:
            body["instructions"] = "\n\n".join(system)
        if chat.tool_choice is not None:
            body["tool_choice"] = self.tool_choice(chat.tool_choice)
        if chat.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                    # Strict mode would reject a schema with optional properties.
                    "strict": False,
                }
                for t in chat.tools
            ]
        if chat.max_tokens is not None:
            body["max_output_tokens"] = chat.max_tokens
        if stream:
            body["stream"] = True
        return body

    def items(self, message: Message) -> List[Dict[str, Any]]:
        """The input items of one message.

        An assistant turn is its reasoning items (this provider's only, exactly as they
        came), its text, then one ``function_call`` per call; a tool result is a
        ``function_call_output`` naming the call by ``call_id``. Responses has no error
        flag on a result: a failed tool's output is the error as JSON text.
        """
        if message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            return [{"type": "function_call_output", "call_id": result.call_id, "output": result.text}]
        if message.role != "assistant":
            return [{"role": message.role, "content": message.content}]
        items: List[Dict[str, Any]] = []
        for r in message.reasoning:
            if str(r.kind) != ReasoningKind.REASONING_ITEM.value or r.provider not in ("", self.provider):
                continue
            item: Dict[str, Any] = {
                "type": "reasoning",
                "id": r.id,
                "summary": [{"type": "summary_text", "text": text} for text in r.summary],
            }
            if r.data:
                item["encrypted_content"] = r.data
            items.append(item)
        if message.content:
            items.append({"role": "assistant", "content": message.content})
        for call in message.tool_calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": json.dumps(dict(call.arguments), ensure_ascii=False),
                }
            )
        return items

    @staticmethod
    def tool_choice(choice: ToolChoice) -> Any:
        """``"auto"``, ``"required"``, or the one function by name."""
        if choice.mode == "tool":
            return {"type": "function", "name": choice.name}
        return choice.mode

    def reasoning(self, item: Mapping[str, Any]) -> Reasoning:
        """A finished ``reasoning`` output item, its encrypted content kept as it came."""
        summary = tuple(
            str(part.get("text") or "") for part in item.get("summary") or () if isinstance(part, dict)
        )
        return Reasoning(
            ReasoningKind.REASONING_ITEM.value,
            id=str(item.get("id") or ""),
            summary=summary,
            data=str(item.get("encrypted_content") or ""),
            provider=self.provider,
        )

    def stream_error(self, event: Mapping[str, Any]) -> LLMError:
        """The error an ``error`` event carries, nested under ``error`` or flat."""
        nested = event.get("error")
        error = nested if isinstance(nested, dict) else event
        return self.make_error(self.error_kind(None, error), error, status=None)

    def stream_failure_kind(self, code: Any) -> str:
        """A failed response's ``error.code``, read through :data:`FAILED_CODES`."""
        return FAILED_CODES.get(str(code), "server_error")

    # -- the answer -------------------------------------------------------------------

    def finish_reason(self, turn: _Turn, calls: List[ToolCall]) -> str:
        """The contract's finish reason from the turn's status and what it holds."""
        if turn.status == "incomplete":
            if turn.incomplete_reason == "content_filter":
                return "content_filter"
            if turn.incomplete_reason in ("max_output_tokens", "max_messages", None):
                return "length"
        if turn.refused:
            return "refusal"
        if calls:
            return "tool_calls"
        return "stop"

    def complete_calls(self, items: List[Mapping[str, Any]], turn: _Turn) -> List[ToolCall]:
        """The finished ``function_call`` items, unparsable arguments kept as text; none on a cut-off turn."""
        if turn.status == "incomplete":
            return []
        calls = []
        for item in items:
            if item.get("type") != "function_call" or item.get("status") == "incomplete":
                continue
            call_id = str(item.get("call_id") or item.get("id") or "")
            calls.append(call_from_text(call_id, str(item.get("name", "")), str(item.get("arguments") or "")))
        return calls

    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        if not isinstance(raw, dict):
            return None
        return Usage(
            input_tokens=int(raw.get("input_tokens", 0)),
            output_tokens=int(raw.get("output_tokens", 0)),
            total_tokens=int(raw.get("total_tokens", 0)),
        )

    def read_response(self, body: Mapping[str, Any], turn: _Turn) -> List[Mapping[str, Any]]:
        """Take in a ``response`` object: status, usage, text, refusals; return its items."""
        turn.status = body.get("status")
        details = body.get("incomplete_details")
        turn.incomplete_reason = details.get("reason") if isinstance(details, dict) else None
        turn.usage = self.usage(body.get("usage"))
        if turn.status == "failed":
            raw_error = body.get("error")
            error: Mapping[str, Any] = raw_error if isinstance(raw_error, dict) else {}
            raise self.make_error(self.error_kind(None, error), error, status=None)
        items: List[Mapping[str, Any]] = [item for item in body.get("output") or () if isinstance(item, dict)]
        for item in items:
            if item.get("type") != "message":
                continue
            for part in item.get("content") or ():
                if part.get("type") == "refusal":
                    turn.refused = True
        return items

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        """One whole reply."""
        response = await self.send(chat, stream=False)
        body = decode_json(await response.read())
        if not isinstance(body, dict) or not isinstance(body.get("output"), list):
            raise self.make_error(
                "server_error", {"message": f"no output in the reply: {body!r:.200}"}, status=200
            )
        turn = _Turn()
        items = self.read_response(body, turn)
        text = [
            part.get("text", "")
            for item in items
            if item.get("type") == "message"
            for part in item.get("content") or ()
            if part.get("type") == "output_text"
        ]
        calls = self.complete_calls(items, turn)
        return ChatResponse(
            content="".join(text),
            finish_reason=self.finish_reason(turn, calls),
            tool_calls=tuple(calls),
            usage=turn.usage,
            reasoning=tuple(self.reasoning(item) for item in items if item.get("type") == "reasoning"),
        )

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Text deltas as they come, then one last chunk with the calls, reason and usage."""
        response = await self.send(chat, stream=True)
        decoder = self.sse_decoder()
        turn = _Turn()
        items: List[Mapping[str, Any]] = []
        try:
            async for data in response:
                for event in decoder.feed(data):
                    payload = json.loads(event.data)
                    if not isinstance(payload, dict):
                        continue
                    done = len(items)
                    text = self.on_event(payload, turn, items)
                    if text:
                        yield StreamChunk(content=text)
                    # A reasoning item is passed on once done, with its encrypted content.
                    finished = [self.reasoning(i) for i in items[done:] if i.get("type") == "reasoning"]
                    if finished:
                        yield StreamChunk(reasoning=tuple(finished))
                if turn.status is not None:
                    break
        finally:
            await response.aclose()
        self.check_ended(turn.status is not None, "response.completed (or .incomplete, .failed)")
        calls = self.complete_calls(items, turn)
        yield StreamChunk(
            tool_calls=tuple(calls), finish_reason=self.finish_reason(turn, calls), usage=turn.usage
        )

    def on_event(self, event: Mapping[str, Any], turn: _Turn, items: List[Mapping[str, Any]]) -> str:
        """Take in one stream event: raise its error, keep finished items, return its text."""
        type_ = event.get("type")
        if type_ == "response.output_text.delta":
            return str(event.get("delta") or "")
        if type_ in ("response.refusal.delta", "response.refusal.done"):
            turn.refused = True
        elif type_ == "response.output_item.done" and isinstance(event.get("item"), dict):
            # Only a finished item counts: argument deltas are never a call on their own.
            items.append(event["item"])
        elif type_ == "error":
            raise self.stream_error(event)
        elif type_ in TERMINAL_EVENTS and isinstance(event.get("response"), dict):
            self.read_response(event["response"], turn)
        return ""

    def sse_decoder(self) -> SSEDecoder:
        """The event decoder: it splits events on bytes and decodes whole lines only."""
        return SSEDecoder()
