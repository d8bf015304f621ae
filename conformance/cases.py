"""Conformance cases: one per scenario and mode, for any test runner.

Strategy: a case's data (its target, scenario and mode) is :class:`~conformance._case.BackendCase`,
a floor below the machinery that runs it; :class:`ConformanceCase` adds the running. A
case runs each variant of its scenario (each real shape the provider answers it in,
:class:`~conformance.wires.Variant`) in turn. For each it starts a fake provider of its
own, scripts it with the wire, hands the backend to the driver (``_driver``, along the
one outline of ``_outline``: a worker thread with a loop of its own, so sync and async
backends are driven alike and a hung one is given up on at the bound), and passes what
came back, and every request the provider saw, to the checks (``_checks``). Every
problem of every variant is reported at once in one :class:`AssertionError`, each line
naming its variant. The provider is closed whatever happened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, List, Optional, Tuple, Union

from ._bounds import ABORT_CLOSE_WITHIN, ABORT_DELAY, ABORT_RAISE_WITHIN, LATENCY_SCENARIOS, ConformanceAbort
from ._case import BackendCase, BackendConformanceTarget
from .provider import JsonReply, RecordedRequest, Reply, held
from .scenarios import MODES, SCENARIOS
from .wires._base import Variant, Wire
from .wires._variants import BY_LENGTH, CLEAN_ENDS

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

class _Unasked(Exception):
    """A variant the request never asked for: the provider would not have sent it."""


class ConformanceCase(BackendCase):
    """One scenario in one mode for one target; :meth:`run` raises on a breach."""

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
        unasked: List[str] = []
        for variant in variants:
            try:
                seen = self._run_variant(variant)
            except _Unasked as skipped:
                unasked.append(f"{variant.name}: {skipped}" if variant.name else str(skipped))
                continue
            problems = run_checks(seen)
            if problems:
                failed.append((seen, problems))
        if failed:
            raise AssertionError(failure_message(failed, len(variants) - len(unasked)))
        if len(unasked) == len(variants):
            raise unittest.SkipTest("; ".join(unasked))

    def _run_variant(self, variant: Variant) -> Seen:
        import unittest

        from ._checks import Seen
        from ._checks.retries import RETRY_ASKED, retried_scenario
        from ._driver import Driver
        from ._outline import run_on_provider
        from .gate._fault_replies import with_delay

        target = self.target
        replies: List[Reply] = []
        # Where the wire's reply says it has no such case, the case is skipped, not failed.
        absent: List[str] = []
        # Why the provider refused a multi-turn history with the API's own 400.
        refusals: List[str] = []
        # Why the provider would never send this shape to the request that came.
        unasked: List[str] = []
        # For a target that retries: the failures sent before the provider relents.
        relent = retried_scenario(target.retries, self.scenario)

        def handler(request: RecordedRequest) -> Union[Reply, Awaitable[Reply]]:
            if target.wire.is_generation(request):
                reason = target.wire.unasked(variant, request)
                if reason:
                    unasked.append(reason)
                    # The backend gets an answer it cannot mistake for the shape, and stops.
                    return JsonReply({"error": {"message": reason}}, status=501)
                if relent and len(replies) >= relent:
                    reply = self._relented(request, absent)
                    replies.append(reply)
                    return reply
            if self.scenario in LATENCY_SCENARIOS and target.wire.is_generation(request):
                reply, hold = self._latency(request, absent, variant.name)
                replies.append(reply)
                return held(reply, hold) if hold else reply
            reply = self._reply(request, absent, variant.name, refusals)
            if target.wire.is_generation(request):
                if relent and isinstance(reply, JsonReply):
                    reply = with_delay(reply, RETRY_ASKED)
                replies.append(reply)
            return reply

        driver, requests = run_on_provider(
            lambda provider: Driver(self, provider, variant.name), handler, http2=target.http2
        )
        outcome = driver.outcome
        if unasked:
            raise _Unasked(unasked[0])
        if absent:
            raise unittest.SkipTest(absent[0])
        if outcome.skipped:
            raise unittest.SkipTest(outcome.skipped)
        seen = Seen(self, outcome, requests, replies, variant, refusals, relent)
        if seen.relented:
            # The reply is the plain question's answer, in no shape of the failure's.
            answered = Variant(variant.name, title=variant.title, source=variant.source)
            seen = Seen(self, outcome, requests, replies, answered, refusals, relent)
        return seen

    def _relented(self, request: RecordedRequest, absent: List[str]) -> Reply:
        """The reply the provider gives once a failure that could come back has passed: the
        plain question's answer, as the ``text`` case gets it."""
        reply = scenario_reply(self.target.wire, "text", self.mode, request)
        if reply is None:
            reason = f"{self.target.wire.name} has no text case to relent with"
            absent.append(reason)
            return JsonReply({"error": {"message": reason}}, status=501)
        return reply

    def _latency(self, request: RecordedRequest, absent: List[str], variant: str) -> Tuple[Reply, float]:
        """A latency case's reply (the ``text`` case's, held back or stalled), and how long the
        provider holds all of it back."""
        from .wires._latency import latency_reply

        read_timeout = self.target.read_timeout
        assert read_timeout is not None  # the case is skipped without one
        played = latency_reply(self.target.wire, self.scenario, request, variant, read_timeout)
        if played is None:
            reason = f"{self.target.wire.name} has no text case to hold back"
            absent.append(reason)
            return JsonReply({"error": {"message": reason}}, status=501), 0.0
        return played

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
    if scenario == "stream-cut" and variant in CLEAN_ENDS:
        # The cut's own bytes, ended properly: the wire plays the cut, the end is the provider's.
        from .wires._chunks import ended_cleanly

        cut = wire.reply(scenario, mode, request, CLEAN_ENDS[variant])
        return None if cut is None else ended_cleanly(cut, by_length=variant in BY_LENGTH)
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
