"""The record of every tool execution, so that a double or a late one shows, and of every
request the loop sent, with the status and request id the provider answered it with.

Strategy: the gate judges a loop by what its tools did, not by what the loop says it
did. Each execution leaves one frozen :class:`ExecutionRecord` with a fixture id no
other execution has, the call id and idempotency key it ran for, and monotonic start
and end times to set against the provider's events and the caller's cancel. The log
takes records from any thread, and from sync and async loops alike, behind one lock;
readers get snapshots, never the live list.

A :class:`RequestRecord` is the evidence a release keeps of each request: what was
asked, the status the provider answered with (``None`` where no status line went
out: a dropped or unanswered request), and the provider's own request id, read from
the reply header each provider names it in (:data:`REQUEST_ID_HEADERS`), ``None`` on
a wire whose replies carry none (Gemini, Ollama).
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..contract import ToolError, ToolResult

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest

__all__ = [
    "REQUEST_ID_HEADERS",
    "ExecutionLog",
    "ExecutionRecord",
    "ExecutionStatus",
    "InFlight",
    "RequestRecord",
    "request_records",
]

#: The reply headers that carry the provider's id of a request, lower-case: OpenAI's
#: ``x-request-id`` (Chat Completions and Responses), Anthropic's ``request-id``,
#: Bedrock's ``x-amzn-RequestId``. Gemini and Ollama send none.
REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid")


class ExecutionStatus(str, enum.Enum):
    """How an execution ended."""

    #: The tool ran and returned its result.
    OK = "ok"
    #: The tool returned a structured error (a bad argument, a refused path, on purpose).
    ERROR = "error"
    #: The caller's :class:`~conformance.AbortSignal` fired, before or while it ran.
    ABORTED = "aborted"
    #: The asyncio task running it was cancelled.
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class ExecutionRecord:
    """One execution of one tool call, whatever its outcome.

    ``sequence`` is the order executions started in. ``started`` and ``ended`` are
    :func:`time.monotonic` readings (or the toolset's clock). ``result`` is what the
    loop got back, or, for an aborted or cancelled run, the error that says so.
    ``key`` is the idempotency key the loop gave, the call id when it gave none. ``ran``
    says whether the tool began its work: a call refused at the door (an unknown tool,
    arguments its schema forbids, a signal that had already fired) is recorded as an
    attempt with ``ran`` false. Two records with one key that both ran are a double
    execution.
    """

    sequence: int
    fixture_id: str
    call_id: str
    tool: str
    arguments: Any
    key: str
    started: float
    ended: float
    status: str
    result: ToolResult
    ran: bool

    @property
    def error(self) -> Optional[ToolError]:
        """The structured error, if the execution did not succeed."""
        return self.result.error


@dataclass(frozen=True)
class InFlight:
    """An execution that has started and not yet ended."""

    sequence: int
    fixture_id: str
    call_id: str
    tool: str
    key: str
    started: float


class ExecutionLog:
    """Every execution of a toolset, in the order each ended; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Notified at every begin, for :meth:`wait_begun`.
        self._begun = threading.Condition(self._lock)
        self._records: List[ExecutionRecord] = []
        self._running: Dict[str, InFlight] = {}

    # -- writing (the toolset) --------------------------------------------------------

    def begin(self, entry: InFlight) -> None:
        """Note that an execution started."""
        with self._lock:
            self._running[entry.fixture_id] = entry
            self._begun.notify_all()

    def end(self, record: ExecutionRecord) -> None:
        """Note that an execution ended, and keep its record."""
        with self._lock:
            self._running.pop(record.fixture_id, None)
            self._records.append(record)

    # -- reading (the gate, a test) ---------------------------------------------------

    def records(self) -> Tuple[ExecutionRecord, ...]:
        """Every finished execution, in the order they ended."""
        with self._lock:
            return tuple(self._records)

    def in_flight(self) -> Tuple[InFlight, ...]:
        """Executions still running, in the order they started."""
        with self._lock:
            return tuple(sorted(self._running.values(), key=lambda entry: entry.sequence))

    def last_start(self) -> Optional[float]:
        """When the latest execution began (running or ended); ``None`` before any."""
        with self._lock:
            starts = [e.started for e in self._running.values()] + [r.started for r in self._records]
        return max(starts, default=None)

    def wait_begun_after(self, moment: float, timeout: float) -> bool:
        """Wait until an execution begun after ``moment`` is on record, at most ``timeout`` seconds;
        whether one is."""

        def begun() -> bool:
            return any(e.started > moment for e in self._running.values()) or any(
                r.started > moment for r in self._records
            )

        with self._begun:
            return self._begun.wait_for(begun, max(0.0, timeout))

    def wait_begun(self, tool: str, timeout: float) -> Optional[InFlight]:
        """Wait until an execution of ``tool`` is running, at most ``timeout`` seconds; it, or ``None``."""

        def running() -> Optional[InFlight]:
            return next((e for e in self._running.values() if e.tool == tool), None)

        with self._begun:
            self._begun.wait_for(lambda: running() is not None, max(0.0, timeout))
            return running()

    def for_call(self, call_id: str) -> Tuple[ExecutionRecord, ...]:
        """The executions for one call id."""
        return tuple(r for r in self.records() if r.call_id == call_id)

    def for_tool(self, tool: str) -> Tuple[ExecutionRecord, ...]:
        """The executions of one tool."""
        return tuple(r for r in self.records() if r.tool == tool)

    def find(self, fixture_id: str) -> Optional[ExecutionRecord]:
        """The execution with this fixture id, as quoted in a result or a final answer."""
        for record in self.records():
            if record.fixture_id == fixture_id:
                return record
        return None

    def duplicates(self) -> Mapping[str, Tuple[ExecutionRecord, ...]]:
        """Idempotency keys whose tool did its work more than once, with those records."""
        by_key: Dict[str, List[ExecutionRecord]] = {}
        for record in self.records():
            if record.ran:
                by_key.setdefault(record.key, []).append(record)
        return {key: tuple(found) for key, found in by_key.items() if len(found) > 1}

    def started_after(self, moment: float) -> Tuple[ExecutionRecord, ...]:
        """Executions that began after ``moment`` (a cancel, say), finished or not."""
        return tuple(r for r in self.records() if r.started > moment)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __iter__(self) -> Iterator[ExecutionRecord]:
        return iter(self.records())

    def __repr__(self) -> str:
        with self._lock:
            done, running = len(self._records), len(self._running)
        return f"<ExecutionLog {done} finished, {running} running>"


@dataclass(frozen=True)
class RequestRecord:
    """One request the loop sent, and how the provider answered it.

    ``sequence`` counts the requests of a case from 1. ``status`` is the HTTP status
    the provider sent, ``None`` where it sent no status line (the connection dropped
    before one, or the request was never answered). ``request_id`` is the provider's
    id of the request from its reply headers, ``None`` where the wire sends none.
    """

    sequence: int
    method: str
    target: str
    http_version: str
    status: Optional[int]
    request_id: Optional[str]

    @classmethod
    def of(cls, sequence: int, request: RecordedRequest) -> RequestRecord:
        """The record of ``request``, read from the reply the provider gave it."""
        reply = request.response.reply if request.response is not None else None
        status = getattr(reply, "status", None)
        request_id = None
        items = getattr(reply, "header_items", None)
        if callable(items):
            headers = {name.lower(): value for name, value in items()}
            request_id = next((headers[h] for h in REQUEST_ID_HEADERS if h in headers), None)
        return cls(
            sequence,
            request.method,
            request.target,
            request.http_version,
            status if isinstance(status, int) else None,
            request_id,
        )

    def as_dict(self) -> Dict[str, Any]:
        return {
            "sequence": self.sequence,
            "method": self.method,
            "target": self.target,
            "http_version": self.http_version,
            "status": self.status,
            "request_id": self.request_id,
        }

    def __str__(self) -> str:
        status = "no status" if self.status is None else str(self.status)
        rid = f", request id {self.request_id}" if self.request_id else ""
        return f"{self.method} {self.target} ({self.http_version}) -> {status}{rid}"


def request_records(requests: Sequence[RecordedRequest]) -> Tuple[RequestRecord, ...]:
    """The record of each of ``requests``, in the order the provider received them."""
    return tuple(RequestRecord.of(n, r) for n, r in enumerate(requests, 1))
