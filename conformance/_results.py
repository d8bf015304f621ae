"""Case results as CI systems read them: JUnit XML and JSON.

Strategy: every command that runs cases hands its results here as
:class:`CaseRecord` rows (one per case: the target it belongs to, its name, the
outcome and its text, how long it took) and writes them with :func:`write_reports`
whether the cases passed or not, since a failing run is the one whose report is
read. JUnit XML follows the shape every CI system shows (Jenkins, GitLab, GitHub
annotations, Azure): a ``<testsuite>`` per target, a ``<testcase>`` per case whose
``classname`` is the target, and a ``<failure>``, ``<error>`` or ``<skipped>``
child carrying the first problem and its check id as its ``message`` (the text's
first line where it names no check) and the whole text as its body. The JSON is the
same rows with the run's totals, for a script to read.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["OUTCOMES", "CaseRecord", "junit_xml", "results_document", "results_json", "write_reports"]

#: What a case can come to: the matrix's own words for them.
OUTCOMES = ("pass", "FAIL", "ERROR", "skip")
#: The JSON report's format version; a reader checks it before trusting the fields.
RESULTS_SCHEMA = 1

#: Characters XML 1.0 cannot carry at all, even escaped (a failure text may quote raw
#: bytes a backend sent, and a terminal's colour codes start with ESC).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: A lone surrogate: valid in JSON text as an escape (a client may report ``"\\ud800"``),
#: but not as a character of a UTF-8 file.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: A problem's line in a failure text: ``  - <what went wrong> [<check id>]``, as both
#: suites' ``failure_message`` write it.
_PROBLEM = re.compile(r"^\s*- (.*\[([a-z0-9-]+)\])\s*$")


@dataclass(frozen=True)
class CaseRecord:
    """One case's outcome: which target it belongs to, what came of it, and how long it took."""

    target: str
    case: str
    outcome: str
    detail: str = ""
    seconds: float = 0.0
    #: ``backend`` or ``loop``: which suite the case belongs to.
    suite: str = "backend"
    wire: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {self.outcome!r}")

    def as_dict(self) -> Dict[str, Any]:
        return {
            "target": self.target,
            "suite": self.suite,
            "wire": self.wire,
            "case": self.case,
            "outcome": {"pass": "pass", "skip": "skip", "FAIL": "fail", "ERROR": "error"}[self.outcome],
            "detail": self.detail,
            "seconds": round(self.seconds, 4),
        }


def _counts(records: Sequence[CaseRecord]) -> Dict[str, int]:
    return {
        "cases": len(records),
        "passed": sum(1 for r in records if r.outcome == "pass"),
        "failed": sum(1 for r in records if r.outcome == "FAIL"),
        "errors": sum(1 for r in records if r.outcome == "ERROR"),
        "skipped": sum(1 for r in records if r.outcome == "skip"),
    }


def _kit_version() -> str:
    from ._version import kit_version

    return kit_version()


def results_json(records: Sequence[CaseRecord], *, command: str, seconds: float) -> str:
    """The JSON report: the run's totals, then every case in the order run."""
    return json_text(results_document(records, command=command, seconds=seconds))


def results_document(
    records: Sequence[CaseRecord], *, command: str, seconds: float, timestamp: Optional[str] = None
) -> Dict[str, Any]:
    """The JSON report as a mapping: what every command's ``--json`` holds (the gate's release
    report holds it too, beside its own members)."""
    counts = _counts(records)
    return {
        "schema": RESULTS_SCHEMA,
        "command": command,
        "kit_version": _kit_version(),
        "timestamp": timestamp or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(seconds, 3),
        "verdict": "fail" if counts["failed"] or counts["errors"] else "pass",
        "counts": counts,
        "cases": [r.as_dict() for r in records],
    }


