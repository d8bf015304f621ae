"""Ollama: ``POST /api/chat``, whole or as NDJSON.

Reference: https://github.com/ollama/ollama/blob/main/docs/api.md ("Generate a chat
completion"), docs/api/errors.mdx and docs/api/streaming.mdx; the Go types are
``api.ChatResponse`` and ``api.Metrics`` (api/types.go). The shapes below are the ones
ollama-python 0.6 was seen to accept (``ollama/_types.py``).

``stream`` defaults to true on the server: a request without it gets NDJSON. A streamed
reply is ``application/x-ndjson``, one ``ChatResponse`` object per line: ``done: false``
lines with the next text in ``message.content``, then one ``done: true`` line with
``done_reason`` (``stop`` or ``length``), the token counts ``prompt_eval_count`` and
``eval_count`` and the durations in nanoseconds. Tool calls never arrive in fragments:
the server buffers the model's output until a call parses, then sends it whole in
``message.tool_calls`` with ``function.arguments`` as a JSON object. A tool turn ends
with ``done_reason: "stop"``; Ollama has no tool-specific reason. ``created_at`` is Go's
RFC 3339 with nanoseconds, trailing zeros trimmed.

Errors are ``{"error": "<message>"}`` with the HTTP status. After the first line has
gone out the status can no longer change: a failure is one last line
``{"error": "..."}``, and the stream ends.

Scripted turns send ``message.thinking`` first, then the text, then each call whole on
a line of its own; a history is refused only where the server's JSON decoder refuses
it, a value of the wrong type (see ``_history``).

The package keeps one concern per module: ``_replies`` (the response lines and the
model lookups), ``_variants`` (the error table and the variants), ``_turns`` (scripted
turns played), ``_history`` (a conversation read back), ``_request`` (what a request
must carry) and ``_wire`` (:class:`OllamaWire`, which answers each scenario with them).
"""

from __future__ import annotations

from ._replies import TOOL_CALL_ID as TOOL_CALL_ID
from ._replies import created_at as created_at
from ._wire import OllamaWire, ollama_wire

__all__ = ["OllamaWire", "ollama_wire"]
