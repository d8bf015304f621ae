"""The agent-loop zoo: broken loops, each caught in the cases it declares by exactly its checks,
on every wire that scripts turns.

Each mutant is the reference loop with one classic bug (``tests/gate_zoo.py``): it runs
a call on arguments still arriving, runs earlier calls again, runs a tool after the
cancel, sends a result with the wrong role, swaps two results, drops the error result,
loops past its budget, mangles non-ASCII, drops the reasoning, answers a call twice
where the provider sends no ids, sends results without their ids, drops usage or
reports one turn's, and one bug for each invariant (each branch its own id) no other
bug isolates; and at the provider's faults, it runs the call a
broken stream had begun, takes a broken stream for the end of the turn, runs the last
turn's calls again before a retry, starts the conversation again without the results
after a failed request, runs an unknown tool as the closest-named one, repairs broken
argument JSON and runs the call, never bounds a request by its budget.
It declares the cases it must fail and the set of check ids that must catch it there,
per wire where a provider's own rules change the verdict, and the verdict is compared
exactly: a mutant caught for another reason, or for more than its own, is a wrong verdict.

By default each mutant runs over h2c only, and over HTTP/1.1 too where its checks are
about the connection; and where it declares a stage in both modes, in one mode per wire,
chat and stream taking turns from wire to wire (a loop's bug is the same in either, and
each mode is still run on three wires), and likewise of a fault declared at both ends,
a clean close or a reset, one end per wire. With CONFORMANCE_LONG_TESTS=1 (as CI runs)
every mutant runs every declared case on both transports. A check is proven by taking
it out of the table: the mutant only it catches must then pass. Every case that runs
on a wire is declared by some mutant there.
"""

from __future__ import annotations

import contextlib
import re
import unittest
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple
from unittest import mock

from conformance._loops import kept_loops
from conformance.gate import _invariants as invariants
from conformance.gate._invariants import (
    INVARIANTS,
    LoopProblem,
    abort,
    budget,
    ending,
    executions,
    reasoning,
    recovery,
    results,
)
from conformance.gate.cases import AgentLoopCase, agent_loop_cases
from conformance.gate.loop import AgentLoopTarget
from conformance.gate.stages import LOOP_MODES, STAGES
from conformance.wires import WIRES

from . import gate_zoo as zoo
from .reporting_sites import SiteWatch
from .test_provider_support import LONG_TESTS, asyncio_debug_off_for_module

#: Every reporting site of the invariants (``tests/reporting_sites.py``), each problem marked
#: with the one that built it while this module's tests run.
SITES = SiteWatch((abort, budget, ending, executions, reasoning, recovery, results), LoopProblem)


def _run_invariants(seen: Any) -> List[Any]:
    """``run_invariants``, less the problems of the sites taken out in this thread."""
    problems: List[Any] = []
    for check in INVARIANTS.values():
        problems.extend(check(seen))
    return SITES.keep(problems)


_debug_off, _debug_back = asyncio_debug_off_for_module()
_patches = contextlib.ExitStack()


def setUpModule() -> None:
    """Without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1, and with the sites marked."""
    _debug_off()
    _patches.enter_context(SITES.installed())
    _patches.enter_context(mock.patch.object(invariants, "run_invariants", _run_invariants))


def tearDownModule() -> None:
    _patches.close()
    _debug_back()


TIMEOUT = 3.0
_CHECK_ID = re.compile(r"^  - .*\[([a-z-]+)\]$", re.M)
#: The wires whose conversations the gate can play.
GATE_WIRES = tuple(name for name, wire in WIRES.items() if wire.scripts_turns())
#: The wires that stream a call's arguments in fragments (Gemini and Ollama send each call whole).
FRAGMENT_WIRES = (
    "openai-chat",
    "openai-responses",
    "azure-openai-chat",
    "azure-openai-responses",
    "anthropic",
    "anthropic-vertex",
    "bedrock-converse",
    "bedrock-invoke",
    "cohere",
)
#: Claude's Messages API, on Anthropic's own API and on each cloud that hosts it.
CLAUDE_WIRES = ("anthropic", "anthropic-vertex", "bedrock-invoke")
#: The checks whose verdict can differ between HTTP/1.1 and h2c: whether the provider saw
#: the request end (a closed connection, or a reset stream). The broken loops' other bugs
#: are the loop's own, the same over either transport.
TRANSPORT_CHECKS = frozenset({"connection-closed"})
#: Mutant cases that spend their time waiting (for a close that never comes, for the case's
#: bound on a loop that never stops) run wide.
WAITING_CHECKS = frozenset({"connection-closed", "recovered"})
JOBS, WAITING_JOBS = 4, 16
#: The two ways a fault stage ends a stream or a request: cleanly, or with an error.
ENDS = ("close", "reset")

