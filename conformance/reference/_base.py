"""What every reference backend does the same way, whatever its wire.

Strategy: :class:`ReferenceBackend` is a template. Its :meth:`~ReferenceBackend.send`
builds one POST from three hooks a wire fills in (:meth:`~ReferenceBackend.url`,
:meth:`~ReferenceBackend.headers`, :meth:`~ReferenceBackend.body`), and hands a
failure status to a fourth (:meth:`~ReferenceBackend.status_error`). What a wire's
errors mean and how its answer and stream read stay in the wire's own module, so
that each module is still the plainest account of its wire; this one holds only
what would read the same in all six.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, AsyncIterator, ClassVar, Dict, Mapping, Optional

from ..contract import ChatRequest, ChatResponse, LLMError, StreamChunk, ToolCall
from ._errors import retry_after_seconds
from ._transport import Response, TransportError, request

__all__ = ["ReferenceBackend", "call_from_text"]


def call_from_text(call_id: str, name: str, text: str) -> ToolCall:
    """The call of a finished turn from its argument text, as the provider sent it.

    Text that is a JSON object becomes ``arguments`` (no text at all is ``{}``).
    Any other text, broken JSON or a JSON value that is not an object, is kept
    exactly in ``unparsed_arguments`` with ``arguments`` empty: the loop must see
    the call, so that it can answer it with an error rather than wait for a result
    the model expects. (A call of a turn cut off by the token limit never gets here:
    it was never finished, and is dropped.)
    """
    try:
        parsed = json.loads(text or "{}")
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(call_id, name, parsed)
    return ToolCall(call_id, name, {}, unparsed_arguments=text)


class ReferenceBackend(ABC):
    """A backend that POSTs JSON to one provider over its own connection per request."""

    #: The ``provider`` of every :class:`LLMError` this backend raises.
    provider: ClassVar[str] = ""
    #: The method's path below ``base_url``, for a wire whose URL does not name the model.
    path: ClassVar[str] = ""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str = "test",
        http2: bool = False,
        headers: Optional[Mapping[str, str]] = None,
        timeout: float = 60.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.http2 = http2
        self.extra_headers = dict(headers or {})
        self.timeout = timeout

    # -- the request ------------------------------------------------------------------

    def url(self, chat: ChatRequest, stream: bool) -> str:
        """The method URL: ``base_url`` and :attr:`path`."""
        return f"{self.base_url}{self.path}"

    @abstractmethod
    def headers(self, stream: bool) -> Dict[str, str]:
        """Headers of every request: the key, the content types, and the caller's own."""

    @abstractmethod
    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The request body, as JSON."""

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        """Send the request; a failure status becomes an :class:`LLMError` here."""
        payload = json.dumps(self.body(chat, stream), ensure_ascii=False).encode("utf-8")
        try:
            response = await request(
                self.url(chat, stream),
                "POST",
                headers=self.headers(stream),
                body=payload,
                http2=self.http2,
                signal=chat.signal,
                timeout=self.timeout,
            )
        except TransportError as error:
            # No answer at all: the provider silent past the timeout, or the connection
            # gone before a status line. Nothing names a cause, as in a cut.
            raise self.cut_error(error) from error
        if response.status >= 400:
            try:
                raw = await response.read()
            finally:
                await response.aclose()
            raise self.status_error(response.status, response.headers, raw)
        response.on_error = self.cut_error
        return response

    # -- errors -----------------------------------------------------------------------

    @abstractmethod
    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        """The error for a failure status; ``raw`` is the whole body, JSON or not."""

    def cut_error(self, error: TransportError) -> BaseException:
        """The error for an answer that did not come whole (a stream before its terminal
        event, a whole body before its Content-Length, an h2 stream reset, no byte for the
        timeout): a retryable ``server_error``. Nothing in the bytes says more: no status,
        no error type."""
        return self.build_error(
            "server_error",
            f"the answer did not come whole: {error}",
            status=None,
            details={"transport": str(error)},
        )

    def check_ended(self, ended: bool, terminal: str) -> None:
        """Raise unless the stream reached ``terminal``, the provider's end of a turn.

        A stream that stops short of it was cut, however cleanly the connection closed:
        a retryable ``server_error``, never a short success with a finish reason.
        """
        if not ended:
            message = f"the stream ended before {terminal}"
            raise self.build_error("server_error", message, status=None, details={"terminal": terminal})

    def retry_after(self, headers: Mapping[str, str]) -> Optional[float]:
        """``retry-after-ms``, then ``retry-after`` (seconds or an HTTP-date)."""
        return retry_after_seconds(headers)

    def build_error(
        self,
        kind: str,
        message: str,
        *,
        status: Optional[int],
        details: Mapping[str, Any],
        retry_after: Optional[float] = None,
    ) -> LLMError:
        """The contract's error of ``kind``, one of :data:`~conformance.contract.ERROR_KINDS`."""
        return LLMError.from_kind(
            kind,
            message,
            retry_after=retry_after,
            status=status,
            provider=self.provider,
            details=details,
        )

    # -- the answer -------------------------------------------------------------------

    @abstractmethod
    async def chat(self, chat: ChatRequest) -> ChatResponse:
        """One whole reply."""

    @abstractmethod
    def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Text deltas as they come, then one last chunk with the calls, reason and usage."""

    async def aclose(self) -> None:  # noqa: B027 - a no-op every backend shares, not a hook to fill
        """Nothing to release: each request has a connection of its own."""
