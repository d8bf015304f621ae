"""boto3's ``invoke_model`` and anthropic-python's ``AnthropicBedrock`` against the Bedrock InvokeModel wire.

Two clients, through the conformance mixin:

- ``AnthropicBedrock`` and ``AsyncAnthropicBedrock``: the Anthropic adapters
  (``test_anthropic_sdk``) with the client changed, signed with SigV4 from fake keys
  (``aws_access_key``/``aws_secret_key``, no network but the loopback). The SDK drops
  ``model`` and ``stream`` from the body and picks the operation from them; its
  decoder turns each ``chunk`` frame back into Claude's event, and an exception frame
  into an ``event: error`` (``APIStatusError`` with status 200).
- boto3's ``bedrock-runtime`` client, ``invoke_model`` and
  ``invoke_model_with_response_stream``: the body a user builds (the Messages body,
  ``anthropic_version`` in it), read back as JSON, and the stream's ``chunk`` events'
  ``bytes`` read as Claude's events. botocore speaks HTTP/1.1 only.

A failure is read with the library's :func:`~conformance.provider_error`: Bedrock names
it, in ``x-amzn-ErrorType`` or an exception frame, and says no more.
"""

from __future__ import annotations

import importlib.util
import json
import unittest
from typing import Any, Dict, Iterator, List, Mapping, Optional

from conformance import provider_error
from conformance.contract import (
    ChatRequest,
    ChatResponse,
    LLMError,
    Reasoning,
    ReasoningKind,
    StreamChunk,
    ToolCall,
    Usage,
)
from conformance.testcase import BackendConformanceTestCase
from conformance.wires.bedrock_invoke import bedrock_invoke_wire

from ..test_provider_support import asyncio_debug_off_for_module
from ._support import HTTPX_H2_SKIPS, broken_connection, cut_error, shared_between

HAVE_ANTHROPIC_BEDROCK = all(importlib.util.find_spec(name) is not None for name in ("anthropic", "boto3"))
HAVE_BOTO3 = importlib.util.find_spec("boto3") is not None
ANTHROPIC_SKIP = "anthropic's Bedrock client needs anthropic and boto3: pip install 'anthropic[bedrock]'"
if HAVE_ANTHROPIC_BEDROCK:
    import anthropic

    from .test_anthropic_sdk import STOP_REASONS, AsyncAnthropicBackend, SyncAnthropicBackend, finish, params

    #: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
    setUpModule, tearDownModule = asyncio_debug_off_for_module()
else:  # the adapters need the SDK to be defined at all
    SyncAnthropicBackend = AsyncAnthropicBackend = object  # type: ignore[misc, assignment]
if HAVE_BOTO3:
    from .test_boto3_bedrock import Boto3BedrockBackend, shut_on_abort
else:
    Boto3BedrockBackend = object  # type: ignore[misc, assignment]

HEADERS = {"x-gateway-key": "test"}
#: An inference-profile id: boto3 must percent-encode its ":" in the path, and AnthropicBedrock
#: leaves it as it is.
MODEL = "us.anthropic.conformance-model-v1:0"
#: Fake credentials AnthropicBedrock signs with (SigV4), as boto3 does.
CLIENT = {"aws_region": "us-east-1", "aws_access_key": "AKIDEXAMPLE", "aws_secret_key": "conformance-secret"}


def raises_on_exception_frames() -> bool:
    """Whether the installed ``AnthropicBedrock`` decoder raises a bare ``ValueError`` on an exception
    frame instead of turning it into an ``event: error``.

    anthropic 0.47.0 does (``anthropic/lib/bedrock/_stream_decoder.py``, lines 57-58:
    ``if response_dict["status_code"] != 200: raise ValueError(f"Bad response code, expected
    200: {response_dict}")``); 2.x turns it into an error event. Asked of the decoder itself,
    with one frame, so the answer is the installed release's.
    """
    from anthropic.lib.bedrock._stream_decoder import AWSEventStreamDecoder

    from conformance.wires._aws import exception_frame

    try:
        list(AWSEventStreamDecoder().iter_bytes(iter([exception_frame("throttlingException", "slow down")])))
    except ValueError:
        return True
    return False


