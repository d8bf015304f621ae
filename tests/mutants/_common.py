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
import json
import time
import types
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Dict, List, Mapping, Optional, Tuple, TypeVar

from conformance._stall import WATCH
from conformance.contract import (
    AbortSignal,
    ChatRequest,
    ChatResponse,
    LLMError,
    Message,
    Reasoning,
    StreamChunk,
    ToolCall,
    ToolResult,
    Usage,
)
from conformance.reference._base import ReferenceBackend
from conformance.reference._decoders import SSEDecoder, SSEEvent
from conformance.reference._transport import Response, TransportError

from ..hygiene import blocks_on_purpose
from . import Mutant

T = TypeVar("T")

#: The caller's own headers a "forgets headers" mutant is built with, and the matrix expects.
HEADERS = {"x-gateway-key": "mutant-matrix"}


async def _outcome(awaitable: Awaitable[T]) -> Tuple[bool, Any]:
    """``(True, value)`` or ``(False, error)``: a task that never ends with an error of its own,
    so a leaked one is never logged as "never retrieved", whenever the case ends."""
    try:
        return True, await awaitable
    except BaseException as error:  # noqa: BLE001 - handed to whoever awaits, if anyone
        return False, error


class Leak:
    """Races reads against the abort signal but leaves the connection open when it fires."""

    def __init__(self) -> None:
        self.parked: List[asyncio.Future[Any]] = []
        self.responses: List[Any] = []

    async def race(self, awaitable: Awaitable[T], signal: Optional[AbortSignal]) -> T:
        if signal is not None and signal.aborted:
            # Checked before each read, so a stream with much buffered data stops at once.
            close = getattr(awaitable, "close", None)
            if callable(close):
                close()
            signal.raise_reason()
        if signal is None:
            return await awaitable
        work = asyncio.ensure_future(_outcome(awaitable))
        waiter = asyncio.ensure_future(signal.wait())
        done, _ = await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            waiter.cancel()
            ok, value = work.result()
            if not ok:
                raise value
            return value  # type: ignore[no-any-return]
        # Left running: its error, when the provider closes under it, is part of the bug.
        self.parked.append(work)
        assert signal.reason is not None
        raise signal.reason

    def wrap(self, response: Any, signal: Optional[AbortSignal]) -> LeakyResponse:
        self.responses.append(response)
        return LeakyResponse(response, signal, self)

    async def release(self) -> None:
        """Close what was left open: when the backend is closed, which is too late."""
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
    """A bug every wire can have: its mutant's name and bug, the mixin that plants it,
    and the checks that catch it in ``cases`` (see :class:`Mutant`)."""

    name: str
    bug: str
    mixin: type
    checks: Tuple[str, ...]
    cases: Tuple[str, ...]
    headers: Mapping[str, str] = field(default_factory=dict)
    transports: Tuple[str, ...] = ("h1", "h2")


