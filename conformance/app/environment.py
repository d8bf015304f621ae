"""The application's own code, unchanged, against the fake provider: :class:`FakeProviderEnvironment`.

Strategy: the environment starts one fake provider on loopback and points every
official SDK at it through the variables each reads (``routes``), with test
credentials, restoring what was there when it closes; an application that builds
its client from the environment reaches it without a line changed. A test scripts
what the provider does next on a wire (:meth:`FakeProviderEnvironment.script`), runs
the application's function (:meth:`FakeProviderEnvironment.run`), and gets an
:class:`AppRun`: what the function returned or raised, the requests of the run, and
the problems the checks found in the provider's request log (``_checks``), under the
suites' check ids. Each finding is kept for the end-of-run summary
(:meth:`FakeProviderEnvironment.summary`), named once however often it came.
"""

from __future__ import annotations

import inspect
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, MutableMapping, Optional, Tuple

from .._checks import Problem
from ..errors import ProviderInputError
from ..provider.replies import JsonReply
from .routes import CLEARED, ROUTES, environment_for, route_of, wire_of
from .script import ProviderScript, script_for

if TYPE_CHECKING:
    from ..provider import FakeProvider, RecordedRequest, Reply
    from ._checks import AppSeen
    from ._driver import AppDriver

__all__ = ["AppRun", "Finding", "FakeProviderEnvironment"]


@dataclass(frozen=True)
class Finding:
    """One problem an application run showed, as the summary names it: once, with its count."""

    check: str
    script: str
    text: str
    count: int = 1

    def __str__(self) -> str:
        again = f" (seen {self.count} times)" if self.count > 1 else ""
        return f"{self.script}: {self.text} [{self.check}]{again}"


