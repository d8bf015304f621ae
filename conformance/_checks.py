"""The checks: what a case compares, in the backend's outcome and in every request.

Each check returns sentences, one per problem, saying what was expected and what
came; the case joins them into one :class:`AssertionError` with the scenario's hint.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Tuple

from ._driver import ABORT_CLOSE_WITHIN, ABORT_RAISE_WITHIN, Outcome
from .contract import ERROR_KINDS
from .fixture import CONFORMANCE_FIXTURE as FX
from .provider import RecordedRequest
from .scenarios import SCENARIOS
from .wires._base import Wire

if TYPE_CHECKING:
    from .cases import ConformanceCase

__all__ = ["check_outcome", "check_requests", "failure_message"]


def _value(reason: Any) -> Any:
    """A finish reason as its string, whether a str, a str enum or another enum."""
    inner = getattr(reason, "value", reason)
    return inner if isinstance(inner, str) else reason


def _describe(exc: BaseException) -> str:
    fields = []
    for name in ("kind", "code", "retryable", "retry_after", "status"):
        if hasattr(exc, name):
            fields.append(f"{name}={getattr(exc, name)!r}")
    extra = f" [{', '.join(fields)}]" if fields else ""
    return f"{type(exc).__name__}({str(exc)!r}){extra}"


def _usage_tuple(usage: Any) -> Optional[Tuple[Any, Any, Any]]:
    if usage is None:
        return None
    return (
        getattr(usage, "input_tokens", None),
        getattr(usage, "output_tokens", None),
        getattr(usage, "total_tokens", None),
    )


def _collect(case: ConformanceCase, outcome: Outcome) -> Tuple[Any, Any, List[Any], Any]:
    """Content, finish reason, tool calls and usage, from a response or from chunks."""
    if case.mode == "chat":
        r = outcome.response
        return (
            getattr(r, "content", None),
            _value(getattr(r, "finish_reason", None)),
            list(getattr(r, "tool_calls", None) or ()),
            getattr(r, "usage", None),
        )
    content: List[Any] = []
    calls: List[Any] = []
    finish: Any = None
    usage: Any = None
    for chunk in outcome.chunks:
        text = getattr(chunk, "content", "")
        if text:
            content.append(text)
        calls.extend(getattr(chunk, "tool_calls", None) or ())
        if getattr(chunk, "finish_reason", None) is not None:
            finish = _value(chunk.finish_reason)
        if getattr(chunk, "usage", None) is not None:
            usage = chunk.usage
    return "".join(content) if all(isinstance(c, str) for c in content) else content, finish, calls, usage


def _check_tool_call(case: ConformanceCase, calls: List[Any]) -> List[str]:
    expected_id = case.target.wire.tool_call_id
    if len(calls) != 1:
        return [f"expected one complete get_weather call, got {len(calls)}: {calls!r}"]
    call = calls[0]
    problems = []
    name = getattr(call, "name", None)
    if name != FX.tool_name:
        problems.append(f"expected the call's name {FX.tool_name!r}, got {name!r}")
    arguments = getattr(call, "arguments", None)
    if not isinstance(arguments, Mapping) or dict(arguments) != dict(FX.tool_arguments):
        problems.append(
            f"expected the call's arguments parsed to {dict(FX.tool_arguments)!r}, got {arguments!r}"
        )
    call_id = getattr(call, "id", None)
    if expected_id is not None and call_id != expected_id:
        problems.append(f"expected the call's id {expected_id!r} (as the provider sent it), got {call_id!r}")
    elif expected_id is None and not (isinstance(call_id, str) and call_id):
        problems.append(
            f"expected a non-empty call id (the provider sent none: make one up), got {call_id!r}"
        )
    return problems


def check_outcome(case: ConformanceCase, outcome: Outcome) -> List[str]:
    scenario = case.scenario
    problems: List[str] = []
    if outcome.close_error is not None:
        problems.append(f"closing the backend raised {_describe(outcome.close_error)}")
    if outcome.hung:
        what = "the abort reason" if scenario == "abort" else "the backend to return or raise"
        return (
            problems
            + [
                f"expected {what}, but it was still running when the case gave up after "
                f"{case.target.timeout} s ({len(outcome.chunks)} chunks yielded so far)"
            ]
            + (_check_closed(outcome) if scenario == "abort" else [])
        )
    error = outcome.error
    if scenario == "abort":
        return problems + _check_abort(case, outcome) + _check_closed(outcome)
    if scenario == "cancel":
        return problems + _check_cancel(case, outcome) + _check_closed(outcome)
    row = SCENARIOS[scenario]
    if row.error_kind is not None:
        return problems + _check_error(case, outcome, row.error_kind)
    if scenario == "corrupt-frame":
        if error is not None:
            return problems
        content = _collect(case, outcome)[0]
        return problems + [
            "expected an error once the damaged frame arrived, got a normal end after the text "
            f"{content!r} (the frame's checksum was not checked)"
        ]
    if error is not None:
        return problems + [f"expected a reply, got {_describe(error)}"]
    if case.mode == "chat" and outcome.response is None:
        return problems + ["expected a ChatResponse, got None"]
    content, finish, calls, usage = _collect(case, outcome)
    if scenario == "text":
        if content != FX.text:
            problems.append(f"expected the text {FX.text!r}, got {content!r}")
        if finish != "stop":
            problems.append(f'expected finish_reason "stop", got {finish!r}')
        if calls:
            problems.append(f"expected no tool calls, got {calls!r}")
        if _usage_tuple(usage) != _usage_tuple(FX.usage):
            problems.append(f"expected usage {FX.usage!r} as the provider reported it, got {usage!r}")
    elif scenario in ("tool-call", "tool-call-with-stop"):
        problems += _check_tool_call(case, calls)
        if finish != "tool_calls":
            said = " (the provider said stop)" if scenario == "tool-call-with-stop" else ""
            problems.append(f'expected finish_reason "tool_calls"{said}, got {finish!r}')
    elif scenario == "truncated-tool-call":
        if finish != "length":
            problems.append(f'expected finish_reason "length", got {finish!r}')
        if calls:
            problems.append(f"expected the cut-off call to be dropped, got {calls!r}")
    elif scenario == "content-filter":
        if finish not in ("content_filter", "refusal"):
            problems.append(f'expected finish_reason "content_filter" or "refusal", got {finish!r}')
        if calls:
            problems.append(f"expected no tool calls, got {calls!r}")
    return problems


def _check_error(case: ConformanceCase, outcome: Outcome, kind: str) -> List[str]:
    expected = ERROR_KINDS[kind]
    error = outcome.error
    problems: List[str] = []
    if case.scenario == "stream-error":
        content, _, _, _ = _collect(case, outcome)
        if content != FX.partial_text:
            problems.append(
                f"expected the text streamed before the failure, {FX.partial_text!r}, to be "
                f"yielded first, got {content!r}"
            )
    if error is None:
        return problems + [
            f"expected an error of kind {kind!r}, got a reply that ended normally "
            f"({len(outcome.chunks)} chunks)"
            if case.mode == "stream"
            else f"expected an error of kind {kind!r}, got the reply {outcome.response!r}"
        ]
    got = {name: getattr(error, name, "<missing>") for name in ("kind", "code", "retryable")}
    want = {"kind": expected.kind, "code": expected.code, "retryable": expected.retryable}
    if got != want:
        problems.append(f"expected an error with {want}, got {_describe(error)}")
    if kind == "rate_limit":
        retry_after = getattr(error, "retry_after", None)
        wanted = case.target.wire.rate_limit_retry_after
        if wanted is None and retry_after is not None:
            problems.append(f"expected retry_after None (the provider sent no delay), got {retry_after!r}")
        elif wanted is not None and (
            not isinstance(retry_after, (int, float)) or abs(float(retry_after) - wanted) > 1e-6
        ):
            problems.append(f"expected retry_after {wanted!r} seconds from the provider, got {retry_after!r}")
    return problems


def _check_abort(case: ConformanceCase, outcome: Outcome) -> List[str]:
    reason, error = outcome.abort_reason, outcome.error
    if reason is None or outcome.abort_at is None:
        got = f"it ended first with {_describe(error)}" if error is not None else "none came"
        return [
            "expected the backend to send its request and wait for the answer, so the case could "
            f"abort it; {got}"
        ]
    if error is None:
        return [f"expected the abort reason {reason!r} to be raised, got a normal end"]
    if error is not reason:
        return [f"expected the abort reason itself, {reason!r}, to be raised, got {_describe(error)}"]
    problems = []
    assert outcome.error_at is not None
    took = outcome.error_at - outcome.abort_at
    if took > ABORT_RAISE_WITHIN:
        problems.append(f"expected the abort reason within {ABORT_RAISE_WITHIN} s, got it after {took:.3f} s")
    return problems


def _check_cancel(case: ConformanceCase, outcome: Outcome) -> List[str]:
    error = outcome.error
    if outcome.abort_at is None:
        got = f"it ended first with {_describe(error)}" if error is not None else "it ended first, normally"
        return [
            "expected the backend to send its request and wait for the answer, so the case could "
            f"cancel it; {got}"
        ]
    if error is None:
        return ["expected CancelledError after the task was cancelled, got a normal end"]
    if not isinstance(error, asyncio.CancelledError):
        return [f"expected CancelledError to propagate unchanged, got {_describe(error)}"]
    return []


def check_requests(case: ConformanceCase, requests: List[RecordedRequest]) -> List[str]:
    target = case.target
    wire = target.wire
    problems: List[str] = []
    for request in requests:
        for name, value in target.headers.items():
            got = request.headers.get(name.lower())
            if got != value:
                problems.append(
                    f"expected header {name}: {value} on {request.method} {request.path}, got "
                    f"{'none' if got is None else repr(got)}"
                )
    generations = [r for r in requests if wire.is_generation(r)]
    if not generations:
        seen = ", ".join(str(r) for r in requests) or "no request at all"
        return problems + [f"expected the backend to send one {wire.title} request, got {seen}"]
    if len(generations) > 1:
        problems.append(
            f"expected exactly one {wire.title} request, got {len(generations)} (the backend "
            "retried: turn retries off in create_backend so each answer surfaces as it came)"
        )
    problems += [f"request: {p}" for p in wire.check_request(generations[0], target.model)]
    return problems


def _check_closed(outcome: Outcome) -> List[str]:
    if outcome.abort_at is None:
        return []
    if outcome.closed_after is None:
        return [
            f"expected the connection closed within {ABORT_CLOSE_WITHIN} s of the "
            f"{'abort' if outcome.abort_reason is not None else 'cancellation'}, but the "
            "provider saw it open (the provider goes on generating and billing)"
        ]
    return []


def failure_message(
    case: ConformanceCase, problems: List[str], requests: List[RecordedRequest], wire: Wire
) -> str:
    row = case.row
    lines = [f"{wire.name}/{case.mode} {case.scenario}: the backend must {row.must}"]
    lines += [f"  - {p}" for p in problems]
    lines.append(f"  hint: {row.hint}")
    seen = ", ".join(str(r) for r in requests) or "none"
    lines.append(f"  requests seen: {seen}")
    return "\n".join(lines)