class Zoo:
    """One wire's mutants: its reference backend with one bug each.

    ``path`` is what the backend's base URL adds to the provider's (``/v1`` for OpenAI).
    """

    def __init__(self, wire: str, backend: type, *, path: str = "") -> None:
        self.wire = wire
        self.backend = backend
        self.path = path

    def mutant(
        self,
        name: str,
        bug: str,
        cls: type,
        *,
        checks: Tuple[str, ...],
        cases: Tuple[str, ...],
        headers: Optional[Mapping[str, str]] = None,
        transports: Tuple[str, ...] = ("h1", "h2"),
        variants: Tuple[str, ...] = (),
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

        return Mutant(
            name,
            bug,
            self.wire,
            create,
            headers=dict(headers or {}),
            checks=checks,
            cases=cases,
            transports=transports,
            variants=variants,
        )

    def every_case(self) -> Tuple[str, ...]:
        """Every case this wire runs but tool-result: the cases of a bug that shows in every request."""
        from conformance.cases import BackendConformanceTarget, backend_conformance_cases
        from conformance.wires import WIRES

        target = BackendConformanceTarget("cases", WIRES[self.wire], lambda url: None)
        # On tool-result the wire reads the history back, and a request its provider would
        # refuse is answered with the 400 that the history check reports alone.
        return tuple(
            case.name
            for case in backend_conformance_cases(target)
            if not case.skip and case.scenario != "tool-result"
        )

    def unparsed(self) -> List[Mutant]:
        """The mutants of :data:`UNPARSED_BUGS`, on the corrupt-arguments cases this wire runs."""
        from conformance.cases import BackendConformanceTarget, backend_conformance_cases
        from conformance.wires import WIRES

        target = BackendConformanceTarget("cases", WIRES[self.wire], lambda url: None)
        runs = {case.name for case in backend_conformance_cases(target) if not case.skip}
        cases = tuple(c for c in CORRUPT_CASES if c in runs)
        return [self.shared(bug, cases=cases) for bug in UNPARSED_BUGS] if cases else []

    def ends_at_finish_reason(self, cls: type) -> Mutant:
        """The mutant of :class:`EndsAtFinishReason`, ``cls`` saying when the wire's finish reason came.

        Caught only on the cuts after the finish reason (the connection closed, or the
        response ended properly), for the turn it returns as finished: its call and its
        finish reason came before the cut, and the turn's end never did.
        """
        from conformance.wires._variants import AFTER_FINISH, CLEAN_ENDS

        clean = next(name for name, cut in CLEAN_ENDS.items() if cut == AFTER_FINISH)

        return self.mutant(
            "ends-at-finish-reason",
            "takes the finish reason for the end of the turn, and a close after it for a clean end",
            cls,
            checks=("cut-raised", "cut-finish", "cut-tool-call"),
            cases=("stream-cut/stream",),
            variants=(AFTER_FINISH, clean),
        )

    def trusts_clean_end(self) -> Mutant:
        """The mutant of :data:`TRUSTS_CLEAN_END`: caught on the shapes whose response ends
        properly short of the terminal event, and on no cut the transport reports.

        Where the wire has a clean end after the finish reason, the whole call that came
        before it is handed out too, so that shape adds ``cut-tool-call``.
        """
        from conformance.wires import WIRES
        from conformance.wires._variants import AFTER_FINISH, CLEAN_ENDS

        names = {v.name for v in WIRES[self.wire].variants("stream-cut", "stream")}
        if AFTER_FINISH in names:
            return self.shared(TRUSTS_CLEAN_END, checks=(*TRUSTS_CLEAN_END.checks, "cut-tool-call"))
        return self.mutant(
            TRUSTS_CLEAN_END.name,
            TRUSTS_CLEAN_END.bug,
            TRUSTS_CLEAN_END.mixin,
            checks=TRUSTS_CLEAN_END.checks,
            cases=TRUSTS_CLEAN_END.cases,
            variants=tuple(sorted(names & set(CLEAN_ENDS))),
        )

    def every_wire(self, *, leave_out: Tuple[SharedBug, ...] = ()) -> List[Mutant]:
        """The mutants of the bugs every wire can have (:data:`EVERY_WIRE`), less ``leave_out``:
        a bug a wire's shapes allow (a throttle its provider types as one, reported as a
        rate limit) is no bug there; then :meth:`trusts_clean_end`."""
        return [*(self.shared(bug) for bug in EVERY_WIRE if bug not in leave_out), self.trusts_clean_end()]

    def shared(
        self,
        shared: SharedBug,
        bug: Optional[str] = None,
        *,
        cases: Optional[Tuple[str, ...]] = None,
        checks: Optional[Tuple[str, ...]] = None,
    ) -> Mutant:
        """The wire's mutant of a shared bug; ``bug`` says how it shows on this wire, and
        ``cases`` and ``checks`` which cases catch it, and which checks, where they are not
        the shared ones."""
        return self.mutant(
            shared.name,
            bug or shared.bug,
            shared.mixin,
            checks=checks or shared.checks,
            cases=cases or shared.cases,
            headers=shared.headers,
            transports=shared.transports,
        )


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


class UsageOnTextOnly:
    """Passes usage on for a plain text turn only, as if tool turns had none."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response: ChatResponse = await super().chat(chat)  # type: ignore[misc]
        if response.finish_reason != "stop":
            response = dataclasses.replace(response, usage=None)
        return response

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):  # type: ignore[misc]
            if chunk.finish_reason not in (None, "stop"):
                chunk = dataclasses.replace(chunk, usage=None)
            yield chunk


class DropsTextOnLength:
    """Keeps a turn's text only when the turn ended cleanly: a cut-off turn says nothing."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response: ChatResponse = await super().chat(chat)  # type: ignore[misc]
        if response.finish_reason == "length":
            response = dataclasses.replace(response, content="")
        return response

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held: List[StreamChunk] = []
        async for chunk in super().chat_stream(chat):  # type: ignore[misc]
            held.append(chunk)
        cut = any(chunk.finish_reason == "length" for chunk in held)
        for chunk in held:
            yield dataclasses.replace(chunk, content="") if cut else chunk


class Edits(ReferenceBackend):
    """Changes every error it builds after the fact; subclasses say how."""

    def build_error(self, kind: str, message: str, **kwargs: Any) -> LLMError:
        error = super().build_error(kind, message, **kwargs)
        self.edit(error)
        return error

    def edit(self, error: LLMError) -> None:
        raise NotImplementedError


class QuotaRetryable(Edits):
    def edit(self, error: LLMError) -> None:
        if error.kind == "quota":
            error.retryable = True


class DetailsWithoutKind(Edits):
    def edit(self, error: LLMError) -> None:
        error.details = {k: v for k, v in error.details.items() if k != "kind"}


class DropsStatus(Edits):
    def edit(self, error: LLMError) -> None:
        error.status = None


class RetryAfterEverywhere(Edits):
    """Suggests a one-second wait on every retryable error, whatever the provider said."""

    def edit(self, error: LLMError) -> None:
        if error.retryable and error.retry_after is None and error.kind != "rate_limit":
            error.retry_after = 1.0


class InventsRetryAfter(Edits):
    """Reports a minute's delay on a rate limit whose reply named none, as a default."""

    def edit(self, error: LLMError) -> None:
        if error.kind == "rate_limit" and error.retry_after is None:
            error.retry_after = 60.0


class WrapsAbortReason(ReferenceBackend):
    """Closes at once on abort but raises its own error instead of the caller's reason."""

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        try:
            return await super().send(chat, stream)
        except BaseException as exc:
            if chat.signal is not None and exc is chat.signal.reason:
                raise LLMError.from_kind("server_error", "request aborted") from exc
            raise

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except BaseException as exc:
            if chat.signal is not None and exc is chat.signal.reason:
                raise LLMError.from_kind("server_error", "stream aborted") from exc
            raise


#: Twice the half second the contract gives an abort, counted as the bound counts it
#: (:func:`late_by`).
SLOW_ABORT = 1.0


def _ran_since(began: float) -> float:
    """Seconds since ``began`` in which this process could run: what the abort bounds count."""
    now = time.monotonic()
    return now - began - WATCH.between(began, now)


async def late_by(seconds: float) -> None:
    """Wait until ``seconds`` have passed in which this process could run.

    The abort bounds leave out what stalled the whole process (``conformance._stall``), so
    a wait of plain wall time comes out shorter on a loaded machine, where stalls add up
    (at load 20, a second's wait came out under the half-second bound and the mutant
    passed). Counted the same way, the mutant is as late as it says, whatever the load.
    """
    loop = asyncio.get_running_loop()
    began = time.monotonic()
    left = seconds
    while left > 0:
        await asyncio.sleep(left)
        # The watch is asked from a thread: it may wait for its next tick.
        left = seconds - await loop.run_in_executor(None, _ran_since, began)


def blocking_late_by(seconds: float) -> None:
    """:func:`late_by` as one blocking call."""
    began = time.monotonic()
    left = seconds
    while left > 0:
        time.sleep(left)
        left = seconds - _ran_since(began)


class SlowAbort(ReferenceBackend):
    """Closes the connection at once on abort, but raises the reason only after a while."""

    async def delay(self) -> None:
        await late_by(SLOW_ABORT)

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        try:
            return await super().chat(chat)
        except BaseException as exc:
            if chat.signal is not None and exc is chat.signal.reason:
                await self.delay()
            raise

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except BaseException as exc:
            if chat.signal is not None and exc is chat.signal.reason:
                await self.delay()
            raise


class BlocksLoopOnAbort(SlowAbort):
    """Closes at once on abort, then blocks its own event loop before it raises the reason.

    A blocking call holds up the backend, not the process: the stall watch must not
    excuse it (``conformance._stall``).
    """

    async def delay(self) -> None:
        # A few turns of the loop first, for the transport's close to reach the socket:
        # the bug under test is the late reason, not a late close.
        await asyncio.sleep(0.05)
        with blocks_on_purpose():
            blocking_late_by(SLOW_ABORT)


#: What the "sleeps out the delay" mutant waits where the provider named none.
RETRY_SLEEP = 7.0


class SleepsAndRetries(ReferenceBackend):
    """Sleeps out a retryable error's delay and tries again, so the caller waits, unanswered."""

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        try:
            return await super().send(chat, stream)
        except LLMError as error:
            if not error.retryable or error.status is None:
                raise
            await asyncio.sleep(error.retry_after or RETRY_SLEEP)
            return await super().send(chat, stream)


class CloseRaises(ReferenceBackend):
    async def aclose(self) -> None:
        raise RuntimeError("the client was already closed")


class ShieldsRequest(ReferenceBackend):
    """Shields its request from cancellation, so a cancelled caller leaves it running."""

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        self.shielded = asyncio.ensure_future(super().send(chat, stream))
        return await asyncio.shield(self.shielded)

    async def aclose(self) -> None:
        shielded = getattr(self, "shielded", None)
        if shielded is not None:
            shielded.cancel()
            try:
                response = await shielded
            except BaseException:  # noqa: BLE001 - cleanup of a deliberately broken backend
                return
            await response.aclose()


class KeepsH2ConnectionOnAbort(AbortsWithoutClosing):
    """Leaves an h2 stream unreset and its connection open on abort (to reuse it), as
    a pooling client may; over HTTP/1.1 it closes as it must."""

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        if not self.http2:
            return await ReferenceBackend.send(self, chat, stream)
        return await super().send(chat, stream)


class RewritesHistory(ReferenceBackend):
    """Renders a changed conversation; subclasses say how each message changes."""

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        messages = tuple(self.rewrite(m) for m in chat.messages)
        return await super().send(dataclasses.replace(chat, messages=messages), stream)

    def rewrite(self, message: Message) -> Message:
        raise NotImplementedError


class ResultAsUserText(RewritesHistory):
    """Sends each tool result back as a plain user message, its call left unanswered."""

    def rewrite(self, message: Message) -> Message:
        return Message("user", message.content) if message.role == "tool" else message


class ErrorAsEmptyResult(RewritesHistory):
    """Sends a failed tool's result back as an empty success, its error lost."""

    def rewrite(self, message: Message) -> Message:
        result = message.tool_result
        if result is None or result.error is None:
            return message
        return Message.tool(ToolResult(result.call_id, result.name, content=""))


class DropsReasoning(RewritesHistory):
    """Leaves the provider's reasoning (and signatures) out of the turns it sends back."""

    def rewrite(self, message: Message) -> Message:
        if message.role != "assistant":
            return message
        calls = tuple(dataclasses.replace(c, reasoning=()) for c in message.tool_calls)
        return dataclasses.replace(message, reasoning=(), tool_calls=calls)


class EditsCalls(ReferenceBackend):
    """Changes a turn's complete calls after the fact; subclasses say how."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response = await super().chat(chat)
        return dataclasses.replace(response, tool_calls=tuple(self.edit(list(response.tool_calls))))

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):
            if chunk.tool_calls:
                chunk = dataclasses.replace(chunk, tool_calls=tuple(self.edit(list(chunk.tool_calls))))
            yield chunk

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        raise NotImplementedError


class SwapsCallIds(EditsCalls):
    """Pairs the ids of a turn's calls with the wrong calls, as a parser that keys fragments
    by arrival instead of by the provider's index does."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        if len(calls) < 2:
            return calls
        ids = [c.id for c in calls]
        return [dataclasses.replace(c, id=i) for c, i in zip(calls, ids[1:] + ids[:1])]


class DropsCallReasoning(EditsCalls):
    """Returns each call without the reasoning the provider tied to it (Gemini's
    ``thoughtSignature`` on the ``functionCall`` part)."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [dataclasses.replace(c, reasoning=()) for c in calls]


class KeepsIdSuffix(EditsCalls):
    """Marks each call's id with a suffix of its own (``_b7f3``), as a client that keys its
    calls by a local id does, and never takes it off: the next turn sends the marked id."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [dataclasses.replace(c, id=f"{c.id}_b7f3") if c.id else c for c in calls]


class KeepsFirstCall(EditsCalls):
    """Keeps one call per turn, as a parser written for a single call does."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return calls[:1]


class EditsReasoning(ReferenceBackend):
    """Changes the reasoning a turn returned after the fact; subclasses say how."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response = await super().chat(chat)
        return self.edit_response(response)

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):
            for edited in self.edit_chunk(chunk):
                yield edited

    def edit_response(self, response: ChatResponse) -> ChatResponse:
        return dataclasses.replace(response, reasoning=tuple(self.edit(list(response.reasoning))))

    def edit_chunk(self, chunk: StreamChunk) -> List[StreamChunk]:
        if not chunk.reasoning:
            return [chunk]
        return [dataclasses.replace(chunk, reasoning=tuple(self.edit(list(chunk.reasoning))))]

    def edit(self, items: List[Reasoning]) -> List[Reasoning]:
        return items


