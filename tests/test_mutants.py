"""The mutant zoo proves the verdict: each mutant is caught where and why it says, and
every check is the one thing standing between some mutant and a pass.

Each mutant of ``tests/mutants`` declares the cases it must fail and the checks that
must catch it there, exactly; it is run on those cases over HTTP/1.1 and h2c (by
default h2c only where the transport can change the verdict; every mutant on both with
CONFORMANCE_LONG_TESTS=1, as CI runs it). A check
is proven by taking it out of the table: the mutant only it catches must then pass.
Every case of every wire must catch some mutant that is caught for what the backend
answered, not merely for the request it sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import pkgutil
import re
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from conformance._checks import (
    CHECKS,
    cut,
    ending,
    failures,
    latency,
    reasoning,
    replies,
    requests,
    retries,
    tool_calls,
)
from conformance._loops import kept_loops
from conformance.cases import BackendConformanceTarget, ConformanceCase, backend_conformance_cases
from conformance.reference import REFERENCE_BACKENDS
from conformance.wires import WIRES

from . import mutants as zoo
from .mutants import Mutant, zoo_wires
from .mutants.latency import ZOO_READ_TIMEOUT
from .reporting_sites import CheckSites
from .test_provider_support import LONG_TESTS, asyncio_debug_in_long_runs_only

#: A mutant's case is given up on after this many seconds: past the abort's one-second
#: close window with room to spare on a busy machine.
TIMEOUT = 3.0
#: The bound for a retry layer that waits four seconds twice (caught by "retry-growth").
GROWTH_TIMEOUT = 12.0
#: The bound for a mutant declared to hang (caught by "finished"): it never ends, so a
#: shorter wait proves as much.
HUNG_TIMEOUT = 1.2
JOBS = 4
TRANSPORTS = ("h1", "h2")
_CHECK_ID = re.compile(r"^  - .*\[([a-z-]+)\]$", re.M)
#: A failing variant's problem line: ``  - [mistral] expected ... [usage]``.
_VARIANT_CHECK = re.compile(r"^  - \[([a-z0-9.-]+)\] .*\[([a-z-]+)\]$", re.M)
ZOO_WIRES = zoo_wires()


def load_mutants() -> Dict[str, List[Mutant]]:
    by_wire: Dict[str, List[Mutant]] = {}
    for info in pkgutil.iter_modules(zoo.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{zoo.__name__}.{info.name}")
        for mutant in getattr(module, "MUTANTS", ()):
            by_wire.setdefault(mutant.wire, []).append(mutant)
    return by_wire


MUTANTS = load_mutants()

#: Every reporting site of the checks (``tests/reporting_sites.py``): planted while this
#: module's tests run, so that each can be taken out alone. ``_shown`` formats calls for
#: a message: its words are no problem of their own.
SITES = CheckSites(
    (cut, ending, failures, latency, reasoning, replies, requests, retries, tool_calls),
    CHECKS,
    helpers=("_shown",),
)
_installed = contextlib.ExitStack()


def setUpModule() -> None:
    _installed.enter_context(SITES.installed())


def tearDownModule() -> None:
    _installed.close()


#: The sites each job's run reported from, by (wire, mutant, case, transport), as the runs came.
SITES_SEEN: Dict[Tuple[str, str, str, str], FrozenSet[str]] = {}


#: The checks whose verdict can differ between HTTP/1.1 and h2c: how a backend ends a
#: request (a reset stream or a closed connection) and how soon, and how it reads a
#: reply the provider cut short (a FIN without the last chunk, or RST_STREAM).
TRANSPORT_CHECKS = frozenset(
    {
        "connection-closed",
        "abort-reason",
        "abort-promptly",
        "cancel-propagates",
        "finished",
        "cut-raised",
        "cut-retryable",
        "cut-kind",
        "cut-finish",
        "cut-tool-call",
        "read-timeout",
        "timeout-kind",
        "in-time",
    }
)


def transports_for(mutant: Mutant) -> Tuple[str, ...]:
    """Both transports for a bug that can hide in one; else HTTP/1.1, and both with
    CONFORMANCE_LONG_TESTS=1 (as CI runs): the answer a wire sends is the same bytes
    over either, so the default run spends its h2c time where h2c can change a verdict."""
    if LONG_TESTS or set(mutant.transports) != set(TRANSPORTS) or TRANSPORT_CHECKS & set(mutant.checks):
        return TRANSPORTS
    return ("h1",)


def _bound(mutant: Mutant) -> float:
    """The case bound a mutant's target declares."""
    if "finished" in mutant.checks:
        return HUNG_TIMEOUT
    return GROWTH_TIMEOUT if "retry-growth" in mutant.checks else TIMEOUT


