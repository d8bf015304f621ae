"""The release report: run a target's cases and say, in JSON and Markdown, what held.

Strategy: the report knows a case only by a small, duck-typed surface: ``name``
(``"tool-call/stream"``), ``run()`` returning quietly, raising ``AssertionError``
(the failure text) or ``unittest.SkipTest`` (the reason). Stage and mode are read
from the name, split at its last ``/``, unless the case has them as strings (the
backend case's ``mode`` is; the agent-loop case's ``stage`` is its table row, so the
name decides). Which cases a target
has, which of them make the smoke set and which tools the suite offers is one small
:class:`Suite` per kind of target, chosen by :func:`suite_for`; so the backend suite
and the agent-loop suite are reported alike, and a new suite is one more entry.

The report is stamped with what a reviewer needs to know the run is the one they
mean: model, wire, base URL, a hash of the tool schemas, the stream modes, the client
package's installed version, the kit's version and the time. Its JSON form is
described by ``report.schema.json``, shipped beside this module.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from .._version import kit_version
from .provenance import client_evidence, recording_provenance

__all__ = [
    "BACKEND_SMOKE",
    "DEFAULT_JSON",
    "DEFAULT_MARKDOWN",
    "GENERIC_BASE_URL",
    "LOOP_SMOKE",
    "REPORT_FORMAT",
    "CaseResult",
    "GateReport",
    "Stamp",
    "Suite",
    "client_version",
    "kit_version",
    "load_schema",
    "run_cases",
    "run_gate",
    "schema_hash",
    "suite_for",
    "target_of",
]

#: The version of the report's JSON layout; it changes only when a field changes meaning.
REPORT_FORMAT = 2
DEFAULT_JSON = "conformance-report.json"
DEFAULT_MARKDOWN = "conformance-report.md"
#: Every case starts a fresh fake provider on a port of its own; the report says so in this form.
GENERIC_BASE_URL = "http://127.0.0.1:<port>"
#: What ``client_version`` says of a package that is not installed.
NOT_INSTALLED = "not installed"
#: The smoke set of the backend suite: plain text and a tool call, each in both modes.
BACKEND_SMOKE = frozenset({"text", "tool-call"})
#: The smoke set of the agent-loop suite: stage A (text) and B (forced tool), both modes.
LOOP_SMOKE = frozenset({"text", "forced-tool"})
VERDICTS = ("pass", "fail", "skip")
_MARKS = {"pass": "✅ pass", "fail": "❌ fail", "skip": "⏭️ skip"}


@dataclass(frozen=True)
class Suite:
    """How to report one kind of target: its cases, its smoke stages and its tools."""

    name: str
    cases: Callable[[Any], Sequence[Any]]
    smoke: FrozenSet[str]
    tools: Callable[[Any], Sequence[Any]]


def _backend_cases(target: Any) -> Sequence[Any]:
    from ..cases import backend_conformance_cases

    return backend_conformance_cases(target)


def _backend_tools(target: Any) -> Sequence[Any]:
    from ..fixture import CONFORMANCE_FIXTURE

    return (CONFORMANCE_FIXTURE.tool,)


def _loop_cases(target: Any) -> Sequence[Any]:
    import importlib

    cases: Sequence[Any] = importlib.import_module("conformance.gate.cases").agent_loop_cases(target)
    return cases


def _loop_tools(target: Any) -> Sequence[Any]:
    from .tools import tool_specs

    return tool_specs()


BACKEND_SUITE = Suite("backend", _backend_cases, BACKEND_SMOKE, _backend_tools)
LOOP_SUITE = Suite("agent-loop", _loop_cases, LOOP_SMOKE, _loop_tools)


def suite_for(target: Any) -> Optional[Suite]:
    """The suite that reports ``target``, or ``None`` when it is neither kind of target."""
    import importlib
    import importlib.util

    from ..cases import BackendConformanceTarget

    if isinstance(target, BackendConformanceTarget):
        return BACKEND_SUITE
    if importlib.util.find_spec("conformance.gate.loop") is None:
        return None  # a build without the agent-loop suite
    loop = importlib.import_module("conformance.gate.loop")
    loop_target = getattr(loop, "AgentLoopTarget", None)
    if isinstance(loop_target, type) and isinstance(target, loop_target):
        return LOOP_SUITE
    return None


def _plain(value: Any) -> Any:
    """``value`` as the dicts and lists JSON encodes: a schema may be any Mapping (a read-only proxy)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def schema_hash(tools: Sequence[Any]) -> str:
    """sha256 of the canonical JSON of the tool specs, in name order.

    Canonical: keys sorted, no spaces, UTF-8 unescaped; each tool is its ``name``,
    ``description`` and ``parameters``. A changed schema, even a description, changes
    the hash, so a report says whether two runs offered the same tools.
    """
    specs = sorted(
        ({"name": t.name, "description": t.description, "parameters": _plain(t.parameters)} for t in tools),
        key=lambda spec: str(spec["name"]),
    )
    text = json.dumps(specs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def client_version(package: Optional[str]) -> Optional[str]:
    """The installed version of ``package`` (a distribution or import name), or ``"not installed"``."""
    if not package:
        return None
    import importlib.metadata as metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        pass
    # An import name (``google.genai``) whose distribution is spelt otherwise (``google-genai``).
    find = getattr(metadata, "packages_distributions", None)  # Python 3.10+
    if find is not None:
        for dist in find().get(package.split(".")[0], []):
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    return NOT_INSTALLED


@dataclass(frozen=True)
class CaseResult:
    """One case's verdict, with the failure text or skip reason, and how long it took."""

    name: str
    stage: str
    mode: str
    verdict: str
    detail: str = ""
    seconds: float = 0.0
    #: True when the case itself raised something other than a verdict (the text is the traceback).
    crashed: bool = False
    #: Each request the case's loop sent, with the provider's status and request id
    #: (``RequestRecord.as_dict()``); empty where the suite keeps none (the backend suite).
    requests: Tuple[Mapping[str, Any], ...] = ()
    #: ``{"reported": ..., "sent": ...}``: the usage the loop reported and what the
    #: provider reported over the conversation; ``None`` where the suite keeps none.
    usage: Optional[Mapping[str, Any]] = None

    @property
    def stream(self) -> bool:
        return self.mode == "stream"

    def as_dict(self) -> Dict[str, Any]:
        out = {**dataclasses.asdict(self), "stream": self.stream, "seconds": round(self.seconds, 4)}
        out["requests"] = [dict(r) for r in self.requests]
        return out


def _stage_and_mode(case: Any) -> Tuple[str, str]:
    """``("forced-tool", "stream")`` from the name; a case's own string ``stage`` or ``mode`` wins."""
    name = str(case.name)
    stage, _, mode = name.rpartition("/")
    declared = getattr(case, "stage", None)  # the agent-loop case's is its Stage row, not a name
    if isinstance(declared, str) and declared:
        stage = declared
    declared_mode = getattr(case, "mode", None)
    if isinstance(declared_mode, str) and declared_mode:
        mode = declared_mode
    return stage or name, mode


def _run_one(case: Any) -> CaseResult:
    from .._targets import outcome

    stage, mode = _stage_and_mode(case)
    started = time.perf_counter()
    status, detail = outcome(case)
    seconds = time.perf_counter() - started
    verdict = {"pass": "pass", "skip": "skip"}.get(status, "fail")
    requests, usage = _evidence(case)
    return CaseResult(
        str(case.name),
        stage,
        mode,
        verdict,
        detail,
        seconds,
        crashed=status == "ERROR",
        requests=requests,
        usage=usage,
    )


def _usage_json(usage: Any) -> Any:
    """A usage as JSON: its three counts, ``None`` (unavailable, or none sent), or its mark."""
    if usage is None or isinstance(usage, str):
        return usage
    return {name: getattr(usage, name, None) for name in ("input_tokens", "output_tokens", "total_tokens")}


def _evidence(case: Any) -> Tuple[Tuple[Mapping[str, Any], ...], Optional[Mapping[str, Any]]]:
    """The requests and usage a case that keeps evidence (the agent-loop suite's) left behind."""
    evidence = getattr(case, "evidence", None)
    if evidence is None or not getattr(evidence, "ran", False):
        return (), None
    requests = tuple(r.as_dict() for r in evidence.requests)
    return requests, {"reported": _usage_json(evidence.usage), "sent": _usage_json(evidence.sent_usage)}


def run_cases(cases: Sequence[Any], jobs: int) -> List[CaseResult]:
    """Run ``cases``, ``jobs`` at a time, in a thread pool; the results in the cases' order."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_run_one, cases))


@dataclass(frozen=True)
class Stamp:
    """What the run was: enough to tell it apart from any other run of the gate."""

    target: str
    suite: str
    selection: str
    model: str
    wire: str
    transport: str
    base_url: str
    tool_schema_sha256: str
    tools: Tuple[str, ...]
    #: The stream flags the cases used: ``(False, True)`` for chat and stream mode.
    stream: Tuple[bool, ...]
    client: Optional[str]
    client_version: Optional[str]
    kit_version: str
    python: str
    timestamp: str
    #: Whether the target's own code imports the client package (see ``provenance``).
    client_verified: bool = False
    #: What the client's version rests on: the module that imports it, or why none does.
    client_evidence: str = ""
    #: For a replayed target, what its recordings were made against (``recording_provenance``).
    recording: Optional[Mapping[str, Any]] = None
    #: The target's settings that loosen a verdict (``error_results="text"``), each named.
    knobs: Tuple[str, ...] = ()

    def as_dict(self) -> Dict[str, Any]:
        out = dataclasses.asdict(self)  # tuples stay tuples; json writes them as arrays
        out["client"] = {
            "package": out.pop("client"),
            "version": out.pop("client_version"),
            "verified": out.pop("client_verified"),
            "evidence": out.pop("client_evidence"),
        }
        if out["recording"] is None:
            del out["recording"]
        return out


@dataclass(frozen=True)
class GateReport:
    """A finished run: its :class:`Stamp`, each case's :class:`CaseResult`, and the time taken."""

    stamp: Stamp
    results: Tuple[CaseResult, ...]
    seconds: float
    counts: Mapping[str, int] = field(init=False)

    def __post_init__(self) -> None:
        counts = {v: sum(1 for r in self.results if r.verdict == v) for v in VERDICTS}
        object.__setattr__(self, "counts", counts)

    @property
    def passed(self) -> bool:
        """True when no case failed (skipped cases do not fail a run)."""
        return self.counts["fail"] == 0

    @property
    def vacuous(self) -> bool:
        """True when no case failed because none ran: every one was skipped (or there were none)."""
        return self.counts["pass"] == 0 and self.counts["fail"] == 0

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    def stages(self) -> List[Tuple[str, List[CaseResult]]]:
        """The results grouped by stage, stages and cases in the order they ran."""
        grouped: Dict[str, List[CaseResult]] = {}
        for result in self.results:
            grouped.setdefault(result.stage, []).append(result)
        return list(grouped.items())

    def summary(self) -> str:
        """One line: the verdict, the target, the counts and the time."""
        c = self.counts
        return (
            f"gate {'PASS' if self.passed else 'FAIL'}: {self.stamp.target} ({self.stamp.selection}), "
            f"{len(self.results)} cases: {c['pass']} passed, {c['fail']} failed, {c['skip']} skipped "
            f"in {self.seconds:.2f} s" + ("; nothing ran: check the skip reasons" if self.vacuous else "")
        )

    def as_dict(self) -> Dict[str, Any]:
        """The JSON form, as ``report.schema.json`` describes it: every member of the results JSON
        that ``run --json`` writes (``schema``, ``command``, ``counts``, ``cases``, ...), then the
        release report's own."""
        from .._results import results_document

        return {
            **results_document(
                self.records(), command=self.title, seconds=self.seconds, timestamp=self.stamp.timestamp
            ),
            "format": REPORT_FORMAT,
            "verdict": self.verdict,
            "stamp": self.stamp.as_dict(),
            "totals": {
                "cases": len(self.results),
                "passed": self.counts["pass"],
                "failed": self.counts["fail"],
                "skipped": self.counts["skip"],
                "seconds": round(self.seconds, 3),
            },
            "stages": [
                {"stage": stage, "cases": [r.as_dict() for r in results]} for stage, results in self.stages()
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, ensure_ascii=False) + "\n"

    @property
    def title(self) -> str:
        """The run as the reports name it: ``gate <target> (<selection>)``."""
        return f"gate {self.stamp.target} ({self.stamp.selection})"

    def junit(self) -> str:
        """Every case as JUnit XML, one ``<testsuite>`` for the target, as CI systems show it."""
        from .._results import junit_xml

        return junit_xml(self.records(), name=self.title, seconds=self.seconds)

    def records(self) -> List[Any]:
        """Every case as the rows every command's reports are made of."""
        from .._results import CaseRecord

        outcomes = {"pass": "pass", "skip": "skip"}
        return [
            CaseRecord(
                target=self.stamp.target,
                case=r.name,
                outcome=outcomes.get(r.verdict, "ERROR" if r.crashed else "FAIL"),
                detail=r.detail,
                seconds=r.seconds,
                suite="loop" if self.stamp.suite == "agent-loop" else self.stamp.suite,
                wire=self.stamp.wire,
            )
            for r in self.results
        ]

    def markdown(self) -> str:
        """A summary for a pull request: verdict, stamp, stage x mode, then each failure."""
        return _markdown(self)


def run_gate(
    target: Any,
    *,
    smoke: bool = False,
    jobs: int = 4,
    client: Optional[str] = None,
    suite: Optional[Suite] = None,
) -> GateReport:
    """Run ``target``'s cases (the smoke set, or all of them) and build the report.

    ``client`` names the client package whose version is reported; by default the
    target's own ``client`` attribute, if it has one.
    """
    import platform

    chosen = suite or suite_for(target)
    if chosen is None:
        raise TypeError(
            f"cannot report on a {type(target).__name__}; expected a BackendConformanceTarget "
            "or an AgentLoopTarget"
        )
    cases = list(chosen.cases(target))
    if smoke:
        cases = [case for case in cases if _stage_and_mode(case)[0] in chosen.smoke or _replays(case)]
    timestamp = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    started = time.perf_counter()
    results = run_cases(cases, jobs)
    seconds = time.perf_counter() - started
    package = client or getattr(target, "client", None) or None
    evidence = client_evidence(target, package)
    tools = chosen.tools(target)
    stamp = Stamp(
        target=str(target.name),
        suite=chosen.name,
        selection="smoke" if smoke else "full",
        model=str(target.model),
        wire=str(target.wire.name),
        transport="h2c" if getattr(target, "http2", False) else "http/1.1",
        base_url=str(getattr(target, "upstream", None) or GENERIC_BASE_URL),
        tool_schema_sha256=schema_hash(tools),
        tools=tuple(sorted(str(t.name) for t in tools)),
        stream=tuple(sorted({r.stream for r in results})),
        client=package,
        client_version=evidence.version,
        kit_version=kit_version(),
        python=platform.python_version(),
        timestamp=timestamp.isoformat().replace("+00:00", "Z"),
        client_verified=evidence.verified,
        client_evidence=evidence.reason,
        recording=recording_provenance(target.wire),
        knobs=tuple(target.knobs()) if callable(getattr(target, "knobs", None)) else (),
    )
    return GateReport(stamp, tuple(results), seconds)


def _replays(case: Any) -> bool:
    """Whether ``case`` replays a recording: a recorded conversation of the agent-loop suite, or
    a backend case whose scenario the replayed fixtures are stamped with. Smoke runs these too:
    they are what the recording was made for."""
    from .replay import ReplayWire

    wire = case.target.wire
    if not isinstance(wire, ReplayWire):
        return False
    scenario = getattr(case, "scenario", None)
    if isinstance(scenario, str):
        return scenario in wire.scenarios
    return str(case.name).startswith("replay/")


def load_schema() -> Dict[str, Any]:
    """The report's JSON Schema, as shipped in the package."""
    schema: Dict[str, Any] = json.loads(
        Path(__file__).with_name("report.schema.json").read_text(encoding="utf-8")
    )
    return schema


# --- Markdown -----------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text safe inside a table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(text: str) -> str:
    """A fenced block longer than any run of backticks inside ``text``."""
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text.rstrip()}\n{ticks}"


def _html(text: str) -> str:
    import html

    return html.escape(text, quote=False)


def _markdown(report: GateReport) -> str:
    s = report.stamp
    c = report.counts
    icon, word = ("✅", "passed") if report.passed else ("❌", "failed")
    if report.vacuous:
        icon, word = "⚠️", "passed without running a case"
    lines = [
        f"## {icon} Conformance gate {word}: {_cell(s.target)}",
        "",
        f"{s.suite} suite, {s.selection} set: **{len(report.results)} cases, {c['pass']} passed, "
        f"{c['fail']} failed, {c['skip']} skipped** in {report.seconds:.2f} s",
        "",
        "| | |",
        "|---|---|",
        f"| model | {_code(s.model)} |",
        f"| wire | {_code(s.wire)} over {s.transport} |",
        f"| base URL | {_code(s.base_url)} |",
        f"| tool schema sha256 | {_code(s.tool_schema_sha256)} ({_cell(', '.join(s.tools))}) |",
        f"| stream | {', '.join('true' if f else 'false' for f in s.stream) or 'none'} |",
        f"| client | {_client_cell(s)} |",
        f"| kit | llm-backend-conformance {_cell(s.kit_version)} |",
        f"| time | {s.timestamp} |",
        *_recording_rows(s),
        *(f"| knob | {_cell(knob)} |" for knob in s.knobs),
        "",
    ]
    modes: List[str] = []
    for result in report.results:
        if result.mode not in modes:
            modes.append(result.mode)
    lines.append("| stage | " + " | ".join(modes) + " |")
    lines.append("|---|" + "---|" * len(modes))
    for stage, results in report.stages():
        by_mode = {r.mode: r for r in results}
        cells = [_MARKS[by_mode[m].verdict] if m in by_mode else "–" for m in modes]
        lines.append(f"| {_cell(stage)} | " + " | ".join(cells) + " |")
    failures = [r for r in report.results if r.verdict == "fail"]
    if failures:
        lines += ["", "### Failures"]
        for result in failures:
            first = _headline(result.detail)
            how = "crashed" if result.crashed else "failed"
            lines += [
                "",
                f"<details><summary><code>{_html(result.name)}</code> {how}: {_html(first)}</summary>",
                "",
                _fence(result.detail or "no message"),
                "",
                "</details>",
            ]
    kept = [r for r in report.results if r.requests or r.usage is not None]
    if kept:
        lines += ["", f"<details><summary>Evidence: requests and usage of {len(kept)} cases</summary>", ""]
        lines += [f"- {_code(r.name)}: {_evidence_cell(r)}" for r in kept]
        lines += ["", "</details>"]
    skips = [r for r in report.results if r.verdict == "skip"]
    if skips:
        noun = "case" if len(skips) == 1 else "cases"
        lines += ["", f"<details><summary>Skipped: {len(skips)} {noun}</summary>", ""]
        lines += [f"- {_code(r.name)}: {_cell(r.detail)}" for r in skips]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _usage_cell(usage: Any) -> str:
    if usage is None:
        return "none"
    if isinstance(usage, str):
        return usage
    return f"{usage['input_tokens']} in, {usage['output_tokens']} out, {usage['total_tokens']} total"


def _evidence_cell(result: CaseResult) -> str:
    """One case's evidence: usage reported (and sent), then each request's status and request id."""
    parts = []
    if result.usage is not None:
        reported, sent = result.usage.get("reported"), result.usage.get("sent")
        said = "unavailable" if reported is None else _usage_cell(reported)
        parts.append(f"usage {said} (the provider's: {_usage_cell(sent)})")
    answered = []
    for r in result.requests:
        status = "no status" if r.get("status") is None else str(r["status"])
        answered.append(f"{status} {_code(str(r['request_id']))}" if r.get("request_id") else status)
    if answered:
        parts.append("requests " + ", ".join(answered))
    return _cell("; ".join(parts))


def _headline(detail: str, limit: int = 160) -> str:
    """The line a collapsed failure shows: its first problem (``- ...``), else its first line."""
    lines = [line.strip() for line in detail.strip().splitlines()]
    if not lines:
        return "no message"
    line = next((x[2:] for x in lines if x.startswith("- ")), lines[0])
    if len(line) <= limit:
        return line
    cut = line.rfind(" ", 0, limit - 1)
    return line[: cut if cut > 0 else limit - 1].rstrip(" ,;:") + " …"


def _client_cell(stamp: Stamp) -> str:
    if not stamp.client:
        return "not declared (the target names no client package)"
    why = f" ({_cell(stamp.client_evidence)})" if stamp.client_evidence else ""
    return f"{_code(stamp.client)} {_cell(stamp.client_version or NOT_INSTALLED)}{why}"


def _recording_rows(stamp: Stamp) -> List[str]:
    """The Markdown rows of a replayed run: what its recordings were made against."""
    recording = stamp.recording
    if not recording:
        return []

    def listed(key: str) -> str:
        values = list(recording.get(key) or ())
        return ", ".join(_code(v) for v in values) if values else "not stamped"

    when = recording["recorded_at"]
    span = when["first"] if when["first"] == when["last"] else f"{when['first']} to {when['last']}"
    rows = [
        f"| replayed from | {_cell(str(recording['source']))}: {recording['fixtures']} recorded exchanges |",
        f"| recorded model | {listed('models')} |",
        f"| recorded base URL | {listed('base_urls')} |",
        f"| recorded at | {span} |",
        f"| recorded tool schema sha256 | {listed('schema_hashes')} |",
        f"| recorded client | {listed('user_agents')} |",
    ]
    for field_name in recording.get("disagreements") or ():
        rows.append(
            f"| ⚠️ fixtures disagree | on {_cell(field_name)}: re-record them together, or split the folder |"
        )
    return rows


# --- The command --------------------------------------------------------------------------


def _writable(path: str, flag: str) -> Path:
    """``path`` made absolute, or a usage error that says why it cannot be written."""
    from .._targets import UsageError

    resolved = Path(path).expanduser().resolve()
    if resolved.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name, e.g. {flag} {path}/report")
    folder = resolved.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK) or (resolved.exists() and not os.access(resolved, os.W_OK)):
        raise UsageError(f"{flag} {path}: not writable; choose a path this user may write")
    return resolved


