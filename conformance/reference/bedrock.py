"""A reference backend for Amazon Bedrock Converse, standard library plus ``h2``.

It is the smallest backend that meets the whole contract on this wire, and so the
plainest account of how to read it:

- Percent-encode the model id in the path: inference-profile ids have ``:`` and
  ARNs have ``/`` too.
- The system prompt is the top-level ``system`` list, never a message; messages are
  ``user`` and ``assistant`` only, their content a list of ``{"text": ...}`` blocks.
- ConverseStream is a binary event stream: feed the bytes to a decoder that checks
  both CRCs and keeps the unfinished tail of a frame for the next read; a frame is
  cut anywhere by TCP, inside its prelude or inside a character of its payload.
- Text blocks have no ``contentBlockStart``; a tool block's input arrives as
  fragments of one JSON string, parsed once at the end of the turn.
- Usage comes in ``metadata``, after ``messageStop``: read to the end of the stream.
- A message with ``:message-type: exception`` is a failure after the 200; its name
  is lowerCamel (``throttlingException``) where the HTTP header has ``ThrottlingException``.
- A ``ThrottlingException`` is a daily quota when its message says "per day": Bedrock
  has no other way to say so. It sends no retry delay either, so none is reported.
- Authentication is a Bedrock API key sent as ``Authorization: Bearer``; a backend
  that signs with SigV4 reads the wire the same way.
- Multi-turn: roles must alternate, user first. An assistant turn goes back as its
  ``reasoningContent`` blocks exactly as they came (signature included), its text,
  then ``toolUse`` blocks whose ``input`` is an object; a turn's results go back
  together in the next user turn, one ``toolResult`` per ``toolUse``, ``status:
  "error"`` on a failure, and the user's next words join that same turn. Reasoning
  from another provider is dropped. A reasoning block streams its text, then its
  signature; it is handed over at its ``contentBlockStop``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence
from urllib.parse import quote

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
from . import _aws
from ._base import ReferenceBackend, call_from_text
from ._decoders import EventStreamDecoder, EventStreamError, EventStreamMessage
from ._errors import decode_json

__all__ = ["BedrockConverseBackend"]

STOP_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
}


@dataclass
class _PartialToolUse:
    """A toolUse block while its input fragments arrive."""

    tool_use_id: str = ""
    name: str = ""
    input: List[str] = field(default_factory=list)
    #: A whole reply's input is already parsed; a stream's is a string to join.
    parsed: Any = None


@dataclass
class _PartialReasoning:
    """A reasoningContent block while its deltas arrive."""

    text: List[str] = field(default_factory=list)
    signature: str = ""
    redacted: str = ""

    def item(self) -> Reasoning:
        if self.redacted:
            return Reasoning(ReasoningKind.REDACTED_THINKING.value, data=self.redacted, provider="bedrock")
        return Reasoning(
            ReasoningKind.THINKING.value,
            text="".join(self.text),
            signature=self.signature,
            provider="bedrock",
        )


def reasoning_of(raw: Any) -> Optional[Reasoning]:
    """The reasoning a whole reply's ``reasoningContent`` member carries, else ``None``."""
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("redactedContent"), str):
        return Reasoning(
            ReasoningKind.REDACTED_THINKING.value, data=raw["redactedContent"], provider="bedrock"
        )
    text = raw.get("reasoningText")
    if isinstance(text, dict):
        return Reasoning(
            ReasoningKind.THINKING.value,
            text=str(text.get("text", "")),
            signature=str(text.get("signature", "")),
            provider="bedrock",
        )
    return None


def reasoning_blocks(reasoning: Sequence[Reasoning]) -> List[Dict[str, Any]]:
    """The reasoningContent blocks to send back: Bedrock's own (or unmarked) items, unaltered."""
    blocks: List[Dict[str, Any]] = []
    for item in reasoning:
        if item.provider not in ("", "bedrock"):
            continue
        if item.kind == ReasoningKind.THINKING:
            text = {"text": item.text, "signature": item.signature}
            blocks.append({"reasoningContent": {"reasoningText": text}})
        elif item.kind == ReasoningKind.REDACTED_THINKING:
            blocks.append({"reasoningContent": {"redactedContent": item.data}})
    return blocks


