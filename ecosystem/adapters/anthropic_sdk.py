"""The anthropic SDK as the user's backend: ``AsyncAnthropic().messages.create``."""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, List, Optional

import anthropic

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    Reasoning,
    StreamChunk,
    anthropic_wire,
)

from ._kit import AsyncAdapter, last_chunk, response, status_error, stream_error, usage

LIBRARY = "anthropic"
KIND = "backend"

STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}


def anthropic_messages(request: ChatRequest) -> List[Dict[str, Any]]:
    """The conversation as Messages API turns: tool results go back in one user turn."""
    out: List[Dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            block = {"type": "tool_result", "tool_use_id": result.call_id, "content": result.text}
            if result.error is not None:
                block["is_error"] = True
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif message.role == "assistant" and (message.tool_calls or message.reasoning):
            blocks: List[Dict[str, Any]] = []
            for item in message.reasoning:
                if item.kind == "thinking":
                    blocks.append({"type": "thinking", "thinking": item.text, "signature": item.signature})
                elif item.kind == "redacted_thinking":
                    blocks.append({"type": "redacted_thinking", "data": item.data})
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
                for c in message.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks})
        elif message.role != "system":
            out.append({"role": message.role, "content": message.content})
    return out


def reasoning_of(block: Any) -> Optional[Reasoning]:
    if block.type == "thinking":
        return Reasoning(
            "thinking", text=block.thinking, signature=block.signature or "", provider="anthropic"
        )
    if block.type == "redacted_thinking":
        return Reasoning("redacted_thinking", data=block.data, provider="anthropic")
    return None


class Messages(AsyncAdapter):
    def __init__(self, url: str) -> None:
        self.client = anthropic.AsyncAnthropic(base_url=url, api_key="test", max_retries=0)

    async def aclose(self) -> None:
        await self.client.close()

    def params(self, request: ChatRequest) -> Dict[str, Any]:
        params: Dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens or 1024,
            "messages": anthropic_messages(request),
        }
        system = "\n".join(m.content for m in request.messages if m.role == "system")
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
        return params

    def error(self, exc: BaseException) -> Optional[BaseException]:
        if isinstance(exc, anthropic.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            if exc.status_code == 200:  # an `event: error` inside a stream that began well
                return stream_error("anthropic", body.get("error", body))
            return status_error("anthropic", exc.status_code, exc.response.headers, exc.response.content)
        return None

    async def complete(self, request: ChatRequest) -> ChatResponse:
        done = await self.client.messages.create(**self.params(request))
        text = "".join(b.text for b in done.content if b.type == "text")
        calls = [(b.id, b.name, b.input) for b in done.content if b.type == "tool_use"]
        reasoning = [r for r in map(reasoning_of, done.content) if r is not None]
        used = usage(done.usage.input_tokens, done.usage.output_tokens)
        return response(text, STOP.get(done.stop_reason or "", "stop"), calls, used, reasoning)

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        stream = await self.client.messages.create(**self.params(request), stream=True)
        blocks: Dict[int, Dict[str, Any]] = {}
        finish, input_tokens, output_tokens, stopped = "stop", None, None, False
        async with stream:
            async for event in stream:
                if event.type == "message_start":
                    input_tokens = event.message.usage.input_tokens
                    output_tokens = event.message.usage.output_tokens
                elif event.type == "content_block_start":
                    block = event.content_block
                    blocks[event.index] = {
                        "type": block.type,
                        "block": block,
                        "json": "",
                        "text": "",
                        "signature": "",
                    }
                elif event.type == "content_block_delta":
                    slot, delta = blocks[event.index], event.delta
                    if delta.type == "text_delta":
                        yield StreamChunk(delta.text)
                    elif delta.type == "input_json_delta":
                        slot["json"] += delta.partial_json
                    elif delta.type == "thinking_delta":
                        slot["text"] += delta.thinking
                    elif delta.type == "signature_delta":
                        slot["signature"] += delta.signature
                elif event.type == "message_delta":
                    finish = STOP.get(event.delta.stop_reason or "", "stop")
                    output_tokens = event.usage.output_tokens
                elif event.type == "message_stop":
                    stopped = True
        if not stopped:
            raise stream_error(
                "anthropic", {"type": "api_error", "message": "the stream ended before message_stop"}
            )
        calls, reasoning = [], []
        for _, slot in sorted(blocks.items()):
            block = slot["block"]
            if slot["type"] == "tool_use":
                calls.append((block.id, block.name, slot["json"] or "{}"))
            elif slot["type"] == "thinking":
                reasoning.append(
                    Reasoning(
                        "thinking", text=slot["text"], signature=slot["signature"], provider="anthropic"
                    )
                )
            elif slot["type"] == "redacted_thinking":
                reasoning.append(Reasoning("redacted_thinking", data=block.data, provider="anthropic"))
        yield last_chunk(finish, calls, usage(input_tokens, output_tokens), reasoning)


def targets() -> List[BackendConformanceTarget]:
    return [
        BackendConformanceTarget(
            "anthropic AsyncAnthropic messages", anthropic_wire, Messages, client="anthropic"
        )
    ]