class DropsReturnedReasoning(EditsReasoning):
    """Reads the answer and leaves the reasoning that came with it behind."""

    def edit(self, items: List[Reasoning]) -> List[Reasoning]:
        return []


class DropsToolTurnReasoning(ReferenceBackend):
    """Passes a text turn's reasoning on, and leaves it behind on a turn that calls a tool, as a
    reader that keeps thinking only for the answer it shows does."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response = await super().chat(chat)
        return dataclasses.replace(response, reasoning=()) if response.tool_calls else response

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = [chunk async for chunk in super().chat_stream(chat)]
        calls = any(chunk.tool_calls for chunk in held)
        for chunk in held:
            yield dataclasses.replace(chunk, reasoning=()) if calls and chunk.reasoning else chunk


class LosesSignature(EditsReasoning):
    """Keeps the reasoning's text but not its opaque part: the signature, the encrypted data."""

    def edit(self, items: List[Reasoning]) -> List[Reasoning]:
        return [dataclasses.replace(r, signature="", data="") for r in items]


def _thinking_text(items: Any) -> str:
    return "".join(t for r in items for t in (r.text, *r.summary) if t)


class ThinkingAsText(EditsReasoning):
    """Passes the reasoning on, and puts its text in front of the answer too."""

    def edit_response(self, response: ChatResponse) -> ChatResponse:
        return dataclasses.replace(response, content=_thinking_text(response.reasoning) + response.content)

    def edit_chunk(self, chunk: StreamChunk) -> List[StreamChunk]:
        thinking = _thinking_text(chunk.reasoning)
        return [StreamChunk(content=thinking), chunk] if thinking else [chunk]


# -- a stream or body cut short ----------------------------------------------------------


def is_cut(error: BaseException) -> bool:
    """Whether ``error`` is the reference's error for a body the connection cut short."""
    return isinstance(error, LLMError) and "transport" in error.details


class _EndOfBody(Exception):
    """How a body cut short ends for a backend that takes the cut for its end."""


class QuietBody:
    """A response whose body, cut short, simply ends: read as a reader that trusts the close."""

    def __init__(self, response: Response) -> None:
        self.response = response
        self.status = response.status
        self.headers = response.headers
        self.iterator = response.__aiter__()

    def __aiter__(self) -> QuietBody:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk: bytes = await self.iterator.__anext__()
        except _EndOfBody:
            raise StopAsyncIteration from None
        return chunk

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self])

    async def aclose(self) -> None:
        await self.response.aclose()


class TakesCutForEnd(ReferenceBackend):
    """Takes a connection that closed for the end of the turn, and looks for no terminal event."""

    def cut_error(self, error: TransportError) -> BaseException:
        return _EndOfBody(str(error))

    def check_ended(self, ended: bool, terminal: str) -> None:
        return None

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        return QuietBody(await super().send(chat, stream))  # type: ignore[return-value]


class TrustsCleanEnd(ReferenceBackend):
    """Takes the end of the body for the end of the turn: a transport error still fails it,
    but a stream whose response ends properly is taken as whole, terminal event or not."""

    def check_ended(self, ended: bool, terminal: str) -> None:
        return None


class RaisesTransportError(ReferenceBackend):
    """Lets the transport's own error out on a cut: no kind and no retryable for a caller to read."""

    def cut_error(self, error: TransportError) -> BaseException:
        return error


class CutNotRetryable(ReferenceBackend):
    """Calls a cut a server error, but one not worth another try."""

    def cut_error(self, error: TransportError) -> BaseException:
        built = super().cut_error(error)
        if isinstance(built, LLMError):
            built.retryable = False
        return built


class CutInventsDelay(ReferenceBackend):
    """Asks for an hour's wait before a retry of a cut connection, a delay nobody sent."""

    def cut_error(self, error: TransportError) -> BaseException:
        built = super().cut_error(error)
        if isinstance(built, LLMError):
            built.retry_after = 3600.0
        return built


class CutInventsStatus(ReferenceBackend):
    """Gives the error for a cut connection a status of its own (599), one nobody sent."""

    def cut_error(self, error: TransportError) -> BaseException:
        built = super().cut_error(error)
        if isinstance(built, LLMError):
            built.status = 599
        return built


class CutKindOfItsOwn(ReferenceBackend):
    """Reports a cut with a kind of its own, outside the contract's six."""

    def cut_error(self, error: TransportError) -> BaseException:
        return LLMError(
            f"network error: {error}",
            code="LLM_NETWORK_ERROR",
            kind="network",
            retryable=True,
            provider=self.provider,
        )


