"""The project's two commands, with their set-up, on a machine that has only Python.

    python3 dev.py main [ARGS]    the main job: python -m conformance ARGS
    python3 dev.py test [NAMES]   the tests: python -X dev -W error -m unittest (discover, or NAMES)
    python3 dev.py ecosystem [ARGS]  the conformance table: python -m ecosystem.runner ARGS

Each creates the virtual environment ``.venv`` beside this file on first use (or the
one named by ``CONFORMANCE_VENV``), installs the project into it editable, with the
``test``, ``interop`` and ``frameworks`` extras for ``test``, and runs the command with the
environment's Python from this folder, wherever it was called from. The install is
repeated only when ``pyproject.toml`` changes. Standard library only, so it runs
before anything is installed; it reaches nothing but the package index pip uses.

``test`` without names runs every test module, split over a few processes that run at
once (the suite waits on sockets and timeouts more than it computes; a new module not
yet in WEIGHTS runs in one of its own), and ends with unittest's own closing lines
summed over them. With ``CONFORMANCE_LONG_TESTS=1``
(the full soak and fuzz, as CI runs them) it runs ``unittest discover`` in one
process, so that the soak's time bounds hold as designed; ``test --serial`` does that
too, and ``test NAMES`` runs just those. A leak or an uncaught error that a test process
still prints (past the tests' own hooks, ``tests/hygiene.py``) fails the run.

``ecosystem`` has a virtual environment of its own, ``.venv-ecosystem`` (or the one
named by ``CONFORMANCE_ECOSYSTEM_VENV``), with the project and the libraries pinned in
``ecosystem/requirements.txt``, so that neither of the other two ever needs them.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent
TEST_COMMAND = ["-X", "dev", "-W", "error", "-m", "unittest"]
EXTRAS = {"main": (), "test": ("test", "interop", "frameworks"), "ecosystem": ()}
#: The conformance table's pinned libraries, installed into its own environment.
ECOSYSTEM_REQUIREMENTS = ROOT / "ecosystem" / "requirements.txt"
USAGE = __doc__.split("\n\n")[1]
#: Each test module's time alone, in seconds (``python -X dev -W error -m unittest
#: MODULE``), as measured on the project's 2-core machine while it was busy: only the
#: sizes relative to each other matter. The modules are dealt by these into PROCESSES
#: processes of even shares; a module named in neither table (a new one) runs in a
#: process of its own beside them, so that however long it is it holds up no other.
WEIGHTS: Dict[str, float] = {
    "tests.test_mutants": 32,
    "tests.interop.test_agent_frameworks": 16,
    "tests.test_provider_soak": 9,
    "tests.test_main": 11,
    "tests.test_gate_loop": 15,
    "tests.interop.test_anthropic_sdk": 9,
    "tests.interop.test_bedrock_invoke_sdks": 9,
    "tests.interop.test_anthropic_vertex_sdk": 7,
    "tests.test_driver": 9,
    "tests.interop.test_agent_loops_openai": 8,
    "tests.interop.test_js_serve_judge": 8,
    "tests.test_gate_mutants": 35,
    "tests.interop.test_openai_responses_sdk": 7,
    "tests.interop.test_azure_openai_sdk": 7,
    "tests.interop.test_agent_loops_anthropic": 6,
    "tests.interop.test_openai_chat_sdk": 6,
    "tests.test_stall": 6,
    "tests.test_provider_faults": 5,
    "tests.test_gate_record_attacks": 5,
    "tests.test_typing": 4,
    "tests.test_provider_attacks": 4,
    "tests.interop.test_anthropic_turns": 4,
    "tests.interop.test_google_genai_sdk": 4,
    "tests.interop.test_google_genai_vertex": 4,
    "tests.test_testcase": 3,
    "tests.interop.test_cohere_sdk": 3,
    "tests.interop.test_turns_sdks": 3,
    "tests.test_cases": 3,
    "tests.test_gate_report": 3,
    "tests.test_gate_verdicts": 3,
    "tests.test_judge": 6,
    "tests.test_turns_openai_responses": 2.5,
    "tests.test_provider": 2.4,
    "tests.test_provider_h2": 2.2,
    "tests.test_parallel": 2.1,
    "tests.interop.test_boto3_bedrock": 2.1,
    "tests.test_provider_security": 2.0,
    "tests.interop.test_ollama_sdk": 1.9,
    "tests.test_transport": 1.6,
}
#: The modules that take about a second or less alone.
SHORT = (
    "tests.interop.test_boto3_turns",
    "tests.interop.test_js_bedrock_h2c",
    "tests.test_abort",
    "tests.test_architecture",
    "tests.test_call_ids",
    "tests.test_checks",
    "tests.test_contract",
    "tests.test_decoders",
    "tests.test_dev",
    "tests.test_ecosystem",
    "tests.test_encoders",
    "tests.test_gate_faults",
    "tests.test_gate_record",
    "tests.test_gate_replay",
    "tests.test_gate_replay_loop",
    "tests.test_gate_schema",
    "tests.test_gate_state",
    "tests.test_gate_tools",
    "tests.test_hygiene",
    "tests.test_own_wire",
    "tests.test_provider_bad_input",
    "tests.test_provider_events",
    "tests.test_provider_fuzz",
    "tests.test_provider_perf",
    "tests.test_provider_support",
    "tests.test_public_api",
    "tests.test_results",
    "tests.test_turns_anthropic",
    "tests.test_turns_bedrock",
    "tests.test_turns_claude_hosts",
    "tests.test_turns_cohere",
    "tests.test_turns_gemini",
    "tests.test_turns_ollama",
    "tests.test_version",
    "tests.test_wire_anthropic",
    "tests.test_wire_anthropic_vertex",
    "tests.test_wire_bedrock",
    "tests.test_wire_bedrock_invoke",
    "tests.test_wire_cohere",
    "tests.test_wire_openai_compat",
    "tests.test_wire_gemini",
    "tests.test_wire_gemini_vertex",
    "tests.test_wire_ollama",
    "tests.test_wire_openai_chat",
    "tests.test_wire_openai_responses",
    "tests.test_wire_schema",
)
WEIGHTS.update(dict.fromkeys(SHORT, 1.0))
PROCESSES = 4
#: What Python and asyncio print for a leak or an error nobody caught: an unclosed socket or
#: transport as it is freed, an exception in a thread or in an event loop's callback, a task
#: destroyed pending. The tests' hooks (tests/hygiene.py) make each a failure of the test it
#: came in; one still printed came where no test owns it (the interpreter's teardown, a
#: child process), and fails the run all the same. Unittest's dots may precede it.
NOISE = re.compile(
    r"^[.sxuFE]*(Exception ignored in|Exception in callback|Exception in thread|ResourceWarning: "
    r"|Task was destroyed but it is pending|Task exception was never retrieved)"
)


def environment(command: str = "") -> Path:
    if command == "ecosystem":
        return Path(os.environ.get("CONFORMANCE_ECOSYSTEM_VENV") or ROOT / ".venv-ecosystem").resolve()
    return Path(os.environ.get("CONFORMANCE_VENV") or ROOT / ".venv").resolve()


def interpreter(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure(extras: Sequence[str], requirements: Optional[Path] = None, command: str = "") -> Path:
    """The environment's Python, with the project and ``extras`` (and ``requirements``) installed."""
    env = environment(command)
    python = interpreter(env)
    if not python.exists():
        print(f"creating the virtual environment {env}", flush=True)
        venv.create(env, with_pip=True)
    # One stamp per set of extras, keyed on pyproject.toml: a change to the
    # dependencies reinstalls, an unchanged tree costs nothing.
    keyed = (ROOT / "pyproject.toml").read_bytes() + (requirements.read_bytes() if requirements else b"")
    digest = hashlib.sha256(keyed).hexdigest()[:16]
    stamp = env / f".conformance-{'-'.join(extras) or 'base'}-{digest}"
    if not stamp.exists():
        target = f".[{','.join(extras)}]" if extras else "."
        print(f"installing {target} (editable) into {env}", flush=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        wanted = ["-r", str(requirements)] if requirements else []
        done = subprocess.run([*pip, "-e", target, *wanted], cwd=ROOT)
        if done.returncode != 0:
            raise SystemExit(
                f"pip install -e '{target}' failed (exit {done.returncode}); see pip's output above"
            )
        stamp.touch()
    return python


def test_modules() -> List[str]:
    """Every test module, the interop ones too."""
    names = sorted(f"tests.{p.stem}" for p in (ROOT / "tests").glob("test_*.py"))
    names += sorted(f"tests.interop.{p.stem}" for p in (ROOT / "tests" / "interop").glob("test_*.py"))
    return names


#: Interop modules whose names carry one of these import the same SDK, which costs
#: seconds of CPU per process (anthropic's most): they go into one process together.
SDKS = ("anthropic", "openai", "genai", "ollama", "boto3")


def groups(count: int, names: Optional[Sequence[str]] = None) -> List[List[str]]:
    """The test modules (``names``, or all), dealt into processes to run at once.

    Those WEIGHTS knows go into ``count`` groups of even weight, the longest first, each
    into the lightest group so far, the interop modules of one SDK as one; each module
    it does not know gets a group of its own.
    """
    names = test_modules() if names is None else names
    units: Dict[str, List[str]] = {}
    for name in (n for n in names if n in WEIGHTS):
        sdk = next((sdk for sdk in SDKS if name.startswith("tests.interop.") and sdk in name), name)
        units.setdefault(sdk, []).append(name)
    shares: List[Tuple[float, List[str]]] = [(0.0, []) for _ in range(count)]
    for unit in sorted(units.values(), key=lambda unit: -sum(WEIGHTS[n] for n in unit)):
        weight, members = min(shares, key=lambda share: share[0])
        shares.remove((weight, members))
        shares.append((weight + sum(WEIGHTS[n] for n in unit), [*members, *unit]))
    return [members for _, members in shares if members] + [[n] for n in names if n not in WEIGHTS]


def run_group(python: Path, members: List[str]) -> Tuple[int, str]:
    done = subprocess.run([str(python), *TEST_COMMAND, *members], cwd=ROOT, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def noise(text: str) -> List[str]:
    """The lines of ``text`` that report a leak or an uncaught error (NOISE)."""
    return [line for line in text.splitlines() if NOISE.match(line)]


def run_streamed(command: List[str]) -> int:
    """Run ``command``, passing its output on as it comes (stderr with stdout); its status,
    or 1 where it printed noise though it passed."""
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    found: List[str] = []
    pending = b""
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        assert process.stdout is not None
        # Read as it comes, not by lines: unittest's dots come without a newline.
        while True:
            data = os.read(process.stdout.fileno(), 65536)
            if not data:
                break
            if out is not None:
                out.write(data)
                out.flush()
            else:
                print(data.decode(errors="replace"), end="", flush=True)
            *lines, pending = (pending + data).split(b"\n")
            found += noise(b"\n".join(lines).decode(errors="replace"))
    found += noise(pending.decode(errors="replace"))
    return process.returncode or report_noise(found)


def report_noise(found: List[str]) -> int:
    """Say what noise the run printed; 1 where it printed any, else 0."""
    if not found:
        return 0
    lines = "\n".join(f"  {line[:300]}" for line in found)
    why = "the tests printed what a leak or an uncaught error prints (tests/hygiene.py)"
    print(f"\nThe run fails: {why}:\n{lines}")
    return 1


def tally(text: str, totals: Dict[str, int]) -> None:
    """Add what unittest's closing lines in ``text`` count to ``totals``."""
    for ran in re.findall(r"^Ran (\d+) tests? in ", text, re.M):
        totals["ran"] = totals.get("ran", 0) + int(ran)
    for verdict in re.findall(r"^(?:OK|FAILED)(?: \((.*)\))?$", text, re.M):
        for key, value in re.findall(r"([a-z ]+)=(\d+)", verdict):
            totals[key.strip()] = totals.get(key.strip(), 0) + int(value)


def run_parallel(python: Path) -> int:
    """Every test module, in a few processes at once; unittest's closing lines, summed."""
    started = time.perf_counter()
    parts = groups(PROCESSES)
    print(f"== test: python {' '.join(TEST_COMMAND)} over {len(parts)} processes at once", flush=True)
    totals: Dict[str, int] = {}
    status = 0
    found: List[str] = []
    with ThreadPoolExecutor(max_workers=len(parts)) as pool:
        for code, text in pool.map(lambda members: run_group(python, members), parts):
            status = status or code
            print(text, end="" if text.endswith("\n") else "\n", flush=True)
            tally(text, totals)
            found += noise(text)
    elapsed = time.perf_counter() - started
    print("-" * 70)
    print(f"Ran {totals.get('ran', 0)} tests in {elapsed:.3f}s ({len(parts)} processes)\n")
    counts = ", ".join(
        f"{k}={totals[k]}"
        for k in ("failures", "errors", "skipped", "expected failures", "unexpected successes")
        if totals.get(k)
    )
    print(("FAILED" if status else "OK") + (f" ({counts})" if counts else ""))
    return status or report_noise(found)


def main(argv: List[str]) -> int:
    if not argv or argv[0] not in EXTRAS:
        print(USAGE, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "ecosystem":
        python = ensure((), ECOSYSTEM_REQUIREMENTS, command)
        args = ["-m", "ecosystem.runner", *rest]
        print(f"== {command}: python {' '.join(args)}", flush=True)
        return subprocess.run([str(python), *args], cwd=ROOT).returncode
    python = ensure(EXTRAS[command])
    if command == "main":
        args = ["-m", "conformance", *rest]
    elif not rest and os.environ.get("CONFORMANCE_LONG_TESTS") != "1":
        return run_parallel(python)
    else:
        serial = not rest or rest == ["--serial"]
        args = [*TEST_COMMAND, *(["discover", "-s", "tests", "-t", "."] if serial else rest)]
    print(f"== {command}: python {' '.join(args)}", flush=True)
    if command == "test":
        return run_streamed([str(python), *args])
    return subprocess.run([str(python), *args], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