def mutant_case(mutant: Mutant, case_name: str, transport: str) -> ConformanceCase:
    target = BackendConformanceTarget(
        name=f"mutant {mutant.name}",
        wire=ZOO_WIRES[mutant.wire],
        create_backend=lambda url: mutant.create(url, transport == "h2"),
        headers=dict(mutant.headers),
        model=mutant.model,
        timeout=_bound(mutant),
        http2=transport == "h2",
        retries=mutant.retries,
        read_timeout=ZOO_READ_TIMEOUT,
    )
    for case in backend_conformance_cases(target):
        if case.name == case_name:
            return case
    raise LookupError(f"{mutant.wire} has no case {case_name!r}")


def verdict(case: ConformanceCase, by_variant: bool = False) -> Optional[Set[str]]:
    """The ids of the checks that failed the case, or ``None`` where it passed (or skipped);
    ``by_variant``, each as ``variant:check``."""
    try:
        case.run()
    except unittest.SkipTest:
        return None
    except AssertionError as failed:
        if by_variant:
            return {f"{v}:{c}" for v, c in _VARIANT_CHECK.findall(str(failed))}
        return set(_CHECK_ID.findall(str(failed)))
    return None


def mutant_verdict(mutant: Mutant, case: str, transport: str) -> Optional[Set[str]]:
    """What the mutant's run of ``case`` over ``transport`` fails for (see :func:`verdict`)."""
    return verdict(mutant_case(mutant, case, transport), bool(mutant.variants))


def expected_verdict(mutant: Mutant, case: str, transport: str) -> Optional[Set[str]]:
    """What it must fail for there: its checks, per variant where it names the variants."""
    if transport not in mutant.transports:
        return None
    if not mutant.variants:
        return set(mutant.checks)
    scenario, mode = case.split("/")
    has = {v.name for v in ZOO_WIRES[mutant.wire].variants(scenario, mode)}
    return {f"{v}:{c}" for v in mutant.variants if v in has for c in mutant.checks}


#: Checks whose mutants spend their case waiting (for the bound, or for a close that
#: never comes); they run wide, apart from the rest, which run narrow so that a busy
#: machine cannot push a prompt abort past its half-second bound. A waiting case is
#: idle for a second or more, so about 130 of them at 48 at once take about three
#: rounds of that; with asyncio's debug mode (CONFORMANCE_LONG_TESTS=1) each costs
#: more, and they run 16 at once.
WAITING_CHECKS = frozenset(
    {"finished", "connection-closed", "abort-promptly", "read-timeout", "retry-growth"}
)
WAITING_JOBS = 16 if LONG_TESTS else 48


def run_all(jobs: Iterable[Tuple[Mutant, str, str]]) -> List[Tuple[Mutant, str, str, Optional[Set[str]]]]:
    # The jobs run one after another on the event loops each leaves as it found them, as a
    # matrix runs its cases.
    with asyncio_debug_in_long_runs_only(), kept_loops():
        return _run_all(list(jobs))


def _run_all(listed: List[Tuple[Mutant, str, str]]) -> List[Tuple[Mutant, str, str, Optional[Set[str]]]]:
    results: Dict[Tuple[str, str, str, str], Optional[Set[str]]] = {}

    def key(job: Tuple[Mutant, str, str]) -> Tuple[str, str, str, str]:
        return job[0].wire, job[0].name, job[1], job[2]

    def waits(job: Tuple[Mutant, str, str]) -> bool:
        return bool(WAITING_CHECKS & set(job[0].checks)) and job[2] in job[0].transports

    for group, width in (
        ([j for j in listed if not waits(j)], JOBS),
        ([j for j in listed if waits(j)], WAITING_JOBS),
    ):
        with ThreadPoolExecutor(max_workers=width) as pool:
            for job, result in zip(group, pool.map(_sited, group)):
                results[key(job)] = result
    return [(m, c, t, results[key((m, c, t))]) for m, c, t in listed]


def _sited(job: Tuple[Mutant, str, str]) -> Optional[Set[str]]:
    """:func:`mutant_verdict`, the sites it reported from kept in :data:`SITES_SEEN`."""
    mutant, case, transport = job
    with SITES.recording() as sites:
        result = mutant_verdict(mutant, case, transport)
    SITES_SEEN[mutant.wire, mutant.name, case, transport] = frozenset(sites)
    return result


