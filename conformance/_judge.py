"""``serve`` as a judge: a client in any language runs one case, and ``serve`` gives the verdict.

Strategy: the fake provider already sees everything the checks read on the provider's
side: each request, each reply and the events that carried it. A client in another
process adds the two things only it knows, over the same port, under
:data:`JUDGE_PATH`: its tool executions (``POST /conformance/tools/<name>``, run by
the same :class:`~conformance.gate.GateToolset` a Python loop is given, so that the
execution log the invariants read is written exactly as it would be), and how its run
ended (``POST /conformance/outcome``: the content, finish reason, tool calls, usage
or error a backend would have returned; or the text, finish reason and ``stopped`` of
a loop's result). That report ends the run: it is turned into the outcome the Python
driver would have observed, and the very checks of the backend suite
(:data:`~conformance._checks.CHECKS`) or the gate's invariants
(:data:`~conformance.gate._invariants.INVARIANTS`) judge it, beside the requests. A
run that reports nothing within ``serve --timeout`` is judged as a backend or loop
still running at the bound.

What cannot be judged from outside is said, not guessed: the ``abort`` and ``cancel``
scenarios and the ``cancel`` stage need the kit to fire the caller's signal (or
cancel its task) inside the client, so they are served but their verdict is a skip
that says why. ``GET /conformance/task`` tells the client what to run: the request of
a backend scenario, or the task of a stage (prompt, tools, tool choice, budgets). A
backend scenario's session is here; a stage's is the gate's own
(:class:`conformance.gate._remote.StageSession`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
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

from ._bounds import LATENCY_SCENARIOS
from ._results import CaseRecord
from .contract import ChatResponse, StreamChunk, ToolCall, Usage
from .provider import JsonReply, RecordedRequest, Reply

if TYPE_CHECKING:
    from .gate.tools import GateToolset
    from .wires._base import Variant, Wire

__all__ = [
    "JUDGE_PATH",
    "BackendSession",
    "ReportedError",
    "Session",
    "Verdict",
    "reported_error",
]

#: Where the judge's own endpoints live on the provider's port; no wire uses it.
JUDGE_PATH = "/conformance/"
#: The name the checks give the client in a failure's text (the reports name it as
#: ``client_name`` says: ``serve`` and ``judge`` take ``--client-name``).
CLIENT = "client"
#: The largest body the judge reads at its own endpoints (a tool call, the outcome):
#: a bigger one is answered 413, and nothing of it is kept.
JUDGE_MAX_BODY_BYTES = 4 * 1024 * 1024
#: The longest verdict text a run's reports and printout carry; the rest is cut, and
#: the cut is said (a client may report megabytes of text that a check then quotes).
DETAIL_MAX_CHARS = 65536
#: Why a case is served but not judged: the kit cannot reach into another process.
NOT_JUDGED = {
    "abort": "the abort scenario fires the caller's AbortSignal inside the backend, which a client "
    "in another process does not share: serve plays it (a reply that never comes) but cannot judge it",
    "cancel": "the cancel scenario cancels the caller's asyncio task, which only a Python backend "
    "has: serve plays it but cannot judge it",
}


class ReportError(ValueError):
    """A report or tool call the judge cannot read: answered with a 400 (or ``status``) that says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def body_json(request: RecordedRequest, form: str) -> Any:
    """The JSON a request to the judge carries, read within :data:`JUDGE_MAX_BODY_BYTES`.

    A body too large is a 413; one that is not JSON, or is nested too deeply for the
    parser (a RecursionError, not a crash), a 400 that names ``form``, what it takes.
    """
    import json

    size = len(request.body)
    if size > JUDGE_MAX_BODY_BYTES:
        raise ReportError(
            f"POST {request.path}: a body of {size} bytes is larger than the judge takes "
            f"({JUDGE_MAX_BODY_BYTES} bytes); report less (a tool call's arguments, a run's outcome)",
            413,
        )
    try:
        return json.loads(request.body)
    except RecursionError:
        raise ReportError(
            f"POST {request.path}: the JSON is nested too deeply to read; it takes {form}"
        ) from None
    except (ValueError, UnicodeDecodeError):
        raise ReportError(f"POST {request.path} takes {form} as JSON") from None