FRAME_BREAK = (
    "this anthropic's AnthropicBedrock raises a bare ValueError on an exception frame "
    "(anthropic/lib/bedrock/_stream_decoder.py: 'Bad response code, expected 200'), with no type "
    "or status an adapter could read; anthropic 2.x raises APIStatusError with the frame's name"
)
#: What an adapter over an AnthropicBedrock that cannot read exception frames cannot meet.
FRAME_CASES = (
    "stream-error/stream",
    "rate-limit/stream:throttling-frame",
    "context-overflow/stream:input-too-long-frame",
)
ANTHROPIC_SKIP_CASES = (
    dict.fromkeys(FRAME_CASES, FRAME_BREAK) if HAVE_ANTHROPIC_BEDROCK and raises_on_exception_frames() else {}
)


def bedrock_error(exc: Any) -> LLMError:
    """The contract's error for an ``APIStatusError``: an exception frame (status 200, its name as
    the error's type) or a failure status."""
    if exc.status_code == 200:
        error = exc.body.get("error", {}) if isinstance(exc.body, dict) else {}
        carried = {"__type": error.get("type", ""), "message": error.get("message", "")}
        return provider_error("bedrock-invoke", carried)
    return provider_error("bedrock-invoke", exc.body, status=exc.status_code, headers=exc.response.headers)


class SyncAnthropicBedrockBackend(SyncAnthropicBackend):  # type: ignore[misc, valid-type]
    """A sync backend over ``AnthropicBedrock().messages``."""

    error = staticmethod(bedrock_error)

    def client_for(self, base_url: str, headers: Dict[str, str], http_client: Any) -> Any:
        return anthropic.AnthropicBedrock(
            **CLIENT, base_url=base_url, max_retries=0, default_headers=headers, http_client=http_client
        )


class AsyncAnthropicBedrockBackend(AsyncAnthropicBackend):  # type: ignore[misc, valid-type]
    """An async backend over ``AsyncAnthropicBedrock().messages``."""

    error = staticmethod(bedrock_error)

    def client_for(self, base_url: str, headers: Dict[str, str], http_client: Any) -> Any:
        return anthropic.AsyncAnthropicBedrock(
            **CLIENT, base_url=base_url, max_retries=0, default_headers=headers, http_client=http_client
        )


# -- boto3: invoke_model and invoke_model_with_response_stream ----------------------------------


def thinking(block: Mapping[str, Any]) -> Optional[Reasoning]:
    """The reasoning of a ``thinking`` or ``redacted_thinking`` block."""
    if block.get("type") == "thinking":
        text, signature = str(block.get("thinking", "")), str(block.get("signature", ""))
        return Reasoning(ReasoningKind.THINKING.value, text=text, signature=signature, provider="anthropic")
    if block.get("type") == "redacted_thinking":
        return Reasoning(ReasoningKind.REDACTED_THINKING.value, data=str(block["data"]), provider="anthropic")
    return None


def call_of(block_id: str, name: str, text: str) -> ToolCall:
    """A finished call: its input parsed, or, where it does not parse to an object, its text kept."""
    try:
        arguments = json.loads(text or "{}")
    except ValueError:
        arguments = None
    if isinstance(arguments, dict):
        return ToolCall(block_id, name, arguments)
    return ToolCall(block_id, name, {}, unparsed_arguments=text)


