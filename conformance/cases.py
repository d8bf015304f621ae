"""Conformance cases: one per scenario and mode, for any test runner.

Strategy: each case starts a fresh fake provider, scripts it with the wire, and
drives the backend in a worker thread that runs its own event loop. That one
driver serves sync and async backends alike (a sync call simply blocks the
worker's loop, which serves nobody else), keeps the caller's thread free to
enforce the time bound, and leaves any event loop of the caller's untouched.
What the backend returned or raised is gathered into an :class:`Outcome`; the
checks then compare it, and every request the provider saw, with the contract,
and report every problem at once in one :class:`AssertionError`.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import threading
import time
import unittest
from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional, Tuple

from .contract import ERROR_KINDS, AbortController, ChatRequest
from .errors import TargetDefinitionError
from .fixture import CONFORMANCE_FIXTURE as FX
from .fixture import conformance_request
from .provider import JsonReply, RecordedRequest, Reply, start_fake_provider
from .scenarios import MODES, SCENARIOS, Scenario
from .wires._base import Wire

__all__ = [
    "BackendConformanceTarget",
    "ConformanceAbort",
    "ConformanceCase",
    "backend_conformance_cases",
]

#: How long after the provider received the call a case aborts or cancels it, so
#: that a streamed reply is under way (the first chunks are on the wire).
ABORT_DELAY = 0.02
#: How soon after the abort the backend must raise the reason.
ABORT_RAISE_WITHIN = 0.5
#: How soon after the abort the provider must see the connection (h2: stream) closed.
ABORT_CLOSE_WITHIN = 1.0

ChatHook = Callable[[Any, ChatRequest], Any]


class ConformanceAbort(Exception):
    """The reason the abort case aborts with; the backend must raise this very object."""


def _check_skip_keys(skip: Mapping[str, str], where: str) -> None:
    known = [*SCENARIOS, *(f"{s}/{m}" for s, row in SCENARIOS.items() for m in row.modes)]
    for key, reason in skip.items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(SCENARIOS)}"
            raise TargetDefinitionError(f"{where}: unknown scenario {key!r} in skip; {hint}")
        if not isinstance(reason, str) or not reason.strip():
            raise TargetDefinitionError(
                f"{where}: skip[{key!r}] needs a reason, the sentence a reader sees beside the "
                f"skipped case, got {reason!r}"
            )


@dataclass(frozen=True)
class BackendConformanceTarget:
    """A backend to hold to the contract, and how to reach it.

    ``create_backend(url)`` builds a fresh backend for each case, pointed at the
    fake provider's base URL. ``skip`` maps a scenario (``"content-filter"``) or a
    scenario and mode (``"abort/stream"``) to the reason it is skipped. ``chat``
    and ``stream`` adapt a backend whose surface differs from ``backend.chat(request)``
    and ``backend.chat_stream(request)``. ``timeout`` bounds each case in seconds.
    """

    name: str
    wire: Wire
    create_backend: Callable[[str], Any]
    model: str = "conformance-model"
    headers: Mapping[str, str] = field(default_factory=dict)
    skip: Mapping[str, str] = field(default_factory=dict)
    http2: bool = False
    chat: Optional[ChatHook] = None
    stream: Optional[ChatHook] = None
    timeout: float = 5.0

    def __post_init__(self) -> None:
        if not isinstance(self.wire, Wire):
            raise TargetDefinitionError(
                f"target {self.name!r}: wire must be a Wire such as openai_chat_wire, got {self.wire!r}"
            )
        if not callable(self.create_backend):
            raise TargetDefinitionError(
                f"target {self.name!r}: create_backend must be a callable taking the provider "
                f"URL, got {self.create_backend!r}"
            )
        _check_skip_keys(self.skip, f"target {self.name!r}")
        if self.timeout <= 0:
            raise TargetDefinitionError(f"target {self.name!r}: timeout must be positive")

    def skip_reason(self, scenario: str, mode: str) -> Optional[str]:
        """Why the case is skipped, or ``None``: the target's reason, then the wire's."""
        return (
            self.skip.get(f"{scenario}/{mode}")
            or self.skip.get(scenario)
            or self.wire.absent(scenario)
        )


@dataclass
class Outcome:
    """What a backend did in one case."""

    response: Any = None
    chunks: List[Any] = field(default_factory=list)
    error: Optional[BaseException] = None
    error_at: Optional[float] = None
    abort_at: Optional[float] = None
    abort_reason: Optional[BaseException] = None
    skipped: Optional[str] = None
    #: The backend returned or raised (as opposed to still running at the bound).
    ended: bool = False
    hung: bool = False
    close_error: Optional[BaseException] = None
    #: Seconds from the abort (or cancellation) until the provider saw the close.
    closed_after: Optional[float] = None


@dataclass(frozen=True)
class ConformanceCase:
    """One scenario in one mode for one target; :meth:`run` raises on a breach."""

    target: BackendConformanceTarget
    scenario: str
    mode: str

    @property
    def name(self) -> str:
        """``tool-call/stream``."""
        return f"{self.scenario}/{self.mode}"

    @property
    def row(self) -> Scenario:
        """The scenario's row of :data:`~conformance.scenarios.SCENARIOS`."""
        return SCENARIOS[self.scenario]

    @property
    def skip(self) -> Optional[str]:
        """Why this case is skipped, or ``None``."""
        return self.target.skip_reason(self.scenario, self.mode)

    def __repr__(self) -> str:
        return f"<ConformanceCase {self.target.name} {self.target.wire.name} {self.name}>"

    def run(self) -> None:
        """Run the case: return quietly, raise :class:`AssertionError`, or skip."""
        if self.skip:
            raise unittest.SkipTest(self.skip)
        target = self.target
        wire = target.wire
        with start_fake_provider(http2=target.http2) as provider:
            provider.reply(self._handler)
            outcome = _Driver(self, provider).run()
            requests = provider.requests
            if outcome.abort_at is not None:
                _await_close(outcome, [r for r in requests if wire.is_generation(r)])
        if outcome.skipped:
            raise unittest.SkipTest(outcome.skipped)
        problems = _check_outcome(self, outcome)
        problems += _check_requests(self, requests)
        if problems:
            raise AssertionError(_failure_message(self, problems, requests, wire))

    def _handler(self, request: RecordedRequest) -> Reply:
        wire = self.target.wire
        if not wire.is_generation(request):
            return wire.aux_reply(request)
        reply = wire.reply(self.scenario, self.mode, request)
        if reply is None:
            return JsonReply(
                {"error": {"message": f"{wire.name} has no {self.scenario} scenario"}}, status=501
            )
        return reply