def cut_detail(text: str, most: int = DETAIL_MAX_CHARS) -> str:
    """``text`` cut to ``most`` characters, saying how much was cut and why."""
    if len(text) <= most:
        return text
    return (
        text[:most]
        + f"\n... ({len(text) - most} more characters cut: a verdict's text is kept to {most} characters)"
    )


class ReportedError(Exception):
    """The error a client reported, carrying exactly the attributes it reported.

    A field the client left out is missing here too, so a check that reads it says
    so as it would of a Python backend's exception that lacks it.
    """


def reported_error(data: Any) -> BaseException:
    """The client's error as an exception: its ``name`` as the class name, its fields as attributes."""
    if not isinstance(data, Mapping):
        raise ReportError(f"error must be an object or null, got {data!r}")
    name = data.get("name")
    cls: type = ReportedError
    if isinstance(name, str) and name.isidentifier():
        cls = type(name, (ReportedError,), {"__module__": "client"})
    message = data.get("message", "")
    error: BaseException = cls("" if message is None else str(message))
    for field in ("kind", "code", "retryable", "retry_after", "status", "details"):
        if field in data:
            setattr(error, field, data[field])
    return error


def _get(data: Mapping[str, Any], name: str) -> Any:
    """A reported field as given, ``None`` where left out: the checks say what it should be."""
    return data.get(name)


