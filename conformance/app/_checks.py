"""An application run, judged from the provider's request log: the suites' checks, and three of its own.

Strategy: a run of the application's own code is judged per scripted wire, through the
same :class:`~conformance._checks.Seen` the suites' checks read (the case is the
script's scenario on a target that says it retries, the outcome what the application
returned or raised), so the retry layer is held to the same checks with the same
words: ``retry-wait``, ``retry-backoff``, ``retry-relent``, ``retry-permanent``,
``retry-no-repeat`` and ``no-retry``, and a cancel to ``cancel-propagates`` and
``connection-closed``. Three things only an application run asks get ids of their own:
a stream cut after its 200 asked again (``retry-after-cut``; the suites let a backend
raise it), a stall closed by the application's read timeout (``read-timeout``), and a
slow first token waited for (``slow-first-token``). Which checks judge a run is the
script's kind's row of :data:`KIND_CHECKS`; every check is looked up in
:data:`APP_CHECKS` when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, cast

from .._checks import CHECKS, Problem, Seen
from .._checks._seen import Check, describe
from .script import ProviderScript

__all__ = [
    "APP_CHECKS",
    "KIND_CHECKS",
    "READ_TIMEOUT_SLACK",
    "ROWS",
    "AppSeen",
    "run_app_checks",
    "stalled_at",
]

#: How much later than its read timeout a stalled connection may close: the client's
#: timer, its event loop, and the moment between the close and the provider noting it.
READ_TIMEOUT_SLACK = 0.5


@dataclass
class AppSeen(Seen):
    """What one run saw on one scripted wire: the suites' :class:`Seen`, and the script."""

    script: Optional[ProviderScript] = None
    #: When the run ended (the application returned or raised, or the run gave up on it).
    run_ended: float = 0.0


def _app(seen: Seen) -> AppSeen:
    """``seen`` as the application run's (a suite's case has no script, and these checks find
    nothing in it)."""
    if not hasattr(seen, "script"):
        return AppSeen(seen.case, seen.outcome, seen.requests, seen.replies)
    return cast(AppSeen, seen)


def _at(seen: AppSeen, when: float) -> str:
    generations = seen.generations()
    start = generations[0].received_at if generations else when
    return f"+{1000 * (when - start):.0f} ms"


def _times(seen: AppSeen) -> str:
    shown = ", ".join(_at(seen, r.received_at) for r in seen.generations())
    return f"requests at {shown or 'none'}"


def _retry_after_cut(checked: Seen) -> List[str]:
    seen = _app(checked)
    script = seen.script
    if script is None or script.kind != "cut" or seen.case.mode != "stream" or not seen.ended:
        return []
    generations = seen.generations()
    if not generations or len(generations) > script.relent:
        return []
    cut = generations[-1]
    log = cut.response
    sent = len(log.times) if log is not None else 0
    return [
        f"the provider cut the stream answering request {len(generations)} after {sent} chunks, and "
        f"the application asked no more ({_times(seen)}); a cut stream is half an answer: ask again "
        "(the provider then answers whole), handing on nothing of the cut attempt twice"
    ]


def stalled_at(request: Any) -> float:
    """When the provider stopped sending to ``request``: its last chunk's write, or its arrival."""
    log = request.response
    return log.times[-1] if log is not None and log.times else float(request.received_at)


def _read_timeout(checked: Seen) -> List[str]:
    seen = _app(checked)
    script = seen.script
    if script is None or script.kind != "stall":
        return []
    bound = script.read_timeout + READ_TIMEOUT_SLACK
    problems = []
    for number, request in enumerate(seen.generations()[: script.relent], 1):
        stalled = stalled_at(request)
        closed = request.closed_at
        if closed is not None and closed - stalled <= bound:
            continue
        end = closed if closed is not None else seen.run_ended
        state = (
            f"the application closed it at {_at(seen, closed)}"
            if closed is not None
            else "the connection was still open when the run ended"
        )
        problems.append(
            f"the provider stalled request {number} at {_at(seen, stalled)} and {state}, "
            f"{end - stalled:.1f} s later ({_times(seen)}); expected its read timeout of "
            f"{script.read_timeout:g} s to close the connection within {bound:g} s: set a read timeout "
            "(the SDK's timeout=, httpx.Timeout(read=...)) so a stalled provider cannot hang the application"
        )
    return problems