class Boto3InvokeBackend(Boto3BedrockBackend):  # type: ignore[misc, valid-type]
    """A sync backend over boto3's ``invoke_model`` and ``invoke_model_with_response_stream``."""

    @staticmethod
    def invoke_params(request: ChatRequest) -> Dict[str, Any]:
        body = {k: v for k, v in params(request).items() if k != "model"}
        return {
            "modelId": request.model,
            "body": json.dumps({"anthropic_version": "bedrock-2023-05-31", **body}),
        }

    @staticmethod
    def error(exc: Any) -> LLMError:
        """An LLMError from botocore's ClientError, or EventStreamError (an exception frame)."""
        info = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata")
        if meta is None:  # a frame after the 200: its lowerCamel name is the code
            return provider_error(
                "bedrock-invoke", {"__type": info.get("Code", ""), "message": info.get("Message")}
            )
        headers = meta.get("HTTPHeaders", {})
        return provider_error(
            "bedrock-invoke",
            {"message": info.get("Message", "")},
            status=meta["HTTPStatusCode"],
            headers=headers,
        )

    def chat(self, request: ChatRequest) -> ChatResponse:
        from botocore.exceptions import ClientError, IncompleteReadError

        try:
            out = self.client.invoke_model(**self.invoke_params(request))
            raw = out["body"].read()
        except ClientError as exc:
            raise self.error(exc) from exc
        except IncompleteReadError as exc:  # a body cut short of its Content-Length
            raise cut_error(exc, "bedrock") from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "bedrock") from exc
            raise
        message = json.loads(raw)
        text: List[str] = []
        calls: List[ToolCall] = []
        reasoning: List[Reasoning] = []
        for block in message["content"]:
            item = thinking(block)
            if item is not None:
                reasoning.append(item)
            elif block["type"] == "text":
                text.append(block["text"])
            elif block["type"] == "tool_use":
                calls.append(ToolCall(block["id"], block["name"], dict(block["input"])))
        if STOP_REASONS.get(message["stop_reason"]) == "length":
            calls = []  # a call cut off by the token limit is not a call
        usage = message["usage"]
        total = usage["input_tokens"] + usage["output_tokens"]
        return ChatResponse(
            "".join(text),
            finish(message["stop_reason"], calls),
            tuple(calls),
            Usage(usage["input_tokens"], usage["output_tokens"], total),
            tuple(reasoning),
        )

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        from botocore.exceptions import ClientError

        signal = request.signal
        try:
            out = self.client.invoke_model_with_response_stream(**self.invoke_params(request))
        except ClientError as exc:
            raise self.error(exc) from exc
        events = out["body"]

        unregister = shut_on_abort(signal, events)
        blocks: Dict[int, Dict[str, Any]] = {}
        stop_reason: Optional[str] = None
        input_tokens = output_tokens = 0
        stopped = False
        try:
            for frame in events:
                if signal is not None and signal.aborted:
                    break
                event = json.loads(frame["chunk"]["bytes"])
                kind = event["type"]
                if kind == "message_start":
                    input_tokens = event["message"]["usage"]["input_tokens"]
                elif kind == "content_block_start":
                    block = dict(event["content_block"])
                    block["parts"] = [block.get("thinking", "")] if block["type"] == "thinking" else []
                    blocks[event["index"]] = block
                elif kind == "content_block_delta":
                    delta, block = event["delta"], blocks.get(event["index"], {})
                    if delta["type"] == "text_delta":
                        yield StreamChunk(content=delta["text"])
                    elif delta["type"] == "input_json_delta":
                        block["parts"].append(delta["partial_json"])
                    elif delta["type"] == "thinking_delta":
                        block["parts"].append(delta["thinking"])
                    elif delta["type"] == "signature_delta":
                        block["signature"] = block.get("signature", "") + delta["signature"]
                elif kind == "content_block_stop":
                    block = blocks.get(event["index"], {})
                    if block.get("type") == "thinking":  # whole, signature and all, only at its stop
                        block["thinking"] = "".join(block["parts"])
                    item = thinking(block)
                    if item is not None:
                        yield StreamChunk(reasoning=(item,))
                elif kind == "message_delta":
                    stop_reason = event["delta"].get("stop_reason") or stop_reason
                    output_tokens = event["usage"]["output_tokens"]
                    input_tokens = event["usage"].get("input_tokens", input_tokens)
                elif kind == "message_stop":
                    stopped = True
        except ClientError as exc:
            raise self.error(exc) from exc
        except Exception as exc:
            if signal is not None and signal.aborted:
                signal.raise_reason()
            if broken_connection(exc):
                raise cut_error(exc, "bedrock") from exc  # cut before message_stop, or reset
            raise
        finally:
            if callable(unregister):
                unregister()
            events.close()
        if signal is not None and signal.aborted:
            signal.raise_reason()
        if not stopped:
            raise LLMError.from_kind(
                "server_error", "the stream ended before message_stop", provider="bedrock"
            )
        calls = []
        if STOP_REASONS.get(stop_reason or "") != "length":
            calls = [
                call_of(b["id"], b["name"], "".join(b["parts"]))
                for _, b in sorted(blocks.items())
                if b["type"] == "tool_use"
            ]
        usage = Usage(input_tokens, output_tokens, input_tokens + output_tokens)
        yield StreamChunk(tool_calls=tuple(calls), finish_reason=finish(stop_reason, calls), usage=usage)


