"""The gate's deterministic tools, and the toolset that runs and records them.

Strategy: the tools are data (:data:`TOOLS`: name, description, strict schema) plus
one small function each in :data:`_RUNNERS`; :class:`GateToolset` is the one place that
executes them, so that every execution, however it ends, leaves exactly one record in
the toolset's :class:`~conformance.gate.log.ExecutionLog`. The sync
(:meth:`~GateToolset.execute`) and async (:meth:`~GateToolset.aexecute`) forms share
everything but the wait of ``delayed_value``.

A tool never raises into the loop: a bad argument, an unknown tool, a call whose
argument text did not parse (``ToolCall.unparsed_arguments``) or a refused path
come back as a :class:`~conformance.ToolResult` with a structured
:class:`~conformance.ToolError`, and what was refused at the door is recorded as
not run. The one exception is the caller's own abort: once
its signal fires, the toolset raises ``signal.reason``, the very object, as a
backend does (and an asyncio cancel stays a cancel), after recording it.

Each successful result is JSON that carries the execution's ``fixture_id``, which no
other execution shares, so the gate can tell whether a final answer used it.
"""

from __future__ import annotations

import copy
import itertools
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional, Tuple, Union

from ..contract import AbortSignal, ToolCall, ToolError, ToolResult, ToolSpec
from .log import ExecutionLog, ExecutionRecord, ExecutionStatus, InFlight
from .sandbox import Journal, Sandbox
from .schema import gemini_schema, validate

__all__ = [
    "ALWAYS_ERROR",
    "BASE_TOOLS",
    "IDEMPOTENCY_KEY",
    "TOOLS",
    "GateTool",
    "GateToolset",
    "tool_specs",
    "write_key",
]


def _object(properties: Mapping[str, Any]) -> Mapping[str, Any]:
    """A strict object schema: every property required, no others allowed (OpenAI strict mode)."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class GateTool:
    """One deterministic tool: what the model is told about it."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    #: The schema as JSON text, written once: each spec is parsed afresh from it.
    _text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_text", json.dumps(self.parameters))

    def spec(self) -> ToolSpec:
        """The tool as the contract sends it, its strict schema unchanged."""
        # A fresh copy for the loop to change as it likes; from JSON text, which costs a
        # tenth of copy.deepcopy, and every case hands its loop the four schemas.
        return ToolSpec(self.name, self.description, json.loads(self._text))

    def gemini_spec(self, *, upper: bool = True) -> ToolSpec:
        """The tool with its schema in the form Gemini's ``parameters`` accepts."""
        return ToolSpec(self.name, self.description, gemini_schema(self.parameters, upper=upper))


#: The tools, by name.
TOOLS: Mapping[str, GateTool] = {
    tool.name: tool
    for tool in (
        GateTool(
            "echo_json",
            "Return the arguments it is given, unchanged, with the id of this execution.",
            _object({
                "text": {"type": "string", "description": "Any text, returned as given."},
                "count": {"type": "integer", "description": "Any whole number."},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Any labels."},
            }),
        ),
        GateTool(
            "read_fixture",
            "Read a text file from the read-only fixture sandbox, e.g. 'weather.json'.",
            _object({"path": {"type": "string", "description": "A path relative to the sandbox."}}),
        ),
        GateTool(
            "delayed_value",
            "Return the given value after waiting the given number of milliseconds.",
            _object({
                "value": {"type": "string", "description": "The value to return."},
                "delay_ms": {"type": "integer", "description": "How long to wait first, in ms."},
            }),
        ),
        GateTool(
            "always_error",
            "Fail, always with the same structured error; for testing error handling.",
            _object({"reason": {"type": "string", "description": "Why it is called; ignored."}}),
        ),
        GateTool(
            "append_record",
            "Append a record to the journal: a write. Run it at most once per idempotency_key; a "
            "repeated call with the same key gets the first call's result back.",
            _object({
                "idempotency_key": {
                    "type": "string",
                    "description": "The same for every attempt at this one write.",
                },
                "record": {"type": "string", "description": "The text to append."},
            }),
        ),
    )
}

