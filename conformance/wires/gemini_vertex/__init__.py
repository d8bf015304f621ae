"""Gemini on Vertex AI: ``POST /v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:…``.

The same models as the Gemini API, served by Vertex AI (aiplatform.googleapis.com) in
the same JSON, written its own way. Reference:
https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference and
https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/api-errors; the
shapes are the ones google-genai 3.x with ``vertexai=True`` was seen to send and accept.

A request names the model in its path, under a project and a location
(``/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:{method}``, an
OAuth token as ``Authorization: Bearer``), or, in Vertex's express mode, without them
(``/v1beta1/publishers/google/models/{m}:{method}``, an API key as
``x-goog-api-key``). google-genai uses ``v1beta1`` unless told otherwise; ``v1`` is
served too.

What differs from the Gemini API's replies (opentelemetry-python-contrib's and
pydantic-ai's Vertex cassettes): ``content`` puts ``role`` before ``parts``; a
candidate has no ``index``; every response carries ``createTime`` (the same on every
event of a stream) and ``usageMetadata.trafficType``; an event before the last has
only ``{"trafficType": "ON_DEMAND"}`` for its usage; a blocked prompt or output says
``MODEL_ARMOR``, with a message; a model may call a function the request never
declared, and Vertex then ends the turn ``UNEXPECTED_TOOL_CALL``. The errors are
Google's ``google.rpc.Status`` with Vertex's own messages: a 429 carries no details,
so no delay, and a wrong credential is a 401 ``UNAUTHENTICATED``.

The package keeps one concern per module: ``_replies`` (Vertex's way of writing a
response), ``_variants`` (its error table and variants), ``_request`` (its routes and
what a request must carry) and ``_wire`` (:class:`GeminiVertexWire`, the Gemini wire
with those put in).
"""

from __future__ import annotations

from ._wire import GeminiVertexWire, gemini_vertex_wire

__all__ = ["GeminiVertexWire", "gemini_vertex_wire"]
