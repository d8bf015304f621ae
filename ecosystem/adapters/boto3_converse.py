"""boto3 as the user's backend: the bedrock-runtime client's ``converse`` and ``converse_stream``.

boto3 is synchronous and takes no abort signal or cancellation: the abort cases are
skipped with that reason (the SDK's interop tests reach its socket through botocore's
private fields to abort it, which is no public API).
"""

from __future__ import annotations

import base64
import json
from typing import Any, Dict, Iterator, List

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    LLMError,
    Reasoning,
    StreamChunk,
    bedrock_converse_wire,
)

from ._kit import default_retries, last_chunk, public_error, response, transport_error, usage

LIBRARY = "boto3"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("boto3",)

STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
}


def converse_messages(request: ChatRequest) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            block: Dict[str, Any] = {
                "toolResult": {"toolUseId": result.call_id, "content": [{"text": result.text}]}
            }
            if result.error is not None:
                block["toolResult"]["status"] = "error"
            if out and out[-1]["role"] == "user" and "toolResult" in out[-1]["content"][-1]:
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif message.role == "assistant":
            blocks: List[Dict[str, Any]] = []
            for item in message.reasoning:
                if item.kind == "thinking":
                    text: Dict[str, Any] = {"text": item.text}
                    if item.signature:
                        text["signature"] = item.signature
                    blocks.append({"reasoningContent": {"reasoningText": text}})
                elif item.kind == "redacted_thinking":
                    blocks.append({"reasoningContent": {"redactedContent": base64.b64decode(item.data)}})
            if message.content:
                blocks.append({"text": message.content})
            blocks += [
                {"toolUse": {"toolUseId": c.id, "name": c.name, "input": dict(c.arguments)}}
                for c in message.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks})
        elif message.role == "user":
            out.append({"role": "user", "content": [{"text": message.content}]})
    return out


def bedrock_error(exc: ClientError, wire: str = "bedrock-converse") -> LLMError:
    """botocore's error as the contract's, from the error code and status it kept."""
    info = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code, message = str(info.get("Code", "")), str(info.get("Message", ""))
    if not status:  # an exception event inside the stream
        return public_error(wire, status=None, headers={}, body={"__type": code, "message": message})
    headers = {"x-amzn-errortype": code, **exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})}
    raw = json.dumps({"message": message}).encode()
    return public_error(wire, status=int(status), headers=headers, body=raw)