def wrong_verdicts(jobs: List[Tuple[Mutant, str, str]]) -> List[str]:
    """The jobs whose verdict is not the declared one, each as a line to show.

    A job wrong in the crowd (48 waiting cases beside the rest, asyncio's debug mode in
    the long run) is run once more on its own before it counts: on a loaded machine a
    backend that raises at once can still miss the half-second bound. A verdict wrong
    for a reason of its own is wrong again alone, and both verdicts are shown.
    """
    wrong = []
    for mutant, case, transport, checks in run_all(jobs):
        expected = expected_verdict(mutant, case, transport)
        if checks == expected:
            continue
        with asyncio_debug_in_long_runs_only():
            alone = mutant_verdict(mutant, case, transport)
        if alone != expected:
            got = " then ".join("a pass" if v is None else str(sorted(v)) for v in (checks, alone))
            want = "a pass" if expected is None else sorted(expected)
            wrong.append(f"{mutant.wire} {mutant.name} {case} over {transport}: expected {want}, got {got}")
    return wrong


def case_names(wire: str) -> Set[str]:
    """The cases of the zoo's ``wire`` that run (not skipped by the wire itself)."""
    played = ZOO_WIRES[wire]
    reference = REFERENCE_BACKENDS[played.name]
    target = BackendConformanceTarget(
        "names", played, lambda url: reference(url, False), read_timeout=ZOO_READ_TIMEOUT
    )
    return {case.name for case in backend_conformance_cases(target) if not case.skip}


