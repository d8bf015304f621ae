"""A reference backend for Anthropic Messages, standard library plus ``h2``.

It is the smallest backend that meets the whole contract on this wire, and so the
plainest account of how to read it:

- The base URL has no ``/v1``; the call is ``POST {base}/v1/messages`` with
  ``x-api-key``, ``anthropic-version`` and a ``max_tokens`` the API requires. The
  system prompt goes in the top-level ``system`` field, never as a message.
- ``stop_reason`` says how the turn ended: ``tool_use`` and ``end_turn`` with a
  ``tool_use`` block are both tool turns; ``max_tokens`` means the last block may be
  cut off, so no call of that turn is trusted; ``refusal`` is a refusal.
- Streamed events are told apart by their ``event:`` name. Text arrives as
  ``text_delta``; a call's input as ``input_json_delta`` fragments, complete only at
  the end of the turn. Usage is split: ``input_tokens`` in ``message_start``, the
  final ``output_tokens`` in ``message_delta``.
- ``event: error`` is a failure after the 200 (``overloaded_error``, the twin of a
  529); a stream that ends without ``message_stop`` was cut.
- A usage tier's spend cap is a 429 too: tell it from a rate limit by
  ``error.details.error_code``, never by the status. Out of credit, or at a spend limit
  the organization set, is a 400 ``invalid_request_error`` that only its message tells
  from a bad request: this backend reads the message and says quota, and a backend
  that reports it as a bad request (not retryable) passes too. A subscription's spend
  limit is a plain 429 with a retry-after: a rate limit, as its type says.
- ``pause_turn`` is a turn the API paused in its own server-tool loop: the text came,
  no call is the caller's (a ``server_tool_use`` block is the API's own), so it is
  ``stop`` here (``length``, an unfinished turn, passes too); sending the turn back lets
  it go on.
- Multi-turn: an assistant turn goes back as ``thinking`` / ``redacted_thinking``
  blocks exactly as they came, then its text, then ``tool_use`` blocks whose
  ``input`` is an object; a turn's results go back together in one user turn of
  ``tool_result`` blocks, first in that turn, ``is_error`` on a failure. Reasoning
  from another provider is dropped: its signature means nothing here. A thinking
  block streams its text and then its signature: it is complete, and handed over,
  at its ``content_block_stop``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, AsyncIterator, Dict, List, Mapping, Optional, Sequence, Tuple

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
from ._base import ReferenceBackend, call_from_text
from ._decoders import SSEDecoder
from ._errors import decode_json, status_kind
from ._transport import Response

__all__ = ["AnthropicBackend"]

API_VERSION = "2023-06-01"
#: Anthropic requires max_tokens; this is sent when the caller gives none.
DEFAULT_MAX_TOKENS = 4096

#: error.type -> the contract's kind, before the finer checks of :meth:`error_kind`.
ERROR_TYPES: Mapping[str, str] = {
    "rate_limit_error": "rate_limit",
    "authentication_error": "auth",
    "permission_error": "auth",
    "billing_error": "quota",
    "overloaded_error": "overloaded",
    "api_error": "server_error",
    "timeout_error": "server_error",
}
#: error.details.error_code values of a 429 that waiting does not cure.
QUOTA_ERROR_CODES = frozenset(
    {"enforced_spend_limit_reached", "contract_spend_limit_reached", "ramp_limit_exceeded"}
)
#: Phrases of the 400s that mean the prompt does not fit, or the account is out of credit
#: or at the spend limit it set.
CONTEXT_PHRASES = ("prompt is too long", "exceed context limit", "context window")
CREDIT_PHRASES = ("credit balance is too low", "reached your specified")

STOP_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}
TRUNCATING_STOP_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})


@dataclass
class _Block:
    """One content block as it streams in."""

    type: str
    id: str = ""
    name: str = ""
    parts: List[str] = field(default_factory=list)
    #: A thinking block's signature, or a redacted_thinking block's data.
    signature: str = ""


@dataclass
class _Turn:
    """What the stream said about the whole turn."""

    stop_reason: Optional[str] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    stopped: bool = False
    blocks: Dict[int, _Block] = field(default_factory=dict)
    #: A thinking block that has just ended, to hand over whole.
    finished: Optional[Reasoning] = None


def reasoning_blocks(reasoning: Sequence[Reasoning]) -> List[Dict[str, Any]]:
    """The thinking blocks to send back: Anthropic's own (or unmarked) items, unaltered."""
    blocks: List[Dict[str, Any]] = []
    for item in reasoning:
        if item.provider not in ("", "anthropic"):
            continue
        if item.kind == ReasoningKind.THINKING:
            blocks.append({"type": "thinking", "thinking": item.text, "signature": item.signature})
        elif item.kind == ReasoningKind.REDACTED_THINKING:
            blocks.append({"type": "redacted_thinking", "data": item.data})
    return blocks