Checks = Set[str]


@dataclass(frozen=True)
class LoopMutant:
    name: str
    loop: Callable[..., Any]
    #: case name -> the exact set of check ids that must catch it there, on every wire ...
    cases: Mapping[str, Checks]
    #: ... except these, where the provider's own rules change the verdict (an empty
    #: mapping: the bug cannot show on that wire, for the reason in ``why``).
    per_wire: Mapping[str, Mapping[str, Checks]] = field(default_factory=dict)
    why: str = ""
    #: Whether the loop needs to see calls before the backend completes them.
    tapped: bool = False
    #: Whether the loop runs over a backend that reports the provider's finish reason word for word.
    literal: bool = False
    #: The case's bound: a loop that never stops is judged when it runs out, so its
    #: cases get a shorter one (still longer than the budget of any stage it declares).
    timeout: float = TIMEOUT

    def declared(self, wire: str) -> Mapping[str, Checks]:
        return self.per_wire.get(wire, self.cases)

    def checks(self) -> Set[str]:
        return {c for wire in GATE_WIRES for checks in self.declared(wire).values() for c in checks}


def both(stage: str, checks: Checks) -> Dict[str, Checks]:
    return {f"{stage}/chat": checks, f"{stage}/stream": checks}


def on(wires: Iterable[str], cases: Mapping[str, Checks]) -> Dict[str, Mapping[str, Checks]]:
    return {wire: cases for wire in wires}


NO_FRAGMENTS = on(set(GATE_WIRES) - set(FRAGMENT_WIRES), {})
#: Gemini, through the Gemini API and through Vertex AI: the same turns and the same 400s.
GEMINI_WIRES = ("gemini", "gemini-vertex")
#: Claude and Gemini on Vertex AI, whose 429s name no delay.
VERTEX_WIRES = ("anthropic-vertex", "gemini-vertex")
#: The stages whose fault comes on the request carrying a result the loop already made.
RETRIED = {
    **both("close-after-execution", {"re-executed"}),
    **both("reset-after-execution", {"re-executed"}),
    **both("rate-limited", {"re-executed"}),
}

#: The same stages, for a loop whose final answer was made without the result it had sent.
RETRIED_FINAL = {case: {"final-results"} for case in RETRIED}

