"""A provider slow to answer: the backend waits what it declared, and no longer.

The target declares ``read_timeout``, how long its backend waits for the provider's next
byte. Where the provider is silent for under half of that at a time (``slow-first-token``:
before its first byte, or between the pings of Anthropic's ``pinged`` shape), the reply
is judged as the ``text`` case's, and a backend that gave up on it gave up sooner than it
declared (``in-time``), unless the provider's own log shows a silence as long as the
timeout (a loaded machine that held its writes back). Where the provider falls silent
for good (``stall``), the backend gives up within its read timeout and a grace
(:func:`~conformance._bounds.give_up_within`, from the provider's last byte to the
backend's error, or to its retry's close of the connection), never waiting on to the
case's bound (``read-timeout``), and raises a retryable ``server_error`` or
``overloaded``: silence names no cause, as a cut names none, and the same request may
well be answered (``timeout-kind``). What stalled this whole process meanwhile is not
counted (``conformance._stall``).
"""

from __future__ import annotations

from typing import Dict, List, Optional

from .._bounds import give_up_within, in_time_silence
from .._stall import WATCH, not_counted
from ..contract import ERROR_KINDS
from ._seen import MISSING, Check, Seen, describe

__all__ = ["ROWS", "longest_silence", "silent_since"]


def silent_since(seen: Seen) -> Optional[float]:
    """When the provider fell silent on the case's first request: its last chunk's write, or
    the request's arrival where it sent no body at all; ``None`` where no request came."""
    generations = seen.generations()
    if not generations:
        return None
    first = generations[0]
    log = first.response
    return log.times[-1] if log is not None and log.times else first.received_at


def _gave_up(seen: Seen) -> Optional[float]:
    """When the backend gave up on the silent request: where it asked again, when it closed
    that request's connection (or stream), or asked again if that is sooner; else when it
    raised or returned. ``None`` where it was still waiting at the case's bound."""
    generations = seen.generations()
    if len(generations) > 1:
        first, retry = generations[0], generations[1]
        closed = first.closed_at
        return retry.received_at if closed is None else min(closed, retry.received_at)
    if seen.outcome.hung:
        return None
    return seen.outcome.error_at if seen.outcome.error is not None else seen.outcome.ended_at


def _read_timeout(seen: Seen) -> List[str]:
    read_timeout = seen.case.target.read_timeout
    since = silent_since(seen)
    if seen.case.scenario != "stall" or read_timeout is None or since is None:
        return []
    within = give_up_within(read_timeout)
    gave_up = _gave_up(seen)
    if gave_up is not None:
        stalled = WATCH.between(since, gave_up)
        waited = gave_up - since - stalled
        if waited <= within:
            return []
        how = f"it gave up {waited:.2f} s after it{not_counted(stalled)}"
    else:
        how = f"it was still waiting when the case gave up on it, {seen.outcome.waited:.1f} s into the case"
    return [
        f"expected the backend to give up within {within:.2f} s of the provider's last byte (the "
        f"read_timeout of {read_timeout:g} s the target declares, and a grace), but {how}: a "
        "backend that outwaits a silent provider hangs its caller; give the HTTP client that read "
        "timeout, for every read of the body too, not only the status line"
    ]


def _timeout_kind(seen: Seen) -> List[str]:
    if seen.scenario != "stall" or not seen.ended:
        return []
    error = seen.error
    kinds = seen.rule.error_kinds
    wanted = " or ".join(f"{k!r} ({ERROR_KINDS[k].code})" for k in kinds)
    if error is None:
        got = (
            f"a stream that ended quietly after {len(seen.outcome.chunks)} chunks"
            if seen.case.mode == "stream"
            else f"the reply {seen.outcome.response!r}"
        )
    else:
        kind, code = getattr(error, "kind", MISSING), getattr(error, "code", MISSING)
        if kind in kinds and code == ERROR_KINDS[kind].code and getattr(error, "retryable", None) is True:
            return []
        got = describe(error)
    return [
        f"expected a retryable error of kind {wanted} once the provider stayed silent past the read "
        f"timeout, got {got}: silence names no cause, as a cut names none, and the same request may "
        "well be answered, so a caller's retry layer must be let to try again"
    ]


def longest_silence(seen: Seen) -> Optional[float]:
    """The longest the provider was silent on the case's first request, as its log says: from
    the request's arrival, between its writes, and from the last one to the client's close
    where the client left first; ``None`` where no request came."""
    generations = seen.generations()
    if not generations:
        return None
    first = generations[0]
    log = first.response
    marks = [first.received_at, *(log.times if log is not None else ())]
    if first.closed_at is not None and (log is None or log.end is None):
        marks.append(first.closed_at)  # the client left while the provider was still silent
    return max((b - a for a, b in zip(marks, marks[1:])), default=0.0)


def _in_time(seen: Seen) -> List[str]:
    read_timeout = seen.case.target.read_timeout
    if seen.case.scenario != "slow-first-token" or read_timeout is None:
        return []
    if not seen.ended or seen.error is None:
        return []
    silence = longest_silence(seen)
    if silence is not None and silence >= read_timeout:
        # The provider itself was late (a loaded machine held its writes back): the silence
        # reached the declared timeout, so giving up was the backend's right.
        return []
    return [
        f"expected the reply, the provider never silent for more than {in_time_silence(read_timeout):.2f} "
        f"s at a time, well within the read_timeout of {read_timeout:g} s the target declares, got "
        f"{describe(seen.error)}: the backend gave up sooner than it declared (a timeout for the "
        "whole reply, or a shorter one than the target says)"
    ]


#: This family's rows of :data:`~conformance._checks.CHECKS`.
ROWS: Dict[str, Check] = {
    "in-time": _in_time,
    "read-timeout": _read_timeout,
    "timeout-kind": _timeout_kind,
}
