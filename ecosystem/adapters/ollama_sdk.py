"""The ollama SDK as the user's backend: ``ollama.AsyncClient().chat``."""

from __future__ import annotations

import json
import secrets
from typing import Any, AsyncIterator, Dict, List, Optional

import ollama

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    Reasoning,
    StreamChunk,
    ollama_wire,
)

from ._kit import AsyncAdapter, last_chunk, openai_tools, public_error, response, stream_error, usage

LIBRARY = "ollama"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("ollama",)


def ollama_messages(request: ChatRequest) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool" and message.tool_result is not None:
            out.append(
                {"role": "tool", "tool_name": message.tool_result.name, "content": message.tool_result.text}
            )
        elif message.role == "assistant" and message.tool_calls:
            turn: Dict[str, Any] = {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {"function": {"name": c.name, "arguments": dict(c.arguments)}} for c in message.tool_calls
                ],
            }
            thinking = "".join(r.text for r in message.reasoning if r.kind == "thinking")
            if thinking:
                turn["thinking"] = thinking
            out.append(turn)
        else:
            out.append({"role": message.role, "content": message.content})
    return out


class Chat(AsyncAdapter):
    def __init__(self, url: str) -> None:
        self.client = ollama.AsyncClient(host=url)

    async def aclose(self) -> None:
        await self.client.close()

    def params(self, request: ChatRequest) -> Dict[str, Any]:
        params: Dict[str, Any] = {"model": request.model, "messages": ollama_messages(request)}
        if request.tools:
            params["tools"] = openai_tools(request)
        if request.max_tokens is not None:
            params["options"] = {"num_predict": request.max_tokens}
        if request.thinking:
            params["think"] = True
        return params

    def error(self, exc: BaseException) -> Optional[BaseException]:
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code > 0:
                raw = json.dumps({"error": exc.error}).encode()
                return public_error("ollama", status=exc.status_code, headers={}, body=raw)
            return public_error("ollama", status=None, headers={}, body=str(exc.error))
        return None

    @staticmethod
    def calls(message: Any) -> List[Any]:
        # ollama-python's ToolCall has no id: one is made up per call, as its users must.
        return [
            (f"call_{secrets.token_hex(12)}", c.function.name, dict(c.function.arguments))
            for c in message.tool_calls or ()
        ]

    async def complete(self, request: ChatRequest) -> ChatResponse:
        done = await self.client.chat(**self.params(request), stream=False)
        thinking = done.message.thinking
        reasoning = [Reasoning("thinking", text=thinking, provider="ollama")] if thinking else []
        finish = "length" if done.done_reason == "length" else "stop"
        return response(
            done.message.content or "",
            finish,
            self.calls(done.message),
            usage(done.prompt_eval_count, done.eval_count),
            reasoning,
        )

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        stream = await self.client.chat(**self.params(request), stream=True)
        calls: List[Any] = []
        thinking, finished = "", None
        async for part in stream:
            if part.message.content:
                yield StreamChunk(part.message.content)
            thinking += part.message.thinking or ""
            calls += self.calls(part.message)
            if part.done:
                finished = part
        if finished is None:
            raise stream_error("ollama", "the stream ended before done")
        reasoning = [Reasoning("thinking", text=thinking, provider="ollama")] if thinking else []
        finish = "length" if finished.done_reason == "length" else "stop"
        yield last_chunk(finish, calls, usage(finished.prompt_eval_count, finished.eval_count), reasoning)


def targets() -> List[BackendConformanceTarget]:
    return [BackendConformanceTarget("ollama AsyncClient chat", ollama_wire, Chat, client="ollama")]