def assistant_content(m: Message) -> List[Dict[str, Any]]:
    """An assistant turn's blocks: reasoning, text (never blank: Bedrock refuses it), ``toolUse``."""
    content = reasoning_blocks(m.reasoning)
    if m.content or not (content or m.tool_calls):
        content.append({"text": m.content})
    for call in m.tool_calls:
        content.append({"toolUse": {"toolUseId": call.id, "name": call.name, "input": dict(call.arguments)}})
    return content


def messages(chat_messages: Sequence[Message]) -> List[Dict[str, Any]]:
    """The ``messages`` list: consecutive tool results, and the user's words after them, in one user turn."""
    out: List[Dict[str, Any]] = []
    for m in chat_messages:
        if m.role == "system":
            continue
        if m.role == "tool" and m.tool_result is not None:
            result = m.tool_result
            body: Dict[str, Any] = {"toolUseId": result.call_id, "content": [{"text": result.text}]}
            if result.is_error:
                body["status"] = "error"
            block: Dict[str, Any] = {"toolResult": body}
        elif m.role == "assistant":
            out.append({"role": "assistant", "content": assistant_content(m)})
            continue
        else:
            block = {"text": m.content}
        last = out[-1] if out else None
        # Bedrock refuses two user turns in a row: results and words share one.
        if last is not None and last["role"] == "user" and any("toolResult" in b for b in last["content"]):
            last["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})
    return out


def tool_choice(choice: ToolChoice) -> Dict[str, Any]:
    """``{"auto": {}}``, ``{"any": {}}`` or ``{"tool": {"name": ...}}``."""
    if choice.mode == "tool":
        return {"tool": {"name": choice.name}}
    return {"any": {}} if choice.mode == "required" else {"auto": {}}


@dataclass
class _Turn:
    """What a ConverseStream has said so far."""

    tool_uses: Dict[int, _PartialToolUse] = field(default_factory=dict)
    reasoning: Dict[int, _PartialReasoning] = field(default_factory=dict)
    #: A reasoning block that has just ended, to hand over whole.
    finished: Optional[Reasoning] = None
    stop_reason: Optional[str] = None
    usage: Optional[Usage] = None
    #: Whether ``metadata`` came: the stream's last event, after ``messageStop``.
    metadata: bool = False


class BedrockConverseBackend(ReferenceBackend):
    """Talks to ``{base_url}/model/{modelId}/converse`` and ``/converse-stream``."""

    provider = "bedrock"

    # -- the request ------------------------------------------------------------------

    def url(self, chat: ChatRequest, stream: bool) -> str:
        """The operation's URL; ``safe=""`` so that ``:`` and ``/`` in an id are encoded too."""
        operation = "converse-stream" if stream else "converse"
        return f"{self.base_url}/model/{quote(chat.model, safe='')}/{operation}"

    def headers(self, stream: bool) -> Dict[str, str]:
        """Headers of every request: the API key, JSON, and the caller's own."""
        return {
            "authorization": f"Bearer {self.api_key}",
            "content-type": "application/json",
            "accept": "application/vnd.amazon.eventstream" if stream else "application/json",
            **self.extra_headers,
        }

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The Converse request body (the same for ConverseStream)."""
        system = [{"text": m.content} for m in chat.messages if m.role == "system"]
        body: Dict[str, Any] = {"messages": messages(chat.messages)}
        if system:
            body["system"] = system
        if chat.max_tokens is not None:
            body["inferenceConfig"] = {"maxTokens": chat.max_tokens}
        if chat.tools:
            body["toolConfig"] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": t.name,
                            "description": t.description,
                            "inputSchema": {"json": dict(t.parameters)},
                        }
                    }
                    for t in chat.tools
                ]
            }
            if chat.tool_choice is not None:
                body["toolConfig"]["toolChoice"] = tool_choice(chat.tool_choice)
        return body

    # -- errors -----------------------------------------------------------------------

    @staticmethod
    def error_name(headers: Mapping[str, str], body: Any) -> str:
        """The error's name: ``x-amzn-ErrorType`` up to its ``:``, else the body's ``__type``."""
        return _aws.error_name(headers, body)

    def error_kind(self, name: str, message: str, status: Optional[int]) -> str:
        """The contract's kind for a Bedrock error (``status`` is None mid-stream): a daily
        ThrottlingException is a quota, and a ValidationException about the input's length
        a context overflow."""
        return _aws.error_kind(name, message, status)

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        """The error for a failure status.

        Bedrock sends no delay on a throttle; a proxy in front of it might, so
        ``retry_after`` still reads one.
        """
        body = decode_json(raw)
        message = ""
        if isinstance(body, dict):
            message = str(body.get("message") or body.get("Message") or "")
        name = self.error_name(headers, body)
        kind = self.error_kind(name, message, status)
        return self.make_error(
            kind,
            message or f"HTTP {status} {name}".strip(),
            name=name,
            status=status,
            retry_after=self.retry_after(headers),
            request_id=headers.get("x-amzn-requestid"),
        )

    def make_error(
        self,
        kind: str,
        message: str,
        *,
        name: str,
        status: Optional[int],
        retry_after: Optional[float] = None,
        request_id: Optional[str] = None,
    ) -> LLMError:
        """The error a Bedrock error name describes, the name kept as ``details.error_type``."""
        details = {"error_type": name, "request_id": request_id}
        return self.build_error(kind, message, status=status, details=details, retry_after=retry_after)

    # -- the answer -------------------------------------------------------------------

    def finish_reason(self, stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        """The contract's finish reason: tool calls present make a ``tool_calls`` turn."""
        reason = STOP_REASONS.get(stop_reason or "", "stop" if stop_reason is None else "error")
        if reason in ("length", "content_filter"):
            return reason
        return "tool_calls" if calls else reason

    def complete_calls(self, tool_uses: List[_PartialToolUse], stop_reason: Optional[str]) -> List[ToolCall]:
        """The calls, input that is not a JSON object kept as text; none on a turn cut off by the limit."""
        # Converse parses a cut-off call's input leniently ({"city": "Par"}), so only
        # the stop reason tells that the call was never finished.
        if STOP_REASONS.get(stop_reason or "") == "length":
            return []
        calls = []
        for tool_use in tool_uses:
            parsed = tool_use.parsed
            if isinstance(parsed, dict):
                calls.append(ToolCall(tool_use.tool_use_id, tool_use.name, parsed))
                continue
            text = "".join(tool_use.input) if parsed is None else json.dumps(parsed, ensure_ascii=False)
            calls.append(call_from_text(tool_use.tool_use_id, tool_use.name, text))
        return calls

    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        if not isinstance(raw, dict):
            return None
        return Usage(
            input_tokens=int(raw.get("inputTokens", 0)),
            output_tokens=int(raw.get("outputTokens", 0)),
            total_tokens=int(raw.get("totalTokens", 0)),
        )

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        """One whole reply from Converse."""
        response = await self.send(chat, stream=False)
        try:
            body = decode_json(await response.read())
        finally:
            await response.aclose()
        output = body.get("output") if isinstance(body, dict) else None
        message = output.get("message") if isinstance(output, dict) else None
        if not isinstance(message, dict):
            raise self.make_error(
                "server_error", f"no output.message in the reply: {body!r:.200}", name="", status=200
            )
        text, tool_uses, reasoning = [], [], []
        for block in message.get("content") or ():
            if isinstance(block.get("text"), str):
                text.append(block["text"])
            elif "reasoningContent" in block:
                item = reasoning_of(block["reasoningContent"])
                if item is not None:
                    reasoning.append(item)
            elif isinstance(block.get("toolUse"), dict):
                use = block["toolUse"]
                tool_uses.append(
                    _PartialToolUse(
                        str(use.get("toolUseId", "")), str(use.get("name", "")), parsed=use.get("input")
                    )
                )
        stop_reason = body.get("stopReason")
        calls = self.complete_calls(tool_uses, stop_reason)
        return ChatResponse(
            content="".join(text),
            finish_reason=self.finish_reason(stop_reason, calls),
            tool_calls=tuple(calls),
            usage=self.usage(body.get("usage")),
            reasoning=tuple(reasoning),
        )

    def decoder(self) -> EventStreamDecoder:
        """The event-stream decoder; it checks both CRCs of every frame."""
        return EventStreamDecoder()

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Text deltas as they come, then one last chunk with the calls, reason and usage."""
        response = await self.send(chat, stream=True)
        decoder = self.decoder()
        turn = _Turn()
        try:
            async for data in response:
                try:
                    messages = decoder.feed(data)
                except EventStreamError as exc:
                    raise self.make_error(
                        "server_error", f"corrupt event stream: {exc}", name="", status=None
                    ) from exc
                for message in messages:
                    text = self.on_message(message, turn)
                    if text:
                        yield StreamChunk(content=text)
                    if turn.finished is not None:
                        yield StreamChunk(reasoning=(turn.finished,))
                        turn.finished = None
            try:
                decoder.close()
            except EventStreamError as exc:
                raise self.make_error(
                    "server_error", f"the stream was cut: {exc}", name="", status=None
                ) from exc
        finally:
            await response.aclose()
        # messageStop is not the end: metadata comes after it, and a stream that ends
        # between the two (however properly its response ended) was cut.
        ended = turn.stop_reason is not None and turn.metadata
        self.check_ended(ended, "metadata" if turn.stop_reason is not None else "messageStop")
        calls = self.complete_calls([turn.tool_uses[i] for i in sorted(turn.tool_uses)], turn.stop_reason)
        yield StreamChunk(
            tool_calls=tuple(calls),
            finish_reason=self.finish_reason(turn.stop_reason, calls),
            usage=turn.usage,
        )

    def on_message(self, message: EventStreamMessage, turn: _Turn) -> str:
        """Take in one event-stream message: raise its failure, or record its event; return its text."""
        failure = _aws.frame_failure(message)
        if failure is not None:
            name, text = failure
            raise self.make_error(self.error_kind(name, text, None), text, name=name, status=None)
        payload = json.loads(message.payload.decode("utf-8"))
        return self.on_event(str(message.headers.get(":event-type", "")), payload, turn)

    def on_event(self, event_type: str, payload: Mapping[str, Any], turn: _Turn) -> str:
        """Take in one ConverseStream event; return the text it adds."""
        index = int(payload.get("contentBlockIndex", 0))
        if event_type == "contentBlockStart":
            start = (payload.get("start") or {}).get("toolUse")
            if isinstance(start, dict):
                turn.tool_uses[index] = _PartialToolUse(
                    str(start.get("toolUseId", "")), str(start.get("name", ""))
                )
        elif event_type == "contentBlockDelta":
            delta = payload.get("delta") or {}
            if isinstance(delta.get("text"), str):
                return str(delta["text"])
            tool_use = delta.get("toolUse")
            if isinstance(tool_use, dict) and index in turn.tool_uses:
                turn.tool_uses[index].input.append(str(tool_use.get("input", "")))
            thought = delta.get("reasoningContent")
            if isinstance(thought, dict):
                partial = turn.reasoning.setdefault(index, _PartialReasoning())
                partial.text.append(str(thought.get("text", "")))
                partial.signature += str(thought.get("signature", ""))
                partial.redacted += str(thought.get("redactedContent", ""))
        elif event_type == "contentBlockStop":
            if index in turn.reasoning:
                turn.finished = turn.reasoning.pop(index).item()
        elif event_type == "messageStop":
            turn.stop_reason = str(payload.get("stopReason") or "")
        elif event_type == "metadata":
            turn.metadata = True
            turn.usage = self.usage(payload.get("usage"))
        # messageStart carries nothing to keep; unknown events are
        # skipped, as the SDKs skip them.
        return ""
