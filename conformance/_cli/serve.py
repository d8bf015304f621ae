"""``serve``: one scenario or agent-loop stage served to a client in any language, and judged."""

from __future__ import annotations

import argparse
import dataclasses
import email.utils
import re
import secrets
import time
import uuid
from typing import Any, Dict, List, Optional, TextIO, Tuple

from .._case import MAX_READ_TIMEOUT
from .._targets import UsageError
from .._wire_options import add_options, configured, extra_variants, flags_of
from ..scenarios import MODES, SCENARIOS
from .listing import listing
from .shared import (
    _RESULT_OPTIONS,
    _configured,
    _paint,
    printable,
    report_paths,
    sigterm_as_interrupt,
    use_colour,
    write_quietly,
)

#: What ``serve`` keeps of its request record; older requests are dropped and counted.
SERVE_MAX_REQUESTS = 1000

#: Headers that carry a request id, by lower-case name, on the wires that send one.
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid")


def fresh_request_id(like: str) -> str:
    """A new id in the shape of ``like``: a UUID for a UUID, else its prefix and new characters."""
    if re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", like):
        return str(uuid.uuid4())
    prefix, _, rest = like.rpartition("_")
    body = secrets.token_hex(max(12, len(rest)))[: max(12, len(rest))]
    return f"{prefix}_{body}" if prefix else body


def served(reply: Any) -> Any:
    """``reply`` as ``serve`` sends it: a fresh request id and the current ``date`` on each response.

    The wires answer with fixed ids and dates so that the cases read the same on
    every run; a client pointed at ``serve`` sees what a live provider sends instead.
    """
    from ..provider import JsonReply, StreamReply

    if not isinstance(reply, (JsonReply, StreamReply)):
        return reply  # a HangReply sends no headers at all
    headers = {k: v for k, v in (reply.headers or {}).items() if k.lower() != "date"}
    ids = [k for k in headers if k.lower() in _REQUEST_ID_HEADERS]
    for name in ids:
        headers[name] = fresh_request_id(headers[name])
    if not ids:
        headers["x-request-id"] = fresh_request_id("req_")
    headers["date"] = email.utils.formatdate(usegmt=True)
    return dataclasses.replace(reply, headers=headers)


def command_serve(args: argparse.Namespace, out: TextIO, settings: Dict[str, Dict[str, Any]]) -> int:
    from ..gate.tools import GateToolset
    from ..provider._server import is_loopback
    from ..wires import WIRES

    if args.wire is not None and args.wire not in WIRES:
        raise UsageError(f"unknown wire {args.wire!r}; known: {', '.join(WIRES)}")
    _configured(settings, [args.wire] if args.wire else None, "serve plays")
    if args.list:
        names = [args.wire] if args.wire else list(WIRES)
        listing(out, [configured(name, settings) for name in names], args.scenario, args.stage)
        return 0
    reports = report_paths(args)
    if args.scenario is not None and args.stage is not None:
        raise UsageError("give --scenario (a backend scenario) or --stage (an agent-loop stage), not both")
    if args.wire is None or (args.scenario is None and args.stage is None):
        asked = (("--wire", args.wire), ("--scenario or --stage", args.scenario or args.stage))
        missing = " and ".join(n for n, v in asked if not v)
        raise UsageError(f"serve needs {missing} (or --list, to see what each wire plays)")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    args.host = bare_host(args.host)
    if not is_loopback(args.host) and not args.allow_remote:
        raise UsageError(
            f"refusing to bind {args.host}: the fake provider answers anyone who connects; "
            "add --allow-remote if you mean it"
        )
    if args.stage is not None and settings:
        flags = " ".join(flags_of(configured(args.wire, settings)))
        raise UsageError(
            f"{flags} adds shapes to the backend scenarios (their variants); an agent-loop stage plays "
            f"the same conversation on every configuration of {args.wire}: leave {flags.split()[0]} out "
            "with --stage"
        )
    wire = configured(args.wire, settings)
    # SIGTERM (a CI job cancelled, a container stopped) ends serve as Ctrl-C does: the
    # tools' sandbox is removed on the way out, not left behind read-only.
    try:
        with sigterm_as_interrupt(), GateToolset(run_id=args.run_id) as toolset:
            session, title = _serve_session(args, wire, toolset)
            try:
                return _serve_run(session, title, wire, reports, args, out)
            finally:
                session.close()
    except KeyboardInterrupt:  # before the run began waiting, or while the verdict was said
        out.write("stopped\n")
        out.flush()
        return 0