class Converse:
    #: botocore's retries: one attempt, or ``False`` for the client as it ships (no retry
    #: configuration: the mode and attempts botocore defaults to; the "(default retries)" row).
    one_attempt = True

    def __init__(self, url: str) -> None:
        one = Config(retries={"total_max_attempts": 1, "mode": "standard"})
        config = {"config": one} if self.one_attempt else {}
        self.client = boto3.client(
            "bedrock-runtime",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            **config,
        )

    def close(self) -> None:
        self.client.close()

    def params(self, request: ChatRequest) -> Dict[str, Any]:
        params: Dict[str, Any] = {"modelId": request.model, "messages": converse_messages(request)}
        system = [{"text": m.content} for m in request.messages if m.role == "system"]
        if system:
            params["system"] = system
        if request.tools:
            params["toolConfig"] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": t.name,
                            "description": t.description,
                            "inputSchema": {"json": dict(t.parameters)},
                        }
                    }
                    for t in request.tools
                ]
            }
        if request.max_tokens is not None:
            params["inferenceConfig"] = {"maxTokens": request.max_tokens}
        return params

    def chat(self, request: ChatRequest) -> ChatResponse:
        try:
            out = self.client.converse(**self.params(request))
        except ClientError as exc:
            raise bedrock_error(exc) from exc
        text, calls, reasoning = [], [], []
        for block in out["output"]["message"]["content"]:
            if "text" in block:
                text.append(block["text"])
            elif "toolUse" in block:
                use = block["toolUse"]
                calls.append((use["toolUseId"], use["name"], use.get("input", {})))
            elif "reasoningContent" in block:
                reasoning.append(reasoning_of(block["reasoningContent"]))
        used = out.get("usage", {})
        return response(
            "".join(text),
            STOP.get(out.get("stopReason", ""), "stop"),
            calls,
            usage(used.get("inputTokens"), used.get("outputTokens"), used.get("totalTokens")),
            reasoning,
        )

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        try:
            out = self.client.converse_stream(**self.params(request))
            blocks: Dict[int, Dict[str, Any]] = {}
            # The turn ends with messageStop and then metadata (its usage): a stream that ends
            # without either was cut short, however cleanly it closed.
            finish, used, stopped, metered = "stop", None, False, False
            for event in out["stream"]:
                if "contentBlockStart" in event:
                    start = event["contentBlockStart"]
                    use = start["start"].get("toolUse")
                    if use:
                        blocks[start["contentBlockIndex"]] = {
                            "id": use["toolUseId"],
                            "name": use["name"],
                            "input": "",
                        }
                elif "contentBlockDelta" in event:
                    index, delta = (
                        event["contentBlockDelta"]["contentBlockIndex"],
                        event["contentBlockDelta"]["delta"],
                    )
                    slot = blocks.setdefault(index, {})
                    if "text" in delta:
                        yield StreamChunk(delta["text"])
                    elif "toolUse" in delta:
                        slot["input"] = slot.get("input", "") + delta["toolUse"].get("input", "")
                    elif "reasoningContent" in delta:
                        part = delta["reasoningContent"]
                        slot["thinking"] = slot.get("thinking", "") + part.get("text", "")
                        slot["signature"] = slot.get("signature", "") + part.get("signature", "")
                        if "redactedContent" in part:
                            slot["redacted"] = part["redactedContent"]
                elif "messageStop" in event:
                    finish = STOP.get(event["messageStop"].get("stopReason", ""), "stop")
                    stopped = True
                elif "metadata" in event:
                    metered = True
                    u = event["metadata"].get("usage", {})
                    used = usage(u.get("inputTokens"), u.get("outputTokens"), u.get("totalTokens"))
        except ClientError as exc:
            raise bedrock_error(exc) from exc
        except Exception as exc:
            cut = transport_error(exc, "bedrock-converse", LIBRARY)
            if cut is None:
                raise
            raise cut from exc
        if not (stopped and metered):
            raise LLMError.from_kind(
                "server_error",
                "the stream ended before messageStop and metadata",
                provider="bedrock-converse",
                details={"kind": "server_error"},
            )
        calls, reasoning = [], []
        for _, slot in sorted(blocks.items()):
            if "name" in slot:
                calls.append((slot["id"], slot["name"], slot["input"] or "{}"))
            elif "redacted" in slot:
                reasoning.append(
                    Reasoning(
                        "redacted_thinking",
                        data=base64.b64encode(slot["redacted"]).decode(),
                        provider="bedrock-converse",
                    )
                )
            elif "thinking" in slot or "signature" in slot:
                reasoning.append(
                    Reasoning(
                        "thinking",
                        text=slot.get("thinking", ""),
                        signature=slot.get("signature", ""),
                        provider="bedrock-converse",
                    )
                )
        yield last_chunk(finish, calls, used, reasoning)


def reasoning_of(block: Dict[str, Any]) -> Reasoning:
    if "redactedContent" in block:
        return Reasoning(
            "redacted_thinking",
            data=base64.b64encode(block["redactedContent"]).decode(),
            provider="bedrock-converse",
        )
    text = block.get("reasoningText", {})
    return Reasoning(
        "thinking",
        text=text.get("text", ""),
        signature=text.get("signature", ""),
        provider="bedrock-converse",
    )


NO_ABORT = "boto3's client is synchronous and takes no abort signal; no public API reaches its socket"


class ConverseAsShipped(Converse):
    one_attempt = False


def targets() -> List[BackendConformanceTarget]:
    converse = BackendConformanceTarget(
        "boto3 bedrock-runtime converse",
        bedrock_converse_wire,
        Converse,
        skip={"abort": NO_ABORT},
        client="boto3",
    )
    return [converse, default_retries(converse, ConverseAsShipped)]
