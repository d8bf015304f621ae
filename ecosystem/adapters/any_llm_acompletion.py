"""any-llm as the user's backend: ``any_llm.acompletion``, whole and streamed, on each wire it routes to.

any-llm answers in the Chat Completions shape whatever the provider, and raises its
own exception classes, each keeping the provider SDK's exception it came from.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, List, Optional

import any_llm
from any_llm import exceptions as errors

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    StreamChunk,
    anthropic_wire,
    gemini_wire,
    ollama_wire,
    openai_chat_wire,
)

from ._kit import (
    AsyncAdapter,
    class_error,
    openai_chunks,
    openai_messages,
    openai_tools,
    openai_turn,
    retry_after,
    sign_calls,
)

LIBRARY = "any-llm-sdk"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("any-llm-sdk",)

#: any-llm's exception classes, most specific first, as the contract's kinds.
KINDS = (
    (errors.InsufficientFundsError, "quota"),
    (errors.ContextLengthExceededError, "context_overflow"),
    (errors.AuthenticationError, "auth"),
    (errors.RateLimitError, "rate_limit"),
    (errors.ContentFilterError, "content_filter"),
    (errors.GatewayTimeoutError, "server_error"),
    (errors.UpstreamProviderError, "server_error"),
    (errors.InvalidRequestError, "invalid_request"),
)


def any_llm_error(wire: str, exc: BaseException) -> Optional[BaseException]:
    """any-llm's exception as the contract's: its class, and the status and headers of the one it wraps."""
    kind = next((k for cls, k in KINDS if isinstance(exc, cls)), None)
    if kind is None:
        # Where any-llm lets the provider SDK's own exception through, it is read as
        # that SDK's users read it (the official-SDK rows' mapping).
        return sdk_error(wire, exc)
    original = getattr(exc, "original_exception", None)
    response = getattr(original, "response", None)
    status = getattr(exc, "status_code", None) or getattr(original, "status_code", None)
    headers = {str(k).lower(): str(v) for k, v in (getattr(response, "headers", None) or {}).items()}
    seconds = retry_after(headers) if kind == "rate_limit" else None
    return class_error(wire, kind, str(exc), status, seconds)


def sdk_error(wire: str, exc: BaseException) -> Optional[BaseException]:
    from .anthropic_sdk import Messages
    from .google_genai_sdk import genai_error
    from .ollama_sdk import Chat as OllamaChat
    from .openai_sdk import openai_error

    if wire == "anthropic":
        return Messages.error(None, exc)  # type: ignore[arg-type]
    if wire == "gemini":
        return genai_error(wire, exc)
    if wire == "ollama":
        return OllamaChat.error(None, exc)  # type: ignore[arg-type]
    return openai_error(wire, exc)


class Completion(AsyncAdapter):
    wire, provider, path = "openai-chat", "openai", "/v1"

    def __init__(self, url: str) -> None:
        self.base = f"{url}{self.path}"

    def params(self, request: ChatRequest) -> Dict[str, Any]:
        params: Dict[str, Any] = {
            "model": request.model,
            "provider": self.provider,
            "messages": sign_calls(request, openai_messages(request), "extra_content"),
            "api_base": self.base,
            "api_key": "test",
            "client_args": self.client_args(),
        }
        if request.tools:
            params["tools"] = openai_tools(request)
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        return params

    def client_args(self) -> Dict[str, Any]:
        return {"max_retries": 0}

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return any_llm_error(self.wire, exc)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return openai_turn(await any_llm.acompletion(**self.params(request)), "as-given")

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        stream = await any_llm.acompletion(
            **self.params(request), stream=True, stream_options={"include_usage": True}
        )
        async for chunk in openai_chunks(stream, reading="as-given"):
            yield chunk


class AnthropicCompletion(Completion):
    wire, provider, path = "anthropic", "anthropic", ""


class GeminiCompletion(Completion):
    wire, provider, path = "gemini", "gemini", ""

    def client_args(self) -> Dict[str, Any]:
        return {}


class OllamaCompletion(Completion):
    wire, provider, path = "ollama", "ollama", ""

    def client_args(self) -> Dict[str, Any]:
        return {}


NOT_MAPPED = "the adapter does not read any-llm's reasoning field yet"


def targets() -> List[BackendConformanceTarget]:
    return [
        BackendConformanceTarget(
            f"any-llm acompletion {kind.provider}",
            wire,
            kind,
            skip={"reasoning": NOT_MAPPED, "tool-result:reasoning": NOT_MAPPED}
            if kind is OllamaCompletion
            else {"reasoning": NOT_MAPPED, "tool-result:reasoning-then-call": NOT_MAPPED}
            if kind in (AnthropicCompletion, GeminiCompletion)
            else {"reasoning": NOT_MAPPED},
            client="any-llm-sdk",
        )
        for kind, wire in (
            (Completion, openai_chat_wire),
            (AnthropicCompletion, anthropic_wire),
            (GeminiCompletion, gemini_wire),
            (OllamaCompletion, ollama_wire),
        )
    ]