def _serve_run(
    session: Any, title: str, wire: Any, reports: Dict[str, Any], args: argparse.Namespace, out: TextIO
) -> int:
    """Serve until the client reports (or ``--timeout``, or Ctrl-C); print and write the verdict."""
    from ..provider._server import is_loopback

    if not is_loopback(args.host):
        out.write(f"warning: listening on {args.host}, reachable from other machines\n")
        out.flush()

    def handler(request: Any) -> Any:
        out.write(printable(f"{time.strftime('%H:%M:%S')} {request} {len(request.body)} bytes") + "\n")
        out.flush()
        return session.handle(request)

    provider = start_served(args.http2, args.host, args.port, args.allow_remote)
    with provider:
        session.attach(lambda: provider.requests)
        provider.reply(handler)
        until = f"POST {provider.url}/conformance/outcome ends the run"
        bound = f" (or {args.timeout:g} s pass)" if args.timeout is not None else ""
        shown = " ".join(flags_of(wire))
        out.write(
            f"serving {wire.title}{f' ({shown})' if shown else ''} {title} at {provider.url}"
            f"{' (h2c only)' if args.http2 else ''}; {until}{bound}; Ctrl-C stops\n"
        )
        out.flush()
        printed: Dict[int, Any] = {}
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        try:
            while not session.done.is_set():
                # Also a moment for the client to read its verdict and say no more before the
                # port closes, which is why this sleeps rather than waits on the report.
                time.sleep(PRINT_EVERY)
                _print_events(provider.requests, printed, out)
                if deadline is not None and time.monotonic() > deadline:
                    out.write(f"no outcome reported within {args.timeout:g} s\n")
                    session.give_up()
                    break
        except KeyboardInterrupt:
            out.write("stopped\n")
            return 0
        # Let the client read its verdict before the port closes.
        _answered(provider.requests)
        _print_events(provider.requests, printed, out)
    verdict = session.verdict
    assert verdict is not None
    return _say_verdict(verdict, reports, args, out, wire)


def bare_host(host: str) -> str:
    """``host`` as the socket takes it: an IPv6 address given as in a URL (``[::1]``) unbracketed."""
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1]
    return host


def start_served(http2: bool, host: str, port: int, allow_remote: bool) -> Any:
    """The fake provider as ``serve`` and ``judge`` run it, or a usage error naming why it cannot listen."""
    from .._judge import JUDGE_MAX_BODY_BYTES
    from ..provider import start_fake_provider

    try:
        # A serve session may run for days: keep the newest requests, not all of them. Its
        # bodies are a few KB; a bigger one is refused with a 413 before it is read.
        return start_fake_provider(
            http2=http2,
            host=host,
            port=port,
            allow_remote=allow_remote,
            max_requests=SERVE_MAX_REQUESTS,
            max_body_bytes=JUDGE_MAX_BODY_BYTES,
        )
    except OSError as exc:  # socket.gaierror for a name that does not resolve, EADDRINUSE, ...
        raise UsageError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None


