"""boto3's bedrock-runtime client against the Bedrock wire, through the conformance mixin.

The adapter below is what a user's backend over boto3 would be: ``converse`` and
``converse_stream`` pointed at the fake provider with ``endpoint_url``, dummy
credentials, region us-east-1, and exactly one attempt. botocore speaks HTTP/1.1
only (urllib3), so these cases run over HTTP/1.1; h2c is proven with the AWS SDK for
JavaScript in ``test_js_bedrock_h2c``.

A conversation goes back in the shapes of botocore's service model: an assistant turn
is its ``reasoningContent`` blocks (Bedrock's own only, signature as it came), its text,
then a ``toolUse`` block per call; a turn's results go in one user turn of
``toolResult`` blocks, ``status: "error"`` on a ``ToolError``; ``ToolChoice`` is
``toolConfig.toolChoice``. ``redactedContent`` is a blob: botocore hands it over as
bytes and takes bytes back, so the adapter keeps the base64 the wire carries in
``Reasoning.data`` and decodes it again to send it. A reply's reasoning blocks come
back in ``ChatResponse.reasoning``; in a stream each is handed over at its
``contentBlockStop``.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import unittest
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

from conformance.abort import shutdown_socket
from conformance.contract import (
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
from conformance.testcase import BackendConformanceTestCase
from conformance.wires.bedrock import bedrock_converse_wire

from ._roundtrip import AdapterRoundTrip
from ._support import broken_connection, cut_error

HAVE_BOTO3 = importlib.util.find_spec("boto3") is not None

#: Error codes as botocore reports them (``x-amzn-ErrorType`` up to its colon, or the
#: lowerCamel ``:exception-type`` of a mid-stream failure), by the contract's kind.
KINDS: Mapping[str, str] = {
    "ThrottlingException": "rate_limit",
    "ServiceQuotaExceededException": "quota",
    "AccessDeniedException": "auth",
    "UnrecognizedClientException": "auth",
    "ServiceUnavailableException": "overloaded",
    "InternalServerException": "server_error",
    "ModelStreamErrorException": "server_error",
}
STOP_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
}


_SESSIONS: List[Any] = []


# -- the conversation, in botocore's shapes -----------------------------------------------


def reasoning_blocks(reasoning: Sequence[Reasoning]) -> List[Dict[str, Any]]:
    """``ReasoningContentBlock`` members to send back: Bedrock's own (or unmarked) items, unaltered."""
    blocks: List[Dict[str, Any]] = []
    for r in reasoning:
        if r.provider not in ("", "bedrock"):
            continue  # another provider's signature means nothing here
        if str(r.kind) == ReasoningKind.THINKING.value:
            text = {"text": r.text, "signature": r.signature}
            blocks.append({"reasoningContent": {"reasoningText": text}})
        elif str(r.kind) == ReasoningKind.REDACTED_THINKING.value:
            blocks.append({"reasoningContent": {"redactedContent": base64.b64decode(r.data)}})
    return blocks


def assistant_content(message: Message) -> List[Dict[str, Any]]:
    """An assistant turn's blocks: reasoning, text (never blank: Bedrock refuses it), ``toolUse``."""
    content = reasoning_blocks(message.reasoning)
    if message.content or not (content or message.tool_calls):
        content.append({"text": message.content})
    for call in message.tool_calls:
        content.append({"toolUse": {"toolUseId": call.id, "name": call.name, "input": dict(call.arguments)}})
    return content


def messages(conversation: Sequence[Message]) -> List[Dict[str, Any]]:
    """``messages``: consecutive results, and the user's words after them, in one user turn."""
    out: List[Dict[str, Any]] = []
    for m in conversation:
        if m.role == "system":
            continue
        if m.role == "assistant":
            out.append({"role": "assistant", "content": assistant_content(m)})
            continue
        result = m.tool_result
        if result is not None:
            body: Dict[str, Any] = {"toolUseId": result.call_id, "content": [{"text": result.text}]}
            if result.is_error:
                body["status"] = "error"
            block: Dict[str, Any] = {"toolResult": body}
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


