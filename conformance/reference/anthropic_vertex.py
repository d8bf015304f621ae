"""A reference backend for Claude on Google Vertex AI, standard library plus ``h2``.

It is the smallest backend that meets the whole contract on this wire, and so the
plainest account of how to read it. Claude on Vertex is Claude: the message, its
events and the conversation are read exactly as :class:`~conformance.reference.AnthropicBackend`
reads them. What Vertex changes:

- The call is ``POST {base}/projects/{project}/locations/{region}/publishers/anthropic/
  models/{model}:rawPredict``, or ``:streamRawPredict`` for a stream; ``{base}`` ends
  in ``/v1``, as the anthropic SDK's ``AnthropicVertex`` takes it. The body is the
  Messages body with ``anthropic_version: "vertex-2023-10-16"`` and without ``model``.
  Authentication is a Google access token as ``Authorization: Bearer``; no
  ``anthropic-version`` header, no ``x-api-key``.
- Vertex may add an event of its own to a stream, ``vertex_event``: skip it, as any
  event this backend does not know.
- A failure Google's front end decides is a ``google.rpc.Status`` (bare, or the first
  of a JSON array to ``streamRawPredict``), told apart by its status name:
  ``RESOURCE_EXHAUSTED`` is a rate limit (a per-minute quota; no retry delay comes
  with it), ``UNAUTHENTICATED`` a bad token. Claude's own failures come in Anthropic's
  shape and are read as Anthropic's.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional
from urllib.parse import quote

from ..contract import ChatRequest, LLMError
from ._errors import decode_json, status_kind
from ._google import RPC_KINDS, rpc_error
from .anthropic import AnthropicBackend

__all__ = ["AnthropicVertexBackend"]

ANTHROPIC_VERSION = "vertex-2023-10-16"


class AnthropicVertexBackend(AnthropicBackend):
    """Talks to ``{base_url}/projects/{project}/locations/{region}/publishers/anthropic/models/…``.

    ``base_url`` ends in ``/v1``, as the anthropic SDK's ``AnthropicVertex`` takes it;
    ``api_key`` is the Google access token.
    """

    provider = "anthropic"

    def __init__(
        self, base_url: str, *, project: str = "conformance-project", region: str = "us-east5", **kwargs: Any
    ) -> None:
        super().__init__(base_url, **kwargs)
        self.project = project
        self.region = region

    # -- the request ------------------------------------------------------------------

    def url(self, chat: ChatRequest, stream: bool) -> str:
        """The method's URL: the model in the path, ``:streamRawPredict`` for a stream."""
        method = "streamRawPredict" if stream else "rawPredict"
        model = quote(chat.model, safe="@")
        return (
            f"{self.base_url}/projects/{self.project}/locations/{self.region}"
            f"/publishers/anthropic/models/{model}:{method}"
        )

    def headers(self, stream: bool) -> Dict[str, str]:
        """Headers of every request: the access token, JSON, and the caller's own."""
        return {
            "authorization": f"Bearer {self.api_key}",
            "content-type": "application/json",
            "accept": "application/json",
            **self.extra_headers,
        }

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The Messages body with the version in it and no ``model``: the path names it."""
        body = super().body(chat, stream)
        del body["model"]
        return {"anthropic_version": ANTHROPIC_VERSION, **body}

    # -- errors -----------------------------------------------------------------------

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        """The error for a failure status: Google's, where the body is a ``google.rpc.Status``,
        else Claude's, read as Anthropic's."""
        error = rpc_error(decode_json(raw))
        if error is None:
            return super().status_error(status, headers, raw)
        return self.google_error(status, error, retry_after=self.retry_after(headers))

    def google_error(
        self, status: Optional[int], error: Mapping[str, Any], *, retry_after: Optional[float] = None
    ) -> LLMError:
        """The error a ``google.rpc.Status`` describes, by its status name."""
        rpc_status = str(error.get("status") or "")
        kind = RPC_KINDS.get(rpc_status) or (status_kind(status) if status is not None else "server_error")
        details = {"status": rpc_status, "code": error.get("code"), "details": error.get("details")}
        return self.build_error(
            kind, str(error.get("message") or kind), status=status, details=details, retry_after=retry_after
        )
