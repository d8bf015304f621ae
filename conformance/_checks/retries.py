"""A retry layer, judged from the provider's own request log: a target with ``retries = True``.

Strategy: where the target says its backend retries, the failures that can come back
relent as the provider's would (:data:`RELENTS`: a 429 twice, an overload, a server
error, a cut or a stall once, then the reply), each asking for a short delay in the
wire's own form (:data:`RETRY_ASKED`). The case then reads the reply as the ``text`` scenario's
(``Seen.relented``), and these checks read the times in the request log: each retry
waits what the failure asked (``retry-wait``) or, where it asked nothing, at least
:data:`RETRY_FLOOR` (``retry-backoff``) and, after a second such failure, longer than
the time before (``retry-growth``: :data:`RETRY_GROWTH` times it, less a slack load
cannot exceed unseen); the layer goes on to the reply
(``retry-relent``); it never asks again after a failure that will not come back
(``retry-permanent``); and a stream retried after it yielded hands on nothing of the
failed attempt (``retry-no-repeat``). Without the setting none of this applies, and
one request per answer is the rule (``no-retry``).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

from ..provider import RecordedRequest
from ._seen import Check, Seen

__all__ = [
    "PERMANENT",
    "RELENTS",
    "RETRY_ASKED",
    "RETRY_FLOOR",
    "RETRY_GROWTH",
    "RETRY_GROWTH_SLACK",
    "RETRY_TOLERANCE",
    "ROWS",
    "repeated_text",
    "retried_scenario",
    "waiting_as_asked",
]

#: The failures that can come back, and how many times each is sent before the provider
#: relents with the reply: a rate limit is still there on the next try (twice, so the
#: wait is judged more than once), an overload, a server error, a cut and a stall pass
#: at once.
RELENTS: Mapping[str, int] = {
    "rate-limit": 2,
    "overloaded": 1,
    "server-error": 1,
    "stream-cut": 1,
    "stall": 1,
}

#: The failures that will not come back: an exhausted quota, a refused key, a request
#: the provider cannot take. A retry layer sends each once.
PERMANENT = ("quota", "auth", "context-overflow")

#: The delay a relenting failure asks for, in seconds, wherever its wire has a form for
#: one (``retry-after``, ``retry-after-ms``, Gemini's ``RetryInfo``): short, so the
#: suite stays fast, long enough that a layer ignoring it is seen to.
RETRY_ASKED = 0.2

#: The least a retry waits where the failure asked for no delay (a 503, a cut, a 429
#: with the delay in its words only): more than nothing, so a failing provider is not
#: met with a storm of requests.
RETRY_FLOOR = 0.02

#: How much sooner than asked a retry may come: the clocks' resolution, and the moment
#: between the provider writing the failure and noting the time.
RETRY_TOLERANCE = 0.02

#: Where two failures in a row asked for no delay, the second wait is at least this many
#: times the first, less :data:`RETRY_GROWTH_SLACK`: longer each time. A layer that
#: doubles passes with room, as do the official SDKs' (0.5 s, then 1 s, each less up to
#: a quarter of jitter: at worst 1.5 times); one that waits the same each time fails.
RETRY_GROWTH = 1.25

#: What the first of those waits may have been lengthened by, beyond what stalled the
#: whole process (which is taken off each wait: a retrying target's rate-limit case runs
#: with the stall watch open): a thread kept waiting for the GIL or the CPU on a loaded
#: machine.
#: The reference layer's first wait of 50 ms was seen lengthened by 265 ms on two cores
#: shared by five test processes with no watch open, and by 370 ms with it open, on a
#: machine so loaded that the whole test run took a quarter longer; half a second leaves
#: room past that. Load only lengthens a wait, so a layer that doubles passes with room,
#: and a constant or shrinking wait of a few seconds still shows.
RETRY_GROWTH_SLACK = 0.5


def retried_scenario(retries: bool, scenario: str) -> int:
    """How many failures the provider sends in ``scenario`` before it relents; 0 where it never does."""
    return RELENTS.get(scenario, 0) if retries else 0


def _ms(seen: Seen, at: Optional[float]) -> str:
    generations = seen.generations()
    start = generations[0].received_at if generations else 0.0
    return "?" if at is None else f"+{1000 * (at - start):.0f} ms"


def _times(seen: Seen) -> str:
    """The generation requests' arrival times, from the first: ``+0 ms, +104 ms, +210 ms``."""
    shown = ", ".join(_ms(seen, r.received_at) for r in seen.generations())
    return f"requests at {shown or 'none'}"


