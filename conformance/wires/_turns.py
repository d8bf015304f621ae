"""Scripted turns played: what a wire needs to play a whole conversation.

Strategy: the single-turn scenarios are written by hand per wire, but a multi-turn
conversation (the agent-loop suite, and the ``tool-result`` and
``parallel-tool-calls`` scenarios) is scripted once, in the provider-neutral terms of
this module, and each wire only translates:

- out, a :class:`ScriptedTurn` (text, calls, reasoning, a finish) into the provider's
  whole reply (:meth:`Wire.turn_whole`) or the provider's stream events
  (:meth:`Wire.turn_stream`, a :class:`TurnEvents` that also says which event carried
  each call's first and last argument fragment, so that faults and checks can be
  placed at protocol events rather than byte counts);
- in, the request a loop sent into a :class:`History`: the conversation in the
  library's normal form (:class:`~conformance.Message`), and every departure from the
  provider's own format as a sentence (:meth:`Wire.read_history`);
- back, the 400 the real API answers a malformed history with
  (:meth:`Wire.history_error`).

:func:`play_turn` then cuts the events the way TCP delivers them, optionally holding
the stream after a chosen event, and returns the reply the fake provider carries out.
The data (the turn, its events, the history) lives a floor down, in ``_script``, and
is passed on from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence

from ._chunks import tcp_chunks
from ._script import (
    History,
    ScriptedCall,
    ScriptedTurn,
    TurnEvents,
    reasoning_key,
    split_text,
)

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest, Reply
    from ._base import Wire

__all__ = [
    "History",
    "reasoning_key",
    "ScriptedCall",
    "ScriptedTurn",
    "TurnEvents",
    "split_text",
]


def play_turn(
    wire: Wire,
    turn: ScriptedTurn,
    request: RecordedRequest,
    *,
    pause_after: Optional[int] = None,
    pause: float = 0.0,
    hang: bool = False,
    cut: Optional[Callable[[Sequence[bytes], str], List[bytes]]] = None,
    played: Optional[TurnEvents] = None,
) -> Optional[Reply]:
    """The reply that plays ``turn`` on ``wire``, whole or streamed as ``request`` asked.

    ``None`` where the wire cannot script turns. A stream is cut the way TCP delivers
    it (:func:`~conformance.wires._chunks.tcp_chunks`), with a cut always made after the
    event ``pause_after``; with ``pause`` the provider holds the stream there that many
    seconds (a window in which a loop that acts too early is seen acting), and with
    ``hang`` the stream stays open after its last chunk. ``cut`` replaces
    :func:`~conformance.wires._chunks.tcp_chunks` (``event_chunks`` cuts each event in two);
    ``played``, the stream's events where the caller has them already, saves working
    them out again.
    """
    from ..provider.replies import StreamReply

    if cut is None:
        cut = tcp_chunks

    if not wire.wants_stream(request):
        return wire.turn_whole(turn, request)
    if played is None:
        played = wire.turn_stream(turn, request)
    if played is None:
        return None
    events = played.events
    pauses: Dict[int, float] = {}
    if pause_after is None:
        chunks = cut(events, f"{wire.name}/{turn.seed}")
    else:
        head = cut(events[: pause_after + 1], f"{wire.name}/{turn.seed}/head")
        tail = cut(events[pause_after + 1 :], f"{wire.name}/{turn.seed}/tail")
        chunks = head + tail
        if pause > 0 and tail:
            pauses[len(head)] = pause
    return StreamReply(
        chunks,
        content_type=played.content_type,
        headers=dict(played.headers),
        hang=hang,
        pauses=pauses,
    )
