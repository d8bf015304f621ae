"""What the fake provider records and what it answers with: plain data, no I/O.

A wire builds replies; the server in this package carries them out. Keeping the
timing and disconnect behaviour as data (``hang=True``) is what lets a wire stay a
pure function of the scenario and the request.
"""

from __future__ import annotations

import json as _json
import threading
import time
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ..errors import ProviderInputError

if TYPE_CHECKING:
    from .events import ResponseLog, WireEvent

__all__ = [
    "Handler",
    "HangReply",
    "JsonReply",
    "RecordedRequest",
    "Reply",
    "StreamReply",
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


@dataclass(frozen=True)
class JsonReply:
    """A whole reply: ``body`` is JSON-encoded unless it is already ``bytes``."""

    body: Any
    status: int = 200
    headers: Optional[Mapping[str, str]] = None
    content_type: str = "application/json"

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ProviderInputError(f"reply status must be 100-599, got {self.status!r}")
        _header_items(self.headers)

    def encoded(self) -> bytes:
        """The body as it goes on the wire."""
        if isinstance(self.body, (bytes, bytearray)):
            return bytes(self.body)
        return _json.dumps(self.body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

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
    it (a stream held at a protocol event); the wait ends early if the client leaves.
    """

    chunks: Sequence[bytes]
    content_type: str = "text/event-stream"
    status: int = 200
    headers: Optional[Mapping[str, str]] = None
    hang: bool = False
    pauses: Mapping[int, float] = field(default_factory=dict)

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
        for index, seconds in self.pauses.items():
            if not (isinstance(index, int) and 0 <= index < len(self.chunks)):
                raise ProviderInputError(
                    f"StreamReply pause at chunk {index!r}: there are {len(self.chunks)} chunks; "
                    "a pause goes before one of them, by its index"
                )
            if not (isinstance(seconds, (int, float)) and 0 <= seconds <= 60):
                raise ProviderInputError(
                    f"StreamReply pause before chunk {index} must be 0 to 60 seconds, got {seconds!r}"
                )

    def header_items(self) -> Tuple[Tuple[str, str], ...]:
        """The extra headers, validated."""
        return _header_items(self.headers)


@dataclass(frozen=True)
class HangReply:
    """A request that is never answered: no status line, no headers, until the client leaves."""


Reply = Union[JsonReply, StreamReply, HangReply]

#: One condition for every request's "closed" flag: a per-request threading.Event
#: costs the provider's hot path several allocations (and the GC as many objects)
#: per request, and waiters are few.
_CLOSED = threading.Condition(threading.Lock())

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
    #: What the provider sent back, kept as the protocol wrote it (``None`` until a
    #: reply went out, and for a request that was never answered).
    response: Optional[ResponseLog] = field(init=False, repr=False, compare=False)
    _closed: bool = field(init=False, repr=False, compare=False)
    _json: Any = field(init=False, repr=False, compare=False)

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
        self.response = None
        self._closed = False
        # A parsed value given here wins; otherwise the body is parsed when first asked.
        self._json = _UNPARSED if json is None and body else json

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or ``None`` where it is empty or not JSON."""
        value = self._json
        if value is _UNPARSED:
            try:
                value = _json.loads(self.body)
            except (ValueError, UnicodeDecodeError):
                value = None
            self._json = value
        return value

    @json.setter
    def json(self, value: Any) -> None:
        self._json = value

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
        with _CLOSED:
            if not self._closed:
                self.closed_at = time.monotonic()
                self._closed = True
                _CLOSED.notify_all()

    def wait_closed(self, timeout: Optional[float] = None) -> bool:
        """Block until the client closes or ``timeout`` passes; return whether it closed."""
        with _CLOSED:
            return _CLOSED.wait_for(lambda: self._closed, timeout)

    def __str__(self) -> str:
        return f"{self.method} {self.target} ({self.http_version})"
