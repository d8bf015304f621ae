"""Anthropic Messages: ``POST {base}/v1/messages``, whole or as SSE with ``event:`` names.

Reference: https://docs.anthropic.com/en/api/messages,
https://docs.anthropic.com/en/docs/build-with-claude/streaming and
https://docs.anthropic.com/en/api/errors. The shapes below are the ones
anthropic-python 1.x and 2.x were seen to accept (``anthropic/types``).

A whole reply is one ``message`` with ``content`` blocks (``text``, ``tool_use`` whose
``input`` is already an object) and a ``stop_reason``: ``end_turn``, ``tool_use``,
``max_tokens``, ``refusal`` (with ``stop_details``), ``pause_turn`` (a server tool's
loop paused, its ``server_tool_use`` block left without a result).

A streamed reply is SSE events whose ``event:`` name equals ``data.type`` (the SDK
drops events without the name)::

    message_start            (the message, empty content, usage.input_tokens)
    ping
    content_block_start      (index, a text block or a tool_use block with input {})
      content_block_delta ...  (text_delta.text or input_json_delta.partial_json)
    content_block_stop
    message_delta            (delta.stop_reason, usage.output_tokens)
    message_stop

Usage is split: ``input_tokens`` in ``message_start``, the final ``output_tokens`` in
``message_delta``. A failure after the 200 is ``event: error`` with an
``overloaded_error`` body, the in-stream twin of a 529.

The package keeps one concern per module: ``_replies`` (the message and its events),
``_variants`` (the error table and the variants), ``_pause`` (the paused turn),
``_turns`` (scripted turns played), ``_history`` (a conversation read back),
``_request`` (what a request must carry), ``_wire`` (:class:`AnthropicWire`, which
answers each scenario with them) and ``_hosted`` (the same wire as a cloud serves it,
for ``bedrock_invoke`` and ``anthropic_vertex``).
"""

from __future__ import annotations

from ._replies import MESSAGE_ID as MESSAGE_ID
from ._replies import TOOL_USE_ID as TOOL_USE_ID
from ._replies import request_id as request_id
from ._wire import AnthropicWire, anthropic_wire

__all__ = ["AnthropicWire", "anthropic_wire"]
