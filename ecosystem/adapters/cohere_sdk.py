"""cohere-python as the user's backend: ``AsyncClientV2().chat`` and ``chat_stream``.

What the SDK leaves to its caller, the adapter adds as a careful user would: the SDK
hands ``finish_reason`` on as a string, so ``ERROR`` and ``TIMEOUT`` are raised as the
failures they are; ``tool_plan`` is the turn's reasoning, not its text; a stream that
ends without ``message-end`` ends the SDK's iterator quietly, so the adapter notices.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Dict, List, Optional

import cohere
import httpx
from cohere.core import ApiError

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    Message,
    Reasoning,
    StreamChunk,
    cohere_wire,
)

from ._kit import (
    AsyncAdapter,
    default_retries,
    last_chunk,
    openai_tools,
    public_error,
    response,
    stream_error,
    usage,
)

LIBRARY = "cohere"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("cohere",)

FINISH = {"MAX_TOKENS": "length", "TOOL_CALL": "tool_calls"}


def cohere_message(message: Message) -> Dict[str, Any]:
    """One message as Chat v2 takes it: Cohere's own reasoning goes back, as ``tool_plan`` beside calls."""
    result = message.tool_result
    if result is not None:
        return {"role": "tool", "tool_call_id": result.call_id, "content": result.text}
    thoughts = [r.text for r in message.reasoning if r.kind == "thinking" and r.provider in ("", "cohere")]
    if message.role == "assistant" and message.tool_calls:
        turn: Dict[str, Any] = {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
                }
                for c in message.tool_calls
            ],
        }
        if thoughts:
            turn["tool_plan"] = "".join(thoughts)
        if message.content:
            turn["content"] = [{"type": "text", "text": message.content}]
        return turn
    return {"role": message.role, "content": message.content}


def thinking(text: str) -> Reasoning:
    return Reasoning("thinking", text=text, provider="cohere")


def ended(reason: Optional[str], error: Any = None) -> str:
    """The contract's finish reason, raising where Cohere said the turn failed."""
    if reason in ("ERROR", "TIMEOUT"):
        raise stream_error("cohere", {"finish_reason": reason, "error": error})
    return FINISH.get(reason or "", "stop")


def tokens(used: Any) -> Any:
    counted = getattr(used, "tokens", None)
    return counted and usage(counted.input_tokens, counted.output_tokens)


class Chat(AsyncAdapter):
    wire = "cohere"
    #: The SDK's retries: off, or ``None`` for its default (two; the "(default retries)" row).
    max_retries: Optional[int] = 0

    def __init__(self, url: str) -> None:
        # The client has no close of its own: it is given an httpx client the adapter closes.
        self.http = httpx.AsyncClient(timeout=60.0)
        self.client = cohere.AsyncClientV2(
            api_key="test", base_url=url, max_retries=self.max_retries, httpx_client=self.http
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    def params(self, request: ChatRequest) -> Dict[str, Any]:
        params: Dict[str, Any] = {
            "model": request.model,
            "messages": [cohere_message(m) for m in request.messages],
        }
        if request.tools:
            params["tools"] = openai_tools(request)
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        return params

    def error(self, exc: BaseException) -> Optional[BaseException]:
        if isinstance(exc, ApiError):
            raw = exc.body if isinstance(exc.body, (bytes, str)) else json.dumps(exc.body)
            raw = raw.encode() if isinstance(raw, str) else raw
            headers = dict(exc.headers or {})
            return public_error("cohere", status=int(exc.status_code or 0), headers=headers, body=raw)
        return None

    async def complete(self, request: ChatRequest) -> ChatResponse:
        done = await self.client.chat(**self.params(request))
        message = done.message
        finish = ended(done.finish_reason)
        text = "".join(item.text for item in message.content or () if item.type == "text")
        reasoning = [thinking(item.thinking) for item in message.content or () if item.type == "thinking"]
        if message.tool_plan:
            reasoning.append(thinking(message.tool_plan))
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]
        return response(text, finish, calls, tokens(done.usage), reasoning)

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        calls: Dict[int, List[Any]] = {}
        thoughts: Dict[int, List[str]] = {}
        plan: List[str] = []
        reasoning: List[Reasoning] = []
        end = None
        async for event in self.client.chat_stream(**self.params(request)):
            if event.type == "content-start" and event.delta.message.content.type == "thinking":
                thoughts[event.index] = []
            elif event.type == "content-delta":
                content = event.delta.message.content
                if event.index in thoughts:
                    thoughts[event.index].append(content.thinking or "")
                elif content.text:
                    yield StreamChunk(content.text)
            elif event.type == "content-end" and event.index in thoughts:
                reasoning.append(thinking("".join(thoughts.pop(event.index))))
            elif event.type == "tool-plan-delta":
                plan.append(event.delta.message.tool_plan or "")
            elif event.type == "tool-call-start":
                call = event.delta.message.tool_calls
                calls[event.index] = [call.id, call.function.name, call.function.arguments or ""]
            elif event.type == "tool-call-delta":
                calls[event.index][2] += event.delta.message.tool_calls.function.arguments or ""
            elif event.type == "message-end":
                end = event.delta
        if end is None:
            raise stream_error(
                "cohere", {"finish_reason": "ERROR", "error": "the stream ended before message-end"}
            )
        finish = ended(end.finish_reason, end.error)
        if plan:
            reasoning.insert(0, thinking("".join(plan)))
        yield last_chunk(finish, [tuple(calls[i]) for i in sorted(calls)], tokens(end.usage), reasoning)


class ChatAsShipped(Chat):
    max_retries = None


def targets() -> List[BackendConformanceTarget]:
    chat = BackendConformanceTarget("cohere AsyncClientV2 chat", cohere_wire, Chat, client="cohere")
    return [chat, default_retries(chat, ChatAsShipped)]
