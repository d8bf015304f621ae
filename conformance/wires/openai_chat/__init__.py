"""OpenAI Chat Completions: ``POST {base}/chat/completions``, whole or as SSE.

Reference: https://platform.openai.com/docs/api-reference/chat and
https://platform.openai.com/docs/api-reference/chat-streaming. The shapes below are
the ones openai-python 3.x was seen to accept (``openai/types/chat``).

A streamed reply is ``data:`` events of ``chat.completion.chunk`` objects, no
``event:`` names, ending with ``data: [DONE]``. Tool-call arguments arrive as string
fragments keyed by ``tool_calls[].index``. Usage comes in one extra chunk with empty
``choices`` right before ``[DONE]``, and only when the request asked for it with
``stream_options.include_usage``. A failure after the 200 is a ``data:`` event
carrying a top-level ``error`` object, with no ``[DONE]`` after it.

The package keeps one concern per module: ``_replies`` (the completion and its
chunks), ``_variants`` (the error table and the variants), ``_turns`` (scripted turns
played), ``_history`` (a conversation read back), ``_request`` (what a request must
carry) and ``_wire`` (:class:`OpenAIChatWire`, which answers each scenario with them).
The OpenAI-compatible servers a wire may name have ``_servers`` (which scenario each
answers in a shape of its own, and where it was seen), ``_server_replies`` (Mistral's,
Groq's and DeepSeek's bytes), ``_llama_cpp`` (llama-server's) and ``_openrouter``
(OpenRouter's).
"""

from __future__ import annotations

from ._replies import TOOL_CALL_ID as TOOL_CALL_ID
from ._wire import OpenAIChatWire, openai_chat_wire

__all__ = ["OpenAIChatWire", "openai_chat_wire"]
