"""What importing the library costs a test module, in fresh interpreters.

Measures, interleaved round by round so that a busy machine weighs on each alike:

* ``import unittest``, which every test module loads anyway, as the yardstick;
* ``import conformance``;
* ``from conformance import BackendConformanceTestCase, openai_chat_wire``, what a test
  module of the tutorial does, and which of asyncio, h2, socket and the other wires it
  pulls in (none should load before a case runs);
* ``import conformance.gate``, and what a test module of the gate's tutorial imports
  (``AgentLoopConformanceTestCase`` and a wire), which must load neither asyncio nor ssl:
  the loop driver, the recorder and the replay need them only once a case runs.

The goal is each of the two tutorials' imports under 50 ms (the minimum of the rounds,
the figure least disturbed by other work on the machine). Run: ``python bench/bench_import.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 50.0

SNIPPETS = {
    "import unittest": "import unittest",
    "import conformance": "import conformance",
    "the tutorial's import": "from conformance import BackendConformanceTestCase, openai_chat_wire",
    "import conformance.gate": "import conformance.gate",
    "the gate tutorial's import": (
        "from conformance import openai_chat_wire; from conformance.gate import AgentLoopConformanceTestCase"
    ),
}
#: The imports held to :data:`GOAL_MS`.
GOALS = ("the tutorial's import", "the gate tutorial's import")
PROBE = (
    "import sys, time\n"
    "t = time.perf_counter()\n"
    "{snippet}\n"
    "elapsed = (time.perf_counter() - t) * 1000\n"
    "loaded = [m for m in ('asyncio', 'ssl', 'h2', 'socket', 'unittest', 'conformance.wires.gemini')"
    " if m in sys.modules]\n"
    "print(elapsed, ','.join(loaded) or '-')\n"
)


def measure(rounds: int) -> Tuple[Dict[str, List[float]], Dict[str, str]]:
    """Milliseconds per import, per round, and which of the watched modules each loaded."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # As an installed package is: compiled once (pip compiles on install), then read
    # from the bytecode cache. An environment that forbids writing the cache would
    # time the compiler instead, on every run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    times: Dict[str, List[float]] = {name: [] for name in SNIPPETS}
    loaded: Dict[str, str] = {}
    for snippet in SNIPPETS.values():  # the warm-up that writes the cache; not timed
        subprocess.run([sys.executable, "-c", snippet], cwd=str(ROOT), env=env, timeout=60, check=True)
    for _ in range(rounds):
        for name, snippet in SNIPPETS.items():
            done = subprocess.run(
                [sys.executable, "-c", PROBE.format(snippet=snippet)],
                capture_output=True,
                text=True,
                cwd=str(ROOT),
                env=env,
                timeout=60,
                check=True,
            )
            elapsed, modules = done.stdout.split()
            times[name].append(float(elapsed))
            loaded[name] = modules
    return times, loaded


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"Python {sys.version.split()[0]}, load average {load:.1f}; {args.rounds} fresh interpreters each")
    times, loaded = measure(args.rounds)
    yardstick = min(times["import unittest"])
    print(f"\n  {'import':<28}{'min ms':>9}{'median ms':>11}{'min vs unittest':>17}  loads")
    for name in SNIPPETS:
        best = min(times[name])
        print(
            f"  {name:<28}{best:>9.1f}{statistics.median(times[name]):>11.1f}"
            f"{best / yardstick:>16.2f}x  {loaded[name]}"
        )
    print()
    for name in GOALS:
        best = min(times[name])
        clean = not {"asyncio", "ssl"} & set(loaded[name].split(","))
        verdict = "met" if best < GOAL_MS and clean else "NOT MET"
        print(f"{name}: {best:.1f} ms at best, asyncio and ssl unloaded: {clean} "
              f"(goal < {GOAL_MS:.0f} ms and neither: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