# -- the targets ----------------------------------------------------------------------------


@unittest.skipUnless(HAVE_ANTHROPIC_BEDROCK, ANTHROPIC_SKIP)
class AnthropicBedrockSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AnthropicBedrock().messages.create`` over HTTP/1.1."""

    wire = bedrock_invoke_wire
    model = MODEL
    headers = HEADERS
    skip = ANTHROPIC_SKIP_CASES

    def create_backend(self, url: str) -> Any:
        return SyncAnthropicBedrockBackend(url, self.headers, http2=self.http2)


@unittest.skipUnless(HAVE_ANTHROPIC_BEDROCK, ANTHROPIC_SKIP)
class AnthropicBedrockAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncAnthropicBedrock().messages.create`` over HTTP/1.1."""

    wire = bedrock_invoke_wire
    model = MODEL
    headers = HEADERS
    skip = ANTHROPIC_SKIP_CASES

    def create_backend(self, url: str) -> Any:
        return AsyncAnthropicBedrockBackend(url, self.headers, http2=self.http2)


@unittest.skipUnless(HAVE_ANTHROPIC_BEDROCK, ANTHROPIC_SKIP)
class AnthropicBedrockAsyncH2CConformance(AnthropicBedrockAsyncConformance):
    """``AsyncAnthropicBedrock().messages.create`` over h2c (httpx with HTTP/2 prior knowledge)."""

    http2 = True
    skip = {**ANTHROPIC_SKIP_CASES, **HTTPX_H2_SKIPS}


@unittest.skipUnless(HAVE_ANTHROPIC_BEDROCK, ANTHROPIC_SKIP)
class AnthropicBedrockFrameBreak(unittest.TestCase):
    """Where the SDK itself breaks a case: an AnthropicBedrock that cannot read an exception frame."""

    def test_an_exception_frame_is_a_bare_value_error(self) -> None:
        """Over anthropic 0.47's decoder, a stream that fails with an exception frame raises ValueError,
        which no adapter can read a kind from: stream-error fails with the SDK's own error."""
        from conformance.cases import BackendConformanceTarget, ConformanceCase

        if not raises_on_exception_frames():
            self.skipTest("the installed anthropic reads exception frames (anthropic 2.x)")
        target = BackendConformanceTarget(
            "frames",
            bedrock_invoke_wire,
            lambda url: SyncAnthropicBedrockBackend(url, HEADERS),
            headers=HEADERS,
        )
        with self.assertRaises(AssertionError) as failed:
            ConformanceCase(target, "stream-error", "stream").run()
        message = str(failed.exception)
        self.assertIn("2 of 2 variants failed", message)
        self.assertIn("ValueError('Bad response code, expected 200", message)


@unittest.skipUnless(HAVE_BOTO3 and HAVE_ANTHROPIC_BEDROCK, "boto3 is not installed: pip install boto3")
class Boto3InvokeConformance(BackendConformanceTestCase, unittest.TestCase):
    """boto3's ``invoke_model`` and ``invoke_model_with_response_stream``, adapted, over HTTP/1.1."""

    wire = bedrock_invoke_wire
    model = MODEL
    headers = HEADERS
    skip = {
        "abort/chat": (
            "boto3 has no way to abort an invoke_model() call still waiting for its response "
            "headers: no cancellation API, and the socket sits inside urllib3's pool"
        ),
    }

    def create_backend(self, url: str) -> Any:
        return Boto3InvokeBackend(url, headers=self.headers)


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    # By default each case runs through the async adapter once, over HTTP/1.1 or h2c in turn.
    if not HAVE_ANTHROPIC_BEDROCK:
        return tests
    return shared_between(tests, ["AnthropicBedrockAsyncConformance", "AnthropicBedrockAsyncH2CConformance"])


if __name__ == "__main__":
    unittest.main()
