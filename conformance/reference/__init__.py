"""Reference backends: one small backend per wire that meets the whole contract.

They prove the contract can be met, they are what ``python -m conformance`` runs by
default, and each module is the plainest account of how to read its wire.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from .anthropic import AnthropicBackend
from .bedrock import BedrockConverseBackend
from .gemini import GeminiBackend
from .ollama import OllamaBackend
from .openai_chat import OpenAIChatBackend
from .openai_responses import OpenAIResponsesBackend

__all__ = [
    "REFERENCE_BACKENDS",
    "AnthropicBackend",
    "BedrockConverseBackend",
    "GeminiBackend",
    "OllamaBackend",
    "OpenAIChatBackend",
    "OpenAIResponsesBackend",
]


def _openai_chat(url: str, http2: bool) -> Any:
    return OpenAIChatBackend(f"{url}/v1", http2=http2)


def _openai_responses(url: str, http2: bool) -> Any:
    return OpenAIResponsesBackend(f"{url}/v1", http2=http2)


def _anthropic(url: str, http2: bool) -> Any:
    # The anthropic SDK's base URL has no /v1: the client adds it.
    return AnthropicBackend(url, http2=http2)


def _gemini(url: str, http2: bool) -> Any:
    return GeminiBackend(url, http2=http2)


def _ollama(url: str, http2: bool) -> Any:
    return OllamaBackend(url, http2=http2)


def _bedrock(url: str, http2: bool) -> Any:
    return BedrockConverseBackend(url, http2=http2)


#: By wire name: ``create(provider_url, http2)`` builds the reference backend.
REFERENCE_BACKENDS: Dict[str, Callable[[str, bool], Any]] = {
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "ollama": _ollama,
    "bedrock-converse": _bedrock,
}
