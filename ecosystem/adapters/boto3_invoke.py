"""boto3 as the user's backend: the bedrock-runtime client's ``invoke_model`` and
``invoke_model_with_response_stream``, with Claude's Messages body.

The body is the one a user builds for Claude on Bedrock (the Messages API's, with
``anthropic_version`` and no ``model``); the reply is read back as Claude's JSON, and each
``chunk`` event's ``bytes`` as one of Claude's stream events. The client is the Converse
adapter's; as there, boto3 takes no abort signal and the abort cases are skipped.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Mapping, Optional

from botocore.exceptions import ClientError

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    LLMError,
    Reasoning,
    StreamChunk,
    bedrock_invoke_wire,
)

from ._kit import ANTHROPIC_STOP, anthropic_body, last_chunk, response, transport_error, usage
from .boto3_converse import NO_ABORT, Converse, bedrock_error

LIBRARY = "boto3"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("boto3",)
WIRE = "bedrock-invoke"


def reasoning_of(block: Mapping[str, Any]) -> Optional[Reasoning]:
    if block.get("type") == "thinking":
        text, signature = str(block.get("thinking", "")), str(block.get("signature", ""))
        return Reasoning("thinking", text=text, signature=signature, provider=WIRE)
    if block.get("type") == "redacted_thinking":
        return Reasoning("redacted_thinking", data=str(block.get("data", "")), provider=WIRE)
    return None


class Invoke(Converse):
    def params(self, request: ChatRequest) -> Dict[str, Any]:
        body = {"anthropic_version": "bedrock-2023-05-31", **anthropic_body(request)}
        return {"modelId": request.model, "body": json.dumps(body)}

    def failed(self, exc: Exception) -> Exception:
        """botocore's error as the contract's, or as it came where it is none the adapter knows."""
        if isinstance(exc, ClientError):
            return bedrock_error(exc, WIRE)
        return transport_error(exc, WIRE, LIBRARY) or exc

    def chat(self, request: ChatRequest) -> ChatResponse:
        try:
            out = self.client.invoke_model(**self.params(request))
            message = json.loads(out["body"].read())
        except Exception as exc:
            mapped = self.failed(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        text, calls, reasoning = [], [], []
        for block in message.get("content") or ():
            item = reasoning_of(block)
            if item is not None:
                reasoning.append(item)
            elif block.get("type") == "text":
                text.append(block["text"])
            elif block.get("type") == "tool_use":
                calls.append((block["id"], block["name"], block.get("input", {})))
        used = message.get("usage") or {}
        return response(
            "".join(text),
            ANTHROPIC_STOP.get(message.get("stop_reason") or "", "stop"),
            calls,
            usage(used.get("input_tokens"), used.get("output_tokens")),
            reasoning,
        )

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        blocks: Dict[int, Dict[str, Any]] = {}
        finish, input_tokens, output_tokens, stopped = "stop", None, None, False
        try:
            out = self.client.invoke_model_with_response_stream(**self.params(request))
            for frame in out["body"]:
                event = json.loads(frame["chunk"]["bytes"])
                kind = event.get("type")
                if kind == "message_start":
                    input_tokens = event["message"]["usage"].get("input_tokens")
                    output_tokens = event["message"]["usage"].get("output_tokens")
                elif kind == "content_block_start":
                    blocks[event["index"]] = {**event["content_block"], "json": ""}
                elif kind == "content_block_delta":
                    slot, delta = blocks.setdefault(event["index"], {"json": ""}), event["delta"]
                    if delta["type"] == "text_delta":
                        yield StreamChunk(delta["text"])
                    elif delta["type"] == "input_json_delta":
                        slot["json"] += delta["partial_json"]
                    elif delta["type"] == "thinking_delta":
                        slot["thinking"] = slot.get("thinking", "") + delta["thinking"]
                    elif delta["type"] == "signature_delta":
                        slot["signature"] = slot.get("signature", "") + delta["signature"]
                elif kind == "message_delta":
                    finish = ANTHROPIC_STOP.get(event["delta"].get("stop_reason") or "", "stop")
                    output_tokens = event["usage"].get("output_tokens", output_tokens)
                    input_tokens = event["usage"].get("input_tokens", input_tokens)
                elif kind == "message_stop":
                    stopped = True
        except Exception as exc:
            mapped = self.failed(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        if not stopped:
            raise LLMError.from_kind(
                "server_error",
                "the stream ended before message_stop",
                provider=WIRE,
                details={"kind": "server_error"},
            )
        calls: List[Any] = []
        reasoning: List[Reasoning] = []
        for _, block in sorted(blocks.items()):
            item = reasoning_of(block)
            if item is not None:
                reasoning.append(item)
            elif block.get("type") == "tool_use":
                calls.append((block["id"], block["name"], block["json"] or "{}"))
        yield last_chunk(finish, calls, usage(input_tokens, output_tokens), reasoning)


def targets() -> List[BackendConformanceTarget]:
    return [
        BackendConformanceTarget(
            "boto3 bedrock-runtime invoke_model",
            bedrock_invoke_wire,
            Invoke,
            # An inference-profile id: the client must percent-encode its ":" in the path.
            model="us.anthropic.conformance-model-v1:0",
            skip={"abort": NO_ABORT},
            client="boto3",
        )
    ]