def assistant_content(m: Message) -> List[Dict[str, Any]]:
    """An assistant turn's blocks: thinking first, then text, then ``tool_use`` with object input."""
    content = reasoning_blocks(m.reasoning)
    if m.content:
        content.append({"type": "text", "text": m.content})
    for call in m.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)})
    return content


def tool_choice(choice: ToolChoice) -> Dict[str, Any]:
    """``{"type": "auto"}``, ``{"type": "any"}`` or ``{"type": "tool", "name": ...}``."""
    if choice.mode == "tool":
        return {"type": "tool", "name": choice.name}
    return {"type": "any" if choice.mode == "required" else "auto"}


def reasoning_of(block: _Block) -> Optional[Reasoning]:
    """The reasoning a finished thinking or redacted_thinking block carries, else ``None``."""
    if block.type == "thinking":
        return Reasoning(
            ReasoningKind.THINKING.value,
            text="".join(block.parts),
            signature=block.signature,
            provider="anthropic",
        )
    if block.type == "redacted_thinking":
        return Reasoning(ReasoningKind.REDACTED_THINKING.value, data=block.signature, provider="anthropic")
    return None


class AnthropicBackend(ReferenceBackend):
    """Talks to ``{base_url}/v1/messages``; ``base_url`` has no ``/v1``, as in the SDK."""

    provider = "anthropic"
    path = "/v1/messages"
    #: The server tools offered beside the caller's (``{"type": "web_search_20250305",
    #: "name": "web_search"}``): a request that offers one may get a turn the API paused in
    #: its own tool loop (``pause_turn``), which this backend reads as a finished turn.
    server_tools: Tuple[Mapping[str, Any], ...] = ()
    #: Whether each tool asks for fine-grained streaming (``eager_input_streaming``): its
    #: input then streams unvalidated, and may end in JSON that does not parse, which this
    #: backend hands on as ``unparsed_arguments``.
    fine_grained_tool_streaming = True

    # -- the request ------------------------------------------------------------------

    def headers(self, stream: bool) -> Dict[str, str]:
        """Headers of every request: the key, the API version, JSON, and the caller's own."""
        return {
            "x-api-key": self.api_key,
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
            "accept": "application/json",
            **self.extra_headers,
        }

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The Messages request body: the system prompt apart, tools with ``input_schema``."""
        system = [m.content for m in chat.messages if m.role == "system"]
        body: Dict[str, Any] = {
            "model": chat.model,
            "max_tokens": chat.max_tokens if chat.max_tokens is not None else DEFAULT_MAX_TOKENS,
            "messages": self.messages(chat.messages),
        }
        if system:
            body["system"] = "\n\n".join(system)
        tools: List[Dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in chat.tools
        ]
        if self.fine_grained_tool_streaming:
            for tool in tools:
                tool["eager_input_streaming"] = True
        tools += [dict(t) for t in self.server_tools]
        if tools:
            body["tools"] = tools
        if chat.tool_choice is not None:
            body["tool_choice"] = tool_choice(chat.tool_choice)
        if chat.thinking:
            # Thinking blocks come only to a request that turns thinking on; adaptive needs no
            # budget, which would have to be at least 1024 tokens and below max_tokens.
            body["thinking"] = {"type": "adaptive"}
        if stream:
            body["stream"] = True
        return body

    def messages(self, messages: Sequence[Message]) -> List[Dict[str, Any]]:
        """The ``messages`` list: a turn's tool results merged into one user turn, results first."""
        out: List[Dict[str, Any]] = []
        results: List[Dict[str, Any]] = []
        for m in messages:
            if m.role == "system":
                continue
            if m.role == "tool" and m.tool_result is not None:
                result = m.tool_result
                block: Dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": result.call_id,
                    "content": result.text,
                }
                if result.is_error:
                    block["is_error"] = True
                results.append(block)
                continue
            if results:
                turn: Dict[str, Any] = {"role": "user", "content": results}
                out.append(turn)
                results = []
                if m.role == "user":  # the user's words join the results' turn, after them
                    if m.content:
                        turn["content"].append({"type": "text", "text": m.content})
                    continue
            if m.role == "assistant" and (m.tool_calls or m.reasoning):
                out.append({"role": "assistant", "content": assistant_content(m)})
            else:
                out.append({"role": m.role, "content": m.content})
        if results:
            out.append({"role": "user", "content": results})
        return out

    # -- errors -----------------------------------------------------------------------

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        """The contract's kind for an Anthropic error object (``status`` is None mid-stream)."""
        type_ = str(error.get("type") or "")
        message = str(error.get("message") or "").lower()
        details = error.get("details")
        error_code = details.get("error_code") if isinstance(details, dict) else None
        if error_code in QUOTA_ERROR_CODES or any(p in message for p in CREDIT_PHRASES):
            return "quota"
        if type_ == "invalid_request_error" and any(p in message for p in CONTEXT_PHRASES):
            return "context_overflow"
        if status == 529:
            return "overloaded"
        if type_ in ERROR_TYPES:
            return ERROR_TYPES[type_]
        if status is None:
            return "server_error"
        return status_kind(status)

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        """The error for a failure status, with ``retry_after`` the delay the reply carries, if any.

        ``retry_after`` reads ``retry-after`` in seconds (``retry-after-ms`` first,
        where a gateway sends it).
        """
        body = decode_json(raw)
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            error = {"message": f"HTTP {status} with a body that is not an Anthropic error"}
        kind = self.error_kind(status, error)
        return self.make_error(
            kind,
            error,
            status=status,
            retry_after=self.retry_after(headers),
            request_id=headers.get("request-id"),
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
        """The error an Anthropic error object describes; ``details.error_code`` tells spend limits apart."""
        details = {"type": error.get("type"), "request_id": request_id}
        if isinstance(error.get("details"), dict):
            details["error_code"] = error["details"].get("error_code")
        return self.build_error(
            kind, str(error.get("message") or kind), status=status, details=details, retry_after=retry_after
        )

    # -- the answer -------------------------------------------------------------------

    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        """The contract's finish reason: a ``tool_use`` block makes a tool turn, whatever it said."""
        if stop_reason in TRUNCATING_STOP_REASONS:
            return "length"
        if stop_reason == "refusal":
            return "refusal"
        if calls:
            return "tool_calls"
        return STOP_REASONS.get(stop_reason or "", "stop" if stop_reason is None else "error")

    def complete_calls(self, blocks: List[_Block], stop_reason: Optional[str]) -> List[ToolCall]:
        """The tool_use blocks, input that is not an object kept as text; none on a length turn."""
        if stop_reason in TRUNCATING_STOP_REASONS:
            return []
        return [call_from_text(b.id, b.name, "".join(b.parts)) for b in blocks if b.type == "tool_use"]

    @staticmethod
    def usage(input_tokens: Optional[int], output_tokens: Optional[int]) -> Optional[Usage]:
        if input_tokens is None and output_tokens is None:
            return None
        inp, out = int(input_tokens or 0), int(output_tokens or 0)
        return Usage(input_tokens=inp, output_tokens=out, total_tokens=inp + out)

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        """One whole reply."""
        response = await self.send(chat, stream=False)
        body = decode_json(await response.read())
        if not isinstance(body, dict) or not isinstance(body.get("content"), list):
            raise self.make_error(
                "server_error", {"message": f"no content in the reply: {body!r:.200}"}, status=200
            )
        stop_reason = body.get("stop_reason")
        text, blocks, reasoning = [], [], []
        for raw in body["content"]:
            if not isinstance(raw, dict):
                continue
            if raw.get("type") == "text":
                text.append(str(raw.get("text", "")))
            elif raw.get("type") in ("thinking", "redacted_thinking"):
                thought = _Block(str(raw["type"]), parts=[str(raw.get("thinking", ""))])
                thought.signature = str(raw.get("signature", raw.get("data", "")))
                item = reasoning_of(thought)
                if item is not None:
                    reasoning.append(item)
            elif raw.get("type") == "tool_use":
                # A whole reply carries input as an object; one JSON text keeps one code path.
                arguments = json.dumps(raw.get("input", {}))
                blocks.append(
                    _Block("tool_use", str(raw.get("id", "")), str(raw.get("name", "")), [arguments])
                )
        calls = self.complete_calls(blocks, stop_reason)
        raw_usage = body.get("usage")
        usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        return ChatResponse(
            content="".join(text),
            finish_reason=self.finish_reason(stop_reason, calls),
            tool_calls=tuple(calls),
            usage=self.usage(usage.get("input_tokens"), usage.get("output_tokens")),
            reasoning=tuple(reasoning),
        )

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Text deltas as they come, then one last chunk with the calls, reason and usage."""
        response = await self.send(chat, stream=True)
        turn = _Turn()
        events = self.named_events(response)
        try:
            async for name, data in events:
                text = self.on_event(name, data, turn)
                if text:
                    yield StreamChunk(content=text)
                if turn.finished is not None:
                    yield StreamChunk(reasoning=(turn.finished,))
                    turn.finished = None
                if turn.stopped:
                    break
        finally:
            await events.aclose()
            await response.aclose()
        self.check_ended(turn.stopped, "message_stop")
        blocks = [turn.blocks[i] for i in sorted(turn.blocks)]
        calls = self.complete_calls(blocks, turn.stop_reason)
        yield StreamChunk(
            tool_calls=tuple(calls),
            finish_reason=self.finish_reason(turn.stop_reason, calls),
            usage=self.usage(turn.input_tokens, turn.output_tokens),
        )

    def on_event(self, name: str, data: str, turn: _Turn) -> str:
        """Take in one named event: raise its error, gather blocks and usage, return its text."""
        if name in ("ping", "message"):  # a keep-alive; an unnamed event is not Anthropic's
            return ""
        payload = json.loads(data) if data else {}
        if not isinstance(payload, dict):
            return ""
        if name == "error":
            nested = payload.get("error")
            error: Mapping[str, Any] = nested if isinstance(nested, dict) else payload
            raise self.make_error(self.error_kind(None, error), error, status=None)
        if name == "message_start":
            usage = (payload.get("message") or {}).get("usage") or {}
            turn.input_tokens = usage.get("input_tokens", turn.input_tokens)
            turn.output_tokens = usage.get("output_tokens", turn.output_tokens)
        elif name == "content_block_start":
            raw = payload.get("content_block") or {}
            block = _Block(str(raw.get("type", "")), str(raw.get("id", "")), str(raw.get("name", "")))
            turn.blocks[int(payload.get("index", len(turn.blocks)))] = block
            if block.type == "text" and raw.get("text"):
                return str(raw["text"])
            if block.type == "thinking":
                block.parts.append(str(raw.get("thinking") or ""))
                block.signature = str(raw.get("signature") or "")
            elif block.type == "redacted_thinking":
                block.signature = str(raw.get("data") or "")
        elif name == "content_block_delta":
            delta = payload.get("delta") or {}
            target = turn.blocks.get(int(payload.get("index", -1)))
            if delta.get("type") == "text_delta":
                return str(delta.get("text", ""))
            if delta.get("type") == "input_json_delta" and target is not None:
                target.parts.append(str(delta.get("partial_json", "")))
            elif delta.get("type") == "thinking_delta" and target is not None:
                target.parts.append(str(delta.get("thinking", "")))
            elif delta.get("type") == "signature_delta" and target is not None:
                target.signature += str(delta.get("signature", ""))
        elif name == "content_block_stop":
            target = turn.blocks.get(int(payload.get("index", -1)))
            if target is not None:
                turn.finished = reasoning_of(target)
        elif name == "message_delta":
            turn.stop_reason = (payload.get("delta") or {}).get("stop_reason") or turn.stop_reason
            # message_delta usage is cumulative: it replaces, it does not add.
            usage = payload.get("usage") or {}
            turn.output_tokens = usage.get("output_tokens", turn.output_tokens)
            if usage.get("input_tokens") is not None:
                turn.input_tokens = usage["input_tokens"]
        elif name == "message_stop":
            turn.stopped = True
        return ""

    async def named_events(self, response: Response) -> AsyncGenerator[Tuple[str, str], None]:
        """Each event of the stream, as its name and its JSON text: SSE, named by ``event:``.

        A host that frames the same events its own way (Bedrock's event stream) reads them
        here, and the rest of the backend stays the same.
        """
        decoder = self.sse_decoder()
        async for data in response:
            for event in decoder.feed(data):
                yield event.event, event.data

    def sse_decoder(self) -> SSEDecoder:
        """The event decoder: it splits events on bytes and decodes whole lines only."""
        return SSEDecoder()
