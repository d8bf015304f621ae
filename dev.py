"""The project's commands, with their set-up, on a machine that has only Python.

    python3 dev.py main [ARGS]       the main job: python -m conformance ARGS
    python3 dev.py test [NAMES]      the tests: python -X dev -W error -m unittest (all, or NAMES)
    python3 dev.py test --latest     the same tests against the newest releases, not the lock
    python3 dev.py ecosystem [ARGS]  the conformance table: python -m ecosystem.runner ARGS
    python3 dev.py ecosystem --latest  the same adapters on each library's newest release
    python3 dev.py lock              the locks (locks/*.txt) resolved anew, dated

Each creates a virtual environment beside this file on first use (``.venv``, or the one
named by ``CONFORMANCE_VENV``) and installs the project into it editable, with the
``test``, ``interop`` and ``frameworks`` extras for ``test``, every version fixed by
``locks/test.txt``; then it runs the command with the environment's Python from this
folder, wherever it was called from. The install is repeated only when
``pyproject.toml`` or the lock changes. Standard library only, so it runs before
anything is installed; it reaches nothing but the package index.

Installs go through uv (its version fixed by UV, itself installed with pip into
``.venv-tools``), which takes seconds where pip takes a minute and a half; with
``CONFORMANCE_INSTALLER=pip`` they go through pip, with the same lock as constraints.

The locks. ``pyproject.toml`` keeps the floors a user's install needs; the project's
own tests and CI install the versions of ``locks/test.txt`` (one lock for every Python
from 3.9, each line marked with the Pythons it is for), so that a new release of a
third party never turns a fresh clone's tests red. ``python3 dev.py lock`` resolves
the locks anew and writes the day it did so in their first line; ``test --latest``
runs the tests in ``.venv-latest`` against the newest releases instead, and names each
version that differs from the lock, so that an upstream change shows up as a report.

``test`` without names runs every test module, dealt into PROCESSES processes that run
at once (the suite waits on sockets and timeouts more than it computes) by each
module's time in the last run of the same mode (``<environment>/conformance-test-
times-default.json`` or ``-long.json``, which the run rewrites; a fresh clone starts
from ``tests/weights.json``); it prints each
process's modules and times, says where a module took far longer than its weight,
and ends with unittest's own closing lines summed over them. ``CONFORMANCE_LONG_TESTS=1``
(the full soak and fuzz, every SDK adapter on every case and transport, as CI runs
them) runs the same way; ``test --serial`` runs ``unittest discover`` in one process,
and ``test NAMES`` runs just those. A leak or an uncaught error that a test process
still prints (past the tests' own hooks, ``tests/hygiene.py``) fails the run.

``ecosystem`` has an environment of its own, ``.venv-ecosystem`` (or the one named by
``CONFORMANCE_ECOSYSTEM_VENV``), with the libraries of ``ecosystem/requirements.txt``
at the versions of ``locks/ecosystem.txt``; with ``--only``, just the libraries the
named adapters declare (their ``REQUIRES``), so that neither of the other two
commands ever needs them and a check of a few adapters installs no more.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

ROOT = Path(__file__).resolve().parent
TEST_COMMAND = ["-X", "dev", "-W", "error", "-m", "unittest"]
#: What each command installs of the project: its extras.
EXTRAS = {"main": (), "test": ("test", "interop", "frameworks"), "ecosystem": ()}
COMMANDS = (*EXTRAS, "lock")
LOCKS = ROOT / "locks"
#: The tests' lock, for every Python from 3.9: the project's own extras.
TEST_LOCK = LOCKS / "test.txt"
#: The conformance table's lock: the libraries of ECOSYSTEM_REQUIREMENTS and all they need.
ECOSYSTEM_LOCK = LOCKS / "ecosystem.txt"
#: The conformance table's pinned libraries, installed into its own environment.
ECOSYSTEM_REQUIREMENTS = ROOT / "ecosystem" / "requirements.txt"
ADAPTERS = ROOT / "ecosystem" / "adapters"
#: The installer and resolver, at a fixed release so that a lock resolves the same way.
UV = "uv==0.13.9"
#: The oldest Python the project supports: the tests' lock resolves for it and every later one.
OLDEST_PYTHON = "3.9"
#: The oldest Python the conformance table's libraries all install on (any-llm-sdk and
#: pydantic-ai-slim need 3.11).
ECOSYSTEM_PYTHON = "3.11"
USAGE = __doc__.split("\n\n")[1]
#: A fresh clone's module times, in seconds, per mode (``python3 dev.py test`` on the
#: project's 2-core machine, ``default`` and with CONFORMANCE_LONG_TESTS=1 ``long``); a
#: run's own times replace them (TIMES_FILE, per mode, in the environment).
SEED_WEIGHTS = ROOT / "tests" / "weights.json"
TIMES_FILE = "conformance-test-times-{mode}.json"
PROCESSES = 4
#: A module whose time departs from its weight by more than both of these is named.
DEPARTS_RATIO, DEPARTS_SECONDS = 2.0, 5.0
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
    if command == "ecosystem-latest":
        return Path(
            os.environ.get("CONFORMANCE_ECOSYSTEM_LATEST_VENV") or ROOT / ".venv-ecosystem-latest"
        ).resolve()
    if command == "latest":
        return Path(os.environ.get("CONFORMANCE_LATEST_VENV") or ROOT / ".venv-latest").resolve()
    if command == "tools":
        return Path(os.environ.get("CONFORMANCE_TOOLS_VENV") or ROOT / ".venv-tools").resolve()
    return Path(os.environ.get("CONFORMANCE_VENV") or ROOT / ".venv").resolve()


def interpreter(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def created(env: Path) -> Path:
    """The Python of the virtual environment ``env``, made if it does not exist."""
    python = interpreter(env)
    if not python.exists():
        print(f"creating the virtual environment {env}", flush=True)
        venv.create(env, with_pip=True)
    return python


def uv() -> Path:
    """uv's program, installed with pip into the tools' environment on first use."""
    env = environment("tools")
    python = created(env)
    program = env / ("Scripts/uv.exe" if os.name == "nt" else "bin/uv")
    stamp = env / f".conformance-{UV}"
    if not (program.exists() and stamp.exists()):
        print(f"installing {UV} into {env}", flush=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", UV]
        if subprocess.run(pip, cwd=ROOT).returncode != 0:
            raise SystemExit(
                f"pip install {UV} failed; see pip's output above "
                "(CONFORMANCE_INSTALLER=pip installs without uv)"
            )
        stamp.touch()
    return program


def install_command(python: Path) -> List[str]:
    """The command that installs into the environment of ``python``: uv's, or pip's."""
    if os.environ.get("CONFORMANCE_INSTALLER", "uv") == "pip":
        return [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    return [str(uv()), "pip", "install", "--quiet", "--python", str(python)]


def stamp(
    env: Path, extras: Sequence[str], requirements: Sequence[str] = (), lock: Optional[Path] = TEST_LOCK
) -> Path:
    """The file that marks ``env`` as holding the project with ``extras`` and ``requirements``
    at the versions of ``lock``: keyed on pyproject.toml, the lock and the installer, so
    that a change to any of them installs again. The newest releases are looked for once a day."""
    keyed = (ROOT / "pyproject.toml").read_bytes() + "\n".join(requirements).encode()
    keyed += lock.read_bytes() if lock else datetime.date.today().isoformat().encode()
    keyed += os.environ.get("CONFORMANCE_INSTALLER", "uv").encode()
    digest = hashlib.sha256(keyed).hexdigest()[:16]
    return env / f".conformance-{'-'.join(extras) or 'base'}-{digest}"


def ensure(
    extras: Sequence[str],
    requirements: Sequence[str] = (),
    command: str = "",
    lock: Optional[Path] = TEST_LOCK,
) -> Path:
    """The environment's Python, with the project and ``extras`` (and ``requirements``)
    installed at the versions of ``lock`` (the newest releases where it is None)."""
    env = environment(command)
    python = created(env)
    done_stamp = stamp(env, extras, requirements, lock)
    if done_stamp.exists():
        return python
    target = f".[{','.join(extras)}]" if extras else "."
    pinned = ["-c", str(lock)] if lock else ["--upgrade"]
    print(f"installing {target} (editable) into {env}, {_lock_line(lock)}", flush=True)
    done = subprocess.run([*install_command(python), "-e", target, *requirements, *pinned], cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(
            f"installing '{target}' failed (exit {done.returncode}); see the installer's output above"
        )
    done_stamp.touch()
    return python


def _lock_line(lock: Optional[Path]) -> str:
    if lock is None:
        return "the newest releases"
    first = lock.read_text(encoding="utf-8").splitlines()[0] if lock.exists() else ""
    day = re.search(r"\d{4}-\d{2}-\d{2}", first)
    return f"the versions of {lock.relative_to(ROOT)}" + (f" (locked {day.group()})" if day else "")


# The locks ------------------------------------------------------------------------------


def lock() -> int:
    """Resolve both locks anew with uv, each headed by the day it was made."""
    day = datetime.date.today().isoformat()
    jobs = [
        (TEST_LOCK, ["pyproject.toml", "--extra", "test", "--extra", "interop", "--extra", "frameworks",
                     "--python-version", OLDEST_PYTHON]),
        (ECOSYSTEM_LOCK, [str(ECOSYSTEM_REQUIREMENTS.relative_to(ROOT)), "--python-version",
                          ECOSYSTEM_PYTHON]),
    ]
    LOCKS.mkdir(exist_ok=True)
    for path, args in jobs:
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / path.name
            command = [str(uv()), "pip", "compile", *args, "--universal", "--quiet", "--no-header",
                       "--annotation-style", "line", "-o", str(out)]
            print(f"== lock: {path.relative_to(ROOT)}", flush=True)
            if subprocess.run(command, cwd=ROOT).returncode != 0:
                print(f"resolving {path.relative_to(ROOT)} failed; it is left as it was", file=sys.stderr)
                return 1
            body = out.read_text(encoding="utf-8")
        python = args[args.index("--python-version") + 1]
        path.write_text(
            f"# Locked on {day} by `python3 dev.py lock` ({UV} pip compile --universal, Python "
            f"{python} and later).\n# Each version is what the project's own tests and CI "
            "install; pyproject.toml keeps the floors a user's install needs.\n" + body,
            encoding="utf-8",
        )
    return 0


def locked_versions(lock: Path) -> Dict[str, List[str]]:
    """Each distribution's versions in ``lock`` (several where its Pythons differ)."""
    versions: Dict[str, List[str]] = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        found = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)", line)
        if found:
            versions.setdefault(canonical(found.group(1)), []).append(found.group(2))
    return versions


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def departures_from_lock(python: Path, lock: Path) -> List[str]:
    """Each installed distribution whose version the lock does not name: what --latest moved."""
    listed = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, json; print(json.dumps("
         "{d.metadata['Name']: d.version for d in m.distributions()}))"],
        capture_output=True, text=True, cwd=ROOT,
    )
    installed: Dict[str, str] = json.loads(listed.stdout or "{}")
    pinned = locked_versions(lock)
    return sorted(
        f"{name} {version} (the lock has {' or '.join(pinned[canonical(name)])})"
        for name, version in installed.items()
        if canonical(name) in pinned and version not in pinned[canonical(name)]
    )