@dataclass
class AppRun:
    """One run of the application's function: what it did, what the provider saw, what was wrong."""

    #: What the function returned (``None`` where it raised or did not end).
    result: Any
    #: What it raised, or ``None``.
    error: Optional[BaseException]
    #: Whether it returned or raised within the run's bound.
    ended: bool
    #: Every request the provider got during the run, in arrival order.
    requests: List[RecordedRequest]
    #: What the checks found, per scripted wire, each with its check id.
    problems: List[Tuple[str, Problem]] = field(default_factory=list)
    #: The functions of earlier runs still running when this one began (given up on at
    #: their bound): what they sent meanwhile is among this run's requests.
    overlapped: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check found a problem."""
        return not self.problems

    @property
    def checks(self) -> List[str]:
        """The ids of the checks that found a problem, in report order, each once."""
        return list(dict.fromkeys(p.check for _, p in self.problems))

    def report(self) -> str:
        """The problems in words, each line ending with its check id, then the requests seen."""
        if not self.problems:
            return "no problems"
        lines = [
            f"{len(self.problems)} problem{'s' if len(self.problems) > 1 else ''} in the application run:"
        ]
        lines += [f"  - {label}: {problem}" for label, problem in self.problems]
        shown = ", ".join(str(r) for r in self.requests) or "none"
        lines.append(f"  requests seen: {shown}")
        if self.overlapped:
            lines.append(
                f"  note: {', '.join(self.overlapped)} of an earlier run was still running when this run "
                "began; what it sent since is counted here"
            )
        return "\n".join(lines)

    def raise_for_problems(self) -> None:
        """Raise :class:`AssertionError` with :meth:`report` where a check found a problem."""
        if self.problems:
            raise AssertionError(self.report())


class FakeProviderEnvironment:
    """A fake provider on loopback, and the environment that points every official SDK at it.

    Use it as a context manager (or :meth:`start` and :meth:`close`). While it is on,
    ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL``,
    ``CO_API_URL``, ``OLLAMA_HOST``, ``AZURE_OPENAI_ENDPOINT``,
    ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` and the rest of
    :data:`~conformance.app.SDK_ENVIRONMENT` name the provider, with test credentials;
    the variables of :data:`~conformance.app.CLEARED` are removed. ``timeout`` bounds each
    run in seconds. The provider serves HTTP/1.1 and h2c (prior knowledge or ``Upgrade``) on
    one port; ``http2=True`` serves h2c only, for a client that must be seen to speak it.
    ``environ`` is the mapping to set (``os.environ`` by default).
    """

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        http2: bool = False,
        environ: Optional[MutableMapping[str, str]] = None,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600:
            raise ProviderInputError(
                f"timeout is seconds per run, more than 0 and at most 600, got {timeout!r}"
            )
        self.timeout = float(timeout)
        self.http2 = http2
        self.environ: MutableMapping[str, str] = os.environ if environ is None else environ
        self.provider: Optional[FakeProvider] = None
        #: The variables this environment set, by name.
        self.variables: Dict[str, str] = {}
        self._saved: Dict[str, Optional[str]] = {}
        self._scripts: Dict[str, ProviderScript] = {}
        self._lock = threading.Lock()
        # Per run: each scripted wire's generation calls so far and the replies sent to them.
        self._counts: Dict[str, int] = {}
        self._replies: Dict[str, List[Reply]] = {}
        self._cancel: Any = None
        self._drivers: List[AppDriver] = []
        self._findings: Dict[Tuple[str, str], Finding] = {}

    # -- on and off ---------------------------------------------------------------------------

    def start(self) -> FakeProviderEnvironment:
        """Start the provider and set the environment; returns itself."""
        if self.provider is not None:
            raise ProviderInputError("this environment is already on: start it once, or use a new one")
        from ..provider import start_fake_provider

        self.provider = start_fake_provider(self.http2)
        self.provider.reply(self._handle)
        self.variables = environment_for(self.provider.url)
        for name in (*self.variables, *CLEARED):
            self._saved[name] = self.environ.get(name)
        for name in CLEARED:
            self.environ.pop(name, None)
        self.environ.update(self.variables)
        return self

    def close(self) -> None:
        """Restore the environment as it was, close the provider, and reclaim what runs left."""
        for name, value in self._saved.items():
            if value is None:
                self.environ.pop(name, None)
            else:
                self.environ[name] = value
        self._saved = {}
        provider, self.provider = self.provider, None
        if provider is not None:
            provider.close()
        drivers, self._drivers = self._drivers, []
        for driver in drivers:
            driver.reclaim()

    def __enter__(self) -> FakeProviderEnvironment:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The provider's base URL (``http://127.0.0.1:PORT``); each SDK's path is under it."""
        return self._provider().url

    def _provider(self) -> FakeProvider:
        if self.provider is None:
            raise ProviderInputError("the environment is not on: use it in a with block, or call start()")
        return self.provider

    # -- the script ----------------------------------------------------------------------------

    def script(self, wire: Any, what: str = "text", **options: Any) -> ProviderScript:
        """Say what the provider answers ``wire``'s generation calls with from the next run on.

        ``wire`` is a shipped wire's name (``"openai-chat"``) or a
        :class:`~conformance.wires.Wire`; ``what`` and ``options`` are those of
        :class:`~conformance.app.ProviderScript`. A wire not scripted answers with its
        plain reply (the ``text`` case's) and is not judged.
        """
        found = wire if isinstance(wire, ProviderScript) else script_for(wire, what, **options)
        if not any(found.wire.name in route.wires for route in ROUTES):
            raise ProviderInputError(
                f"{found.wire.name} has no route in the environment: script one of the shipped wires"
            )
        with self._lock:
            self._scripts[found.wire.name] = found
        return found

    def reset(self) -> None:
        """Forget every script: each wire answers with its plain reply again."""
        with self._lock:
            self._scripts.clear()

    def _handle(self, request: RecordedRequest) -> Any:
        wire = wire_of(request)
        if wire is None:
            route = route_of(request.path)
            if route is not None:
                from ..wires import WIRES

                return WIRES[route.wires[0]].aux_reply(request)
            prefixes = ", ".join(r.prefix for r in ROUTES)
            return JsonReply(
                {
                    "error": {
                        "message": (
                            f"no SDK's route for {request.method} {request.path}: each SDK reaches the "
                            f"fake provider under its own base path ({prefixes}), which the environment "
                            "variables name; build the client from the environment"
                        ),
                        "type": "not_found",
                    }
                },
                status=404,
            )
        with self._lock:
            script = self._scripts.get(wire.name)
            if script is None:
                script = ProviderScript(wire)
            index = self._counts.get(wire.name, 0)
            self._counts[wire.name] = index + 1
            cancel = self._cancel if script.kind == "cancel" else None
        answer = script.answer(index, request)
        if cancel is not None:
            cancel.note(request)
        if inspect.isawaitable(answer):
            return self._sent_later(wire.name, answer)
        self._sent(wire.name, answer)
        return answer

    def _sent(self, wire: str, reply: Any) -> None:
        with self._lock:
            self._replies.setdefault(wire, []).append(reply)

    async def _sent_later(self, wire: str, answer: Any) -> Reply:
        reply: Reply = await answer
        self._sent(wire, reply)
        return reply

    # -- a run -----------------------------------------------------------------------------------

    def run(
        self, app: Callable[..., Any], *args: Any, timeout: Optional[float] = None, **kwargs: Any
    ) -> AppRun:
        """Call ``app(*args, **kwargs)`` within the bound and judge what the provider saw.

        ``app`` is any callable or coroutine function: an SDK call, the application's own
        helper. It is given up on after ``timeout`` seconds (the environment's by
        default); what it does later is not counted. The run's problems are kept for
        :meth:`summary` and returned in the :class:`AppRun`; nothing is raised for them
        (:meth:`AppRun.raise_for_problems` does).
        """
        import functools

        from ._driver import AppDriver, CancelWatch

        provider = self._provider()
        if not callable(app):
            raise ProviderInputError(f"run() takes the application's function to call, got {app!r}")
        bound = self.timeout if timeout is None else timeout
        with self._lock:
            scripts = dict(self._scripts)
            self._counts = {}
            self._replies = {}
            cancels = [s for s in scripts.values() if s.kind == "cancel"]
            self._cancel = CancelWatch() if cancels else None
            cancel = self._cancel
        for script in scripts.values():
            if script.kind == "stall" and script.read_timeout + 1.0 > bound:
                raise ProviderInputError(
                    f"{script.label()}: the run's timeout ({bound:g} s) must leave the read timeout "
                    f"({script.read_timeout:g} s) a second more to fire; raise timeout= or lower read_timeout"
                )
        # A sync function given up on keeps its thread: the run's task ended, the thread did not.
        overlapped = [
            d.name for d in self._drivers if not d.finished.is_set() or any(t.is_alive() for t in d.threads)
        ]
        start = len(provider.requests)
        call = functools.partial(app, *args, **kwargs) if args or kwargs else app
        if cancel is not None and (args or kwargs):
            call = _async_partial(app, args, kwargs)
        name = getattr(app, "__qualname__", None) or repr(app)
        driver = AppDriver(name, provider, call, timeout=bound, cancel=cancel)
        driver.run()
        outcome = driver.outcome
        ended = time.monotonic()
        if cancel is not None:
            cancel.came.set()  # the run is over: nothing waits for the call any more
        self._drivers.append(driver)
        requests = provider.requests[start:]
        with self._lock:
            replies = {name: list(sent) for name, sent in self._replies.items()}
            self._cancel = None
        run = AppRun(outcome.response, outcome.error, outcome.ended, requests, overlapped=overlapped)
        from ._checks import run_app_checks

        for script in scripts.values():
            if script.kind == "stall":
                _await_stalled_closes(script, requests)
            seen = self._seen(script, driver, requests, replies.get(script.wire.name, []), ended)
            for problem in run_app_checks(seen):
                run.problems.append((script.label(), problem))
                self._found(script.label(), problem)
        return run

    def _seen(
        self,
        script: ProviderScript,
        driver: AppDriver,
        requests: List[RecordedRequest],
        replies: List[Reply],
        ended: float,
    ) -> AppSeen:
        from .._case import BackendCase, BackendConformanceTarget
        from ._checks import AppSeen

        wire = script.wire
        route = next(r for r in ROUTES if wire.name in r.wires)
        own = [r for r in requests if route_of(r.path) is route]
        generations = [r for r in own if wire.is_generation(r)]
        mode = "stream" if generations and wire.wants_stream(generations[0]) else "chat"
        target = BackendConformanceTarget(
            f"application run on {wire.name}", wire, _no_backend, retries=True, timeout=driver.timeout
        )
        scenario = "cancel" if script.kind == "cancel" else script.scenario
        case = BackendCase(target, scenario, mode)
        outcome = driver.outcome
        if mode == "stream" and isinstance(outcome.response, str):
            from ..contract import StreamChunk

            # What the application hands its user is its stream's text, whole.
            outcome.chunks = [StreamChunk(content=outcome.response)]
        variant = wire.variants(script.scenario, mode)[0] if script.kind in ("relent", "permanent") else None
        if variant is not None and script.variant:
            variant = wire.variant(script.scenario, mode, script.variant)
        seen = AppSeen(case, outcome, own, replies, relent=script.relent, script=script, run_ended=ended)
        if variant is not None:
            seen.variant = variant
        if seen.relented:
            from ..wires._base import Variant

            seen.variant = Variant(seen.variant.name)
        return seen

    def _found(self, label: str, problem: Problem) -> None:
        # Named once per check and script: the times in the words differ from run to run.
        key = (problem.check, label)
        with self._lock:
            known = self._findings.get(key)
            text = problem.text if known is None else known.text
            self._findings[key] = Finding(problem.check, label, text, known.count + 1 if known else 1)

    # -- the summary -------------------------------------------------------------------------------

    @property
    def findings(self) -> List[Finding]:
        """Every problem the runs showed, each once, in the order first seen."""
        with self._lock:
            return list(self._findings.values())

    def summary(self) -> str:
        """The findings in words, one line each; empty where there were none."""
        return summary_of(self.findings)


def summary_of(findings: List[Finding]) -> str:
    """One line per finding, under a heading; empty where there are none."""
    if not findings:
        return ""
    lines = [f"conformance app mode: {len(findings)} finding{'s' if len(findings) > 1 else ''}"]
    lines += [f"  {finding}" for finding in findings]
    return "\n".join(lines)


def _await_stalled_closes(script: ProviderScript, requests: List[RecordedRequest]) -> None:
    """Give each stalled request's close its bound before it is judged: an application that
    raised its read timeout may close the connection a moment after it returned."""
    from ._checks import READ_TIMEOUT_SLACK, stalled_at

    bound = script.read_timeout + READ_TIMEOUT_SLACK
    stalled = [r for r in requests if script.wire.is_generation(r) and route_of(r.path) is not None]
    for request in stalled[: script.relent]:
        left = stalled_at(request) + bound - time.monotonic()
        if left > 0 and not request.closed:
            request.wait_closed(left)


def _no_backend(url: str) -> Any:
    raise ProviderInputError(
        "an application run builds no backend: the application's own function is what runs"
    )


def _async_partial(app: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    async def call() -> Any:
        return await app(*args, **kwargs)

    return call
