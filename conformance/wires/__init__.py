"""The wires: one module per provider, each data plus small pure functions."""

from __future__ import annotations

from ._base import Wire
from .openai_chat import openai_chat_wire

__all__ = ["WIRES", "Wire", "openai_chat_wire"]

#: Every wire that ships, by name, in the order the matrix shows them.
WIRES = {wire.name: wire for wire in (openai_chat_wire,)}
