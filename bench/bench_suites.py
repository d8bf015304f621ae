"""How long ``python -m conformance`` takes, and what a case costs, beside the code before a change.

Two sections, each run in fresh interpreters in a rotating order, so that a busy
machine weighs on each alike; medians over rounds, and the load average before and
after, since the machine may be shared.

``matrix``: the command once per setting: ``--suite backend`` (the backend suite),
``--suite both`` (the default: the backend suite and the agent-loop suite), and
``--suite loop`` (the agent-loop suite alone). The figure is the one the command
prints for its matrix ("in 2.41 s"), the main job's time without the interpreter's
start; the wall time of the whole command is shown beside it.

``cost``: what a case costs, for this tree and, with ``--base REV``, for the code at
REV (extracted with ``git archive`` into a temporary folder and imported from there by
the same interpreter), measured in the same rounds, one beside the other:

* the CPU time (user + system, worker processes included) of the default run, of
  each suite alone and of each transport's half alone, per case (the median over the
  rounds, and the spread: min, quartiles, max), the h2c half beside the HTTP/1.1 half,
  and the default run's wall time;
* the bare backend call: the OpenAI Chat reference backend alone, created, called and
  closed against a provider already running, per call, beside the whole case of the
  same scenario (fresh provider, driver, checks);
* one target's backend cases over HTTP/1.1 run one after another, as a test runner
  runs a user's class (on the event loops a case leaves for the next, as the class does),
  but the scenarios that wait on purpose for part of the target's read timeout:
  the lower quartile of every repetition of every round (``--reps`` a round), with
  their spread;
* the gate's cases of one wire (the reference loop over OpenAI Chat, HTTP/1.1), one
  after another, per stage: CPU and wall, beside a backend case.

Each figure is printed beside its goal. Run from the repository root:
``python bench/bench_suites.py [--section matrix|cost] [--rounds N] [--base REV] [-- ARGS]``;
ARGS go to every command of the ``matrix`` section (``-- --jobs 8``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
SUITES = ("backend", "both", "loop")
#: The default run's two halves, each run alone in the cost section: the h2c half's CPU
#: a case is held to GOAL_H2C_RATIO times the HTTP/1.1 half's.
TRANSPORTS = ("http/1.1", "h2c")
GOAL_H2C_RATIO = 1.3
#: The default run's wall goal: 3 s on 2 cores, set when it ran GOAL_CASES cases. The
#: run has grown since (more wires, the gate's suite), so the goal is held per case:
#: GOAL_S / GOAL_CASES of wall a case, times the cases the run has now.
GOAL_S, GOAL_CASES = 3.0, 888
#: The goals of the cost section: CPU per case of the default run, its wall time, and a
#: user's one target: 32 backend cases over HTTP/1.1 in 60 ms.
GOAL_CPU_MS = 4.0
GOAL_TARGET_MS, GOAL_TARGET_CASES = 60.0, 32
#: The gate stages that wait on purpose, exempt from "no more than a backend case".
WAITING_STAGES = ("timeout",)
#: The backend scenarios that wait on purpose, left out of the one-target figure.
WAITING_SCENARIOS = ("slow-first-token", "stall")
#: The target the one-target, bare-call and gate figures are taken on.
WIRE = "openai-chat"
_SUMMARY = re.compile(r"^(\d+) cases: (\d+) passed, (\d+) failed, \d+ skipped in ([0-9.]+) s", re.M)


# -- the matrix section --------------------------------------------------------------------------


def run_once(suite: str, extra: Sequence[str], tree: Path = ROOT) -> Tuple[float, float, int, int, float]:
    """(matrix seconds, wall seconds, cases, failed, CPU seconds) for one run of the command in ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "--suite", suite, *extra],
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(tree)},
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    match = _SUMMARY.search(done.stdout)
    if match is None:
        raise SystemExit(
            f"--suite {suite} in {tree}: no summary line in the output:\n{done.stdout[-2000:]}\n{done.stderr}"
        )
    return float(match.group(4)), wall, int(match.group(1)), int(match.group(3)), cpu


def wall_goal(cases: int) -> float:
    """The default run's wall goal for ``cases`` cases: :data:`GOAL_S` for :data:`GOAL_CASES`, per case."""
    return GOAL_S * cases / GOAL_CASES


