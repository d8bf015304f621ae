"""Gemini mutants: the reference backend with one classic bug each."""

from __future__ import annotations

import json
import uuid
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple

from conformance.contract import ChatRequest, LLMError, StreamChunk, ToolCall, Usage
from conformance.reference.gemini import GeminiBackend

from . import _common as shared
from ._common import Zoo

zoo = Zoo("gemini", GeminiBackend)


class FirstUsageOnly(GeminiBackend):
    """Keeps the usageMetadata of the first event, which counts only the prompt."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.first: Optional[Usage] = None
        async for chunk in super().chat_stream(chat):
            if chunk.finish_reason is not None:
                chunk = StreamChunk(chunk.content, chunk.tool_calls, chunk.finish_reason, self.first)
            yield chunk

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        if getattr(self, "first", None) is None:
            self.first = self.usage(body.get("usageMetadata"))
        return super().read_response(body)


class CallsFromFinalEventOnly(GeminiBackend):
    """Looks for function calls only on the event that carries finishReason."""

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        text, calls, reason = super().read_response(body)
        return text, (calls if reason else []), reason


class MaxTokensAsStop(GeminiBackend):
    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        return super().finish_reason("STOP" if reason == "MAX_TOKENS" else reason, calls)


class IgnoresPromptBlock(GeminiBackend):
    """Reads candidates only, so a blocked prompt (no candidates) looks like a clean stop."""

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        if not body.get("candidates") and "error" not in body:
            return "", [], "STOP"
        return super().read_response(body)


class IgnoresRetryDelay(GeminiBackend):
    def retry_delay(self, error: Mapping[str, Any], headers: Mapping[str, str]) -> Optional[float]:
        return None


class RetryDelayOnRateLimitOnly(GeminiBackend):
    """Reads RetryInfo on a rate limit only, and drops the delay an exhausted quota names."""

    def make_error(self, kind: str, error: Mapping[str, Any], **kwargs: Any) -> LLMError:
        if kind != "rate_limit":
            kwargs["retry_after"] = None
        return super().make_error(kind, error, **kwargs)


class AuthByStatusOnly(GeminiBackend):
    """Looks for 401/403 only; Gemini says a wrong key with a 400 and ErrorInfo."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "auth" and status == 400 else kind


class QuietOnStreamError(GeminiBackend):
    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        if "error" in body:
            return "", [], "STOP"
        return super().read_response(body)


class SystemAsContent(GeminiBackend):
    """Sends the system prompt as a content with role "system", which Gemini refuses."""

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        instruction = body.pop("systemInstruction")
        body["contents"].insert(0, {"role": "system", "parts": instruction["parts"]})
        return body


class ForgetsAltSse(GeminiBackend):
    """Streams without ?alt=sse, and so gets one JSON array instead of events."""

    def url(self, chat: ChatRequest, stream: bool) -> str:
        return super().url(chat, stream).replace("?alt=sse", "")


class MakesUpCallId(GeminiBackend):
    """Gives every call an id of its own, throwing away the one Gemini 3 sent."""

    def tool_call(self, function_call: Mapping[str, Any]) -> Optional[ToolCall]:
        call = super().tool_call(function_call)
        if call is None:
            return None
        return ToolCall(f"call_{uuid.uuid4().hex[:24]}", call.name, call.arguments)


class ReadsContentWhenPresent(GeminiBackend):
    """Reads ``candidate["content"]["parts"]`` whenever ``content`` is there, so an empty one raises."""

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        for candidate in body.get("candidates") or ():
            if isinstance(candidate, dict) and "content" in candidate:
                candidate["content"]["parts"]
        return super().read_response(body)


class IdOnEverySignedCall(GeminiBackend):
    """Takes the id as given on a call with a thoughtSignature, as if every Gemini 3 call had one."""

    signed = False

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        self.signed = "thoughtSignature" in json.dumps(body)
        return super().read_response(body)

    def tool_call(self, function_call: Mapping[str, Any]) -> Optional[ToolCall]:
        call = super().tool_call(function_call)
        if call is not None and self.signed:
            return ToolCall(str(function_call.get("id", "")), call.name, call.arguments)
        return call


class ErrorBodyOnlyAsJson(GeminiBackend):
    """Reads an error body only under a JSON content type, so a streamed request's error
    (sent as text/event-stream) is judged by its status alone."""

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        if "json" not in headers.get("content-type", ""):
            raw = b""
        return super().status_error(status, headers, raw)


class FlushesCallsOnCut(shared.FlushesCallsOnCut, GeminiBackend):
    """Gathers each functionCall as its event arrives, and hands them on when the stream fails."""

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        text, calls, reason = super().read_response(body)
        self.gathered.extend(calls)
        return text, calls, reason

