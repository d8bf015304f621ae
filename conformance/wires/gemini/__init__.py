"""Gemini API: ``POST /v1beta/models/{model}:generateContent``, whole or as SSE.

Reference: https://ai.google.dev/api/generate-content (``GenerateContentResponse``,
``Candidate``, ``Part``, ``FunctionCall``, ``UsageMetadata``) and
https://ai.google.dev/gemini-api/docs/troubleshooting (the error statuses). The shapes
below are the ones google-genai 3.x was seen to accept (``google/genai/types.py``).
Both ``/v1/`` and ``/v1beta/`` are served: google-genai 3.x defaults to ``v1``, older
releases and most REST clients to ``v1beta``.

The model is named in the path, not in the body. The API key comes in the
``x-goog-api-key`` header or the ``?key=`` query parameter.

A streamed reply is ``:streamGenerateContent?alt=sse``: ``data:`` events, each one a
whole ``GenerateContentResponse`` with the next text delta, no ``event:`` names and no
``[DONE]``; the stream simply ends. Events end with CRLF CRLF, as Google's front end
writes them. ``usageMetadata`` rides on every event and the last one counts; only the
last candidate carries ``finishReason``. Function calls are never split: one part holds
the whole ``functionCall`` with its ``args`` object. A tool turn finishes with
``finishReason: "STOP"``, never with a tool-specific reason. A failure after the 200 is
a ``data:`` event whose object is ``{"error": {"code", "message", "status"}}`` (a
``google.rpc.Status``), and the stream ends there.

Without ``alt=sse`` the streaming method answers one JSON array, written element by
element; the wire serves that form too, since a backend that forgot the query meets it.

The package keeps one concern per module: ``_replies`` (the response, its parts and
its events, as each of Google's front ends writes them), ``_variants`` (the
``google.rpc.Status`` error table and the variants), ``_turns`` (scripted turns
played), ``_history`` (a conversation read back), ``_request`` (the route, and what a
request must carry) and ``_wire`` (:class:`GeminiWire`, which answers each scenario
with them).
"""

from __future__ import annotations

from ._replies import FUNCTION_CALL_ID as FUNCTION_CALL_ID
from ._wire import GeminiWire, gemini_wire

__all__ = ["GeminiWire", "gemini_wire"]
