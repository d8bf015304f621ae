"""A reference backend for Gemini on Vertex AI: the Gemini backend, pointed at Vertex.

What is Vertex's own, beside what :mod:`.gemini` reads:

- The model goes under a project and a location:
  ``/v1beta1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent``,
  with an OAuth access token as ``Authorization: Bearer`` (the backend's ``api_key``).
  Vertex's express mode (``express=True``) drops ``projects/…/locations/…`` and sends
  an API key in ``x-goog-api-key`` instead.
- A block says ``MODEL_ARMOR`` (``promptFeedback.blockReason``, or a candidate's
  ``finishReason`` with no content at all): a content filter, read as :mod:`.gemini`
  reads every filter reason.
- A 429 ``RESOURCE_EXHAUSTED`` carries no details: a rate limit with no delay to report.
- ``UNEXPECTED_TOOL_CALL`` (a call to a function the request never declared) ends the
  turn in error: the turn is an ``error`` turn, never ``tool_calls``, and the call is
  passed on as it came, for the caller to see and refuse.
"""

from __future__ import annotations

from typing import Any, Dict

from ..contract import ChatRequest
from .gemini import GeminiBackend

__all__ = ["GeminiVertexBackend"]


class GeminiVertexBackend(GeminiBackend):
    """Talks to ``{base_url}/{api_version}/projects/{project}/locations/{location}/publishers/google/…``.

    ``base_url`` is the API root, without the version:
    ``https://us-central1-aiplatform.googleapis.com`` (or ``https://aiplatform.googleapis.com``
    for the ``global`` location and for express mode).
    """

    provider = "gemini"
    api_version = "v1beta1"

    def __init__(
        self,
        base_url: str,
        *,
        project: str = "conformance-project",
        location: str = "us-central1",
        express: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(base_url, **kwargs)
        self.project = project
        self.location = location
        self.express = express

    def headers(self, stream: bool) -> Dict[str, str]:
        """An OAuth token as a bearer; in express mode, the API key in ``x-goog-api-key``."""
        headers = super().headers(stream)
        if not self.express:
            del headers["x-goog-api-key"]
            headers = {"authorization": f"Bearer {self.api_key}", **headers}
        return headers

    def url(self, chat: ChatRequest, stream: bool) -> str:
        model = chat.model[len("models/") :] if chat.model.startswith("models/") else chat.model
        where = "" if self.express else f"projects/{self.project}/locations/{self.location}/"
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"{self.base_url}/{self.api_version}/{where}publishers/google/models/{model}:{method}"