def _tool_calls(data: Any) -> Tuple[ToolCall, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ReportError(f"tool_calls must be a list of {{id, name, arguments}}, got {data!r}")
    calls = []
    for item in data:
        if not isinstance(item, Mapping):
            raise ReportError(f"each tool call must be an object {{id, name, arguments}}, got {item!r}")
        unparsed = _get(item, "unparsed_arguments")
        if unparsed is not None and not isinstance(unparsed, str):
            raise ReportError(
                f"a tool call's unparsed_arguments must be the raw text or null, got {unparsed!r}"
            )
        calls.append(
            ToolCall(
                _get(item, "id"), _get(item, "name"), _get(item, "arguments"), unparsed_arguments=unparsed
            )
        )
    return tuple(calls)


def _chunks(data: Any) -> List[StreamChunk]:
    """A stream's chunks as the client yielded them, each ``{content, tool_calls, finish_reason,
    usage}``: the checks that read the order (one finish reason, none before a cut) need them."""
    if not isinstance(data, list):
        raise ReportError(
            f"chunks must be a list of {{content, tool_calls, finish_reason, usage}}, got {data!r}"
        )
    out = []
    for item in data:
        if not isinstance(item, Mapping):
            raise ReportError(
                f"each chunk must be an object {{content, tool_calls, finish_reason, usage}}, got {item!r}"
            )
        content = item.get("content") or ""
        if not isinstance(content, str):
            raise ReportError(f"a chunk's content must be text, got {content!r}")
        out.append(
            StreamChunk(
                content,
                _tool_calls(item.get("tool_calls")),
                _get(item, "finish_reason"),
                _usage(item.get("usage")),
            )
        )
    return out


def _usage(data: Any) -> Optional[Usage]:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ReportError(
            f"usage must be {{input_tokens, output_tokens, total_tokens}} or null, got {data!r}"
        )
    return Usage(_get(data, "input_tokens"), _get(data, "output_tokens"), _get(data, "total_tokens"))


@dataclass(frozen=True)
class ReportedResult:
    """A loop's result as its client reported it (what ``LoopResult`` holds, unchecked)."""

    text: Any
    finish_reason: Any
    stopped: Any


@dataclass(frozen=True)
class Verdict:
    """What the judge made of a run: the row for the reports, and the check ids that failed."""

    record: CaseRecord
    checks: Tuple[str, ...]

    @property
    def failed(self) -> bool:
        return self.record.outcome in ("FAIL", "ERROR")

    def as_dict(self) -> Dict[str, Any]:
        row = self.record.as_dict()
        return {
            "verdict": row["outcome"],
            "case": row["case"],
            "checks": list(self.checks),
            "detail": row["detail"],
        }


def _reply(status: int, body: Any) -> JsonReply:
    import json

    # Encoded here, ASCII-only: what a client reported may hold a lone surrogate, which
    # JSON carries as an escape and UTF-8 cannot carry at all.
    return JsonReply(json.dumps(body).encode("ascii"), status=status)


def _refuse(status: int, message: str) -> JsonReply:
    return _reply(status, {"error": {"message": message, "type": "conformance_judge"}})


class Session:
    """One client's run against one case: the provider's handler, the tools, the report, the verdict.

    ``dress`` is applied to every reply the provider sends (``serve`` gives each a
    fresh request id and date). :meth:`handle` is the provider's handler; once the
    client has reported, :attr:`done` is set and :attr:`verdict` holds the verdict.
    """

    kind = "backend"

    def __init__(
        self,
        wire: Wire,
        mode: str,
        toolset: GateToolset,
        *,
        model: str,
        http2: bool = False,
        timeout: float = 5.0,
        dress: Callable[[Reply], Reply] = lambda reply: reply,
        client_name: str = CLIENT,
    ) -> None:
        self.wire = wire
        self.client_name = client_name
        self.mode = mode
        self.toolset = toolset
        self.model = model
        self.http2 = http2
        self.timeout = timeout
        self.dress = dress
        self.done = threading.Event()
        self.verdict: Optional[Verdict] = None
        self.opened = time.monotonic()
        #: When the client's run began: the first request it made of this port.
        self.started: Optional[float] = None
        self.lock = threading.Lock()
        self._requests: Callable[[], List[RecordedRequest]] = list
        #: When the task was first asked for, and how many more clients asked after it
        #: (refused with a 409: one run judges one client).
        self.task_given: Optional[float] = None
        self.more_clients = 0

    # -- what a subclass says ----------------------------------------------------------

    @property
    def case_name(self) -> str:
        raise NotImplementedError

    def task(self) -> Dict[str, Any]:
        raise NotImplementedError

    def answer(self, request: RecordedRequest) -> Union[Reply, Awaitable[Reply]]:
        """The provider's answer to a request outside :data:`JUDGE_PATH` (held back, where a
        latency scenario holds it, as an awaitable of the reply already dressed)."""
        raise NotImplementedError

    def judge(
        self, report: Optional[Mapping[str, Any]], requests: List[RecordedRequest], ended: float
    ) -> Verdict:
        raise NotImplementedError

    # -- the handler ----------------------------------------------------------------------

    def attach(self, requests: Callable[[], List[RecordedRequest]]) -> None:
        """Where the judge reads the provider's requests from (``lambda: provider.requests``)."""
        self._requests = requests

    def handle(self, request: RecordedRequest) -> Any:
        with self.lock:
            if self.started is None:
                self.started = request.received_at
        if not request.path.startswith(JUDGE_PATH):
            answer = self.answer(request)
            # A held answer was dressed before it was held: it is sent as it comes.
            return answer if isinstance(answer, Awaitable) else self.dress(answer)
        try:
            return self._route(request, request.path[len(JUDGE_PATH) :])
        finally:
            # Read (or refused) by now: a body the judge took is not kept for the run's length.
            release(request)

    def _route(self, request: RecordedRequest, route: str) -> Any:
        if route == "task":
            if request.method != "GET":
                return _refuse(405, f"GET {JUDGE_PATH}task, not {request.method}")
            return self.give_task(request)
        if request.method != "POST":
            return _refuse(405, f"POST {request.path}, not {request.method}")
        if route.startswith("tools/"):
            return self.run_tool(request, route[len("tools/") :])
        if route == "outcome":
            return self.report(request)
        return _refuse(
            404,
            f"no {request.path}; the judge answers GET {JUDGE_PATH}task, POST {JUDGE_PATH}tools/<name> "
            f"and POST {JUDGE_PATH}outcome",
        )

    def give_task(self, request: RecordedRequest) -> Reply:
        """The task, to the run's one client; a second client is refused, and the verdict says so."""
        with self.lock:
            if self.task_given is not None and self.verdict is None:
                self.more_clients += 1
                return _refuse(
                    409,
                    "this run already has its client (it asked for the task first); serve judges one "
                    "client per run: start another serve (or use judge) for another client",
                )
            if self.task_given is None:
                self.task_given = request.received_at
        return _reply(200, self.task())

    def run_tool(self, request: RecordedRequest, name: str) -> Any:
        """Run one tool call through the toolset, recording it as a Python loop's would be."""
        try:
            call, key = _read_call(request, name)
        except ReportError as exc:
            return _refuse(exc.status, str(exc))
        if self.done.is_set():
            return _refuse(409, "the run is over: the outcome was reported")

        async def run() -> Reply:
            result = await self.toolset.aexecute(call, key=key)
            body: Dict[str, Any] = {
                "call_id": result.call_id,
                "name": result.name,
                "content": result.text,
                "is_error": result.is_error,
            }
            if result.error is not None:
                body["error"] = dict(result.error.as_dict())
            return _reply(200, body)

        return run()

    def report(self, request: RecordedRequest) -> Awaitable[Reply]:
        """The client's outcome: judge the run, answer with the verdict, and end it.

        Called on the provider's loop, it judges in a thread: judging runs every check and
        waits, up to a second, for the stall watch to have run past the run's end, while
        the loop must go on serving.
        """
        import asyncio

        try:
            report = body_json(request, "a JSON object (see docs/tutorial.md)")
        except ReportError as exc:
            return _settled(_refuse(exc.status, str(exc)))
        return asyncio.get_running_loop().run_in_executor(None, self._report, report, request.received_at)

    def _report(self, report: Any, ended: float) -> Reply:
        try:
            verdict = self.submit(report, ended)
        except ReportError as exc:
            return _refuse(exc.status, str(exc))
        return _reply(200, verdict.as_dict())

    def submit(self, report: Any, ended: float) -> Verdict:
        """Judge ``report`` (the client's outcome, as JSON), ending the run; :class:`ReportError`
        (with its status) where it cannot be read or the run is already over."""
        if not isinstance(report, Mapping):
            raise ReportError(f"POST {JUDGE_PATH}outcome takes a JSON object; see docs/tutorial.md")
        with self.lock:
            if self.verdict is not None:
                raise ReportError("the run is over: the outcome was already reported", 409)
            verdict = self.judge(report, self.requests(), ended)
            self.verdict = verdict
        self.done.set()
        return verdict

    def close(self) -> None:
        """Let go of what the session holds while the run lasts (nothing, unless a subclass says)."""

    def give_up(self) -> Verdict:
        """The verdict on a client that reported nothing in time: judged as one still running."""
        with self.lock:
            if self.verdict is None:
                self.verdict = self.judge(None, self.requests(), time.monotonic())
            self.done.set()
            return self.verdict

    def requests(self) -> List[RecordedRequest]:
        """The provider's requests, less the client's calls to the judge."""
        return [r for r in self._requests() if not r.path.startswith(JUDGE_PATH)]

    def _record(self, outcome: str, detail: str, checks: Sequence[str], ended: float) -> Verdict:
        took = ended - self.started if self.started is not None else 0.0
        suite = "loop" if self.kind == "loop" else "backend"
        if self.more_clients:
            noted = (
                f"{self.more_clients} more client(s) asked for this run's task and were refused (409): "
                "serve judges one client per run, and this verdict is the first client's"
            )
            detail = f"{detail}\n{noted}" if detail else noted
        record = CaseRecord(
            self.client_name,
            self.case_name,
            outcome,
            cut_detail(detail),
            max(0.0, took),
            suite,
            self.wire.name,
        )
        return Verdict(record, tuple(dict.fromkeys(checks)))


def _settled(reply: Reply) -> Awaitable[Reply]:
    """``reply`` as an awaitable, for a handler that answers some requests in a thread."""

    async def now() -> Reply:
        return reply

    return now()


def release(request: RecordedRequest) -> None:
    """Let go of a judge request's body once it has been read: the record keeps its line, not its body."""
    request.json = None
    request.body = b""


def _read_call(request: RecordedRequest, name: str) -> Tuple[ToolCall, Optional[str]]:
    """The call a ``POST /conformance/tools/<name>`` carries: ``{"call_id", "arguments"[, "key"]}``.

    ``arguments`` is the object the model's arguments parsed to, or, where they did not
    parse, the text itself: the toolset then refuses the call as a Python loop's
    ``ToolCall.unparsed_arguments`` is refused.
    """
    form = '{"call_id": ..., "arguments": {...}}'
    body = body_json(request, form)
    if not isinstance(body, Mapping):
        raise ReportError(f"POST {request.path} takes {form} as JSON")
    call_id = body.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise ReportError(f"POST {request.path}: call_id must be the model's call id, got {call_id!r}")
    arguments = body.get("arguments", {})
    key = body.get("key")
    if key is not None and not isinstance(key, str):
        raise ReportError(f"POST {request.path}: key must be a string (the idempotency key), got {key!r}")
    if isinstance(arguments, str):
        return ToolCall(call_id, name, {}, unparsed_arguments=arguments), key
    if not isinstance(arguments, Mapping):
        raise ReportError(
            f"POST {request.path}: arguments must be the parsed object, or the text where it did not "
            f"parse, got {arguments!r}"
        )
    return ToolCall(call_id, name, dict(arguments)), key


def tool_json(toolset: GateToolset, extra: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """The task's tools as JSON: the toolset's four, and the ``extra`` a stage offers beside them."""
    from .gate.tools import tool_specs

    specs = tuple(toolset.specs()) + (tool_specs(*extra) if extra else ())
    return [{"name": s.name, "description": s.description, "parameters": s.parameters} for s in specs]


def write_tools(tools: Sequence[Mapping[str, Any]]) -> List[str]:
    """The names of the task's write tools: those that change state, so they run at most once per
    idempotency key (the schema property that names it), whatever the call id.

    Beside the tools rather than in them: a client hands each tool object to its provider
    as it is, and a provider refuses a field it does not know.
    """
    from .gate.tools import IDEMPOTENCY_KEY

    return [t["name"] for t in tools if IDEMPOTENCY_KEY in dict(t["parameters"]).get("properties", {})]


class BackendSession(Session):
    """A backend scenario: the client is a backend, and reports what it returned or raised."""

    kind = "backend"

    def __init__(
        self,
        wire: Wire,
        scenario: str,
        mode: str,
        variant: Variant,
        toolset: GateToolset,
        read_timeout: Optional[float] = None,
        **kw: Any,
    ) -> None:
        super().__init__(wire, mode, toolset, **kw)
        self.scenario = scenario
        self.variant = variant
        #: The client's read timeout, which a latency scenario's silence is scaled from.
        self.read_timeout = read_timeout
        self.replies: List[Reply] = []
        self.refusals: List[str] = []
        #: Why the provider would never send this shape to the request that came.
        self.unasked: List[str] = []

    @property
    def case_name(self) -> str:
        return f"{self.scenario}/{self.mode}"

    def task(self) -> Dict[str, Any]:
        from ._multiturn import asks_thinking
        from .fixture import CONFORMANCE_FIXTURE as FX

        return {
            "kind": "backend",
            "wire": self.wire.name,
            "scenario": self.scenario,
            "mode": self.mode,
            "variant": self.variant.name,
            "stream": self.mode == "stream",
            "model": self.model,
            "system": FX.system,
            "question": FX.question,
            "tools": [
                {
                    "name": FX.tool_name,
                    "description": FX.tool_description,
                    "parameters": dict(FX.tool_parameters),
                }
            ],
            "max_tokens": FX.max_tokens,
            # Ask for reasoning (Anthropic's thinking, Gemini's includeThoughts, Ollama's think).
            "thinking": asks_thinking(self.wire, self.scenario, self.variant.name),
            "history": self.history(),
            "read_timeout": self.read_timeout,
            "judged": self.scenario not in NOT_JUDGED,
        }

    def history(self) -> List[Dict[str, Any]]:
        """The turns a ``tool-result`` request carries after the question, as ``Message`` fields."""
        if self.scenario != "tool-result":
            return []
        import dataclasses

        from ._multiturn import expected_history

        return [dataclasses.asdict(m) for m in expected_history(self.wire, self.variant.name)]

    def answer(self, request: RecordedRequest) -> Union[Reply, Awaitable[Reply]]:
        from .cases import scenario_reply

        wire = self.wire
        if not wire.is_generation(request):
            return wire.aux_reply(request)
        reason = wire.unasked(self.variant, request)
        if reason:
            self.unasked.append(reason)
            return _refuse(501, reason)
        if self.read_timeout is not None and self.scenario in LATENCY_SCENARIOS:
            from .provider import held
            from .wires._latency import latency_reply

            played = latency_reply(wire, self.scenario, request, self.variant.name, self.read_timeout)
            if played is None:
                return _refuse(501, f"{wire.name} has no text case to hold back")
            kept, hold = played
            self.replies.append(kept)
            return held(self.dress(kept), hold) if hold else kept
        reply = scenario_reply(wire, self.scenario, self.mode, request, self.variant.name, self.refusals)
        if reply is None:
            reason = f"{wire.name} has no {self.scenario} case"
            return _refuse(501, reason)
        # Kept as the wire made it: dressing changes only the request id and the date.
        self.replies.append(reply)
        return reply

    def judge(
        self, report: Optional[Mapping[str, Any]], requests: List[RecordedRequest], ended: float
    ) -> Verdict:
        from ._case import BackendCase, BackendConformanceTarget
        from ._checks import Seen, failure_message, run_checks

        outcome = self.outcome(report, ended)  # a report it cannot read is refused even here
        if self.scenario in NOT_JUDGED:
            return self._record("skip", NOT_JUDGED[self.scenario], (), ended)
        if self.unasked:
            return self._record("skip", self.unasked[0], (), ended)
        target = BackendConformanceTarget(
            CLIENT,
            self.wire,
            elsewhere,
            model=self.model,
            http2=self.http2,
            timeout=self.timeout,
            read_timeout=self.read_timeout,
        )
        case = BackendCase(target, self.scenario, self.mode)
        seen = Seen(case, outcome, requests, list(self.replies), self.variant, list(self.refusals))
        problems = run_checks(seen)
        if not problems:
            return self._record("pass", "", (), ended)
        return self._record("FAIL", failure_message([(seen, problems)]), [p.check for p in problems], ended)

    def outcome(self, report: Optional[Mapping[str, Any]], ended: float) -> Any:
        """What the Python driver would have observed, from the client's report (``None``: none came)."""
        from ._case import Outcome
        from ._outline import give_up

        if report is None:
            # As the driver marks a backend still running at the case's bound.
            hung = Outcome(started=self.opened if self.started is None else self.started)
            give_up(hung, ended)
            return hung
        error = report.get("error")
        # In stream mode, the chunks as yielded where the client reports them; else its totals as one.
        streamed = _chunks(report["chunks"]) if self.mode == "stream" and "chunks" in report else None
        if error is not None:
            failed = reported_error(error)
            chunks = [StreamChunk(str(report.get("content") or ""))] if self.mode == "stream" else []
            return Outcome(
                chunks=chunks if streamed is None else streamed, error=failed, error_at=ended, ended=True
            )
        if streamed is not None:
            return Outcome(chunks=streamed, ended=True)
        content = report.get("content", "")
        finish = _get(report, "finish_reason")
        calls = _tool_calls(report.get("tool_calls"))
        usage = _usage(report.get("usage"))
        if self.mode == "stream":
            return Outcome(chunks=[StreamChunk(content, calls, finish, usage)], ended=True)
        return Outcome(response=ChatResponse(content, finish, calls, usage), ended=True)


def elsewhere(url: str) -> Any:
    """The client's backend or loop: it runs in the client's own process, never here."""
    raise TypeError("serve judges a client in another process: there is no backend or loop to build here")