#: The tools every task offers (the reads, the wait and the failure); a stage that needs a
#: write offers ``append_record`` beside them.
BASE_TOOLS: Tuple[str, ...] = ("echo_json", "read_fixture", "delayed_value", "always_error")
#: The property whose presence in a tool's schema makes it a write, keyed by its value: a
#: loop runs a write at most once per key within a task.
IDEMPOTENCY_KEY = "idempotency_key"

#: The error ``always_error`` returns, the same every time.
ALWAYS_ERROR = ToolError(
    "fixture_failure",
    "always_error failed on purpose: the fixture service is unavailable; do not retry",
    retryable=False,
    details={"tool": "always_error"},
)


def tool_specs(*names: str, gemini: bool = False) -> Tuple[ToolSpec, ...]:
    """The named tools (the :data:`BASE_TOOLS` when none is named) as :class:`~conformance.ToolSpec`.

    ``gemini=True`` gives each schema in the form Gemini's ``parameters`` accepts.
    """
    chosen = names or BASE_TOOLS
    unknown = [name for name in chosen if name not in TOOLS]
    if unknown:
        raise ValueError(f"unknown gate tool(s) {', '.join(unknown)}; the tools are {', '.join(TOOLS)}")
    return tuple(TOOLS[n].gemini_spec() if gemini else TOOLS[n].spec() for n in chosen)


_Outcome = Union[Mapping[str, Any], ToolError]


def _echo_json(toolset: GateToolset, arguments: Mapping[str, Any]) -> _Outcome:
    return {"echo": arguments}


def _read_fixture(toolset: GateToolset, arguments: Mapping[str, Any]) -> _Outcome:
    text = toolset.sandbox.read(arguments["path"])
    if isinstance(text, ToolError):
        return text
    return {"path": arguments["path"], "content": text}


def _delayed_value(toolset: GateToolset, arguments: Mapping[str, Any]) -> _Outcome:
    return {"value": arguments["value"], "delay_ms": arguments["delay_ms"]}


def _always_error(toolset: GateToolset, arguments: Mapping[str, Any]) -> _Outcome:
    return ALWAYS_ERROR


def _append_record(toolset: GateToolset, arguments: Mapping[str, Any]) -> _Outcome:
    # The journal writes whatever comes: keeping a write to once per key is the loop's part.
    entry = toolset.journal.append(arguments[IDEMPOTENCY_KEY], arguments["record"])
    return {"appended": entry.record, IDEMPOTENCY_KEY: entry.key, "entry": entry.number}


#: What each tool does once its arguments are valid and its wait is over.
_RUNNERS: Mapping[str, Callable[[GateToolset, Mapping[str, Any]], _Outcome]] = {
    "echo_json": _echo_json,
    "read_fixture": _read_fixture,
    "delayed_value": _delayed_value,
    "always_error": _always_error,
    "append_record": _append_record,
}


