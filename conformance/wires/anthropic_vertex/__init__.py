"""Claude on Google Vertex AI: ``POST …/publishers/anthropic/models/{model}:rawPredict`` and
``:streamRawPredict``.

Reference: https://docs.anthropic.com/en/api/claude-on-vertex-ai and
https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/use-claude.

The request is the Messages API's body without ``model`` (it is in the path), with
``anthropic_version`` in it (``vertex-2023-10-16``) and, for a stream, ``"stream":
true``; it carries a Google access token as ``Authorization: Bearer``. A whole reply is
Claude's ``message``, ids ``msg_vrtx_01…`` and ``toolu_vrtx_01…``, with
``request-id: req_vrtx_…``. A streamed reply is Anthropic's SSE::

    event: message_start      (usage without service_tier)
    event: vertex_event       (in the vertex-event variant: the usage and its tiers)
    event: content_block_start
    event: ping
    event: content_block_delta ...
    event: content_block_stop
    event: message_delta      (usage.output_tokens only)
    event: message_stop

A failure Google's front end decides (a quota, a bad token) is ``{"error":
google.rpc.Status}``, pretty-printed, and to a ``streamRawPredict`` call sometimes a
JSON array of it; Claude's own failures pass through in Anthropic's shape.

The package keeps one concern per module: ``_replies`` (ids, headers, the events Vertex
adds or changes), ``_variants`` (the failures and the variants), ``_request`` (the route
and the credentials) and ``_wire`` (:class:`AnthropicVertexWire`). The message, its
events, the scripted turns and the history reader are Anthropic's own
(``wires/anthropic``, with the hooks of ``wires/anthropic/_hosted``).
"""

from __future__ import annotations

from ._replies import MESSAGE_ID as MESSAGE_ID
from ._replies import TOOL_USE_ID as TOOL_USE_ID
from ._replies import request_id as request_id
from ._wire import AnthropicVertexWire, anthropic_vertex_wire

__all__ = ["AnthropicVertexWire", "anthropic_vertex_wire"]
