"""The provider's side of a stage: read what the loop sent, decide the next turn, play it.

Strategy: per generation request the wire reads the conversation back
(:meth:`~conformance.wires.Wire.read_history`). A history the real API would refuse
gets that API's own 400 (:meth:`~conformance.wires.Wire.history_error`), and its
problems are kept for the ``result-format`` check. Otherwise the stage's script
decides the model's next turn from the step it is at (the accepted requests so far),
and the wire plays it whole or streamed as the request asked, each stream event cut in
two (:func:`~conformance.wires._base.event_chunks`, coarser than the backend suite's
cuts: a write per piece is what a case's time went on). The model's final text
quotes a tool's fixture id only when its result came back under the right call id
and tool, and says what was missing otherwise, as a real model works only with what
it was given. Everything the invariants need is kept: each request, its history,
the turn played, and the events that carried each call's arguments.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from ..provider.replies import HangReply, RecordedRequest, Reply, StreamReply
from ..wires._turns import History, ScriptedCall, ScriptedTurn, TurnEvents, play_turn
from ._fault_replies import CUTS
from .stages import Stage, Step, reasoning_for

if TYPE_CHECKING:
    from ..contract import Message
    from ..wires._base import Wire
    from .log import ExecutionRecord
    from .tools import GateToolset

__all__ = [
    "HOLD_BEFORE_LAST",
    "Conversation",
    "Exchange",
    "PlannedCall",
    "fixture_id_in",
    "same_write",
    "scripted_write_key",
]

#: How long a stream is held right before a call's last argument event: the window
#: in which a loop that runs a call on incomplete arguments is seen doing it.
HOLD_BEFORE_LAST = 0.15
#: The longest a cancel stage holds its stream after the first argument event.
HOLD_FOR_CANCEL = 30.0

_FIXTURE_ID = re.compile(r'"fixture_id"\s*:\s*"([^"\\]+)"')


def scripted_write_key(call: ScriptedCall) -> Optional[str]:
    """The key a loop runs the model's ``call`` at most once under, where its tool is a write."""
    import json

    from ..contract import ToolCall
    from .tools import TOOLS, write_key

    tool = TOOLS.get(call.name)
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return None
    if tool is None or not isinstance(arguments, dict):
        return None
    return write_key(ToolCall(call.id, call.name, arguments), tool.parameters)


def same_write(record: ExecutionRecord, call: ScriptedCall) -> bool:
    """Whether ``record`` is a run of the write ``call`` asks for: the same write tool under the
    same idempotency key, whose result answers a repeat of that write under any call id."""
    from ..contract import ToolCall
    from .tools import TOOLS, write_key

    key = scripted_write_key(call)
    if key is None or record.tool != call.name or not isinstance(record.arguments, dict):
        return False
    ran = ToolCall(record.call_id, record.tool, record.arguments)
    return write_key(ran, TOOLS[call.name].parameters) == key


def fixture_id_in(text: str) -> Optional[str]:
    """The fixture id a tool result's text carries, read even from a cut-off prefix."""
    match = _FIXTURE_ID.search(text)
    return match.group(1) if match else None


@dataclass(frozen=True)
class PlannedCall:
    """One call the scripted model made: the call, the exchange it was played in, its position."""

    call: ScriptedCall
    exchange: int
    position: int


@dataclass
class Exchange:
    """One generation request and what the provider did with it."""

    index: int
    request: RecordedRequest
    history: Optional[History]
    stream: bool
    #: Why the real API would refuse this history (then the reply is its 400).
    problems: Tuple[str, ...] = ()
    #: The accepted step this request was (``None`` where refused).
    step: Optional[int] = None
    turn: Optional[ScriptedTurn] = None
    events: Optional[TurnEvents] = None
    hold: Optional[Tuple[int, str]] = None
    #: For a held cancel stream: how many transport chunks go out before the hold.
    head_chunks: int = 0
    #: The fault this request was answered with instead of the turn (``faults``).
    fault: Optional[str] = None
    #: The retry delay a 429 fault asked for, in seconds (``None``: it asked for none).
    asked: Optional[float] = None

    @property
    def cut(self) -> bool:
        """Whether the model's turn was cut short here: its calls never completed."""
        return self.fault in CUTS


