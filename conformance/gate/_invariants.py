"""The invariants: what the agent-loop suite checks in every stage, never the wording.

Strategy: as for the backend suite (``conformance._checks``), each check is one small
function in the table :data:`INVARIANTS`, under an id that failure messages end each
problem with (``[executions]``) and the stages page explains. A check reads what the
case saw (:class:`LoopSeen`: the loop's outcome, every request and the history it
carried, the turns the provider played and the execution log) and decides for itself
whether it applies. One root cause is reported once: a check whose premise another
check already failed (a refused history, a loop that never finished) stays quiet.

Every problem names the call id and the tool, and where it is about a moment (an
execution, a result sent) it quotes the provider events just before it
(:func:`~conformance.provider.events_around`), the evidence below any SDK.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar

from .._bounds import ABORT_CLOSE_WITHIN, ABORT_RAISE_WITHIN, BUDGET_GRACE
from .._stall import not_counted
from ..provider import RecordedRequest, WireEvent, events_around
from ._conversation import Conversation, Exchange, PlannedCall, fixture_id_in, same_write, scripted_write_key
from .log import ExecutionRecord, InFlight
from .sandbox import JournalEntry
from .schema import validate
from .stages import ENDED_FINISHES
from .tools import TOOLS

if TYPE_CHECKING:
    from ..contract import Message, ToolResult
    from ._case import LoopCase as AgentLoopCase
    from ._case import LoopOutcome

__all__ = ["INVARIANTS", "LoopProblem", "LoopSeen", "failure_message", "run_invariants"]


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
        return not o.hung and o.error is None and o.ended and not self.refused and _is_result(o.result)

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
    call = planned.call
    if call.name not in TOOLS:
        return f"there is no tool {call.name!r} in the task"
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return f"its arguments {call.arguments!r} are not valid JSON"
    if not isinstance(arguments, dict):
        return f"its arguments {call.arguments!r} are not a JSON object"
    violations = validate(TOOLS[call.name].parameters, arguments)
    if violations:
        return f"its arguments break {call.name}'s schema (" + "; ".join(map(str, violations)) + ")"
    return None


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def ended_turn(seen: LoopSeen, planned: PlannedCall) -> Optional[str]:
    """The finish reason of the turn that made ``planned``, where it ended one whose calls must
    not run (length, content_filter); ``None`` otherwise."""
    turn = seen.exchanges[planned.exchange].turn
    return turn.finish_reason if turn is not None and turn.finish_reason in ENDED_FINISHES else None


def repeats_a_write(seen: LoopSeen, planned: PlannedCall) -> bool:
    """Whether ``planned`` repeats a write an earlier call of the model's already asked for."""
    key = scripted_write_key(planned.call)
    return key is not None and any(
        p.exchange < planned.exchange and scripted_write_key(p.call) == key for p in seen.planned()
    )


def breaks_schema(planned: PlannedCall) -> bool:
    """Whether ``planned``'s arguments are a JSON object its tool's schema forbids."""
    call = planned.call
    if call.name not in TOOLS:
        return False
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return False
    return isinstance(arguments, dict) and bool(validate(TOOLS[call.name].parameters, arguments))


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _is_result(value: Any) -> bool:
    return all(hasattr(value, name) for name in ("text", "finish_reason", "stopped"))


def _value(x: Any) -> Any:
    return getattr(x, "value", x)


Check = Callable[[LoopSeen], List[LoopProblem]]


# -- the loop's ending ---------------------------------------------------------------------


def check_finished(seen: LoopSeen) -> List[LoopProblem]:
    o = seen.outcome
    if seen.stage.fault and (o.hung or (seen.stage.may_stop and o.error is not None)):
        return []  # whether the loop recovered or stopped well is recovered's to say
    if o.hung:
        return [
            LoopProblem(
                "finished",
                f"the loop did not finish within {o.waited:.1f} s (the case's bound)",
                seen.events_before(o.started + o.waited),
            )
        ]
    if seen.stage.cancel or seen.refused:
        return []  # the cancel stage must raise; a refused history is result-format's
    if o.error is not None and seen.stage.may_stop and not seen.stage.fault:
        if str(o.error).strip():
            return []  # a turn the provider ended may end the loop with an error that says why
        return [
            LoopProblem(
                "finished",
                f"the loop stopped with {type(o.error).__name__} and no message; say why (the turn was "
                "cut off at the limit, or filtered), or return LoopResult with the turn's finish reason",
            )
        ]
    if o.error is not None:
        return [LoopProblem("finished", f"the loop raised {type(o.error).__name__}: {o.error}")]
    if not _is_result(o.result):
        return [
            LoopProblem(
                "finished",
                f"run(task) returned {type(o.result).__name__}, not a "
                "LoopResult(text, finish_reason, stopped)",
            )
        ]
    return []


#: The finish reasons a loop may report for the model's last turn, by the turn's own: a turn
#: the content filter ended is content_filter or refusal (Anthropic's word for it).
_FINAL_FINISHES: Mapping[str, Tuple[str, ...]] = {
    "length": ("length",),
    "content_filter": ("content_filter", "refusal"),
}


def _final_turn(seen: LoopSeen) -> Optional[Tuple[Any, Exchange, Any]]:
    """The loop's result, the last exchange and the model's turn there, where the final
    answer is to be judged: a clean finish of a stage that ends in the model's text."""
    stage = seen.stage
    if stage.budget or stage.cancel or not seen.finished_cleanly:
        return None
    result = seen.outcome.result
    if stage.fault and stage.may_stop and _value(result.stopped) == "budget":
        return None  # stopping at a fault is allowed; recovered says whether it stopped well
    last = seen.exchanges[-1] if seen.exchanges else None
    if last is None or last.turn is None:
        return None
    return result, last, last.turn


def check_final_text(seen: LoopSeen) -> List[LoopProblem]:
    final = _final_turn(seen)
    if final is None:
        return []
    result, last, turn = final
    if turn.calls and turn.finish_reason not in ENDED_FINISHES:
        calls = ", ".join(f"{c.name} {c.id}" for c in turn.calls)
        return [
            LoopProblem(
                "final-text",
                f"the loop returned while the model's last turn still called {calls}",
                seen.events_of(last),
            )
        ]
    if result.text != turn.text:
        return [
            LoopProblem(
                "final-text",
                f"expected the model's final text {turn.text!r}, got {result.text!r}",
                seen.events_of(last),
            )
        ]
    return []