def _serve_session(args: argparse.Namespace, wire: Any, toolset: Any) -> Tuple[Any, str]:
    """The judge's session for ``serve``'s scenario or stage, and the title it is served under."""
    from .._judge import BackendSession
    from ..gate._remote import StageSession

    common: Dict[str, Any] = {
        "model": args.model,
        "http2": args.http2,
        "timeout": args.timeout or DEFAULT_CLIENT_TIMEOUT,
        "dress": served,
        "client_name": args.client_name or default_client_name(wire.name),
    }
    if args.stage is not None:
        from ..gate.stages import STAGES

        if args.stage not in STAGES:
            hint = f"; it is a backend scenario: --scenario {args.stage}" if args.stage in SCENARIOS else ""
            raise UsageError(f"unknown stage {args.stage!r}; known: {', '.join(STAGES)}{hint}")
        if args.mode not in STAGES[args.stage].modes:
            raise UsageError(f"{args.stage} runs in {', '.join(STAGES[args.stage].modes)} mode only")
        if args.variant:
            raise UsageError("--variant chooses a backend scenario's shape; a stage has one script")
        from ..errors import TargetDefinitionError

        try:
            stage_session = StageSession(
                wire, args.stage, args.mode, toolset, max_result_chars=args.max_result_chars, **common
            )
        except TargetDefinitionError as exc:  # a --max-result-chars below 1
            raise UsageError(str(exc).replace("max_result_chars", "--max-result-chars")) from None
        skip = stage_session.case.skip
        if skip:
            raise UsageError(f"{wire.name} does not play the {args.stage} stage in {args.mode} mode: {skip}")
        return stage_session, f"stage {args.stage}/{args.mode}"
    if args.scenario not in SCENARIOS:
        from ..gate.stages import STAGES

        hint = f"; it is an agent-loop stage: --stage {args.scenario}" if args.scenario in STAGES else ""
        raise UsageError(f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}{hint}")
    if args.mode not in SCENARIOS[args.scenario].modes:
        raise UsageError(f"{args.scenario} runs in {', '.join(SCENARIOS[args.scenario].modes)} mode only")
    absent = wire.absent(args.scenario)
    if absent is not None:
        raise UsageError(f"{wire.name} has no {args.scenario} scenario: {absent}")
    read_timeout = getattr(args, "read_timeout", None)
    if SCENARIOS[args.scenario].needs_read_timeout and read_timeout is None:
        raise UsageError(
            f"{args.scenario} holds the provider silent for a share of the client's read timeout: "
            "pass --read-timeout SECONDS, the seconds your client waits for the next byte (a second "
            "or less keeps the run quick)"
        )
    if read_timeout is not None and not 0 < read_timeout <= MAX_READ_TIMEOUT:
        raise UsageError(
            f"--read-timeout must be above 0 and at most {MAX_READ_TIMEOUT:g} seconds, got {read_timeout:g}"
        )
    variant = chosen_variant(wire, args.scenario, args.mode, args.variant)
    shape = f" [{variant.name}: {variant.title}]" if variant.name else ""
    session = BackendSession(
        wire, args.scenario, args.mode, variant, toolset, read_timeout=read_timeout, **common
    )
    return session, f"{args.scenario}/{args.mode}{shape}"


def default_client_name(wire: str) -> str:
    """What the reports call a client not named with ``--client-name``: ``client.<wire>``, so that
    the reports of several wires merge without colliding."""
    return f"client.{wire}"


#: The bound ``serve`` gives a client's run when ``--timeout`` is not set, as a
#: target's default ``timeout``: the task's ``max_seconds`` is most of it.
DEFAULT_CLIENT_TIMEOUT = 5.0


#: How often ``serve`` prints the events the provider sent, while it waits for the report.
PRINT_EVERY = 0.05


def _answered(requests: List[Any], within: float = 1.0) -> None:
    """Wait, bounded, until the report's answer (the verdict) has gone out."""
    deadline = time.monotonic() + within
    for request in requests:
        if request.path == "/conformance/outcome":
            # Its one chunk, the verdict, flushed; at once where it never will be (the client left).
            request.wait_flushed(1, max(0.0, deadline - time.monotonic()))


def _say_verdict(
    verdict: Any, reports: Dict[str, Any], args: argparse.Namespace, out: TextIO, wire: Any
) -> int:
    record = verdict.record
    # The reports first: whatever the text holds, a CI that asked for them gets them.
    written = []
    if reports:
        shown = "".join(f" {flag}" for flag in flags_of(wire))
        command = f"python -m conformance serve --wire {args.wire}{shown} " + (
            f"--stage {args.stage}" if args.stage else f"--scenario {args.scenario}"
        )
        written = write_quietly([record], reports, f"{command} --mode {args.mode}", record.seconds)
    words = {"pass": "passed", "FAIL": "FAILED", "ERROR": "ERROR", "skip": "skipped"}[record.outcome]
    line = f"verdict: {record.wire} {record.case} {words}"
    if verdict.checks:
        line += f" [{', '.join(verdict.checks)}]"
    out.write("\n" + _paint(printable(line), record.outcome, use_colour(out)) + "\n")
    if record.detail:
        out.write(printable(record.detail) + "\n")
    for kind, path in written:
        out.write(f"wrote {kind} to {path}\n")
    out.flush()
    return 1 if verdict.failed else 0