def reasoning_of(member: Mapping[str, Any]) -> Optional[Reasoning]:
    """A whole ``reasoningContent`` member as reasoning; the blob back to the wire's base64."""
    if "redactedContent" in member:
        data = base64.b64encode(member["redactedContent"]).decode("ascii")
        return Reasoning(ReasoningKind.REDACTED_THINKING.value, data=data, provider="bedrock")
    text = member.get("reasoningText")
    if text is None:
        return None
    return Reasoning(
        ReasoningKind.THINKING.value,
        text=text.get("text", ""),
        signature=text.get("signature", ""),
        provider="bedrock",
    )


def _session() -> Any:
    """One boto3 session for every case: it loads the service model once, not per client."""
    if not _SESSIONS:
        import boto3

        _SESSIONS.append(boto3.session.Session())
    return _SESSIONS[0]


def shut_on_abort(signal: Any, events: Any) -> Any:
    """Have an abort of ``signal`` shut down the socket ``events`` (a botocore event stream)
    reads from; return what unregisters that, or ``None`` with no signal.

    boto3 has no cancellation. Shutting the socket down from the aborting thread wakes the
    read blocked in the streaming one (closing the file alone would not); botocore keeps
    the urllib3 response in ``_raw_stream``.
    """
    if signal is None:
        return None

    def on_abort(_reason: Any = None) -> None:
        connection = getattr(getattr(events, "_raw_stream", None), "connection", None)
        sock = getattr(connection, "sock", None)
        if sock is not None:
            shutdown_socket(sock)

    return signal.add_callback(on_abort)


