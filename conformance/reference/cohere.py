"""A reference backend for Cohere Chat v2, standard library plus ``h2``.

It is the smallest backend that meets the whole contract on this wire, and so the
plainest account of how to read it:

- The base URL has no version; the call is ``POST {base}/v2/chat`` with
  ``Authorization: Bearer``. The system prompt is the first message, ``role: system``.
  Tools are ``{"type": "function", "function": {...}}`` with a JSON schema, as in v2
  (v1's ``parameter_definitions`` are gone).
- ``tool_choice`` is ``REQUIRED`` or ``NONE`` and names no tool: to force one, offer
  only that tool with ``REQUIRED``; to leave the choice to the model, send none.
- ``finish_reason`` says how the turn ended: ``TOOL_CALL`` with its calls, ``COMPLETE``,
  ``STOP_SEQUENCE``, and ``MAX_TOKENS``, on which no call is trusted. ``ERROR`` and
  ``TIMEOUT`` are failures, not answers: a retryable ``server_error``.
- A tool turn's ``tool_plan`` is Cohere's chain of thought for the calls, not the
  answer: it comes back as reasoning (``thinking``), and goes back as ``tool_plan``
  beside the calls. A reasoning model's ``thinking`` content items are reasoning too,
  kept out of the text.
- The stream is told apart by each event's JSON ``type`` (cohere-python reads that,
  not the ``event:`` line). Text is ``content-delta``; a call's arguments arrive as
  ``tool-call-delta`` fragments by ``index``, complete only at ``message-end``, the
  turn's end. A stream without ``message-end`` was cut.
- Usage is ``usage.tokens``, what the model processed; ``billed_units`` is billing,
  and leaves out the prompt template.
- An error is a status and ``{"message"}``: 401 a bad key, 402 billing (an exhausted
  quota), 429 a rate limit (a Trial key's monthly limit is a 429 too, told apart only
  by its message, so it is read as the rate limit its bytes say), 503 an overload,
  other 5xx a server error, a 400 whose message begins "too many tokens" the context
  overflow (Cohere's documented prefix; nothing else tells it from a bad request, so
  the case takes a bad request too).
- Multi-turn: each result goes back as a ``tool`` message naming its
  ``tool_call_id``, its text the content (a ``ToolError`` as its JSON text: Cohere has
  no error flag). Reasoning from another provider is dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence

from ..contract import (
    ChatRequest,
    ChatResponse,
    LLMError,
    Message,
    Reasoning,
    ReasoningKind,
    StreamChunk,
    ToolCall,
    Usage,
)
from ._base import ReferenceBackend, call_from_text
from ._decoders import SSEDecoder
from ._errors import decode_json, status_kind

__all__ = ["CohereBackend"]

FINISH_REASONS: Mapping[str, str] = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "TOOL_CALL": "tool_calls",
    "MAX_TOKENS": "length",
}
#: The finish reasons of a generation that failed: Cohere's "internal error" and its time limit.
FAILED = frozenset({"ERROR", "TIMEOUT"})
#: The prefix of the 400s about a prompt or output past the model's limits (Cohere's errors reference).
CONTEXT_PREFIX = "too many tokens"


def thinking(text: str) -> Reasoning:
    """Cohere's reasoning, a plan or a thinking item: text with nothing opaque beside it."""
    return Reasoning(ReasoningKind.THINKING.value, text=text, provider="cohere")


def own_thinking(reasoning: Sequence[Reasoning]) -> List[str]:
    """The texts of a turn's reasoning that Cohere can take back: its own (or unmarked) thinking."""
    return [
        r.text
        for r in reasoning
        if r.provider in ("", "cohere") and str(r.kind) == ReasoningKind.THINKING.value and r.text
    ]