def _sent(request: RecordedRequest) -> float:
    """When the provider finished sending its answer to ``request``: its last chunk's write."""
    log = request.response
    return log.times[-1] if log is not None and log.times else request.received_at


def _timed_waits(seen: Seen) -> List[Tuple[int, float, float, Optional[float]]]:
    """``(attempt, measured, stalled, asked)`` for each retry of a relenting failure: the
    seconds from the failure's last byte to the retry's arrival, and how much of that the
    whole process could not run (``conformance._stall``)."""
    from .._stall import WATCH

    if not seen.relent:
        return []
    generations = seen.generations()
    out = []
    for index, (failed, after) in enumerate(zip(generations, generations[1:])):
        if index >= len(seen.replies) or index >= seen.relent:
            break
        sent = _sent(failed)
        measured = after.received_at - sent
        stalled = WATCH.between(sent, after.received_at)
        out.append((index, measured, stalled, seen.wire.retry_after_sent(seen.replies[index])))
    return out


def _waits(seen: Seen) -> List[Tuple[int, float, Optional[float]]]:
    """``(attempt, waited, asked)`` for each retry of a relenting failure."""
    # A stall of the whole process between the failure and the retry is given back to the
    # backend: it could not have sent sooner.
    return [(index, measured + stalled, asked) for index, measured, stalled, asked in _timed_waits(seen)]


def _retry_wait(seen: Seen) -> List[str]:
    problems = []
    for index, waited, asked in _waits(seen):
        if asked is not None and waited < asked - RETRY_TOLERANCE:
            problems.append(
                f"request {index + 2} came {1000 * waited:.0f} ms after the failure answering request "
                f"{index + 1}, which asked for a retry delay of {1000 * asked:.0f} ms ({_times(seen)}); "
                "wait at least what the provider asks (retry-after-ms, retry-after, the provider's "
                "own delay field) before asking again"
            )
    return problems


def _retry_backoff(seen: Seen) -> List[str]:
    problems = []
    for index, waited, asked in _waits(seen):
        if asked is None and waited < RETRY_FLOOR:
            problems.append(
                f"request {index + 2} came {1000 * waited:.0f} ms after the failure answering request "
                f"{index + 1}, which asked for no delay ({_times(seen)}); back off at least "
                f"{1000 * RETRY_FLOOR:.0f} ms before a retry, longer each time, never at once"
            )
    return problems


def _retry_growth(seen: Seen) -> List[str]:
    problems = []
    waits = _timed_waits(seen)
    for (index, measured, stalled, asked), later in zip(waits, waits[1:]):
        _, next_measured, next_stalled, next_asked = later
        if asked is not None or next_asked is not None:
            continue
        # A stall of the whole process only lengthens a wait (the request goes out late), so
        # each wait is taken less what stalled the process in it: what the layer chose,
        # plus what load short of a stall added, which the slack covers on the first.
        first, second = measured - stalled, next_measured - next_stalled
        least = RETRY_GROWTH * first - RETRY_GROWTH_SLACK
        if second < least:
            problems.append(
                f"request {index + 3} came {1000 * next_measured:.0f} ms after the failure answering "
                f"request {index + 2}, where the wait before it was {1000 * measured:.0f} ms, and "
                f"neither failure asked for a delay ({_times(seen)}); wait longer each time, at least "
                f"{RETRY_GROWTH:g} times the wait before less {1000 * RETRY_GROWTH_SLACK:.0f} ms "
                f"({1000 * max(least, 0.0):.0f} ms here): a backoff that does not grow meets a "
                "failing provider with a steady stream of requests"
            )
    return problems


