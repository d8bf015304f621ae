"""Reference backends: one small backend per wire that meets the whole contract.

They prove the contract can be met, they are what ``python -m conformance`` runs by
default, and each module is the plainest account of how to read its wire.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Union

from . import _aws
from .anthropic import AnthropicBackend
from .anthropic_vertex import AnthropicVertexBackend
from .azure_openai import AzureOpenAIChatBackend, AzureOpenAIResponsesBackend
from .bedrock import BedrockConverseBackend
from .bedrock_invoke import BedrockInvokeBackend
from .cohere import CohereBackend
from .gemini import GeminiBackend
from .gemini_vertex import GeminiVertexBackend
from .ollama import OllamaBackend
from .openai_chat import OpenAIChatBackend
from .openai_responses import OpenAIResponsesBackend

if TYPE_CHECKING:
    from ..contract import LLMError
    from ..wires._base import Wire

__all__ = [
    "REFERENCE_BACKENDS",
    "REFERENCE_READ_TIMEOUT",
    "AnthropicBackend",
    "AnthropicVertexBackend",
    "AzureOpenAIChatBackend",
    "AzureOpenAIResponsesBackend",
    "BedrockConverseBackend",
    "BedrockInvokeBackend",
    "CohereBackend",
    "GeminiBackend",
    "GeminiVertexBackend",
    "OllamaBackend",
    "OpenAIChatBackend",
    "OpenAIResponsesBackend",
    "provider_error",
]


def _openai_chat(url: str, http2: bool) -> Any:
    return OpenAIChatBackend(f"{url}/v1", http2=http2)


def _openai_responses(url: str, http2: bool) -> Any:
    return OpenAIResponsesBackend(f"{url}/v1", http2=http2)


def _azure_openai_chat(url: str, http2: bool) -> Any:
    # Azure's base URL is the resource's endpoint: the path names /openai and the deployment.
    return AzureOpenAIChatBackend(url, http2=http2)


def _azure_openai_responses(url: str, http2: bool) -> Any:
    return AzureOpenAIResponsesBackend(url, http2=http2)


def _anthropic(url: str, http2: bool) -> Any:
    # The anthropic SDK's base URL has no /v1: the client adds it.
    return AnthropicBackend(url, http2=http2)


def _anthropic_vertex(url: str, http2: bool) -> Any:
    # The anthropic SDK's AnthropicVertex takes a base URL that ends in /v1.
    return AnthropicVertexBackend(f"{url}/v1", http2=http2)


def _gemini(url: str, http2: bool) -> Any:
    return GeminiBackend(url, http2=http2)


def _gemini_vertex(url: str, http2: bool) -> Any:
    return GeminiVertexBackend(url, http2=http2)


def _ollama(url: str, http2: bool) -> Any:
    return OllamaBackend(url, http2=http2)


def _bedrock(url: str, http2: bool) -> Any:
    return BedrockConverseBackend(url, http2=http2)


def _cohere(url: str, http2: bool) -> Any:
    # cohere-python's base URL has no version: the client adds /v2.
    return CohereBackend(url, http2=http2)


def _bedrock_invoke(url: str, http2: bool) -> Any:
    return BedrockInvokeBackend(url, http2=http2)


#: The read timeout (seconds) the command line's reference targets declare and give their
#: backends: short, so that the latency cases, whose silence is scaled from it, stay quick;
#: long beside what any other case keeps the provider silent for (an abort's quarter second).
REFERENCE_READ_TIMEOUT = 0.5

#: By wire name: ``create(provider_url, http2)`` builds the reference backend.
REFERENCE_BACKENDS: Dict[str, Callable[[str, bool], Any]] = {
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
    "azure-openai-chat": _azure_openai_chat,
    "azure-openai-responses": _azure_openai_responses,
    "anthropic": _anthropic,
    "anthropic-vertex": _anthropic_vertex,
    "gemini": _gemini,
    "gemini-vertex": _gemini_vertex,
    "ollama": _ollama,
    "bedrock-converse": _bedrock,
    "bedrock-invoke": _bedrock_invoke,
    "cohere": _cohere,
}


def provider_error(
    wire: Union[str, Wire],
    error: Any,
    *,
    status: Optional[int] = None,
    headers: Optional[Mapping[str, str]] = None,
) -> LLMError:
    """The contract's error for a provider's failure, read as ``wire``'s reference backend reads it.

    With ``status``, the failure was an HTTP reply: ``error`` is its body (bytes, text,
    or the decoded JSON) and ``headers`` its headers (``retry-after`` and the like).
    Without, the failure came inside a stream that began well: ``error`` is what the
    stream carried, the error object (OpenAI, Anthropic and Claude on Vertex, Gemini),
    Ollama's error text, Bedrock's exception (Converse's, and InvokeModel's) as
    ``{"__type": name, "message": text}``, or Cohere's ``message-end`` that said ``ERROR``
    or ``TIMEOUT`` (or its ``delta``). For an adapter over a library that surfaces what the
    provider sent but not what it means.
    """
    name = wire if isinstance(wire, str) else wire.name
    if name not in REFERENCE_BACKENDS:
        known = ", ".join(REFERENCE_BACKENDS)
        raise ValueError(f"provider_error: no reference backend reads wire {name!r}; use one of: {known}")
    # Built only to read errors: it never connects.
    reader = REFERENCE_BACKENDS[name]("http://127.0.0.1:9", False)
    if status is not None:
        if isinstance(error, (bytes, bytearray)):
            raw = bytes(error)
        elif isinstance(error, str):
            raw = error.encode("utf-8")
        else:
            raw = json.dumps(error).encode("utf-8") if error is not None else b""
        lowered = {str(k).lower(): str(v) for k, v in (headers or {}).items()}
        found: LLMError = reader.status_error(status, lowered, raw)
        return found
    if name == "ollama":
        text = error if isinstance(error, str) else str(_field(error, "error") or error)
        found = reader.make_error(reader.error_kind(None, text), text, status=None)
        return found
    body = _field(error, "error") if isinstance(_field(error, "error"), Mapping) else error
    if not isinstance(body, Mapping):
        raise ValueError(
            f"provider_error: a {name} stream's failure is its error object (a mapping), got {error!r}"
        )
    if name == "bedrock-converse":
        kind_name = reader.error_name({}, body)
        text = str(body.get("message") or body.get("Message") or kind_name)
        found = reader.make_error(reader.error_kind(kind_name, text, None), text, name=kind_name, status=None)
        return found
    if name == "bedrock-invoke":
        kind_name = _aws.error_name({}, body)
        text = str(body.get("message") or body.get("Message") or kind_name)
        found = reader.bedrock_error(kind_name, text, status=None)
        return found
    code = body.get("code") if name in ("gemini", "gemini-vertex") else None
    found = reader.make_error(reader.error_kind(None, body), body, status=code)
    return found


def _field(error: Any, key: str) -> Any:
    return error.get(key) if isinstance(error, Mapping) else None