def _slow_first_token(checked: Seen) -> List[str]:
    seen = _app(checked)
    script = seen.script
    generations = seen.generations()
    if script is None or script.kind != "slow" or not generations:
        return []
    first = generations[0]
    due = first.received_at + script.seconds
    closed = first.closed_at
    if closed is None or closed >= due:
        return []
    return [
        f"the application closed request 1's connection at {_at(seen, closed)}, "
        f"{1000 * (due - closed):.0f} ms before the provider's first token came ({script.seconds:g} s after "
        f"the request; {_times(seen)}); a read timeout shorter than the time to first token drops "
        "every slow answer: give the first token at least as long as the provider may take"
    ]


def _provider_reached(checked: Seen) -> List[str]:
    seen = _app(checked)
    script = seen.script
    if script is None or seen.generations():
        return []
    from .routes import SDK_ENVIRONMENT

    error = seen.outcome.error
    how = (
        f"it raised {describe(error)}"
        if error is not None
        else "it ended"
        if seen.ended
        else "it was still running"
    )
    names = ", ".join(n for n, v in SDK_ENVIRONMENT.items() if v.startswith("{url}"))
    return [
        f"the application sent no {seen.wire.title} request to the fake provider, and {how}; build "
        f"its client from the environment, which names the provider ({names}), and call the API "
        "the script is for"
    ]


#: The checks only an application run asks, by id.
ROWS: Dict[str, Check] = {
    "provider-reached": _provider_reached,
    "retry-after-cut": _retry_after_cut,
    "read-timeout": _read_timeout,
    "slow-first-token": _slow_first_token,
}

#: Every check an application run may be judged by: the suites' (their rows, looked up
#: there, so the same words come out) and this module's.
APP_CHECKS: Dict[str, Check] = {
    **{
        check_id: CHECKS[check_id]
        for check_id in (
            "finished",
            "cancel-propagates",
            "connection-closed",
            "no-retry",
            "retry-relent",
            "retry-wait",
            "retry-backoff",
            "retry-permanent",
            "retry-no-repeat",
        )
    },
    **ROWS,
}

#: The checks that judge each kind of script, in the order a report lists them.
KIND_CHECKS: Dict[str, Tuple[str, ...]] = {
    "reply": ("provider-reached", "finished", "no-retry"),
    "relent": (
        "provider-reached",
        "finished",
        "retry-relent",
        "retry-wait",
        "retry-backoff",
        "retry-no-repeat",
    ),
    "cut": (
        "provider-reached",
        "finished",
        "retry-relent",
        "retry-after-cut",
        "retry-wait",
        "retry-backoff",
        "retry-no-repeat",
    ),
    "permanent": ("provider-reached", "finished", "retry-permanent"),
    "stall": ("provider-reached", "finished", "read-timeout", "retry-no-repeat"),
    "slow": ("provider-reached", "finished", "slow-first-token"),
    "cancel": ("provider-reached", "cancel-propagates", "connection-closed", "finished"),
}


def run_app_checks(seen: AppSeen) -> List[Problem]:
    """Every problem the checks of ``seen``'s script kind find, in that kind's order.

    Where no request reached the provider, ``provider-reached`` speaks alone: nothing
    else can be read from a log with nothing in it.
    """
    assert seen.script is not None
    missed = APP_CHECKS["provider-reached"](seen)
    if missed:
        return [Problem("provider-reached", text) for text in missed]
    return [
        Problem(check_id, text)
        for check_id in KIND_CHECKS[seen.script.kind]
        for text in APP_CHECKS[check_id](seen)
    ]