class Conversation:
    """Answers every request of one stage's run, and keeps what the checks read."""

    def __init__(self, wire: Wire, stage: Stage, toolset: GateToolset, max_requests: int) -> None:
        self.wire = wire
        self.stage = stage
        self.toolset = toolset
        self.max_requests = max_requests
        self.exchanges: List[Exchange] = []
        self.lock = threading.Lock()
        #: Set once the first turn's reply is decided (the cancel stage waits on it).
        self.first_reply = threading.Event()
        reasoning = reasoning_for(wire)
        self.reasoning = reasoning if reasoning is not None else ((), ())
        #: Why the provider would never send the stage's fault to the request that came
        #: (``faults.fault_unasked``): the case is then skipped with that reason.
        self.unasked: List[str] = []

    # -- the handler -----------------------------------------------------------------

    def handle(self, request: RecordedRequest) -> Reply:
        wire = self.wire
        if not wire.is_generation(request):
            return wire.aux_reply(request)
        history = wire.read_history(request)
        stream = wire.wants_stream(request)
        with self.lock:
            exchange = Exchange(len(self.exchanges), request, history, stream)
            self.exchanges.append(exchange)
            accepted = sum(1 for e in self.exchanges if e.step is not None)
        if history is None:
            exchange.problems = (f"{wire.name} could not read the conversation this request carried",)
            return wire.history_error(exchange.problems)
        if history.problems:
            exchange.problems = tuple(history.problems)
            return wire.history_error(history.problems)
        if accepted == 0 and self.stage.fault:
            from .faults import fault_unasked

            why = fault_unasked(self.stage, wire, request)
            if why:
                from ..provider.replies import JsonReply

                self.unasked.append(why)
                self.first_reply.set()
                # The loop gets an answer it cannot mistake for the fault, and stops.
                return JsonReply({"error": {"message": why}}, status=501)
        step = Step(
            accepted,
            wire,
            self.stage.name,
            history,
            self.max_requests,
            quote=lambda: self.quote(history),
            reasoning=self.reasoning[0],
            call_reasoning=self.reasoning[1],
        )
        turn = self.stage.script(step)
        exchange.step, exchange.turn, exchange.hold = accepted, turn, step.hold
        exchange.fault = step.fault
        try:
            return self._play(exchange, turn, request)
        finally:
            if accepted == 0:
                self.first_reply.set()

    def _play(self, exchange: Exchange, turn: ScriptedTurn, request: RecordedRequest) -> Reply:
        from ..wires._base import event_chunks

        wire = self.wire
        hold = exchange.hold
        if exchange.fault is not None:
            from ._fault_replies import fault_reply

            played = wire.turn_stream(turn, request) if exchange.stream else None
            exchange.events = played
            faulty = fault_reply(exchange.fault, wire, turn, played, request)
            if exchange.fault == "rate-limit":
                from ._fault_replies import asked_delay

                exchange.asked = asked_delay(faulty)
            return faulty
        if not exchange.stream:
            if hold is not None and hold[1] == "cancel":
                return HangReply()
            reply = play_turn(wire, turn, request)
            assert reply is not None, f"{wire.name} scripts turns but played none"
            return reply
        played = wire.turn_stream(turn, request)
        assert played is not None, f"{wire.name} scripts turns but played none"
        exchange.events = played
        if hold is None:
            reply = play_turn(wire, turn, request, cut=event_chunks, played=played)
        else:
            position, how = hold
            first, last = played.arguments.get(position, (-1, -1))
            if how == "cancel":
                head = event_chunks(played.events[: first + 1], f"{wire.name}/{turn.seed}/head")
                exchange.head_chunks = len(head)
                return StreamReply(
                    head, content_type=played.content_type, headers=dict(played.headers), hang=True
                )
            reply = play_turn(
                wire,
                turn,
                request,
                pause_after=max(first, last - 1),
                pause=HOLD_BEFORE_LAST,
                cut=event_chunks,
                played=played,
            )
        assert reply is not None, f"{wire.name} scripts turns but played none"
        return reply

    # -- the model's final text --------------------------------------------------------

    def planned(self) -> List[PlannedCall]:
        """Every call the scripted model made, in order (not those of a turn cut short)."""
        with self.lock:
            exchanges = list(self.exchanges)
        return [
            PlannedCall(call, e.index, position)
            for e in exchanges
            if e.turn is not None and not e.cut
            for position, call in enumerate(e.turn.calls)
        ]

    def cut_calls(self) -> List[PlannedCall]:
        """The calls of every turn the provider cut short: none of them completed."""
        with self.lock:
            exchanges = list(self.exchanges)
        return [
            PlannedCall(call, e.index, position)
            for e in exchanges
            if e.turn is not None and e.cut
            for position, call in enumerate(e.turn.calls)
        ]

    def quote(self, history: History) -> str:
        """The model's final text: per call, what its result gave, or what was missing."""
        parts = []
        for planned, result in self.correlate(history):
            label = self.label(planned)
            parts.append(f"{label}: {self.what_came(planned, result)}")
        if not parts:
            return "Nothing was called."
        return "Here is what the tools gave. " + "; ".join(parts) + "."

    def label(self, planned: PlannedCall) -> str:
        call = planned.call
        if self.wire.sends_call_ids:
            return f"{call.name} {call.id}"
        calls = [p for p in self.planned() if p.call.name == call.name]
        return f"{call.name} #{calls.index(planned) + 1}"

    def correlate(self, history: History) -> List[Tuple[PlannedCall, Optional[Message]]]:
        """Each planned call with the tool message that answers it in ``history`` (or ``None``).

        By call id where the provider sends ids; by tool name and order where it does not,
        and, where the wire's history reader pairs a result sent without an id with its
        call by name and order (Gemini), those results too: one rule on both sides.
        """
        results = list(history.results)
        planned = self.planned()
        if not self.wire.sends_call_ids:
            return _by_name(planned, results)
        by_id: Dict[str, Message] = {}
        for message in results:
            assert message.tool_result is not None
            if message.tool_result.call_id:
                by_id.setdefault(message.tool_result.call_id, message)
        pairs = [(p, by_id.get(p.call.id)) for p in planned]
        if not self.wire.pairs_results_by_name:
            return pairs
        open_calls = [p for p, message in pairs if message is None]
        without_id = [m for m in results if m.tool_result is not None and not m.tool_result.call_id]
        found = dict(_by_name(open_calls, without_id))
        return [(p, message if message is not None else found.get(p)) for p, message in pairs]

    def what_came(self, planned: PlannedCall, message: Optional[Message]) -> str:
        """The fixture id the result carries, when it is this call's; else what was wrong."""
        call = planned.call
        if message is None or message.tool_result is None:
            return "no result came back for this call"
        result = message.tool_result
        if result.name and result.name != call.name:
            return f"the result came back under the tool {result.name!r}, not {call.name!r}"
        if result.is_error or '"error"' in result.content[:20]:
            record = self._record_for(call)
            code = record.error.code if record is not None and record.error is not None else "error"
            return f"the tool failed ({code})"
        fixture = fixture_id_in(result.content)
        if fixture is None:
            return "the result carried no fixture id"
        record = self.toolset.log.find(fixture)
        if record is None:
            return f"the result carried {fixture}, which no execution returned"
        other = record.tool != call.name or (self.wire.sends_call_ids and record.call_id != call.id)
        if other and not same_write(record, call):
            owner = f"{record.tool} {record.call_id}"
            return f"the result carried {fixture}, which the execution of {owner} returned"
        return fixture

    def _record_for(self, call: ScriptedCall) -> Optional[ExecutionRecord]:
        records = self.toolset.log.for_call(call.id)
        return records[0] if records else None


def _by_name(
    planned: List[PlannedCall], results: List[Message]
) -> List[Tuple[PlannedCall, Optional[Message]]]:
    """Each call with the next result of its tool, in order (a result naming no tool answers any)."""
    pairs: List[Tuple[PlannedCall, Optional[Message]]] = []
    taken: Dict[str, int] = {}
    for call in planned:
        name = call.call.name
        same = [m for m in results if m.tool_result is not None and m.tool_result.name in (name, "")]
        k = taken.get(name, 0)
        pairs.append((call, same[k] if k < len(same) else None))
        taken[name] = k + 1
    return pairs