def _may_raise(seen: Seen) -> bool:
    """A stream that failed after its 200 (a cut, Bedrock's throttling frame): the stream was
    handed to the caller, and a retry would hand the answer on after whatever went out, so a
    layer may raise the failure (as the official SDKs do) or retry it; either is right, and
    today's checks judge the raise."""
    if seen.case.mode != "stream" or not seen.replies:
        return False
    status = getattr(seen.replies[-1], "status", 200)
    return isinstance(status, int) and status < 400


def _retry_relent(seen: Seen) -> List[str]:
    if not seen.relent or seen.relented or not seen.ended or seen.error is None or _may_raise(seen):
        return []
    count = len(seen.generations())
    return [
        f"expected the backend to retry the {seen.scenario} failure until the provider answered "
        f"(it relents after {seen.relent} failure{'s' if seen.relent > 1 else ''}), but it gave up after "
        f"{count} request{'s' if count != 1 else ''} ({_times(seen)}); retry a failure that can come "
        "back (rate limit, overload, server error, a cut) within a bounded number of attempts"
    ]


#: The kinds a retry layer may take for a failure that can come back.
_RETRYABLE = ("rate_limit", "overloaded", "server_error")


def _retry_permanent(seen: Seen) -> List[str]:
    if not seen.case.target.retries or seen.scenario not in PERMANENT:
        return []
    if any(k in _RETRYABLE for k in seen.rule.error_kinds):
        # The bytes allow a retryable reading (Cohere's trial-key 429 is a rate limit's shape):
        # a layer that takes it so may retry it, a bounded number of times.
        return []
    count = len(seen.generations())
    if count <= 1:
        return []
    return [
        f"expected one request for a {seen.scenario} failure, which will not come back, got {count} "
        f"({_times(seen)}); never retry a quota, an auth failure or an invalid request: raise its "
        "error at once"
    ]


def waiting_as_asked(seen: Seen) -> Optional[float]:
    """The delay the provider's last failure asked for, where a retrying backend that was still
    running at the case's end may be obeying it; else ``None``.

    That is where the failure also reads as one that can come back (a spend limit sent as a
    429 rate limit with a retry-after of minutes) and the delay it asked for is longer than
    the whole case lasted: the bytes allow the wait, which no bound of the case can see end.
    """
    if not seen.case.target.retries or not seen.replies:
        return None
    if not any(k in _RETRYABLE for k in seen.rule.error_kinds):
        return None
    asked = seen.wire.retry_after_sent(seen.replies[-1])
    if asked is None or asked <= seen.outcome.waited:
        return None
    return asked


def repeated_text(seen: Seen) -> Optional[str]:
    """The text a relented stream yielded before the answer's whole text, or ``None``."""
    if not seen.relented or seen.case.mode != "stream" or not seen.got_reply:
        return None
    content = seen.collected()[0]
    answer = seen.wire.texts.get("text")
    if not isinstance(content, str) or not answer or content == answer or not content.endswith(answer):
        return None
    return content[: -len(answer)]


def _retry_no_repeat(seen: Seen) -> List[str]:
    head = repeated_text(seen)
    if head is None:
        return []
    return [
        f"the stream yielded {head!r} from the failed attempt before the answer's own text "
        f"({_times(seen)}); a retried stream yields nothing twice: hold a retry back once text "
        "went out (raise the cut), or hand on only what the answer adds"
    ]


#: This family's rows of :data:`~conformance._checks.CHECKS`.
ROWS: Dict[str, Check] = {
    "retry-wait": _retry_wait,
    "retry-backoff": _retry_backoff,
    "retry-growth": _retry_growth,
    "retry-relent": _retry_relent,
    "retry-permanent": _retry_permanent,
    "retry-no-repeat": _retry_no_repeat,
}
