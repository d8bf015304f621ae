"""Conformance cases: one per scenario and mode, for any test runner.

Strategy: a case runs each variant of its scenario (each real shape the provider
answers it in, :class:`~conformance.wires.Variant`) in turn. For each it starts a
fresh fake provider, scripts it with the wire, hands the backend to the driver
(``_driver``: a worker thread with a loop of its own, so sync and async backends are
driven alike and a hung one is given up on at the bound), and passes what came back,
and every request the provider saw, to the checks (``_checks``). Every problem of
every variant is reported at once in one :class:`AssertionError`, each line naming
its variant. The provider is closed whatever happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, List, Mapping, Optional, Tuple

from ._bounds import ABORT_CLOSE_WITHIN, ABORT_DELAY, ABORT_RAISE_WITHIN, ConformanceAbort
from .contract import ChatRequest
from .errors import TargetDefinitionError
from .provider import JsonReply, RecordedRequest, Reply
from .scenarios import MODES, SCENARIOS, Scenario
from .wires._base import Variant, Wire

if TYPE_CHECKING:
    from ._checks import Problem, Seen

__all__ = [
    "ABORT_CLOSE_WITHIN",
    "ABORT_DELAY",
    "ABORT_RAISE_WITHIN",
    "BackendConformanceTarget",
    "ConformanceAbort",
    "ConformanceCase",
    "backend_conformance_cases",
    "scenario_reply",
]
ChatHook = Callable[[Any, ChatRequest], Any]


def _check_skip_keys(skip: Mapping[str, str], where: str, wire: Optional[Wire] = None) -> None:
    """Every key names a scenario, a scenario/mode, or one of their variants after a colon."""
    known = [*SCENARIOS, *(f"{s}/{m}" for s, row in SCENARIOS.items() for m in row.modes)]
    for key, reason in skip.items():
        key, _, variant = key.partition(":")
        if variant and key in known and wire is not None:
            scenario, _, mode = key.partition("/")
            modes = [mode] if mode else list(SCENARIOS[scenario].modes)
            names = sorted({v.name for m in modes for v in wire.variants(scenario, m) if v.name})
            if variant not in names:
                import difflib  # only on the way to an error

                close = difflib.get_close_matches(variant, names, n=1, cutoff=0.6)
                shown = ", ".join(names) or "none"
                hint = f"did you mean {close[0]!r}?" if close else f"its variants: {shown}"
                raise TargetDefinitionError(
                    f"{where}: {wire.name} has no variant {variant!r} of {key} in skip; {hint}"
                )
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
    fake provider's base URL. ``skip`` maps a scenario (``"content-filter"``), a
    scenario and mode (``"abort/stream"``), or one variant of either
    (``"quota:credit-balance-400"``, ``"quota/chat:credit-balance-400"``) to the
    reason it is skipped. ``chat``
    and ``stream`` adapt a backend whose surface differs from ``backend.chat(request)``
    and ``backend.chat_stream(request)``. ``timeout`` bounds each case in seconds.
    ``client`` names the client package the backend is built on (``"openai"``), whose
    installed version the release report states.
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
    client: Optional[str] = None

    def __post_init__(self) -> None:
        from .wires._adapt import as_wire

        object.__setattr__(self, "wire", as_wire(self.wire, f"target {self.name!r}"))
        if not callable(self.create_backend):
            raise TargetDefinitionError(
                f"target {self.name!r}: create_backend must be a callable taking the provider "
                f"URL, got {self.create_backend!r}"
            )
        _check_skip_keys(self.skip, f"target {self.name!r}", self.wire)
        if self.timeout <= 0:
            raise TargetDefinitionError(f"target {self.name!r}: timeout must be positive")

    def skip_reason(self, scenario: str, mode: str) -> Optional[str]:
        """Why the case is skipped, or ``None``: the target's reason, then the wire's."""
        skipped = self.skip.get(f"{scenario}/{mode}") or self.skip.get(scenario)
        return skipped or self.wire.absent_in(scenario, mode)

    def variant_skip_reason(self, scenario: str, mode: str, variant: str) -> Optional[str]:
        """Why one variant of a case is left out, or ``None``."""
        if not variant:
            return None
        return self.skip.get(f"{scenario}/{mode}:{variant}") or self.skip.get(f"{scenario}:{variant}")


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

    def variants(self) -> Tuple[Variant, ...]:
        """The variants this case runs: its scenario's, less those the target skips."""
        target = self.target
        return tuple(
            v
            for v in target.wire.variants(self.scenario, self.mode)
            if target.variant_skip_reason(self.scenario, self.mode, v.name) is None
        )

    def run(self) -> None:
        """Run the case, every variant of it: return quietly, raise :class:`AssertionError`, or skip."""
        # Loaded here, when a case first runs, so that importing the cases stays cheap.
        import unittest

        from ._checks import failure_message, run_checks

        if self.skip:
            raise unittest.SkipTest(self.skip)
        variants = self.variants()
        if not variants:
            raise unittest.SkipTest(f"every variant of {self.name} is skipped by the target")
        failed: List[Tuple[Seen, List[Problem]]] = []
        for variant in variants:
            seen = self._run_variant(variant)
            problems = run_checks(seen)
            if problems:
                failed.append((seen, problems))
        if failed:
            raise AssertionError(failure_message(failed, len(variants)))

    def _run_variant(self, variant: Variant) -> Seen:
        import unittest

        from ._checks import Seen
        from ._driver import Driver
        from .provider import start_fake_provider

        target = self.target
        replies: List[Reply] = []
        # Where the wire's reply says it has no such case, the case is skipped, not failed.
        absent: List[str] = []
        # Why the provider refused a multi-turn history with the API's own 400.
        refusals: List[str] = []

        def handler(request: RecordedRequest) -> Reply:
            reply = self._reply(request, absent, variant.name, refusals)
            if target.wire.is_generation(request):
                replies.append(reply)
            return reply

        with start_fake_provider(http2=target.http2) as provider:
            provider.reply(handler)
            driver = Driver(self, provider, variant.name)
            outcome = driver.run()
            requests = provider.requests
        driver.reclaim()
        if absent:
            raise unittest.SkipTest(absent[0])
        if outcome.skipped:
            raise unittest.SkipTest(outcome.skipped)
        return Seen(self, outcome, requests, replies, variant, refusals)

    def _reply(
        self,
        request: RecordedRequest,
        absent: List[str],
        variant: str = "",
        refusals: Optional[List[str]] = None,
    ) -> Reply:
        wire = self.target.wire
        if not wire.is_generation(request):
            return wire.aux_reply(request)
        reply = scenario_reply(wire, self.scenario, self.mode, request, variant, refusals)
        if reply is None:
            # Why the form the request asked for has no such case, where the wire says.
            form = "stream" if wire.wants_stream(request) else "chat"
            reason = wire.absent_in(self.scenario, form) or f"{wire.name} has no {self.scenario} case"
            absent.append(reason)
            # The backend gets an answer it cannot mistake for the scenario, and stops.
            return JsonReply({"error": {"message": reason}}, status=501)
        return reply


