"""The tool-call state machine a loop may adopt, so a call runs once, complete, and never after a cancel.

Strategy: each call moves through the states of :class:`CallState` on the events of
:class:`CallEvent`, and every allowed move is one row of :data:`TRANSITIONS`; what is
not in the table is refused with a :class:`ToolCallStateError` that carries the state,
the event and the call, and a message from :data:`REFUSALS` that says what that move
would have meant::

    START --open--> CALL_OPEN --delta--> ARGUMENT_DELTAS <--delta--+
                        |                   |       |                |
                        |                   |       +----------------+
                        +-------done--------+--done--> CALL_DONE
    CALL_DONE --validate--> VALIDATED --execute--> EXECUTED
    (every state before EXECUTED) --cancel--> CANCELLED

Executions are keyed by an idempotency key (the call id unless the loop gives one),
and :meth:`ToolCallTracker.execute` runs the tool at most once per key: a retried turn
that brings the same call back under a new id, with the same key, gets
:class:`AlreadyExecuted` carrying the first result instead of a second run. A cancel
wins over a run it overtakes: the run's result is handed back inside
:class:`CallCancelled`, never as if nothing happened.

The tracker is synchronous and thread-safe (one lock, the tool itself runs outside
it); :meth:`~ToolCallTracker.aexecute` is the same for an async tool. The gate does not
require a loop to use it: it judges the loop by the toolset's execution log.
"""

from __future__ import annotations

import enum
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar

from ..contract import ToolCall
from ..errors import ConformanceError
from .schema import SchemaViolation, validate

__all__ = [
    "REFUSALS",
    "TRANSITIONS",
    "AlreadyExecuted",
    "CallCancelled",
    "CallEvent",
    "CallState",
    "ToolCallStateError",
    "ToolCallTracker",
    "TrackedCall",
    "Transition",
]

T = TypeVar("T")


class CallState(str, enum.Enum):
    """Where one tool call is in its life."""

    START = "START"
    CALL_OPEN = "CALL_OPEN"
    ARGUMENT_DELTAS = "ARGUMENT_DELTAS"
    CALL_DONE = "CALL_DONE"
    VALIDATED = "VALIDATED"
    EXECUTED = "EXECUTED"
    CANCELLED = "CANCELLED"

    def __str__(self) -> str:
        return str(self.value)


class CallEvent(str, enum.Enum):
    """What can happen to a call: the provider's events, the loop's decisions."""

    OPEN = "open"
    DELTA = "delta"
    DONE = "done"
    VALIDATE = "validate"
    EXECUTE = "execute"
    CANCEL = "cancel"

    def __str__(self) -> str:
        return str(self.value)


S, E = CallState, CallEvent

#: Every allowed move: (state, event) -> the next state. Nothing leads backward, and
#: nothing leaves EXECUTED or CANCELLED.
TRANSITIONS: Mapping[Tuple[CallState, CallEvent], CallState] = {
    (S.START, E.OPEN): S.CALL_OPEN,
    (S.CALL_OPEN, E.DELTA): S.ARGUMENT_DELTAS,
    (S.ARGUMENT_DELTAS, E.DELTA): S.ARGUMENT_DELTAS,
    (S.CALL_OPEN, E.DONE): S.CALL_DONE,
    (S.ARGUMENT_DELTAS, E.DONE): S.CALL_DONE,
    (S.CALL_DONE, E.VALIDATE): S.VALIDATED,
    (S.VALIDATED, E.EXECUTE): S.EXECUTED,
    **{
        (state, E.CANCEL): S.CANCELLED
        for state in (S.START, S.CALL_OPEN, S.ARGUMENT_DELTAS, S.CALL_DONE, S.VALIDATED)
    },
}

_INCOMPLETE = (S.START, S.CALL_OPEN, S.ARGUMENT_DELTAS)