def chosen_variant(wire: Any, scenario: str, mode: str, name: Optional[str]) -> Any:
    """The variant ``serve --variant`` names (the first shape when none is named)."""
    variants = wire.variants(scenario, mode)
    if not name:
        return variants[0]
    for variant in variants:
        if variant.name == name:
            return variant
    import difflib

    names = [v.name for v in variants if v.name]
    wanted = (scenario, mode, name)
    elsewhere = [needs for s, m, _, v, needs in extra_variants(wire) if (s, m, v.name) == wanted]
    if elsewhere:
        raise UsageError(
            f"{wire.name} plays the variant {name!r} of {scenario}/{mode} only with {elsewhere[0]}: add it"
        )
    if not names:
        raise UsageError(f"{wire.name} answers {scenario}/{mode} in one shape only: leave --variant out")
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"its variants: {', '.join(names)}"
    raise UsageError(f"{wire.name} has no variant {name!r} of {scenario}/{mode}; {hint}")


def _print_events(requests: List[Any], printed: Dict[int, Any], out: TextIO) -> None:
    """Print the event log of each reply that has gone out (or whose client left), once."""
    for request in requests:
        log = request.response
        if id(request) in printed or log is None or not (log.complete() or request.closed):
            continue
        printed[id(request)] = request  # kept so that the id is not reused while listed
        out.write(printable(f"  sent {log.status} {log.content_type} for {request}:") + "\n")
        for event in request.events:
            out.write(printable(f"    {event.describe(request.received_at)}") + "\n")
        out.flush()
    if len(printed) > 2 * SERVE_MAX_REQUESTS:
        alive = {id(r) for r in requests}
        for key in [k for k in printed if k not in alive]:
            del printed[key]


def _serve_parser(sub: Any, wires: str) -> argparse.ArgumentParser:
    """``serve``'s options; ``wires`` names the wires it plays."""
    serve: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="serve one scenario or agent-loop stage to a client in any language, and judge it",
        description="Serve one backend scenario (--scenario) or one agent-loop stage (--stage) of the "
        "gate to a client in any language, logging each request. On the same port: GET "
        "/conformance/task says what to run, POST /conformance/tools/<name> runs the gate's tools, and "
        "POST /conformance/outcome (the client's result) ends the run with the verdict the Python "
        "suite would give, printed, answered and written to --json and --junit.",
        epilog="exit status: 0 the client passed (or the case cannot be judged from outside, or Ctrl-C), "
        "1 a check failed, 2 a usage error",
    )
    serve.add_argument("--wire", help=f"one of {wires}")
    add_options(serve, suppress=True)
    serve.add_argument("--scenario", help=f"a backend scenario: one of {', '.join(SCENARIOS)}")
    serve.add_argument(
        "--stage",
        help="an agent-loop stage of the gate (the scripted multi-turn conversations; see --list)",
    )
    serve.add_argument("--mode", default="chat", choices=MODES)
    serve.add_argument(
        "--variant",
        metavar="NAME",
        help="the real shape to answer in, where the scenario has several (default: the first; see --list)",
    )
    serve.add_argument(
        "--list",
        action="store_true",
        help="list every scenario, mode and variant, and every agent-loop stage, the wire plays (every "
        "wire without --wire), and exit",
    )
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    serve.add_argument("--http2", action="store_true", help="speak h2c only")
    serve.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="end the run after this long even if no outcome was reported (then judged as a client still "
        f"running); also the run's bound, of which the task's max_seconds is 80%% (default "
        f"{DEFAULT_CLIENT_TIMEOUT:g} s, and no end)",
    )
    serve.add_argument(
        "--read-timeout",
        type=float,
        metavar="SECONDS",
        help="the client's read timeout: the latency scenarios (slow-first-token, stall) hold the "
        "provider silent for a share of it, and need it",
    )
    serve.add_argument("--model", default="conformance-model", help="the model the client must name")
    serve.add_argument(
        "--max-result-chars",
        type=int,
        metavar="N",
        help="the client's loop cuts tool results to this many characters (the large-result stage)",
    )
    serve.add_argument(
        "--run-id", help="the tools' run id, so that fixture ids repeat from run to run (default: random)"
    )
    serve.add_argument(
        "--client-name",
        metavar="NAME",
        help="the client's name in the reports: the JUnit suite and class name, the JSON target "
        "(default: client.<wire>)",
    )
    for option, text in _RESULT_OPTIONS:
        serve.add_argument(option, default=argparse.SUPPRESS, metavar="PATH", help="the verdict: " + text)
    return serve