# The conformance table's libraries ------------------------------------------------------


def adapter_requires(name: str) -> Tuple[str, ...]:
    """The distributions the adapter ``name`` declares (its ``REQUIRES``), read without importing it."""
    path = ADAPTERS / f"{name}.py"
    if not path.exists():
        known = sorted(p.stem for p in ADAPTERS.glob("*.py") if not p.stem.startswith("_"))
        raise SystemExit(f"--only {name}: no such adapter; the adapters are {', '.join(known)}")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "REQUIRES" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise SystemExit(f"ecosystem/adapters/{name}.py declares no REQUIRES: name the distributions it imports")


def ecosystem_requirements(only: Sequence[str]) -> List[str]:
    """What the adapters ``only`` need: their lines of ECOSYSTEM_REQUIREMENTS, and the
    other distributions they import by name, which ECOSYSTEM_LOCK fixes (all of
    ECOSYSTEM_REQUIREMENTS where ``only`` is empty)."""
    lines = [
        line.strip()
        for line in ECOSYSTEM_REQUIREMENTS.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not only:
        return lines
    wanted = {canonical(name) for adapter in only for name in adapter_requires(adapter)}
    pinned = {canonical(re.split(r"[\[=<>~! ;]", line, maxsplit=1)[0]): line for line in lines}
    locked = locked_versions(ECOSYSTEM_LOCK) if ECOSYSTEM_LOCK.exists() else {}
    missing = sorted(name for name in wanted if name not in pinned and name not in locked)
    if missing:
        raise SystemExit(
            f"the adapters' REQUIRES name {', '.join(missing)}, which neither ecosystem/requirements.txt "
            "nor locks/ecosystem.txt has: pin it in the one, then run python3 dev.py lock"
        )
    return sorted(pinned.get(name, name) for name in wanted)


def unpinned(line: str) -> str:
    """A requirement line without its version: ``litellm[proxy]==1.2`` is ``litellm[proxy]``."""
    return re.split(r"[=<>~!; ]", line.strip(), maxsplit=1)[0]


def only_adapters(args: Sequence[str]) -> List[str]:
    """The adapters named by ``--only NAME`` or ``--only=NAME`` in ``args``."""
    names: List[str] = []
    for index, arg in enumerate(args):
        if arg == "--only" and index + 1 < len(args):
            names.append(args[index + 1])
        elif arg.startswith("--only="):
            names.append(arg.split("=", 1)[1])
    return names


# The parallel test run ------------------------------------------------------------------


def test_modules() -> List[str]:
    """Every test module, the interop ones too."""
    names = sorted(f"tests.{p.stem}" for p in (ROOT / "tests").glob("test_*.py"))
    names += sorted(f"tests.interop.{p.stem}" for p in (ROOT / "tests" / "interop").glob("test_*.py"))
    return names


def mode() -> str:
    """The test run's mode: ``long`` with CONFORMANCE_LONG_TESTS=1 (CI's), else ``default``."""
    return "long" if os.environ.get("CONFORMANCE_LONG_TESTS") == "1" else "default"


def weights(env: Optional[Path] = None, run: Optional[str] = None) -> Dict[str, float]:
    """Each module's time in a run of mode ``run``: the last such run's in ``env`` where
    one ran there, else the seed's (a long run's modules take several times a default one's)."""
    run = run or mode()
    table: Dict[str, float] = dict(json.loads(SEED_WEIGHTS.read_text(encoding="utf-8"))[run])
    last = (env or environment("test")) / TIMES_FILE.format(mode=run)
    if last.exists():
        try:
            table.update(json.loads(last.read_text(encoding="utf-8")))
        except ValueError:
            pass  # a file cut short by a killed run: the seed serves
    return table


#: Interop modules whose names carry one of these import the same SDK, which costs
#: seconds of CPU and tens of MB per process (anthropic's most): in a long run they go
#: into one process together.
SDKS = ("anthropic", "openai", "genai", "ollama", "boto3")


#: Modules a long run splits into this many slices (their test classes dealt round),
#: each dealt to a process of its own: they wait on the agent frameworks' own timeouts
#: far more than they compute (test_agent_frameworks: 227 s of wall time for 66 s of
#: CPU), so spread over processes they end sooner on the same two cores.
SLICED = {"tests.interop.test_agent_frameworks": 3, "tests.interop.test_agent_loops_openai": 2}


def sliced(names: Sequence[str], run: str) -> List[str]:
    """``names`` with each module of SLICED written as its slices (``module#i/n``) in a long run."""
    if run != "long":
        return list(names)
    pieces: List[str] = []
    for name in names:
        pieces += [f"{name}#{i}/{SLICED[name]}" for i in range(SLICED[name])] if name in SLICED else [name]
    return pieces


def module_of(member: str) -> str:
    """The module a member of a process is, or is a slice of."""
    return member.split("#", 1)[0]


def unit_of(name: str, run: str) -> str:
    """The share of the run a module goes in whole: its SDK's, or its own.

    In a default run every interop module goes into one process: the SDKs and agent
    frameworks are then imported once, not in each of the four processes (pydantic-ai,
    LangChain, openai and anthropic alone take about 390 MB), and their modules' time is
    about one process's share. In a long run they take several shares, so each SDK's
    modules go together and the SDKs spread over the processes.
    """
    if not name.startswith("tests.interop.") or "#" in name:
        return name
    if run == "default":
        return "tests.interop"
    return next((sdk for sdk in SDKS if sdk in name), name)


def groups(
    count: int,
    names: Optional[Sequence[str]] = None,
    table: Optional[Dict[str, float]] = None,
    run: Optional[str] = None,
) -> List[List[str]]:
    """The test modules (``names``, or all), dealt into processes to run at once.

    Those ``table`` (the weights) knows go into ``count`` groups of even weight, the
    longest unit first (:func:`unit_of`), each into the lightest group so far; each
    module it does not know gets a group of its own.
    """
    run = run or mode()
    names = sliced(test_modules() if names is None else names, run)
    table = weights(run=run) if table is None else table

    def weight(member: str) -> float:
        pieces = member.partition("#")[2]
        return table[module_of(member)] / (int(pieces.split("/")[1]) if pieces else 1)

    units: Dict[str, List[str]] = {}
    for name in (n for n in names if module_of(n) in table):
        units.setdefault(unit_of(name, run), []).append(name)
    shares: List[Tuple[float, List[str]]] = [(0.0, []) for _ in range(count)]
    for unit in sorted(units.values(), key=lambda unit: -sum(weight(n) for n in unit)):
        least, members = min(shares, key=lambda share: share[0])
        shares.remove((least, members))
        shares.append((least + sum(weight(n) for n in unit), [*members, *unit]))
    return [members for _, members in shares if members] + [[n] for n in names if module_of(n) not in table]


def run_group(python: Path, members: List[str], times: Path) -> Tuple[int, str]:
    command = [str(python), *TEST_COMMAND[:4], str(ROOT / "dev.py"), "_modules", str(times), *members]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def run_modules(out: str, names: Sequence[str], stream: Optional[TextIO] = None) -> int:
    """Inside a test process: run ``names`` as one unittest run, each module's time written to ``out``."""
    import unittest

    spent: Dict[str, float] = {}

    class Timed(unittest.TestSuite):
        """One module's tests, its time added up as they run (its module tear-down falls to the next)."""

        def __init__(self, name: str, tests: unittest.TestSuite) -> None:
            super().__init__([tests])
            self.name = name

        def run(self, result: unittest.TestResult, debug: bool = False) -> unittest.TestResult:
            started = time.perf_counter()
            try:
                return super().run(result, debug)
            finally:
                spent[self.name] = spent.get(self.name, 0.0) + time.perf_counter() - started

    loader = unittest.TestLoader()

    def tests_of(member: str) -> unittest.TestSuite:
        """A module's tests, or a slice's: of its test classes in name order, every n-th from the i-th."""
        module, _, piece = member.partition("#")
        loaded = loader.loadTestsFromName(module)
        if not piece:
            return loaded
        index, count = (int(part) for part in piece.split("/"))

        def flat(suite: Any) -> List[Any]:
            return [t for s in suite for t in (flat(s) if isinstance(s, unittest.TestSuite) else [s])]

        every = flat(loaded)
        classes = sorted({type(test).__qualname__ for test in every})
        mine = set(classes[index::count])
        return unittest.TestSuite(test for test in every if type(test).__qualname__ in mine)

    suite = unittest.TestSuite(Timed(name, tests_of(name)) for name in names)
    result = unittest.TextTestRunner(stream=stream).run(suite)
    peak = 0.0
    try:
        import resource

        unit = 1 << 20 if sys.platform == "darwin" else 1 << 10  # bytes there, KiB elsewhere
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / unit
    except ImportError:  # Windows: no resource module, no figure
        pass
    times = {k: round(v, 2) for k, v in spent.items()}
    Path(out).write_text(json.dumps({"times": times, "peak_mb": round(peak)}), encoding="utf-8")
    return 0 if result.wasSuccessful() else 1


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


def departures(spent: Dict[str, float], table: Dict[str, float]) -> List[str]:
    """The modules whose time in this run departs far from the weight they were dealt by."""
    far = []
    for name, seconds in sorted(spent.items()):
        weight = table.get(name)
        if weight is None:
            far.append(f"{name}: {seconds:.1f} s, no weight yet (it ran in a process of its own)")
        elif abs(seconds - weight) > DEPARTS_SECONDS and max(seconds, weight) > DEPARTS_RATIO * min(
            seconds, weight
        ):
            far.append(f"{name}: {seconds:.1f} s against a weight of {weight:.1f} s")
    return far


def run_parallel(python: Path, env: Path) -> int:
    """Every test module, in PROCESSES processes at once; unittest's closing lines, summed."""
    started = time.perf_counter()
    table = weights(env)
    parts = groups(PROCESSES, table=table, run=mode())
    print(f"== test: python {' '.join(TEST_COMMAND)} over {len(parts)} processes at once", flush=True)
    totals: Dict[str, int] = {}
    status = 0
    found: List[str] = []
    spent: Dict[str, float] = {}
    peaks: List[int] = []
    with tempfile.TemporaryDirectory() as folder:
        files = [Path(folder) / f"times-{index}.json" for index in range(len(parts))]
        with ThreadPoolExecutor(max_workers=len(parts)) as pool:
            outcomes = list(pool.map(lambda job: run_group(python, *job), zip(parts, files)))
        for (code, text), times in zip(outcomes, files):
            status = status or code
            print(text, end="" if text.endswith("\n") else "\n", flush=True)
            tally(text, totals)
            found += noise(text)
            measured = json.loads(times.read_text(encoding="utf-8")) if times.exists() else {}
            spent.update(measured.get("times", {}))
            peaks.append(measured.get("peak_mb", 0))
    # A sliced module's time is its slices' added up.
    modules: Dict[str, float] = {}
    for member, seconds in spent.items():
        modules[module_of(member)] = modules.get(module_of(member), 0.0) + seconds
    elapsed = time.perf_counter() - started
    print("-" * 70)
    for index, (members, peak) in enumerate(zip(parts, peaks), 1):
        listed = ", ".join(f"{m.replace('tests.', '')} {spent.get(m, 0.0):.1f}s" for m in members)
        total = sum(spent.get(m, 0.0) for m in members)
        print(f"process {index}: {total:.1f} s, {peak} MB at most: {listed}")
    far = departures(modules, table)
    if far:
        print("modules far from their weight (the next run deals by these times):\n  " + "\n  ".join(far))
    if len(modules) == len(test_modules()):
        saved = json.dumps(modules, indent=1, sort_keys=True) + "\n"
        (env / TIMES_FILE.format(mode=mode())).write_text(saved, encoding="utf-8")
    print(f"Ran {totals.get('ran', 0)} tests in {elapsed:.3f}s ({len(parts)} processes)\n")
    counts = ", ".join(
        f"{k}={totals[k]}"
        for k in ("failures", "errors", "skipped", "expected failures", "unexpected successes")
        if totals.get(k)
    )
    print(("FAILED" if status else "OK") + (f" ({counts})" if counts else ""))
    return status or report_noise(found)


def main(argv: List[str]) -> int:
    if argv[:1] == ["_modules"] and len(argv) > 2:
        return run_modules(argv[1], argv[2:])
    if not argv or argv[0] not in COMMANDS:
        print(USAGE, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "lock":
        return lock()
    if command == "ecosystem" and "--latest" in rest:
        # The same adapters against each library's newest release: the requirements' names
        # without their pins, in an environment of their own, installed without the lock.
        names = [unpinned(line) for line in ecosystem_requirements(only_adapters(rest))]
        python = ensure((), names, "ecosystem-latest", None)
        args = ["-m", "ecosystem.runner", *rest]
        print(f"== {command}: python {' '.join(args)} (the newest releases)", flush=True)
        return subprocess.run([str(python), *args], cwd=ROOT).returncode
    if command == "ecosystem":
        requirements = ecosystem_requirements(only_adapters(rest))
        python = ensure((), requirements, command, ECOSYSTEM_LOCK)
        args = ["-m", "ecosystem.runner", *rest]
        print(f"== {command}: python {' '.join(args)}", flush=True)
        return subprocess.run([str(python), *args], cwd=ROOT).returncode
    latest = command == "test" and "--latest" in rest
    rest = [arg for arg in rest if arg != "--latest"]
    env = environment("latest" if latest else command)
    python = ensure(
        EXTRAS[command], command="latest" if latest else command, lock=None if latest else TEST_LOCK
    )
    if latest:
        moved = departures_from_lock(python, TEST_LOCK)
        print(f"== the newest releases: {len(moved)} differ from {TEST_LOCK.relative_to(ROOT)}", flush=True)
        for line in moved:
            print(f"  {line}")
    if command == "main":
        args = ["-m", "conformance", *rest]
    elif not rest:
        return run_parallel(python, env)
    else:
        serial = rest == ["--serial"]
        args = [*TEST_COMMAND, *(["discover", "-s", "tests", "-t", "."] if serial else rest)]
    print(f"== {command}: python {' '.join(args)}", flush=True)
    if command == "test":
        return run_streamed([str(python), *args])
    return subprocess.run([str(python), *args], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
