"""The requests: what the backend sent, checked in the provider's own shape, whatever it returned.

The target's headers on every request, one generation request (no retry), the
history a multi-turn scenario sent back, and the first generation request as the
wire checks it: method, path, model, the question and the ``get_weather`` tool.
"""

from __future__ import annotations

from typing import Dict, List

from ..provider import RecordedRequest
from ._seen import Check, Seen

__all__ = ["ROWS"]


def _missing_headers(seen: Seen, requests: List[RecordedRequest]) -> List[str]:
    problems = []
    for request in requests:
        for name, value in seen.case.target.headers.items():
            got = request.headers.get(name.lower())
            if got != value:
                problems.append(
                    f"expected header {name}: {value} on {request.method} {request.path}, got "
                    f"{'none' if got is None else repr(got)}"
                )
    return problems


def _headers(seen: Seen) -> List[str]:
    """The target's headers on the backend's first request."""
    return _missing_headers(seen, seen.requests[:1])


def _headers_later(seen: Seen) -> List[str]:
    """The target's headers on every request after the first too (a lookup, then the call)."""
    return [f"{p} (a later request)" for p in _missing_headers(seen, seen.requests[1:])]


def _no_retry(seen: Seen) -> List[str]:
    from .retries import PERMANENT, RELENTS

    if seen.case.target.retries and seen.case.scenario in (*RELENTS, *PERMANENT):
        return []  # a retry layer's requests there are the retries family's to judge
    count = len(seen.generations())
    if count <= 1:
        return []
    if seen.case.target.retries:
        return [
            f"expected exactly one {seen.wire.title} request, got {count} (the backend asked again "
            "where nothing failed that can come back: retry only a rate limit, an overload, a "
            "server error or a cut)"
        ]
    return [
        f"expected exactly one {seen.wire.title} request, got {count} (the backend retried: turn "
        "retries off in create_backend so each answer surfaces as it came, or say retries = True)"
    ]


def _history(seen: Seen) -> List[str]:
    if seen.scenario != "tool-result":
        return []
    if seen.refusals:
        return [
            f"the provider refused the history with its 400, as the real API would: {p}"
            for p in seen.refusals
        ]
    generations = seen.generations()
    if not generations:
        return []
    history = seen.wire.read_history(generations[0])
    if history is None:
        return []
    from .._multiturn import history_problems

    problems = history_problems(seen.wire, seen.variant, history, not _misread(seen))
    return [f"history: {p}" for p in problems]


def _misread(seen: Seen) -> bool:
    """Whether the backend returned the reasoning of the tool turn before the case's own other
    than the provider sent it: the history sends back what it returned, and the reasoning
    checks say what it lost."""
    from ..wires._script import reasoning_key

    read, sent = seen.outcome.earlier_reasoning, seen.variant.reasoning
    if read is None or not sent:
        return False
    try:
        return [reasoning_key(r) for r in read] != [reasoning_key(r) for r in sent]
    except (AttributeError, TypeError, ValueError):
        return True


def _request(seen: Seen) -> List[str]:
    refused = seen.refused()
    if refused:
        return [f"the fake provider refused {r}: {r.error}" for r in refused]
    generations = seen.generations()
    if not generations:
        shown = ", ".join(str(r) for r in seen.requests) or "no request at all"
        return [f"expected the backend to send one {seen.wire.title} request, got {shown}"]
    return [f"request: {p}" for p in seen.wire.check_request(generations[0], seen.case.target.model)]


#: This family's rows of :data:`~conformance._checks.CHECKS`.
ROWS: Dict[str, Check] = {
    "headers": _headers,
    "headers-later": _headers_later,
    "no-retry": _no_retry,
    "history": _history,
    "request": _request,
}
