"""The checks: what a case compares, in the backend's outcome and in every request.

Strategy: each check is one small function in the table :data:`CHECKS`, under an id
that failure messages show in brackets (``[usage]``) and the troubleshooting page
explains. A check looks at what the case saw (:class:`Seen`), decides for itself
whether it applies, and returns sentences, one per problem, saying what was
expected and what came; the case joins them into one :class:`AssertionError` with
the scenario's hint. One check per concern is what lets the project's own tests
prove each of them: a broken backend caught by that check alone guards it, and
taking the check out of the table must let that backend through.

The checks come in families, one module each, and each family holds its rows of
the table: how the backend ended (:mod:`.ending`: in time, the abort and the
cancellation, the connection closed, the backend closed); a reply's text, finish
reason and usage (:mod:`.replies`); tool calls and unparsed arguments
(:mod:`.tool_calls`); reasoning (:mod:`.reasoning`); errors and their retry delay
(:mod:`.failures`); a stream cut or damaged (:mod:`.cut`); a provider slow to
answer or silent for good (:mod:`.latency`); the requests
(:mod:`.requests`); a target's retry layer, from the request log (:mod:`.retries`).
A new check goes into its family's module and ``ROWS``, and its
id into :data:`_ORDER`, where it takes its place among the problems a message lists.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Tuple

from ..provider import events_around
from . import cut, ending, failures, latency, reasoning, replies, requests, retries, tool_calls
from ._seen import Check, Problem, Seen
from ._words import case_words
from .tool_calls import CALL_ID_SEPARATORS, carries_id

__all__ = ["CALL_ID_SEPARATORS", "CHECKS", "Problem", "Seen", "carries_id", "failure_message", "run_checks"]

_REFUSED_HINT = (
    "the request never reached the scenario: fix what the provider names (an HTTP/1.1-only "
    "client against a target with http2 = True needs an h2c client, or http2 = False)"
)


#: The order a failure message lists problems in. The families interleave in it (a
#: reply's usage comes after its calls, the backend's close after the requests), so it
#: is written out here, once, each run of ids under the family that holds them.
_ORDER = (
    # ending
    "finished",
    "abort-reason",
    "abort-promptly",
    "cancel-propagates",
    "connection-closed",
    # latency
    "read-timeout",
    # replies
    "reply",
    # latency
    "in-time",
    # replies
    "content",
    "tool-turn-content",
    "finish-reason",
    "text-finish",
    "finish-once",
    "finish-last",
    # tool_calls
    "tool-calls",
    "no-tool-calls",
    "tool-name",
    "tool-arguments",
    "call-id",
    "distinct-ids",
    # replies
    "usage",
    # reasoning
    "reasoning",
    "reasoning-exact",
    "reasoning-apart",
    "call-reasoning",
    # tool_calls
    "unparsed-call-kept",
    "unparsed-arguments",
    "unparsed-not-repaired",
    "unparsed-only-broken",
    # cut
    "corrupt-frame",
    # failures
    "error-raised",
    "error-kind",
    "error-details",
    "error-status",
    "retry-after",
    "text-before-error",
    # cut
    "cut-raised",
    "cut-retryable",
    "cut-kind",
    "cut-finish",
    "cut-tool-call",
    # latency
    "timeout-kind",
    # requests
    "headers",
    "headers-later",
    "no-retry",
    # retries
    "retry-relent",
    "retry-wait",
    "retry-backoff",
    "retry-growth",
    "retry-permanent",
    "retry-no-repeat",
    # requests
    "history",
    "request",
    # ending
    "backend-closed",
)


#: The checks that read the turn before a multi-turn case's own, which its history is built
#: from: what they find is the cause of a history the provider then refused.
_EARLIER_TURN = ("reasoning", "reasoning-exact")


def _table(order: Tuple[str, ...], *families: Mapping[str, Check]) -> Dict[str, Check]:
    """The families' rows as one table, in ``order``: every row has one place, every place a row."""
    rows: Dict[str, Check] = {}
    for family in families:
        for check_id, check in family.items():
            if check_id in rows:
                raise ValueError(f"two families hold a check {check_id!r}: give one of them another id")
            rows[check_id] = check
    twice = sorted({check_id for check_id in order if order.count(check_id) > 1})
    if twice:
        raise ValueError(f"the check order lists {twice} more than once: keep each id in one place")
    unplaced, missing = sorted(set(rows) - set(order)), sorted(set(order) - set(rows))
    if unplaced or missing:
        raise ValueError(
            f"the check order and the families' rows differ (no place for {unplaced}, no row for "
            f"{missing}): put each family's check ids in the order, and each id there in a family's ROWS"
        )
    return {check_id: rows[check_id] for check_id in order}