MUTANTS: Tuple[LoopMutant, ...] = (
    # The bugs the issue names.
    LoopMutant(
        "executes-on-partial-arguments",
        zoo.EagerLoop,
        {"fragmented-arguments/stream": {"executed-early"}},
        per_wire=NO_FRAGMENTS,
        why="the call arrives whole, in one event: there is no fragment to run early on",
        tapped=True,
    ),
    LoopMutant("reruns-earlier-calls", zoo.RerunsEarlierCalls, both("tool-error-corrects", {"executions"})),
    LoopMutant(
        "executes-after-cancel", zoo.FinishesAfterCancel, {"cancel/stream": {"after-cancel"}}, tapped=True
    ),
    LoopMutant(
        "finishes-in-the-background",
        zoo.FinishesInTheBackground,
        {"cancel/stream": {"after-return"}},
        tapped=True,
    ),
    LoopMutant(
        "result-as-user-message",
        zoo.rewrite(zoo.results_as_user),
        both("forced-tool", {"result-format"}),
        # Ollama takes any role and leaves it to the model's template, and no document says
        # Cohere refuses a call left without its result: the request is accepted, and the
        # call simply has no result.
        per_wire={w: both("forced-tool", {"results"}) for w in ("ollama", "cohere")},
    ),
    LoopMutant("swaps-two-results", zoo.rewrite(zoo.swap_results), both("parallel-calls", {"call-ids"})),
    LoopMutant(
        "drops-result-ids",
        zoo.rewrite(zoo.drop_result_ids),
        both("parallel-calls", {"result-format"}),
        per_wire={"ollama": {}, "gemini": {}, "gemini-vertex": {}},
        why="Ollama sends no call ids: its results go back by tool name and order anyway; Gemini "
        "pairs a result without an id with the calls to its function in order, and so does the gate",
    ),
    LoopMutant(
        "answers-a-call-twice",
        zoo.rewrite(zoo.double_results),
        {},
        per_wire={"ollama": both("forced-tool", {"result-count"})},
        why="with call ids a second result under one id is call-ids' (no call id answered twice), "
        "or the provider's own 400",
    ),
    LoopMutant(
        "drops-the-error-result",
        zoo.rewrite(zoo.drop_errors),
        {**both("tool-error-corrects", {"results"}), **both("error-result", {"results"})},
    ),
    LoopMutant(
        "loops-past-its-budget",
        zoo.PastBudget,
        # Past its budget it retries a 429 that keeps coming for as long as the provider sends it.
        {
            **both("tool-error-insists", {"max-requests", "stopped-budget"}),
            # A 429 that keeps coming leaves no final turn to say "done" at: max-requests alone.
            **both("retry-after", {"max-requests"}),
        },
        per_wire={"ollama": both("tool-error-insists", {"max-requests", "stopped-budget"})},
    ),
    LoopMutant(
        "mangles-non-ascii", zoo.rewrite(zoo.mangle_non_ascii), both("non-ascii-result", {"result-content"})
    ),
    LoopMutant(
        "drops-the-reasoning",
        zoo.rewrite(zoo.drop_reasoning),
        both("reasoning", {"reasoning"}),
        # Gemini refuses a functionCall part without its thoughtSignature with a 400.
        per_wire={
            **on(GEMINI_WIRES, both("reasoning", {"result-format"})),
            "openai-chat": {},
            "azure-openai-chat": {},
        },
        why="OpenAI Chat Completions carries no reasoning across a tool turn",
    ),
    # One bug for each invariant the ones above leave unguarded.
    LoopMutant("returns-the-response", zoo.ReturnsTheResponse, both("text", {"finished"})),
    LoopMutant("keeps-the-first-text", zoo.KeepsTheFirstText, both("forced-tool", {"final-text"})),
    LoopMutant(
        "never-forces-the-tool",
        zoo.NeverForcesTheTool,
        both("forced-tool", {"tool-choice"}),
        per_wire={"ollama": {}},
        why="Ollama has no setting that forces a tool: there is nothing to send",
    ),
    LoopMutant("asks-once-more", zoo.AsksOnceMore, both("text", {"requests"})),
    LoopMutant(
        "camel-cases-tool-names",
        zoo.CamelCasesToolNames,
        both("large-result", {"tool-name"}),
        # Ollama sends no call ids: a run under another name cannot be tied to the call,
        # which shows as never run (and the other name's run as one the model never made).
        per_wire={"ollama": both("large-result", {"executions"})},
    ),
    LoopMutant("mangles-arguments", zoo.MangledArguments, both("fragmented-arguments", {"arguments"})),
    LoopMutant("wraps-the-abort", zoo.WrapsTheAbort, both("cancel", {"abort-reason"})),
    LoopMutant("raises-the-abort-late", zoo.RaisesTheAbortLate, both("cancel", {"abort-reason"})),
    LoopMutant(
        "leaves-the-request-running", zoo.LeavesTheRequestRunning, both("cancel", {"connection-closed"})
    ),
    LoopMutant(
        "keeps-the-signal-from-tools", zoo.KeepsTheSignalFromTools, both("cancel-in-tool", {"tool-signal"})
    ),
    LoopMutant(
        "relays-the-signal-late", zoo.RelaysTheSignalLate, both("cancel-in-tool", {"tool-signal"})
    ),
    LoopMutant(
        "waits-the-tool-out",
        zoo.WaitsTheToolOut,
        both("cancel-in-tool", {"tool-signal", "after-cancel", "request-after-abort", "abort-reason"}),
    ),
    LoopMutant(
        "runs-the-rest-later", zoo.RunsTheRestLater, both("cancel-in-tool", {"after-return"})
    ),
    LoopMutant(
        "sends-the-results-first", zoo.SendsTheResultsFirst, both("cancel-in-tool", {"request-after-abort"})
    ),
    LoopMutant("sends-errors-as-text", zoo.SendsErrorsAsText, both("error-result", {"error-result"})),
    LoopMutant("ignores-its-limit", zoo.IgnoresItsLimit, both("large-result", {"result-size"})),
    LoopMutant("drops-empty-results", zoo.rewrite(zoo.drop_empty), both("empty-result", {"results"})),
    # One bug for each branch of an invariant that the bugs above leave unguarded.
    LoopMutant(
        "counts-from-the-second-request", zoo.OffByOneBudget, both("tool-error-insists", {"max-requests"})
    ),
    LoopMutant(
        "says-done-at-its-budget", zoo.SaysDoneAtItsBudget, both("tool-error-insists", {"stopped-budget"})
    ),
    LoopMutant("says-budget-after-a-tool", zoo.SaysBudgetAfterATool, both("forced-tool", {"stopped-done"})),
    LoopMutant(
        "keeps-the-first-finish-reason", zoo.KeepsTheFirstFinishReason, both("forced-tool", {"finish-reason"})
    ),
    LoopMutant("skips-validation", zoo.SkipsValidation, both("invalid-arguments", {"arguments-schema"})),
    LoopMutant(
        "sends-results-twice",
        zoo.rewrite(zoo.send_results_twice),
        both("forced-tool", {"duplicate-results"}),
        # Gemini and Bedrock refuse a second result for one call with their 400.
        per_wire={
            **on((*GEMINI_WIRES, "bedrock-converse"), both("forced-tool", {"result-format"})),
            "ollama": {},
        },
        why="Ollama sends no call ids: a second result cannot be told from a result for another call",
    ),
    LoopMutant(
        "cuts-call-signatures",
        zoo.rewrite(zoo.cut_call_signatures),
        {},
        per_wire=on(GEMINI_WIRES, both("reasoning", {"call-reasoning"})),
        why="only Gemini ties a signature to the call itself (the thoughtSignature on its functionCall part)",
    ),
    LoopMutant("drops-usage", zoo.DropsUsage, both("forced-tool", {"usage"})),
    LoopMutant("reports-one-turns-usage", zoo.KeepsTheLastTurnsUsage, both("tool-error-corrects", {"usage"})),
    LoopMutant(
        "stops-without-a-word", zoo.StopsWithoutAWord, both("close-after-execution", {"error-message"})
    ),
    # A bare TimeoutError says what happened only where the provider never answered.
    LoopMutant(
        "times-out-without-a-word", zoo.TimesOutWithoutAWord, both("close-after-execution", {"error-message"})
    ),
    # The fault stages: a loop that mishandles what the provider broke.
    LoopMutant(
        "executes-a-partial-call",
        zoo.RunsBrokenCalls,
        {
            f"{end}-after-{where}-fragment/stream": {"partial-call"}
            for end in ("close", "reset")
            for where in ("first", "last")
        },
        tapped=True,
    ),
    LoopMutant(
        "ends-on-a-broken-stream",
        zoo.EndsOnABrokenStream,
        {"close-mid-event/stream": {"final-text"}, "reset-mid-event/stream": {"final-text"}},
    ),
    LoopMutant(
        "re-executes-on-retry",
        zoo.RerunsOnRetry,
        RETRIED,
        # Ollama has no rate-limit reply, so the rate-limited stage does not run there.
        per_wire={"ollama": {c: v for c, v in RETRIED.items() if not c.startswith("rate-limited/")}},
    ),
    LoopMutant("writes-twice-on-a-repeat", zoo.KeysWritesByCallId, both("ambiguous-retry", {"write-once"})),
    LoopMutant(
        "runs-cut-off-calls", zoo.RunsCutOffCalls, {"length-tool-turn/stream": {"ended-turn"}}, tapped=True
    ),
    LoopMutant("says-stop-at-the-limit", zoo.SaysStopAtTheLimit, both("length-tool-turn", {"finish-reason"})),
    LoopMutant(
        "stops-silently-at-the-limit", zoo.StopsSilentlyAtTheLimit, both("length-tool-turn", {"finished"})
    ),
    LoopMutant(
        "runs-only-tool-call-turns",
        zoo.RunsOnlyToolCallTurns,
        both("calls-with-stop", {"executions", "final-text", "requests"}),
        per_wire=on(
            (
                "openai-responses",
                "azure-openai-chat",
                "azure-openai-responses",
                *CLAUDE_WIRES,
                "bedrock-converse",
                "cohere",
            ),
            {},
        ),
        why="calls-with-stop plays only where the provider ends a tool turn with stop",
        literal=True,
    ),
    LoopMutant(
        "asks-again-when-filtered",
        zoo.AsksAgainWhenFiltered,
        both("content-filter-turn", {"requests"}),
        per_wire=on(("ollama", "cohere", "azure-openai-responses"), {}),
        why="Ollama and Cohere have no content filter, and no Azure Responses one was seen",
    ),
    LoopMutant(
        "retries-at-once",
        zoo.RetriesAtOnce,
        both("retry-after", {"retry-wait"}),
        per_wire=on(
            ("ollama", "bedrock-converse", "bedrock-invoke", "cohere", *VERTEX_WIRES)
            + ("openai-chat", "openai-responses", "azure-openai-responses"),
            {},
        ),
        why="Ollama has no rate-limit reply, and Bedrock's throttle, Vertex's quota (Claude's and "
        "Gemini's), Cohere's 429, api.openai.com's 429 and Azure's Responses 429 ask for no delay",
    ),
    LoopMutant(
        "restarts-without-the-results",
        zoo.RestartsAfterAFailure,
        RETRIED_FINAL,
        per_wire={"ollama": {c: v for c, v in RETRIED_FINAL.items() if not c.startswith("rate-limited/")}},
    ),
    LoopMutant(
        "executes-an-unknown-tool",
        zoo.GuessesTools,
        both("unknown-tool", {"refused-call"}),
        # Ollama sends no call ids: the run of read_fixture cannot be tied to the read_file
        # call, so it shows as a run of a tool the model never called.
        per_wire={"ollama": both("unknown-tool", {"executions", "refused-call"})},
    ),
    LoopMutant(
        "executes-a-corrupt-call",
        zoo.RepairsBrokenJson,
        both("corrupt-arguments", {"refused-call"}),
        per_wire={
            **on((*CLAUDE_WIRES, "bedrock-converse"), {"corrupt-arguments/stream": {"refused-call"}}),
            **on((*GEMINI_WIRES, "ollama"), {}),
        },
        why="no call with broken argument text reaches a loop there (Gemini answers "
        "MALFORMED_FUNCTION_CALL with no call, Ollama passes the text on as content)",
    ),
    LoopMutant(
        "hands-every-call-on",
        zoo.HandsEveryCallOn,
        {
            **both("unknown-tool", {"refused-call"}),
            **both("corrupt-arguments", {"refused-call"}),
            **both("invalid-arguments", {"arguments-schema"}),
        },
        per_wire={
            **on(
                (*CLAUDE_WIRES, "bedrock-converse"),
                {
                    **both("unknown-tool", {"refused-call"}),
                    "corrupt-arguments/stream": {"refused-call"},
                    **both("invalid-arguments", {"arguments-schema"}),
                },
            ),
            **on(
                (*GEMINI_WIRES, "ollama"),
                {**both("unknown-tool", {"refused-call"}), **both("invalid-arguments", {"arguments-schema"})},
            ),
        },
    ),
    LoopMutant(
        "guesses-tools-but-says-not",
        zoo.GuessesToolsButSaysNot,
        both("unknown-tool", {"refused-call"}),
        # Ollama sends no call ids: the run of read_fixture cannot be tied to the read_file call.
        per_wire={"ollama": both("unknown-tool", {"executions"})},
    ),
    LoopMutant(
        "refuses-in-plain-text",
        zoo.RefusesInPlainText,
        {
            **both("unknown-tool", {"refused-call"}),
            **both("corrupt-arguments", {"refused-call"}),
            **both("invalid-arguments", {"refused-call"}),
        },
        per_wire={
            **on(
                (*CLAUDE_WIRES, "bedrock-converse"),
                {
                    **both("unknown-tool", {"refused-call"}),
                    "corrupt-arguments/stream": {"refused-call"},
                    **both("invalid-arguments", {"refused-call"}),
                },
            ),
            **on(
                (*GEMINI_WIRES, "ollama"),
                {**both("unknown-tool", {"refused-call"}), **both("invalid-arguments", {"refused-call"})},
            ),
        },
    ),
    LoopMutant("raises-on-a-refused-call", zoo.RaisesOnARefusedCall, both("unknown-tool", {"recovered"})),
    LoopMutant("returns-at-once", zoo.ReturnsAtOnce, both("cancel", {"abort-reason"})),
    LoopMutant("raises-after-the-answer", zoo.RaisesAfterTheAnswer, both("text", {"finished"})),
    LoopMutant("hangs-after-the-answer", zoo.HangsAfterTheAnswer, both("text", {"finished"}), timeout=1.5),
    LoopMutant(
        "zeroes-missing-usage",
        zoo.ZeroesMissingUsage,
        {},
        per_wire=on(("openai-chat", "azure-openai-chat"), {"forced-tool/stream": {"usage"}}),
        why="only a Chat Completions stream that asks for none reports no usage; every other turn carries it",
    ),
    LoopMutant(
        "drops-call-turns",
        zoo.DropsCallTurns,
        both("reasoning", {"result-format"}),
        # Ollama takes any history and leaves it to the model's template: only the check sees it.
        per_wire={"ollama": both("reasoning", {"reasoning"}), "openai-chat": {}, "azure-openai-chat": {}},
        why="the reasoning stage does not play on Chat Completions, which carries no reasoning across a "
        "tool turn",
    ),
    LoopMutant("never-stops", zoo.NoDeadline, both("timeout", {"recovered"}), timeout=1.5),
    LoopMutant("overstays-its-budget", zoo.OverstaysItsBudget, both("timeout", {"budget"}), timeout=4.0),
)