#: What a refused move would have meant, for the message; the rest get a generic one.
REFUSALS: Mapping[Tuple[CallState, CallEvent], str] = {
    **{(s, E.OPEN): "the call id was opened twice; give each call its own id" for s in CallState},
    **{
        (s, E.DELTA): "an argument fragment came after the call was complete; it would change "
        "arguments already taken as final"
        for s in (S.CALL_DONE, S.VALIDATED, S.EXECUTED)
    },
    **{
        (s, E.VALIDATE): "the call is not complete; validate only after its final argument event"
        for s in _INCOMPLETE
    },
    **{
        (s, E.EXECUTE): "the call is not complete; a tool must never run on arguments still arriving"
        for s in _INCOMPLETE
    },
    (S.CALL_DONE, E.EXECUTE): "the call's arguments were not validated; validate them against the "
    "tool's schema first",
    (S.EXECUTED, E.EXECUTE): "the call was already executed; a tool runs at most once per call",
    (S.EXECUTED, E.CANCEL): "the call was already executed; a cancel cannot undo it",
    **{(S.CANCELLED, e): "the call was cancelled; nothing may happen to it after that" for e in CallEvent},
}


class ToolCallStateError(ConformanceError):
    """A call was asked to make a move its state does not allow.

    ``state`` is where the call was (``None`` if there is no such call), ``event`` what
    was asked, ``call_id`` and ``key`` which call.
    """

    def __init__(
        self, message: str, *, state: Optional[CallState], event: CallEvent, call_id: str, key: str = ""
    ) -> None:
        super().__init__(message)
        self.state = state
        self.event = event
        self.call_id = call_id
        self.key = key


class AlreadyExecuted(ToolCallStateError):
    """The key was executed before; ``result`` (or ``exception``) is what that run gave.

    ``result`` is ``None`` while that run has not finished.
    """

    def __init__(self, message: str, *, result: Any, exception: Optional[BaseException], **kw: Any) -> None:
        super().__init__(message, **kw)
        self.result = result
        self.exception = exception


