"""The raw event log: what a response said, event by event, below any SDK.

Strategy: the provider never parses what it sends while it sends it. A protocol only
notes when each transport chunk went out (:class:`ResponseLog`, one
``time.monotonic()`` per chunk); the body is cut into events here, from the bytes
themselves and only when someone asks, by its content type:

* ``text/event-stream``: one event per SSE event (a blank line ends it); its type is
  the ``event:`` field, else the JSON data's ``type`` or ``object``, else ``message``;
* ``application/x-ndjson``: one event per line; ``error``, ``done`` or ``message``;
* ``application/vnd.amazon.eventstream``: one event per frame, cut by the prelude's
  total length; its type is the ``:event-type`` (or ``:exception-type``) header, except
  for a ``chunk`` frame carrying a model's own event (Bedrock InvokeModel's
  ``{"bytes": base64(event JSON), "p": ...}``), which is typed and read as that event;
* anything else (a whole JSON reply): one event, typed by its ``object`` or ``type``,
  or ``error`` where it carries one.

Where the payload is JSON the ids a failure message needs are read from it: the
response id, the output index (content block index, tool call index) and the call
id, in the places the providers put them. The same splitter serves the recorder, so
a fixture's events and a live response's events read alike.
"""

from __future__ import annotations

import binascii
import json
import struct
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple

__all__ = [
    "BodyEvent",
    "ResponseLog",
    "WireEvent",
    "events_around",
    "split_events",
    "timed_events",
]

_PRELUDE = struct.Struct(">II")
_STRING = 7
#: Sizes of the fixed-width event-stream header values, by type (botocore's table).
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


@dataclass(frozen=True)
class BodyEvent:
    """One event found in a body: its type, ids, payload size and where it ends."""

    type: str
    length: int
    #: Byte offset in the body just past the event's last byte.
    end: int
    response_id: Optional[str] = None
    output_index: Optional[int] = None
    call_id: Optional[str] = None


@dataclass(frozen=True)
class WireEvent:
    """One event as it went out: a :class:`BodyEvent` with its number, chunk and time.

    ``seq`` is monotonic across the provider (or the recording), in the order the
    events were flushed. ``chunk`` is the index of the transport chunk (a non-empty
    ``StreamReply`` chunk; 0 for a whole reply) that carried the event's last byte,
    ``offset`` the byte offset in the body just past it, ``flushed_at`` when that
    chunk was written (``time.monotonic()``, the clock of ``RecordedRequest.received_at``).
    ``length`` is the payload's size: the SSE data, the NDJSON line, the frame's payload.
    """

    seq: int
    type: str
    length: int
    chunk: int
    offset: int
    flushed_at: float
    response_id: Optional[str] = None
    output_index: Optional[int] = None
    call_id: Optional[str] = None

    def as_dict(self) -> Dict[str, Any]:
        """The event as plain JSON data (a fixture's ``events`` entry)."""
        return {
            "seq": self.seq,
            "type": self.type,
            "length": self.length,
            "chunk": self.chunk,
            "offset": self.offset,
            "flushed_at": self.flushed_at,
            "response_id": self.response_id,
            "output_index": self.output_index,
            "call_id": self.call_id,
        }

    def describe(self, since: Optional[float] = None) -> str:
        """One line: ``#12 content_block_delta index=1 call=toolu_01.. 42 B, chunk 3 @ +1.2 ms``."""
        parts = [f"#{self.seq} {self.type}"]
        if self.response_id is not None:
            parts.append(f"response={self.response_id}")
        if self.output_index is not None:
            parts.append(f"index={self.output_index}")
        if self.call_id is not None:
            parts.append(f"call={self.call_id}")
        when = f" @ +{(self.flushed_at - since) * 1000:.1f} ms" if since is not None else ""
        return f"{' '.join(parts)}, {self.length} B, chunk {self.chunk} (to byte {self.offset}){when}"

    def __str__(self) -> str:
        return self.describe()


# -- reading ids out of a JSON payload --------------------------------------------------