#: The method each suite's TestCase mixin builds its target with.
_MIXIN_TARGETS = ("agent_loop_target", "conformance_target")


def target_of(obj: Any, spec: str = "") -> Any:
    """``obj``, or the target a TestCase class built on one of the suites' mixins stands for."""
    import unittest

    from .._targets import UsageError

    if not (isinstance(obj, type) and issubclass(obj, unittest.TestCase)):
        return obj
    method = next((name for name in _MIXIN_TARGETS if hasattr(obj, name)), None)
    if method is None:
        return obj  # refused by the caller, which names what it takes
    if getattr(obj, "wire", None) is None:
        raise UsageError(
            f"{spec or obj.__qualname__} sets no wire (a shared base?); name a subclass that sets "
            "wire = openai_chat_wire or another"
        )
    return getattr(obj(), method)()


def command(
    spec: str,
    *,
    json_path: str,
    markdown_path: str,
    smoke: bool,
    junit_path: Optional[Path] = None,
    jobs: int,
    client: Optional[str],
    out: Any,
) -> int:
    """``python -m conformance gate``: run, write both files, print a summary; the exit status."""
    from .._targets import UsageError, load

    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    json_file = _writable(json_path, "--json")
    markdown_file = _writable(markdown_path, "--markdown")
    if json_file == markdown_file:
        raise UsageError(f"--json and --markdown both name {json_path}; give two different files")
    target = target_of(load(spec), spec)
    suite = suite_for(target)
    if suite is None:
        raise UsageError(
            f"{spec} is a {type(target).__name__}; expected an AgentLoopTarget, a BackendConformanceTarget, "
            "or a TestCase class using AgentLoopConformanceTestCase or BackendConformanceTestCase"
        )
    out.write(f"running the {'smoke' if smoke else 'full'} gate of {target.name}, {jobs} cases at a time\n")
    out.flush()
    report = run_gate(target, smoke=smoke, jobs=jobs, client=client, suite=suite)
    try:
        json_file.write_text(report.to_json(), encoding="utf-8")
        markdown_file.write_text(report.markdown(), encoding="utf-8")
        if junit_path is not None:
            junit_path.write_text(report.junit(), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write the report: {exc}") from None
    out.write(report.summary() + "\n")
    also = f" and JUnit XML to {junit_path}" if junit_path is not None else ""
    out.write(f"wrote {json_file} and {markdown_file}{also}\n")
    return 0 if report.passed else 1
