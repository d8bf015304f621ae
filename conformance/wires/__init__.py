"""The wires: one package per provider, each data plus small pure functions.

Each wire's package is imported when its name (or :data:`WIRES`) is first asked for, so
a target that uses one wire does not pay for the others. A package keeps one
concern per module (``_replies``, ``_variants``, ``_turns``, ``_history``, ``_request``,
``_wire``); what they share lives a floor down, beside :class:`Wire` (``_base``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict

from ._adapt import WireLike
from ._base import Variant, Wire
from ._variants import SOURCE_KINDS, EitherRule

if TYPE_CHECKING:
    from .anthropic import anthropic_wire
    from .anthropic_vertex import anthropic_vertex_wire
    from .azure_openai import azure_openai_chat_wire, azure_openai_responses_wire
    from .bedrock import bedrock_converse_wire
    from .bedrock_invoke import bedrock_invoke_wire
    from .cohere import cohere_wire
    from .gemini import gemini_wire
    from .gemini_vertex import gemini_vertex_wire
    from .ollama import ollama_wire
    from .openai_chat import openai_chat_wire
    from .openai_responses import openai_responses_wire

    WIRES: Dict[str, Wire]

__all__ = [
    "EitherRule",
    "SOURCE_KINDS",
    "Variant",
    "WIRES",
    "Wire",
    "WireLike",
    "anthropic_vertex_wire",
    "anthropic_wire",
    "azure_openai_chat_wire",
    "azure_openai_responses_wire",
    "bedrock_converse_wire",
    "bedrock_invoke_wire",
    "cohere_wire",
    "gemini_vertex_wire",
    "gemini_wire",
    "ollama_wire",
    "openai_chat_wire",
    "openai_responses_wire",
]

#: Each shipped wire's name in this package, and its module, in the order the matrix shows them.
_MODULES = {
    "openai_chat_wire": "openai_chat",
    "openai_responses_wire": "openai_responses",
    "azure_openai_chat_wire": "azure_openai",
    "azure_openai_responses_wire": "azure_openai",
    "anthropic_wire": "anthropic",
    "anthropic_vertex_wire": "anthropic_vertex",
    "gemini_wire": "gemini",
    "gemini_vertex_wire": "gemini_vertex",
    "ollama_wire": "ollama",
    "bedrock_converse_wire": "bedrock",
    "bedrock_invoke_wire": "bedrock_invoke",
    "cohere_wire": "cohere",
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    elif name == "WIRES":
        #: Every wire that ships, by name, in the order the matrix shows them.
        value = {wire.name: wire for wire in (__getattr__(attr) for attr in _MODULES)}
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