class Boto3BedrockBackend:
    """A sync backend over boto3's ``bedrock-runtime`` client: one attempt, no retries."""

    def __init__(self, endpoint_url: str, headers: Optional[Mapping[str, str]] = None) -> None:
        from botocore.config import Config

        self.client = _session().client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=endpoint_url,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="conformance-secret",
            config=Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                # Keeps SigV4 even where AWS_BEARER_TOKEN_BEDROCK is set (bearer needs https).
                signature_version="v4",
                connect_timeout=5,
                read_timeout=10,
            ),
        )
        extra = dict(headers or {})

        def add_headers(request: Any, **_: Any) -> None:
            for name, value in extra.items():
                request.headers[name] = value

        self.client.meta.events.register("before-sign.bedrock-runtime.*", add_headers)

    # -- the request ------------------------------------------------------------------

    @staticmethod
    def params(request: ChatRequest) -> Dict[str, Any]:
        params: Dict[str, Any] = {
            "modelId": request.model,
            "messages": messages(request.messages),
            "system": [{"text": m.content} for m in request.messages if m.role == "system"],
            "toolConfig": {
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
            },
        }
        if request.tool_choice is not None:
            params["toolConfig"]["toolChoice"] = tool_choice(request.tool_choice)
        if request.max_tokens is not None:
            params["inferenceConfig"] = {"maxTokens": request.max_tokens}
        return params

    # -- errors -----------------------------------------------------------------------

    @staticmethod
    def error(exc: Any) -> LLMError:
        """An LLMError from botocore's ClientError (or EventStreamError, its subclass)."""
        info = exc.response.get("Error", {})
        code = str(info.get("Code", ""))
        message = str(info.get("Message", ""))
        name = code[:1].upper() + code[1:]
        kind = KINDS.get(name)
        if kind == "rate_limit" and "per day" in message:
            kind = "quota"
        if name == "ValidationException" and "too long" in message:
            kind = "context_overflow"
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        # Bedrock sends no retry delay; boto3 would expose one as a retry-after header.
        headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        retry_after = float(headers["retry-after"]) if "retry-after" in headers else None
        return LLMError.from_kind(
            kind or "server_error",
            message,
            retry_after=retry_after if kind == "rate_limit" else None,
            status=status,
            provider="bedrock",
        )

    # -- the answer -------------------------------------------------------------------

    @staticmethod
    def finish(stop_reason: Optional[str], calls: List[ToolCall]) -> str:
        reason = STOP_REASONS.get(stop_reason or "", "error")
        if reason in ("length", "content_filter"):
            return reason
        return "tool_calls" if calls else reason

    @staticmethod
    def usage(raw: Mapping[str, Any]) -> Usage:
        return Usage(raw["inputTokens"], raw["outputTokens"], raw["totalTokens"])

    def chat(self, request: ChatRequest) -> ChatResponse:
        from botocore.exceptions import ClientError

        try:
            out = self.client.converse(**self.params(request))
        except ClientError as exc:
            raise self.error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "bedrock") from exc
            raise
        if "output" not in out:
            # A body cut short of its Content-Length comes back from converse() as a
            # response with no output at all: botocore reads the body without checking
            # its length (httpsession.py, enforce_content_length=False) and parses what
            # does not decode as {"message": <the text>} (parsers.py,
            # _parse_body_as_json), which the output shape then drops. Every Converse
            # reply has output and stopReason: without them the answer never came whole.
            raise LLMError.from_kind(
                "server_error",
                "converse() returned no output: the reply's body was cut short",
                provider="bedrock",
                details={"transport": "IncompleteRead"},
            )
        text: List[str] = []
        calls: List[ToolCall] = []
        reasoning: List[Reasoning] = []
        for block in out["output"]["message"]["content"]:
            if "reasoningContent" in block:
                item = reasoning_of(block["reasoningContent"])
                if item is not None:
                    reasoning.append(item)
            elif "text" in block:
                text.append(block["text"])
            elif "toolUse" in block:
                use = block["toolUse"]
                calls.append(ToolCall(use["toolUseId"], use["name"], use["input"]))
        if STOP_REASONS.get(out["stopReason"]) == "length":
            calls = []  # a call cut off by the token limit is not a call
        return ChatResponse(
            "".join(text),
            self.finish(out["stopReason"], calls),
            tuple(calls),
            self.usage(out["usage"]),
            tuple(reasoning),
        )

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        from botocore.exceptions import ClientError

        signal = request.signal
        try:
            out = self.client.converse_stream(**self.params(request))
        except ClientError as exc:
            raise self.error(exc) from exc
        events = out["stream"]

        unregister = shut_on_abort(signal, events)
        starts: Dict[int, Dict[str, Any]] = {}
        #: reasoningContent blocks in progress by index: text parts, signature, redacted bytes.
        thinking: Dict[int, Dict[str, Any]] = {}
        stop_reason, usage, ended = None, None, False
        try:
            for event in events:
                if signal is not None and signal.aborted:
                    break
                if "contentBlockStart" in event:
                    start = event["contentBlockStart"]
                    use = start["start"]["toolUse"]
                    starts[start["contentBlockIndex"]] = {
                        "id": use["toolUseId"],
                        "name": use["name"],
                        "input": [],
                    }
                elif "contentBlockDelta" in event:
                    delta = event["contentBlockDelta"]
                    if "text" in delta["delta"]:
                        yield StreamChunk(content=delta["delta"]["text"])
                    elif "toolUse" in delta["delta"]:
                        starts[delta["contentBlockIndex"]]["input"].append(delta["delta"]["toolUse"]["input"])
                    elif "reasoningContent" in delta["delta"]:
                        part = delta["delta"]["reasoningContent"]
                        block = thinking.setdefault(
                            delta["contentBlockIndex"], {"text": [], "signature": "", "redacted": None}
                        )
                        block["text"].append(part.get("text", ""))
                        block["signature"] += part.get("signature", "")
                        if "redactedContent" in part:
                            block["redacted"] = (block["redacted"] or b"") + part["redactedContent"]
                elif "contentBlockStop" in event:
                    # A reasoning block is whole, signature and all, only at its stop.
                    ended = thinking.pop(event["contentBlockStop"]["contentBlockIndex"], None)
                    if ended is not None:
                        if ended["redacted"] is not None:
                            member: Dict[str, Any] = {"redactedContent": ended["redacted"]}
                        else:
                            member = {
                                "reasoningText": {
                                    "text": "".join(ended["text"]),
                                    "signature": ended["signature"],
                                }
                            }
                        item = reasoning_of(member)
                        if item is not None:
                            yield StreamChunk(reasoning=(item,))
                elif "messageStop" in event:
                    stop_reason = event["messageStop"]["stopReason"]
                elif "metadata" in event:
                    ended = True
                    usage = self.usage(event["metadata"]["usage"])
        except ClientError as exc:
            raise self.error(exc) from exc
        except Exception as exc:
            if signal is not None and signal.aborted:
                signal.raise_reason()
            if broken_connection(exc):
                raise cut_error(exc, "bedrock") from exc  # cut before messageStop, or reset
            raise
        finally:
            if callable(unregister):
                unregister()
            events.close()
        if signal is not None and signal.aborted:
            signal.raise_reason()
        if stop_reason is None or not ended:
            # Only messageStop and the metadata after it say the turn is over: a stream
            # that ends before them was cut, however cleanly its body ended.
            terminal = "messageStop" if stop_reason is None else "metadata"
            raise LLMError.from_kind(
                "server_error", f"the stream ended before {terminal}", provider="bedrock"
            )
        calls = []
        if STOP_REASONS.get(stop_reason or "") != "length":
            for block in starts.values():
                text = "".join(block["input"])
                try:
                    arguments = json.loads(text or "{}")
                except ValueError:
                    arguments = None
                if isinstance(arguments, dict):
                    calls.append(ToolCall(block["id"], block["name"], arguments))
                else:  # the toolUse input fragments as they came: handed on, never run
                    calls.append(ToolCall(block["id"], block["name"], {}, unparsed_arguments=text))
        yield StreamChunk(tool_calls=tuple(calls), finish_reason=self.finish(stop_reason, calls), usage=usage)

    def close(self) -> None:
        self.client.close()


