"""What the commands share: the options every command that runs cases takes, the default
number of cases and processes at once, colour on a terminal, and the reports written."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import threading
from typing import Any, Dict, Iterator, List, Optional, Sequence, TextIO, Tuple

from .._results import CaseRecord, check_writable, write_reports
from .._targets import AnyTarget, UsageError
from .._wire_options import check_chosen
from ..cases import BackendConformanceTarget

#: The outcome colours on a terminal (ANSI SGR codes).
COLOURS = {"pass": "32", "FAIL": "31", "ERROR": "31", "skip": "33"}


def use_colour(out: TextIO) -> bool:
    """Colour only on a terminal, and never where ``NO_COLOR`` is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(out, "isatty", None)
    return bool(callable(isatty) and isatty())


#: What a terminal would act on rather than show: C0 controls but newline and tab, DEL,
#: C1 controls (ANSI CSI and OSC sequences start with ESC or their C1 forms), and lone
#: surrogates (valid in JSON's ``\\ud800``, unwritable as UTF-8).
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` safe to print: every control character and lone surrogate shown as an escape.

    What a client sent (a path, an error message it reported) reaches the terminal of
    whoever runs ``serve``: an ESC there could move the cursor, retitle the window or
    hide a line, and a lone surrogate cannot be encoded at all.
    """
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _paint(text: str, status: str, colour: bool) -> str:
    code = COLOURS.get(status)
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text


def _default_jobs(waiting: bool = False) -> int:
    # Cases wait on sockets far more than they compute; a few at once pay even on 2 cores.
    jobs = max(2, min(8, 2 * (os.cpu_count() or 1)))
    # The gate's cases also wait on purpose (a timeout, retry delays, a hold, a grace):
    # cases that only wait take a slot and no CPU, so a matrix with them runs twice as many.
    return 2 * jobs if waiting else jobs


def _jobs(asked: Optional[int], targets: Sequence[Tuple[str, AnyTarget]]) -> int:
    """``--jobs`` as given, else the default for these targets."""
    if asked is not None:
        return asked
    return _default_jobs(waiting=any(not isinstance(t, BackendConformanceTarget) for _, t in targets))


#: A matrix of this many targets or more is spread over worker processes by default:
#: below it, starting the workers costs more than they save.
AUTO_PROCESSES_FROM = 6


#: The most worker processes the default spreads a matrix over.
MAX_PROCESSES = 8


def _default_processes(targets: int) -> int:
    # Two per CPU: a case runs several threads (the provider's, the driver's, a loop's)
    # that contend for one interpreter lock, so beyond one worker per CPU more workers
    # still shorten the run (both suites on two cores: 11 s over two, 6.5 s over four).
    if targets < AUTO_PROCESSES_FROM:
        return 1
    return max(1, min(2 * (os.cpu_count() or 1), MAX_PROCESSES, targets))


def _write(
    records: List[CaseRecord], reports: Dict[str, Any], command: str, elapsed: float, out: TextIO
) -> None:
    """Write the ``--json`` and ``--junit`` files asked for, and say so."""
    for kind, path in write_quietly(records, reports, command, elapsed):
        out.write(f"wrote {kind} to {path}\n")
    out.flush()


def write_quietly(
    records: List[CaseRecord], reports: Dict[str, Any], command: str, elapsed: float
) -> List[Tuple[str, Any]]:
    """Write the ``--json`` and ``--junit`` files asked for; the ``(kind, path)`` of each one written."""
    try:
        return write_reports(
            records,
            json_path=reports.get("--json"),
            junit_path=reports.get("--junit"),
            command=command,
            seconds=elapsed,
        )
    except OSError as exc:
        raise UsageError(f"cannot write the results: {exc}") from None


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`KeyboardInterrupt` as Ctrl-C does, so that it unwinds
    the same way (temporary folders removed, a client's processes ended).

    Only the main thread can set a handler: elsewhere (a test running a command in a
    thread) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def report_paths(args: argparse.Namespace) -> Dict[str, Any]:
    """The ``--json`` and ``--junit`` files asked for, checked before any case runs."""
    try:
        asked = {option: getattr(args, option[2:], None) for option in ("--json", "--junit")}
        return check_writable(asked)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _configured(settings: Dict[str, Dict[str, Any]], wires: Optional[Sequence[str]], where: str) -> None:
    """A usage error where the wire options configure a wire the command does not play."""
    try:
        check_chosen(settings, wires, where)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


#: Options every command that runs cases takes, before or after the command's name.
_RESULT_OPTIONS = (
    ("--json", "write every case's outcome to this file as JSON (written even when cases fail)"),
    ("--junit", "write every case's outcome to this file as JUnit XML, the form CI systems show"),
)


def _shared_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options a command shares with the top level.

    Under a command they default to :data:`argparse.SUPPRESS`, so that one given
    before the command's name (``--jobs 2 run X``) is not undone by the command's
    own default.
    """
    default: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--jobs",
        type=int,
        default=default,
        metavar="N",
        help="cases run at once (per process; default: two per CPU, from 2 to 8, and twice that "
        "with the agent-loop suite, whose cases also wait on purpose)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=default,
        metavar="N",
        help="spread the targets over this many worker processes (default: two per CPU, up to "
        f"{MAX_PROCESSES}, for a matrix of at least {AUTO_PROCESSES_FROM} targets, else none)",
    )
    for option, text in _RESULT_OPTIONS:
        parser.add_argument(option, default=default, metavar="PATH", help=text)


def _misplaced(
    argv: Sequence[str], parser: argparse.ArgumentParser, commands: Dict[str, Any]
) -> Optional[str]:
    """Why an option given before the command's name cannot stand there, or ``None``.

    argparse reads such an option's value as the command (``invalid choice: 'x.json'``);
    this names the option and where it goes instead.
    """
    known = {s for action in parser._actions for s in action.option_strings}
    named = next((i for i, a in enumerate(argv) if a in commands), None)
    before = list(argv[:named]) if named is not None else list(argv)
    for arg in before:
        if not arg.startswith("--"):
            continue
        option = arg.split("=", 1)[0]
        if option in known:
            continue
        owners = [
            name
            for name, sub in commands.items()
            if option in {s for action in sub._actions for s in action.option_strings}
        ]
        if owners:
            return f"{option} belongs to the {' and '.join(owners)} command: put it after the command's name"
        return f"unknown option {option}; see --help"
    return None