def scenario_reply(
    wire: Wire,
    scenario: str,
    mode: str,
    request: RecordedRequest,
    variant: str = "",
    refusals: Optional[List[str]] = None,
) -> Optional[Reply]:
    """The provider's answer to ``request`` in ``scenario``: the wire's ``reply()``, or,
    for the multi-turn scenarios and ``corrupt-arguments``, its scripted turns; ``None``
    where it has no such case.

    ``refusals`` collects why a multi-turn history was refused with the API's 400.
    """
    if scenario in ("tool-result", "parallel-tool-calls"):
        from ._multiturn import multi_turn_reply

        return multi_turn_reply(wire, scenario, request, variant, [] if refusals is None else refusals)
    if scenario == "reasoning":
        from ._multiturn import reasoning_reply

        return reasoning_reply(wire, mode, request, variant)
    if scenario == "corrupt-arguments":
        from .wires._unparsed import corrupt_reply

        return corrupt_reply(wire, request, variant or wire.variants(scenario, mode)[0].name)
    # The unnamed shape is asked for as before variants, so a wire of one's own
    # whose reply() takes no variant keeps working.
    if variant:
        return wire.reply(scenario, mode, request, variant)
    return wire.reply(scenario, mode, request)


def backend_conformance_cases(target: BackendConformanceTarget) -> List[ConformanceCase]:
    """Every case for ``target``: each scenario in each of its modes, in table order."""
    return [
        ConformanceCase(target, name, mode)
        for name, row in SCENARIOS.items()
        for mode in MODES
        if mode in row.modes
    ]
