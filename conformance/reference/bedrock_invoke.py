"""A reference backend for Claude on Amazon Bedrock InvokeModel, standard library plus ``h2``.

It is the smallest backend that meets the whole contract on this wire, and so the
plainest account of how to read it. Claude on Bedrock is Claude: the message, its
events and the conversation are read exactly as :class:`~conformance.reference.AnthropicBackend`
reads them. What Bedrock changes:

- The call is ``POST {base}/model/{modelId}/invoke``, or ``/invoke-with-response-stream``
  for a stream; percent-encode the model id. The body is the Messages body with
  ``anthropic_version: "bedrock-2023-05-31"`` and without ``model`` or ``stream``, which
  Bedrock refuses. Authentication is a Bedrock API key as ``Bearer`` (or SigV4).
- A stream is the binary AWS event stream: check both CRCs of every frame, keep the
  unfinished tail of a frame for the next read, and base64-decode each ``chunk``
  frame's ``bytes``: that is one Claude event, named by its ``type``. There is no
  ``ping``, and ``message_stop`` carries Bedrock's invocation metrics.
- A failure before the answer is named by ``x-amzn-ErrorType``; one after the 200 is an
  ``exception`` frame (``throttlingException``, ``serviceUnavailableException``,
  ``validationException``), before any event or after some text. A
  ``ThrottlingException`` is a daily quota only where its message says so, and carries
  no retry delay.
"""

from __future__ import annotations

import json
from typing import Any, AsyncGenerator, Dict, Mapping, Optional, Tuple
from urllib.parse import quote

from ..contract import ChatRequest, LLMError
from . import _aws
from ._decoders import EventStreamDecoder, EventStreamError
from ._errors import decode_json
from ._transport import Response
from .anthropic import AnthropicBackend

__all__ = ["BedrockInvokeBackend"]

ANTHROPIC_VERSION = "bedrock-2023-05-31"


class BedrockInvokeBackend(AnthropicBackend):
    """Talks to ``{base_url}/model/{modelId}/invoke`` and ``/invoke-with-response-stream``."""

    provider = "bedrock"

    # -- the request ------------------------------------------------------------------

    def url(self, chat: ChatRequest, stream: bool) -> str:
        """The operation's URL; ``safe=""`` so that ``:`` and ``/`` in an id are encoded too."""
        operation = "invoke-with-response-stream" if stream else "invoke"
        return f"{self.base_url}/model/{quote(chat.model, safe='')}/{operation}"

    def headers(self, stream: bool) -> Dict[str, str]:
        """Headers of every request: the API key, JSON, and the caller's own."""
        return {
            "authorization": f"Bearer {self.api_key}",
            "content-type": "application/json",
            "accept": "application/json",
            **self.extra_headers,
        }

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The Messages body, the version in it, and neither ``model`` nor ``stream``: the path says both."""
        body = super().body(chat, stream=False)
        del body["model"]
        return {"anthropic_version": ANTHROPIC_VERSION, **body}

    # -- errors -----------------------------------------------------------------------

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        """The error for a failure status, named by ``x-amzn-ErrorType``."""
        body = decode_json(raw)
        message = str(body.get("message") or body.get("Message") or "") if isinstance(body, dict) else ""
        name = _aws.error_name(headers, body)
        return self.bedrock_error(
            name,
            message or f"HTTP {status} {name}".strip(),
            status=status,
            retry_after=self.retry_after(headers),
            request_id=headers.get("x-amzn-requestid"),
        )

    def bedrock_error(
        self,
        name: str,
        message: str,
        *,
        status: Optional[int],
        retry_after: Optional[float] = None,
        request_id: Optional[str] = None,
    ) -> LLMError:
        """The error a Bedrock exception describes, its name kept as ``details.error_type``."""
        kind = _aws.error_kind(name, message, status)
        details = {"error_type": name, "request_id": request_id}
        return self.build_error(kind, message, status=status, details=details, retry_after=retry_after)

    # -- the answer -------------------------------------------------------------------

    def decoder(self) -> EventStreamDecoder:
        """The event-stream decoder; it checks both CRCs of every frame."""
        return EventStreamDecoder()

    async def named_events(self, response: Response) -> AsyncGenerator[Tuple[str, str], None]:
        """Each Claude event the stream's ``chunk`` frames carry, as its type and JSON text."""
        import base64

        decoder = self.decoder()
        async for data in response:
            try:
                frames = decoder.feed(data)
            except EventStreamError as exc:
                raise self.build_error(
                    "server_error", f"corrupt event stream: {exc}", status=None, details={"frame": str(exc)}
                ) from exc
            for frame in frames:
                failure = _aws.frame_failure(frame)
                if failure is not None:
                    raise self.bedrock_error(*failure, status=None)
                payload = json.loads(frame.payload.decode("utf-8"))
                text = base64.b64decode(payload.get("bytes", "")).decode("utf-8")
                event = json.loads(text)
                yield str(event.get("type", "") if isinstance(event, dict) else ""), text
