"""A backend case's data: the target, the case, and what the backend did in it.

Strategy: a case is data (a target, a scenario, a mode) and machinery that runs it
(a provider, the driver, the checks). The machinery reads the data, and the case's
``run()`` uses the machinery, so the data lives here, a floor below both: the checks
and the driver import :class:`BackendCase` and :class:`Outcome` from this module, and
:class:`~conformance.cases.ConformanceCase` adds ``run()`` on top, one floor up.
:class:`SubjectOutcome` is what any subject (a backend here, an agent loop in the
gate) did in one run, whose fields the one driver outline (``_outline``) fills in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional, Tuple

from ._bounds import LATENCY_SCENARIOS, in_time_silence, latency_bound
from .contract import ChatRequest
from .errors import TargetDefinitionError
from .scenarios import SCENARIOS, Scenario
from .wires._base import Variant, Wire

__all__ = ["BackendCase", "BackendConformanceTarget", "ChatHook", "Outcome", "SubjectOutcome"]

ChatHook = Callable[[Any, ChatRequest], Any]

#: The longest read timeout a target may declare: the stall case holds the provider
#: silent past it, and a suite of such cases should still end within minutes.
MAX_READ_TIMEOUT = 30.0


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
    installed version the release report states. ``retries`` says the backend retries
    what can come back (a rate limit, an overload, a server error, a cut), as the
    official SDKs do by default: the provider then relents after a scripted number of
    failures and the retry layer is judged (its waits, its bound, what it never retries);
    left ``False``, the backend must send one request per answer (``no-retry``).
    ``read_timeout`` is how long, in seconds, the backend waits for the provider's next byte
    before it gives up (its HTTP client's read timeout): the latency cases
    (``slow-first-token``, ``stall``) hold the provider silent for a share of it, and are
    skipped, saying so, where it is ``None``.
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
    retries: bool = False
    read_timeout: Optional[float] = None

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
        if not isinstance(self.retries, bool):
            raise TargetDefinitionError(
                f"target {self.name!r}: retries must be True (the backend retries what can come "
                f"back) or False, got {self.retries!r}"
            )
        read_timeout = self.read_timeout
        if read_timeout is not None and (
            isinstance(read_timeout, bool)
            or not isinstance(read_timeout, (int, float))
            or not 0 < read_timeout <= MAX_READ_TIMEOUT
        ):
            raise TargetDefinitionError(
                f"target {self.name!r}: read_timeout must be the seconds the backend waits for the "
                f"provider's next byte, above 0 and at most {MAX_READ_TIMEOUT:g} (the latency cases "
                f"hold the provider silent for a share of it), or None; got {read_timeout!r}"
            )

    def skip_reason(self, scenario: str, mode: str) -> Optional[str]:
        """Why the case is skipped, or ``None``: the target's reason, then the wire's, then a
        latency case's need of a declared ``read_timeout``."""
        skipped = self.skip.get(f"{scenario}/{mode}") or self.skip.get(scenario)
        skipped = skipped or self.wire.absent_in(scenario, mode)
        if skipped is None and self.read_timeout is None and SCENARIOS[scenario].needs_read_timeout:
            return (
                f"{scenario} holds the provider silent for a share of the backend's read timeout: "
                "declare read_timeout = the seconds your backend waits for the next byte (its HTTP "
                "client's read timeout; a second or less keeps the case quick)"
            )
        return skipped

    def variant_skip_reason(self, scenario: str, mode: str, variant: str) -> Optional[str]:
        """Why one variant of a case is left out, or ``None``."""
        if not variant:
            return None
        return self.skip.get(f"{scenario}/{mode}:{variant}") or self.skip.get(f"{scenario}:{variant}")


@dataclass(frozen=True)
class BackendCase:
    """One scenario in one mode for one target: what a case is, apart from how it runs."""

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

    @property
    def timed(self) -> bool:
        """Whether a time bound of the contract (the abort's, the cancel's, a read timeout's, a
        retry layer's growing waits) judges this case: its run then does not count what
        stalled the whole process (``conformance._stall``)."""
        if self.target.retries and self.scenario == "rate-limit":
            return True  # two failures in a row: retry-growth compares the waits
        return self.scenario in ("abort", "cancel", *LATENCY_SCENARIOS)

    @property
    def bound(self) -> float:
        """Seconds the case waits for the backend before it gives up on it: the target's
        ``timeout``; for a stall, a bound derived from the declared read timeout (a backend
        still waiting then has waited well past it); for a slow first token, the target's
        ``timeout`` after the silence."""
        read_timeout = self.target.read_timeout
        if read_timeout is None or self.scenario not in LATENCY_SCENARIOS:
            return self.target.timeout
        if self.scenario == "stall":
            return latency_bound(read_timeout)
        return self.target.timeout + in_time_silence(read_timeout)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.target.name} {self.target.wire.name} {self.name}>"

    def variants(self) -> Tuple[Variant, ...]:
        """The variants this case runs: its scenario's, less those the target skips."""
        target = self.target
        return tuple(
            v
            for v in target.wire.variants(self.scenario, self.mode)
            if target.variant_skip_reason(self.scenario, self.mode, v.name) is None
        )


@dataclass
class SubjectOutcome:
    """What a subject (a backend, an agent loop) did in one run, as the driver outline saw it."""

    error: Optional[BaseException] = None
    error_at: Optional[float] = None
    #: When the run began, and when the subject returned or raised.
    started: float = 0.0
    ended_at: Optional[float] = None
    #: The subject returned or raised (as opposed to still running at the bound).
    ended: bool = False
    hung: bool = False
    #: Seconds the case waited before it gave up on a hung subject.
    waited: float = 0.0
    abort_at: Optional[float] = None
    abort_reason: Optional[BaseException] = None
    #: Seconds from the abort (or cancellation) until the provider saw the close,
    #: observed while the subject was alive; ``None`` where it did not come in time.
    closed_after: Optional[float] = None
    close_error: Optional[BaseException] = None
    #: What the case could not reclaim once the provider closed, in words.
    left_behind: Optional[str] = None
    #: Seconds between the abort and the subject's error in which this whole process
    #: could not run (``conformance._stall``): not counted against the bound. Read only
    #: where that stretch is longer than the bound (0 below it: nothing to leave out).
    stalled_after_abort: float = 0.0


@dataclass
class Outcome(SubjectOutcome):
    """What a backend did in one case."""

    response: Any = None
    chunks: List[Any] = field(default_factory=list)
    skipped: Optional[str] = None
    #: The calls the backend returned on the turn before a ``tool-result`` case's own,
    #: which its history is built from; ``None`` where there was no such turn.
    earlier: Optional[Tuple[Any, ...]] = None
    #: The reasoning the backend returned with those calls (the response's, or every
    #: chunk's in order), which the history sends back; ``None`` where there was no such turn.
    earlier_reasoning: Optional[Tuple[Any, ...]] = None
    #: How many requests the provider had seen when that earlier turn ended: the case's
    #: own requests are the ones after them.
    earlier_requests: int = 0