class SwallowsCut(ReferenceBackend):
    """Ends quietly on a cut: a stream just stops, a whole reply comes back empty."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        try:
            return await super().chat(chat)
        except LLMError as error:
            if not is_cut(error):
                raise
            return ChatResponse(content="", finish_reason="stop")

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except LLMError as error:
            if not is_cut(error):
                raise


class FinishesOnCut(ReferenceBackend):
    """Reports a cut as a last chunk with finish reason "error", then raises it."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except LLMError as error:
            if is_cut(error):
                yield StreamChunk(finish_reason="error")
            raise


class EndsAtFinishReason(ReferenceBackend):
    """Takes the finish reason for the end of the turn: a connection closed after it is a
    clean end, and what came is returned as the finished turn.

    A wire's zoo says when the finish reason came: it sets :attr:`finished` as the event
    that carries it is read.
    """

    finished = False

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        self.finished = False
        return QuietBody(await super().send(chat, stream))  # type: ignore[return-value]

    def cut_error(self, error: TransportError) -> BaseException:
        return _EndOfBody(str(error)) if self.finished else super().cut_error(error)

    def check_ended(self, ended: bool, terminal: str) -> None:
        if not self.finished:
            super().check_ended(ended, terminal)


class FlushesCallsOnCut(ReferenceBackend):
    """Hands on the calls it gathered so far when the stream fails, then raises.

    A wire's zoo says where the calls are gathered: each call it sees goes into
    :attr:`gathered` (a call whose arguments did not come yet has ``{}``).
    """

    gathered: List[ToolCall]

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.gathered = []
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except LLMError as error:
            if is_cut(error) and self.gathered:
                yield StreamChunk(tool_calls=tuple(self.gathered))
            raise


class ConcatenatesIds(EditsCalls):
    """Gathers ids in one buffer for the whole turn, as a stream accumulator that appends
    each id fragment to the last does: ``call_A``, then ``call_Acall_B``."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        ids = [c.id for c in calls]
        return [dataclasses.replace(c, id="".join(ids[: i + 1])) for i, c in enumerate(calls)]


class OneIdForEveryCall(EditsCalls):
    """Gives every call of a turn the first call's id, as a parser that keeps one id per turn does."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [dataclasses.replace(c, id=calls[0].id) for c in calls]


class NamespacesToolName(EditsCalls):
    """Reports each call under a name of its own making (``functions.get_weather``)."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [dataclasses.replace(c, name=f"functions.{c.name}") for c in calls]


class DropsOptionalArguments(EditsCalls):
    """Keeps only the arguments the schema requires, as a parser that validates too eagerly does."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [
            dataclasses.replace(c, arguments={k: v for k, v in c.arguments.items() if k == "city"})
            for c in calls
        ]


def repaired(text: str) -> Any:
    """What a lenient parser makes of broken argument JSON: the first whole value, else the
    text with its open strings and objects closed; ``{}`` where neither parses."""
    from ..gate_zoo import close_partial

    try:
        return json.JSONDecoder().raw_decode(text)[0]
    except ValueError:
        closed = close_partial(text)
        return closed if isinstance(closed, dict) else {}


class DropsUnparsedCall(EditsCalls):
    """Keeps only the calls whose arguments parsed, as if broken JSON were no call at all."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [c for c in calls if c.unparsed_arguments is None]


class RepairsArguments(EditsCalls):
    """Repairs broken argument JSON into an object and drops the text it came as."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [
            c
            if c.unparsed_arguments is None
            else dataclasses.replace(c, arguments=repaired(c.unparsed_arguments), unparsed_arguments=None)
            for c in calls
        ]


#: The text the "announces its calls" mutant adds to a tool turn.
ANNOUNCEMENT = "[calling get_weather]"


class AnnouncesCalls(ReferenceBackend):
    """Adds words of its own to a turn that calls a tool, for a chat window to show."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response = await super().chat(chat)
        if response.tool_calls:
            response = dataclasses.replace(response, content=(response.content or "") + ANNOUNCEMENT)
        return response

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):
            if chunk.tool_calls:
                yield StreamChunk(content=ANNOUNCEMENT)
            yield chunk


class InventsCall(ReferenceBackend):
    """Reports the one tool offered as called on a turn that called none."""

    def invented(self) -> ToolCall:
        return ToolCall("call_invented", "get_weather", {})

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response = await super().chat(chat)
        if not response.tool_calls:
            response = dataclasses.replace(response, tool_calls=(self.invented(),))
        return response

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        called = False
        async for chunk in super().chat_stream(chat):
            called = called or bool(chunk.tool_calls)
            if chunk.finish_reason is not None and not called:
                chunk = dataclasses.replace(chunk, tool_calls=(self.invented(),))
            yield chunk


class EarlyFinish(ReferenceBackend):
    """Puts finish_reason "stop" on the first chunk of text, then the real one at the end."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        first = True
        async for chunk in super().chat_stream(chat):
            if first and chunk.content and chunk.finish_reason is None:
                first = False
                chunk = dataclasses.replace(chunk, finish_reason="stop")
            yield chunk


class UsageOnFailure(ReferenceBackend):
    """Reports zeros for the usage of a stream that failed, as a client that always closes a
    stream with a usage chunk does."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().chat_stream(chat):
                yield chunk
        except LLMError:
            yield StreamChunk(usage=Usage(0, 0, 0))
            raise


class FinishAhead(ReferenceBackend):
    """Yields the turn's finish reason once, but on a chunk of its own ahead of the text and
    calls, as a stream that reports the reason as soon as it is known does."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = [chunk async for chunk in super().chat_stream(chat)]
        reasons = [chunk.finish_reason for chunk in held if chunk.finish_reason is not None]
        if reasons:
            yield StreamChunk(finish_reason=reasons[-1])
        for chunk in held:
            yield dataclasses.replace(chunk, finish_reason=None)


class FinishOnFirstText(ReferenceBackend):
    """Yields the turn's finish reason once, but on its first chunk of text."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = [chunk async for chunk in super().chat_stream(chat)]
        reasons = [chunk.finish_reason for chunk in held if chunk.finish_reason is not None]
        first = next((i for i, chunk in enumerate(held) if chunk.content), None)
        for index, chunk in enumerate(held):
            if reasons and first is not None:
                chunk = dataclasses.replace(chunk, finish_reason=reasons[-1] if index == first else None)
            yield chunk


class UsageAfterFinish(ReferenceBackend):
    """Yields the finish reason on the chunk it came with and the usage on a chunk after it,
    as OpenAI's own stream sends them with ``stream_options.include_usage``: a backend that
    passes the provider's chunks on as they come does this, and a consumer that stops at
    the finish reason never sees the usage."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):
            if chunk.finish_reason is not None and chunk.usage is not None:
                yield dataclasses.replace(chunk, usage=None)
                yield StreamChunk(usage=chunk.usage)
            else:
                yield chunk


