"""any-llm as the user's backend: ``any_llm.acompletion``, whole and streamed, on each wire it routes to.

any-llm answers in the Chat Completions shape whatever the provider. Its exceptions
come in two modes, and each row names its mode. With ``ANY_LLM_UNIFIED_EXCEPTIONS`` set,
the mode any-llm recommends and says will become the default (its deprecation warning,
any_llm/utils/exception_handler.py), every failure is one of its own classes, keeping
the provider SDK's exception in ``original_exception``: those rows are
``any_llm_unified``'s. Unset, its own classes come only where it raises them and the
provider SDK's exception passes through elsewhere: this module's rows, which run only
the scenarios where an exception is raised (elsewhere the mode changes nothing).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, List, Optional

import any_llm
from any_llm import exceptions as errors

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    LLMError,
    StreamChunk,
    anthropic_wire,
    gemini_wire,
    ollama_wire,
    openai_chat_wire,
)
from conformance._checks._rule import REPLY_SCENARIOS

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
#: With unified exceptions on, also the classes any-llm uses where the SDK's exception has no
#: status it keys (ProviderError: "the provider encounters an internal error", a 5xx, and the
#: class of a failure nothing else matched: a timeout or a broken connection).
UNIFIED_KINDS = (
    *KINDS,
    (errors.ModelNotFoundError, "invalid_request"),
    (errors.ProviderError, "server_error"),
)


def unified_error(wire: str, exc: BaseException) -> Optional[BaseException]:
    """any-llm's unified exception read whole, as every row's is: the provider's answer as the SDK
    under it kept it (``original_exception``, which any-llm documents as public) where it kept
    one, else what its class states (a failure with no status and no body: a cut, a timeout)."""
    if not isinstance(exc, errors.AnyLLMError):
        return None
    original = exc.original_exception
    if original is not None and not isinstance(original, errors.AnyLLMError):
        read = sdk_error(wire, original)
        if isinstance(read, LLMError) and read.details.get("transport") is None:
            return read
    kind = next((k for cls, k in UNIFIED_KINDS if isinstance(exc, cls)), None)
    if kind is None:
        return None
    seconds = None
    if kind == "rate_limit":
        response = getattr(original, "response", None)
        headers = getattr(response, "headers", None) or {}
        seconds = retry_after({str(k).lower(): str(v) for k, v in headers.items()})
    return class_error(wire, kind, str(exc), exc.status_code, seconds)


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
    #: Whether this row runs with ANY_LLM_UNIFIED_EXCEPTIONS set (``any_llm_unified``).
    unified = False
    #: Unset, a transport failure reaches the user as the provider SDK hands it over: judged by
    #: that SDK's rule.
    transport_rule = "openai"

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
        return unified_error(self.wire, exc) if self.unified else any_llm_error(self.wire, exc)

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
    transport_rule = "anthropic"


class GeminiCompletion(Completion):
    wire, provider, path = "gemini", "gemini", ""
    transport_rule = "google-genai"

    def client_args(self) -> Dict[str, Any]:
        return {}


class OllamaCompletion(Completion):
    wire, provider, path = "ollama", "ollama", ""
    transport_rule = "ollama"

    def client_args(self) -> Dict[str, Any]:
        return {}


NOT_MAPPED = "the adapter does not read any-llm's reasoning field yet"


#: The scenarios where no exception is raised, whose verdicts the mode of any-llm's
#: exceptions cannot change: the rows with it unset skip them, the unified rows judge them.
NO_EXCEPTION = (*REPLY_SCENARIOS, "abort", "cancel")
SAME_IN_BOTH_MODES = (
    "no exception is raised here, so ANY_LLM_UNIFIED_EXCEPTIONS changes nothing: the row "
    "with it set (unified exceptions) judges this"
)


def targets(unified: bool = False) -> List[BackendConformanceTarget]:
    """One row per wire, in the mode named: unified exceptions (the recommended) or the provider's."""
    rows = []
    for kind, wire in (
        (Completion, openai_chat_wire),
        (AnthropicCompletion, anthropic_wire),
        (GeminiCompletion, gemini_wire),
        (OllamaCompletion, ollama_wire),
    ):
        if unified:
            fields = {"unified": True, "transport_rule": "any-llm-sdk"}
            kind = type(f"Unified{kind.__name__}", (kind,), fields)
            skip = (
                {"reasoning": NOT_MAPPED, "tool-result:reasoning": NOT_MAPPED}
                if kind.wire == "ollama"
                else {"reasoning": NOT_MAPPED, "tool-result:reasoning-then-call": NOT_MAPPED}
                if kind.wire in ("anthropic", "gemini")
                else {"reasoning": NOT_MAPPED}
            )
        else:
            skip = {scenario: SAME_IN_BOTH_MODES for scenario in NO_EXCEPTION}
        mode = "unified exceptions" if unified else "provider exceptions"
        rows.append(
            BackendConformanceTarget(
                f"any-llm acompletion {kind.provider} ({mode})", wire, kind, skip=skip, client="any-llm-sdk"
            )
        )
    return rows
