"""The anthropic SDK as the user's backend: ``messages.create`` of ``AsyncAnthropic``, and of
``AsyncAnthropicVertex`` (Claude on Vertex AI) and ``AsyncAnthropicBedrock`` (Bedrock's InvokeModel).

The Vertex and Bedrock rows are the same adapter with the client a user of those clouds
builds in its place, under fake credentials that never leave the loopback: Vertex's an
access token the client sends as a bearer and never refreshes, Bedrock's fake keys it
signs with (SigV4). Each cloud fails in its own shape, which the SDK hands over as an
``APIStatusError`` (status 200 for an error inside a stream that began well).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, List, Optional

import anthropic

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    Reasoning,
    StreamChunk,
    anthropic_vertex_wire,
    anthropic_wire,
    bedrock_invoke_wire,
)

from ._kit import ANTHROPIC_STOP as STOP
from ._kit import (
    AsyncAdapter,
    anthropic_body,
    default_retries,
    last_chunk,
    public_error,
    response,
    stream_error,
    usage,
)

LIBRARY = "anthropic"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("anthropic", "google-auth", "boto3")


def reasoning_of(block: Any) -> Optional[Reasoning]:
    if block.type == "thinking":
        return Reasoning(
            "thinking", text=block.thinking, signature=block.signature or "", provider="anthropic"
        )
    if block.type == "redacted_thinking":
        return Reasoning("redacted_thinking", data=block.data, provider="anthropic")
    return None


def anthropic_error(wire: str, exc: BaseException, carried: Any = None) -> Optional[BaseException]:
    """The SDK's error as the contract's, read as ``wire``'s; ``carried`` rewrites what an error
    inside a stream carried into the shape the kit reads for that wire."""
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        if exc.status_code == 200:  # an `event: error` inside a stream that began well
            error = body.get("error", body)
            return public_error(wire, status=None, headers={}, body=carried(error) if carried else error)
        return public_error(
            wire, status=exc.status_code, headers=exc.response.headers, body=exc.response.content
        )
    return None


class Messages(AsyncAdapter):
    wire = "anthropic"
    #: The SDK's retries: off, or ``None`` for its default (the "(default retries)" row).
    max_retries: Optional[int] = 0

    def __init__(self, url: str) -> None:
        retries = {} if self.max_retries is None else {"max_retries": self.max_retries}
        self.client = anthropic.AsyncAnthropic(base_url=url, api_key="test", **retries)

    async def aclose(self) -> None:
        await self.client.close()

    def params(self, request: ChatRequest) -> Dict[str, Any]:
        return {"model": request.model, **anthropic_body(request)}

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return anthropic_error("anthropic", exc)

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
            )  # read as Anthropic's own error on every wire: no cloud sent it
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


class VertexMessages(Messages):
    wire = "anthropic-vertex"

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return anthropic_error(self.wire, exc)

    def __init__(self, url: str) -> None:
        self.client = anthropic.AsyncAnthropicVertex(
            region="us-east5",
            project_id="conformance-project",
            access_token="ya29.conformance",
            base_url=f"{url}/v1",
            max_retries=0,
        )


class BedrockMessages(Messages):
    wire = "bedrock-invoke"

    def __init__(self, url: str) -> None:
        self.client = anthropic.AsyncAnthropicBedrock(
            aws_region="us-east-1",
            aws_access_key="AKIDEXAMPLE",
            aws_secret_key="conformance-secret",
            base_url=url,
            max_retries=0,
        )

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return anthropic_error(self.wire, exc, exception_frame)


def exception_frame(error: Any) -> Any:
    """Bedrock's exception frame, which the SDK turns into an error event typed with the
    frame's exception name: the kit reads Bedrock's exceptions by that name."""
    error = error if isinstance(error, dict) else {}
    return {"__type": error.get("type", ""), "message": error.get("message", "")}


class MessagesAsShipped(Messages):
    max_retries = None


def targets() -> List[BackendConformanceTarget]:
    messages = BackendConformanceTarget(
        "anthropic AsyncAnthropic messages", anthropic_wire, Messages, client="anthropic"
    )
    return [
        messages,
        default_retries(messages, MessagesAsShipped),
        BackendConformanceTarget(
            "anthropic AsyncAnthropicVertex messages",
            anthropic_vertex_wire,
            VertexMessages,
            model="claude-sonnet-4@20250514",
            client="anthropic",
        ),
        BackendConformanceTarget(
            "anthropic AsyncAnthropicBedrock messages",
            bedrock_invoke_wire,
            BedrockMessages,
            # An inference-profile id, whose ":" the client must leave fit for the path.
            model="us.anthropic.conformance-model-v1:0",
            client="anthropic",
        ),
    ]
