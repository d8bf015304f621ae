"""Azure OpenAI: OpenAI's Chat Completions and Responses APIs, as Azure serves them.

References: https://learn.microsoft.com/azure/ai-foundry/openai/reference (the data plane),
https://learn.microsoft.com/azure/foundry/openai/concepts/content-streaming and the
content filtering pages. ``openai.AzureOpenAI`` is the client the shapes below were
seen to work with.

Two wires, each the OpenAI wire of its API with what Azure changes:

- **Routes and key.** Chat goes to ``/openai/deployments/{deployment}/chat/completions
  ?api-version=...`` (or the v1 path ``/openai/v1/chat/completions``), Responses to
  ``/openai/responses?api-version=...`` (or ``/openai/v1/responses``); the key is an
  ``api-key`` header. The deployment is the target's model.
- **Filter results on every reply.** A Chat reply carries ``prompt_filter_results`` and a
  ``content_filter_results`` per choice, with its keys in alphabetical order; a stream
  opens with a chunk whose ``choices`` is empty and which holds only the prompt's
  results. A choice the output filter stopped keeps its ``message`` with the role and no
  ``content``. A Responses object carries ``content_filters``.
- **Azure's own failures.** A bad key and a deployment's rate limit are answered by
  Azure's front, ``{"error": {"code": "429", "message": ...}}`` (a string code, no
  ``type``); the rate limit with ``retry-after`` on Chat. There is no quota case.

The package keeps one concern per module: ``_shape`` (what Azure puts around OpenAI's
replies), ``_variants`` (its error bodies and its own variants), ``_request`` (its routes
and key), ``_chat`` and ``_responses`` (the two wires). Each wire is imported when its
name is first asked for, with the one OpenAI wire it is built on.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._chat import AzureOpenAIChatWire, azure_openai_chat_wire
    from ._responses import AzureOpenAIResponsesWire, azure_openai_responses_wire

__all__ = [
    "AzureOpenAIChatWire",
    "AzureOpenAIResponsesWire",
    "azure_openai_chat_wire",
    "azure_openai_responses_wire",
]

_MODULES = {
    "AzureOpenAIChatWire": "_chat",
    "azure_openai_chat_wire": "_chat",
    "AzureOpenAIResponsesWire": "_responses",
    "azure_openai_responses_wire": "_responses",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