@dataclass(frozen=True)
class Job:
    mutant: LoopMutant
    wire: str
    case: str
    http2: bool

    def __str__(self) -> str:
        return f"{self.wire} {self.mutant.name} {self.case} over {'h2c' if self.http2 else 'http/1.1'}"


def mutant_target(mutant: LoopMutant, wire: str, http2: bool) -> AgentLoopTarget:
    make = zoo.tapped if mutant.tapped else zoo.literal if mutant.literal else zoo.plain

    def create(url: str) -> Any:
        return mutant.loop(make(wire, url, http2), max_result_chars=zoo.LIMIT)

    return AgentLoopTarget(
        f"mutant {mutant.name}",
        WIRES[wire],
        create,
        http2=http2,
        timeout=mutant.timeout,
        max_result_chars=zoo.LIMIT,
    )


def mutant_case(job: Job) -> AgentLoopCase:
    target = mutant_target(job.mutant, job.wire, job.http2)
    return next(c for c in agent_loop_cases(target) if c.name == job.case)


def verdict(case: AgentLoopCase) -> Optional[Set[str]]:
    """The ids of the checks that failed the case, or ``None`` where it passed (or skipped)."""
    try:
        case.run()
    except unittest.SkipTest:
        return None
    except AssertionError as failed:
        return set(_CHECK_ID.findall(str(failed)))
    return None