def write_key(call: ToolCall, parameters: Mapping[str, Any]) -> Optional[str]:
    """The key a loop runs ``call`` at most once under, where its tool is a write (its schema
    has an ``idempotency_key`` property): ``"<tool>:<key>"``; ``None`` for any other call."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping) or IDEMPOTENCY_KEY not in properties:
        return None
    value = call.arguments.get(IDEMPOTENCY_KEY) if isinstance(call.arguments, Mapping) else None
    return f"{call.name}:{value}" if isinstance(value, str) else None


class GateToolset:
    """The tools over one sandbox and one journal, recording every execution in :attr:`log`.

    ``run_id`` prefixes every fixture id (``fx-<run_id>-0001``); give a fixed one to
    make the ids the same from run to run (a replayed final answer quotes them), or
    leave it to a random one. ``max_delay`` bounds ``delayed_value`` in seconds;
    ``clock`` is what the records' times are read from. Use it as a context manager,
    or call :meth:`close`, to remove the sandbox. A ``sandbox`` passed in (read-only,
    so that many toolsets may share one) is used instead of a new one, and is left
    for its owner to close.
    """

    def __init__(
        self,
        *,
        run_id: Optional[str] = None,
        files: Optional[Mapping[str, str]] = None,
        max_delay: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        sandbox: Optional[Sandbox] = None,
    ) -> None:
        self.run_id = run_id if run_id is not None else secrets.token_hex(4)
        self.max_delay = max_delay
        self.clock = clock
        self.log = ExecutionLog()
        #: What ``append_record`` wrote, every write in order (the evidence of a double write).
        self.journal = Journal(clock)
        if sandbox is not None and files is not None:
            raise ValueError("give files or a sandbox, not both: a shared sandbox already holds its files")
        self._owns_sandbox = sandbox is None
        self.sandbox = Sandbox(files) if sandbox is None else sandbox
        self._counter = itertools.count(1)
        self._counter_lock = threading.Lock()
        #: A cancel placed in a tool's wait: (tool, seconds into the wait, what fires it).
        self._planned_abort: Optional[Tuple[str, float, Callable[[], Any]]] = None

    # -- the tools as the model sees them ---------------------------------------------

    def specs(self, *, gemini: bool = False) -> Tuple[ToolSpec, ...]:
        """The four :data:`BASE_TOOLS` as :class:`~conformance.ToolSpec`, in Gemini's form if asked."""
        return tool_specs(gemini=gemini)

    # -- executing --------------------------------------------------------------------

    def execute(
        self, call: ToolCall, *, key: Optional[str] = None, signal: Optional[AbortSignal] = None
    ) -> ToolResult:
        """Run ``call`` in this thread and return its result; blocks for ``delayed_value``.

        ``key`` is the idempotency key to record (the call id if none). The toolset does
        not deduplicate: a second execution of a key runs and is recorded, so that a
        loop that runs a call twice is seen doing it. If ``signal`` fires, the execution
        is recorded as aborted and ``signal.reason`` is raised.
        """
        entry, delay, outcome = self._begin(call, key)
        if signal is not None and signal.aborted:
            raise self._abort(entry, call, signal, ran=False)
        for seconds, then in self._spells(call, delay):
            if signal is None:
                time.sleep(seconds)
            elif signal.wait_sync(seconds) or signal.aborted:
                # Fired in the wait, or just as it ran out: the tool holds the signal either way.
                raise self._abort(entry, call, signal, ran=True)
            if then is not None:
                then()
        return self._finish(entry, call, outcome)

    async def aexecute(
        self, call: ToolCall, *, key: Optional[str] = None, signal: Optional[AbortSignal] = None
    ) -> ToolResult:
        """Run ``call`` without blocking the event loop; otherwise as :meth:`execute`.

        A cancel of the awaiting task is recorded as cancelled and propagates unchanged.
        """
        import asyncio  # here, so that sync users never pay for importing it

        entry, delay, outcome = self._begin(call, key)
        if signal is not None and signal.aborted:
            raise self._abort(entry, call, signal, ran=False)
        try:
            for seconds, then in self._spells(call, delay):
                if signal is None:
                    await asyncio.sleep(seconds)
                else:
                    try:
                        await asyncio.wait_for(signal.wait(), seconds)
                    except asyncio.TimeoutError:
                        # Fired from another thread just before the wait ran out, its wake-up
                        # not yet run on this loop: the tool holds the signal all the same.
                        if signal.aborted:
                            raise self._abort(entry, call, signal, ran=True) from None
                    else:
                        raise self._abort(entry, call, signal, ran=True)
                if then is not None:
                    then()
        except asyncio.CancelledError:
            self._record(entry, call, ExecutionStatus.CANCELLED, self._stopped(call, "cancelled"), True)
            raise
        return self._finish(entry, call, outcome)

    def _abort_during(self, tool: str, after: float, fire: Callable[[], Any]) -> None:
        """Have the next execution of ``tool`` that waits call ``fire`` ``after`` seconds into
        its wait, from the thread that runs it. The gate's cancel-in-tool stage places its
        cancel so: an aborter thread a loaded machine leaves unscheduled could fire it only
        after the tool had run out, or the loop had ended."""
        self._planned_abort = (tool, after, fire)

    def _spells(self, call: ToolCall, delay: float) -> List[Tuple[float, Optional[Callable[[], Any]]]]:
        """The wait of ``call`` as spells, each with what to call once it is over."""
        if delay <= 0:
            return []
        with self._counter_lock:
            planned = self._planned_abort
            if planned is None or planned[0] != call.name:
                return [(delay, None)]
            self._planned_abort = None
        first = min(planned[1], delay)
        return [(first, planned[2]), (delay - first, None)]

    def _next_fixture_id(self) -> Tuple[int, str]:
        with self._counter_lock:
            sequence = next(self._counter)
        return sequence, f"fx-{self.run_id}-{sequence:04d}"

    def _begin(self, call: ToolCall, key: Optional[str]) -> Tuple[InFlight, float, Optional[_Outcome]]:
        """Open the record; check the call; return the wait it needs and, when refused, why."""
        sequence, fixture_id = self._next_fixture_id()
        entry = InFlight(
            sequence, fixture_id, call.id, call.name, call.id if key is None else key, self.clock()
        )
        self.log.begin(entry)
        tool = TOOLS.get(call.name)
        if tool is None:
            return entry, 0.0, ToolError(
                "unknown_tool",
                f"there is no tool {call.name!r}; the tools are {', '.join(TOOLS)}",
                details={"tool": call.name},
            )
        if call.unparsed_arguments is not None:
            text = call.unparsed_arguments
            return entry, 0.0, ToolError(
                "invalid_arguments",
                f"the arguments of {call.name} are not a JSON object: {text[:80]!r}; the call was not run",
                details={"tool": call.name, "arguments": text},
            )
        violations = validate(tool.parameters, call.arguments)
        if violations:
            return entry, 0.0, ToolError(
                "invalid_arguments",
                f"the arguments of {call.name} break its schema: " + "; ".join(map(str, violations)),
                details={"tool": call.name, "violations": [str(v) for v in violations]},
            )
        if call.name == "delayed_value":
            delay = call.arguments["delay_ms"] / 1000
            if not 0 <= delay <= self.max_delay:
                limit = int(self.max_delay * 1000)
                return entry, 0.0, ToolError(
                    "invalid_arguments",
                    f"delay_ms must be between 0 and {limit}, got {call.arguments['delay_ms']}",
                    details={"tool": call.name},
                )
            return entry, delay, None
        return entry, 0.0, None

    def _finish(self, entry: InFlight, call: ToolCall, refused: Optional[_Outcome]) -> ToolResult:
        """Run the tool unless it was refused at the door, record it, and return the result."""
        outcome = refused if refused is not None else _RUNNERS[call.name](self, call.arguments)
        if isinstance(outcome, ToolError):
            result = ToolResult(call.id, call.name, error=outcome)
            self._record(entry, call, ExecutionStatus.ERROR, result, ran=refused is None)
            return result
        body = {"fixture_id": entry.fixture_id, **outcome}
        result = ToolResult(call.id, call.name, json.dumps(body, ensure_ascii=False))
        self._record(entry, call, ExecutionStatus.OK, result, ran=True)
        return result

    def _abort(self, entry: InFlight, call: ToolCall, signal: AbortSignal, *, ran: bool) -> BaseException:
        """Record an abort; return the caller's reason, for the caller to raise."""
        self._record(entry, call, ExecutionStatus.ABORTED, self._stopped(call, "aborted"), ran)
        assert signal.reason is not None
        return signal.reason

    @staticmethod
    def _stopped(call: ToolCall, how: str) -> ToolResult:
        error = ToolError(how, f"{call.name} was {how} before it finished", details={"tool": call.name})
        return ToolResult(call.id, call.name, error=error)

    def _record(self, entry: InFlight, call: ToolCall, status: str, result: ToolResult, ran: bool) -> None:
        ended = max(self.clock(), entry.started)
        self.log.end(ExecutionRecord(
            entry.sequence, entry.fixture_id, entry.call_id, entry.tool, copy.deepcopy(call.arguments),
            entry.key, entry.started, ended, status, result, ran,
        ))

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Remove the sandbox (unless it was passed in); the log stays readable."""
        if self._owns_sandbox:
            self.sandbox.close()

    def __enter__(self) -> GateToolset:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<GateToolset run_id={self.run_id!r} {self.log!r}>"