class ZooTests(unittest.TestCase):
    def test_every_shipped_wire_has_mutants(self) -> None:
        """No wire ships without a zoo of its own."""
        self.assertEqual(sorted(set(WIRES) - set(MUTANTS)), [])

    def test_declarations_name_known_wires_cases_and_checks(self) -> None:
        """Each mutant names a shipped wire, a unique name, cases that run, and checks that exist."""
        for wire, mutants in MUTANTS.items():
            with self.subTest(wire=wire):
                self.assertIn(wire, ZOO_WIRES)
                names = [m.name for m in mutants]
                self.assertEqual(len(names), len(set(names)), names)
                runs = case_names(wire)
                for mutant in mutants:
                    self.assertTrue(mutant.checks and mutant.cases, f"{mutant.name} declares nothing")
                    self.assertLessEqual(set(mutant.checks), set(CHECKS), mutant.name)
                    self.assertLessEqual(set(mutant.cases), runs, mutant.name)
                    self.assertLessEqual(set(mutant.transports), set(TRANSPORTS), mutant.name)
                    for case in mutant.cases:
                        scenario, mode = case.split("/")
                        names = {v.name for v in ZOO_WIRES[wire].variants(scenario, mode)}
                        self.assertTrue(
                            not mutant.variants or names & set(mutant.variants), (mutant.name, case)
                        )

    def test_every_case_catches_a_mutant_for_its_answer(self) -> None:
        """Per shipped wire, every case that runs is declared by a mutant caught for what it answered."""
        for wire, mutants in sorted(MUTANTS.items()):
            if wire not in WIRES:
                continue  # a configured wire: its own shapes are held below, the rest are the shipped wire's
            with self.subTest(wire=wire):
                covered = {c for m in mutants if not m.request_level for c in m.cases}
                self.assertEqual(sorted(case_names(wire) - covered), [], f"{wire}: cases no mutant guards")

    def test_every_server_shape_catches_a_mutant_of_its_own(self) -> None:
        """Each OpenAI-compatible server's variant, in each case it plays, catches a mutant of its own."""
        from conformance.wires.openai_chat._servers import SERVER_ROWS

        wire = ZOO_WIRES[zoo.SERVERS_ZOO]
        declared = {
            (case, variant)
            for mutant in MUTANTS[zoo.SERVERS_ZOO]
            if not mutant.request_level
            for case in mutant.cases
            for variant in mutant.variants
        }
        missing = []
        for key, rows in SERVER_ROWS.items():
            scenario, _, only = key.partition("/")
            for _, variant in rows:
                for mode in (only,) if only else ("chat", "stream"):
                    case = f"{scenario}/{mode}"
                    if case in case_names(zoo.SERVERS_ZOO) and variant in wire.variants(scenario, mode):
                        if (case, variant.name) not in declared:
                            missing.append(f"{case} [{variant.name}]")
        self.assertEqual(missing, [], "server shapes no mutant is caught by")

    def test_each_mutant_is_caught_where_and_why_it_says(self) -> None:
        """Each mutant fails its cases for exactly its checks on its transports, and passes them elsewhere."""
        wrong = wrong_verdicts(every_job())
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_a_wrong_declaration_is_still_reported_after_the_run_alone(self) -> None:
        """Running a wrong verdict once more on its own shows it again, with both verdicts."""
        mutant = next(m for m in MUTANTS["openai-chat"] if m.checks != ("finished",))
        misdeclared = dataclasses.replace(mutant, checks=("finished",))
        wrong = wrong_verdicts([(misdeclared, misdeclared.cases[0], "h1")])
        self.assertEqual(len(wrong), 1, wrong)
        self.assertIn("expected ['finished'], got [", wrong[0])
        self.assertIn("] then [", wrong[0])

    def test_every_reporting_site_is_the_only_thing_catching_some_mutant(self) -> None:
        """Taking any one reporting site out (it reports nothing) lets a mutant only it catches pass."""
        jobs = every_job()
        if not all((m.wire, m.name, c, t) in SITES_SEEN for m, c, t in jobs):
            run_all(jobs)  # run alone, not after the zoo's own test
        # A site's guard is the job that reported from it and from the fewest others: alone,
        # or beside a site whose words it re-words (headers-later quotes the headers check's
        # lines), which its taking out then silences too. The sabotage below proves each.
        # Where several jobs report from a site alone, each is tried in turn: taking a site
        # out can let a later one of the check speak for the same chunk (finish-last names
        # the first thing a chunk after the finish reason carries, so without the text's
        # words a job whose later chunk carries usage is still caught).
        candidates: Dict[str, List[Tuple[int, int, Tuple[Mutant, str, str]]]] = {}
        for order, (mutant, case, transport) in enumerate(jobs):
            sites = SITES_SEEN[mutant.wire, mutant.name, case, transport]
            if expected_verdict(mutant, case, transport) is None:
                continue
            for site in sites:
                if len(sites) < 3:
                    candidates.setdefault(site, []).append((len(sites), order, (mutant, case, transport)))
        guards: Dict[str, List[Tuple[Mutant, str, str]]] = {
            site: [job for _, _, job in sorted(found, key=lambda c: (c[0], c[1]))][:CANDIDATES]
            for site, found in candidates.items()
        }
        names = [site.name for site in SITES.sites]
        unguarded = [n for n in names if n not in guards and n not in UNGUARDED_SITES]
        self.assertEqual(unguarded, [], "reporting sites that no mutant alone is caught by")
        stale = sorted(set(UNGUARDED_SITES) & (set(guards) | (set(UNGUARDED_SITES) - set(names))))
        self.assertEqual(stale, [], "sites listed as unguarded that are guarded, or are gone")

        def sabotaged(item: Tuple[str, List[Tuple[Mutant, str, str]]]) -> Optional[str]:
            site, jobs_of_site = item
            still = []
            for mutant, case, transport in jobs_of_site:
                with SITES.without(site):
                    got = mutant_verdict(mutant, case, transport)
                if got is None:
                    return None
                still.append(f"{mutant.wire} {mutant.name} {case}: {sorted(got)}")
            return f"without {site}, every job that reported from it is still caught: " + "; ".join(still)

        with asyncio_debug_in_long_runs_only(), kept_loops(), ThreadPoolExecutor(max_workers=JOBS) as pool:
            caught = [c for c in pool.map(sabotaged, sorted(guards.items(), key=lambda i: i[0])) if c]
        self.assertEqual(caught, [], "\n".join(caught))


#: How many of the jobs that report from a site (those reporting from fewest sites first)
#: the sabotage tries before it calls the site unguarded.
CANDIDATES = 64

#: Reporting sites no mutant is caught by alone, each with the reason it needs none.
UNGUARDED_SITES: Dict[str, str] = {}


def every_job() -> List[Tuple[Mutant, str, str]]:
    """Every mutant's every declared case on each of its transports this run proves."""
    return [
        (mutant, case, transport)
        for mutants in MUTANTS.values()
        for mutant in mutants
        for case in mutant.cases
        for transport in transports_for(mutant)
    ]

if __name__ == "__main__":
    unittest.main()