def setUpModule() -> None:
    # The session loads the service model and builds the client class on its first client:
    # a third of a second of CPU, which on a busy two-core machine ran the first case past
    # its bound before it sent anything. Done here, before any case's bound starts.
    if HAVE_BOTO3:
        Boto3BedrockBackend("http://127.0.0.1:9").close()


@unittest.skipUnless(HAVE_BOTO3, "boto3 is not installed: pip install boto3")
class Boto3BedrockConformance(BackendConformanceTestCase, unittest.TestCase):
    """boto3's bedrock-runtime client, adapted, over HTTP/1.1."""

    wire = bedrock_converse_wire
    #: An inference-profile id: botocore must percent-encode its ":" in the path.
    model = "us.anthropic.conformance-model-v1:0"
    headers = {"x-gateway-key": "test"}
    skip = {
        "abort/chat": (
            "boto3 has no way to abort a converse() call still waiting for its response "
            "headers: no cancellation API, and the socket sits inside urllib3's pool"
        ),
    }

    def create_backend(self, url: str) -> Boto3BedrockBackend:
        return Boto3BedrockBackend(url, headers=self.headers)


@unittest.skipUnless(HAVE_BOTO3, "boto3 is not installed: pip install boto3")
class Boto3BedrockRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """Tool choice, reasoning dropped from elsewhere, and reasoning blocks read back, through boto3.

    The redacted block's data goes through botocore as a blob: decoded on the way in,
    encoded again on the way out, the same base64 both ways.
    """

    wire = bedrock_converse_wire
    reply_reasoning = (
        *bedrock_converse_wire.turn_reasoning,
        Reasoning(ReasoningKind.REDACTED_THINKING.value, data="RWtvQ0NrZ0lBeEFCR0FJaQ==", provider="bedrock"),
    )

    def create_backend(self, url: str) -> Boto3BedrockBackend:
        return Boto3BedrockBackend(url)


if __name__ == "__main__":
    unittest.main()