def _await_close(outcome: Outcome, generations: List[RecordedRequest]) -> None:
    # Wait here, before the provider closes (which closes every connection itself).
    assert outcome.abort_at is not None
    if not generations:
        return
    request = generations[-1]
    request.wait_closed(max(0.0, outcome.abort_at + ABORT_CLOSE_WITHIN - time.monotonic()))
    if request.closed_at is not None and request.closed_at - outcome.abort_at <= ABORT_CLOSE_WITHIN:
        outcome.closed_after = max(0.0, request.closed_at - outcome.abort_at)


def backend_conformance_cases(target: BackendConformanceTarget) -> List[ConformanceCase]:
    """Every case for ``target``: each scenario in each of its modes, in table order."""
    return [
        ConformanceCase(target, name, mode)
        for name, row in SCENARIOS.items()
        for mode in MODES
        if mode in row.modes
    ]


# -- driving the backend ------------------------------------------------------------------


def _default_chat(backend: Any, request: ChatRequest) -> Any:
    return backend.chat(request)


def _default_stream(backend: Any, request: ChatRequest) -> Any:
    return backend.chat_stream(request)


async def _in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """Call a sync function in a daemon thread of its own and await its result.

    Sync backends run off the loop, so one that calls ``asyncio.run`` inside (a
    common sync wrapper) still works, and one that hangs holds only its own
    daemon thread.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: Optional[BaseException]) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        result, error = None, None
        try:
            result = function(*args)
        except BaseException as exc:  # noqa: BLE001 - handed over to the awaiting side
            error = exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the case gave up on this backend and its loop is gone
            pass

    threading.Thread(target=work, name="conformance sync backend", daemon=True).start()
    return await future


def _is_async(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)


class _Driver:
    """Runs one case's backend in a worker thread with a loop of its own."""

    def __init__(self, case: ConformanceCase, provider: Any) -> None:
        self.case = case
        self.provider = provider
        self.outcome = Outcome()
        self.controller = AbortController()
        self.done = threading.Event()
        self.gave_up = False
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.task: Optional[asyncio.Task[None]] = None

    def run(self) -> Outcome:
        worker = threading.Thread(target=self._work, name=f"conformance {self.case.name}", daemon=True)
        aborter: Optional[threading.Thread] = None
        if self.case.scenario == "abort":
            aborter = threading.Thread(target=self._abort, daemon=True)
        worker.start()
        if aborter is not None:
            aborter.start()
        worker.join(self.case.target.timeout)
        if worker.is_alive() or not self.outcome.ended:
            # Past the bound, whatever the backend does next is not its answer.
            self.gave_up = True
            self.outcome.hung = True
            self._cancel_worker()
            worker.join(1.0)
        self.done.set()
        if aborter is not None:
            aborter.join(self.case.target.timeout)
        return self.outcome

    def _cancel_worker(self) -> None:
        loop, task = self.loop, self.task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop finished in the meantime
                pass

    def _abort(self) -> None:
        if self._await_generation_sync() is None:
            return
        time.sleep(ABORT_DELAY)
        reason = ConformanceAbort(f"aborted by the conformance case {self.case.name}")
        self.outcome.abort_reason = reason
        self.outcome.abort_at = time.monotonic()
        self.controller.abort(reason)

    def _await_generation_sync(self) -> Optional[RecordedRequest]:
        # Short waits, so the thread stops as soon as the backend is done without a call.
        deadline = time.monotonic() + self.case.target.timeout
        while not self.done.is_set() and time.monotonic() < deadline:
            try:
                request: RecordedRequest = self.provider.next_request(0.05)
            except TimeoutError:
                continue
            if self.case.target.wire.is_generation(request):
                return request
        return None

    def _work(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - a broken backend must not kill the thread
            self._ended(exc)
        finally:
            self.done.set()

    def _ended(self, error: Optional[BaseException]) -> None:
        if not self.outcome.ended and not self.gave_up:
            self.outcome.ended = True
            self.outcome.error = error
            self.outcome.error_at = time.monotonic() if error is not None else None

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        # Sync backends block their own threads, not this loop; stay quiet under -X dev.
        self.loop.slow_callback_duration = 1.0
        self.task = asyncio.current_task()
        target = self.case.target
        backend = None
        try:
            backend = target.create_backend(self.provider.url)
            if inspect.isawaitable(backend):
                backend = await backend
            request = conformance_request(target.model, signal=self.controller.signal)
            if self.case.scenario == "cancel":
                await self._cancel(backend, request)
            else:
                await self._call(backend, request)
                self._ended(None)
        except BaseException as exc:  # noqa: BLE001 - whatever the backend raised is the outcome
            self._ended(exc)
        finally:
            if backend is not None:
                await self._close(backend)

    def _hook(self, backend: Any) -> Tuple[Callable[[Any, ChatRequest], Any], Any]:
        """The function to call for this mode, and what tells whether it is async."""
        target = self.case.target
        if self.case.mode == "chat":
            if target.chat is not None:
                return target.chat, target.chat
            return _default_chat, getattr(backend, "chat", None)
        if target.stream is not None:
            return target.stream, target.stream
        return _default_stream, getattr(backend, "chat_stream", None)

    async def _start(self, backend: Any, request: ChatRequest) -> Any:
        hook, probe = self._hook(backend)
        if _is_async(probe):
            return hook(backend, request)
        return await _in_thread(hook, backend, request)

    async def _call(self, backend: Any, request: ChatRequest) -> None:
        result = await self._start(backend, request)
        if self.case.mode == "chat":
            if inspect.isawaitable(result):
                result = await result
            self.outcome.response = result
            return
        if inspect.isawaitable(result) and not hasattr(result, "__aiter__"):
            result = await result
        if hasattr(result, "__aiter__"):
            async for chunk in result:
                self.outcome.chunks.append(chunk)
        else:
            await _in_thread(self._drain, result)

    def _drain(self, iterable: Any) -> None:
        # Chunk by chunk, so a stream that hangs keeps what it yielded before.
        for chunk in iterable:
            self.outcome.chunks.append(chunk)

    async def _cancel(self, backend: Any, request: ChatRequest) -> None:
        _, probe = self._hook(backend)
        if not _is_async(probe):
            what = (
                "chat is not a coroutine function"
                if self.case.mode == "chat"
                else ("chat_stream is not an async generator function")
            )
            self.outcome.skipped = f"cancel applies to async backends only: {what}"
            self._ended(None)
            return
        result = await self._start(backend, request)
        if self.case.mode == "chat":
            work: asyncio.Future[Any] = asyncio.ensure_future(result)
        else:

            async def consume() -> None:
                async for chunk in result:
                    self.outcome.chunks.append(chunk)

            work = asyncio.ensure_future(consume())
        waiting = asyncio.ensure_future(self._await_generation_async())
        await asyncio.wait({work, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            await asyncio.sleep(ABORT_DELAY)
            self.outcome.abort_at = time.monotonic()
            work.cancel()
        waiting.cancel()
        try:
            await work
        except BaseException as exc:  # noqa: BLE001 - CancelledError or what wrapped it
            self._ended(exc)
        else:
            self._ended(None)

    async def _await_generation_async(self) -> Optional[RecordedRequest]:
        deadline = time.monotonic() + self.case.target.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                request: RecordedRequest = await self.provider.next_request_async(left)
            except TimeoutError:
                return None
            if self.case.target.wire.is_generation(request):
                return request

    async def _close(self, backend: Any) -> None:
        try:
            aclose = getattr(backend, "aclose", None)
            close = getattr(backend, "close", None)
            if callable(aclose):
                await aclose()
            elif callable(close):
                result = close()
                if inspect.isawaitable(result):
                    await result
        except BaseException as exc:  # noqa: BLE001 - reported as a problem, not raised
            self.outcome.close_error = exc


# -- checks -------------------------------------------------------------------------------


def _value(reason: Any) -> Any:
    """A finish reason as its string, whether a str, a str enum or another enum."""
    inner = getattr(reason, "value", reason)
    return inner if isinstance(inner, str) else reason


def _describe(exc: BaseException) -> str:
    fields = []
    for name in ("kind", "code", "retryable", "retry_after", "status"):
        if hasattr(exc, name):
            fields.append(f"{name}={getattr(exc, name)!r}")
    extra = f" [{', '.join(fields)}]" if fields else ""
    return f"{type(exc).__name__}({str(exc)!r}){extra}"


def _usage_tuple(usage: Any) -> Optional[Tuple[Any, Any, Any]]:
    if usage is None:
        return None
    return (
        getattr(usage, "input_tokens", None),
        getattr(usage, "output_tokens", None),
        getattr(usage, "total_tokens", None),
    )


def _collect(case: ConformanceCase, outcome: Outcome) -> Tuple[Any, Any, List[Any], Any]:
    """Content, finish reason, tool calls and usage, from a response or from chunks."""
    if case.mode == "chat":
        r = outcome.response
        return (
            getattr(r, "content", None),
            _value(getattr(r, "finish_reason", None)),
            list(getattr(r, "tool_calls", None) or ()),
            getattr(r, "usage", None),
        )
    content: List[Any] = []
    calls: List[Any] = []
    finish: Any = None
    usage: Any = None
    for chunk in outcome.chunks:
        text = getattr(chunk, "content", "")
        if text:
            content.append(text)
        calls.extend(getattr(chunk, "tool_calls", None) or ())
        if getattr(chunk, "finish_reason", None) is not None:
            finish = _value(chunk.finish_reason)
        if getattr(chunk, "usage", None) is not None:
            usage = chunk.usage
    return "".join(content) if all(isinstance(c, str) for c in content) else content, finish, calls, usage


def _check_tool_call(case: ConformanceCase, calls: List[Any]) -> List[str]:
    expected_id = case.target.wire.tool_call_id
    if len(calls) != 1:
        return [f"expected one complete get_weather call, got {len(calls)}: {calls!r}"]
    call = calls[0]
    problems = []
    name = getattr(call, "name", None)
    if name != FX.tool_name:
        problems.append(f"expected the call's name {FX.tool_name!r}, got {name!r}")
    arguments = getattr(call, "arguments", None)
    if not isinstance(arguments, Mapping) or dict(arguments) != dict(FX.tool_arguments):
        problems.append(
            f"expected the call's arguments parsed to {dict(FX.tool_arguments)!r}, got {arguments!r}"
        )
    call_id = getattr(call, "id", None)
    if expected_id is not None and call_id != expected_id:
        problems.append(f"expected the call's id {expected_id!r} (as the provider sent it), got {call_id!r}")
    elif expected_id is None and not (isinstance(call_id, str) and call_id):
        problems.append(
            f"expected a non-empty call id (the provider sent none: make one up), got {call_id!r}"
        )
    return problems


def _check_outcome(case: ConformanceCase, outcome: Outcome) -> List[str]:
    scenario = case.scenario
    problems: List[str] = []
    if outcome.close_error is not None:
        problems.append(f"closing the backend raised {_describe(outcome.close_error)}")
    if outcome.hung:
        what = "the abort reason" if scenario == "abort" else "the backend to return or raise"
        return (
            problems
            + [
                f"expected {what}, but it was still running when the case gave up after "
                f"{case.target.timeout} s ({len(outcome.chunks)} chunks yielded so far)"
            ]
            + (_check_closed(outcome) if scenario == "abort" else [])
        )
    error = outcome.error
    if scenario == "abort":
        return problems + _check_abort(case, outcome) + _check_closed(outcome)
    if scenario == "cancel":
        return problems + _check_cancel(case, outcome) + _check_closed(outcome)
    row = SCENARIOS[scenario]
    if row.error_kind is not None:
        return problems + _check_error(case, outcome, row.error_kind)
    if scenario == "corrupt-frame":
        if error is not None:
            return problems
        content = _collect(case, outcome)[0]
        return problems + [
            "expected an error once the damaged frame arrived, got a normal end after the text "
            f"{content!r} (the frame's checksum was not checked)"
        ]
    if error is not None:
        return problems + [f"expected a reply, got {_describe(error)}"]
    if case.mode == "chat" and outcome.response is None:
        return problems + ["expected a ChatResponse, got None"]
    content, finish, calls, usage = _collect(case, outcome)
    if scenario == "text":
        if content != FX.text:
            problems.append(f"expected the text {FX.text!r}, got {content!r}")
        if finish != "stop":
            problems.append(f'expected finish_reason "stop", got {finish!r}')
        if calls:
            problems.append(f"expected no tool calls, got {calls!r}")
        if _usage_tuple(usage) != _usage_tuple(FX.usage):
            problems.append(f"expected usage {FX.usage!r} as the provider reported it, got {usage!r}")
    elif scenario in ("tool-call", "tool-call-with-stop"):
        problems += _check_tool_call(case, calls)
        if finish != "tool_calls":
            said = " (the provider said stop)" if scenario == "tool-call-with-stop" else ""
            problems.append(f'expected finish_reason "tool_calls"{said}, got {finish!r}')
    elif scenario == "truncated-tool-call":
        if finish != "length":
            problems.append(f'expected finish_reason "length", got {finish!r}')
        if calls:
            problems.append(f"expected the cut-off call to be dropped, got {calls!r}")
    elif scenario == "content-filter":
        if finish not in ("content_filter", "refusal"):
            problems.append(f'expected finish_reason "content_filter" or "refusal", got {finish!r}')
        if calls:
            problems.append(f"expected no tool calls, got {calls!r}")
    return problems


def _check_error(case: ConformanceCase, outcome: Outcome, kind: str) -> List[str]:
    expected = ERROR_KINDS[kind]
    error = outcome.error
    problems: List[str] = []
    if case.scenario == "stream-error":
        content, _, _, _ = _collect(case, outcome)
        if content != FX.partial_text:
            problems.append(
                f"expected the text streamed before the failure, {FX.partial_text!r}, to be "
                f"yielded first, got {content!r}"
            )
    if error is None:
        return problems + [
            f"expected an error of kind {kind!r}, got a reply that ended normally "
            f"({len(outcome.chunks)} chunks)"
            if case.mode == "stream"
            else f"expected an error of kind {kind!r}, got the reply {outcome.response!r}"
        ]
    got = {name: getattr(error, name, "<missing>") for name in ("kind", "code", "retryable")}
    want = {"kind": expected.kind, "code": expected.code, "retryable": expected.retryable}
    if got != want:
        problems.append(f"expected an error with {want}, got {_describe(error)}")
    if kind == "rate_limit":
        retry_after = getattr(error, "retry_after", None)
        wanted = case.target.wire.rate_limit_retry_after
        if wanted is None and retry_after is not None:
            problems.append(f"expected retry_after None (the provider sent no delay), got {retry_after!r}")
        elif wanted is not None and (
            not isinstance(retry_after, (int, float)) or abs(float(retry_after) - wanted) > 1e-6
        ):
            problems.append(f"expected retry_after {wanted!r} seconds from the provider, got {retry_after!r}")
    return problems


def _check_abort(case: ConformanceCase, outcome: Outcome) -> List[str]:
    reason, error = outcome.abort_reason, outcome.error
    if reason is None or outcome.abort_at is None:
        got = f"it ended first with {_describe(error)}" if error is not None else "none came"
        return [
            "expected the backend to send its request and wait for the answer, so the case could "
            f"abort it; {got}"
        ]
    if error is None:
        return [f"expected the abort reason {reason!r} to be raised, got a normal end"]
    if error is not reason:
        return [f"expected the abort reason itself, {reason!r}, to be raised, got {_describe(error)}"]
    problems = []
    assert outcome.error_at is not None
    took = outcome.error_at - outcome.abort_at
    if took > ABORT_RAISE_WITHIN:
        problems.append(f"expected the abort reason within {ABORT_RAISE_WITHIN} s, got it after {took:.3f} s")
    return problems


def _check_cancel(case: ConformanceCase, outcome: Outcome) -> List[str]:
    error = outcome.error
    if outcome.abort_at is None:
        got = f"it ended first with {_describe(error)}" if error is not None else "it ended first, normally"
        return [
            "expected the backend to send its request and wait for the answer, so the case could "
            f"cancel it; {got}"
        ]
    if error is None:
        return ["expected CancelledError after the task was cancelled, got a normal end"]
    if not isinstance(error, asyncio.CancelledError):
        return [f"expected CancelledError to propagate unchanged, got {_describe(error)}"]
    return []


def _check_requests(case: ConformanceCase, requests: List[RecordedRequest]) -> List[str]:
    target = case.target
    wire = target.wire
    problems: List[str] = []
    for request in requests:
        for name, value in target.headers.items():
            got = request.headers.get(name.lower())
            if got != value:
                problems.append(
                    f"expected header {name}: {value} on {request.method} {request.path}, got "
                    f"{'none' if got is None else repr(got)}"
                )
    generations = [r for r in requests if wire.is_generation(r)]
    if not generations:
        seen = ", ".join(str(r) for r in requests) or "no request at all"
        return problems + [f"expected the backend to send one {wire.title} request, got {seen}"]
    if len(generations) > 1:
        problems.append(
            f"expected exactly one {wire.title} request, got {len(generations)} (the backend "
            "retried: turn retries off in create_backend so each answer surfaces as it came)"
        )
    problems += [f"request: {p}" for p in wire.check_request(generations[0], target.model)]
    return problems


def _check_closed(outcome: Outcome) -> List[str]:
    if outcome.abort_at is None:
        return []
    if outcome.closed_after is None:
        return [
            f"expected the connection closed within {ABORT_CLOSE_WITHIN} s of the "
            f"{'abort' if outcome.abort_reason is not None else 'cancellation'}, but the "
            "provider saw it open (the provider goes on generating and billing)"
        ]
    return []


def _failure_message(
    case: ConformanceCase, problems: List[str], requests: List[RecordedRequest], wire: Wire
) -> str:
    row = case.row
    lines = [f"{wire.name}/{case.mode} {case.scenario}: the backend must {row.must}"]
    lines += [f"  - {p}" for p in problems]
    lines.append(f"  hint: {row.hint}")
    seen = ", ".join(str(r) for r in requests) or "none"
    lines.append(f"  requests seen: {seen}")
    return "\n".join(lines)
