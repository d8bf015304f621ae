"""How long ``python -m conformance`` takes: the backend suite alone, and both suites.

Each round runs the command once per setting, in a fresh interpreter and in a rotating
order, so that a busy machine weighs on each alike: ``--suite backend`` (the backend
suite), ``--suite both`` (the default: the backend suite and the agent-loop suite),
and ``--suite loop`` (the agent-loop suite alone). The figure is the one the command
prints for its matrix ("in 2.41 s"), the main job's time without the interpreter's
start; the wall time of the whole command is shown beside it. Medians over rounds,
and the load average before and after, since the machine may be shared.

Run from the repository root: ``python bench/bench_suites.py [--rounds N] [-- ARGS]``;
ARGS go to every command (``-- --jobs 8``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
SUITES = ("backend", "both", "loop")
GOAL_S = 3.0
_SUMMARY = re.compile(r"^(\d+) cases: (\d+) passed, (\d+) failed, \d+ skipped in ([0-9.]+) s", re.M)


def run_once(suite: str, extra: Sequence[str]) -> Tuple[float, float, int, int]:
    """(matrix seconds, wall seconds, cases, failed) for one run of the command."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "--suite", suite, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    wall = time.perf_counter() - started
    match = _SUMMARY.search(done.stdout)
    if match is None:
        raise SystemExit(
            f"--suite {suite}: no summary line in the output:\n{done.stdout[-2000:]}\n{done.stderr}"
        )
    return float(match.group(4)), wall, int(match.group(1)), int(match.group(3))


def load() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} (1 min) {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("extra", nargs="*", help="arguments for every command, after --")
    args = parser.parse_args(argv)
    print(f"python -m conformance, {args.rounds} rounds; at start: {load()}")
    times: Dict[str, List[Tuple[float, float]]] = {s: [] for s in SUITES}
    counts: Dict[str, int] = {}
    failed = 0
    for round_ in range(args.rounds):
        order = SUITES[round_ % len(SUITES) :] + SUITES[: round_ % len(SUITES)]
        line = []
        for suite in order:
            matrix, wall, cases, bad = run_once(suite, args.extra)
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
    verdict = "met" if both < GOAL_S else "not met"
    print(
        f"\nboth suites take {both / backend:.2f}x the backend suite alone; goal < {GOAL_S:.0f} s: {verdict}"
    )
    if failed:
        print(f"{failed} case(s) failed along the way: the figures time a failing run")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