class TextAfterFinish(ReferenceBackend):
    """Holds the last character of text back and yields it after the finish reason, as a
    backend that buffers text against a stop sequence and flushes the buffer late does."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = [chunk async for chunk in super().chat_stream(chat)]
        texts = [i for i, chunk in enumerate(held) if chunk.content]
        if not texts or not any(chunk.finish_reason for chunk in held):
            for chunk in held:
                yield chunk
            return
        last = held[texts[-1]]
        held[texts[-1]] = dataclasses.replace(last, content=last.content[:-1])
        for chunk in held:
            yield chunk
        yield StreamChunk(content=last.content[-1:])


class CallsAfterFinish(ReferenceBackend):
    """Yields the finish reason with the turn's last text (or alone, where there is none) and
    the calls after it, as a backend that flushes the calls it assembled at the end does."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = [chunk async for chunk in super().chat_stream(chat)]
        reasons = [chunk.finish_reason for chunk in held if chunk.finish_reason is not None]
        calls = [call for chunk in held for call in chunk.tool_calls]
        rest = [dataclasses.replace(chunk, finish_reason=None, tool_calls=()) for chunk in held]
        texts = [i for i, chunk in enumerate(rest) if chunk.content]
        if reasons and texts:
            rest[texts[-1]] = dataclasses.replace(rest[texts[-1]], finish_reason=reasons[-1])
        elif reasons:
            rest.append(StreamChunk(finish_reason=reasons[-1]))
        for chunk in rest:
            yield chunk
        if calls:
            yield StreamChunk(tool_calls=tuple(calls))


class ReasoningAfterFinish(ReferenceBackend):
    """Yields the turn's reasoning on a chunk of its own after the finish reason, as a
    backend that collects the thinking blocks and hands them on at the end does."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        held = [chunk async for chunk in super().chat_stream(chat)]
        reasoning = [item for chunk in held for item in chunk.reasoning]
        for chunk in held:
            yield dataclasses.replace(chunk, reasoning=())
        if reasoning:
            yield StreamChunk(reasoning=tuple(reasoning))


class UnparsedOnEveryCall(EditsCalls):
    """Fills ``unparsed_arguments`` on every call with its argument text, parsed or not."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [
            dataclasses.replace(c, unparsed_arguments=json.dumps(dict(c.arguments)))
            if c.unparsed_arguments is None
            else c
            for c in calls
        ]


class FillsUnparsedArguments(EditsCalls):
    """Keeps the broken text, but fills arguments with what a partial-JSON parser guessed, as
    SDK helpers that parse fragments as they come do."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [
            c
            if c.unparsed_arguments is None
            else dataclasses.replace(c, arguments=repaired(c.unparsed_arguments))
            for c in calls
        ]


class QuotesUnparsedText(EditsCalls):
    """Keeps the broken text as a JSON string literal (quoted and escaped), not as it came."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        return [
            c
            if c.unparsed_arguments is None
            else dataclasses.replace(c, unparsed_arguments=json.dumps(c.unparsed_arguments))
            for c in calls
        ]


class RaisesOnUnparsed(EditsCalls):
    """Raises when a call's arguments do not parse, as a strict ``json.loads`` does."""

    def edit(self, calls: List[ToolCall]) -> List[ToolCall]:
        for call in calls:
            if call.unparsed_arguments is not None:
                raise ValueError(f"Unable to parse tool parameter JSON from model: {call.unparsed_arguments}")
        return calls


class StopOnUnparsedCall(ReferenceBackend):
    """Counts only the calls that parsed when it names the finish reason: a turn whose one call
    did not parse is a "stop"."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response = await super().chat(chat)
        if response.tool_calls and all(c.unparsed_arguments is not None for c in response.tool_calls):
            response = dataclasses.replace(response, finish_reason="stop")
        return response

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        parsed = unparsed = 0
        async for chunk in super().chat_stream(chat):
            unparsed += sum(c.unparsed_arguments is not None for c in chunk.tool_calls)
            parsed += sum(c.unparsed_arguments is None for c in chunk.tool_calls)
            if chunk.finish_reason is not None and unparsed and not parsed:
                chunk = dataclasses.replace(chunk, finish_reason="stop")
            yield chunk


def renames_finish(reason: str, name: str) -> type:
    """A mixin that reports the finish reason ``reason`` under the provider's raw ``name``."""

    class RenamesFinish:
        def finish_reason(self, *args: Any) -> str:
            result: str = super().finish_reason(*args)  # type: ignore[misc]
            return name if result == reason else result

    return RenamesFinish


class DropsUsageAfterTheFirstTurn:
    """Passes usage on for a one-question turn only: a turn with history, or with more than
    one call, is counted nowhere."""

    def later_turn(self, chat: ChatRequest) -> bool:
        return any(m.role == "tool" for m in chat.messages)

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        response: ChatResponse = await super().chat(chat)  # type: ignore[misc]
        if self.later_turn(chat) or len(response.tool_calls) > 1:
            response = dataclasses.replace(response, usage=None)
        return response

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):  # type: ignore[misc]
            if self.later_turn(chat) or len(chunk.tool_calls) > 1:
                chunk = dataclasses.replace(chunk, usage=None)
            yield chunk


#: The delay the "invents a quota delay" mutant reports: an hour, as a default for "later".
QUOTA_DELAY = 3600.0


class InventsQuotaDelay(Edits):
    """Reports an hour's retry_after on every exhausted quota, whatever the reply said."""

    def edit(self, error: LLMError) -> None:
        if error.kind == "quota":
            error.retry_after = QUOTA_DELAY


class HeadersOnFirstRequestOnly(ReferenceBackend):
    """Sends the caller's headers on its first request only (a model lookup before the call),
    as a client that sets them when it connects and not per request does."""

    async def send(self, chat: ChatRequest, stream: bool) -> Response:
        from conformance.reference._transport import request

        lookup = await request(
            self.url(chat, stream),
            "GET",
            headers=dict(self.extra_headers),
            http2=self.http2,
            signal=chat.signal,
            timeout=self.timeout,
        )
        try:
            await lookup.read()
        finally:
            await lookup.aclose()
        return await super().send(chat, stream)

    def headers(self, stream: bool) -> Dict[str, str]:
        return {k: v for k, v in super().headers(stream).items() if k not in self.extra_headers}


