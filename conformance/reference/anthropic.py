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
- A spend limit reached is a 429 too: tell it from a rate limit by
  ``error.details.error_code``, never by the status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional

from ..contract import ChatRequest, ChatResponse, LLMError, StreamChunk, ToolCall, Usage
from ._base import ReferenceBackend
from ._decoders import SSEDecoder
from ._errors import decode_json, status_kind

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
#: Phrases of the 400s that mean the prompt does not fit, or the account is out of credit.
CONTEXT_PHRASES = ("prompt is too long", "exceed context limit", "context window")
CREDIT_PHRASES = ("credit balance is too low",)

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


@dataclass
class _Turn:
    """What the stream said about the whole turn."""

    stop_reason: Optional[str] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    stopped: bool = False
    blocks: Dict[int, _Block] = field(default_factory=dict)


class AnthropicBackend(ReferenceBackend):
    """Talks to ``{base_url}/v1/messages``; ``base_url`` has no ``/v1``, as in the SDK."""

    provider = "anthropic"
    path = "/v1/messages"

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
            "messages": [{"role": m.role, "content": m.content} for m in chat.messages if m.role != "system"],
        }
        if system:
            body["system"] = "\n\n".join(system)
        if chat.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in chat.tools
            ]
        if stream:
            body["stream"] = True
        return body

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
        """The error for a failure status, with ``retry_after`` for a rate limit.

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
            retry_after=self.retry_after(headers) if kind == "rate_limit" else None,
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
        """The tool_use blocks whose input parses; none at all on a turn cut off by the limit."""
        if stop_reason in TRUNCATING_STOP_REASONS:
            return []
        calls = []
        for block in blocks:
            if block.type != "tool_use":
                continue
            try:
                arguments = json.loads("".join(block.parts) or "{}")
            except ValueError:
                continue
            if isinstance(arguments, dict):
                calls.append(ToolCall(block.id, block.name, arguments))
        return calls

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
        text, blocks = [], []
        for raw in body["content"]:
            if not isinstance(raw, dict):
                continue
            if raw.get("type") == "text":
                text.append(str(raw.get("text", "")))
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
        )

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Text deltas as they come, then one last chunk with the calls, reason and usage."""
        response = await self.send(chat, stream=True)
        decoder = self.sse_decoder()
        turn = _Turn()
        try:
            async for data in response:
                for event in decoder.feed(data):
                    text = self.on_event(event.event, event.data, turn)
                    if text:
                        yield StreamChunk(content=text)
                if turn.stopped:
                    break
        finally:
            await response.aclose()
        if not turn.stopped:
            raise self.make_error(
                "server_error", {"message": "the stream ended before message_stop"}, status=None
            )
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
        elif name == "content_block_delta":
            delta = payload.get("delta") or {}
            target = turn.blocks.get(int(payload.get("index", -1)))
            if delta.get("type") == "text_delta":
                return str(delta.get("text", ""))
            if delta.get("type") == "input_json_delta" and target is not None:
                target.parts.append(str(delta.get("partial_json", "")))
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

    def sse_decoder(self) -> SSEDecoder:
        """The event decoder: it splits events on bytes and decodes whole lines only."""
        return SSEDecoder()
