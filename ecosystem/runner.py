"""Run every adapter of the conformance table, each in a process of its own, and write the table.

    python -m ecosystem.runner [--only ADAPTER]... [--check] [--jobs N]
    python -m ecosystem.runner --only ADAPTER --explain CASE [--target TEXT]

Strategy: an adapter is a module of ``ecosystem/adapters`` that names its library
(``LIBRARY``, the distribution whose version the table shows), its suite (``KIND``:
``backend`` or ``loop``) and a ``targets()`` function returning the kit's own targets
(:class:`~conformance.BackendConformanceTarget` or
:class:`~conformance.gate.AgentLoopTarget`). Each adapter runs in a fresh process
(``--worker``), so one library's import, its event-loop habits or its crash touches
no other, and a few run at once; the process writes its rows as JSON to a file, and
the parent kills one that outlives its budget and records that as an error. The
rows then go to :mod:`ecosystem.table`, which classifies every failure and renders
the page. The command exits 1 on an unclassified failure, and with ``--check`` on a
verdict that differs from the committed ``results.json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results.json"
#: The same adapters' run against each library's newest release (``--latest``).
RESULTS_LATEST = HERE / "results-latest.json"
CLASSIFICATIONS = HERE / "classifications.json"
PAGE = ROOT / "docs" / "ecosystem.md"
#: An adapter's process is ended past this many seconds (its cases are bounded each,
#: so only a library that blocks its process's exit gets here).
ADAPTER_SECONDS = 600.0
KINDS = ("backend", "loop")
#: Each backend case's bound, in seconds, where the adapter set none longer: a library
#: that builds its client on first use (botocore, LangChain's integrations) can take
#: the kit's default 5 s to send its first request while other adapters run beside it.
BACKEND_SECONDS = 15.0
#: The same for each agent-loop case: a framework that runs its client's blocking calls in
#: threads (LangChain's Bedrock agent, on boto3) can take longer than the kit's default 5 s
#: to end a prompt run when the two cores run ten processes; the stall watch excuses a
#: stall of the whole process, not a share of the cores. A stage's own budget (``timeout``,
#: the retry stages) still bounds it as before; only the hung verdict moves out.
LOOP_SECONDS = 15.0
#: The gate's fixture ids (``fx-<run id>-0001``) carry a random run id of each case's
#: toolset; in a reason it is shown as ``fx-<run>-0001``, so that a page made again
#: from the same verdicts reads the same.
_RUN_ID = re.compile(r"\bfx-[0-9a-f]{4,16}-(\d{4})\b")


def steady(reason: str) -> str:
    """``reason`` without what changes from run to run whatever the verdict: the fixture run ids."""
    return _RUN_ID.sub(r"fx-<run>-\1", reason)


def adapters() -> List[str]:
    """Every adapter's module name, sorted."""
    return sorted(p.stem for p in (HERE / "adapters").glob("*.py") if not p.stem.startswith("_"))


def _cases(target: Any, kind: str) -> List[Any]:
    import dataclasses

    if kind == "backend":
        from conformance import backend_conformance_cases

        target = dataclasses.replace(target, timeout=max(target.timeout, BACKEND_SECONDS))
        return list(backend_conformance_cases(target))
    from conformance.gate import agent_loop_cases

    target = dataclasses.replace(target, timeout=max(target.timeout, LOOP_SECONDS))
    return list(agent_loop_cases(target))


def run_case(case: Any) -> Tuple[str, List[Dict[str, str]]]:
    """One run of a case: its outcome, and each failure's check id and reason."""
    try:
        case.run()
    except unittest.SkipTest:
        return "skip", []
    except AssertionError as error:
        text = str(error)
        problems = table.shaped_problems_in(text) or [("unparsed", text.splitlines()[0][:240], "")]
        found = []
        for check, reason, variant in problems:
            found.append({"case": case.name, "check": check, "reason": steady(reason)})
            if variant:
                found[-1]["variant"] = variant
        return "fail", found
    except Exception as error:  # noqa: BLE001 - a crash is a verdict here, recorded with its type
        text = (str(error).splitlines() or [""])[0][:200]
        return "error", [{"case": case.name, "check": f"error:{type(error).__name__}", "reason": text}]
    return "pass", []


