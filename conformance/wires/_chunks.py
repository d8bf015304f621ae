"""A reply's bytes: JSON as providers write it, a text cut into a stream's deltas, and a
stream cut the way TCP delivers it.

Strategy: streams are cut with :func:`tcp_chunks` so that events, JSON strings and
multi-byte UTF-8 characters straddle chunk boundaries the way TCP delivers them, the
same way on every run; :func:`cut_events` and :func:`cut_short` end a reply before
its end, the way a connection that dies mid-answer leaves a client.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Collection, List, Sequence, Tuple

from ._ids import _digest

if TYPE_CHECKING:
    from ..provider.replies import JsonReply, Reply

__all__ = [
    "CUT_IN_CALL",
    "cut_events",
    "cut_short",
    "dumps",
    "ended_cleanly",
    "event_chunks",
    "split_text",
    "tcp_chunks",
]


def dumps(obj: Any) -> str:
    """JSON as providers send it: compact, UTF-8 left as is."""
    import json  # per reply, not per import: a test module that names a wire sends nothing yet

    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def split_text(text: str, pieces: int) -> Tuple[str, ...]:
    """``text`` in ``pieces`` consecutive parts of near-equal length (fewer when it is short)."""
    if not text:
        return ()
    step = max(1, -(-len(text) // max(1, pieces)))
    return tuple(text[start : start + step] for start in range(0, len(text), step))


def tcp_chunks(events: Sequence[bytes], seed: str) -> List[bytes]:
    """Cut a stream's bytes the way TCP might deliver them, deterministically.

    The cuts fall at pseudo-random offsets derived from ``seed`` (1 to 48 bytes
    apart), plus two that are always made: one inside the first multi-byte UTF-8
    character and one inside the first JSON string value, so that a backend that
    decodes or parses per chunk is caught.
    """
    data = b"".join(events)
    if not data:
        return []
    cuts = _telling_cuts(data)
    digest = _digest(seed.encode("utf-8"))
    position, counter = 0, 0
    while True:
        if counter >= len(digest):
            digest = _digest(digest)
            counter = 0
        position += 1 + digest[counter] % 48
        counter += 1
        if position >= len(data):
            break
        cuts.add(position)
    return _cut(data, cuts)


def event_chunks(events: Sequence[bytes], seed: str) -> List[bytes]:
    """Cut a stream into each event in two pieces, deterministically: coarser than
    :func:`tcp_chunks`, and far cheaper to send.

    Each event is cut once, at a pseudo-random offset derived from ``seed``, and the
    two cuts :func:`tcp_chunks` always makes are made too (inside the first multi-byte
    UTF-8 character and inside the first JSON string value). So no event arrives whole
    in one read, and a reader that decodes or parses per chunk is still caught; what is
    left out is the many small pieces, which a loop over a tested backend gains nothing
    from and which cost a write each.
    """
    data = b"".join(events)
    if not data:
        return []
    cuts = _telling_cuts(data)
    start = 0
    for index, event in enumerate(events):
        if len(event) > 1:
            digest = _digest(f"{seed}/{index}".encode())
            cuts.add(start + 1 + int.from_bytes(digest[:4], "big") % (len(event) - 1))
        start += len(event)
        cuts.add(start)
    return _cut(data, cuts)


#: The lead byte of a multi-byte UTF-8 character.
_MULTI_BYTE_LEAD = re.compile(rb"[\xc0-\xff]")


def _telling_cuts(data: bytes) -> set[int]:
    """The cuts every stream gets: inside its first multi-byte character and its first string."""
    cuts = set()
    lead = _MULTI_BYTE_LEAD.search(data)
    if lead is not None:
        cuts.add(lead.start() + 1)
    quote = data.find(b'":"')
    if quote != -1 and quote + 5 < len(data):
        cuts.add(quote + 5)
    return cuts


def _cut(data: bytes, cuts: Collection[int]) -> List[bytes]:
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(data)), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


#: The ``stream-cut`` variants cut inside a tool call, in either mode (a case in one mode
#: whose backend asks for the other form gets the same place to cut).
CUT_IN_CALL = frozenset({"inside-tool-call", "tool-call-body"})


def cut_events(events: Sequence[bytes], keep: int, inside: bool = True) -> List[bytes]:
    """A stream cut short: its first ``keep`` events whole, then, where ``inside``, the first
    half of the next one (the cut falls inside an event rather than between two).

    The provider then ends it without its terminal event (``StreamReply(end="close")``).
    """
    kept = [bytes(e) for e in events[:keep]]
    if inside and keep < len(events):
        following = bytes(events[keep])
        kept.append(following[: max(1, len(following) // 2)])
    return kept


def cut_short(reply: JsonReply, inside: str) -> JsonReply:
    """A whole ``reply`` cut short in the middle of ``inside`` (its first place in the body)
    and closed cleanly: its ``content-length`` still names the whole body."""
    import dataclasses

    body = reply.encoded()
    needle = inside.encode("utf-8")
    at = body.find(needle)
    cut = at + max(1, len(needle) // 2) if at >= 0 else len(body) // 2
    return dataclasses.replace(reply, end="close", cut_at=cut)


def ended_cleanly(reply: Reply, by_length: bool = False) -> Reply:
    """A cut ``reply`` whose response ends properly, as a gateway ends its own when its
    upstream fails: the same bytes, then a stream's proper end (the chunked encoding's last
    chunk over HTTP/1.1, ``END_STREAM`` over h2; with ``by_length``, the ``content-length``
    the response named), or a body sent whole by a ``content-length`` that names only the
    bytes that came. Only the missing terminal event (or the body's broken JSON) tells the
    client the turn was cut."""
    import dataclasses

    from ..provider.replies import JsonReply, StreamReply

    if isinstance(reply, StreamReply) and reply.end != "complete":
        if by_length:
            length = str(sum(len(c) for c in reply.chunks))
            headers = {k: v for k, v in (reply.headers or {}).items() if k.lower() != "transfer-encoding"}
            return dataclasses.replace(reply, end="complete", headers={**headers, "content-length": length})
        return dataclasses.replace(reply, end="complete")
    if isinstance(reply, JsonReply) and reply.end != "complete":
        return JsonReply(
            reply.sent_body(reply.encoded()), reply.status, reply.headers, reply.content_type
        )
    return reply
