"""Cohere Chat v2: ``POST {base}/v2/chat``, whole or as SSE with ``event:`` names.

Reference: https://docs.cohere.com/reference/chat,
https://docs.cohere.com/v2/docs/streaming, https://docs.cohere.com/reference/errors and
Cohere's OpenAPI spec (``cohere-openapi.yaml`` in cohere-ai/cohere-developer-experience),
from which cohere-python 5.x and 7.x generate their types. The shapes follow captures
in langchain-ai/langchain-cohere (``libs/cohere/tests/integration_tests/cassettes``) and
the payloads of vercel/ai (``packages/cohere/src/__fixtures__``).

A whole reply is ``{"id", "message", "finish_reason", "usage"}``: the message holds
``content`` items (``text``, ``thinking``), or, on a tool turn, a ``tool_plan`` and
``tool_calls`` whose ``function.arguments`` is JSON text. ``finish_reason`` is
``COMPLETE``, ``STOP_SEQUENCE``, ``MAX_TOKENS``, ``TOOL_CALL``, ``ERROR`` or ``TIMEOUT``;
``usage`` has ``billed_units`` and ``tokens`` (the model's count), and ``cached_tokens``
in newer replies.

A streamed reply is SSE events whose ``event:`` name equals ``data.type``::

    message-start          (the reply's id, an empty message)
    content-start          (index, a text or thinking item)
      content-delta ...    (delta.message.content.text, or .thinking)
    content-end
    tool-plan-delta ...    (delta.message.tool_plan)
    tool-call-start        (index, the call's id and name, empty arguments)
      tool-call-delta ...  (delta.message.tool_calls.function.arguments)
    tool-call-end
    message-end            (delta.finish_reason, delta.usage; delta.error on ERROR)

then a bare ``data: [DONE]``. A generation that fails after the 200 ends with
``message-end`` saying ``ERROR`` or ``TIMEOUT``; an error before it is a status with
``{"message"}`` and nothing else that tells one kind from another.

The package keeps one concern per module: ``_replies`` (the reply and its events),
``_variants`` (the error table and the variants), ``_turns`` (scripted turns played),
``_history`` (a conversation read back), ``_request`` (what a request must carry) and
``_wire`` (:class:`CohereWire`, which answers each scenario with them).
"""

from __future__ import annotations

from ._replies import MESSAGE_ID as MESSAGE_ID
from ._replies import TOOL_CALL_ID as TOOL_CALL_ID
from ._wire import CohereWire, cohere_wire

__all__ = ["CohereWire", "cohere_wire"]