def render_message(message: Message) -> Dict[str, Any]:
    """One message in Chat v2's shape."""
    result = message.tool_result
    if result is not None:
        return {"role": "tool", "tool_call_id": result.call_id, "content": result.text}
    if message.role != "assistant":
        return {"role": message.role, "content": message.content}
    texts = own_thinking(message.reasoning)
    if message.tool_calls:
        turn: Dict[str, Any] = {"role": "assistant"}
        if texts:
            turn["tool_plan"] = "".join(texts)
        turn["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(dict(call.arguments), ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
        if message.content:
            turn["content"] = [{"type": "text", "text": message.content}]
        return turn
    if not texts:
        return {"role": "assistant", "content": message.content}
    content: List[Dict[str, Any]] = [{"type": "thinking", "thinking": text} for text in texts]
    if message.content:
        content.append({"type": "text", "text": message.content})
    return {"role": "assistant", "content": content}


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: List[str] = field(default_factory=list)


@dataclass
class _Turn:
    """What the stream said about the whole turn."""

    finish_reason: Optional[str] = None
    error: Optional[str] = None
    usage: Optional[Usage] = None
    ended: bool = False
    calls: Dict[int, _PartialCall] = field(default_factory=dict)
    plan: List[str] = field(default_factory=list)
    #: Each content item's kind by index, and a thinking item's text so far.
    kinds: Dict[int, str] = field(default_factory=dict)
    thoughts: Dict[int, List[str]] = field(default_factory=dict)
    #: Reasoning now complete, to hand over.
    finished: List[Reasoning] = field(default_factory=list)


class CohereBackend(ReferenceBackend):
    """Talks to ``{base_url}/v2/chat``; ``base_url`` has no version, as in cohere-python."""

    provider = "cohere"
    path = "/v2/chat"

    # -- the request ------------------------------------------------------------------

    def headers(self, stream: bool) -> Dict[str, str]:
        """Headers of every request: the key, JSON, and the caller's own."""
        return {
            "authorization": f"Bearer {self.api_key}",
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
            **self.extra_headers,
        }

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The Chat v2 request body: one system message first, tools as functions."""
        system = [m.content for m in chat.messages if m.role == "system"]
        messages = [{"role": "system", "content": "\n\n".join(system)}] if system else []
        messages += [render_message(m) for m in chat.messages if m.role != "system"]
        body: Dict[str, Any] = {"model": chat.model, "messages": messages}
        tools = list(chat.tools)
        choice = chat.tool_choice
        if choice is not None and choice.mode == "tool":
            # Cohere names no tool in tool_choice: only the tool offered can be the one forced.
            tools = [t for t in tools if t.name == choice.name]
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in tools
            ]
        if choice is not None and choice.mode != "auto":
            body["tool_choice"] = "REQUIRED"
        if chat.max_tokens is not None:
            body["max_tokens"] = chat.max_tokens
        body["stream"] = stream
        return body

    # -- errors -----------------------------------------------------------------------

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        """The contract's kind for a Cohere error (``status`` is None for a stream that failed)."""
        if status is None:
            return "server_error"  # message-end said ERROR or TIMEOUT
        if status == 402:
            return "quota"
        message = str(error.get("message") or "").lower()
        if status == 400 and message.startswith(CONTEXT_PREFIX):
            return "context_overflow"
        return status_kind(status)

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        """The error for a failure status, with ``retry_after`` the delay the reply carries, if any."""
        body = decode_json(raw)
        error: Mapping[str, Any] = body if isinstance(body, dict) else {}
        if not isinstance(error.get("message"), str):
            error = {"message": f"HTTP {status} with a body that is not a Cohere error"}
        return self.make_error(
            self.error_kind(status, error),
            error,
            status=status,
            retry_after=self.retry_after(headers),
            request_id=headers.get("x-debug-trace-id"),
        )

    def make_error(
        self,
        kind: str,
        error: Mapping[str, Any],
        *,
        status: Optional[int],
        retry_after: Optional[float] = None,
        request_id: Optional[str] = None,
    ) -> LLMError:
        """The error a Cohere error body (or a failed ``message-end``, or its delta) describes."""
        if isinstance(error.get("delta"), Mapping):
            error = error["delta"]
        message = error.get("message") or error.get("error")
        if not message and error.get("finish_reason"):
            message = f"the generation ended with finish_reason {error['finish_reason']}"
        details = {"id": error.get("id"), "finish_reason": error.get("finish_reason"), "trace_id": request_id}
        return self.build_error(
            kind, str(message or kind), status=status, details=details, retry_after=retry_after
        )

    # -- the answer -------------------------------------------------------------------

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        """The contract's finish reason: a turn with calls is a tool turn, a cut one is a length."""
        if reason == "MAX_TOKENS":
            return "length"
        if calls:
            return "tool_calls"
        return FINISH_REASONS.get(reason or "", "stop" if reason is None else "error")

    def complete_calls(self, partials: Sequence[_PartialCall], reason: Optional[str]) -> List[ToolCall]:
        """The turn's calls, arguments that are no object kept as text; none on a turn the limit cut."""
        if reason == "MAX_TOKENS":
            return []
        return [call_from_text(p.id, p.name, "".join(p.arguments)) for p in partials]

    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        tokens = raw.get("tokens") if isinstance(raw, dict) else None
        if not isinstance(tokens, dict):
            return None
        inp, out = int(tokens.get("input_tokens") or 0), int(tokens.get("output_tokens") or 0)
        return Usage(input_tokens=inp, output_tokens=out, total_tokens=inp + out)

    def check_finished(self, reason: Optional[str], error: Optional[str]) -> None:
        """Raise where the turn ended as a failure: ``ERROR`` or ``TIMEOUT``."""
        if reason in FAILED:
            raise self.make_error(
                self.error_kind(None, {}), {"finish_reason": reason, "error": error}, status=None
            )

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        """One whole reply."""
        response = await self.send(chat, stream=False)
        body = decode_json(await response.read())
        message = body.get("message") if isinstance(body, dict) else None
        if not isinstance(message, dict):
            raise self.make_error(
                "server_error", {"message": f"no message in the reply: {body!r:.200}"}, status=200
            )
        assert isinstance(body, dict)
        reason = body.get("finish_reason")
        self.check_finished(reason, None)
        text: List[str] = []
        reasoning: List[Reasoning] = []
        for item in message.get("content") or ():
            if not isinstance(item, dict):
                continue
            if item.get("type") == "text":
                text.append(str(item.get("text") or ""))
            elif item.get("type") == "thinking" and item.get("thinking"):
                reasoning.append(thinking(str(item["thinking"])))
        if message.get("tool_plan"):
            reasoning.append(thinking(str(message["tool_plan"])))
        partials = [
            _PartialCall(
                str(c.get("id") or ""),
                str((c.get("function") or {}).get("name") or ""),
                [str((c.get("function") or {}).get("arguments") or "")],
            )
            for c in message.get("tool_calls") or ()
            if isinstance(c, dict)
        ]
        calls = self.complete_calls(partials, reason)
        return ChatResponse(
            content="".join(text),
            finish_reason=self.finish_reason(reason, calls),
            tool_calls=tuple(calls),
            usage=self.usage(body.get("usage")),
            reasoning=tuple(reasoning),
        )

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Text deltas as they come, then one last chunk with the calls, reason and usage."""
        response = await self.send(chat, stream=True)
        decoder = self.sse_decoder()
        turn = _Turn()
        try:
            async for data in response:
                for event in decoder.feed(data):
                    if event.data == "[DONE]":
                        continue
                    text = self.on_event(json.loads(event.data), turn)
                    if text or turn.finished:
                        yield StreamChunk(content=text, reasoning=tuple(turn.finished))
                        turn.finished = []
                if turn.ended:
                    break
        finally:
            await response.aclose()
        self.check_ended(turn.ended, "message-end")
        self.check_finished(turn.finish_reason, turn.error)
        calls = self.complete_calls([turn.calls[i] for i in sorted(turn.calls)], turn.finish_reason)
        yield StreamChunk(
            tool_calls=tuple(calls),
            finish_reason=self.finish_reason(turn.finish_reason, calls),
            usage=turn.usage,
        )

    def on_event(self, event: Mapping[str, Any], turn: _Turn) -> str:
        """Take in one event, by its JSON ``type``: gather calls, plan and usage, return its text."""
        kind = event.get("type")
        delta = event.get("delta") or {}
        message = (delta.get("message") or {}) if isinstance(delta, dict) else {}
        index = int(event.get("index") or 0)
        if kind != "tool-plan-delta" and turn.plan:
            # The plan is whole once anything else comes.
            turn.finished.append(thinking("".join(turn.plan)))
            turn.plan = []
        if kind == "content-start":
            turn.kinds[index] = str((message.get("content") or {}).get("type") or "text")
            if turn.kinds[index] == "thinking":
                turn.thoughts[index] = []
        elif kind == "content-delta":
            content = message.get("content") or {}
            if turn.kinds.get(index) == "thinking":
                turn.thoughts.setdefault(index, []).append(str(content.get("thinking") or ""))
                return ""
            return str(content.get("text") or "")
        elif kind == "content-end" and index in turn.thoughts:
            turn.finished.append(thinking("".join(turn.thoughts.pop(index))))
        elif kind == "tool-plan-delta":
            turn.plan.append(str(message.get("tool_plan") or ""))
        elif kind in ("tool-call-start", "tool-call-delta"):
            raw = message.get("tool_calls") or {}
            function = raw.get("function") or {}
            partial = turn.calls.setdefault(index, _PartialCall())
            partial.id = str(raw.get("id") or partial.id)
            partial.name = str(function.get("name") or partial.name)
            if function.get("arguments"):
                partial.arguments.append(str(function["arguments"]))
        elif kind == "message-end":
            turn.finish_reason = delta.get("finish_reason")
            turn.error = delta.get("error")
            turn.usage = self.usage(delta.get("usage"))
            turn.ended = True
        return ""

    def sse_decoder(self) -> SSEDecoder:
        """The event decoder: it splits events on bytes and decodes whole lines only."""
        return SSEDecoder()
