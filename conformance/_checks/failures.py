"""A turn that fails: the error raised, with the kind, code, status and retry delay the provider's bytes say.

The kinds a backend may report are the variant's, else the scenario's (one kind, or
several where the provider's type and status allow each: a plain 400 that only its
message calls a quota or a prompt too long may be reported as ``invalid_request``, a
bad request); ``retry_after`` is the delay
the reply carried, on every kind, and ``None`` where it carried none. A stream that
fails after some text yields that text first. A cut is held to the same rules for its
delay, its status and its text (its kind is the cut family's).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

from ..contract import ERROR_KINDS
from ..fixture import CONFORMANCE_FIXTURE as FX
from ._rule import SILENT_AS_CUT
from ._seen import MISSING, Check, Seen, describe

__all__ = ["ROWS"]


def _error_kinds_of(seen: Seen) -> Tuple[str, ...]:
    """The kinds the backend may report: the variant's, else the scenario's; empty where it must not fail.

    A cut stream's kinds are its variant's too, but the cut family judges them, in words
    that say why a cut is a failure (:mod:`~conformance._checks.cut`), and a stall's the
    latency family (``timeout-kind``), in words that name the read timeout.
    """
    if seen.scenario in SILENT_AS_CUT:
        return ()
    return seen.rule.error_kinds


def _error_kind_of(seen: Seen) -> Optional[str]:
    kinds = _error_kinds_of(seen)
    return kinds[0] if kinds else None


def _kinds_text(kinds: Tuple[str, ...]) -> str:
    """``'overloaded'``, or ``'overloaded' or 'server_error'``."""
    return " or ".join(repr(k) for k in kinds)


def _failed(seen: Seen) -> bool:
    return bool(_error_kinds_of(seen)) and seen.ended and seen.error is not None


def _erred(seen: Seen) -> bool:
    """A failure whose delay and status are judged: a failure scenario's, or a cut's.

    A cut's kind is the cut family's to judge, but its delay and its status are held to
    the rule every error is: none the provider did not send.
    """
    cut = seen.scenario in ("stream-cut", "stall") and seen.ended and seen.error is not None
    return cut or _failed(seen)


def _error_raised(seen: Seen) -> List[str]:
    kinds = _error_kinds_of(seen)
    if not kinds or not seen.ended or seen.error is not None:
        return []
    if seen.case.mode == "stream":
        return [
            f"expected an error of kind {_kinds_text(kinds)}, got a reply that ended normally "
            f"({len(seen.outcome.chunks)} chunks)"
        ]
    return [f"expected an error of kind {_kinds_text(kinds)}, got the reply {seen.outcome.response!r}"]


def _error_kind(seen: Seen) -> List[str]:
    if not _failed(seen):
        return []
    kinds = _error_kinds_of(seen)
    assert seen.error is not None
    got = {name: getattr(seen.error, name, "<missing>") for name in ("kind", "code", "retryable")}
    wants = [
        {"kind": row.kind, "code": row.code, "retryable": row.retryable}
        for row in (ERROR_KINDS[k] for k in kinds)
    ]
    if got in wants:
        return []
    if len(wants) == 1:
        return [f"expected an error with {wants[0]}, got {describe(seen.error)}"]
    return [
        f"expected an error with {' or '.join(map(str, wants))} (the provider's type, code and "
        f"status do not tell these kinds apart, and its message is no contract), got "
        f"{describe(seen.error)}"
    ]


def _error_details(seen: Seen) -> List[str]:
    if not _failed(seen):
        return []
    kinds = _error_kinds_of(seen)
    kind = getattr(seen.error, "kind", None)
    # details["kind"] repeats the error's kind; where that kind is wrong, error-kind says so.
    wanted = kind if kind in kinds else _error_kind_of(seen)
    details = getattr(seen.error, "details", MISSING)
    got = details.get("kind", MISSING) if isinstance(details, Mapping) else MISSING
    if got == wanted:
        return []
    shown = "no details" if details is MISSING else f"details {details!r}"
    return [f'expected details["kind"] == {wanted!r} (the contract\'s details.kind), got {shown}']


def _error_status(seen: Seen) -> List[str]:
    status = seen.reply_status()
    if seen.scenario in ("stream-cut", "stall") and _erred(seen):
        # The provider answered with a status (a 200) and then the body ended short: it
        # sent no error status. None says so, and the 200 is what came; nothing else did.
        got = getattr(seen.error, "status", None)
        if got is None or got == status:
            return []
        return [
            f"expected status None on the error for a cut (the provider answered {status} and the "
            f"body ended short: it sent no error status), or that {status}, got {got!r}: a status "
            "the provider never sent misleads whoever branches on it"
        ]
    if not _failed(seen) or status is None or status < 400:
        return []
    got = getattr(seen.error, "status", MISSING)
    if got == status:
        return []
    shown = "no status attribute" if got is MISSING else repr(got)
    return [f"expected status {status} (the HTTP status the provider answered with), got {shown}"]


def _sent_delay(seen: Seen) -> Tuple[Optional[float], float]:
    """The delay the provider's reply carried (seconds, or ``None``), and how close a report must be.

    Read from the reply actually sent, by the wire (a header, or a field of the body);
    where the wire reads none there, the variant's word for it. An HTTP-date is read
    against the clock, later than the backend read it, so it is given a few seconds.
    """
    reply = seen.replies[-1] if seen.replies else None
    sent = seen.wire.retry_after_sent(reply) if reply is not None else None
    if sent is None:
        return seen.variant.retry_after, 1e-6
    headers = seen.reply_headers()
    dated = "retry-after-ms" not in headers and _not_number(headers.get("retry-after"))
    return sent, 5.0 if dated else 1e-6


def _not_number(value: Optional[str]) -> bool:
    if value is None:
        return False
    try:
        float(value)
    except ValueError:
        return True
    return False


def _retry_after(seen: Seen) -> List[str]:
    """``retry_after`` is the delay the provider sent, on every kind and on a cut; ``None``
    where it sent none."""
    if not _erred(seen):
        return []
    kind = getattr(seen.error, "kind", None)
    retry_after = getattr(seen.error, "retry_after", None)
    wanted, within = _sent_delay(seen)
    if wanted is None:
        if retry_after is None:
            return []
        return [
            f"expected retry_after None on an error of kind {kind!r} (the provider sent no delay), got "
            f"{retry_after!r}: a made-up delay hides the provider's own pacing; report one only "
            "where the reply carries it"
        ]
    if isinstance(retry_after, (int, float)) and not isinstance(retry_after, bool):
        if abs(float(retry_after) - wanted) <= within:
            return []
    return [f"expected retry_after {wanted!r} seconds, the delay the provider sent, got {retry_after!r}"]


def _text_before_error(seen: Seen) -> List[str]:
    """The text streamed before a failure, or before a cut after text, is yielded first."""
    if seen.case.mode != "stream" or not seen.ended:
        return []
    if seen.scenario == "stream-cut":
        if not _cut_after_text(seen.variant.name):
            return []
        what = "the cut"
    elif seen.scenario == "stream-error":
        what = "the failure"
    else:
        return []
    content = seen.collected()[0]
    if content == FX.partial_text:
        return []
    return [
        f"expected the text streamed before {what}, {FX.partial_text!r}, to be yielded first, "
        f"got {content!r}"
    ]


def _cut_after_text(variant: str) -> bool:
    """Whether a ``stream-cut`` shape cuts a text turn (its partial text streamed), rather
    than a call or a whole tool turn."""
    from ..wires._chunks import CUT_IN_CALL
    from ..wires._variants import AFTER_FINISH, CLEAN_ENDS

    cut = CLEAN_ENDS.get(variant, variant)
    return cut not in CUT_IN_CALL and cut != AFTER_FINISH


#: This family's rows of :data:`~conformance._checks.CHECKS`.
ROWS: Dict[str, Check] = {
    "error-raised": _error_raised,
    "error-kind": _error_kind,
    "error-details": _error_details,
    "error-status": _error_status,
    "retry-after": _retry_after,
    "text-before-error": _text_before_error,
}
