"""A reference backend for OpenAI Chat Completions, standard library plus ``h2``.

It is the smallest backend that meets the whole contract on this wire, and so the
plainest account of how to read it:

- Ask for usage on a stream (``stream_options.include_usage``): without it OpenAI
  sends none.
- Decode the stream as bytes and split events before decoding UTF-8 (the SSE
  decoder does); a chunk may end inside a character.
- Gather tool-call argument fragments per ``index``; a call is complete only at the
  end of the turn. Arguments that do not parse to a JSON object are handed on as
  ``unparsed_arguments``, for the loop to refuse.
- A turn with tool calls is a ``tool_calls`` turn whatever ``finish_reason`` said;
  a ``length`` turn keeps no call that was cut off.
- A ``data: {"error": ...}`` event is a failure after the 200; a stream that ends
  without ``[DONE]`` or a finish reason was cut and is a failure too, and so is one
  whose ``[DONE]`` comes without a finish reason.
- Usage is wherever the server puts it: OpenAI's ``choices: []`` chunk, or the finish
  chunk itself (Mistral, Groq, DeepSeek).
- A call's fragment names its call by ``index``; Mistral sends each call whole with no
  ``index`` (and no ``type``), so the call's id names it there.
- An OpenAI-compatible server's ``reasoning_content`` (DeepSeek's; api.openai.com sends
  none) is reasoning, never text: it is passed on whole once the answer starts.
- Tell an exhausted quota from a rate limit by ``error.code``, never by the 429.
- Send a conversation back as OpenAI wrote it: the assistant turn with its
  ``tool_calls`` (arguments as JSON text), then one ``tool`` message per result,
  each naming the ``tool_call_id`` it answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from ..contract import (
    ChatRequest,
    ChatResponse,
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

__all__ = ["OpenAIChatBackend"]

FINISH_REASONS: Mapping[str, str] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def render_message(message: Message) -> Dict[str, Any]:
    """One message in Chat Completions' shape."""
    result = message.tool_result
    if result is not None:
        return {"role": "tool", "tool_call_id": result.call_id, "content": result.text}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(dict(call.arguments), ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def render_tool_choice(choice: ToolChoice) -> Any:
    """``"auto"``, ``"required"``, or the one function by name."""
    if choice.mode == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: List[str] = field(default_factory=list)


class OpenAIChatBackend(OpenAIBase):
    """Talks to ``{base_url}/chat/completions``; ``base_url`` ends in ``/v1``."""

    path = "/chat/completions"

    # -- the request ------------------------------------------------------------------

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The Chat Completions request body."""
        body: Dict[str, Any] = {
            "model": chat.model,
            "messages": [render_message(m) for m in chat.messages],
        }
        if chat.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in chat.tools
            ]
        if chat.tool_choice is not None:
            body["tool_choice"] = render_tool_choice(chat.tool_choice)
        if chat.max_tokens is not None:
            body["max_completion_tokens"] = chat.max_tokens
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    # -- the answer -------------------------------------------------------------------

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        """The contract's finish reason: tool calls present make a ``tool_calls`` turn."""
        if reason == "length":
            return "length"
        if calls:
            return "tool_calls"
        return FINISH_REASONS.get(reason or "", "stop" if reason is None else "error")

    def complete_calls(self, partials: List[_PartialCall], reason: Optional[str]) -> List[ToolCall]:
        """The turn's calls, unparsable arguments kept as text; none at all on a turn cut off by the limit."""
        if reason == "length":
            return []
        return [call_from_text(p.id, p.name, "".join(p.arguments)) for p in partials]

    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        if not isinstance(raw, dict):
            return None
        return Usage(
            input_tokens=int(raw.get("prompt_tokens", 0)),
            output_tokens=int(raw.get("completion_tokens", 0)),
            total_tokens=int(raw.get("total_tokens", 0)),
        )

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        """One whole reply."""
        response = await self.send(chat, stream=False)
        return self.completion(decode_json(await response.read()))

    def completion(self, body: Any) -> ChatResponse:
        """A ``chat.completion``'s first choice, as the contract's reply."""
        choices = body.get("choices") if isinstance(body, dict) else None
        if not choices:
            raise self.make_error(
                "server_error", {"message": f"no choices in the reply: {body!r:.200}"}, status=200
            )
        choice = choices[0]
        message = choice.get("message") or {}
        reason = choice.get("finish_reason")
        partials = [
            _PartialCall(
                c.get("id", ""),
                (c.get("function") or {}).get("name", ""),
                [(c.get("function") or {}).get("arguments", "")],
            )
            for c in message.get("tool_calls") or ()
        ]
        calls = self.complete_calls(partials, reason)
        thinking = message.get("reasoning_content")
        return ChatResponse(
            content=message.get("content") or "",
            finish_reason=self.finish_reason(reason, calls),
            tool_calls=tuple(calls),
            usage=self.usage(body.get("usage")),
            reasoning=self.reasoning(thinking if isinstance(thinking, str) else ""),
        )

    def reasoning(self, thinking: str) -> Any:
        """An OpenAI-compatible server's ``reasoning_content`` as one thinking item, or nothing."""
        if not thinking:
            return ()
        return (Reasoning(ReasoningKind.THINKING.value, text=thinking, provider=self.provider),)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Text deltas as they come, then one last chunk with the calls, reason and usage."""
        response = await self.send(chat, stream=True)
        decoder = self.sse_decoder()
        partials: Dict[int, _PartialCall] = {}
        reason: Optional[str] = None
        usage: Optional[Usage] = None
        done = False
        #: reasoning_content gathered until the answer starts (or the turn ends).
        thinking: List[str] = []
        try:
            async for data in response:
                for event in decoder.feed(data):
                    if event.data == "[DONE]":
                        done = True
                        break
                    chunk = json.loads(event.data)
                    text = self.on_chunk(chunk, partials)
                    if chunk.get("usage"):
                        usage = self.usage(chunk["usage"])
                    for choice in chunk.get("choices") or ():
                        reason = choice.get("finish_reason") or reason
                        piece = (choice.get("delta") or {}).get("reasoning_content")
                        if isinstance(piece, str):
                            thinking.append(piece)
                    if text or (partials and thinking):
                        # The reasoning is whole once anything else comes.
                        reasoning, thinking = self.reasoning("".join(thinking)), []
                        yield StreamChunk(content=text, reasoning=reasoning)
                if done:
                    break
        finally:
            await response.aclose()
        # The turn ends with a finish reason and then [DONE]: [DONE] alone ends none
        # (llama-server's older builds send an error: line, which SSE drops, and then
        # [DONE]), and a finish reason alone ends none either (a gateway whose upstream
        # failed after it ends its own response properly, without [DONE]).
        self.check_ended(done and reason is not None, "a finish reason" if done else "[DONE]")
        calls = self.complete_calls([partials[i] for i in sorted(partials)], reason)
        yield StreamChunk(
            tool_calls=tuple(calls),
            finish_reason=self.finish_reason(reason, calls),
            usage=usage,
            reasoning=self.reasoning("".join(thinking)),
        )

    @staticmethod
    def call_index(fragment: Mapping[str, Any], partials: Mapping[int, _PartialCall]) -> int:
        """Which call a ``tool_calls`` fragment belongs to: its ``index``, or, where a server
        sends each call whole with no index (Mistral), the call its id names, else a new one."""
        index = fragment.get("index")
        if isinstance(index, int):
            return index
        call_id = fragment.get("id")
        for known, partial in partials.items():
            if call_id and partial.id == call_id:
                return known
        if not call_id and partials:
            return max(partials)  # a fragment without an id goes on with the last call
        return max(partials, default=-1) + 1

    def sse_decoder(self) -> SSEDecoder:
        """The event decoder: it splits events on bytes and decodes whole lines only."""
        return SSEDecoder()

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        """Take in one ``chat.completion.chunk``: raise its error, gather its calls, return its text."""
        if chunk.get("error"):
            error = chunk["error"]
            raise self.make_error(self.error_kind(None, error), error, status=None)
        text = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            for fragment in delta.get("tool_calls") or ():
                partial = partials.setdefault(self.call_index(fragment, partials), _PartialCall())
                partial.id = fragment.get("id") or partial.id
                function = fragment.get("function") or {}
                partial.name = function.get("name") or partial.name
                if function.get("arguments"):
                    partial.arguments.append(function["arguments"])
        return "".join(text)
