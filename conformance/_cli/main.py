"""The command line: the reference matrix, a user's target, or one scenario served.

    python -m conformance                       both suites, reference targets, all wires, h1 and h2c
    python -m conformance --suite backend       the backend suite alone (--suite loop: the agent loops)
    python -m conformance run MODULE:NAME       a user's target (backend or agent loop) or TestCase class
    python -m conformance serve --wire W --scenario S [--mode M] [--variant V] [--port P] [--http2]
    python -m conformance serve --wire W --stage STAGE [--mode M] [--timeout S] [--json PATH] [--junit PATH]
    python -m conformance serve --list [--wire W] [--scenario S | --stage STAGE]
    python -m conformance serve --wire openai-chat --servers mistral,groq [--reasoning-content] ...
    python -m conformance record --wire W --upstream URL [--out DIR] [--scenario S] [--port P]
    python -m conformance gate MODULE:NAME [--json PATH] [--markdown PATH] [--junit PATH] [--smoke]
    python -m conformance judge --wire W [--suite loop|backend|both] [--stage S] [--junit PATH] -- CLIENT...

Every command that runs cases takes --json PATH and --junit PATH (JUnit XML), written
whether the cases pass or not; options shared with the top level (--jobs, --processes,
--json, --junit) may stand before the command's name or after it. The reference matrix
and ``serve`` take a shipped wire's configurations too (``--servers``,
``--reasoning-content``: ``_wire_options``); ``run`` and ``gate`` use the target's own wire.

``serve`` judges the client it serves once the client reports how its run ended
(``POST /conformance/outcome``), with the tools at ``POST /conformance/tools/<name>``;
``judge`` runs a client's command once per stage (or scenario) and mode, each run
judged so, into one report.

Exit status: 0 when every case passed or was skipped, 1 when a case failed, 2 for a
usage error (an unknown wire or scenario, a MODULE:NAME that does not load).
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence, TextIO

from .._targets import UsageError
from .._wire_options import add_options, as_code, configured, flags_of, given
from .gate import _gate_parser, command_gate
from .judge import _judge_parser, command_judge
from .matrix import SUITES, TRANSPORTS, command_matrix
from .record import _record_parser, command_record
from .run import _run_parser, command_run
from .serve import _serve_parser, command_serve
from .shared import _misplaced, _shared_options


def main(argv: Optional[Sequence[str]] = None, out: TextIO = sys.stdout) -> int:
    from ..wires import WIRES

    wires = ", ".join(WIRES)
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m conformance",
        description=__doc__.split("\n\n")[0],
        epilog="exit status: 0 all passed (or skipped), 1 a case failed, 2 a usage error",
    )
    _shared_options(parser, suppress=False)
    parser.add_argument("--wire", action="append", help=f"only this wire (repeatable): one of {wires}")
    add_options(parser)
    parser.add_argument("--transport", action="append", choices=TRANSPORTS, help="only this transport")
    parser.add_argument(
        "--suite",
        choices=SUITES,
        default="both",
        help="the backend suite, the agent-loop suite, or both (the default)",
    )
    parser.add_argument(
        "--retries",
        action="store_true",
        help="run each reference backend inside the reference retry layer, on targets that say they retry",
    )
    sub = parser.add_subparsers(dest="command")
    run = _run_parser(sub)
    serve = _serve_parser(sub, wires)
    record = _record_parser(sub)
    gate = _gate_parser(sub)
    judge = _judge_parser(sub, wires)
    commands = {"run": run, "serve": serve, "record": record, "gate": gate, "judge": judge}
    misplaced = _misplaced(argv, parser, commands)
    if misplaced is not None:
        parser.error(misplaced)
    args = parser.parse_args(argv)
    try:
        try:
            settings = given(args)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if settings and args.command in ("gate", "record", "run"):
            flags = " ".join(f for name in settings for f in flags_of(configured(name, settings)))
            raise UsageError(
                f"{flags} configure a shipped wire for the reference matrix and serve; {args.command} "
                f"uses the target's own wire: give the target wire={as_code(settings)}"
            )
        if args.command == "gate":
            return command_gate(args, out)
        if args.command == "record":
            return command_record(args, out)
        if args.command == "run":
            return command_run(args, out)
        if args.command == "serve":
            return command_serve(args, out, settings)
        if args.command == "judge":
            return command_judge(args, out, settings)
        return command_matrix(args, out, settings)
    except UsageError as exc:
        chosen = commands.get(args.command, parser)
        chosen.error(str(exc))
    return 2  # parser.error() exits; this line is for the type checker