def load() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} (1 min) {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def section_matrix(rounds: int, extra: Sequence[str]) -> int:
    print(f"python -m conformance, {rounds} rounds; at start: {load()}")
    times: Dict[str, List[Tuple[float, float]]] = {s: [] for s in SUITES}
    counts: Dict[str, int] = {}
    failed = 0
    for round_ in range(rounds):
        order = SUITES[round_ % len(SUITES) :] + SUITES[: round_ % len(SUITES)]
        line = []
        for suite in order:
            matrix, wall, cases, bad, _ = run_once(suite, extra)
            times[suite].append((matrix, wall))
            counts[suite] = cases
            failed += bad
            line.append(f"{suite} {matrix:.2f} s")
        print(f"  round {round_ + 1}: " + ", ".join(line))
    print(f"at end: {load()}\n")
    print(f"{'suite':10} {'cases':>6} {'median s':>9} {'min s':>7} {'max s':>7} {'wall s':>7}")
    for suite in SUITES:
        matrix = [m for m, _ in times[suite]]
        wall = [w for _, w in times[suite]]
        print(
            f"{suite:10} {counts[suite]:>6} {statistics.median(matrix):>9.2f} {min(matrix):>7.2f} "
            f"{max(matrix):>7.2f} {statistics.median(wall):>7.2f}"
        )
    both = statistics.median(m for m, _ in times["both"])
    backend = statistics.median(m for m, _ in times["backend"])
    goal = wall_goal(counts["both"])
    verdict = "met" if both <= goal else "not met"
    print(
        f"\nboth suites take {both / backend:.2f}x the backend suite alone; "
        f"{both * 1000 / counts['both']:.2f} ms of wall a case; goal <= {goal:.1f} s for "
        f"{counts['both']} cases ({GOAL_S:g} s for {GOAL_CASES}): {verdict}"
    )
    if failed:
        print(f"{failed} case(s) failed along the way: the figures time a failing run")
    return 1 if failed else 0


# -- the probes: run in a fresh interpreter, importing conformance from the tree measured --------


def _timed(call: Any) -> Tuple[float, float]:
    """(CPU ms of this whole process, wall ms) that ``call()`` took."""
    cpu, wall = time.process_time(), time.perf_counter()
    call()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


class _Requests:
    """Counts the generation requests the cases send, by wrapping the outline's provider run."""

    def __init__(self) -> None:
        self.count = 0
        import importlib

        for name in ("conformance._outline", "conformance.gate._loop_driver"):
            try:
                module = importlib.import_module(name)
            except ImportError:  # an older tree, without the outline: no counts
                continue
            original = getattr(module, "run_on_provider", None)
            if original is not None:
                module.run_on_provider = self._wrap(original)  # type: ignore[attr-defined]

    def _wrap(self, original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            driver, requests = original(*args, **kwargs)
            wire = driver.case.target.wire
            self.count += sum(1 for request in requests if wire.is_generation(request))
            return driver, requests

        return counted

    def taken(self) -> int:
        """The requests counted since the last call."""
        count, self.count = self.count, 0
        return count


#: The ``kept_loops`` context the probe entered. Held here: a context made by a generator and
#: entered without a reference is collected at once, which runs its exit and stops the keeping.
_KEEPING: List[Any] = []


def _as_a_class_runs() -> None:
    """Run the probe's cases as a test class runs its own, where the tree does it one way: on
    the event loops each case leaves for the next (``kept_loops``, held for the probe's life)."""
    try:
        from conformance._loops import kept_loops
    except ImportError:  # a tree from before: every case starts a loop of its own
        return
    keeping = kept_loops()
    keeping.__enter__()
    _KEEPING.append(keeping)


def probe_target(reps: int) -> Dict[str, Any]:
    """One target's backend cases over HTTP/1.1, one after another; and each case alone."""
    from conformance._targets import cases_of, outcome, reference_targets

    target = reference_targets([WIRE], ["http/1.1"])[0][1]
    _as_a_class_runs()
    # The scenarios that wait on purpose (a provider silent for part of the read timeout the
    # target declares) are left out: the goal is the cost of a case, not of its waits.
    cases = [
        c for c in cases_of(target) if c.scenario not in WAITING_SCENARIOS and outcome(c)[0] != "skip"
    ]  # also the warm-up
    runs = []
    per_case: Dict[str, List[float]] = {c.name: [] for c in cases}
    requests: Dict[str, int] = {}
    counter = _Requests()
    for _ in range(reps):
        total_cpu, total_wall = 0.0, 0.0
        for case in cases:
            cpu, wall = _timed(lambda case=case: outcome(case))
            requests[case.name] = counter.taken()
            per_case[case.name].append(cpu)
            total_cpu += cpu
            total_wall += wall
        runs.append((total_cpu, total_wall))
    # A case runs each variant of its scenario on a provider of its own: the call it is
    # set beside is one variant's.
    runs_of = {case.name: len(case.variants()) for case in cases}
    return {
        "cases": len(cases),
        "cpu_ms": [c for c, _ in runs],
        "wall_ms": [w for _, w in runs],
        "case_cpu_ms": {name: statistics.median(v) for name, v in per_case.items()},
        "runs": runs_of,
        "requests": requests,
    }


def probe_bare(reps: int) -> Dict[str, Any]:
    """The reference backend alone, per call, against one provider already running: the cases
    whose request is the plain conformance request (not abort or cancel, not multi-turn)."""
    import asyncio

    from conformance.cases import scenario_reply
    from conformance.fixture import conformance_request
    from conformance.provider import start_fake_provider
    from conformance.reference import REFERENCE_BACKENDS
    from conformance.scenarios import SCENARIOS
    from conformance.wires import WIRES

    wire, create = WIRES[WIRE], REFERENCE_BACKENDS[WIRE]
    plain = [
        (s, m)
        for s, row in SCENARIOS.items()
        for m in row.modes
        if s not in ("abort", "cancel", "tool-result", "parallel-tool-calls") and not wire.absent_in(s, m)
    ]

    async def call(url: str, mode: str) -> None:
        backend = create(url, False)
        try:
            request = conformance_request("conformance-model")
            if mode == "chat":
                await backend.chat(request)
            else:
                async for _ in backend.chat_stream(request):
                    pass
        except Exception:  # noqa: BLE001 - the error scenarios end this way, as intended
            pass
        finally:
            closing = getattr(backend, "aclose", None)
            if closing is not None:
                await closing()

    per_case: Dict[str, List[float]] = {}
    loop = asyncio.new_event_loop()
    try:
        with start_fake_provider() as provider:
            for scenario, mode in plain:

                def handler(request: Any, scenario: str = scenario, mode: str = mode) -> Any:
                    if not wire.is_generation(request):
                        return wire.aux_reply(request)
                    return scenario_reply(wire, scenario, mode, request)

                provider.reply(handler)
                def once(mode: str = mode) -> None:
                    loop.run_until_complete(call(provider.url, mode))

                once()  # warm-up
                per_case[f"{scenario}/{mode}"] = [_timed(once)[0] for _ in range(reps)]
    finally:
        loop.close()
    return {"case_cpu_ms": {name: statistics.median(v) for name, v in per_case.items()}}


def probe_gate(reps: int) -> Dict[str, Any]:
    """The gate's cases of one wire over HTTP/1.1, one after another: CPU and wall per case."""
    from conformance._targets import cases_of, outcome, reference_loop_targets

    target = reference_loop_targets([WIRE], ["http/1.1"])[0][1]
    _as_a_class_runs()
    cases = [c for c in cases_of(target) if outcome(c)[0] != "skip"]  # also the warm-up
    cpu: Dict[str, List[float]] = {c.name: [] for c in cases}
    wall: Dict[str, List[float]] = {c.name: [] for c in cases}
    requests: Dict[str, int] = {}
    counter = _Requests()
    for _ in range(reps):
        for case in cases:
            spent, took = _timed(lambda case=case: outcome(case))
            requests[case.name] = counter.taken()
            cpu[case.name].append(spent)
            wall[case.name].append(took)
    return {
        "cpu_ms": {n: statistics.median(v) for n, v in cpu.items()},
        "wall_ms": {n: statistics.median(v) for n, v in wall.items()},
        "requests": requests,
    }


PROBES = {"target": probe_target, "bare": probe_bare, "gate": probe_gate}


def run_probe(name: str, tree: Path, reps: int) -> Dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--probe", name, "--reps", str(reps)],
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"probe {name} in {tree} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result: Dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- the cost section ----------------------------------------------------------------------------


def extract(rev: str, into: Path) -> str:
    """The tree at ``rev`` written into ``into``; its short commit hash."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    # Compiled now, so that the first round does not time the compiling.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "conformance")], check=True)
    return commit


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _spread(values: Sequence[float]) -> str:
    """Min, quartiles and max of ``values``, and how many there were: one figure's range."""
    if not values:
        return "no samples"
    if len(values) < 2:
        return f"{values[0]:.2f} (1 sample)"
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return (
        f"min {min(values):.2f}, quartiles {q1:.2f} / {q2:.2f} / {q3:.2f}, max {max(values):.2f} "
        f"({len(values)} samples)"
    )


def _row(label: str, base: Optional[float], this: float, goal: str = "", unit: str = "") -> str:
    shown = f"{base:>10.2f}" if base is not None else f"{'-':>10}"
    ratio = f"{this / base:>7.2f}x" if base else f"{'':>8}"
    return f"  {label:44} {shown} {this:>10.2f} {ratio}  {goal}"


def _verdict(value: float, goal: float) -> str:
    return "met" if value <= goal else "NOT MET"


def section_cost(rounds: int, base_rev: Optional[str], reps: int) -> int:
    temp = Path(tempfile.mkdtemp(prefix="bench-suites-"))
    try:
        trees: Dict[str, Path] = {"this": ROOT}
        title = "this tree"
        if base_rev:
            commit = extract(base_rev, temp)
            trees = {"base": temp, "this": ROOT}
            title = f"this tree beside {base_rev} ({commit})"
        return _cost(trees, title, rounds, reps)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _cost(trees: Dict[str, Path], title: str, rounds: int, reps: int) -> int:
    print(f"== The cost of a case: {title}, {rounds} rounds, interleaved; at start: {load()}")
    suites: Dict[Tuple[str, str], List[Tuple[float, float, int]]] = {}
    probes: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    failed = 0
    names = list(trees)
    for round_ in range(rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for version in order:
            for suite in SUITES:
                _, wall, cases, bad, cpu = run_once(suite, (), trees[version])
                suites.setdefault((version, suite), []).append((cpu, wall, cases))
                failed += bad
            for transport in TRANSPORTS:
                _, wall, cases, bad, cpu = run_once("both", ("--transport", transport), trees[version])
                suites.setdefault((version, transport), []).append((cpu, wall, cases))
                failed += bad
            for probe in PROBES:
                probes.setdefault((version, probe), []).append(run_probe(probe, trees[version], reps))
        print(f"  round {round_ + 1} done; {load()}")
    print(f"at end: {load()}\n")
    has_base = "base" in trees

    def value(version: str, pick: Any) -> Optional[float]:
        if version not in trees:
            return None
        return float(pick(version))

    def suite_cpu(version: str, suite: str) -> float:
        runs = suites[(version, suite)]
        return _median([cpu * 1000 / cases for cpu, _, cases in runs])

    def suite_wall(version: str, suite: str) -> float:
        return _median([wall for _, wall, _ in suites[(version, suite)]])

    header = f"  {'':44} {'base':>10} {'this':>10} {'ratio':>8}  goal"
    print(header if has_base else header.replace("base", "    "))
    cases = {s: suites[("this", s)][0][2] for s in SUITES}
    both_cpu = suite_cpu("this", "both")
    print(_row(
        f"both suites ({cases['both']} cases), CPU ms a case",
        value("base", lambda v: suite_cpu(v, "both")),
        both_cpu,
        f"<= {GOAL_CPU_MS:g} ms: {_verdict(both_cpu, GOAL_CPU_MS)}",
    ))
    both_wall = suite_wall("this", "both")
    goal_wall = wall_goal(cases["both"])
    print(_row(
        "both suites, wall s (default run)",
        value("base", lambda v: suite_wall(v, "both")),
        both_wall,
        f"<= {goal_wall:.1f} s ({GOAL_S:g} s for {GOAL_CASES} cases): {_verdict(both_wall, goal_wall)}",
    ))
    per_case_goal = GOAL_S * 1000 / GOAL_CASES
    print(_row(
        "both suites, wall ms a case",
        value("base", lambda v: suite_wall(v, "both") * 1000 / suites[(v, "both")][0][2]),
        both_wall * 1000 / cases["both"],
        f"<= {per_case_goal:.2f} ms: {_verdict(both_wall * 1000 / cases['both'], per_case_goal)}",
    ))
    for suite, label in (("backend", "backend suite"), ("loop", "gate suite")):
        print(_row(
            f"{label} ({cases[suite]} cases), CPU ms a case",
            value("base", lambda v, s=suite: suite_cpu(v, s)),
            suite_cpu("this", suite),
        ))
    for transport in TRANSPORTS:
        print(_row(
            f"the {transport} half ({suites[('this', transport)][0][2]} cases), CPU ms a case",
            value("base", lambda v, t=transport: suite_cpu(v, t)),
            suite_cpu("this", transport),
        ))

    def h2c_ratio(version: str) -> float:
        return suite_cpu(version, "h2c") / suite_cpu(version, "http/1.1")

    this_ratio = h2c_ratio("this")
    print(_row(
        "the h2c half beside the HTTP/1.1 half, CPU",
        value("base", h2c_ratio),
        this_ratio,
        f"<= {GOAL_H2C_RATIO:g}x: {_verdict(this_ratio, GOAL_H2C_RATIO)}",
    ))
    print("  the spread of each run's CPU ms a case, both suites:")
    for version in trees:
        print(f"    {version}: {_spread([cpu * 1000 / n for cpu, _, n in suites[(version, 'both')]])}")

    def target_samples(version: str, key: str) -> List[float]:
        return [sample for p in probes[(version, "target")] for sample in p[key]]

    def target_ms(version: str, key: str) -> float:
        # The lower quartile of every sample of every round: steadier than a median of
        # a few, which one busy moment moves, and not the one luckiest run a min is.
        samples = target_samples(version, key)
        if len(samples) < 2:
            return _median(samples)
        return statistics.quantiles(samples, n=4, method="inclusive")[0]

    count = probes[("this", "target")][0]["cases"]
    this_target = target_ms("this", "wall_ms")
    scaled = this_target / count * GOAL_TARGET_CASES
    print(_row(
        f"one target's {count} backend cases, wall ms",
        value("base", lambda v: target_ms(v, "wall_ms")),
        this_target,
        f"{scaled:.0f} ms for {GOAL_TARGET_CASES} at that rate; <= {GOAL_TARGET_MS:g}: "
        f"{_verdict(scaled, GOAL_TARGET_MS)}",
    ))
    print(_row(
        f"one target's {count} backend cases, CPU ms",
        value("base", lambda v: target_ms(v, "cpu_ms")),
        target_ms("this", "cpu_ms"),
    ))
    print("  (one target: the lower quartile of every run's samples; their spread, wall ms:)")
    for version in trees:
        print(f"    {version}: {_spread(target_samples(version, 'wall_ms'))}")

    def per_case(version: str, probe: str, key: str = "case_cpu_ms") -> Dict[str, float]:
        runs = [p[key] for p in probes[(version, probe)]]
        return {name: _median([r[name] for r in runs]) for name in runs[0]}

    def bare_and_case(version: str) -> Tuple[float, float]:
        bare = per_case(version, "bare")
        case = per_case(version, "target")
        runs = probes[(version, "target")][0]["runs"]
        shared = [n for n in bare if n in case]
        return _median([bare[n] for n in shared]), _median([case[n] / runs[n] for n in shared])

    this_bare, this_run = bare_and_case("this")
    base_pair = bare_and_case("base") if has_base else None
    # A whole backend case, every variant of it, is what a gate stage is set beside.
    this_case = _median(list(per_case("this", "target").values()))
    print(_row(
        "a backend case (all variants), CPU ms",
        value("base", lambda v: _median(list(per_case(v, "target").values()))),
        this_case,
    ))
    print(_row("the bare backend call, CPU ms", base_pair[0] if base_pair else None, this_bare))
    print(_row(
        "one variant run of those cases, CPU ms", base_pair[1] if base_pair else None, this_run,
        f"{this_run / this_bare:.2f}x the bare call",
    ))

    # The gate's goal, per request: a stage sends 2 to 5 generation requests, a backend
    # case's variant run one (two for the multi-turn scenarios), so a stage is set beside
    # as many backend requests as it sends. Per case is shown too.
    def backend_per_request(version: str) -> Optional[float]:
        found = probes[(version, "target")][0].get("requests")
        if not found:
            return None
        case = per_case(version, "target")
        return _median([case[n] / found[n] for n in case if found.get(n)])

    this_request = backend_per_request("this")
    base_request = backend_per_request("base") if has_base else None
    if this_request is not None:
        print(_row("a backend case, CPU ms a generation request", base_request, this_request))
    gate_cpu = per_case("this", "gate", "cpu_ms")
    gate_wall = per_case("this", "gate", "wall_ms")
    base_cpu = per_case("base", "gate", "cpu_ms") if has_base else {}
    base_wall = per_case("base", "gate", "wall_ms") if has_base else {}
    sent: Dict[str, int] = probes[("this", "gate")][0].get("requests") or {}
    base_sent: Dict[str, int] = (probes[("base", "gate")][0].get("requests") or {}) if has_base else {}
    print(
        f"\n  the gate's {len(gate_cpu)} cases of {WIRE} over HTTP/1.1, one after another, median ms; "
        f"goal: each no more CPU a request than a backend case ({this_request or float('nan'):.2f} ms a "
        f"request; a whole case {this_case:.2f} ms), but {', '.join(WAITING_STAGES)}"
    )
    print(
        f"  {'stage/mode':36} {'cpu base':>9} {'cpu this':>9} {'reqs':>5} {'base/req':>9} {'this/req':>9} "
        f"{'wall base':>10} {'wall this':>10}  goal (a request; a case)"
    )
    over_case, over_request = [], []
    for name in gate_cpu:
        waits = name.split("/")[0] in WAITING_STAGES
        count = sent.get(name, 0)
        mine = gate_cpu[name] / count if count else float("nan")
        theirs = base_cpu.get(name, float("nan")) / base_sent[name] if base_sent.get(name) else float("nan")
        by_case = waits or gate_cpu[name] <= this_case
        by_request = waits or (this_request is not None and count > 0 and mine <= this_request)
        if not by_case:
            over_case.append(name)
        if not by_request:
            over_request.append(name)
        mark = "waits on purpose" if waits else (
            f"{'met' if by_request else 'NOT MET'}; {'met' if by_case else 'NOT MET'}"
        )
        print(
            f"  {name:36} {base_cpu.get(name, float('nan')):>9.2f} {gate_cpu[name]:>9.2f} {count:>5} "
            f"{theirs:>9.2f} {mine:>9.2f} {base_wall.get(name, float('nan')):>10.1f} "
            f"{gate_wall[name]:>10.1f}  {mark}"
        )
    total_cpu, total_wall = sum(gate_cpu.values()), sum(gate_wall.values())
    base_total = ""
    if has_base:
        base_total = f"base {sum(base_cpu.values()):.0f} ms CPU, {sum(base_wall.values()):.0f} ms wall; "
    requests_sent = sum(sent.values())
    print(
        f"  all {len(gate_cpu)}: {base_total}this {total_cpu:.0f} ms CPU, {total_wall:.0f} ms wall, "
        f"{requests_sent} requests ({total_cpu / max(1, requests_sent):.2f} ms CPU a request); "
        f"over a backend case's CPU a request: {len(over_request)}; "
        f"over a whole backend case: {len(over_case)}"
    )
    if failed:
        print(f"\n{failed} case(s) failed along the way: the figures time a failing run")
    return 1 if failed else 0


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--section", choices=("matrix", "cost"), action="append", help="only this section")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", metavar="REV", help="the code to measure beside this tree (cost section)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions inside each probe (cost section)")
    parser.add_argument("--probe", choices=sorted(PROBES), help=argparse.SUPPRESS)
    parser.add_argument("extra", nargs="*", help="arguments for the matrix section's commands, after --")
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps(PROBES[args.probe](args.reps)))
        return 0
    sections = args.section or ["matrix", "cost"]
    status = 0
    if "matrix" in sections:
        status |= section_matrix(args.rounds, args.extra)
    if "cost" in sections:
        if "matrix" in sections:
            print()
        status |= section_cost(args.rounds, args.base, args.reps)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
