"""``record``: a loopback recording proxy in front of a real provider."""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from .._targets import UsageError
from .._wire_options import add_options
from ..scenarios import SCENARIOS


def command_record(args: argparse.Namespace, out: TextIO) -> int:
    """A loopback recording proxy in front of a real provider; one fixture per exchange."""
    import ssl

    from ..gate.record import Recorder
    from ..wires import WIRES

    if args.wire not in WIRES:
        raise UsageError(f"unknown wire {args.wire!r}; known: {', '.join(WIRES)}")
    from ..gate.stages import STAGES

    if args.scenario is not None and args.scenario not in SCENARIOS and args.scenario not in STAGES:
        raise UsageError(
            f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}; or an agent-loop "
            f"stage: {', '.join(STAGES)}"
        )
    context = ssl.create_default_context(cafile=args.cafile) if args.cafile else None
    try:
        recorder = Recorder(
            WIRES[args.wire],
            args.upstream,
            args.out,
            port=args.port,
            ssl_context=context,
            scenario=args.scenario,
            run_id=args.run_id,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    with recorder:
        out.write(
            f"recording {args.wire} at {recorder.url} -> {recorder.base_url}, fixtures in "
            f"{args.out}; point the backend's base URL here; Ctrl-C stops\n"
        )
        out.flush()
        shown = refused = 0
        try:
            while True:
                time.sleep(0.2)
                written = recorder.written
                for path in written[shown:]:
                    out.write(f"  wrote {path}\n")
                shown = len(written)
                for line in recorder.refused[refused:]:
                    out.write(f"  {line}\n")
                refused = len(recorder.refused)
                out.flush()
        except KeyboardInterrupt:
            out.write(f"stopped; {len(recorder.written)} fixtures written\n")
    return 0


def _record_parser(sub: Any) -> argparse.ArgumentParser:
    record: argparse.ArgumentParser = sub.add_parser(
        "record", help="record a real provider's answers as replayable fixtures"
    )
    record.add_argument("--wire", required=True)
    record.add_argument(
        "--upstream", required=True, metavar="URL", help="the provider, e.g. https://api.openai.com"
    )
    record.add_argument("--out", default="fixtures", metavar="DIR", help="where fixtures are written")
    record.add_argument(
        "--scenario",
        help="stamp each fixture with the conformance scenario (or agent-loop stage) it stands for",
    )
    record.add_argument(
        "--run-id",
        help="stamp each fixture with the GateToolset run id the recorded loop ran its tools with, "
        "so that replayed tool results repeat",
    )
    record.add_argument("--port", type=int, default=0)
    add_options(record, suppress=True, hidden=True)
    record.add_argument("--cafile", help="trust this CA bundle for the upstream (default: the system's)")
    return record
