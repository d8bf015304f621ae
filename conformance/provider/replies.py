"""What the fake provider records and what it answers with: plain data, no I/O.

A wire builds replies; the server in this package carries them out. Keeping the
timing and disconnect behaviour as data (``hang=True``, ``pauses``, ``end``) is what
lets a wire stay a pure function of the scenario and the request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ..errors import ProviderInputError

if TYPE_CHECKING:
    from .events import ResponseLog, WireEvent

__all__ = [
    "DropReply",
    "Handler",
    "HangReply",
    "JsonReply",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "held",
]


def _header_items(headers: Optional[Mapping[str, str]]) -> Tuple[Tuple[str, str], ...]:
    items = tuple((str(k), str(v)) for k, v in (headers or {}).items())
    for name, value in items:
        if not name or any(c in name for c in " \r\n:") or any(c in value for c in "\r\n"):
            raise ProviderInputError(
                f"invalid reply header {name!r}: {value!r}; names need no spaces or colons "
                "and values no line breaks"
            )
    return items


#: How a stream may end after its last chunk (``StreamReply.end``).
STREAM_ENDS = ("complete", "close", "reset")


def _did_you_mean(value: object, choices: Sequence[str]) -> str:
    import difflib  # only on the way to an error

    close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class JsonReply:
    """A whole reply: ``body`` is JSON-encoded unless it is already ``bytes``.

    ``end`` says how it ends: ``"complete"``, or cut short after its first ``cut_at``
    bytes although its ``content-length`` names the whole body, the way a connection
    that dies mid-body leaves a client: ``"close"`` (HTTP/1.1 closes the connection
    cleanly with a FIN, h2 sends ``RST_STREAM(NO_ERROR)``) or ``"reset"`` (HTTP/1.1
    resets the TCP connection, h2 sends ``RST_STREAM(INTERNAL_ERROR)``).
    """

    body: Any
    status: int = 200
    headers: Optional[Mapping[str, str]] = None
    content_type: str = "application/json"
    end: str = "complete"
    cut_at: Optional[int] = None

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ProviderInputError(f"reply status must be 100-599, got {self.status!r}")
        _header_items(self.headers)
        if self.end not in STREAM_ENDS:
            raise ProviderInputError(
                f"JsonReply end must be one of {', '.join(map(repr, STREAM_ENDS))}, "
                f"got {self.end!r}{_did_you_mean(self.end, STREAM_ENDS)}"
            )
        if self.end == "complete":
            if self.cut_at is not None:
                raise ProviderInputError(
                    f"JsonReply(cut_at={self.cut_at!r}) with end='complete': a body cut short "
                    "does not complete; say end='close' or end='reset'"
                )
            return
        size = len(self.encoded())
        cut = self.cut_at
        if isinstance(cut, bool) or not isinstance(cut, int) or not 0 <= cut < size:
            raise ProviderInputError(
                f"JsonReply(end={self.end!r}) needs cut_at, the bytes of the body sent before "
                f"the cut: 0 to {size - 1} (the body has {size}), got {cut!r}"
            )

    def encoded(self) -> bytes:
        """The body as it goes on the wire."""
        if isinstance(self.body, (bytes, bytearray)):
            return bytes(self.body)
        import json as _json  # per reply, not per import

        return _json.dumps(self.body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def sent_body(self, body: bytes) -> bytes:
        """What of the encoded ``body`` goes on the wire: all of it, or what comes before the cut."""
        return body if self.cut_at is None else body[: self.cut_at]

    def header_items(self) -> Tuple[Tuple[str, str], ...]:
        """The extra headers, validated."""
        return _header_items(self.headers)


@dataclass(frozen=True)
class StreamReply:
    """A streamed reply: each chunk is written and flushed on its own.

    Over HTTP/1.1 each chunk is one chunk of the chunked encoding; over h2 one DATA
    frame (or more, where flow control asks). With ``hang=True`` the response stays
    open after the last chunk until the client goes away or the provider closes.

    ``pauses`` maps a chunk's index to the seconds the provider waits before writing
    it (a stream held at a protocol event); ``len(chunks)`` is the place after the
    last chunk, before the stream ends. A pause holds only its own response, and ends
    early when the client leaves or the provider closes; the rest is then not sent.

    ``end`` says how the stream ends after its last chunk: ``"complete"`` (the
    response ends as a good server ends it), ``"close"`` (the provider stops cleanly
    without completing it: HTTP/1.1 closes the connection without the chunked
    encoding's last chunk, h2 sends ``RST_STREAM(NO_ERROR)``) or ``"reset"`` (HTTP/1.1
    resets the TCP connection, h2 sends ``RST_STREAM(INTERNAL_ERROR)``).

    Where ``headers`` name a ``content-length``, the stream is delimited by it, as a
    gateway that buffers a stream sends it: over HTTP/1.1 without the chunked encoding
    (the connection closes after it), over h2 with the header. It must be the chunks'
    total, and such a stream ends ``"complete"``.
    """

    chunks: Sequence[bytes]
    content_type: str = "text/event-stream"
    status: int = 200
    headers: Optional[Mapping[str, str]] = None
    hang: bool = False
    pauses: Mapping[int, float] = field(default_factory=dict)
    end: str = "complete"

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ProviderInputError(f"reply status must be 100-599, got {self.status!r}")
        for index, chunk in enumerate(self.chunks):
            if not isinstance(chunk, (bytes, bytearray)):
                raise ProviderInputError(
                    f"StreamReply chunk {index} is {type(chunk).__name__}, not bytes; "
                    "encode it first, e.g. with conformance.sse()"
                )
        _header_items(self.headers)
        if self.end not in STREAM_ENDS:
            raise ProviderInputError(
                f"StreamReply end must be one of {', '.join(map(repr, STREAM_ENDS))}, "
                f"got {self.end!r}{_did_you_mean(self.end, STREAM_ENDS)}"
            )
        length = self.content_length()
        if length is not None and (length != sum(len(c) for c in self.chunks) or self.end != "complete"):
            raise ProviderInputError(
                f"StreamReply with content-length {length!r}: a stream delimited by its length "
                f"sends exactly that many bytes ({sum(len(c) for c in self.chunks)} in its chunks) "
                f"and ends 'complete' (got end={self.end!r}); give the total, or leave the header out"
            )
        if self.hang and self.end != "complete":
            raise ProviderInputError(
                f"StreamReply(hang=True, end={self.end!r}): a stream that hangs never ends; "
                "drop hang to end it that way, or drop end to keep it open"
            )
        if not isinstance(self.pauses, Mapping):
            raise ProviderInputError(
                f"StreamReply pauses must map a chunk's index to seconds, e.g. {{2: 0.5}}, "
                f"got {type(self.pauses).__name__}"
            )
        count = len(self.chunks)
        for index, seconds in self.pauses.items():
            if not (isinstance(index, int) and not isinstance(index, bool) and 0 <= index <= count):
                raise ProviderInputError(
                    f"StreamReply pause at chunk {index!r}: there are {count} chunks; a pause "
                    f"goes before one of them, by its index (0 to {count - 1}), or at {count}, "
                    "after the last one and before the stream ends"
                )
            if index == count and self.hang:
                raise ProviderInputError(
                    f"StreamReply pause at {index} (after the last chunk) with hang=True: a "
                    "stream that hangs never ends, so there is nothing to hold back"
                )
            if not (
                isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 <= seconds <= 60
            ):
                raise ProviderInputError(
                    f"StreamReply pause before chunk {index} must be 0 to 60 seconds, got {seconds!r}"
                )

    def transport_pauses(self) -> Dict[int, float]:
        """The pauses keyed by transport chunk: the index among the non-empty chunks.

        An empty chunk is never written, so a pause before one holds the next chunk
        that is; one past the last transport chunk holds the stream's end. Pauses
        that land on the same place add up.
        """
        placed: Dict[int, float] = {}
        if not self.pauses:
            return placed
        written = 0
        before = []
        for chunk in self.chunks:
            before.append(written)
            if chunk:
                written += 1
        before.append(written)
        for index, seconds in self.pauses.items():
            if seconds > 0:
                at = before[index]
                placed[at] = placed.get(at, 0.0) + float(seconds)
        return placed

    def header_items(self) -> Tuple[Tuple[str, str], ...]:
        """The extra headers, validated."""
        return _header_items(self.headers)

    def content_length(self) -> Optional[int]:
        """The ``content-length`` the reply's own headers name, or ``None`` (a stream framed
        by the chunked encoding over HTTP/1.1, by ``END_STREAM`` over h2)."""
        for name, value in (self.headers or {}).items():
            if str(name).lower() == "content-length":
                try:
                    return int(str(value))
                except ValueError:
                    raise ProviderInputError(
                        f"StreamReply content-length must be a count of bytes, got {value!r}"
                    ) from None
        return None


@dataclass(frozen=True)
class HangReply:
    """A request that is never answered: no status line, no headers, until the client leaves."""


@dataclass(frozen=True)
class DropReply:
    """A request answered with nothing: the provider ends it before a status line.

    The moment a retry is ambiguous: the client cannot tell whether the request was
    acted on. ``end="close"`` ends it cleanly (HTTP/1.1 closes the connection with a
    FIN, h2 sends ``RST_STREAM(NO_ERROR)``); ``end="reset"`` ends it with an error
    (HTTP/1.1 resets the TCP connection, h2 sends ``RST_STREAM(INTERNAL_ERROR)``).
    Over HTTP/1.1 the connection goes either way, so a keep-alive client must open a
    new one to try again.
    """

    end: str = "close"

    def __post_init__(self) -> None:
        if self.end not in ("close", "reset"):
            raise ProviderInputError(
                f"DropReply end must be 'close' or 'reset', got {self.end!r}"
                f"{_did_you_mean(self.end, ('close', 'reset'))}"
            )


Reply = Union[JsonReply, StreamReply, HangReply, DropReply]

#: The longest a reply may be held back (:func:`held`), as a stream's pause may.
MAX_HOLD = 60.0


def held(reply: Reply, seconds: float) -> Awaitable[Reply]:
    """``reply``, sent only after ``seconds`` in which the provider sends nothing at all: no
    status line, no headers (a model slow to its first token, a whole reply long in coming).

    A handler returns it in place of the reply. The hold ends early when the connection
    (h2: the stream) is lost or the provider closes; nothing is sent then. Over HTTP/1.1 a
    client's EOF alone is a half-close, and the reply is still owed, as to any handler.
    To hold a stream after its status line and headers, or between two of its chunks,
    give it ``pauses`` instead.
    """
    if not isinstance(reply, (JsonReply, StreamReply, HangReply, DropReply)):
        raise ProviderInputError(
            f"held() takes a JsonReply, StreamReply, HangReply or DropReply, got {type(reply).__name__}"
        )
    if not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 <= seconds <= MAX_HOLD):
        raise ProviderInputError(f"held() holds a reply 0 to {MAX_HOLD:g} seconds, got {seconds!r}")
    return _hold(reply, float(seconds))


async def _hold(reply: Reply, seconds: float) -> Reply:
    import asyncio

    await asyncio.sleep(seconds)
    return reply


class _Watch:
    """One condition for every request's "closed" flag and flushed chunks.

    A per-request threading.Event costs the provider's hot path several allocations
    (and the GC as many objects) per request, and waiters are few. ``waiting`` counts
    the callers of :meth:`RecordedRequest.wait_flushed` and its async twin: the
    provider reads it after each chunk it writes and takes the lock only when it is
    not zero. An async waiter leaves a one-shot wake-up callback in ``wakers``.
    """

    __slots__ = ("cond", "waiting", "wakers")

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.waiting = 0
        self.wakers: List[Callable[[], None]] = []

    def notify(self) -> None:
        """Wake every waiter to look again (a chunk went out, or a response ended)."""
        with self.cond:
            self.cond.notify_all()
            wakers = self.wakers
            if wakers:
                self.wakers = []
        if wakers:
            for wake in wakers:
                wake()


WATCH = _Watch()


def _check_wait(name: str, count: object, timeout: object) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ProviderInputError(f"{name}(count={count!r}): count is how many chunks, a whole number >= 0")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout < float("inf")
    ):
        raise ProviderInputError(
            f"{name}(timeout={timeout!r}): give seconds as a finite number >= 0, or None to wait "
            "for as long as it takes"
        )


def _resolve(future: Any) -> None:
    if not future.done():
        future.set_result(None)


#: A handler gets each request and returns a reply, or an awaitable of one.
Handler = Callable[["RecordedRequest"], Union[Reply, Awaitable[Reply]]]


#: Marks a body not yet parsed: ``None`` is a parse result (an empty or non-JSON body).
_UNPARSED: Any = object()


@dataclass(init=False)
class RecordedRequest:
    """One request as the provider received it.

    ``headers`` has lower-case names; a repeated header's values are joined with
    ``", "``. ``json`` is the parsed body, or ``None`` where the body is empty or not
    JSON; it is parsed on first access (most requests are never read that way, and
    parsing is the largest single cost of recording one), then kept. ``closed_at`` is
    set (``time.monotonic()``) when the client closed the connection or, over h2, the
    stream.
    """

    method: str
    path: str
    query: str
    headers: Dict[str, str]
    body: bytes
    http_version: str
    error: Optional[str]
    received_at: float
    closed_at: Optional[float]
    _closed: bool = field(init=False, repr=False, compare=False)
    _json: Any = field(init=False, repr=False, compare=False)
    # What the provider sent back, noted here by the protocol that wrote it and read
    # through :attr:`response`: the reply (None until one went out), the time just
    # before each chunk's write, how many chunks were written, how the response ended,
    # the events' sequence numbers, and the provider that numbers them. On the request
    # itself, not in an object of their own: a provider keeps thousands of requests,
    # and every object each one holds is one more for the garbage collector to track.
    _reply: Any = field(init=False, repr=False, compare=False)
    _times: Any = field(init=False, repr=False, compare=False)
    _written: int = field(init=False, repr=False, compare=False)
    _end: Optional[str] = field(init=False, repr=False, compare=False)
    _seqs: Any = field(init=False, repr=False, compare=False)
    _numbering: Any = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        method: str,
        path: str,
        query: str,
        headers: Dict[str, str],
        body: bytes,
        http_version: str,
        json: Any = None,
        error: Optional[str] = None,
        received_at: Optional[float] = None,
        closed_at: Optional[float] = None,
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.http_version = http_version
        self.error = error
        self.received_at = time.monotonic() if received_at is None else received_at
        self.closed_at = closed_at
        self._closed = False
        # A parsed value given here wins; otherwise the body is parsed when first asked.
        self._json = _UNPARSED if json is None and body else json
        self._reply = None
        self._times = ()
        self._written = 0
        self._end = None
        self._seqs = ()
        self._numbering = None

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or ``None`` where it is empty or not JSON."""
        value = self._json
        if value is _UNPARSED:
            import json as _json

            try:
                value = _json.loads(self.body)
            except (ValueError, UnicodeDecodeError, RecursionError):
                # Nested deeper than the parser goes is as unreadable as not JSON at all.
                value = None
            self._json = value
        return value

    @json.setter
    def json(self, value: Any) -> None:
        self._json = value

    @property
    def response(self) -> Optional[ResponseLog]:
        """What the provider sent back, as the protocol wrote it; ``None`` until a reply
        went out, and for a request that was never answered (or was dropped)."""
        if self._reply is None:
            return None
        from .events import ResponseLog

        return ResponseLog(self)

    @property
    def events(self) -> List[WireEvent]:
        """The events of the reply as they went out, in order (the raw event log).

        Each has a provider-wide sequence number, its type (SSE ``event:``, the NDJSON
        line's kind, the event stream's ``:event-type``), the ids its payload carries,
        its payload length, the transport chunk its last byte went out in and the time
        that chunk was flushed. Worked out from the bytes when first asked: recording
        costs the provider one timestamp per chunk.
        """
        response = self.response
        return response.events() if response is not None else []

    @property
    def params(self) -> Dict[str, str]:
        """The query string parsed; a repeated name keeps its last value."""
        from urllib.parse import parse_qsl  # rarely asked for; spares every import urllib

        return dict(parse_qsl(self.query, keep_blank_values=True))

    @property
    def target(self) -> str:
        """Path and query as the request line had them."""
        return f"{self.path}?{self.query}" if self.query else self.path

    @property
    def closed(self) -> bool:
        """Whether the client has closed the connection (h2: the stream)."""
        return self._closed

    def mark_closed(self) -> None:
        """Record that the client went away; only the first call counts."""
        with WATCH.cond:
            if self._closed:
                return
            self.closed_at = time.monotonic()
            self._closed = True
        WATCH.notify()

    def wait_closed(self, timeout: Optional[float] = None) -> bool:
        """Block until the client closes or ``timeout`` passes; return whether it closed."""
        with WATCH.cond:
            return WATCH.cond.wait_for(lambda: self._closed, timeout)

    def wait_flushed(self, count: int, timeout: Optional[float] = None) -> bool:
        """Block until the reply's first ``count`` chunks were written to the socket.

        ``count`` counts the non-empty chunks of a :class:`StreamReply` (a whole reply
        is one chunk, its body). Returns True as soon as they are out, False when
        ``timeout`` passes first, and False at once when they never will be: the
        reply has fewer chunks, it ended without them, the client left or the
        provider closed. Call it from any thread but the provider's own (a reply
        handler awaits :meth:`wait_flushed_async` instead). A stream held by a pause
        is how a test acts at a chosen event::

            provider.reply(StreamReply(chunks, pauses={3: 10}))
            ...
            assert request.wait_flushed(3, timeout=5)  # chunks 0-2 are out; 3 is held
        """
        _check_wait("wait_flushed", count, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        cond = WATCH.cond
        with cond:
            WATCH.waiting += 1
            try:
                while True:
                    found = self._flushed(count)
                    if found is not None:
                        return found
                    if deadline is None:
                        cond.wait()
                        continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    cond.wait(remaining)
            finally:
                WATCH.waiting -= 1

    async def wait_flushed_async(self, count: int, timeout: Optional[float] = None) -> bool:
        """:meth:`wait_flushed` without blocking the caller's event loop (any loop)."""
        import asyncio

        _check_wait("wait_flushed_async", count, timeout)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            future: asyncio.Future[None] = loop.create_future()

            def wake(future: asyncio.Future[None] = future) -> None:
                try:
                    loop.call_soon_threadsafe(_resolve, future)
                except RuntimeError:  # the waiting loop is closed: nobody to wake
                    pass

            with WATCH.cond:
                found = self._flushed(count)
                if found is not None:
                    return found
                WATCH.wakers.append(wake)
                WATCH.waiting += 1
            try:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is None or remaining > 0:
                    await asyncio.wait((future,), timeout=remaining)
            finally:
                with WATCH.cond:
                    WATCH.waiting -= 1
                    if wake in WATCH.wakers:
                        WATCH.wakers.remove(wake)
            if deadline is not None and time.monotonic() >= deadline:
                with WATCH.cond:
                    return bool(self._flushed(count))

    def _flushed(self, count: int) -> Optional[bool]:
        """True once ``count`` chunks are out, False when they never will be, else None."""
        log = self.response
        if log is not None:
            if self._written >= count:
                return True
            if count > len(log.chunks) or log.abandoned():
                return False
            # A chunk's time is noted just before its write, and the end before the
            # last write: an ended response without the chunk's time never sends it.
            if self._end is not None and len(self._times) < count:
                return False
            if len(self._times) >= count and not self._closed:
                return None  # being written right now
        return False if self._closed else None

    def __str__(self) -> str:
        return f"{self.method} {self.target} ({self.http_version})"