def transports(mutant: LoopMutant) -> Tuple[bool, ...]:
    """h2c; and HTTP/1.1 too where a check is about how the request ends, or in long runs."""
    if LONG_TESTS or TRANSPORT_CHECKS & mutant.checks():
        return (False, True)
    return (True,)


def cases_to_run(mutant: LoopMutant, wire: str) -> List[str]:
    """The declared cases of ``mutant`` on ``wire`` this run proves: all of them in a long
    run; else, of a stage declared in both modes, the mode this wire's turn gives, and of
    a fault declared at both ends (``close-...`` and ``reset-...``), the end it gives."""
    declared = list(mutant.declared(wire))
    if LONG_TESTS:
        return declared
    turn = GATE_WIRES.index(wire)
    mode = LOOP_MODES[turn % len(LOOP_MODES)]
    # The end turns at half the mode's pace, so that every pairing of the two is run.
    end = ENDS[turn // len(LOOP_MODES) % len(ENDS)]
    out = []
    for case in declared:
        stage, _, own = case.partition("/")
        if own != mode and all(f"{stage}/{m}" in declared for m in LOOP_MODES):
            continue
        first, _, rest = stage.partition("-")
        if first in ENDS and first != end and all(f"{e}-{rest}/{own}" in declared for e in ENDS):
            continue
        out.append(case)
    return out


def jobs_for(mutants: Iterable[LoopMutant], wires: Iterable[str] = GATE_WIRES) -> List[Job]:
    return [
        Job(mutant, wire, case, http2)
        for mutant in mutants
        for wire in wires
        for case in cases_to_run(mutant, wire)
        for http2 in transports(mutant)
    ]


Sited = Optional[Tuple[FrozenSet[str], FrozenSet[str]]]


def sited_verdict(case: AgentLoopCase) -> Sited:
    """The ids of the checks that failed the case and the sites that reported, or ``None`` (a pass)."""
    with SITES.recording() as sites:
        checks = verdict(case)
    return None if checks is None else (frozenset(checks), frozenset(sites))


def run_jobs(jobs: List[Job]) -> List[Sited]:
    """Each job's verdict, in order: the waiting ones wide, beside the rest run narrow (so
    that a busy machine cannot push a prompt abort past its bound)."""
    waits = [i for i, j in enumerate(jobs) if WAITING_CHECKS & j.mutant.checks()]
    rest = [i for i in range(len(jobs)) if i not in set(waits)]
    # On the event loops each job leaves as it found them, as a matrix runs its cases.
    with kept_loops(), ThreadPoolExecutor(max_workers=WAITING_JOBS) as wide, ThreadPoolExecutor(
        max_workers=JOBS
    ) as narrow:
        futures = {i: wide.submit(sited_verdict, mutant_case(jobs[i])) for i in waits}
        futures.update({i: narrow.submit(sited_verdict, mutant_case(jobs[i])) for i in rest})
        return [futures[i].result() for i in range(len(jobs))]


_OBSERVED: Dict[str, List[Tuple[Job, Sited]]] = {}


def observed() -> List[Tuple[Job, Sited]]:
    """Every job of this run's share with its verdict, run once for the tests that read them."""
    if "jobs" not in _OBSERVED:
        jobs = jobs_for(MUTANTS)
        _OBSERVED["jobs"] = list(zip(jobs, run_jobs(jobs)))
    return _OBSERVED["jobs"]


def wrong_verdicts(results: List[Tuple[Job, Sited]]) -> List[str]:
    """The jobs whose verdict is not the declared one.

    A job that disagrees in the crowd is run once more on its own before it counts: the
    wide pool runs beside the narrow one, and on a loaded machine a loop that raises its
    reason at once can still miss the half-second bound. A verdict wrong for a reason of
    its own is wrong again alone, and both verdicts are shown.
    """
    wrong = []
    for job, got in results:
        want = job.mutant.declared(job.wire)[job.case]
        if got is not None and got[0] == want:
            continue
        alone = verdict(mutant_case(job))
        if alone != want:
            shown = " then ".join(
                "a pass" if v is None else str(sorted(v)) for v in (None if got is None else got[0], alone)
            )
            wrong.append(f"{job}: expected {sorted(want)}, got {shown}")
    return wrong


#: Reporting sites no broken loop is caught by alone, each with the reason it needs none.
UNGUARDED_SITES: Dict[str, str] = {
    "abort.check_tool_signal#3": "a tool still running when the case ends: the watch after an abort "
    "lasts longer than any tool a stage runs (delayed_value's wait), so a tool left running ends "
    "within it and is check_tool_signal#1's; kept for a loop given up on at its bound mid-tool",
}


def running_cases(wire: str) -> Set[str]:
    """The gate cases that run on ``wire`` (not skipped by the wire itself)."""
    target = mutant_target(MUTANTS[0], wire, True)
    return {c.name for c in agent_loop_cases(target) if not c.skip}


class LoopZooTests(unittest.TestCase):
    def test_each_mutant_is_caught_where_and_why_it_says(self) -> None:
        """Each broken loop fails each declared case on every wire for exactly its checks."""
        wrong = wrong_verdicts(observed())
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_every_reporting_site_is_the_only_thing_catching_some_mutant(self) -> None:
        """Taking any one reporting site out (its problems dropped) lets a mutant only it catches pass."""
        guards: Dict[str, Job] = {}
        for job, got in observed():
            if got is not None and len(got[1]) == 1:
                guards.setdefault(next(iter(got[1])), job)
        names = [site.name for site in SITES.sites]
        unguarded = [n for n in names if n not in guards and n not in UNGUARDED_SITES]
        self.assertEqual(unguarded, [], "reporting sites that no mutant alone is caught by")
        stale = sorted(set(UNGUARDED_SITES) & (set(guards) | (set(UNGUARDED_SITES) - set(names))))
        self.assertEqual(stale, [], "sites listed as unguarded that are guarded, or are gone")

        def sabotaged(site: str, job: Job) -> Optional[str]:
            with SITES.without(site):
                got = verdict(mutant_case(job))
            return None if got is None else f"without {site}, {job} is still caught by {sorted(got)}"

        with kept_loops(), ThreadPoolExecutor(max_workers=JOBS) as pool:
            caught = [c for c in pool.map(lambda item: sabotaged(*item), sorted(guards.items())) if c]
        self.assertEqual(caught, [], "\n".join(caught))

    def test_a_bare_timeout_error_passes_where_the_provider_never_answered(self) -> None:
        """Python's TimeoutError, with no message, says by its class that the request timed out."""
        timing_out = LoopMutant("raises-a-bare-timeout", zoo.RaisesABareTimeout, {})
        for wire in ("openai-chat", "gemini"):
            for case in ("timeout/chat", "timeout/stream"):
                with self.subTest(wire=wire, case=case):
                    self.assertIsNone(verdict(mutant_case(Job(timing_out, wire, case, False))))

    def test_every_case_that_runs_is_declared_by_a_mutant(self) -> None:
        """On every wire, each gate case that runs is one some broken loop must fail."""
        for wire in GATE_WIRES:
            with self.subTest(wire=wire):
                declared = {c for m in MUTANTS for c in m.declared(wire)}
                self.assertEqual(
                    sorted(running_cases(wire) - declared), [], f"{wire}: cases no mutant guards"
                )

    def test_mutants_declare_cases_that_run_and_checks_that_exist(self) -> None:
        """Every declared case runs on its wire, every check exists, and a bug left out says why."""
        names = [m.name for m in MUTANTS]
        self.assertEqual(len(names), len(set(names)), names)
        for mutant in MUTANTS:
            for wire in GATE_WIRES:
                with self.subTest(mutant=mutant.name, wire=wire):
                    declared = mutant.declared(wire)
                    self.assertLessEqual(set(declared), running_cases(wire))
                    for checks in declared.values():
                        self.assertTrue(checks)
                        self.assertLessEqual(checks, set(INVARIANTS))
                    if not declared:
                        self.assertTrue(mutant.why, f"{mutant.name} skips {wire} without saying why")
                    for case in declared:
                        own = STAGES[case.partition("/")[0]].max_seconds
                        # The stage's own budget, not the bound's share, is what the task carries.
                        self.assertLessEqual(own or 0.0, round(mutant.timeout * 0.8, 2), case)
            self.assertTrue(any(mutant.declared(w) for w in GATE_WIRES), f"{mutant.name} runs nowhere")


if __name__ == "__main__":
    unittest.main()
