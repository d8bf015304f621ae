"""Reference backends: one small backend per wire that meets the whole contract.

They prove the contract can be met, they are what ``python -m conformance`` runs by
default, and each module is the plainest account of how to read its wire.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from .openai_chat import OpenAIChatBackend

__all__ = ["REFERENCE_BACKENDS", "OpenAIChatBackend"]


def _openai_chat(url: str, http2: bool) -> Any:
    return OpenAIChatBackend(f"{url}/v1", http2=http2)


#: By wire name: ``create(provider_url, http2)`` builds the reference backend.
REFERENCE_BACKENDS: Dict[str, Callable[[str, bool], Any]] = {
    "openai-chat": _openai_chat,
}