def run_target(adapter: str, library: str, version: str, kind: str, target: Any) -> Dict[str, Any]:
    """One target's row: every case's verdict, and each failure's check id and reason.

    A case that fails is run once more before the failure is believed, as a timing
    bound can be missed while the machine is busy with the other adapters; one that
    then passes is a pass, named under ``retried`` so that the page can say so.
    """
    cases: Dict[str, str] = {}
    failures: List[Dict[str, str]] = []
    retried: List[str] = []
    for case in _cases(target, kind):
        outcome, found = run_case(case)
        if outcome in ("fail", "error"):
            outcome, found = run_case(case)
            if outcome == "pass":
                retried.append(case.name)
        cases[case.name] = outcome
        failures += found
    return {
        "adapter": adapter,
        "library": library,
        "version": version,
        "kind": kind,
        "target": target.name,
        "wire": target.wire.name,
        "cases": cases,
        "failures": failures,
        "retried": retried,
    }


def error_row(adapter: str, library: str, kind: str, reason: str) -> Dict[str, Any]:
    """The row of an adapter that could not run at all: one failure that needs classifying."""
    return {
        "adapter": adapter,
        "library": library,
        "version": "?",
        "kind": kind,
        "target": adapter,
        "wire": "-",
        "cases": {"adapter/run": "error"},
        "failures": [{"case": "adapter/run", "check": "error:adapter", "reason": reason[:240]}],
    }


def worker(adapter: str, out: Path) -> int:
    """Run one adapter's targets in this process and write its rows to ``out``."""
    module = importlib.import_module(f"ecosystem.adapters.{adapter}")
    library, kind = module.LIBRARY, module.KIND
    if kind not in KINDS:
        raise SystemExit(f"{adapter}: KIND must be one of {KINDS}, got {kind!r}")
    version = metadata.version(library)
    rows = [run_target(adapter, library, version, kind, target) for target in module.targets()]
    out.write_text(json.dumps(rows), encoding="utf-8")
    return 0


