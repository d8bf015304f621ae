"""The wires: one module per provider, each data plus small pure functions."""

from __future__ import annotations

from ._base import Wire
from .anthropic import anthropic_wire
from .bedrock import bedrock_converse_wire
from .gemini import gemini_wire
from .ollama import ollama_wire
from .openai_chat import openai_chat_wire
from .openai_responses import openai_responses_wire

__all__ = [
    "WIRES",
    "Wire",
    "anthropic_wire",
    "bedrock_converse_wire",
    "gemini_wire",
    "ollama_wire",
    "openai_chat_wire",
    "openai_responses_wire",
]

#: Every wire that ships, by name, in the order the matrix shows them.
WIRES = {
    wire.name: wire
    for wire in (
        openai_chat_wire,
        openai_responses_wire,
        anthropic_wire,
        gemini_wire,
        ollama_wire,
        bedrock_converse_wire,
    )
}