ERRORS = ("error-kind", "error-details")
DROPS_USAGE = SharedBug(
    "drops-usage", "reports no usage", DropsUsage, ("usage",), ("text/chat", "text/stream", "tool-call/chat")
)
USAGE_ON_TEXT_ONLY = SharedBug(
    "usage-on-text-only",
    "passes usage on for text turns only",
    UsageOnTextOnly,
    ("usage",),
    ("tool-call/chat", "tool-call/stream", "truncated-tool-call/stream"),
)
QUOTA_AS_RATE_LIMIT = SharedBug(
    "quota-as-rate-limit",
    "treats an exhausted quota as a retryable rate limit",
    mislabels("quota", "rate_limit"),
    ERRORS,
    ("quota/chat", "quota/stream"),
)
QUOTA_RETRYABLE = SharedBug(
    "quota-retryable", "calls an exhausted quota retryable", QuotaRetryable, ("error-kind",), ("quota/chat",)
)
AUTH_AS_SERVER_ERROR = SharedBug(
    "auth-as-server-error",
    "calls a bad key a retryable server error",
    mislabels("auth", "server_error"),
    ERRORS,
    ("auth/chat", "auth/stream"),
)
OVERLOAD_AS_SERVER_ERROR = SharedBug(
    "overload-as-server-error",
    "calls an overload a server error",
    mislabels("overloaded", "server_error"),
    ERRORS,
    ("overloaded/chat", "overloaded/stream", "stream-error/stream"),
)
SERVER_ERROR_AS_FATAL = SharedBug(
    "server-error-as-fatal",
    "calls a 500 a non-retryable bad request",
    mislabels("server_error", "invalid_request"),
    ERRORS,
    ("server-error/chat", "server-error/stream"),
)
CONTEXT_OVERFLOW_AS_BAD_REQUEST = SharedBug(
    "context-overflow-as-bad-request",
    "misses the context overflow",
    mislabels("context_overflow", "invalid_request"),
    ERRORS,
    ("context-overflow/chat", "context-overflow/stream"),
)
#: Where only the message says the prompt is too long (a plain 400), a bad request is a
#: fair reading and :data:`CONTEXT_OVERFLOW_AS_BAD_REQUEST` no bug; a retryable kind is
#: one there too, and this is what a zoo lists in its place.
CONTEXT_OVERFLOW_AS_SERVER_ERROR = SharedBug(
    "context-overflow-as-server-error",
    "calls the 400 of a prompt too long a retryable server error",
    mislabels("context_overflow", "server_error"),
    ERRORS,
    ("context-overflow/chat", "context-overflow/stream"),
)
DETAILS_WITHOUT_KIND = SharedBug(
    "details-without-kind",
    'leaves "kind" out of the error details',
    DetailsWithoutKind,
    ("error-details",),
    ("auth/chat", "overloaded/stream"),
)
DROPS_STATUS = SharedBug(
    "drops-status",
    "reports no HTTP status on an error",
    DropsStatus,
    ("error-status",),
    ("auth/chat", "server-error/stream"),
)
RETRY_AFTER_EVERYWHERE = SharedBug(
    "retry-after-everywhere",
    "invents a one-second retry_after on every retryable error",
    RetryAfterEverywhere,
    ("retry-after",),
    ("overloaded/chat", "server-error/stream"),
)
FILTER_AS_STOP = SharedBug(
    "filter-as-stop",
    'calls a content-filtered turn "stop"',
    reports_stop_for("content_filter"),
    ("finish-reason",),
    ("content-filter/chat", "content-filter/stream"),
)
STOP_ON_TOOL_TURN = SharedBug(
    "stop-on-tool-turn",
    'passes "stop" through on a tool turn',
    PassesStopThrough,
    ("finish-reason",),
    ("tool-call-with-stop/chat", "tool-call-with-stop/stream"),
)
DROPS_TEXT_ON_LENGTH = SharedBug(
    "drops-text-on-length",
    "returns no text on a turn cut off by the token limit",
    DropsTextOnLength,
    ("content",),
    ("truncated-tool-call/chat", "truncated-tool-call/stream"),
)
REQUIRES_CALL_ID = SharedBug(
    "requires-call-id",
    "takes the call id as given",
    RequiresCallId,
    ("call-id",),
    ("tool-call-with-stop/chat", "tool-call-with-stop/stream"),
)
IGNORES_RETRY_AFTER = SharedBug(
    "ignores-retry-after",
    "drops the provider's retry-after",
    IgnoresRetryAfter,
    ("retry-after",),
    ("rate-limit/chat", "rate-limit/stream"),
)
INVENTS_RETRY_AFTER = SharedBug(
    "invents-retry-after",
    "reports a 60-second retry_after on a rate limit whose reply carries no delay",
    InventsRetryAfter,
    ("retry-after",),
    ("rate-limit/chat", "rate-limit/stream"),
)
LOSES_TEXT_BEFORE_ERROR = SharedBug(
    "loses-text-before-error",
    "holds the text back until the end, then fails",
    LosesTextBeforeError,
    ("text-before-error",),
    ("stream-error/stream", "stream-cut/stream"),
)
DECODES_PER_CHUNK = SharedBug(
    "decodes-per-chunk", "decodes UTF-8 per network chunk", DecodesPerChunk, ("content",), ("text/stream",)
)
FORGETS_HEADERS = SharedBug(
    "forgets-headers",
    "drops the caller's headers",
    ForgetsHeaders,
    ("headers",),
    ("text/chat", "abort/stream", "quota/stream"),
    headers=HEADERS,
)
SENDS_NO_TOOLS = SharedBug(
    "sends-no-tools",
    "leaves the tools out of the request",
    SendsNoTools,
    ("request",),
    ("text/chat", "tool-call/stream"),
)
RETRIES = SharedBug(
    "retries",
    "retries a failed request once",
    Retries,
    ("no-retry",),
    ("server-error/chat", "server-error/stream"),
)
SLEEPS_AND_RETRIES = SharedBug(
    "sleeps-and-retries",
    "sleeps out a retryable error and tries again, leaving the caller waiting",
    SleepsAndRetries,
    ("finished",),
    ("server-error/chat",),
)
CLOSE_RAISES = SharedBug(
    "close-raises", "raises from aclose()", CloseRaises, ("backend-closed",), ("text/chat", "abort/stream")
)
IGNORES_ABORT = SharedBug(
    "ignores-abort",
    "never looks at the abort signal",
    IgnoresAbort,
    ("finished", "connection-closed"),
    ("abort/chat", "abort/stream"),
)
WRAPS_ABORT_REASON = SharedBug(
    "wraps-abort-reason",
    "closes on abort but raises its own error, not the caller's reason",
    WrapsAbortReason,
    ("abort-reason",),
    ("abort/chat", "abort/stream"),
)
SLOW_ABORT_BUG = SharedBug(
    "slow-abort",
    f"closes on abort but raises the reason only after {SLOW_ABORT} s",
    SlowAbort,
    ("abort-promptly",),
    ("abort/chat", "abort/stream"),
)
BLOCKS_LOOP_ON_ABORT_BUG = SharedBug(
    "blocks-loop-on-abort",
    f"closes on abort but blocks its event loop for {SLOW_ABORT} s before it raises the reason",
    BlocksLoopOnAbort,
    ("abort-promptly",),
    ("abort/chat", "abort/stream"),
)
ABORTS_WITHOUT_CLOSING = SharedBug(
    "aborts-without-closing",
    "raises the reason but leaves the connection open until it is closed",
    AbortsWithoutClosing,
    ("connection-closed",),
    ("abort/chat", "abort/stream", "cancel/chat", "cancel/stream"),
)
KEEPS_H2_CONNECTION_ON_ABORT = SharedBug(
    "keeps-h2-connection-on-abort",
    "leaves the h2 stream unreset and the connection open on abort",
    KeepsH2ConnectionOnAbort,
    ("connection-closed",),
    ("abort/chat", "abort/stream"),
    transports=("h2",),
)
SHIELDS_REQUEST = SharedBug(
    "shields-request",
    "shields its request from cancellation, which leaves it running",
    ShieldsRequest,
    ("connection-closed",),
    ("cancel/chat",),
)
WRAPS_CANCELLATION = SharedBug(
    "wraps-cancellation",
    "turns CancelledError into an LLMError",
    WrapsCancellation,
    ("cancel-propagates",),
    ("cancel/chat", "cancel/stream"),
)

