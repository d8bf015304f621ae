"""How the backend ended: in time, with the abort reason or the cancellation, the connection closed.

A backend that never returned is failed after a bounded time (``finished``); the
abort and cancel cases hold it to raising the caller's own reason (or letting
``CancelledError`` through) within the bound, and to closing the connection while it
is still alive, so the provider stops generating. Closing the backend afterwards
must not raise (``backend-closed``, listed last, after the requests).
"""

from __future__ import annotations

from typing import Dict, List

from .._bounds import ABORT_CLOSE_WITHIN, ABORT_RAISE_WITHIN
from .._stall import not_counted
from ._seen import Check, Seen, describe
from .retries import waiting_as_asked

__all__ = ["ROWS"]


def _backend_closed(seen: Seen) -> List[str]:
    error = seen.outcome.close_error
    return [] if error is None else [f"closing the backend raised {describe(error)}"]


def _finished(seen: Seen) -> List[str]:
    outcome = seen.outcome
    if not outcome.hung or seen.case.scenario == "stall":
        return []  # a stall's bound is the read timeout's: read-timeout says how long it waited
    if waiting_as_asked(seen) is not None:
        # A retrying backend may be waiting out a retry-after longer than the case, which the
        # failure's bytes allow (it reads as a rate limit too): not judged, and the docs say so.
        return []
    what = "the abort reason" if seen.scenario == "abort" else "the backend to return or raise"
    return [
        f"expected {what}, but it was still running when the case gave up after "
        f"{outcome.waited:.1f} s ({len(outcome.chunks)} chunks yielded so far)"
    ]


def _ended_first(seen: Seen) -> List[str]:
    """The problem when the backend ended before the case could abort or cancel it."""
    error = seen.outcome.error
    got = f"it ended first with {describe(error)}" if error is not None else "it ended first, normally"
    verb = "abort" if seen.scenario == "abort" else "cancel"
    return [
        "expected the backend to send its request and wait for the answer, so the case could "
        f"{verb} it; {got}"
    ]


def _abort_reason(seen: Seen) -> List[str]:
    outcome = seen.outcome
    if seen.scenario != "abort" or outcome.hung:
        return []
    if outcome.abort_at is None:
        return _ended_first(seen)
    reason, error = outcome.abort_reason, outcome.error
    if error is None:
        return [f"expected the abort reason {reason!r} to be raised, got a normal end"]
    if error is not reason:
        return [f"expected the abort reason itself, {reason!r}, to be raised, got {describe(error)}"]
    return []


def _abort_promptly(seen: Seen) -> List[str]:
    outcome = seen.outcome
    if seen.scenario != "abort" or outcome.abort_at is None or outcome.error_at is None or outcome.hung:
        return []
    took = outcome.error_at - outcome.abort_at
    stalled = outcome.stalled_after_abort
    if took - stalled > ABORT_RAISE_WITHIN:
        return [
            f"expected the abort reason within {ABORT_RAISE_WITHIN} s, "
            f"got it after {took:.3f} s{not_counted(stalled)}"
        ]
    return []


def _cancel_propagates(seen: Seen) -> List[str]:
    outcome = seen.outcome
    if seen.scenario != "cancel" or outcome.hung:
        return []
    if outcome.abort_at is None:
        return _ended_first(seen)
    if outcome.error is None:
        return ["expected CancelledError after the task was cancelled, got a normal end"]
    import asyncio  # loaded by the driver already; here only to name the class

    if not isinstance(outcome.error, asyncio.CancelledError):
        return [f"expected CancelledError to propagate unchanged, got {describe(outcome.error)}"]
    return []


def _connection_closed(seen: Seen) -> List[str]:
    outcome = seen.outcome
    if seen.scenario not in ("abort", "cancel") or outcome.abort_at is None:
        return []
    if outcome.closed_after is not None:
        return []
    what = "abort" if seen.scenario == "abort" else "cancellation"
    when = (
        "while the backend was still running"
        if outcome.hung
        else "while the backend was still open (before the case closed it)"
    )
    return [
        f"expected the connection closed within {ABORT_CLOSE_WITHIN} s of the {what}, but the "
        f"provider saw it open {when}: the provider goes on generating and billing"
    ]


#: This family's rows of :data:`~conformance._checks.CHECKS`.
ROWS: Dict[str, Check] = {
    "finished": _finished,
    "abort-reason": _abort_reason,
    "abort-promptly": _abort_promptly,
    "cancel-propagates": _cancel_propagates,
    "connection-closed": _connection_closed,
    "backend-closed": _backend_closed,
}
