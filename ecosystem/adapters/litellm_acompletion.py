"""LiteLLM as the user's backend: ``litellm.acompletion``, whole and streamed, on each wire it routes to.

LiteLLM answers in the Chat Completions shape whatever the provider behind it, and
raises its own exceptions (OpenAI's names) carrying the provider's status, headers and
body where it kept them.
"""

from __future__ import annotations

import json
import os

# LiteLLM fetches a model price list from the network at import unless told to use
# the copy it ships; the table reaches nothing but loopback.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from dataclasses import replace  # noqa: E402
from typing import Any, AsyncIterator, Dict, List, Optional  # noqa: E402

import litellm  # noqa: E402

from conformance import (  # noqa: E402
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    Reasoning,
    StreamChunk,
    anthropic_wire,
    gemini_wire,
    ollama_wire,
    openai_chat_wire,
)

from ._kit import (  # noqa: E402
    AsyncAdapter,
    Thoughts,
    class_error,
    openai_chunks,
    openai_messages,
    openai_tools,
    openai_turn,
    public_error,
    sign_calls,
    transport_error,
)
from ._kit import retry_after as seconds  # noqa: E402

LIBRARY = "litellm"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("litellm",)
litellm.telemetry = False


#: LiteLLM's exception classes, most specific first, as the contract's kinds: its documented
#: way to tell failures apart (it raises OpenAI's names whatever the provider).
KINDS = (
    (litellm.exceptions.ContextWindowExceededError, "context_overflow"),
    (litellm.exceptions.PaymentRequiredError, "quota"),
    (litellm.exceptions.BudgetExceededError, "quota"),
    (litellm.exceptions.AuthenticationError, "auth"),
    (litellm.exceptions.PermissionDeniedError, "auth"),
    (litellm.exceptions.RateLimitError, "rate_limit"),
    (litellm.exceptions.ServiceUnavailableError, "overloaded"),
    (litellm.exceptions.InternalServerError, "server_error"),
    (litellm.exceptions.BadGatewayError, "server_error"),
    (litellm.exceptions.ContentPolicyViolationError, "content_filter"),
    (litellm.exceptions.BadRequestError, "invalid_request"),
)


def kind_of(exc: BaseException) -> Optional[str]:
    return next((k for cls, k in KINDS if isinstance(exc, cls)), None)


def litellm_error(wire: str, exc: BaseException) -> Optional[BaseException]:
    """LiteLLM's exception as the contract's error: its class, status and the headers it kept."""
    if isinstance(exc, litellm.exceptions.MidStreamFallbackError) and exc.original_exception is not None:
        # Raised for a failure inside a stream, around the provider's own exception.
        original = exc.original_exception
        body = getattr(original, "body", None)
        if kind_of(original) is None and isinstance(body, dict):  # the provider SDK's own mid-stream error
            inner = body.get("error", body) if isinstance(body.get("error"), dict) else body
            return public_error(wire, status=None, headers={}, body=inner)
        cut = transport_error(original, wire, LIBRARY) if kind_of(original) is None else None
        if cut is not None:
            # A connection error (LiteLLM's APIConnectionError, as for a stream cut or ended
            # before its finish reason): retryable, with the status its user reads on it.
            cut.status = getattr(exc, "status_code", None)
            return cut
        exc = original
    kind = kind_of(exc)
    if kind is None:
        return None
    status = getattr(exc, "status_code", None)
    headers = {
        str(k).lower(): str(v) for k, v in (getattr(exc, "litellm_response_headers", None) or {}).items()
    }
    retry_after = None
    if kind == "rate_limit":
        retry_after = seconds(headers)
    signalled = class_error(wire, kind, str(getattr(exc, "message", exc)), status, retry_after)
    # Read whole, as every row's exception is: the provider's status (LiteLLM keeps it apart
    # from its own in provider_status_code), the headers it kept, and the body it carries.
    provider_status = getattr(exc, "provider_status_code", None) or status
    read = public_error(wire, status=provider_status, headers=headers, body=body_of(exc), signalled=signalled)
    return read if read is not None else signalled


def body_of(exc: BaseException) -> Any:
    """The provider's error body a LiteLLM exception carries: ``body``, else the JSON its message quotes.

    LiteLLM builds its message as ``<Provider>Exception - <the provider's body>``; where it
    kept no ``body`` of its own, that quoted body is the provider's bytes, not wording.
    """
    body = getattr(exc, "body", None)
    if not (isinstance(body, dict) and body):
        body = _quoted_body(str(getattr(exc, "message", "") or ""))
    if isinstance(body, dict) and body and "error" not in body:
        # The openai SDK (whose classes LiteLLM's extend) keeps the inside of {"error": ...}.
        body = {"error": body}
    return body


def _quoted_body(message: str) -> Any:
    """The JSON object a LiteLLM message quotes, also where it quotes it as a bytes literal (b'...')."""
    import ast

    at = message.find("b'{")
    if at >= 0:
        end = message.rfind("'")
        try:
            message = ast.literal_eval(message[at:end + 1]).decode("utf-8", "replace")
        except (ValueError, SyntaxError):
            pass
    start = message.find("{")
    if start < 0:
        return None
    try:
        parsed, _ = json.JSONDecoder().raw_decode(message[start:])
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