RESULT_AS_USER_TEXT = SharedBug(
    "result-as-user-text",
    "sends a tool result back as plain user text",
    ResultAsUserText,
    ("history",),
    ("tool-result/chat", "tool-result/stream"),
)
ERROR_AS_EMPTY_RESULT = SharedBug(
    "error-as-empty-result",
    "sends a failed tool's result back as an empty success",
    ErrorAsEmptyResult,
    ("history",),
    ("tool-result/chat", "tool-result/stream"),
)
DROPS_REASONING = SharedBug(
    "drops-reasoning",
    "leaves the provider's reasoning out of the turn it sends back",
    DropsReasoning,
    ("history",),
    ("tool-result/chat", "tool-result/stream"),
)
DROPS_RETURNED_REASONING = SharedBug(
    "drops-returned-reasoning",
    "returns the answer without the reasoning the provider sent with it",
    DropsReturnedReasoning,
    ("reasoning",),
    ("reasoning/chat", "reasoning/stream"),
)
#: Listed by the zoos of the wires whose tool turn carries reasoning before its call.
DROPS_TOOL_TURN_REASONING = SharedBug(
    "drops-tool-turn-reasoning",
    "returns a tool call's turn without the reasoning the provider sent before the call",
    DropsToolTurnReasoning,
    ("reasoning",),
    ("tool-result/chat", "tool-result/stream"),
)
LOSES_SIGNATURE = SharedBug(
    "loses-signature",
    "keeps the reasoning's text but drops its signature or encrypted content",
    LosesSignature,
    ("reasoning-exact",),
    ("reasoning/chat", "reasoning/stream"),
)
THINKING_AS_TEXT = SharedBug(
    "thinking-as-text",
    "puts the thinking text in front of the answer",
    ThinkingAsText,
    ("reasoning-apart",),
    ("reasoning/chat", "reasoning/stream"),
)
SWAPS_CALL_IDS = SharedBug(
    "swaps-call-ids",
    "pairs the ids of parallel calls with the wrong calls",
    SwapsCallIds,
    ("call-id",),
    ("parallel-tool-calls/chat", "parallel-tool-calls/stream"),
)
#: Listed by the zoos of the wires whose provider ties reasoning to a call (Gemini's).
DROPS_CALL_REASONING = SharedBug(
    "drops-call-reasoning",
    "returns each call without the thoughtSignature the provider put on its functionCall part",
    DropsCallReasoning,
    ("call-reasoning",),
    ("tool-call/chat", "tool-call/stream", "parallel-tool-calls/chat", "parallel-tool-calls/stream"),
)
KEEPS_ID_SUFFIX = SharedBug(
    "keeps-id-suffix",
    "adds a suffix of its own to each call id (call-id allows it) and sends it back with the suffix",
    KeepsIdSuffix,
    ("history",),
    ("tool-result/chat", "tool-result/stream"),
)
KEEPS_FIRST_CALL = SharedBug(
    "keeps-first-call",
    "keeps only the first call of a turn",
    KeepsFirstCall,
    ("tool-calls",),
    ("parallel-tool-calls/chat", "parallel-tool-calls/stream"),
)
CUT_BOTH = ("stream-cut/chat", "stream-cut/stream")
RAISES_TRANSPORT_ERROR = SharedBug(
    "raises-transport-error",
    "lets the transport's own error out on a cut, with no kind or retryable",
    RaisesTransportError,
    ("cut-retryable", "cut-kind"),
    CUT_BOTH,
)
CUT_NOT_RETRYABLE = SharedBug(
    "cut-not-retryable", "calls a cut connection not retryable", CutNotRetryable, ("cut-retryable",), CUT_BOTH
)
CUT_KIND_OF_ITS_OWN = SharedBug(
    "cut-kind-of-its-own",
    'reports a cut connection with a kind of its own ("network")',
    CutKindOfItsOwn,
    ("cut-kind",),
    CUT_BOTH,
)
CUT_INVENTS_DELAY = SharedBug(
    "cut-invents-delay",
    "reports a cut connection with retry_after 3600, a delay the provider never sent",
    CutInventsDelay,
    ("retry-after",),
    CUT_BOTH,
)
CUT_INVENTS_STATUS = SharedBug(
    "cut-invents-status",
    "reports a cut connection with status 599, a status the provider never sent",
    CutInventsStatus,
    ("error-status",),
    CUT_BOTH,
)
SWALLOWS_CUT = SharedBug(
    "swallows-cut",
    "ends quietly on a cut: the stream just stops, the whole reply comes back empty",
    SwallowsCut,
    ("cut-raised",),
    CUT_BOTH,
)
FINISHES_ON_CUT = SharedBug(
    "finishes-on-cut",
    'yields finish reason "error" on a cut before it raises',
    FinishesOnCut,
    ("cut-finish",),
    ("stream-cut/stream",),
)
#: Every wire's checks for it differ: where its reference gathers calls decides
#: whether the half call comes out too (see each zoo).
TAKES_CUT_FOR_END = SharedBug(
    "takes-cut-for-end",
    "takes a closed connection for the end of the turn, and returns what came as finished",
    TakesCutForEnd,
    ("cut-raised", "cut-finish", "cut-tool-call"),
    ("stream-cut/stream",),
)
#: Caught only where the response ends properly short of the terminal event; how the
#: turn comes out (a finish reason, the calls) differs by wire (see each zoo).
TRUSTS_CLEAN_END = SharedBug(
    "trusts-clean-end",
    "takes a stream whose response ended properly for a whole turn, with no terminal event",
    TrustsCleanEnd,
    ("cut-raised", "cut-finish"),
    ("stream-cut/stream",),
)

CONCATENATES_IDS = SharedBug(
    "concatenates-ids",
    "glues the ids of a turn's calls together (call_A, then call_Acall_B)",
    ConcatenatesIds,
    ("call-id",),
    ("parallel-tool-calls/chat", "parallel-tool-calls/stream"),
)
ONE_ID_FOR_EVERY_CALL = SharedBug(
    "one-id-for-every-call",
    "gives every call of a turn the first call's id",
    OneIdForEveryCall,
    ("call-id", "distinct-ids"),
    ("parallel-tool-calls/chat", "parallel-tool-calls/stream"),
)
NAMESPACES_TOOL_NAME = SharedBug(
    "namespaces-tool-name",
    "reports a call as functions.get_weather",
    NamespacesToolName,
    ("tool-name",),
    ("tool-call/chat", "tool-call/stream", "parallel-tool-calls/chat", "parallel-tool-calls/stream"),
)
DROPS_OPTIONAL_ARGUMENTS = SharedBug(
    "drops-optional-arguments",
    "keeps only the arguments the schema requires",
    DropsOptionalArguments,
    ("tool-arguments",),
    ("tool-call/chat", "tool-call/stream", "parallel-tool-calls/stream"),
)
ANNOUNCES_CALLS = SharedBug(
    "announces-calls",
    f"adds {ANNOUNCEMENT!r} to the content of a tool turn",
    AnnouncesCalls,
    ("tool-turn-content",),
    (
        "tool-call/chat",
        "tool-call/stream",
        "tool-call-with-stop/chat",
        "tool-call-with-stop/stream",
        "parallel-tool-calls/chat",
        "parallel-tool-calls/stream",
    ),
)
INVENTS_CALL = SharedBug(
    "invents-call",
    "reports the tool offered as called on a turn that called none",
    InventsCall,
    ("no-tool-calls",),
    ("text/chat", "text/stream", "tool-result/chat", "tool-result/stream"),
)
EARLY_FINISH = SharedBug(
    "early-finish",
    'puts finish_reason "stop" on the first chunk of text too',
    EarlyFinish,
    ("finish-once",),
    ("text/stream", "truncated-tool-call/stream", "tool-result/stream"),
)
UNPARSED_ON_EVERY_CALL = SharedBug(
    "unparsed-on-every-call",
    "fills unparsed_arguments on every call, also where the arguments parsed",
    UnparsedOnEveryCall,
    ("unparsed-only-broken",),
    ("tool-call/chat", "tool-call/stream", "parallel-tool-calls/chat", "parallel-tool-calls/stream"),
)
USAGE_ON_FAILURE = SharedBug(
    "usage-on-failure",
    "reports zeros for the usage of a stream that failed",
    UsageOnFailure,
    ("usage",),
    ("stream-error/stream",),
)
FINISH_AHEAD = SharedBug(
    "finish-ahead",
    "yields the finish reason once, on a chunk of its own ahead of the text and calls",
    FinishAhead,
    ("finish-last",),
    ("text/stream", "tool-call/stream", "parallel-tool-calls/stream"),
)
FINISH_ON_FIRST_TEXT = SharedBug(
    "finish-on-first-text",
    "yields the finish reason once, on the first chunk of text",
    FinishOnFirstText,
    ("finish-last",),
    ("text/stream", "tool-result/stream"),
)
RAW_STOP_REASON = SharedBug(
    "raw-stop-reason",
    'reports a text turn\'s finish reason as "end_turn", the provider\'s word',
    renames_finish("stop", "end_turn"),
    ("text-finish",),
    ("text/chat", "text/stream", "tool-result/chat", "tool-result/stream"),
)
LENGTH_AS_STOP = SharedBug(
    "length-as-stop",
    'calls a turn cut off by the token limit "stop"',
    reports_stop_for("length"),
    ("finish-reason",),
    ("truncated-tool-call/chat", "truncated-tool-call/stream"),
)
DROPS_USAGE_AFTER_FIRST_TURN = SharedBug(
    "drops-usage-after-first-turn",
    "reports no usage on a turn with history or with parallel calls",
    DropsUsageAfterTheFirstTurn,
    ("usage",),
    ("tool-result/chat", "tool-result/stream", "parallel-tool-calls/chat", "parallel-tool-calls/stream"),
)
INVENTS_QUOTA_DELAY = SharedBug(
    "invents-quota-delay",
    f"reports a retry_after of {QUOTA_DELAY:.0f} s on every exhausted quota",
    InventsQuotaDelay,
    ("retry-after",),
    ("quota/chat", "quota/stream"),
)
HEADERS_ON_FIRST_REQUEST_ONLY = SharedBug(
    "headers-on-first-request-only",
    "sends the caller's headers on a lookup first, then not on the call",
    HeadersOnFirstRequestOnly,
    ("headers-later",),
    ("text/chat", "tool-call/stream"),
    headers=HEADERS,
)