def _get(data: Any, *path: Any) -> Any:
    for key in path:
        if isinstance(key, int):
            if not isinstance(data, list) or len(data) <= key:
                return None
        elif not isinstance(data, dict):
            return None
        data = data[key] if isinstance(key, int) else data.get(key)
    return data


def _first(data: Any, paths: Iterable[Tuple[Any, ...]], kind: type) -> Any:
    for path in paths:
        value = _get(data, *path)
        if isinstance(value, kind) and not isinstance(value, bool):
            return value
    return None


#: Where each provider puts the response's id, the index of the output an event
#: belongs to, and the id of a tool call.
_RESPONSE_ID = (("response", "id"), ("message", "id"), ("responseId",), ("id",))
_OUTPUT_INDEX = (
    ("output_index",),  # OpenAI Responses
    ("index",),  # Anthropic content blocks
    ("contentBlockIndex",),  # Bedrock Converse
    ("choices", 0, "delta", "tool_calls", 0, "index"),  # OpenAI Chat
)
_CALL_ID = (
    ("item", "call_id"),  # OpenAI Responses output_item.added / done
    ("call_id",),
    ("content_block", "id"),  # Anthropic tool_use block start
    ("choices", 0, "delta", "tool_calls", 0, "id"),  # OpenAI Chat
    ("choices", 0, "message", "tool_calls", 0, "id"),
    ("start", "toolUse", "toolUseId"),  # Bedrock Converse
    ("candidates", 0, "content", "parts", 0, "functionCall", "id"),  # Gemini 3
    ("message", "tool_calls", 0, "id"),  # Ollama
)


def _ids(data: Any) -> Tuple[Optional[str], Optional[int], Optional[str]]:
    if not isinstance(data, dict):
        return None, None, None
    return _first(data, _RESPONSE_ID, str), _first(data, _OUTPUT_INDEX, int), _first(data, _CALL_ID, str)


