"""A reference backend for Ollama's ``/api/chat``, standard library plus ``h2``.

It is the smallest backend that meets the whole contract on this wire, and so the
plainest account of how to read it:

- Say ``"stream"`` every time: the server streams when the flag is missing.
- Split the NDJSON stream on newline bytes before decoding UTF-8 (the NDJSON decoder
  does); a chunk may end inside a character.
- A stream is complete at the line with ``"done": true``, which carries
  ``done_reason`` and the token counts (``prompt_eval_count``, ``eval_count``;
  either is left out when zero). A stream that ends before it was cut short.
- Tool calls arrive whole in ``message.tool_calls``, ``arguments`` an object. Newer
  servers give each an ``id``; older ones do not, and then the backend makes one up.
  A turn with calls is a ``tool_calls`` turn though Ollama says ``stop``; a
  ``length`` turn keeps no call.
- Errors are ``{"error": "<text>"}`` with the status; after the first line the
  status is spent, so a failure is one last ``{"error": ...}`` line and only its text
  says what happened.
- A history sends each call whole, ``arguments`` an object, and each result as a
  ``tool`` message naming its ``tool_name``: there is no call id to echo and no error
  flag. A thinking model's ``thinking`` goes back on its turn as it came; in a stream
  it is complete once the text, a call or the ``done`` line follows.
- A 429 comes only from ollama.com, for a used-up session or weekly usage limit:
  a quota, not a rate limit to wait out.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple

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
from ._decoders import NDJSONDecoder
from ._errors import decode_json, status_kind

__all__ = ["OllamaBackend"]

FINISH_REASONS: Mapping[str, str] = {"stop": "stop", "length": "length"}

#: What an error's text says, for the lines that come without a status.
_QUOTA = re.compile(r"usage limit", re.I)
_OVERLOADED = re.compile(r"server busy|overloaded|maximum pending requests", re.I)
_CONTEXT_OVERFLOW = re.compile(r"longer than the context length|exceeds the available context", re.I)
_AUTH = re.compile(r"^unauthorized$", re.I)


class OllamaBackend(ReferenceBackend):
    """Talks to ``{base_url}/api/chat``; ``base_url`` is the server: ``http://localhost:11434``."""

    provider = "ollama"
    path = "/api/chat"

    # -- the request ------------------------------------------------------------------

    def headers(self, stream: bool) -> Dict[str, str]:
        """Headers of every request. A local server ignores the key; ollama.com needs it."""
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        headers.update(self.extra_headers)
        return headers

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The ``/api/chat`` request body; ``stream`` is always said out loud."""
        body: Dict[str, Any] = {
            "model": chat.model,
            "messages": [self.message(m) for m in chat.messages],
            "stream": stream,
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
        if chat.max_tokens is not None:
            body["options"] = {"num_predict": chat.max_tokens}
        if chat.thinking:
            body["think"] = True  # the thinking field comes only to a request that asks
        return body

    def message(self, message: Message) -> Dict[str, Any]:
        """One message: an assistant turn with its ``thinking`` and whole calls, a result by name.

        Ollama gives calls no id to echo: a result names its tool in ``tool_name`` and
        follows the calls in order. It has no error flag either, so a failed tool's
        content is the error as JSON text. Only this provider's thinking goes back.
        """
        if message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            return {"role": "tool", "tool_name": result.name, "content": result.text}
        body: Dict[str, Any] = {"role": message.role, "content": message.content}
        thinking = "".join(
            r.text
            for r in message.reasoning
            if str(r.kind) == ReasoningKind.THINKING.value and r.provider in ("", self.provider)
        )
        if thinking:
            body["thinking"] = thinking
        if message.tool_calls:
            body["tool_calls"] = [
                {"function": {"name": call.name, "arguments": dict(call.arguments)}}
                for call in message.tool_calls
            ]
        return body

    def reasoning(self, thinking: str) -> Tuple[Reasoning, ...]:
        """The turn's ``thinking`` as reasoning to send back, or nothing."""
        return (
            (Reasoning(ReasoningKind.THINKING.value, text=thinking, provider=self.provider),)
            if thinking
            else ()
        )

    # -- errors -----------------------------------------------------------------------

    def error_kind(self, status: Optional[int], message: str) -> str:
        """The contract's kind for an error's status and text (``status`` is None mid-stream)."""
        if _QUOTA.search(message):
            return "quota"
        if _CONTEXT_OVERFLOW.search(message):
            return "context_overflow"
        if _OVERLOADED.search(message):
            return "overloaded"
        if status is None:
            return "auth" if _AUTH.match(message) else "server_error"
        return status_kind(status)

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        """The error for a failure status; ``retry_after`` the delay a proxy sent, if one did.

        Ollama sends no retry delay itself; a proxy in front of it may.
        """
        body = decode_json(raw)
        error = body.get("error") if isinstance(body, dict) else None
        message = error if isinstance(error, str) else raw[:200].decode("utf-8", "replace")
        kind = self.error_kind(status, message)
        return self.make_error(kind, message, status=status, retry_after=self.retry_after(headers))

    def make_error(
        self, kind: str, message: str, *, status: Optional[int], retry_after: Optional[float] = None
    ) -> LLMError:
        """The error an Ollama error text describes; the text is all there is, so it is kept."""
        return self.build_error(
            kind, message or kind, status=status, details={"error": message}, retry_after=retry_after
        )

    # -- the answer -------------------------------------------------------------------

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        """The contract's finish reason: calls make a ``tool_calls`` turn (Ollama says stop)."""
        mapped = FINISH_REASONS.get(reason or "stop", "error")
        if mapped == "stop" and calls:
            return "tool_calls"
        return mapped

    def tool_call(self, raw: Mapping[str, Any]) -> Optional[ToolCall]:
        """One ``message.tool_calls`` entry; without an ``id`` one is made up."""
        function = raw.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return None
        arguments = function.get("arguments", {})
        call_id = str(raw.get("id") or f"call_{secrets.token_hex(12)}")
        if isinstance(arguments, dict):
            return ToolCall(call_id, function["name"], arguments)
        # Servers before 0.4 sent a JSON string; text that is not an object goes on unparsed.
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return call_from_text(call_id, function["name"], text)

    def keep_calls(self, calls: List[ToolCall], reason: Optional[str]) -> List[ToolCall]:
        """The calls of a finished turn; none at all on a turn cut off by the limit."""
        return [] if reason == "length" else calls

    @staticmethod
    def usage(line: Mapping[str, Any]) -> Usage:
        """The counts of the ``done`` line: ``omitempty`` leaves out a zero."""
        prompt = int(line.get("prompt_eval_count") or 0)
        output = int(line.get("eval_count") or 0)
        return Usage(prompt, output, prompt + output)

    def read_line(self, line: Mapping[str, Any]) -> Tuple[str, List[ToolCall]]:
        """Take in one ``ChatResponse``: raise its error, return its text and calls."""
        error = line.get("error")
        if error:
            text = str(error)
            raise self.make_error(self.error_kind(None, text), text, status=None)
        raw_message = line.get("message")
        message: Mapping[str, Any] = raw_message if isinstance(raw_message, dict) else {}
        calls = []
        for raw in message.get("tool_calls") or ():
            call = self.tool_call(raw) if isinstance(raw, dict) else None
            if call is not None:
                calls.append(call)
        content = message.get("content")
        return (content if isinstance(content, str) else ""), calls

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        """One whole reply."""
        response = await self.send(chat, stream=False)
        body = decode_json(await response.read())
        if not isinstance(body, dict):
            raise self.make_error(
                "server_error", f"the reply is not a JSON object: {body!r:.200}", status=200
            )
        text, calls = self.read_line(body)
        reason = body.get("done_reason")
        calls = self.keep_calls(calls, reason)
        message = body.get("message")
        thinking = message.get("thinking") if isinstance(message, dict) else None
        return ChatResponse(
            content=text,
            finish_reason=self.finish_reason(reason, calls),
            tool_calls=tuple(calls),
            usage=self.usage(body),
            reasoning=self.reasoning(thinking if isinstance(thinking, str) else ""),
        )

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Text deltas as they come, then one last chunk with the calls, reason and usage.

        Calls are held back to the ``done`` line: only its ``done_reason`` says whether
        the turn was cut off, and a cut-off turn yields none.
        """
        response = await self.send(chat, stream=True)
        decoder = self.ndjson_decoder()
        calls: List[ToolCall] = []
        thinking: List[str] = []
        final: Optional[Mapping[str, Any]] = None
        try:
            async for data in response:
                for line in decoder.feed(data):
                    text, new_calls = self.read_line(line)
                    calls.extend(new_calls)
                    message = line.get("message")
                    piece = message.get("thinking") if isinstance(message, dict) else None
                    if isinstance(piece, str) and piece:
                        thinking.append(piece)
                    if thinking and (text or new_calls or line.get("done")):
                        # The thinking is complete once anything else comes.
                        yield StreamChunk(reasoning=self.reasoning("".join(thinking)))
                        thinking = []
                    if text:
                        yield StreamChunk(content=text)
                    if line.get("done"):
                        final = line
                if final is not None:
                    break
        finally:
            await response.aclose()
        self.check_ended(final is not None, 'the "done" line')
        final = final or {}
        reason = final.get("done_reason")
        calls = self.keep_calls(calls, reason)
        yield StreamChunk(
            tool_calls=tuple(calls), finish_reason=self.finish_reason(reason, calls), usage=self.usage(final)
        )

    def ndjson_decoder(self) -> NDJSONDecoder:
        """The line decoder: it splits on newline bytes and decodes whole lines only."""
        return NDJSONDecoder()