def json_text(document: Any) -> str:
    """``document`` as JSON that a UTF-8 file can hold: a lone surrogate stays its escape."""
    text = json.dumps(document, indent=2, ensure_ascii=False)
    # Outside strings JSON has only ASCII, so each surrogate here sits in a string.
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def _clean(text: str) -> str:
    """``text`` with what XML cannot hold shown as ``\\xNN`` (``\\uNNNN``) instead."""
    return _NOT_XML.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text
    )


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def headline(detail: str) -> str:
    """What a dashboard shows of a failure: its first problem with the check id, else its first line."""
    for line in detail.splitlines():
        match = _PROBLEM.match(line)
        if match:
            return match.group(1)
    return _first_line(detail)


def junit_xml(records: Sequence[CaseRecord], *, name: str, seconds: float) -> str:
    """The JUnit XML report: a ``<testsuite>`` per target, in the order the targets first ran.

    A failure's ``message`` is its first problem with the check id that found it.
    """
    import xml.etree.ElementTree as ET

    by_target: Dict[str, List[CaseRecord]] = {}
    for record in records:
        by_target.setdefault(record.target, []).append(record)
    totals = _counts(records)
    # Each suite's time is the sum of its cases', and the root's the sum of the suites'
    # (cases that ran side by side count each): one meaning at every level. The run's
    # wall time (``seconds``) is the JSON report's.
    root = ET.Element(
        "testsuites",
        {
            "name": _clean(name),
            "tests": str(totals["cases"]),
            "failures": str(totals["failed"]),
            "errors": str(totals["errors"]),
            "skipped": str(totals["skipped"]),
            "time": f"{sum(r.seconds for r in records):.3f}",
        },
    )
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    for target, rows in by_target.items():
        counts = _counts(rows)
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": _clean(target),
                "tests": str(counts["cases"]),
                "failures": str(counts["failed"]),
                "errors": str(counts["errors"]),
                "skipped": str(counts["skipped"]),
                "time": f"{sum(r.seconds for r in rows):.3f}",
                "timestamp": stamp,
            },
        )
        for row in rows:
            case = ET.SubElement(
                suite,
                "testcase",
                {"classname": _clean(target), "name": _clean(row.case), "time": f"{row.seconds:.3f}"},
            )
            tag = {"FAIL": "failure", "ERROR": "error", "skip": "skipped"}.get(row.outcome)
            if tag is None:
                continue
            message = headline(row.detail) if tag != "skipped" else _first_line(row.detail)
            child = ET.SubElement(case, tag, {"message": _clean(message)})
            if tag != "skipped":
                child.set("type", "AssertionError" if tag == "failure" else "Exception")
                child.text = _clean(row.detail)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def check_writable(paths: Mapping[str, Optional[str]]) -> Dict[str, Path]:
    """The report paths given, checked before any case runs: each names a file in a folder that exists.

    Raises :class:`ValueError` naming the option and what is wrong, so a run of many
    minutes never ends unable to write what it was asked for.
    """
    chosen: Dict[str, Path] = {}
    for option, value in paths.items():
        if not value:
            continue
        path = Path(value)
        if path.is_dir():
            raise ValueError(f"{option} {value} is a folder; give a file name, e.g. {path / 'results'}")
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise ValueError(f"{option} {value}: the folder {parent} does not exist; create it first")
        if not os.access(parent, os.W_OK):
            raise ValueError(f"{option} {value}: the folder {parent} is not writable")
        chosen[option] = path
    seen: Dict[Path, str] = {}
    for option, path in chosen.items():
        key = path.resolve()
        if key in seen:
            raise ValueError(f"{seen[key]} and {option} both name {path}; give two different files")
        seen[key] = option
    return chosen


def write_reports(
    records: Sequence[CaseRecord],
    *,
    json_path: Optional[Path],
    junit_path: Optional[Path],
    command: str,
    seconds: float,
) -> List[Tuple[str, Path]]:
    """Write the reports asked for; the ``(kind, path)`` of each one written."""
    written = []
    if json_path is not None:
        json_path.write_text(results_json(records, command=command, seconds=seconds), encoding="utf-8")
        written.append(("JSON", json_path))
    if junit_path is not None:
        junit_path.write_text(junit_xml(records, name=command, seconds=seconds), encoding="utf-8")
        written.append(("JUnit XML", junit_path))
    return written
