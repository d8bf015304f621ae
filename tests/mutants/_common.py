"""The bugs that read the same on every wire, written once, and what the zoos share.

Strategy: a shared bug is a mixin over :class:`ReferenceBackend`; :meth:`Zoo.shared`
puts it in front of one wire's reference backend, so that a zoo lists it in one
line and keeps a class only for the bugs that are its wire's own. A bug that shows
differently on each wire (which event a half-built call hides in, how a stream
error is swallowed) stays in the wire's zoo.
"""

from __future__ import annotations

import asyncio
import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Dict, List, Mapping, Optional, TypeVar

from conformance.contract import AbortSignal, ChatRequest, ChatResponse, LLMError, StreamChunk, ToolCall
from conformance.reference._base import ReferenceBackend
from conformance.reference._decoders import SSEDecoder, SSEEvent
from conformance.reference._transport import Response

from . import Mutant

T = TypeVar("T")

#: The caller's own headers a "forgets headers" mutant is built with, and the matrix expects.
HEADERS = {"x-gateway-key": "mutant-matrix"}

#: How long a leaky mutant keeps its connection after the abort: past the case's 1 s bound.
LEAK_SECONDS = 1.2


class Leak:
    """Races reads against the abort signal but leaves the connection open when it fires."""

    def __init__(self) -> None:
        self.parked: List[asyncio.Future[Any]] = []
        self.responses: List[Any] = []

    async def race(self, awaitable: Awaitable[T], signal: Optional[AbortSignal]) -> T:
        work = asyncio.ensure_future(awaitable)
        if signal is None:
            return await work
        waiter = asyncio.ensure_future(signal.wait())
        done, _ = await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            waiter.cancel()
            return work.result()
        self.parked.append(work)
        assert signal.reason is not None
        raise signal.reason

    def wrap(self, response: Any, signal: Optional[AbortSignal]) -> LeakyResponse:
        self.responses.append(response)
        return LeakyResponse(response, signal, self)

    async def release(self) -> None:
        """Close what was left open, late."""
        if self.parked or self.responses:
            await asyncio.sleep(LEAK_SECONDS)
        for work in self.parked:
            work.cancel()
        for work in self.parked:
            try:
                await work
            except BaseException:  # noqa: BLE001 - cleanup of a deliberately broken backend
                pass
        for response in self.responses:
            await response.aclose()


class LeakyResponse:
    """A response whose reads give up on abort without closing anything."""

    def __init__(self, response: Any, signal: Optional[AbortSignal], leak: Leak) -> None:
        self.response = response
        self.signal = signal
        self.leak = leak
        self.status = response.status
        self.headers = response.headers
        self.iterator = response.__aiter__()

    def __aiter__(self) -> LeakyResponse:
        return self

    async def __anext__(self) -> bytes:
        chunk: bytes = await self.leak.race(self.iterator.__anext__(), self.signal)
        return chunk

    async def read(self) -> bytes:
        data: bytes = await self.leak.race(self.response.read(), self.signal)
        return data

    async def aclose(self) -> None:
        """Leave the connection open: that is the bug."""


class PerChunkSSEDecoder(SSEDecoder):
    """Decodes every network chunk on its own, so a character cut in two is lost."""

    def feed(self, chunk: bytes) -> List[SSEEvent]:
        return super().feed(chunk.decode("utf-8", errors="replace").encode("utf-8"))


# -- the zoo ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SharedBug:
    """A bug every wire can have: its mutant's name and bug, and the mixin that plants it."""

    name: str
    bug: str
    mixin: type
    headers: Mapping[str, str] = field(default_factory=dict)


class Zoo:
    """One wire's mutants: its reference backend with one bug each.

    ``path`` is what the backend's base URL adds to the provider's (``/v1`` for OpenAI).
    """

    def __init__(self, wire: str, backend: type, *, path: str = "") -> None:
        self.wire = wire
        self.backend = backend
        self.path = path

    def mutant(
        self, name: str, bug: str, cls: type, *, headers: Optional[Mapping[str, str]] = None
    ) -> Mutant:
        """The mutant ``cls`` builds: the wire's own subclass, or a shared mixin put in front of it."""
        backend = cls
        if not issubclass(cls, self.backend):
            module = {"__module__": cls.__module__}
            backend = types.new_class(
                cls.__name__, (cls, self.backend), exec_body=lambda ns: ns.update(module)
            )

        def create(url: str, http2: bool) -> Any:
            return backend(f"{url}{self.path}", http2=http2, headers=headers or None)

        return Mutant(name, bug, self.wire, create, headers=dict(headers or {}))

    def shared(self, shared: SharedBug, bug: Optional[str] = None) -> Mutant:
        """The wire's mutant of a shared bug; ``bug`` says how it shows on this wire."""
        return self.mutant(shared.name, bug or shared.bug, shared.mixin, headers=shared.headers)


# -- the bugs every wire can have ---------------------------------------------------------


class DropsUsage:
    @staticmethod
    def usage(*args: Any) -> None:
        return None


def mislabels(found: str, reported: str) -> type:
    """A mixin that reports an error of kind ``found`` as kind ``reported``.

    It changes the kind where every wire builds its errors, so one mixin serves
    though each wire's ``error_kind`` reads different things.
    """

    class Mislabels(ReferenceBackend):
        def build_error(self, kind: str, message: str, **kwargs: Any) -> LLMError:
            return super().build_error(reported if kind == found else kind, message, **kwargs)

    Mislabels.__name__ = "".join(word.title() for word in f"{found}_as_{reported}".split("_"))
    return Mislabels


