"""A case's headline and hint, in the terms of the wire it runs on.

Strategy: the scenario table (:data:`~conformance.scenarios.SCENARIOS`) says what a
backend must do in general; a failure message says it for one wire, so that it never
promises what the wire's bytes do not carry. Where a scenario is a failure, the kinds
named are the ones its variants accept (Cohere's in-stream error is a ``server_error``
only), and where it is a rate limit, the delay and the places to read it are the ones
the wire's replies carry (Cohere's 429 carries none). Every other scenario keeps the
table's words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple

from ..contract import ERROR_KINDS
from ..scenarios import SCENARIOS
from ._rule import rule_of

if TYPE_CHECKING:
    from ..wires._base import Variant, Wire

__all__ = ["case_words"]


def _accepted(wire: Wire, scenario: str, variants: Sequence[Variant]) -> List[str]:
    """The kinds the variants' rules accept, in the order they first name them."""
    kinds: List[str] = []
    for variant in variants:
        kinds += [k for k in rule_of(wire, scenario, variant).error_kinds if k not in kinds]
    return kinds


def _failure(kinds: Sequence[str]) -> str:
    """``a retryable error of kind overloaded``, ``a non-retryable error of kind quota or
    invalid_request``, or ``an error of kind quota (not retryable) or rate_limit
    (retryable)`` where their retryable differs."""
    known = [k for k in kinds if k in ERROR_KINDS]
    retryable = {ERROR_KINDS[k].retryable for k in known}
    if len(retryable) == 1:
        word = "retryable" if retryable.pop() else "non-retryable"
        return f"a {word} error of kind {' or '.join(known)}"
    named = [f"{k} ({'retryable' if ERROR_KINDS[k].retryable else 'not retryable'})" for k in known]
    return f"an error of kind {' or '.join(named)}"


def _delay_forms(wire: Wire, mode: str, variants: Sequence[Variant]) -> Tuple[List[str], bool]:
    """Where the wire's rate-limit replies carry their delay (header names, or the body),
    and whether some carry none."""
    from ..provider.replies import RecordedRequest

    forms: List[str] = []
    none = False
    body = b'{"stream": true}' if mode == "stream" else b"{}"
    request = RecordedRequest("POST", "/", "", {}, body, "HTTP/1.1")
    for variant in variants:
        try:
            reply = wire.reply("rate-limit", mode, request, variant.name) if variant.name else None
            if reply is None:
                reply = wire.reply("rate-limit", mode, request)
        except Exception:  # noqa: BLE001 - a wire of one's own may need a real request
            reply = None
        if reply is None:
            if variant.retry_after is None:
                none = True
            continue
        headers = {str(k).lower() for k in (getattr(reply, "headers", None) or {})}
        found: List[str] = [h for h in ("retry-after-ms", "retry-after") if h in headers]
        if not found and wire.retry_after_sent(reply) is not None:
            found = ["the provider's own retry delay field in the body"]
        if not found:
            none = True
        forms += [f for f in found if f not in forms]
    return forms, none


def _failure_body(wire: Wire, scenario: str, mode: str, variant: str) -> Optional[Mapping[str, Any]]:
    """The JSON object the wire answers ``scenario`` with in ``variant``; ``None`` where it is no
    whole JSON reply (a stream) or needs a real request."""
    from ..provider.replies import JsonReply, RecordedRequest

    body = b'{"stream": true}' if mode == "stream" else b"{}"
    request = RecordedRequest("POST", "/", "", {}, body, "HTTP/1.1")
    try:
        asked = (variant,) if variant else ()
        reply = wire.reply(scenario, mode, request, *asked)
    except Exception:  # noqa: BLE001 - a wire of one's own may need a real request
        return None
    if isinstance(reply, JsonReply) and isinstance(reply.body, dict):
        return reply.body
    return None


