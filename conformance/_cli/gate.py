"""``gate``: a target's gate, with the release report (JSON and Markdown)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from .._wire_options import add_options
from .shared import _default_jobs, report_paths


def _gate_parser(sub: Any) -> argparse.ArgumentParser:
    # The defaults are spelt here, not imported, so that building the parser stays cheap.
    gate: argparse.ArgumentParser = sub.add_parser(
        "gate",
        help="run a target's gate and write the release report (JSON and Markdown)",
        description="Run a target's cases and write a JSON report and a Markdown summary for a pull "
        "request. Use --smoke after a configuration change (a few seconds: plain text and one tool "
        "turn, chat and stream); run the full matrix after an SDK, schema, gateway or parser change.",
        epilog="exit status: 0 all passed (or skipped), 1 a case failed, 2 a usage error",
    )
    gate.add_argument(
        "target", metavar="MODULE:NAME", help="an AgentLoopTarget or a BackendConformanceTarget"
    )
    # SUPPRESS: the same options given before "gate" stand unless given again after it.
    gate.add_argument(
        "--json",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="default: conformance-report.json in the working directory",
    )
    gate.add_argument(
        "--junit",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="also write every case's outcome as JUnit XML, the form CI systems show",
    )
    gate.add_argument(
        "--markdown", metavar="PATH", help="default: conformance-report.md in the working directory"
    )
    gate.add_argument("--smoke", action="store_true", help="the short set, for a configuration change")
    gate.add_argument("--jobs", type=int, default=argparse.SUPPRESS, metavar="N", help="cases run at once")
    gate.add_argument(
        "--client",
        metavar="PACKAGE",
        help="report this client package's version (default: the target's client attribute)",
    )
    add_options(gate, suppress=True, hidden=True)
    return gate


def command_gate(args: argparse.Namespace, out: TextIO) -> int:
    from ..gate.report import DEFAULT_JSON, DEFAULT_MARKDOWN, command

    junit = report_paths(argparse.Namespace(junit=getattr(args, "junit", None))).get("--junit")
    return command(
        args.target,
        json_path=getattr(args, "json", None) or DEFAULT_JSON,
        junit_path=junit,
        markdown_path=args.markdown or DEFAULT_MARKDOWN,
        smoke=args.smoke,
        jobs=args.jobs if args.jobs is not None else _default_jobs(),
        client=args.client,
        out=out,
    )