def reports_stop_for(*reasons: str) -> type:
    """A mixin that calls a turn that ended for one of ``reasons`` a "stop"."""

    class ReportsStop:
        def finish_reason(self, *args: Any) -> str:
            result: str = super().finish_reason(*args)  # type: ignore[misc]
            return "stop" if result in reasons else result

    return ReportsStop


class IgnoresRetryAfter(ReferenceBackend):
    def retry_after(self, headers: Mapping[str, str]) -> Optional[float]:
        return None


class LosesTextBeforeError(ReferenceBackend):
    """Holds every chunk back to the end of the stream, so an error loses the text before it."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = []
        async for chunk in super().chat_stream(chat):
            held.append(chunk)
        for chunk in held:
            yield chunk


class DecodesPerChunk:
    """Decodes the SSE stream one network chunk at a time."""

    def sse_decoder(self) -> SSEDecoder:
        return PerChunkSSEDecoder()


class ForgetsHeaders(ReferenceBackend):
    def headers(self, stream: bool) -> Dict[str, str]:
        return {k: v for k, v in super().headers(stream).items() if k not in self.extra_headers}


class PassesStopThrough:
    """Maps the provider's reason alone, as if the turn held no call."""

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        result: str = super().finish_reason(reason, [])  # type: ignore[misc]
        return result


class RequiresCallId:
    """Takes the call's id as given, where the provider may send none."""

    def tool_call(self, raw: Mapping[str, Any]) -> Optional[ToolCall]:
        call: Optional[ToolCall] = super().tool_call(raw)  # type: ignore[misc]
        if call is None:
            return None
        return ToolCall(str(raw.get("id", "")), call.name, call.arguments)


class SendsNoTools(ReferenceBackend):
    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        body = super().body(chat, stream)
        del body["tools"]
        return body


class Retries(ReferenceBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        try:
            return await super().send(chat, stream)
        except LLMError as error:
            if error.status is None:
                raise
            return await super().send(chat, stream)


class IgnoresAbort(ReferenceBackend):
    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        return await super().send(dataclasses.replace(chat, signal=None), stream)


class AbortsWithoutClosing(IgnoresAbort):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.leak = Leak()

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        response = await self.leak.race(super().send(chat, stream), chat.signal)
        return self.leak.wrap(response, chat.signal)  # type: ignore[return-value]

    async def aclose(self) -> None:
        await self.leak.release()


class WrapsCancellation(ReferenceBackend):
    async def chat(self, chat: ChatRequest) -> ChatResponse:
        try:
            return await super().chat(chat)
        except asyncio.CancelledError:
            raise LLMError.from_kind("server_error", "cancelled") from None

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except asyncio.CancelledError:
            raise LLMError.from_kind("server_error", "cancelled") from None


DROPS_USAGE = SharedBug("drops-usage", "reports no usage", DropsUsage)
QUOTA_AS_RATE_LIMIT = SharedBug(
    "quota-as-rate-limit",
    "treats an exhausted quota as a retryable rate limit",
    mislabels("quota", "rate_limit"),
)
AUTH_AS_SERVER_ERROR = SharedBug(
    "auth-as-server-error", "calls a bad key a retryable server error", mislabels("auth", "server_error")
)
OVERLOAD_AS_SERVER_ERROR = SharedBug(
    "overload-as-server-error", "calls an overload a server error", mislabels("overloaded", "server_error")
)
SERVER_ERROR_AS_FATAL = SharedBug(
    "server-error-as-fatal",
    "calls a 500 a non-retryable bad request",
    mislabels("server_error", "invalid_request"),
)
CONTEXT_OVERFLOW_AS_BAD_REQUEST = SharedBug(
    "context-overflow-as-bad-request",
    "misses the context overflow",
    mislabels("context_overflow", "invalid_request"),
)
FILTER_AS_STOP = SharedBug(
    "filter-as-stop", 'calls a content-filtered turn "stop"', reports_stop_for("content_filter")
)
STOP_ON_TOOL_TURN = SharedBug("stop-on-tool-turn", 'passes "stop" through on a tool turn', PassesStopThrough)
REQUIRES_CALL_ID = SharedBug("requires-call-id", "takes the call id as given", RequiresCallId)
IGNORES_RETRY_AFTER = SharedBug("ignores-retry-after", "drops the provider's retry-after", IgnoresRetryAfter)
LOSES_TEXT_BEFORE_ERROR = SharedBug(
    "loses-text-before-error", "holds the text back until the end, then fails", LosesTextBeforeError
)
DECODES_PER_CHUNK = SharedBug("decodes-per-chunk", "decodes UTF-8 per network chunk", DecodesPerChunk)
FORGETS_HEADERS = SharedBug("forgets-headers", "drops the caller's headers", ForgetsHeaders, HEADERS)
SENDS_NO_TOOLS = SharedBug("sends-no-tools", "leaves the tools out of the request", SendsNoTools)
RETRIES = SharedBug("retries", "retries a failed request once", Retries)
IGNORES_ABORT = SharedBug("ignores-abort", "never looks at the abort signal", IgnoresAbort)
ABORTS_WITHOUT_CLOSING = SharedBug(
    "aborts-without-closing", "raises the reason but leaves the connection open", AbortsWithoutClosing
)
WRAPS_CANCELLATION = SharedBug(
    "wraps-cancellation", "turns CancelledError into an LLMError", WrapsCancellation
)