class CallCancelled(ToolCallStateError):
    """The call was cancelled; ``reason`` says why, ``result`` is what an overtaken run gave."""

    def __init__(self, message: str, *, reason: str, result: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.reason = reason
        self.result = result


@dataclass(frozen=True)
class Transition:
    """One move asked of a call, in the order asked; ``accepted`` false for a refused one."""

    at: float
    call_id: str
    key: str
    state: CallState
    event: CallEvent
    next_state: Optional[CallState]
    accepted: bool


@dataclass(frozen=True)
class TrackedCall:
    """A snapshot of one call: its state, what came of its arguments, and its result."""

    call_id: str
    name: str
    key: str
    state: CallState
    fragments: Tuple[str, ...]
    arguments: Optional[Mapping[str, Any]]
    result: Any = None
    cancel_reason: str = ""

    def tool_call(self) -> ToolCall:
        """The call as the contract's :class:`~conformance.ToolCall`, once its arguments parsed."""
        if self.arguments is None:
            raise ValueError(
                f"call {self.call_id!r} ({self.name}) has no parsed arguments in state {self.state}"
            )
        return ToolCall(self.call_id, self.name, self.arguments)


@dataclass
class _Call:
    call_id: str
    name: str
    key: str
    state: CallState = S.START
    fragments: List[str] = field(default_factory=list)
    arguments: Optional[Mapping[str, Any]] = None
    parse_error: str = ""
    running: bool = False
    ran: bool = False
    result: Any = None
    exception: Optional[BaseException] = None
    cancel_reason: str = ""

    def snapshot(self) -> TrackedCall:
        return TrackedCall(self.call_id, self.name, self.key, self.state, tuple(self.fragments),
                           self.arguments, self.result, self.cancel_reason)


class ToolCallTracker:
    """The calls of one loop, each with its state, and their executions by key."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._calls: Dict[str, _Call] = {}
        self._history: List[Transition] = []

    # -- the moves --------------------------------------------------------------------

    def _move(self, call: _Call, event: CallEvent) -> None:
        """Apply ``event`` to ``call`` or raise; the lock is held."""
        target = TRANSITIONS.get((call.state, event))
        self._history.append(
            Transition(self._clock(), call.call_id, call.key, call.state, event, target, target is not None)
        )
        if target is None:
            allowed = ", ".join(str(e) for (s, e) in TRANSITIONS if s == call.state) or "nothing"
            hint = REFUSALS.get((call.state, event)) or f"allowed here: {allowed}"
            kind = CallCancelled if call.state == S.CANCELLED else ToolCallStateError
            extra: Dict[str, Any] = {"reason": call.cancel_reason} if kind is CallCancelled else {}
            raise kind(
                f"call {call.call_id!r} ({call.name or 'unnamed'}): cannot {event} "
                f"in state {call.state}: {hint}",
                state=call.state, event=event, call_id=call.call_id, key=call.key, **extra,
            )
        call.state = target

    def _get(self, call_id: str, event: CallEvent) -> _Call:
        call = self._calls.get(call_id)
        if call is None:
            known = ", ".join(repr(c) for c in self._calls) or "none"
            raise ToolCallStateError(
                f"no call {call_id!r} to {event}; open it first (open calls: {known})",
                state=None, event=event, call_id=call_id,
            )
        return call

    def open(self, call_id: str, name: str = "", *, key: Optional[str] = None) -> None:
        """A call began (its first event); ``key`` is its idempotency key, the id if none."""
        with self._lock:
            call = self._calls.get(call_id)
            if call is None:
                call = self._calls[call_id] = _Call(call_id, name, call_id if key is None else key)
            self._move(call, E.OPEN)

    def delta(self, call_id: str, fragment: str) -> None:
        """A fragment of the call's JSON arguments arrived."""
        with self._lock:
            call = self._get(call_id, E.DELTA)
            self._move(call, E.DELTA)
            call.fragments.append(fragment)

    def done(
        self, call_id: str, arguments: Optional[Mapping[str, Any]] = None, *, key: Optional[str] = None
    ) -> None:
        """The call is complete: ``arguments`` as given, or else its fragments joined and parsed.

        Fragments that do not parse leave the call complete with no arguments; :meth:`validate`
        then reports it. ``key`` replaces the idempotency key, for a loop that derives it from
        the arguments.
        """
        with self._lock:
            call = self._get(call_id, E.DONE)
            self._move(call, E.DONE)
            if key is not None:
                call.key = key
            if arguments is not None:
                call.arguments = arguments
                return
            text = "".join(call.fragments) or "{}"
            try:
                call.arguments = json.loads(text)
            except ValueError as error:
                call.parse_error = f"the arguments are not JSON ({error}): {text[:80]!r}"

    def complete(self, call: ToolCall, *, key: Optional[str] = None) -> None:
        """A call that arrived whole (a non-streamed reply): open and done in one.

        A call whose ``unparsed_arguments`` are set is taken as that text, so that
        :meth:`validate` reports it is not a JSON object and it can never run.
        """
        self.open(call.id, call.name, key=key)
        if call.unparsed_arguments is not None:
            self.delta(call.id, call.unparsed_arguments)
            self.done(call.id)
            return
        self.done(call.id, call.arguments)

    def validate(
        self, call_id: str, schema: Optional[Mapping[str, Any]] = None
    ) -> Tuple[SchemaViolation, ...]:
        """Check the complete call's arguments against ``schema``; VALIDATED if they pass.

        Return the violations; with any, the call stays CALL_DONE, and the loop sends an
        error result or cancels it. Without ``schema`` only that the arguments are a JSON
        object is checked.
        """
        with self._lock:
            call = self._get(call_id, E.VALIDATE)
            if call.state == S.CALL_DONE:
                if call.parse_error:
                    return (SchemaViolation("$", call.parse_error),)
                violations = validate(schema if schema is not None else {"type": "object"}, call.arguments)
                if violations:
                    return violations
            self._move(call, E.VALIDATE)
            return ()

    def cancel(self, call_id: str, reason: str = "cancelled") -> None:
        """Cancel a call that has not been executed; it can do nothing afterwards.

        A call may be cancelled before its first event (from START), so that it can never open.
        """
        with self._lock:
            call = self._calls.get(call_id)
            if call is None:
                call = self._calls[call_id] = _Call(call_id, "", call_id)
            self._move(call, E.CANCEL)
            call.cancel_reason = reason

    def cancel_all(self, reason: str = "cancelled") -> Tuple[str, ...]:
        """Cancel every call not yet executed or cancelled (the loop was aborted); return their ids."""
        with self._lock:
            live = [c for c in self._calls.values() if (c.state, E.CANCEL) in TRANSITIONS]
            for call in live:
                self._move(call, E.CANCEL)
                call.cancel_reason = reason
            return tuple(c.call_id for c in live)

    # -- execution --------------------------------------------------------------------

    def _claim(self, key: str) -> _Call:
        """Pick the call that may run for ``key`` and mark it running, or raise why none may."""
        with self._lock:
            calls = [c for c in self._calls.values() if c.key == key]
            if not calls:
                raise ToolCallStateError(
                    f"no call has the idempotency key {key!r}; open the call first",
                    state=None, event=E.EXECUTE, call_id="", key=key,
                )
            first = next((c for c in calls if c.ran or c.running), None)
            if first is not None:
                self._history.append(Transition(self._clock(), first.call_id, key, first.state, E.EXECUTE,
                                                None, False))
                still = " and is still running" if first.running else ""
                raise AlreadyExecuted(
                    f"idempotency key {key!r} was already executed by call {first.call_id!r} "
                    f"({first.name or 'unnamed'}){still}; reuse its result instead of running it again",
                    result=first.result, exception=first.exception,
                    state=first.state, event=E.EXECUTE, call_id=first.call_id, key=key,
                )
            ready = [c for c in calls if c.state == S.VALIDATED]
            if not ready:
                self._move(calls[-1], E.EXECUTE)  # refused, with what is wrong with the latest call
            call = ready[-1]  # the latest: a retried turn's call, when an earlier one was cancelled
            call.running = True  # the state stays VALIDATED until the run ends, so a cancel can overtake it
            return call

    def _settle(self, call: _Call, result: Any, exception: Optional[BaseException]) -> None:
        with self._lock:
            call.running, call.ran = False, True
            call.result, call.exception = result, exception
            if call.state == S.CANCELLED:
                if exception is None:
                    raise CallCancelled(
                        f"call {call.call_id!r} ({call.name or 'unnamed'}) was cancelled while it ran "
                        f"({call.cancel_reason}); do not send its result",
                        reason=call.cancel_reason, result=result,
                        state=call.state, event=E.EXECUTE, call_id=call.call_id, key=call.key,
                    )
                return
            self._move(call, E.EXECUTE)

    def execute(self, key: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` for the VALIDATED call with idempotency ``key``, at most once per key.

        Refused with :class:`AlreadyExecuted` (carrying the first result) when the key ran
        before, :class:`CallCancelled` when the call was cancelled, and
        :class:`ToolCallStateError` when it is not VALIDATED. Once ``fn`` has been called
        the call counts as executed, whatever ``fn`` returned or raised.
        """
        call = self._claim(key)
        try:
            result = fn()
        except BaseException as error:
            self._settle(call, None, error)
            raise
        self._settle(call, result, None)
        return result

    async def aexecute(self, key: str, fn: Callable[[], Awaitable[T]]) -> T:
        """As :meth:`execute`, for a tool that is awaited."""
        call = self._claim(key)
        try:
            result = await fn()
        except BaseException as error:
            self._settle(call, None, error)
            raise
        self._settle(call, result, None)
        return result

    # -- reading ----------------------------------------------------------------------

    def state(self, call_id: str) -> CallState:
        """Where the call is now."""
        with self._lock:
            call = self._calls.get(call_id)
            return S.START if call is None else call.state

    def get(self, call_id: str) -> TrackedCall:
        """A snapshot of one call; ``KeyError`` if it was never opened."""
        with self._lock:
            call = self._calls.get(call_id)
            if call is None:
                raise KeyError(f"no call {call_id!r} was opened")
            return call.snapshot()

    def calls(self) -> Tuple[TrackedCall, ...]:
        """Snapshots of every call, in the order they were opened."""
        with self._lock:
            return tuple(c.snapshot() for c in self._calls.values())

    def history(self) -> Tuple[Transition, ...]:
        """Every move asked, accepted or refused, in order: the evidence for a report.

        An accepted ``execute`` is kept when its run ends (the call stays VALIDATED while
        the tool runs, so that a cancel can overtake it); when a run started is what the
        toolset's execution log says.
        """
        with self._lock:
            return tuple(self._history)