#: Every check, by the id failure messages show, in the order problems are listed.
CHECKS: Dict[str, Check] = _table(
    _ORDER,
    ending.ROWS,
    replies.ROWS,
    tool_calls.ROWS,
    reasoning.ROWS,
    failures.ROWS,
    cut.ROWS,
    requests.ROWS,
    retries.ROWS,
    latency.ROWS,
)


def run_checks(seen: Seen) -> List[Problem]:
    """Every problem every check finds, in table order.

    A request the provider refused is the root cause of whatever followed (an empty
    body, a reply that never came), so then the ``request`` check speaks alone.
    """
    if seen.refused() and "request" in CHECKS:
        return [Problem("request", text) for text in CHECKS["request"](seen)]
    if seen.refusals and "history" in CHECKS:
        # The backend then failed on the provider's 400; the history is the cause, or, before
        # it, the turn it was built from, where the backend lost what it had to send back.
        cause = next((c for c in _EARLIER_TURN if c in CHECKS and CHECKS[c](seen)), "history")
        return [Problem(cause, text) for text in CHECKS[cause](seen)]
    return [Problem(check_id, text) for check_id, check in CHECKS.items() for text in check(seen)]


def failure_message(failed: List[Tuple[Seen, List[Problem]]], variants: int = 1) -> str:
    """One message for a case: every problem of every failing variant, then the hint.

    Where the scenario has named variants, each failing one gets a heading (the
    shape, and where it was seen) and each of its problem lines starts with its name;
    every line still ends with the check's id in brackets.
    """
    first = failed[0][0]
    case = first.case
    # What the failing shapes accept and carry, not what the scenario says in general.
    must, hint = case_words(first.wire, case.scenario, case.mode, [seen.variant for seen, _ in failed])
    if first.relent:
        # A target that retries: the failure relents, and the reply is what must come.
        times = "twice" if first.relent == 2 else "once"
        must = (
            f"retry a failure that can come back (the provider fails {times}, then answers), "
            f"waiting what it asks, and return the reply; where it gives up, {must}"
        )
    lines = [f"{first.wire.name}/{case.mode} {case.scenario}: the backend must {must}"]
    if variants > 1:
        lines.append(f"  {len(failed)} of {variants} variants failed")
    for seen, problems in failed:
        name = seen.variant.name
        if name:
            source = f", seen in {seen.variant.source}" if seen.variant.source else ""
            lines.append(f"  {case.name} [{seen.variant.label(seen.wire)}]{source}:")
            if seen.rule.must:
                lines.append(f"  for this shape the backend must {seen.rule.must}")
        tag = f"[{name}] " if name else ""
        lines += [f"  - {tag}{p}" for p in problems]
        if seen.outcome.left_behind:
            lines.append(f"  left behind: {seen.outcome.left_behind}")
        shown = ", ".join(str(r) for r in seen.requests) or "none"
        lines.append(f"  requests seen: {shown}")
        generations = seen.generations()
        events = generations[-1].events if generations else []
        if events:
            # The evidence below the SDK: what the provider actually sent, event by event.
            lines.append(f"  last events sent to {generations[-1]}:")
            lines.append(
                events_around(events, events[-1].seq, before=4, after=0, since=generations[-1].received_at)
            )
    refused = any(seen.refused() for seen, _ in failed)
    lines.append(f"  hint: {_REFUSED_HINT if refused else hint}")
    return "\n".join(lines)