CORRUPT_CASES = ("corrupt-arguments/chat", "corrupt-arguments/stream")
DROPS_UNPARSED_CALL = SharedBug(
    "drops-unparsed-call",
    "drops a finished call whose arguments do not parse",
    DropsUnparsedCall,
    ("unparsed-call-kept",),
    CORRUPT_CASES,
)
REPAIRS_ARGUMENTS = SharedBug(
    "repairs-arguments",
    "repairs broken argument JSON into an object and drops its text",
    RepairsArguments,
    ("unparsed-arguments", "unparsed-not-repaired"),
    CORRUPT_CASES,
)
FILLS_UNPARSED_ARGUMENTS = SharedBug(
    "fills-unparsed-arguments",
    "keeps broken argument text but fills arguments with a partial parser's guess",
    FillsUnparsedArguments,
    ("unparsed-not-repaired",),
    CORRUPT_CASES,
)
QUOTES_UNPARSED_TEXT = SharedBug(
    "quotes-unparsed-text",
    "keeps broken argument text quoted as a JSON string, not as it came",
    QuotesUnparsedText,
    ("unparsed-arguments",),
    CORRUPT_CASES,
)
RAISES_ON_UNPARSED = SharedBug(
    "raises-on-unparsed",
    "raises on a call whose arguments do not parse",
    RaisesOnUnparsed,
    ("reply",),
    CORRUPT_CASES,
)
STOP_ON_UNPARSED_CALL = SharedBug(
    "stop-on-unparsed-call",
    'calls a turn whose one call did not parse a "stop"',
    StopOnUnparsedCall,
    ("finish-reason",),
    CORRUPT_CASES,
)

ANNOUNCES_BROKEN_CALL = SharedBug(
    "announces-broken-call",
    f"adds {ANNOUNCEMENT!r} to the content of a turn whose call's arguments do not parse",
    AnnouncesCalls,
    ("tool-turn-content",),
    CORRUPT_CASES,
)

#: The shared bugs of a call whose arguments do not parse: listed by the zoos of the
#: wires that carry argument text (``Zoo.unparsed``), on the corrupt-arguments cases they run.
UNPARSED_BUGS = (
    DROPS_UNPARSED_CALL,
    REPAIRS_ARGUMENTS,
    FILLS_UNPARSED_ARGUMENTS,
    QUOTES_UNPARSED_TEXT,
    RAISES_ON_UNPARSED,
    STOP_ON_UNPARSED_CALL,
    ANNOUNCES_BROKEN_CALL,
)

#: The shared bugs every zoo lists, in this order, before its own.
EVERY_WIRE = (
    DROPS_USAGE,
    USAGE_ON_TEXT_ONLY,
    QUOTA_AS_RATE_LIMIT,
    QUOTA_RETRYABLE,
    AUTH_AS_SERVER_ERROR,
    OVERLOAD_AS_SERVER_ERROR,
    SERVER_ERROR_AS_FATAL,
    CONTEXT_OVERFLOW_AS_BAD_REQUEST,
    DETAILS_WITHOUT_KIND,
    DROPS_STATUS,
    RETRY_AFTER_EVERYWHERE,
    DROPS_TEXT_ON_LENGTH,
    LOSES_TEXT_BEFORE_ERROR,
    FORGETS_HEADERS,
    RETRIES,
    SLEEPS_AND_RETRIES,
    CLOSE_RAISES,
    IGNORES_ABORT,
    WRAPS_ABORT_REASON,
    SLOW_ABORT_BUG,
    BLOCKS_LOOP_ON_ABORT_BUG,
    ABORTS_WITHOUT_CLOSING,
    KEEPS_H2_CONNECTION_ON_ABORT,
    SHIELDS_REQUEST,
    WRAPS_CANCELLATION,
    # First, so that it guards the history check: nothing else sees it, where a history
    # the provider refuses also fails the reply once the check is taken out.
    ERROR_AS_EMPTY_RESULT,
    RESULT_AS_USER_TEXT,
    SWAPS_CALL_IDS,
    KEEPS_ID_SUFFIX,
    KEEPS_FIRST_CALL,
    RAISES_TRANSPORT_ERROR,
    CUT_NOT_RETRYABLE,
    CUT_KIND_OF_ITS_OWN,
    CUT_INVENTS_DELAY,
    CUT_INVENTS_STATUS,
    SWALLOWS_CUT,
    FINISHES_ON_CUT,
    NAMESPACES_TOOL_NAME,
    DROPS_OPTIONAL_ARGUMENTS,
    ANNOUNCES_CALLS,
    INVENTS_CALL,
    EARLY_FINISH,
    FINISH_AHEAD,
    FINISH_ON_FIRST_TEXT,
    USAGE_ON_FAILURE,
    UNPARSED_ON_EVERY_CALL,
    RAW_STOP_REASON,
    LENGTH_AS_STOP,
    DROPS_USAGE_AFTER_FIRST_TURN,
    INVENTS_QUOTA_DELAY,
    HEADERS_ON_FIRST_REQUEST_ONLY,
)
#: The shared bugs of ids the provider sends: every zoo but that of a wire whose provider
#: sends none (Ollama), where they show differently.
PROVIDER_IDS = (CONCATENATES_IDS, ONE_ID_FOR_EVERY_CALL)
