"""Reference backends for Azure OpenAI: the OpenAI ones, sent where Azure takes them.

Azure serves OpenAI's own APIs, so what a backend reads is the OpenAI backends' (see
``openai_chat`` and ``openai_responses``); what differs is only where the request goes
and how the key goes with it:

- Chat goes to the deployment, ``{endpoint}/openai/deployments/{deployment}/chat/
  completions?api-version=...``: the deployment is the request's model.
- Responses goes to the v1 path, ``{endpoint}/openai/v1/responses``, naming the
  deployment in ``model``.
- The key is an ``api-key`` header, not ``Authorization: Bearer``.
- A stream opens with a chunk that has no ``choices`` (the prompt's filter results), and
  an Asynchronous Filter's annotation chunks carry no ``delta``: the Chat backend reads
  only what a choice has, so both pass by.
- Reasoning is OpenAI's (``provider="openai"``): Azure returns the same items, to be
  echoed the same way.
- Azure's own failures carry a string ``code`` and no ``type``
  (``{"error": {"code": "429", ...}}``): the status tells their kind, and a rate limit's
  delay is its ``retry-after`` header, as on api.openai.com.
"""

from __future__ import annotations

from typing import Any, Dict
from urllib.parse import quote

from ..contract import ChatRequest
from .openai_chat import OpenAIChatBackend
from .openai_responses import OpenAIResponsesBackend

__all__ = ["API_VERSION", "AzureOpenAIChatBackend", "AzureOpenAIResponsesBackend"]

#: The GA data-plane version the Chat backend names (any version Azure takes will do).
API_VERSION = "2024-10-21"


def _headers(api_key: str, extra: Dict[str, str]) -> Dict[str, str]:
    return {"api-key": api_key, "content-type": "application/json", "accept": "application/json", **extra}


class AzureOpenAIChatBackend(OpenAIChatBackend):
    """Talks to a deployment's ``chat/completions``; ``base_url`` is the resource's endpoint."""

    def __init__(self, base_url: str, *, api_version: str = API_VERSION, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self.api_version = api_version

    def url(self, chat: ChatRequest, stream: bool) -> str:
        deployment = quote(chat.model, safe="")
        return (
            f"{self.base_url}/openai/deployments/{deployment}/chat/completions"
            f"?api-version={quote(self.api_version)}"
        )

    def headers(self, stream: bool) -> Dict[str, str]:
        return _headers(self.api_key, self.extra_headers)


class AzureOpenAIResponsesBackend(OpenAIResponsesBackend):
    """Talks to ``{base_url}/openai/v1/responses``; ``base_url`` is the resource's endpoint."""

    path = "/openai/v1/responses"

    def headers(self, stream: bool) -> Dict[str, str]:
        return _headers(self.api_key, self.extra_headers)
