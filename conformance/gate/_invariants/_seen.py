"""What one agent-loop case saw, as every family of invariants reads it: :class:`LoopSeen`.

Strategy: the case is over when the invariants run, so a question many checks ask
(the planned calls, which execution ran for which call, where each call's result
went back) is worked out once, on first asking, and kept on the :class:`LoopSeen`.
A problem is a :class:`LoopProblem`: the id of the check that saw it, its text, and
the provider events just before it, the evidence below any SDK. The questions about
one planned call that more than one family asks (must the loop refuse it, did its
turn end at the limit) live here too.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, TypeVar

from ...provider import RecordedRequest, WireEvent, events_around
from .._conversation import Conversation, Exchange, PlannedCall
from ..log import ExecutionRecord, InFlight
from ..sandbox import JournalEntry
from ..schema import validate
from ..stages import ENDED_FINISHES
from ..tools import TOOLS

if TYPE_CHECKING:
    from ...contract import Message
    from .._case import LoopCase as AgentLoopCase
    from .._case import LoopOutcome

__all__ = [
    "READ_WITHIN",
    "Check",
    "LoopProblem",
    "LoopSeen",
    "ended_turn",
    "is_result",
    "refusal",
    "same_arguments",
    "value_of",
]


_T = TypeVar("_T")


#: How long a loop may take to read a turn once the provider has sent it all: a call
#: that came later than this before the loop's deadline need not run.
READ_WITHIN = 0.1


def _once(method: Callable[[LoopSeen], _T]) -> Callable[[LoopSeen], _T]:
    """Work a :class:`LoopSeen` question out on first asking; the case is over, so the
    answer cannot change, and the checks ask the same questions many times over."""
    name = method.__name__

    @functools.wraps(method)
    def once(seen: LoopSeen) -> _T:
        memo = seen.__dict__.setdefault("_memo", {})
        if name not in memo:
            memo[name] = method(seen)
        return memo[name]  # type: ignore[no-any-return]

    return once


@dataclass(frozen=True)
class LoopProblem:
    """One thing a loop got wrong, the check that saw it, and the provider events before it."""

    check: str
    text: str
    evidence: str = ""

    def __str__(self) -> str:
        return f"{self.text} [{self.check}]"


@dataclass
class LoopSeen:
    """Everything one case saw."""

    case: AgentLoopCase
    outcome: LoopOutcome
    conversation: Conversation
    records: Tuple[ExecutionRecord, ...]
    requests: List[RecordedRequest]
    #: Executions still running when the case read the log (a tool left behind).
    in_flight: Tuple[InFlight, ...] = ()
    #: What the write tool wrote, every write in order.
    journal: Tuple[JournalEntry, ...] = ()

    @property
    def stage(self) -> Any:
        return self.case.stage

    @property
    def exchanges(self) -> List[Exchange]:
        return self.conversation.exchanges

    @property
    def refused(self) -> List[Exchange]:
        return [e for e in self.exchanges if e.problems]

    @property
    def finished_cleanly(self) -> bool:
        """The loop returned a result in time, every history it sent was accepted."""
        o = self.outcome
        return not o.hung and o.error is None and o.ended and not self.refused and is_result(o.result)

    @_once
    def planned(self) -> List[PlannedCall]:
        return self.conversation.planned()

    def label(self, planned: PlannedCall) -> str:
        return f"{planned.call.name} {planned.call.id}"

    @_once
    def ran(self) -> List[ExecutionRecord]:
        """Executions the loop asked for (refused at the door or not), in start order."""
        return sorted(self.records, key=lambda r: r.sequence)

    @_once
    def before_abort(self) -> List[ExecutionRecord]:
        """Executions before any abort, but for those of a cut or refused call (the fault checks')."""
        abort_at = self.outcome.abort_at
        owned = {r.sequence for r, _ in [*self.on_cut_calls(), *self.on_refused_calls()]}
        return [
            r for r in self.ran() if (abort_at is None or r.started < abort_at) and r.sequence not in owned
        ]

    # -- the fault stages ----------------------------------------------------------------

    @_once
    def faulted(self) -> List[Exchange]:
        """The requests the provider answered with a fault instead of the model's turn."""
        return [e for e in self.exchanges if e.fault is not None]

    def _owned_by(self, calls: List[PlannedCall]) -> List[Tuple[ExecutionRecord, PlannedCall]]:
        """Each execution of one of ``calls``: by call id, or where the provider sends none,
        an execution of that tool begun before the next request after the call's turn."""
        out: List[Tuple[ExecutionRecord, PlannedCall]] = []
        for record in self.ran():
            for planned in calls:
                if self.case.target.wire.sends_call_ids:
                    mine = record.call_id == planned.call.id
                else:
                    after = self.exchanges[planned.exchange + 1 :]
                    until = after[0].request.received_at if after else float("inf")
                    began = self.exchanges[planned.exchange].request.received_at
                    mine = record.tool == planned.call.name and began <= record.started < until
                if mine:
                    out.append((record, planned))
                    break
        return out

    @_once
    def on_cut_calls(self) -> List[Tuple[ExecutionRecord, PlannedCall]]:
        """Executions of a call whose turn the provider cut short."""
        return self._owned_by(self.conversation.cut_calls())

    @_once
    def refused_calls(self) -> List[PlannedCall]:
        """The calls the loop must refuse: arguments that are not a JSON object, or an unknown tool."""
        # A call of a turn that ended at the limit is finish-reason's, whatever its arguments.
        return [p for p in self.planned() if refusal(p) is not None and ended_turn(self, p) is None]

    @_once
    def on_refused_calls(self) -> List[Tuple[ExecutionRecord, PlannedCall]]:
        """Executions of a call the loop must refuse."""
        return self._owned_by(self.refused_calls())

    @_once
    def matches(self) -> List[Tuple[ExecutionRecord, Optional[PlannedCall]]]:
        """Each execution before any abort with the planned call it ran.

        By call id; where the provider sends none (Ollama), by tool name and arguments
        first, then by order among the calls to that tool still unpaired: the provider
        documents parallel calls as unordered, so a loop may run a turn's calls in any
        order.
        """
        planned = self.planned()
        if self.case.target.wire.sends_call_ids:
            by_id = {p.call.id: p for p in planned}
            return [(r, by_id.get(r.call_id)) for r in self.before_abort()]
        records = self.before_abort()
        paired: Dict[int, PlannedCall] = {}
        taken: List[PlannedCall] = []
        for at, record in enumerate(records):
            same = next(
                (
                    p
                    for p in planned
                    if p.call.name == record.tool and p not in taken and same_arguments(p, record)
                ),
                None,
            )
            if same is not None:
                paired[at] = same
                taken.append(same)
        for at, record in enumerate(records):
            if at in paired:
                continue
            left = next((p for p in planned if p.call.name == record.tool and p not in taken), None)
            if left is not None:
                paired[at] = left
                taken.append(left)
        return [(record, paired.get(at)) for at, record in enumerate(records)]

    def records_for(self, planned: PlannedCall) -> List[ExecutionRecord]:
        return [r for r, p in self.matches() if p == planned]

    def came_too_late(self, planned: PlannedCall) -> bool:
        """Whether the turn that made ``planned`` was not all sent until its budget was nearly over.

        Only where the stage sets a budget of its own (the timeout fault's), so short that
        a loaded machine can spend it on the first turn: a loop that stops at its
        deadline owes no run of a call it did not have whole, or had only in the last
        :data:`READ_WITHIN` of its budget.
        """
        if self.stage.max_seconds is None:
            return False
        log = self.exchanges[planned.exchange].request.response
        if log is None or log.end != "complete" or not log.times:
            return True
        deadline = self.outcome.started + self.case.max_seconds
        return log.times[-1] > deadline - READ_WITHIN

    def interleaved_cause(self, planned: PlannedCall) -> str:
        """The likely cause, where ``planned`` was one of a streamed turn's calls whose argument
        fragments alternated with another call's: a parser that adds each fragment to the
        call opened last, not to the one its index names, mixes their arguments up."""
        exchange = self.exchanges[planned.exchange]
        turn = exchange.turn
        if turn is None or not turn.interleave or len(turn.calls) < 2 or exchange.events is None:
            return ""
        spans = exchange.events.arguments
        mine = spans.get(planned.position)
        others = [spans[p] for p in spans if p != planned.position]
        if mine is None or not any(a < mine[1] and mine[0] < b for a, b in others):
            return ""
        events = exchange.request.events
        seqs = [events[i].seq for i in mine if i < len(events)]
        where = f" (events #{seqs[0]} to #{seqs[-1]})" if len(seqs) == 2 else ""
        return (
            f"; its argument fragments{where} alternated with another call's, each naming its call by "
            "index: the likely cause is fragments added to the call opened last instead of to the call "
            "their index names"
        )

    def answer_of(self, planned: PlannedCall) -> Optional[Exchange]:
        """The accepted request right after the turn that made ``planned``: where its result belongs."""
        for exchange in self.exchanges[planned.exchange + 1 :]:
            if exchange.history is not None and not exchange.problems:
                return exchange
        return None

    def result_of(self, planned: PlannedCall) -> Tuple[Optional[Exchange], Optional[Message]]:
        exchange = self.answer_of(planned)
        if exchange is None or exchange.history is None:
            return exchange, None
        for candidate, message in self.conversation.correlate(exchange.history):
            if candidate == planned:
                return exchange, message
        return exchange, None

    # -- evidence ---------------------------------------------------------------------

    def all_events(self) -> List[Tuple[WireEvent, RecordedRequest]]:
        out = [(event, e.request) for e in self.exchanges for event in e.request.events]
        return sorted(out, key=lambda pair: pair[0].seq)

    def events_before(self, moment: float) -> str:
        """The provider events up to ``moment``, the last one marked."""
        events = self.all_events()
        before = [(e, r) for e, r in events if e.flushed_at <= moment]
        if not before:
            return "      (the provider had sent no event yet)"
        event, request = before[-1]
        mine = [e for e, r in events if r is request]
        lines = events_around(mine, event.seq, before=3, after=1, since=request.received_at)
        return f"      events of {request} (> the last before it):\n" + _indent(lines)

    def events_of(self, exchange: Exchange, before: int = 3) -> str:
        """The last events of ``exchange``'s reply."""
        events = exchange.request.events
        if not events:
            return ""
        lines = events_around(
            events, events[-1].seq, before=before, after=0, since=exchange.request.received_at
        )
        return f"      last events sent to {exchange.request}:\n" + _indent(lines)


def same_arguments(planned: PlannedCall, record: ExecutionRecord) -> bool:
    """Whether ``record`` ran on exactly the arguments the model sent ``planned`` with."""
    try:
        return bool(json.loads(planned.call.arguments) == record.arguments)
    except ValueError:
        return False


def refusal(planned: PlannedCall) -> Optional[str]:
    """Why the loop must refuse ``planned`` rather than run it, or ``None``."""
    return _refusal(planned.call.name, planned.call.arguments)


@functools.lru_cache(maxsize=512)
def _refusal(name: str, arguments: str) -> Optional[str]:
    # Kept by the call's name and argument text, which alone decide it: several families
    # ask it of every planned call, and the stages play the same calls case after case.
    if name not in TOOLS:
        return f"there is no tool {name!r} in the task"
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return f"its arguments {arguments!r} are not valid JSON"
    if not isinstance(parsed, dict):
        return f"its arguments {arguments!r} are not a JSON object"
    violations = validate(TOOLS[name].parameters, parsed)
    if violations:
        return f"its arguments break {name}'s schema (" + "; ".join(map(str, violations)) + ")"
    return None


def ended_turn(seen: LoopSeen, planned: PlannedCall) -> Optional[str]:
    """The finish reason of the turn that made ``planned``, where it ended one whose calls must
    not run (length, content_filter); ``None`` otherwise."""
    turn = seen.exchanges[planned.exchange].turn
    return turn.finish_reason if turn is not None and turn.finish_reason in ENDED_FINISHES else None


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def is_result(value: Any) -> bool:
    return all(hasattr(value, name) for name in ("text", "finish_reason", "stopped"))


def value_of(x: Any) -> Any:
    return getattr(x, "value", x)


#: One invariant: what a case saw, to the problems it finds there.
Check = Callable[[LoopSeen], List[LoopProblem]]
