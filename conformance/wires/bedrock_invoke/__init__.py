"""Amazon Bedrock InvokeModel for Claude: ``POST /model/{modelId}/invoke`` and
``/invoke-with-response-stream``.

Reference: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html,
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html
and https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html.

The request is the Messages API's body, without ``model`` (it is in the path) and
without ``stream`` (the operation says it), with ``anthropic_version`` in it
(``bedrock-2023-05-31``); it is signed with SigV4 or carries a Bedrock API key as
``Bearer``. A whole reply is Claude's ``message``, ids ``msg_bdrk_01…`` and
``toolu_bdrk_01…``. A streamed reply is ``application/vnd.amazon.eventstream``, one
frame per Claude event::

    :event-type chunk   {"bytes": base64({"type":"message_start","message":{...}}), "p": "abcd"}
    :event-type chunk   {"bytes": base64({"type":"content_block_start",...}), "p": "abcdefghijklmnopq"}
      ...               content_block_delta, content_block_stop (no ping)
    :event-type chunk   {"bytes": base64({"type":"message_delta",...}), "p": ...}
    :event-type chunk   {"bytes": base64({"type":"message_stop",
                                          "amazon-bedrock-invocationMetrics":{...}}), "p": ...}

A failure before the answer is Bedrock's (``x-amzn-ErrorType``, ``{"message"}``); one
after the 200 is an ``exception`` frame (``serviceUnavailableException``,
``throttlingException``), never Claude's ``event: error``.

The package keeps one concern per module: ``_replies`` (the framing and the headers),
``_variants`` (the failures and the variants), ``_request`` (the route and the
credentials) and ``_wire`` (:class:`BedrockInvokeWire`). The message, its events, the
scripted turns and the history reader are Anthropic's own
(``wires/anthropic``, with the hooks of ``wires/anthropic/_hosted``).
"""

from __future__ import annotations

from ._replies import MESSAGE_ID as MESSAGE_ID
from ._replies import TOOL_USE_ID as TOOL_USE_ID
from ._wire import BedrockInvokeWire, bedrock_invoke_wire

__all__ = ["BedrockInvokeWire", "bedrock_invoke_wire"]
