"""Bedrock InvokeModel (Claude) mutants: the reference backend with one classic bug each.

Claude's events are read by the Anthropic backend's own code, so the bugs of reading
them are the Anthropic zoo's, put in front of this wire's backend; the bugs here are
Bedrock's: its framing, its failures, and the body it refuses.
"""

from __future__ import annotations

import json
from typing import Any, AsyncGenerator, Dict, Tuple

from conformance.contract import ChatRequest, LLMError
from conformance.reference._decoders import EventStreamDecoder
from conformance.reference._transport import Response
from conformance.reference.bedrock_invoke import BedrockInvokeBackend

from . import _common as shared
from ._common import Zoo
from .anthropic import (
    AddsDeltaUsage,
    OpenAIShapedTools,
    SystemAsMessage,
    claude_cut_mutants,
    claude_event_mutants,
)
from .bedrock import FramePerChunkDecoder, _NoCRCDecoder

zoo = Zoo("bedrock-invoke", BedrockInvokeBackend)

STREAM_CASES = (
    "text/stream",
    "tool-call/stream",
    "tool-call-with-stop/stream",
    "truncated-tool-call/stream",
    "content-filter/stream",
)


class QuietOnExceptionFrame(BedrockInvokeBackend):
    """Takes an exception frame for the end of the turn, as if message_stop had come."""

    async def named_events(self, response: Response) -> AsyncGenerator[Tuple[str, str], None]:
        try:
            async for pair in super().named_events(response):
                yield pair
        except LLMError as error:
            if error.status is not None or "error_type" not in error.details:
                raise
            yield "message_stop", json.dumps({"type": "message_stop"})


class FramesPerChunk(BedrockInvokeBackend):
    def decoder(self) -> EventStreamDecoder:
        return FramePerChunkDecoder()


class IgnoresChecksums(BedrockInvokeBackend):
    def decoder(self) -> EventStreamDecoder:
        return _NoCRCDecoder()


class SendsModelInBody(BedrockInvokeBackend):
    """Sends the body as for Anthropic's own API, the model in it."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        return {**super().body(chat, stream), "model": chat.model}


class SendsStreamFlag(BedrockInvokeBackend):
    """Says "stream": true in the body as well as in the path, which Bedrock refuses."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        return {**body, "stream": True} if stream else body


class SendsNoVersion(BedrockInvokeBackend):
    """Leaves anthropic_version out of the body (it went in a header on Anthropic's API)."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        return {k: v for k, v in super().body(chat, stream).items() if k != "anthropic_version"}

    def headers(self, stream: bool) -> Dict[str, str]:
        return {**super().headers(stream), "anthropic-version": "2023-06-01"}


class SendsNoCredentials(BedrockInvokeBackend):
    def headers(self, stream: bool) -> Dict[str, str]:
        return {k: v for k, v in super().headers(stream).items() if k != "authorization"}


MUTANTS = [
    # Its context overflow is a ValidationException, whose name a bad request reads as fairly.
    *zoo.every_wire(leave_out=(shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST,)),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_SERVER_ERROR),
    *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
    *zoo.unparsed(),
    zoo.shared(shared.DROPS_REASONING),
    zoo.shared(shared.DROPS_RETURNED_REASONING),
    zoo.shared(shared.DROPS_TOOL_TURN_REASONING),
    zoo.shared(shared.LOSES_SIGNATURE),
    zoo.shared(shared.THINKING_AS_TEXT),
    zoo.shared(shared.INVENTS_RETRY_AFTER),
    *claude_event_mutants(zoo),
    zoo.mutant(
        "adds-delta-usage",
        "adds message_delta's input_tokens to message_start's",
        AddsDeltaUsage,
        checks=("usage",),
        cases=("text/stream", "tool-call/stream"),
    ),
    zoo.mutant(
        "quiet-on-exception-frame",
        "takes an exception frame for the end of the turn",
        QuietOnExceptionFrame,
        checks=("error-raised",),
        cases=("stream-error/stream", "rate-limit/stream", "context-overflow/stream"),
    ),
    zoo.mutant(
        "frames-per-chunk",
        "takes each network chunk as whole frames",
        FramesPerChunk,
        checks=("reply",),
        cases=STREAM_CASES,
    ),
    zoo.mutant(
        "ignores-checksums",
        "decodes frames without checking their CRCs",
        IgnoresChecksums,
        checks=("corrupt-frame",),
        cases=("corrupt-frame/stream",),
    ),
    zoo.mutant(
        "openai-shaped-tools",
        "sends the tool schema as parameters",
        OpenAIShapedTools,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "system-as-message",
        "sends the system prompt as a system message",
        SystemAsMessage,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "model-in-body",
        "sends the model in the body, which Bedrock refuses",
        SendsModelInBody,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "stream-flag-in-body",
        'sends "stream": true in the body, which Bedrock refuses',
        SendsStreamFlag,
        checks=("request",),
        cases=tuple(c for c in zoo.every_case() if c.endswith("/stream")),
    ),
    zoo.mutant(
        "version-as-header",
        "sends the API version as a header, not anthropic_version in the body",
        SendsNoVersion,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "sends-no-credentials",
        "sends no Authorization header",
        SendsNoCredentials,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    *claude_cut_mutants(zoo),
]
