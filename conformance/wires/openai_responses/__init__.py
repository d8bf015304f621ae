"""OpenAI Responses: ``POST {base}/responses``, whole or as SSE with ``event:`` names.

Reference: https://platform.openai.com/docs/api-reference/responses and
https://platform.openai.com/docs/api-reference/responses-streaming. The shapes below
are the ones openai-python 3.x was seen to accept (``openai/types/responses``).

A whole reply is one ``response`` object: ``status`` (``completed``, ``incomplete``,
``failed``), ``incomplete_details.reason`` (``max_output_tokens``, ``content_filter``)
and a list of ``output`` items, each a ``message`` (``output_text`` or ``refusal``
parts) or a ``function_call`` (``call_id``, ``name``, ``arguments`` as a JSON string).
There is no finish reason: a tool turn ends ``completed`` like a text turn.

A streamed reply is SSE events named after their ``type``, each with an increasing
``sequence_number`` and no ``[DONE]``::

    response.created, response.in_progress
    response.output_item.added            (a message or a function_call item)
      response.content_part.added
      response.output_text.delta ...      (or response.refusal.delta ...)
      response.output_text.done           (or response.refusal.done)
      response.content_part.done
      response.function_call_arguments.delta ... / .done
    response.output_item.done
    response.completed | response.incomplete | response.failed

Usage is only in the terminal event's ``response``. A failure after the 200 is an
``error`` event with the fields nested under ``error`` (the shape production traffic
has, not the flat one of the API reference), followed by ``response.failed``; that
is also how a streamed request over the context window fails.

Scripted turns add ``reasoning`` items (summary deltas, then the item whole with its
``encrypted_content``) before the message and the calls; a history is read from the
``input`` items and refused with the API's own 400 wording (see ``_history``).

The package keeps one concern per module: ``_replies`` (the response, its items and
its events), ``_variants`` (the error table and the variants), ``_turns`` (scripted
turns played), ``_history`` (a conversation read back), ``_request`` (what a request
must carry) and ``_wire`` (:class:`OpenAIResponsesWire`, which answers each scenario
with them).
"""

from __future__ import annotations

from ._replies import CALL_ID as CALL_ID
from ._wire import OpenAIResponsesWire, openai_responses_wire

__all__ = ["OpenAIResponsesWire", "openai_responses_wire"]