def _answered(final: Optional[Tuple[Any, Exchange, Any]]) -> bool:
    """Whether the model's last turn ended the conversation: it called nothing, or it was cut
    off (length) or filtered, so its calls never completed."""
    return final is not None and (not final[2].calls or final[2].finish_reason in ENDED_FINISHES)


def check_finish_reason(seen: LoopSeen) -> List[LoopProblem]:
    final = _final_turn(seen)
    if final is None or not _answered(final):
        return []  # a turn still calling is final-text's
    result, last, turn = final
    wanted = _FINAL_FINISHES.get(turn.finish_reason, ("stop",))
    if _value(result.finish_reason) not in wanted:
        said = " or ".join(repr(w) for w in wanted)
        return [
            LoopProblem(
                "finish-reason",
                f"expected finish reason {said} (the model's last turn's), got "
                f"{result.finish_reason!r}; map the provider's own spelling (end_turn, STOP, "
                "stop_sequence, max_tokens) to the contract's, and report the last turn's, not an "
                "earlier one's",
                seen.events_of(last),
            )
        ]
    return []


def check_stopped_done(seen: LoopSeen) -> List[LoopProblem]:
    final = _final_turn(seen)
    if final is None or not _answered(final):
        return []
    result = final[0]
    if _value(result.stopped) != "done":
        return [
            LoopProblem(
                "stopped-done",
                f"expected stopped='done' (the model finished within the budget), got {result.stopped!r}; "
                'say stopped="budget" only when max_requests or max_seconds ran out',
            )
        ]
    return []


def check_requests(seen: LoopSeen) -> List[LoopProblem]:
    expected = seen.stage.requests
    if expected is None or seen.refused or seen.outcome.hung:
        return []
    got = len(seen.exchanges)
    if got == expected:
        return []
    last = seen.exchanges[-1] if seen.exchanges else None
    why = "it stopped early" if got < expected else "it asked again after the model had finished"
    evidence = seen.events_of(last) if last is not None else ""
    return [
        LoopProblem(
            "requests",
            f"expected {expected} generation request(s) for this conversation, got {got} ({why})",
            evidence,
        )
    ]


def check_max_requests(seen: LoopSeen) -> List[LoopProblem]:
    case = seen.case
    got = len(seen.exchanges)
    if got <= case.max_requests:
        return []
    return [
        LoopProblem(
            "max-requests",
            f"the loop sent {got} generation requests; task.max_requests was {case.max_requests} "
            "(count every request sent, a retry included, and stop before sending one more)",
            seen.events_of(seen.exchanges[case.max_requests - 1]),
        )
    ]


def check_budget(seen: LoopSeen) -> List[LoopProblem]:
    case, o = seen.case, seen.outcome
    if o.ended_at is not None and o.ended_at - o.started - o.stalled_in_run > case.max_seconds + BUDGET_GRACE:
        return [
            LoopProblem(
                "budget",
                f"the loop ran {o.ended_at - o.started:.2f} s{not_counted(o.stalled_in_run)}; "
                f"task.max_seconds was {case.max_seconds}",
            )
        ]
    return []


def check_stopped_budget(seen: LoopSeen) -> List[LoopProblem]:
    if not (seen.stage.budget and seen.finished_cleanly):
        return []
    result = seen.outcome.result
    if _value(result.stopped) == "budget":
        return []
    return [
        LoopProblem(
            "stopped-budget",
            'the model kept calling always_error; expected LoopResult(stopped="budget") within '
            f"max_requests, got stopped={result.stopped!r} after {len(seen.exchanges)} requests",
        )
    ]


def _usage_words(usage: Any) -> str:
    from ._usage import usage_tuple

    i, o, t = usage_tuple(usage)
    return f"{i} in, {o} out, {t} total"


def check_usage(seen: LoopSeen) -> List[LoopProblem]:
    from ._usage import UNJUDGED, sent_usage, usage_tuple
    from .loop import USAGE_NOT_REPORTED

    if not seen.finished_cleanly:
        return []
    reported = getattr(seen.outcome.result, "usage", USAGE_NOT_REPORTED)
    if isinstance(reported, str) and reported == USAGE_NOT_REPORTED:
        return []  # the loop says nothing of usage; the report says so
    sent, turns = sent_usage(seen.case.target.wire.name, seen.exchanges)
    if isinstance(sent, str) and sent == UNJUDGED:
        return []
    if _value(seen.outcome.result.stopped) == "budget" and sent is not None:
        # A loop that stopped at its deadline may have given up on the last turn while
        # the provider was still sending it (or just had): that turn may count or not.
        fewer, _ = sent_usage(seen.case.target.wire.name, seen.exchanges, but_last=True)
        if reported is None and fewer is None:
            return []
        if reported is not None and fewer is not None and usage_tuple(reported) == usage_tuple(fewer):
            return []
    if sent is None:
        if reported is None:
            return []
        return [
            LoopProblem(
                "usage",
                f"the provider reported no usage in this conversation, the loop reported "
                f"{_usage_words(reported)}; report usage=None (unavailable) where no turn carried any",
            )
        ]
    if reported is None:
        return [
            LoopProblem(
                "usage",
                f"the provider reported usage on {turns} turn(s), {_usage_words(sent)} in all; the loop "
                "reported none (usage=None): read each turn's usage (ChatResponse.usage, the stream's "
                "last usage chunk) and sum it",
            )
        ]
    if usage_tuple(reported) == usage_tuple(sent):
        return []
    per_turn = usage_tuple(_one_turn(sent, turns))
    why = " (the usage of one turn only: sum every turn's)" if usage_tuple(reported) == per_turn else ""
    return [
        LoopProblem(
            "usage",
            f"expected usage {_usage_words(sent)}, summed over the {turns} turn(s) that reported it; the "
            f"loop reported {_usage_words(reported)}{why}",
        )
    ]