MUTANTS = [
    # A prompt too long is a 400 INVALID_ARGUMENT, which a bad request reads as fairly.
    *zoo.every_wire(leave_out=(shared.CONTEXT_OVERFLOW_AS_BAD_REQUEST,)),
    zoo.shared(shared.CONTEXT_OVERFLOW_AS_SERVER_ERROR),
    *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
    zoo.shared(shared.DROPS_REASONING, "leaves the thought signature off the call it sends back"),
    zoo.shared(shared.DROPS_RETURNED_REASONING),
    zoo.shared(shared.DROPS_TOOL_TURN_REASONING),
    zoo.shared(shared.LOSES_SIGNATURE),
    zoo.shared(shared.THINKING_AS_TEXT),
    zoo.mutant(
        "first-usage-only",
        "keeps the first event's usage, which counts only the prompt",
        FirstUsageOnly,
        checks=("usage",),
        cases=("text/stream", "tool-call/stream", "truncated-tool-call/stream"),
    ),
    zoo.shared(shared.STOP_ON_TOOL_TURN, 'passes "STOP" through on a tool turn'),
    zoo.mutant(
        "makes-up-call-id",
        "replaces the functionCall id Gemini 3 sent with one of its own",
        MakesUpCallId,
        checks=("call-id",),
        cases=("tool-call/chat", "tool-call/stream"),
    ),
    zoo.shared(shared.REQUIRES_CALL_ID, "takes the functionCall id as given, empty on Gemini 2.x"),
    zoo.mutant(
        "calls-from-final-event-only",
        "looks for calls only on the event with finishReason",
        CallsFromFinalEventOnly,
        checks=("finish-reason", "tool-calls"),
        cases=("tool-call/stream",),
    ),
    zoo.mutant(
        "max-tokens-as-stop",
        'calls a turn cut off by MAX_TOKENS "stop"',
        MaxTokensAsStop,
        checks=("finish-reason",),
        cases=("truncated-tool-call/chat", "truncated-tool-call/stream"),
    ),
    zoo.shared(shared.FILTER_AS_STOP, 'calls a SAFETY or blocked turn "stop"'),
    zoo.mutant(
        "ignores-prompt-block",
        "reads candidates only and misses promptFeedback.blockReason",
        IgnoresPromptBlock,
        checks=("finish-reason",),
        cases=("content-filter/chat",),
    ),
    zoo.mutant(
        "ignores-retry-delay",
        "drops RetryInfo.retryDelay",
        IgnoresRetryDelay,
        checks=("retry-after",),
        cases=("rate-limit/chat", "rate-limit/stream"),
    ),
    zoo.mutant(
        "retry-delay-on-rate-limit-only",
        "drops the RetryInfo delay of an exhausted quota",
        RetryDelayOnRateLimitOnly,
        checks=("retry-after",),
        cases=("quota/chat", "quota/stream"),
    ),
    zoo.mutant(
        "auth-by-status-only",
        "misses the 400 API_KEY_INVALID",
        AuthByStatusOnly,
        checks=("error-details", "error-kind"),
        cases=("auth/chat", "auth/stream"),
    ),
    zoo.mutant(
        "quiet-on-stream-error",
        'ends quietly on a data: {"error"} event',
        QuietOnStreamError,
        checks=("error-raised",),
        cases=("stream-error/stream",),
    ),
    zoo.shared(shared.DECODES_PER_CHUNK),
    zoo.mutant(
        "system-as-content",
        'sends the system prompt as a "system" content',
        SystemAsContent,
        checks=("request",),
        cases=zoo.every_case(),
    ),
    zoo.mutant(
        "forgets-alt-sse",
        "streams without ?alt=sse",
        ForgetsAltSse,
        checks=("request",),
        cases=(
            "abort/stream",
            "cancel/stream",
            "rate-limit/stream",
            "quota/stream",
            "auth/stream",
            "overloaded/stream",
            "server-error/stream",
            "context-overflow/stream",
        ),
    ),
    zoo.shared(shared.INVENTS_RETRY_AFTER),
    zoo.mutant(
        "reads-content-when-present",
        'reads candidate["content"]["parts"] whenever content is there, and a blocked {} or a '
        "MAX_TOKENS turn of thoughts only raises",
        ReadsContentWhenPresent,
        checks=("reply",),
        cases=("content-filter/chat", "content-filter/stream", "truncated-tool-call/chat"),
    ),
    zoo.mutant(
        "id-on-every-signed-call",
        "takes the id as given on a call with a thoughtSignature, empty where Gemini 3 sent none",
        IdOnEverySignedCall,
        checks=("call-id",),
        cases=("tool-call/chat", "tool-call/stream"),
    ),
    zoo.mutant(
        "error-body-only-as-json",
        "reads an error body only under a JSON content type, not on a streamed request's error",
        ErrorBodyOnlyAsJson,
        checks=("error-details", "error-kind"),
        # The context overflow's 400 read by its status alone is a bad request: a fair reading.
        cases=("auth/stream",),
    ),
    zoo.shared(shared.TAKES_CUT_FOR_END, checks=('cut-raised', 'cut-finish', 'cut-tool-call')),
    zoo.mutant(
        "flushes-calls-on-cut",
        "hands on the calls it gathered when the stream is cut, before the turn's end said they stand",
        FlushesCallsOnCut,
        checks=("cut-tool-call",),
        cases=("stream-cut/stream",),
    ),
    zoo.shared(shared.DROPS_CALL_REASONING),
]