class LiteLLMThoughts(Thoughts):
    """LiteLLM's reasoning fields: ``thinking_blocks`` (Anthropic's, signed), else ``reasoning_content``."""

    def __init__(self, wire: str) -> None:
        self.wire, self.blocks, self.text = wire, [], ""

    def add(self, delta: Any) -> None:
        for block in getattr(delta, "thinking_blocks", None) or ():
            block = dict(block)
            if self.blocks and block.get("type") == "thinking" and self.blocks[-1].get("type") == "thinking":
                last = self.blocks[-1]  # a stream's deltas: one block, in pieces
                last["thinking"] = last.get("thinking", "") + (block.get("thinking") or "")
                last["signature"] = (last.get("signature") or "") + (block.get("signature") or "")
            else:
                self.blocks.append(block)
        self.text += getattr(delta, "reasoning_content", None) or ""

    def items(self) -> List[Any]:
        if self.blocks:
            return [
                Reasoning("redacted_thinking", data=b.get("data", ""), provider=self.wire)
                if b.get("type") == "redacted_thinking"
                else Reasoning(
                    "thinking",
                    text=b.get("thinking", ""),
                    signature=b.get("signature") or "",
                    provider=self.wire,
                )
                for b in self.blocks
            ]
        return [Reasoning("thinking", text=self.text, provider=self.wire)] if self.text else []


def with_thoughts(request: ChatRequest, messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The assistant turns with their reasoning in LiteLLM's fields, to be sent back."""
    assistants = [m for m in request.messages if m.role == "assistant"]
    sent = [m for m in messages if m["role"] == "assistant"]
    for message, out in zip(assistants, sent):
        blocks = [
            {"type": "thinking", "thinking": r.text, "signature": r.signature}
            if r.kind == "thinking"
            else {"type": "redacted_thinking", "data": r.data}
            for r in message.reasoning
            if r.kind in ("thinking", "redacted_thinking")
        ]
        if blocks and any(r.signature or r.data for r in message.reasoning):
            out["thinking_blocks"] = blocks
        elif blocks:
            out["reasoning_content"] = "".join(r.text for r in message.reasoning)
    return messages


class Completion(AsyncAdapter):
    #: The wire's name, LiteLLM's provider prefix, and the base URL's path on the fake provider.
    wire = "openai-chat"
    prefix = "openai"
    path = "/v1"

    def __init__(self, url: str) -> None:
        self.base = f"{url}{self.path}"

    def params(self, request: ChatRequest) -> Dict[str, Any]:
        params: Dict[str, Any] = {
            "model": f"{self.prefix}/{request.model}",
            "messages": sign_calls(
                request, with_thoughts(request, openai_messages(request)), "provider_specific_fields"
            ),
            "api_base": self.base,
            "api_key": "test",
            "num_retries": 0,
            "max_retries": 0,
        }
        if request.tools:
            params["tools"] = openai_tools(request)
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        if request.thinking:
            params.update(self.thinking)
        params.update(self.settings)
        return params

    #: How a LiteLLM user asks this provider for its reasoning, where the request asks for it.
    thinking: Dict[str, Any] = {}
    #: What a LiteLLM user sets to reach every shape this provider sends.
    settings: Dict[str, Any] = {}

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return litellm_error(self.wire, exc)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        done = await litellm.acompletion(**self.params(request))
        thoughts = LiteLLMThoughts(self.wire)
        thoughts.add(done.choices[0].message)
        return replace(openai_turn(done, "as-given"), reasoning=tuple(thoughts.items()))

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        stream = await litellm.acompletion(
            **self.params(request), stream=True, stream_options={"include_usage": True}
        )
        async for chunk in openai_chunks(stream, LiteLLMThoughts(self.wire), "as-given"):
            yield chunk


class AnthropicCompletion(Completion):
    wire, prefix, path = "anthropic", "anthropic", ""
    # LiteLLM reads support for thinking from the model's name; the fake's name it does not
    # know, so the parameter is let through as LiteLLM documents (allowed_openai_params).
    thinking = {
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "allowed_openai_params": ["thinking"],
    }
    # Fine-grained tool streaming, which LiteLLM passes on as the beta header.
    settings = {"extra_headers": {"anthropic-beta": "fine-grained-tool-streaming-2025-05-14"}}


class GeminiCompletion(Completion):
    wire, prefix, path = "gemini", "gemini", "/v1beta"


class OllamaCompletion(Completion):
    wire, prefix, path = "ollama", "ollama_chat", ""
    thinking = {"reasoning_effort": "high"}  # LiteLLM sends it to Ollama as think: true


def targets() -> List[BackendConformanceTarget]:
    return [
        BackendConformanceTarget(
            "litellm acompletion openai/", openai_chat_wire, Completion, client="litellm"
        ),
        BackendConformanceTarget(
            "litellm acompletion anthropic/", anthropic_wire, AnthropicCompletion, client="litellm"
        ),
        # LiteLLM reads what a Gemini model supports from its name (a name it does not
        # know gets its system prompt inlined into the user turn): a real model's name.
        BackendConformanceTarget(
            "litellm acompletion gemini/",
            gemini_wire,
            GeminiCompletion,
            model="gemini-2.5-flash",
            skip=dict.fromkeys(
                ("reasoning", "tool-result:reasoning-then-call"),
                "the adapter does not read LiteLLM's Gemini thought signatures yet",
            ),
            client="litellm",
        ),
        BackendConformanceTarget(
            "litellm acompletion ollama_chat/", ollama_wire, OllamaCompletion, client="litellm"
        ),
    ]
