"""openai-python as the user's backend: ``AsyncOpenAI`` Chat Completions and Responses, and
``AsyncAzureOpenAI`` on the Azure OpenAI wires.

The Azure rows are the same adapters with the client an Azure user builds in their place
(``azure_endpoint``, ``api_key``, ``api_version``; the target's model is the deployment).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, List, Optional

import openai

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    StreamChunk,
    azure_openai_chat_wire,
    azure_openai_responses_wire,
    openai_chat_wire,
    openai_responses_wire,
)

from ._kit import (
    AsyncAdapter,
    default_retries,
    openai_chunks,
    openai_messages,
    openai_tools,
    openai_turn,
    public_error,
    response,
    stream_error,
    usage,
)

LIBRARY = "openai"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("openai",)


def openai_error(wire: str, exc: BaseException) -> Optional[BaseException]:
    """The SDK's error as the contract's: from the status, headers and body it kept."""
    if isinstance(exc, openai.APIStatusError):
        return public_error(
            wire, status=exc.status_code, headers=exc.response.headers, body=exc.response.content
        )
    if isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
        body = exc.body if isinstance(exc.body, dict) else {"message": exc.message}
        inner = body.get("error", body) if isinstance(body.get("error"), dict) else body
        return public_error(wire, status=None, headers={}, body=inner)
    return None


#: The Azure OpenAI data plane's GA version the Azure rows ask for.
AZURE_API_VERSION = "2024-10-21"


def retries(max_retries: Optional[int]) -> Dict[str, Any]:
    """The client's retry setting: none of the SDK's (``max_retries=0``), or, for ``None``,
    the default it ships with (two retries), by leaving the argument out."""
    return {} if max_retries is None else {"max_retries": max_retries}


class Chat(AsyncAdapter):
    wire = "openai-chat"
    #: The SDK's retries: off, or ``None`` for its default (the "(default retries)" rows).
    max_retries: Optional[int] = 0

    def __init__(self, url: str) -> None:
        self.client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="test", **retries(self.max_retries))

    async def aclose(self) -> None:
        await self.client.close()

    def params(self, request: ChatRequest) -> Dict[str, Any]:
        params: Dict[str, Any] = {"model": request.model, "messages": openai_messages(request)}
        if request.tools:
            params["tools"] = openai_tools(request)
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        return params

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return openai_error(self.wire, exc)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return openai_turn(await self.client.chat.completions.create(**self.params(request)))

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        stream = await self.client.chat.completions.create(
            **self.params(request), stream=True, stream_options={"include_usage": True}
        )
        async with stream:
            async for chunk in openai_chunks(stream, wire=self.wire):
                yield chunk


def responses_input(request: ChatRequest) -> List[Dict[str, Any]]:
    items: List[Dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            items.append({"type": "function_call_output", "call_id": result.call_id, "output": result.text})
        elif message.role == "assistant" and message.tool_calls:
            import json

            for reasoning in message.reasoning:
                if reasoning.id:
                    item: Dict[str, Any] = {"type": "reasoning", "id": reasoning.id, "summary": []}
                    item["summary"] = [{"type": "summary_text", "text": t} for t in reasoning.summary]
                    if reasoning.data:
                        item["encrypted_content"] = reasoning.data
                    items.append(item)
            if message.content:
                items.append({"role": "assistant", "content": message.content})
            for c in message.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": json.dumps(dict(c.arguments)),
                    }
                )
        else:
            items.append({"role": message.role, "content": message.content})
    return items


def responses_turn(done: Any) -> ChatResponse:
    """A finished Responses object as a turn."""
    from conformance import Reasoning

    text, calls, reasoning = "", [], []
    for item in done.output:
        if item.type == "message":
            text += "".join(getattr(part, "text", "") for part in item.content if part.type == "output_text")
        elif item.type == "function_call":
            calls.append((item.call_id, item.name, item.arguments))
        elif item.type == "reasoning":
            reasoning.append(
                Reasoning(
                    "reasoning_item",
                    id=item.id,
                    summary=tuple(s.text for s in item.summary or ()),
                    data=getattr(item, "encrypted_content", None) or "",
                    provider="openai-responses",
                )
            )
    finish = "stop"
    if done.status == "incomplete" and done.incomplete_details is not None:
        finish = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(
            done.incomplete_details.reason or "", "stop"
        )
    used = done.usage and usage(done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens)
    return response(text, finish, calls, used, reasoning)


class Responses(Chat):
    wire = "openai-responses"

    def params(self, request: ChatRequest) -> Dict[str, Any]:
        params: Dict[str, Any] = {"model": request.model, "input": responses_input(request)}
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                }
                for t in request.tools
            ]
        if request.max_tokens is not None:
            params["max_output_tokens"] = request.max_tokens
        return params

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return responses_turn(await self.client.responses.create(**self.params(request)))

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        stream = await self.client.responses.create(**self.params(request), stream=True)
        async with stream:
            async for event in stream:
                if event.type == "response.output_text.delta":
                    yield StreamChunk(event.delta)
                elif event.type == "error":
                    raise stream_error(self.wire, {"code": event.code, "message": event.message})
                elif event.type == "response.failed":
                    failure = event.response.error
                    raise stream_error(
                        self.wire,
                        {"code": failure and failure.code, "message": failure and failure.message},
                    )
                elif event.type in ("response.completed", "response.incomplete"):
                    turn = responses_turn(event.response)
                    yield StreamChunk("", turn.tool_calls, turn.finish_reason, turn.usage, turn.reasoning)
                    return
        raise stream_error(self.wire, {"message": "the stream ended before response.completed"})


def azure(url: str) -> openai.AsyncAzureOpenAI:
    return openai.AsyncAzureOpenAI(
        azure_endpoint=url, api_key="test", api_version=AZURE_API_VERSION, max_retries=0
    )


class ChatAsShipped(Chat):
    max_retries = None


class ResponsesAsShipped(Responses):
    max_retries = None


class AzureChat(Chat):
    wire = "azure-openai-chat"

    def __init__(self, url: str) -> None:
        self.client = azure(url)


class AzureResponses(Responses):
    wire = "azure-openai-responses"

    def __init__(self, url: str) -> None:
        self.client = azure(url)


def targets() -> List[BackendConformanceTarget]:
    chat = BackendConformanceTarget(
        "openai AsyncOpenAI chat.completions", openai_chat_wire, Chat, client="openai"
    )
    responses = BackendConformanceTarget(
        "openai AsyncOpenAI responses", openai_responses_wire, Responses, client="openai"
    )
    return [
        chat,
        responses,
        default_retries(chat, ChatAsShipped),
        default_retries(responses, ResponsesAsShipped),
        BackendConformanceTarget(
            "openai AsyncAzureOpenAI chat.completions", azure_openai_chat_wire, AzureChat, client="openai"
        ),
        BackendConformanceTarget(
            "openai AsyncAzureOpenAI responses",
            azure_openai_responses_wire,
            AzureResponses,
            client="openai",
        ),
    ]