def run_adapter(python: str, adapter: str, budget: float) -> List[Dict[str, Any]]:
    """One adapter's rows, from a process of its own; an error row if it failed or overran."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "rows.json"
        command = [python, "-m", "ecosystem.runner", "--worker", adapter, "--out", str(out)]
        # A fixed hash seed: a library that makes ids from hash() (any-llm's Gemini call ids)
        # then makes the same ones in every run, and the page shows the same reasons.
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
        try:
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=budget, env=env)
        except subprocess.TimeoutExpired:
            return [error_row(adapter, adapter, "backend", f"the adapter's process ran past {budget:.0f} s")]
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return [error_row(adapter, adapter, "backend", f"exit {done.returncode}: {tail}")]
        rows: List[Dict[str, Any]] = json.loads(out.read_text(encoding="utf-8"))
        return rows


def report(
    results: Dict[str, Any],
    classifications: Sequence[table.Classification],
    committed: Optional[Dict[str, Any]],
    check: bool,
    ran: Optional[Tuple[List[Dict[str, Any]], float]] = None,
) -> int:
    """Print the unclassified failures and changed verdicts; the exit status they make.

    ``ran`` is this run's own rows and time, where it ran only some adapters: the
    summary line counts those, not the whole table the rows were merged into.
    """
    found, unclassified, unused = table.classify(table.failures_of(results["rows"]), classifications)
    status = 0
    for failure in unclassified:
        print(f"UNCLASSIFIED {failure.target} {failure.case} [{failure.check}]: {failure.reason}")
        status = 1
    libraries = {row["library"] for row in results["rows"]}
    for item in unused:
        if item.library in libraries:
            print(f"note: classification {item.id} matched no failure of this run")
    if check:
        if committed is None:
            print("--check: there is no committed results.json to compare with")
            status = 1
        else:
            for line in table.changed_verdicts(committed, results, classifications):
                print(f"CHANGED {line}")
                status = 1
    rows, seconds = ran if ran is not None else (results["rows"], results["seconds"])
    if ran is not None:
        found, unclassified, _ = table.classify(table.failures_of(rows), classifications)
    cases = sum(len(row["cases"]) for row in rows)
    failed = sum(1 for row in rows for v in row["cases"].values() if v in ("fail", "error"))
    print(
        f"ecosystem: {len(rows)} targets, {cases} cases, {failed} failed, "
        f"{len(found)} failures classified, {len(unclassified)} unclassified, in {seconds:.0f} s"
    )
    return status


def _commit() -> str:
    """The kit's commit the run was made at (short), or empty outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def merge(
    committed: Optional[Dict[str, Any]], rows: List[Dict[str, Any]], only: Sequence[str]
) -> List[Dict[str, Any]]:
    """The fresh rows, and where only some adapters ran, the committed rows of the others."""
    if not only or committed is None:
        return rows
    return [row for row in committed["rows"] if row["adapter"] not in only] + rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 dev.py ecosystem", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], metavar="ADAPTER", help="only this adapter")
    parser.add_argument(
        "--check", action="store_true", help="fail on a verdict the committed table does not show"
    )
    parser.add_argument("--jobs", type=int, default=3, help="adapters run at once (default 3)")
    parser.add_argument("--no-write", action="store_true", help="print the verdicts, write no file")
    parser.add_argument("--verbose", action="store_true", help="print every failure, classified or not")
    parser.add_argument(
        "--page-only",
        action="store_true",
        help="render docs/ecosystem.md from the committed results.json, run nothing",
    )
    parser.add_argument(
        "--explain",
        metavar="CASE",
        help="with one --only: run this case (text/chat) and print what the library raised or returned",
    )
    parser.add_argument(
        "--target", default="", metavar="TEXT", help="with --explain: the targets whose name has TEXT"
    )
    parser.add_argument(
        "--latest",
        action="store_true",
        help="this environment holds the newest releases: write results-latest.json and the page's "
        "section on what changed since the pins (python3 dev.py ecosystem --latest builds it)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.out)
    known = adapters()
    wrong = [name for name in args.only if name not in known]
    if wrong:
        parser.error(f"no such adapter: {', '.join(wrong)}; known: {', '.join(known)}")
    if args.explain:
        if len(args.only) != 1:
            parser.error("--explain runs one adapter's case: name the adapter with one --only")
        from .explain import explain

        return explain(args.only[0], args.explain, args.target)
    chosen = args.only or known
    classifications = table.load_classifications(CLASSIFICATIONS)
    pinned = table.read_results(RESULTS)
    latest = table.read_results(RESULTS_LATEST)
    if args.latest and args.check:
        parser.error("--latest --check: the newest releases are not compared with a committed table")
    committed = latest if args.latest else pinned
    if args.page_only:
        if pinned is None:
            parser.error("--page-only: there is no results.json yet")
        write_page(pinned, classifications, latest)
        return report(pinned, classifications, None, False)
    started = time.perf_counter()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else ""
    rows: List[Dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for found in pool.map(lambda name: run_adapter(sys.executable, name, ADAPTER_SECONDS), chosen):
            rows += found
            print(f"  {found[0]['adapter']}: {len(found)} targets", flush=True)
    kit = metadata.version("llm-backend-conformance")
    results = table.new_results(
        merge(committed, rows, args.only),
        generated=time.strftime("%Y-%m-%d", time.gmtime()),
        python=".".join(map(str, sys.version_info[:3])),
        kit=kit,
        seconds=time.perf_counter() - started if not args.only or committed is None else committed["seconds"],
        jobs=args.jobs,
        commit=_commit() if not args.only or committed is None else committed.get("commit", ""),
        load=load if not args.only or committed is None else committed.get("load", ""),
    )
    ran = (rows, time.perf_counter() - started) if args.only else None
    status = report(results, classifications, committed, args.check, ran)
    if args.verbose:
        for failure in table.failures_of(rows):
            print(f"  {failure.target} {failure.case} [{failure.check}]: {failure.reason}")
    if not args.no_write:
        out = RESULTS_LATEST if args.latest else RESULTS
        out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        if args.latest and pinned is not None:
            write_page(pinned, classifications, results)
        elif not args.latest:
            write_page(results, classifications, latest)
    return status


def write_page(pinned: Dict[str, Any], classifications: Sequence[table.Classification], latest: Any) -> None:
    """docs/ecosystem.md from the pinned run, with the newest releases' section from ``latest``."""
    page = table.render_page(pinned, classifications, table.kit_bugs_fixed(CLASSIFICATIONS), latest)
    PAGE.write_text(page, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
