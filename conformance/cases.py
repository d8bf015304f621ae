"""Conformance cases: one per scenario and mode, for any test runner.

Strategy: a case starts a fresh fake provider, scripts it with the wire, hands the
backend to the driver (``_driver``: a worker thread with a loop of its own, so sync
and async backends are driven alike and a hung one is given up on at the bound),
and passes what came back, and every request the provider saw, to the checks
(``_checks``), which report every problem at once in one :class:`AssertionError`.
The provider is closed whatever happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional

from ._bounds import ABORT_CLOSE_WITHIN, ABORT_DELAY, ABORT_RAISE_WITHIN, ConformanceAbort
from .contract import ChatRequest
from .errors import TargetDefinitionError
from .provider import JsonReply, RecordedRequest, Reply
from .scenarios import MODES, SCENARIOS, Scenario
from .wires._base import Wire

__all__ = [
    "ABORT_CLOSE_WITHIN",
    "ABORT_DELAY",
    "ABORT_RAISE_WITHIN",
    "BackendConformanceTarget",
    "ConformanceAbort",
    "ConformanceCase",
    "backend_conformance_cases",
]
ChatHook = Callable[[Any, ChatRequest], Any]


def _check_skip_keys(skip: Mapping[str, str], where: str) -> None:
    known = [*SCENARIOS, *(f"{s}/{m}" for s, row in SCENARIOS.items() for m in row.modes)]
    for key, reason in skip.items():
        if key not in known:
            import difflib  # only on the way to an error

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
        return self.skip.get(f"{scenario}/{mode}") or self.skip.get(scenario) or self.wire.absent(scenario)


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
        # Loaded here, when a case first runs, so that importing the cases stays cheap.
        import unittest

        from ._checks import Seen, failure_message, run_checks
        from ._driver import Driver
        from .provider import start_fake_provider

        if self.skip:
            raise unittest.SkipTest(self.skip)
        target = self.target
        replies: List[Reply] = []
        # Where the wire's reply says it has no such case, the case is skipped, not failed.
        absent: List[str] = []

        def handler(request: RecordedRequest) -> Reply:
            reply = self._reply(request, absent)
            if target.wire.is_generation(request):
                replies.append(reply)
            return reply

        with start_fake_provider(http2=target.http2) as provider:
            provider.reply(handler)
            driver = Driver(self, provider)
            outcome = driver.run()
            requests = provider.requests
        driver.reclaim()
        if absent:
            raise unittest.SkipTest(absent[0])
        if outcome.skipped:
            raise unittest.SkipTest(outcome.skipped)
        seen = Seen(self, outcome, requests, replies)
        problems = run_checks(seen)
        if problems:
            raise AssertionError(failure_message(seen, problems))

    def _reply(self, request: RecordedRequest, absent: List[str]) -> Reply:
        wire = self.target.wire
        if not wire.is_generation(request):
            return wire.aux_reply(request)
        reply = wire.reply(self.scenario, self.mode, request)
        if reply is None:
            reason = f"{wire.name} has no {self.scenario} case"
            absent.append(reason)
            # The backend gets an answer it cannot mistake for the scenario, and stops.
            return JsonReply({"error": {"message": reason}}, status=501)
        return reply


def backend_conformance_cases(target: BackendConformanceTarget) -> List[ConformanceCase]:
    """Every case for ``target``: each scenario in each of its modes, in table order."""
    return [
        ConformanceCase(target, name, mode)
        for name, row in SCENARIOS.items()
        for mode in MODES
        if mode in row.modes
    ]