def _load(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None


def _typed(data: Any, default: str) -> str:
    if isinstance(data, dict):
        for key in ("type", "object"):
            if isinstance(data.get(key), str):
                return str(data[key])
        if "error" in data:
            return "error"
    return default


# -- the splitters ----------------------------------------------------------------------


def _sse(body: bytes) -> List[BodyEvent]:
    events: List[BodyEvent] = []
    name: Optional[str] = None
    data: List[bytes] = []
    pos = 0
    for line in body.splitlines(keepends=True):
        pos += len(line)
        text = line.rstrip(b"\r\n")
        if text:
            field, _, value = text.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if field == b"event":
                name = value.decode("utf-8", "replace")
            elif field == b"data":
                data.append(value)
            continue
        if line == b"\r" and body[pos : pos + 1] == b"\n":
            continue  # the CR of a CRLF: the LF that follows ends the line
        if name is not None or data:
            payload = b"\n".join(data)
            parsed = _load(payload)
            default = "[DONE]" if payload.strip() == b"[DONE]" else "message"
            events.append(BodyEvent(name or _typed(parsed, default), len(payload), pos, *_ids(parsed)))
        name, data = None, []
    return events


def _ndjson(body: bytes) -> List[BodyEvent]:
    events: List[BodyEvent] = []
    pos = 0
    for line in body.splitlines(keepends=True):
        pos += len(line)
        payload = line.strip()
        if not payload or not line.endswith((b"\n", b"\r")):
            continue  # blank, or the unfinished tail of a stream cut off
        parsed = _load(payload)
        kind = "message"
        if isinstance(parsed, dict):
            kind = "error" if "error" in parsed else "done" if parsed.get("done") is True else "message"
        events.append(BodyEvent(kind, len(payload), pos, *_ids(parsed)))
    return events


def _frame_type(headers: bytes) -> str:
    found: Dict[str, str] = {}
    pos = 0
    while pos < len(headers):
        size = headers[pos]
        name = headers[pos + 1 : pos + 1 + size].decode("utf-8", "replace")
        pos += 1 + size
        if pos >= len(headers):
            break
        kind = headers[pos]
        pos += 1
        if kind in (6, _STRING):
            length = int.from_bytes(headers[pos : pos + 2], "big")
            if kind == _STRING:
                found[name] = headers[pos + 2 : pos + 2 + length].decode("utf-8", "replace")
            pos += 2 + length
        elif kind in _FIXED:
            pos += _FIXED[kind]
        else:
            break  # a header type this reader does not know: stop, keep what was read
    return found.get(":event-type") or found.get(":exception-type") or found.get(":message-type") or "frame"


def _payload_part(data: Any) -> Any:
    """The model's own event a ``chunk`` frame carries (a ``PayloadPart``: its ``bytes`` are
    the event's JSON in base64), or ``None`` where the payload is not one."""
    if not isinstance(data, dict):
        return None
    encoded = data.get("bytes")
    if not isinstance(encoded, str):
        return None
    try:
        inner = json.loads(binascii.a2b_base64(encoded))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return inner if isinstance(inner, dict) else None


def _event_stream(body: bytes) -> List[BodyEvent]:
    events: List[BodyEvent] = []
    pos = 0
    while pos + 16 <= len(body):
        total, headers_length = _PRELUDE.unpack_from(body, pos)
        if total < 16 or headers_length > total - 16 or pos + total > len(body):
            break  # not a frame this can cut (a corrupt-frame scenario): stop honestly
        start = pos + 12
        kind = _frame_type(body[start : start + headers_length])
        payload = body[start + headers_length : pos + total - 4]
        parsed = _load(payload)
        if kind == "chunk":
            # InvokeModel wraps each of the model's events in a frame of this one type:
            # the log names the event inside (content_block_delta), as the model's own
            # stream would, and reads its ids there. The length stays the frame's payload.
            inner = _payload_part(parsed)
            if inner is not None:
                parsed = inner
                kind = _typed(inner, kind)
        events.append(BodyEvent(kind, len(payload), pos + total, *_ids(parsed)))
        pos += total
    return events


def _whole(body: bytes) -> List[BodyEvent]:
    if not body:
        return []
    parsed = _load(body)
    return [BodyEvent(_typed(parsed, "body"), len(body), len(body), *_ids(parsed))]


_SPLITTERS: Dict[str, Callable[[bytes], List[BodyEvent]]] = {
    "text/event-stream": _sse,
    "application/x-ndjson": _ndjson,
    "application/jsonl": _ndjson,
    "application/vnd.amazon.eventstream": _event_stream,
}


def split_events(content_type: str, body: bytes) -> List[BodyEvent]:
    """Cut a response body into its events, as its content type frames them.

    An id is carried forward within the response: an event without a response id
    gets the one announced before it, and an event without a call id gets the call
    id announced earlier at the same output index (an Anthropic ``content_block_delta``
    belongs to the ``tool_use`` block its ``content_block_start`` opened).
    """
    kind = content_type.split(";", 1)[0].strip().lower()
    events = _SPLITTERS.get(kind, _whole)(body)
    response_id: Optional[str] = None
    calls: Dict[Optional[int], str] = {}
    out = []
    for event in events:
        if event.response_id is not None:
            response_id = event.response_id
        if event.call_id is not None:
            calls[event.output_index] = event.call_id
        call_id = event.call_id if event.call_id is not None else calls.get(event.output_index)
        if event.response_id != response_id or event.call_id != call_id:
            event = replace(event, response_id=response_id, call_id=call_id)
        out.append(event)
    return out


def _placed(
    events: Sequence[BodyEvent], chunks: Sequence[bytes], times: Sequence[float]
) -> List[Tuple[BodyEvent, int, float]]:
    """``(event, chunk index, flush time)`` of each event whose last byte went out."""
    ends: List[int] = []
    total = 0
    for chunk in chunks[: len(times)]:
        total += len(chunk)
        ends.append(total)
    out: List[Tuple[BodyEvent, int, float]] = []
    index = 0
    for event in events:
        while index < len(ends) and ends[index] < event.end:
            index += 1
        if index >= len(ends):
            break
        out.append((event, index, times[index]))
    return out


def _wire(event: BodyEvent, seq: int, chunk: int, at: float) -> WireEvent:
    return WireEvent(
        seq, event.type, event.length, chunk, event.end, at,
        event.response_id, event.output_index, event.call_id,
    )


def timed_events(
    content_type: str, chunks: Sequence[bytes], times: Sequence[float], first_seq: int = 0
) -> List[WireEvent]:
    """The events of a body sent as ``chunks``, the ``i``-th flushed at ``times[i]``.

    Only events whose last byte went out are returned (``times`` may be shorter than
    ``chunks`` while a stream is under way, or after the client left); they are
    numbered from ``first_seq``.
    """
    events = split_events(content_type, b"".join(chunks[: len(times)]))
    placed = _placed(events, chunks, times)
    return [_wire(e, first_seq + i, chunk, at) for i, (e, chunk, at) in enumerate(placed)]


class _Numbering(Protocol):
    #: Set once the provider is closed: a response under way then will not go on.
    closed: bool

    def number_events(self) -> None: ...


class _Noted(Protocol):
    """What a protocol notes on a request as it answers it (see :class:`ResponseLog`)."""

    _reply: Any
    _times: Sequence[float]
    _written: int
    _end: Optional[str]
    _seqs: Sequence[int]
    _numbering: Optional[_Numbering]


#: The transport chunks and the events of recently logged replies, by the reply's
#: identity: a scripted reply is usually sent many times over, and its bytes do not
#: change (the protocols' caches of encoded replies rely on that too). Each entry is
#: ``[reply, chunks, events or None]``: the events are cut only when first asked for.
_BODIES: Dict[int, List[Any]] = {}
_BODIES_KEPT = 64
_BODIES_LOCK = threading.Lock()


def _body_of(reply: Any, events: bool) -> Tuple[List[bytes], Optional[List[BodyEvent]]]:
    """A reply's transport chunks (a stream's non-empty chunks, or the whole body as
    sent), and with ``events`` the events they hold; each made once per reply and kept."""
    with _BODIES_LOCK:
        found = _BODIES.get(id(reply))
    if found is None or found[0] is not reply:
        chunks = getattr(reply, "chunks", None)
        if chunks is not None:
            body_chunks = [bytes(c) for c in chunks if c]
        else:
            body = reply.encoded()
            if getattr(reply, "cut_at", None) is not None:
                body = reply.sent_body(body)
            body_chunks = [body] if body else []
        found = [reply, body_chunks, None]  # the reply is kept: its id stays its own
        with _BODIES_LOCK:
            if len(_BODIES) >= _BODIES_KEPT:
                del _BODIES[next(iter(_BODIES))]  # the oldest
            _BODIES[id(reply)] = found
    if events and found[2] is None:
        content_type = str(getattr(reply, "content_type", "application/octet-stream"))
        found[2] = _split_once(content_type, b"".join(found[1]))
    return found[1], found[2]


#: The events of recently cut bodies, by content type and bytes: a case builds its reply
#: afresh, yet its body is the same bytes case after case (the wires derive ids from
#: seeds), and cutting one decodes every event's JSON.
_SPLIT: Dict[Tuple[str, bytes], List[BodyEvent]] = {}


def _split_once(content_type: str, body: bytes) -> List[BodyEvent]:
    key = (content_type, body)
    with _BODIES_LOCK:
        events = _SPLIT.get(key)
    if events is None:
        events = split_events(content_type, body)
        with _BODIES_LOCK:
            if len(_SPLIT) >= _BODIES_KEPT:
                del _SPLIT[next(iter(_SPLIT))]  # the oldest
            _SPLIT[key] = events
    return events


def _events_of(reply: Any) -> Tuple[List[bytes], List[BodyEvent]]:
    chunks, events = _body_of(reply, True)
    assert events is not None
    return chunks, events


class ResponseLog:
    """What one response sent: the reply, and when each of its chunks went out.

    A view of the request it answered. The protocol notes it all on the request as
    it writes: the reply, one ``time.monotonic()`` in :attr:`times` just before each
    chunk's write, the count of chunks :attr:`written` just after, and the :attr:`end`;
    :meth:`events` does the rest when asked. ``numbering`` (the provider) turns the
    events into provider-wide sequence numbers, kept in :attr:`seqs`.
    """

    __slots__ = ("_request",)

    def __init__(self, request: _Noted) -> None:
        self._request = request

    @property
    def reply(self) -> Any:
        return self._request._reply

    @property
    def times(self) -> Sequence[float]:
        """When each chunk went out (just before its write), one per chunk."""
        return self._request._times

    @property
    def written(self) -> int:
        """How many chunks were written to the socket (``times`` may be one ahead)."""
        return self._request._written

    @property
    def end(self) -> Optional[str]:
        """How the provider ended the response: ``"complete"``, or a stream cut as its
        reply said, ``"close"`` (cleanly) or ``"reset"``. ``None`` while it is under
        way, while it hangs, and when the client left (or the provider closed) before
        it ended."""
        return self._request._end

    @property
    def seqs(self) -> Sequence[int]:
        """The provider-wide sequence numbers of the events numbered so far."""
        return self._request._seqs

    @property
    def numbering(self) -> Optional[_Numbering]:
        return self._request._numbering

    @property
    def content_type(self) -> str:
        return str(getattr(self.reply, "content_type", "application/octet-stream"))

    @property
    def status(self) -> int:
        return int(getattr(self.reply, "status", 0))

    @property
    def chunks(self) -> List[bytes]:
        """The body as its transport chunks: a stream's non-empty chunks, or the whole body."""
        return _body_of(self.reply, False)[0]

    @property
    def incomplete(self) -> bool:
        """Whether the response did not end complete: cut, still under way, or left hanging."""
        return self.end != "complete"

    def abandoned(self) -> bool:
        """Whether the provider closed before this response ended: no more of it will go out."""
        numbering = self.numbering
        return self.end is None and numbering is not None and numbering.closed

    def body_events(self) -> List[BodyEvent]:
        """Every event in the whole body (sent or not), cut once per reply and kept."""
        return _events_of(self.reply)[1]

    def complete(self) -> bool:
        """Every event is out and numbered: nothing left for the numbering to do."""
        return len(self.seqs) >= len(self.body_events())

    def sent(self) -> List[Tuple[BodyEvent, int, float]]:
        """``(event, chunk index, flush time)`` of each event whose last byte went out."""
        chunks, events = _events_of(self.reply)
        return _placed(events, chunks, list(self.times))

    def events(self) -> List[WireEvent]:
        """The events that went out, numbered provider-wide, in order."""
        numbering = self.numbering
        if numbering is not None:
            numbering.number_events()
        seqs = self.seqs
        return [
            _wire(e, seqs[i] if i < len(seqs) else i, chunk, at)
            for i, (e, chunk, at) in enumerate(self.sent())
        ]


def events_around(
    events: Sequence[WireEvent], seq: int, before: int = 2, after: int = 2, since: Optional[float] = None
) -> str:
    """The few events around event ``seq``, one per line, that one marked ``>``.

    For a failure message: ``seq`` is the event the problem was seen at; ``since``
    (a ``time.monotonic()`` value, such as the request's ``received_at``) makes the
    times relative. An unknown ``seq`` quotes the last few events instead.
    """
    if not events:
        return "    (no events were sent)"
    at = next((i for i, e in enumerate(events) if e.seq == seq), None)
    if at is None:
        at = len(events) - 1
        head = f"    (no event #{seq}; the last events sent:)\n"
        before, after = before + after, 0
    else:
        head = ""
    low, high = max(0, at - before), min(len(events), at + after + 1)
    lines = []
    if low > 0:
        lines.append(f"    ... {low} earlier")
    for i in range(low, high):
        mark = ">" if i == at and not head else " "
        lines.append(f"  {mark} {events[i].describe(since)}")
    if high < len(events):
        lines.append(f"    ... {len(events) - high} later")
    return head + "\n".join(lines)