def _one_turn(total: Any, turns: int) -> Any:
    """One turn's share of ``total`` where every turn reported the same counts (the fixture's)."""
    from ..contract import Usage

    if turns < 1:
        return total
    return Usage(total.input_tokens // turns, total.output_tokens // turns, total.total_tokens // turns)


#: How each wire forces one tool, for the failure message (Ollama has no such setting).
FORCED_FORMS: Mapping[str, str] = {
    "openai-chat": 'tool_choice {"type": "function", "function": {"name": "%s"}}',
    "openai-responses": 'tool_choice {"type": "function", "name": "%s"}',
    "anthropic": 'tool_choice {"type": "tool", "name": "%s"}',
    "gemini": 'toolConfig.functionCallingConfig {"mode": "ANY", "allowedFunctionNames": ["%s"]}',
    "bedrock-converse": 'toolConfig.toolChoice {"tool": {"name": "%s"}}',
}


def check_tool_choice(seen: LoopSeen) -> List[LoopProblem]:
    forced = seen.stage.tool_choice
    form = FORCED_FORMS.get(seen.case.target.wire.name)
    if forced is None or form is None:
        return []  # nothing forced, or a wire with no way to force a tool (Ollama)
    first = next((e for e in seen.exchanges if e.history is not None and not e.problems), None)
    if first is None or first.history is None:
        return []  # a refused history is result-format's
    got = first.history.tool_choice
    if got == forced:
        return []
    field = form.split(" ", 1)[0]
    sent = "nothing" if got is None else f"{got.mode!r}" + (f" ({got.name})" if got.name else "")
    return [
        LoopProblem(
            "tool-choice",
            f"request {first.index + 1} must ask the provider to force {forced.name} in {field}; it "
            f"carried {sent} there (expected {form % forced.name}); pass task.tool_choice to the client "
            "on the first request",
        )
    ]


# -- the executions -------------------------------------------------------------------------


def check_tool_name(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.matches():
        if planned is not None and record.tool != planned.call.name:
            problems.append(
                LoopProblem(
                    "tool-name",
                    f"call {record.call_id}: the model called {planned.call.name}, the loop ran "
                    f"{record.tool}",
                    seen.events_before(record.started),
                )
            )
    return problems


def check_arguments(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.matches():
        if planned is None or record.tool != planned.call.name or refusal(planned) is not None:
            continue
        sent = json.loads(planned.call.arguments)
        if record.arguments != sent:
            how = (
                f"ran with {record.arguments!r}"
                if record.ran
                else f"was handed to the toolset with {record.arguments!r}, which refused it at the door "
                "(it never ran)"
            )
            problems.append(
                LoopProblem(
                    "arguments",
                    f"{seen.label(planned)}: {how}; the model sent {sent!r}{seen.interleaved_cause(planned)}",
                    seen.events_before(record.started),
                )
            )
    return problems


def check_arguments_schema(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.on_refused_calls():
        if record.tool != planned.call.name or not breaks_schema(planned) or record.ran:
            continue  # a run is refused-call's
        tool = TOOLS[record.tool]
        violations = "; ".join(map(str, validate(tool.parameters, record.arguments)))
        problems.append(
            LoopProblem(
                "arguments-schema",
                f"{seen.label(planned)}: handed to the toolset with arguments that break its schema "
                f"({violations}); the gate's toolset refused them at the door, a tool of your own would "
                "have run on them: validate a call against its tool's schema before executing it, and "
                'send ToolError("invalid_arguments", ...) back instead',
                seen.events_before(record.started),
            )
        )
    return problems


def check_executions(seen: LoopSeen) -> List[LoopProblem]:
    stage, problems = seen.stage, []
    planned = seen.planned()
    for index, call in enumerate(planned):
        if refusal(call) is not None or ended_turn(seen, call):
            continue  # never to run: refused-call (or ended-turn) says whether it did
        own = seen.records_for(call)
        if any(r.tool != call.call.name for r in own):
            continue  # it ran under another tool's name: tool-name says so
        records = [r for r in own if r.ran]
        if records and seen.faulted() and len(records) > 1:
            continue  # run again after a fault: re-executed says so
        if not records and any(not same_arguments(call, r) for r in own):
            continue  # handed over on other arguments and refused at the door: arguments says so
        if stage.abort_in_tool:
            # The tool the abort came in ran once; a loop running the turn's calls side by
            # side may have begun the other before the abort (after it is after-cancel's).
            expected: Tuple[int, ...] = (1,) if call.position == 0 else (0, 1)
        elif stage.cancel:
            expected = (0,)
        elif stage.budget and index == len(planned) - 1:
            expected = (0, 1)  # the call the loop stopped at may or may not have run
        elif repeats_a_write(seen, call):
            expected = (0, 1)  # answered with the first run's result, or run again: write-once says
        elif seen.answer_of(call) is None and not seen.finished_cleanly:
            continue  # the loop stopped before this call's turn was over: others say why
        elif not records and seen.came_too_late(call):
            continue  # its turn was not all out while the loop's budget lasted: budget judges
        else:
            expected = (1,)
        if len(records) not in expected:
            if records:
                fixtures = ", ".join(r.fixture_id for r in records)
                text = f"{seen.label(call)}: executed {len(records)} times ({fixtures}); each call runs once"
                evidence = seen.events_before(records[-1].started)
            else:
                text = (
                    f"{seen.label(call)}: never executed; the model called it and waited for its result"
                    + seen.interleaved_cause(call)
                )
                evidence = ""
            problems.append(LoopProblem("executions", text, evidence))
    # A run no call of the model's accounts for: by id, or (where the provider sends no
    # ids) one run of a tool more than the model called it.
    for record, matched in seen.matches():
        if matched is None:
            made = sum(1 for p in planned if p.call.name == record.tool)
            if made and seen.faulted() and not seen.case.target.wire.sends_call_ids:
                continue  # a called tool run again after a fault: re-executed says so
            if seen.case.target.wire.sends_call_ids:
                why = "executed a call the model never made"
            elif made:
                why = f"executed {record.tool} more often than the model called it ({made} time(s))"
            else:
                why = "executed a tool the model never called"
            problems.append(
                LoopProblem(
                    "executions", f"{record.tool} {record.call_id}: {why}", seen.events_before(record.started)
                )
            )
    return problems


def check_ended_turn(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.matches():
        if planned is None or not record.ran:
            continue  # a run no call accounts for is executions'; one refused at the door ran nothing
        why = ended_turn(seen, planned)
        if why is None:
            continue
        problems.append(
            LoopProblem(
                "ended-turn",
                f"{seen.label(planned)}: executed ({record.fixture_id}) though its turn ended with "
                f"finish reason {why!r}: the provider cut the turn off, so its calls never completed; "
                "look at the finish reason before running anything",
                seen.events_of(seen.exchanges[planned.exchange]),
            )
        )
    return problems


def check_executed_early(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.matches():
        if planned is None:
            continue
        exchange = seen.exchanges[planned.exchange]
        if exchange.events is None:
            continue
        _, last = exchange.events.arguments.get(planned.position, (-1, -1))
        if last < 0:
            continue
        log = exchange.request.response
        if log is not None and log.end == "complete" and log.times and record.started >= log.times[-1]:
            continue  # after the whole reply was out: no need to work out its events
        events = exchange.request.events
        flushed = events[last] if last < len(events) else None
        if flushed is None or record.started < flushed.flushed_at:
            since = exchange.request.received_at
            ran = (
                f"execution started at +{_ms(record.started - since)} (timed from the arrival of "
                f"request {exchange.index + 1})"
            )
            if flushed is not None:
                sent = (
                    f"the provider wrote the call's last argument fragment (event #{flushed.seq}, "
                    f"{flushed.type}) at +{_ms(flushed.flushed_at - since)}, "
                    f"{_ms(flushed.flushed_at - record.started)} after the run began"
                )
            else:
                logged = f", the last at +{_ms(events[-1].flushed_at - since)}" if events else ""
                sent = (
                    f"the provider had not written the call's last argument fragment (event {last} of "
                    f"the turn) by the end of the case: it logged {len(events)} event(s){logged}"
                )
            problems.append(
                LoopProblem(
                    "executed-early",
                    f"{seen.label(planned)}: {ran}; {sent}, so its arguments were still arriving; run a "
                    "call only once its turn's end event (or its own done event) has come",
                    seen.events_before(record.started),
                )
            )
    return problems


def _starts(seen: LoopSeen) -> List[Tuple[str, str, float, str]]:
    """Every execution's (tool, call id, start, how it ended), those still running included."""
    out = [(r.tool, r.call_id, r.started, "" if r.ran else " (the toolset refused it: the signal had fired)")
           for r in seen.ran()]
    out += [(e.tool, e.call_id, e.started, " (still running when the case ended)") for e in seen.in_flight]
    return sorted(out, key=lambda start: start[2])


def check_after_cancel(seen: LoopSeen) -> List[LoopProblem]:
    abort_at = seen.outcome.abort_at
    if abort_at is None:
        return []
    returned = seen.outcome.ended_at
    problems = []
    for tool, call_id, started, how in _starts(seen):
        if started >= abort_at and (returned is None or started <= returned):
            problems.append(
                LoopProblem(
                    "after-cancel",
                    f"{tool} {call_id}: execution started {1000 * (started - abort_at):.0f} ms "
                    f"after the abort{how}; nothing may run once the caller cancelled",
                    seen.events_before(started),
                )
            )
    return problems


def check_after_return(seen: LoopSeen) -> List[LoopProblem]:
    returned = seen.outcome.ended_at
    if returned is None:
        return []  # a loop still running at the bound is finished's
    problems = []
    for tool, call_id, started, how in _starts(seen):
        if started > returned:
            after = "" if seen.outcome.abort_at is None else ", and so after the abort"
            problems.append(
                LoopProblem(
                    "after-return",
                    f"{tool} {call_id}: execution started {1000 * (started - returned):.0f} ms after "
                    f"run() had returned{after}{how}; a tool task the loop left behind ran in the "
                    "background (cancel or await every task before returning or raising)",
                )
            )
    return problems


#: How an execution ends when it saw the signal fire (or its task was cancelled).
_STOPPED = ("aborted", "cancelled")


def check_tool_signal(seen: LoopSeen) -> List[LoopProblem]:
    abort_at = seen.outcome.abort_at
    if abort_at is None:
        return []
    problems = []
    for record in seen.ran():
        if not record.ran or record.started >= abort_at or record.ended <= abort_at:
            continue  # refused, begun after the abort (after-cancel's), or over before it
        if str(record.status) not in _STOPPED:
            problems.append(
                LoopProblem(
                    "tool-signal",
                    f"{record.tool} {record.call_id}: was running at the abort and ran on to its end "
                    f"({record.status}, {1000 * (record.ended - abort_at):.0f} ms after the abort): the "
                    "toolset never saw the signal; pass task.signal to toolset.execute / aexecute",
                )
            )
    for entry in seen.in_flight:
        if entry.started < abort_at:
            problems.append(
                LoopProblem(
                    "tool-signal",
                    f"{entry.tool} {entry.call_id}: was running at the abort and still ran when the case "
                    "ended: the toolset never saw the signal; pass task.signal to toolset.execute",
                )
            )
    return problems


def check_request_after_abort(seen: LoopSeen) -> List[LoopProblem]:
    abort_at = seen.outcome.abort_at
    if abort_at is None:
        return []
    late = [e for e in seen.exchanges if e.request.received_at > abort_at]
    if not late:
        return []
    first = late[0]
    return [
        LoopProblem(
            "request-after-abort",
            f"request {first.index + 1} ({first.request}) came "
            f"{1000 * (first.request.received_at - abort_at):.0f} ms after the abort"
            + (f", and {len(late) - 1} more after it" if len(late) > 1 else "")
            + "; once the caller cancelled, the loop asks the model nothing more",
            seen.events_before(first.request.received_at),
        )
    ]


def check_abort_reason(seen: LoopSeen) -> List[LoopProblem]:
    o = seen.outcome
    if not seen.stage.cancel or o.hung:
        return []
    if o.abort_at is None:
        return [
            LoopProblem(
                "abort-reason",
                "the loop ended before the gate could abort it (expected it to wait for the held call)",
            )
        ]
    if o.error is not o.abort_reason:
        got = f"{type(o.error).__name__}: {o.error}" if o.error is not None else f"a result {o.result!r}"
        return [
            LoopProblem(
                "abort-reason",
                f"expected the loop to raise the abort reason itself, got {got}",
                seen.events_before(o.abort_at),
            )
        ]
    if o.error_at is not None and o.error_at - o.abort_at - o.stalled_after_abort > ABORT_RAISE_WITHIN:
        return [
            LoopProblem(
                "abort-reason",
                f"raised the abort reason {o.error_at - o.abort_at:.2f} s after the abort"
                f"{not_counted(o.stalled_after_abort)}; expected within {ABORT_RAISE_WITHIN} s",
            )
        ]
    return []


def check_connection_closed(seen: LoopSeen) -> List[LoopProblem]:
    o = seen.outcome
    if not seen.stage.cancel or seen.stage.abort_in_tool or o.abort_at is None or o.hung:
        return []  # an abort in a tool comes after the reply was whole: no request is open
    if o.closed_after is None:
        return [
            LoopProblem(
                "connection-closed",
                "the provider did not see the connection (h2: stream) closed within "
                f"{ABORT_CLOSE_WITHIN} s of "
                "the abort, while the loop was alive; the provider keeps generating",
            )
        ]
    return []


# -- the results sent back ---------------------------------------------------------------------


def check_result_format(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for exchange in seen.refused:
        for problem in exchange.problems:
            problems.append(
                LoopProblem(
                    "result-format",
                    f"request {exchange.index + 1} ({exchange.request}): the provider refuses this history: "
                    + problem,
                    seen.events_of(seen.exchanges[exchange.index - 1]) if exchange.index else "",
                )
            )
    return problems


def _results_due(seen: LoopSeen) -> List[Tuple[PlannedCall, Exchange, Optional[Message]]]:
    out = []
    for planned in seen.planned():
        exchange, message = seen.result_of(planned)
        if exchange is not None:
            out.append((planned, exchange, message))
    return out


def check_results(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for planned, exchange, message in _results_due(seen):
        if message is None:
            problems.append(
                LoopProblem(
                    "results",
                    f"{seen.label(planned)}: request {exchange.index + 1} carried no result for this call; "
                    "every call the model made needs its result back",
                    seen.events_of(seen.exchanges[planned.exchange]),
                )
            )
    return problems


def check_final_results(seen: LoopSeen) -> List[LoopProblem]:
    """The request the model answered with its final text still carried every result.

    ``results`` looks at the request right after each call; a loop that sends a
    result there, and then (after a dropped reply, say) starts the conversation
    again without the tool turn, gets a final answer the model made without it.
    A call whose result ``results`` already found missing is its problem alone.
    """
    stage = seen.stage
    if stage.budget or stage.cancel or not seen.finished_cleanly:
        return []
    if _value(seen.outcome.result.stopped) != "done":
        return []
    final = seen.exchanges[-1] if seen.exchanges else None
    if final is None or final.history is None or final.turn is None or final.turn.calls:
        return []
    present = {p for p, message in seen.conversation.correlate(final.history) if message is not None}
    problems = []
    for planned in seen.planned():
        if planned in present or planned.exchange >= final.index:
            continue
        exchange, message = seen.result_of(planned)
        if exchange is None or message is None or exchange is final:
            continue  # never sent, or not where it was due: results says so
        problems.append(
            LoopProblem(
                "final-results",
                f"{seen.label(planned)}: request {exchange.index + 1} sent its result back, but request "
                f"{final.index + 1}, the one the model answered with its final text, carried no result "
                "for it, so that answer was made without the tool's output; when a request fails, send "
                "the same conversation again (the tool turn and its results), never a new one without them",
                seen.events_of(final),
            )
        )
    return problems


def check_call_ids(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for planned, exchange, message in _results_due(seen):
        if message is None or message.tool_result is None or refusal(planned) is not None:
            continue  # a refused call's result is refused-call's
        # A result under another tool's name never gets this far on a shipped wire: Gemini
        # refuses it (result-format), Ollama pairs results by name (results), the others
        # carry no name with a result.
        result = message.tool_result
        fixture = fixture_id_in(result.content)
        if fixture is None:
            continue
        own = seen.records_for(planned)
        record = next((r for r in seen.records if r.fixture_id == fixture), None)
        abort_at = seen.outcome.abort_at
        if record is not None and abort_at is not None and record.started >= abort_at:
            continue  # a run begun after the abort: after-cancel's
        if record is not None and record not in own and not same_write(record, planned.call):
            problems.append(
                LoopProblem(
                    "call-ids",
                    f"{seen.label(planned)}: request {exchange.index + 1} answered it with {fixture}, "
                    "the result of "
                    f"{record.tool} {record.call_id}; each result must answer its own call",
                )
            )
    return problems


def check_duplicate_results(seen: LoopSeen) -> List[LoopProblem]:
    if not seen.case.target.wire.sends_call_ids:
        return []
    problems = []
    for exchange in seen.exchanges:
        if exchange.history is None or exchange.problems:
            continue  # a refused history is result-format's
        ids = [m.tool_result.call_id for m in exchange.history.results if m.tool_result is not None]
        ids = [i for i in ids if i]  # a result without an id answers no call twice
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            problems.append(
                LoopProblem(
                    "duplicate-results",
                    f"request {exchange.index + 1}: more than one result for call {', '.join(repeated)}; "
                    "send each call's result once",
                )
            )
    return problems


def check_result_count(seen: LoopSeen) -> List[LoopProblem]:
    """Without call ids (Ollama), no call answered twice: no more results of a tool after a
    turn than the turn's calls to it, since each result answers the next call to its tool."""
    if seen.case.target.wire.sends_call_ids:
        return []  # a call id answered twice is call-ids'
    problems: List[LoopProblem] = []
    told = set()
    for exchange in seen.exchanges:
        if exchange.history is None or exchange.problems:
            continue
        messages = exchange.history.messages
        turn = 0
        for at, message in enumerate(messages):
            if message.role != "assistant" or not message.tool_calls:
                continue
            turn += 1
            results = []
            for after in messages[at + 1 :]:
                if after.role != "tool" or after.tool_result is None:
                    break
                results.append(after.tool_result)
            called = [c.name for c in message.tool_calls]
            for name in sorted(set(called) | {r.name for r in results if r.name}):
                made, sent = called.count(name), sum(1 for r in results if r.name == name)
                if sent > made and (turn, name) not in told:
                    told.add((turn, name))
                    problems.append(
                        LoopProblem(
                            "result-count",
                            f"request {exchange.index + 1}: assistant turn {turn} called {name} {made} "
                            f"time(s) and {sent} results for {name} followed it; "
                            f"{seen.case.target.wire.name} sends no call ids, so each result answers the "
                            "next call to its tool, and the extra one answers none: send one result per call",
                        )
                    )
    return problems


def _record_of(seen: LoopSeen, planned: PlannedCall, content: str) -> Optional[ExecutionRecord]:
    fixture = fixture_id_in(content)
    if fixture is not None:
        for record in seen.records:
            if record.fixture_id == fixture:
                return record
    records = seen.records_for(planned)
    return records[0] if records else None


def error_payload(result: ToolResult) -> Optional[Any]:
    """The error ``result`` went back as, or ``None`` where it went back as plain output.

    The wire's own error marker (Anthropic ``is_error``, Bedrock ``status: "error"``,
    Gemini ``response.error``) or any JSON result whose top level carries an error:
    an object, a list of errors or a message under ``error``, as ``ToolResult.text``
    writes one and as frameworks write theirs (pydantic-ai sends a validation
    failure as ``{"error": [{"type", "loc", "msg"}, ...]}`` and an unknown tool as
    ``{"error": "..."}``). No code is asked for: the error's shape is the loop's.
    """
    if result.error is not None:
        return result.error.as_dict()
    try:
        data = json.loads(result.content)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, (dict, list)) and error:
        return error
    if isinstance(error, str) and error.strip():
        return error
    return None


def _error_accepted(seen: LoopSeen, result: ToolResult) -> bool:
    """Whether ``result`` went back as an error: a structured one, or, where the target
    declares ``error_results="text"`` and the wire has no error marker, any text that
    is not a tool's output (it carries no fixture id)."""
    if error_payload(result) is not None:
        return True
    target = seen.case.target
    return (
        target.error_results == "text"
        and not target.wire.marks_tool_errors
        and bool(result.content.strip())
        and fixture_id_in(result.content) is None
    )


def _error_hint(seen: LoopSeen) -> str:
    wire = seen.case.target.wire
    if wire.marks_tool_errors:
        return f"mark it as an error ({wire.tool_error_marker}) or send JSON with a top-level \"error\""
    return (
        'send JSON with a top-level "error" (ToolResult.text does); a framework that sends errors '
        'as plain text declares error_results="text" on its target'
    )


def check_error_result(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for planned, exchange, message in _results_due(seen):
        if message is None or message.tool_result is None:
            continue
        record = _record_of(seen, planned, message.tool_result.content)
        if record is None or record.error is None:
            continue
        result = message.tool_result
        if not _error_accepted(seen, result):
            problems.append(
                LoopProblem(
                    "error-result",
                    f"{seen.label(planned)}: the tool failed with {record.error.code!r}; request "
                    f"{exchange.index + 1} sent back {result.content[:120]!r} as if it were the tool's "
                    f"output; {_error_hint(seen)}",
                )
            )
    return problems


def _differ(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_result_content(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    limit = seen.case.target.max_result_chars
    for planned, exchange, message in _results_due(seen):
        if message is None or message.tool_result is None:
            continue
        result = message.tool_result
        record = _record_of(seen, planned, result.content)
        if record is None or record.error is not None or result.is_error:
            continue
        expected, sent = record.result.text, result.content
        ok = sent == expected if limit is None else expected.startswith(sent)
        if not ok:
            at = _differ(expected, sent)
            how = "the tool's output" if limit is None else "a prefix of the tool's output"
            problems.append(
                LoopProblem(
                    "result-content",
                    f"{seen.label(planned)}: request {exchange.index + 1} sent back a result that is "
                    f"not {how}: "
                    f"from character {at}, expected {expected[at : at + 24]!r}, got {sent[at : at + 24]!r}",
                )
            )
    return problems


def check_result_size(seen: LoopSeen) -> List[LoopProblem]:
    limit = seen.case.target.max_result_chars
    if limit is None:
        return []
    problems = []
    for planned, exchange, message in _results_due(seen):
        if message is None or message.tool_result is None:
            continue
        size = len(message.tool_result.content)
        if size > limit:
            problems.append(
                LoopProblem(
                    "result-size",
                    f"{seen.label(planned)}: request {exchange.index + 1} sent back {size} characters; "
                    "the loop "
                    f"declares max_result_chars={limit}",
                )
            )
    return problems


def _reasoning_key(items: Sequence[Any]) -> List[Tuple[Any, ...]]:
    from ..wires._turns import reasoning_key

    return [reasoning_key(r) for r in items]


def check_reasoning(seen: LoopSeen) -> List[LoopProblem]:
    if not seen.stage.reasoning:
        return []
    problems = []
    for exchange in seen.exchanges:
        turn = exchange.turn
        if turn is None or not turn.calls:
            continue
        answer = next(
            (e for e in seen.exchanges[exchange.index + 1 :] if e.history is not None and not e.problems),
            None,
        )
        if answer is None or answer.history is None:
            continue
        ids = {c.id for c in turn.calls}
        names = {c.name for c in turn.calls}
        echoed = next(
            (
                m
                for m in answer.history.assistant_turns
                if any(c.id in ids or (not c.id and c.name in names) for c in m.tool_calls)
            ),
            None,
        )
        label = ", ".join(f"{c.name} {c.id}" for c in turn.calls)
        if echoed is None:
            problems.append(
                LoopProblem(
                    "reasoning",
                    f"request {answer.index + 1} did not send back the assistant turn that called {label}",
                )
            )
            continue
        if _reasoning_key(echoed.reasoning) != _reasoning_key(turn.reasoning):
            problems.append(
                LoopProblem(
                    "reasoning",
                    f"the turn that called {label} carried reasoning {_reasoning_key(turn.reasoning)!r}; "
                    f"request {answer.index + 1} sent back {_reasoning_key(echoed.reasoning)!r} (it must "
                    "come back byte for byte, signature included)",
                )
            )
    return problems


def check_call_reasoning(seen: LoopSeen) -> List[LoopProblem]:
    if not seen.stage.reasoning:
        return []
    problems = []
    for exchange, answer, echoed in _echoed_turns(seen):
        turn = exchange.turn
        assert turn is not None
        for call in turn.calls:
            back = next(
                (c for c in echoed.tool_calls if c.id == call.id or (not c.id and c.name == call.name)), None
            )
            if call.reasoning and (
                back is None or _reasoning_key(back.reasoning) != _reasoning_key(call.reasoning)
            ):
                got = _reasoning_key(back.reasoning) if back is not None else "no such call"
                problems.append(
                    LoopProblem(
                        "call-reasoning",
                        f"{call.name} {call.id}: the call carried {_reasoning_key(call.reasoning)!r}; "
                        f"request {answer.index + 1} sent back {got!r} (a call's own signature comes "
                        "back with that call, byte for byte)",
                    )
                )
    return problems


def _echoed_turns(seen: LoopSeen) -> List[Tuple[Exchange, Exchange, Message]]:
    """Each tool turn, the accepted request after it, and the assistant turn there that echoes it."""
    out = []
    for exchange in seen.exchanges:
        turn = exchange.turn
        if turn is None or not turn.calls:
            continue
        answer = next(
            (e for e in seen.exchanges[exchange.index + 1 :] if e.history is not None and not e.problems),
            None,
        )
        if answer is None or answer.history is None:
            continue
        ids = {c.id for c in turn.calls}
        names = {c.name for c in turn.calls}
        echoed = next(
            (
                m
                for m in answer.history.assistant_turns
                if any(c.id in ids or (not c.id and c.name in names) for c in m.tool_calls)
            ),
            None,
        )
        if echoed is not None:
            out.append((exchange, answer, echoed))
    return out


# -- the fault stages ---------------------------------------------------------------------


def _fault_evidence(seen: LoopSeen, exchange: Exchange) -> str:
    """The events around a fault: what its reply sent, else what came before it."""
    if exchange.request.events:
        return seen.events_of(exchange)
    earlier = [e for e in seen.exchanges[: exchange.index] if e.request.events]
    return seen.events_of(earlier[-1]) if earlier else ""


def check_partial_call(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.on_cut_calls():
        if not record.ran:
            continue  # the toolset refused it at the door: nothing ran
        exchange = seen.exchanges[planned.exchange]
        problems.append(
            LoopProblem(
                "partial-call",
                f"{seen.label(planned)}: executed ({record.fixture_id}) though its stream broke "
                f"({exchange.fault}) before the turn ended; a call is complete only once its turn is",
                _fault_evidence(seen, exchange),
            )
        )
    return problems


def check_re_executed(seen: LoopSeen) -> List[LoopProblem]:
    faulted = seen.faulted()
    if not faulted:
        return []
    problems = []
    wire = seen.case.target.wire
    for planned in seen.planned():
        if refusal(planned) is not None:
            continue
        if wire.sends_call_ids:
            runs = [r for r in seen.before_abort() if r.ran and r.call_id == planned.call.id]
            allowed = 1
        else:  # no ids: more runs of the tool than calls to it, told at its last call
            same = [p for p in seen.planned() if p.call.name == planned.call.name]
            if planned != same[-1]:
                continue
            runs = [r for r in seen.before_abort() if r.ran and r.tool == planned.call.name]
            allowed = len(same)
        if len(runs) <= allowed:
            continue
        fault = next((e for e in faulted if e.request.received_at <= runs[allowed].started), faulted[0])
        fixtures = ", ".join(r.fixture_id for r in runs)
        problems.append(
            LoopProblem(
                "re-executed",
                f"{seen.label(planned)}: executed {len(runs)} times ({fixtures}); request {fault.index + 1} "
                f"got {_fault_words(fault.fault)} and the loop ran the call again; a retry sends the "
                "result it already has (key executions by the call id)",
                _fault_evidence(seen, fault),
            )
        )
    return problems


def _fault_words(fault: Optional[str]) -> str:
    words = {
        "drop-close": "no response (the connection closed)",
        "drop-reset": "no response (the connection was reset)",
        "rate-limit": "a 429",
        "hang": "no reply",
    }
    return words.get(fault or "", f"a broken stream ({fault})")


def check_write_once(seen: LoopSeen) -> List[LoopProblem]:
    keys: Dict[str, List[JournalEntry]] = {}
    for entry in seen.journal:
        keys.setdefault(entry.key, []).append(entry)
    problems = []
    for key, entries in keys.items():
        if len(entries) < 2:
            continue
        writes = [r for r in seen.ran() if r.ran and r.tool == "append_record" and r.status == "ok"]
        runs = ", ".join(f"{r.call_id} ({r.fixture_id})" for r in writes)
        journal = "\n".join(f"      journal {e}" for e in seen.journal)
        problems.append(
            LoopProblem(
                "write-once",
                f"the write under idempotency key {key!r} landed {len(entries)} times (runs: {runs}); a "
                "write runs at most once per key, however many call ids ask for it: answer a repeat "
                "with the first run's result",
                journal,
            )
        )
    return problems


#: How much sooner than asked a retry may come: the clocks' resolution, and the moment
#: between the provider writing the 429 and noting the time.
RETRY_TOLERANCE = 0.02


def check_retry_wait(seen: LoopSeen) -> List[LoopProblem]:
    from .._stall import WATCH

    problems = []
    exchanges = seen.exchanges
    for exchange, after in zip(exchanges, exchanges[1:]):
        asked = exchange.asked
        if exchange.fault != "rate-limit" or asked is None:
            continue
        log = exchange.request.response
        sent = log.times[-1] if log is not None and log.times else exchange.request.received_at
        assert sent is not None and after.request.received_at is not None
        # A stall of the whole process may have held the provider between writing the 429
        # and noting the time: it is given back to the loop.
        waited = after.request.received_at - sent + WATCH.between(sent, after.request.received_at)
        if waited < asked - RETRY_TOLERANCE:
            problems.append(
                LoopProblem(
                    "retry-wait",
                    f"request {after.index + 1} came {1000 * waited:.0f} ms after request "
                    f"{exchange.index + 1}'s 429, which asked for a retry delay of {asked:g} s; wait at "
                    "least what the provider asks (LLMError.retry_after) before asking again",
                    seen.events_of(exchange),
                )
            )
    return problems


def check_refused_call(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for record, planned in seen.on_refused_calls():
        if record.ran:
            problems.append(
                LoopProblem(
                    "refused-call",
                    f"{seen.label(planned)}: executed ({record.tool}, {record.fixture_id}) though "
                    f"{refusal(planned)}; such a call goes back as a structured error, never run",
                    seen.events_before(record.started),
                )
            )
    for planned, exchange, message in _results_due(seen):
        why = refusal(planned)
        if why is None or message is None or message.tool_result is None:
            continue
        result = message.tool_result
        if not _error_accepted(seen, result):
            problems.append(
                LoopProblem(
                    "refused-call",
                    f"{seen.label(planned)}: {why}; request {exchange.index + 1} sent back "
                    f"{result.content[:120]!r}, not an error; {_error_hint(seen)}",
                    seen.events_of(seen.exchanges[planned.exchange]),
                )
            )
    return problems


def check_recovered(seen: LoopSeen) -> List[LoopProblem]:
    stage, o = seen.stage, seen.outcome
    if not stage.fault:
        return []
    faulted = seen.faulted()
    where = faulted[0] if faulted else (seen.exchanges[-1] if seen.exchanges else None)

    def evidence() -> str:  # only for a problem: reading the events back costs a passing case
        return _fault_evidence(seen, where) if where is not None else ""

    at = f"after request {where.index + 1} got {_fault_words(where.fault)}" if where is not None else ""
    calls = ", ".join(f"{c.name} {c.id}" for c in (where.turn.calls if where and where.turn else ()))
    about = f" (the call: {calls})" if calls else ""
    if o.hung:
        return [
            LoopProblem(
                "recovered",
                f"the loop neither recovered nor stopped {at}{about}: still running at the case's bound "
                f"of {o.waited:.1f} s (task.max_seconds was {seen.case.max_seconds})",
                evidence(),
            )
        ]
    if o.error is None or seen.refused:
        return []  # an error raised at the provider's 400 for a refused history is result-format's
    if not stage.may_stop:
        return [
            LoopProblem(
                "recovered",
                f"the loop raised {type(o.error).__name__}: {o.error}{about}; a refused call goes back "
                "as a structured error and the conversation carries on",
                evidence(),
            )
        ]
    return []


def check_error_message(seen: LoopSeen) -> List[LoopProblem]:
    stage, o = seen.stage, seen.outcome
    if not (stage.fault and stage.may_stop) or o.hung or o.error is None or str(o.error).strip():
        return []
    faulted = seen.faulted()
    where = faulted[0] if faulted else (seen.exchanges[-1] if seen.exchanges else None)
    at = f" after request {where.index + 1} got {_fault_words(where.fault)}" if where is not None else ""
    return [
        LoopProblem(
            "error-message",
            f"the loop stopped{at} with {type(o.error).__name__} and no message; say what happened "
            "(the status, the timeout, the broken stream), or raise the client's own error",
            _fault_evidence(seen, where) if where is not None else "",
        )
    ]


#: Every invariant, by the id failure messages show.
INVARIANTS: Dict[str, Check] = {
    "finished": check_finished,
    "final-text": check_final_text,
    "finish-reason": check_finish_reason,
    "stopped-done": check_stopped_done,
    "requests": check_requests,
    "max-requests": check_max_requests,
    "budget": check_budget,
    "tool-choice": check_tool_choice,
    "stopped-budget": check_stopped_budget,
    "usage": check_usage,
    "tool-name": check_tool_name,
    "arguments": check_arguments,
    "arguments-schema": check_arguments_schema,
    "executions": check_executions,
    "executed-early": check_executed_early,
    "ended-turn": check_ended_turn,
    "after-cancel": check_after_cancel,
    "after-return": check_after_return,
    "tool-signal": check_tool_signal,
    "request-after-abort": check_request_after_abort,
    "abort-reason": check_abort_reason,
    "connection-closed": check_connection_closed,
    "result-format": check_result_format,
    "results": check_results,
    "final-results": check_final_results,
    "call-ids": check_call_ids,
    "result-count": check_result_count,
    "duplicate-results": check_duplicate_results,
    "error-result": check_error_result,
    "result-content": check_result_content,
    "result-size": check_result_size,
    "reasoning": check_reasoning,
    "call-reasoning": check_call_reasoning,
    "partial-call": check_partial_call,
    "re-executed": check_re_executed,
    "write-once": check_write_once,
    "retry-wait": check_retry_wait,
    "refused-call": check_refused_call,
    "recovered": check_recovered,
    "error-message": check_error_message,
}


def run_invariants(seen: LoopSeen) -> List[LoopProblem]:
    """Every problem every invariant finds, in table order."""
    problems: List[LoopProblem] = []
    for check in INVARIANTS.values():
        problems.extend(check(seen))
    return problems


def failure_message(seen: LoopSeen, problems: List[LoopProblem]) -> str:
    """One message: what the loop must do, each problem with its evidence, the requests, the hint."""
    case = seen.case
    lines = [f"{case.target.wire.name}/{case.mode} {case.stage.name}: the loop must {case.stage.must}"]
    for problem in problems:
        lines.append(f"  - {problem}")
        if problem.evidence:
            lines.append(problem.evidence)
    if seen.outcome.left_behind:
        lines.append(f"  left behind: {seen.outcome.left_behind}")
    from .log import request_records

    shown = "; ".join(str(r) for r in request_records(seen.requests)) or "none"
    lines.append(f"  requests seen: {shown}")
    if problems and all(p.check == "result-format" for p in problems):
        # What ran was fine: the history it was sent back in is what the provider refused.
        lines.append(
            "  hint: the history is what the provider refused, not what ran: send what each line above "
            "says the provider expects"
        )
    else:
        lines.append(f"  hint: {case.stage.hint}")
    return "\n".join(lines)