def _envelope_words(wire: Wire, scenario: str, mode: str, variants: Sequence[Variant]) -> str:
    """Where the wire nests some failures' fields under ``error`` and a failed shape carries
    them at the top level, a sentence naming that shape and its fields; else empty."""

    def nested(body: Optional[Mapping[str, Any]]) -> bool:
        return body is not None and isinstance(body.get("error"), Mapping)

    shapes = wire.variants(scenario, mode)
    if not any(nested(_failure_body(wire, scenario, mode, v.name)) for v in shapes):
        return ""
    names: List[str] = []
    keys: List[str] = []
    for variant in variants:
        body = _failure_body(wire, scenario, mode, variant.name)
        if body is None or nested(body):
            continue
        names.append(variant.name or wire.name)
        keys += [str(k) for k in body if str(k) not in keys]
    if not names:
        return ""
    verb = "carries" if len(names) == 1 else "carry"
    return (
        f"; not every failure body nests its fields under \"error\": {', '.join(names)} {verb} them at "
        f"the top level ({', '.join(keys)}), so read them where they are, never body[\"error\"] alone"
    )


def _rate_limit_words(wire: Wire, mode: str, variants: Sequence[Variant], failure: str) -> Tuple[str, str]:
    forms, none = _delay_forms(wire, mode, variants)
    if not forms:
        must = f"fail as {failure}, with retry_after None: this provider sends no delay with it"
        hint = (
            "tell a rate limit by its status and type; this provider names no delay, so report "
            "retry_after None rather than one of your own"
        )
        return must, hint
    where = ", then ".join(f + (" (milliseconds)" if f == "retry-after-ms" else "") for f in forms)
    if none:
        must = f"fail as {failure}, with retry_after from the provider where its reply names one, else None"
        return must, f"read {where}; where the reply names no delay, report retry_after None"
    return f"fail as {failure}, with retry_after from the provider", f"read {where}"


def case_words(
    wire: Wire, scenario: str, mode: str, variants: Optional[Sequence[Variant]] = None
) -> Tuple[str, str]:
    """What the backend must do in ``scenario`` on ``wire``, and the hint, for a failure message.

    ``variants`` are the shapes the case plays (by default all the wire's, in ``mode``).
    """
    row = SCENARIOS[scenario]
    shapes = list(variants if variants is not None else wire.variants(scenario, mode))
    if row.error_kind is None and scenario != "stream-cut":
        either: List[str] = []
        for variant in shapes:
            rule = rule_of(wire, scenario, variant)
            either += [k for k in (rule.either.error_kinds if rule.either else ()) if k not in either]
        if either:
            # A shape with two sound readings: the reply, or the errors its bytes also allow.
            refused = f"or fail as {_failure(either)} where the provider refused the request"
            return f"{row.must}, {refused}", row.hint
        return row.must, row.hint
    kinds = _accepted(wire, scenario, shapes)
    if not kinds:
        return row.must, row.hint
    must, hint = _failure_words(wire, scenario, mode, shapes, kinds)
    if scenario != "stream-cut":
        hint += _envelope_words(wire, scenario, mode, shapes)
    return must, hint


def _failure_words(
    wire: Wire, scenario: str, mode: str, shapes: Sequence[Variant], kinds: Sequence[str]
) -> Tuple[str, str]:
    """The headline and hint of a failure scenario, before the words on its body's envelope."""
    row = SCENARIOS[scenario]
    failure = _failure(kinds)
    if scenario == "rate-limit":
        return _rate_limit_words(wire, mode, shapes, failure)
    if scenario == "stream-error":
        return f"yield the text streamed before the provider failed, then fail as {failure}", row.hint
    if scenario == "stream-cut":
        with_kinds = _CUT_MUST.format(failure=failure)
        # The table's hint advises a retryable server_error: where a wire's cuts accept none, their own.
        hint = row.hint if "server_error" in kinds else row.hint.replace("server_error", " or ".join(kinds))
        return with_kinds, hint
    if scenario == "quota":
        return f"fail as {failure}, even where the provider sends it as a 429", row.hint
    return f"fail as {failure}", row.hint


#: The ``stream-cut`` headline, its kinds filled in.
_CUT_MUST = (
    "fail with {failure} when the connection ends before the provider's terminal event, or a "
    "whole body before its end, never yielding a finish reason or a tool call first"
)
