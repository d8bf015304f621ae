"""The checks: what a case compares, in the backend's outcome and in every request.

Strategy: each check is one small function in the table :data:`CHECKS`, under an id
that failure messages show in brackets (``[usage]``) and the troubleshooting page
explains. A check looks at what the case saw (:class:`Seen`), decides for itself
whether it applies, and returns sentences, one per problem, saying what was
expected and what came; the case joins them into one :class:`AssertionError` with
the scenario's hint. One check per concern is what lets the project's own tests
prove each of them: a broken backend caught by that check alone guards it, and
taking the check out of the table must let that backend through.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from ._bounds import ABORT_CLOSE_WITHIN, ABORT_RAISE_WITHIN
from ._stall import not_counted
from .contract import ERROR_KINDS
from .fixture import CONFORMANCE_FIXTURE as FX
from .provider import RecordedRequest, Reply, events_around
from .scenarios import SCENARIOS
from .wires._base import Variant, Wire

if TYPE_CHECKING:
    from ._driver import Outcome
    from .cases import ConformanceCase

__all__ = ["CHECKS", "Problem", "Seen", "failure_message", "run_checks"]

#: Scenarios whose turn ends normally, with a reply the checks read.
_REPLY_SCENARIOS = (
    "text",
    "tool-call",
    "tool-call-with-stop",
    "tool-result",
    "parallel-tool-calls",
    "truncated-tool-call",
    "corrupt-arguments",
    "content-filter",
)
_MISSING: Any = object()
_REFUSED_HINT = (
    "the request never reached the scenario: fix what the provider names (an HTTP/1.1-only "
    "client against a target with http2 = True needs an h2c client, or http2 = False)"
)


@dataclass(frozen=True)
class Problem:
    """One thing a backend got wrong, and the check that saw it."""

    check: str
    text: str

    def __str__(self) -> str:
        return f"{self.text} [{self.check}]"


@dataclass
class Seen:
    """Everything one variant of a case saw: what the backend did, every request, every reply sent."""

    case: ConformanceCase
    outcome: Outcome
    requests: List[RecordedRequest]
    #: The reply the provider sent to each generation request, in order.
    replies: List[Reply]
    #: The shape the provider answered in; what the backend must report that depends
    #: on the shape (a retry delay, a call id, another error kind) is read from it.
    variant: Variant = Variant("")
    #: Why the provider refused a multi-turn history with the real API's 400, if it did.
    refusals: List[str] = field(default_factory=list)

    @property
    def scenario(self) -> str:
        return self.case.scenario

    @property
    def wire(self) -> Wire:
        return self.case.target.wire

    @property
    def error(self) -> Optional[BaseException]:
        return self.outcome.error

    @property
    def ended(self) -> bool:
        """The backend returned or raised within the bound."""
        return not self.outcome.hung

    @property
    def got_reply(self) -> bool:
        """A turn that should end normally did, and there is a reply to read."""
        if self.scenario not in _REPLY_SCENARIOS or not self.ended or self.error is not None:
            return False
        return self.case.mode == "stream" or self.outcome.response is not None

    def collected(self) -> Tuple[Any, Any, List[Any], Any]:
        """Content, finish reason, tool calls and usage, from a response or from chunks."""
        if self.case.mode == "chat":
            r = self.outcome.response
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
        for chunk in self.outcome.chunks:
            text = getattr(chunk, "content", "")
            if text:
                content.append(text)
            calls.extend(getattr(chunk, "tool_calls", None) or ())
            if getattr(chunk, "finish_reason", None) is not None:
                finish = _value(chunk.finish_reason)
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage
        joined = "".join(content) if all(isinstance(c, str) for c in content) else content
        return joined, finish, calls, usage

    def refused(self) -> List[RecordedRequest]:
        """Requests the provider turned away before any scenario saw them (bad input, h2c only)."""
        return [r for r in self.requests if r.error]

    def generations(self) -> List[RecordedRequest]:
        return [r for r in self.requests if self.wire.is_generation(r)]

    def reply_status(self) -> Optional[int]:
        """The HTTP status of the last reply to the generation call, if one was sent."""
        statuses = [getattr(r, "status", None) for r in self.replies]
        return statuses[-1] if statuses else None

    def reply_headers(self) -> Mapping[str, str]:
        if not self.replies:
            return {}
        return {k.lower(): v for k, v in (getattr(self.replies[-1], "headers", None) or {}).items()}


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


# -- the backend's own life ------------------------------------------------------------------


def _backend_closed(seen: Seen) -> List[str]:
    error = seen.outcome.close_error
    return [] if error is None else [f"closing the backend raised {_describe(error)}"]


def _finished(seen: Seen) -> List[str]:
    outcome = seen.outcome
    if not outcome.hung:
        return []
    what = "the abort reason" if seen.scenario == "abort" else "the backend to return or raise"
    return [
        f"expected {what}, but it was still running when the case gave up after "
        f"{outcome.waited:.1f} s ({len(outcome.chunks)} chunks yielded so far)"
    ]


# -- abort and cancel --------------------------------------------------------------------------


def _ended_first(seen: Seen) -> List[str]:
    """The problem when the backend ended before the case could abort or cancel it."""
    error = seen.outcome.error
    got = f"it ended first with {_describe(error)}" if error is not None else "it ended first, normally"
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
        return [f"expected the abort reason itself, {reason!r}, to be raised, got {_describe(error)}"]
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
        return [f"expected CancelledError to propagate unchanged, got {_describe(outcome.error)}"]
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


# -- a turn that ends normally -----------------------------------------------------------------


def _reply(seen: Seen) -> List[str]:
    if seen.scenario not in _REPLY_SCENARIOS or not seen.ended:
        return []
    if seen.error is not None:
        if seen.scenario == "corrupt-arguments":
            return [
                "expected a reply carrying the call with its raw argument text (arguments that do "
                "not parse are the caller's to answer, not a failure of the turn), got "
                f"{_describe(seen.error)}"
            ]
        return [f"expected a reply, got {_describe(seen.error)}"]
    if seen.case.mode == "chat" and seen.outcome.response is None:
        return ["expected a ChatResponse, got None"]
    return []


def _content(seen: Seen) -> List[str]:
    expected = seen.wire.texts.get(seen.scenario)
    if not seen.got_reply or expected is None:
        return []
    content = seen.collected()[0]
    if content == expected:
        return []
    if seen.scenario == "truncated-tool-call":
        return [f"expected the text sent before the cut, {expected!r}, got {content!r}"]
    return [f"expected the text {expected!r}, got {content!r}"]


_FINISH = {
    "text": ("stop",),
    "tool-call": ("tool_calls",),
    "tool-call-with-stop": ("tool_calls",),
    "tool-result": ("stop",),
    "parallel-tool-calls": ("tool_calls",),
    "truncated-tool-call": ("length",),
    # The provider ended the turn normally with a call (tool_calls, tool_use): the
    # caller must answer it, broken or not, so the turn is a tool turn.
    "corrupt-arguments": ("tool_calls",),
    "content-filter": ("content_filter", "refusal"),
}


def _finish_reason(seen: Seen) -> List[str]:
    if not seen.got_reply:
        return []
    finish = seen.collected()[1]
    allowed = _FINISH[seen.scenario]
    if finish in allowed:
        return []
    said = " (the provider said stop)" if seen.scenario == "tool-call-with-stop" else ""
    wanted = " or ".join(f'"{a}"' for a in allowed)
    return [f"expected finish_reason {wanted}{said}, got {finish!r}"]


def _tool_calls(seen: Seen) -> List[str]:
    if not seen.got_reply:
        return []
    calls = seen.collected()[2]
    if seen.scenario in ("tool-call", "tool-call-with-stop"):
        if len(calls) != 1:
            return [f"expected one complete get_weather call, got {len(calls)}: {calls!r}"]
        problems = []
        name = getattr(calls[0], "name", None)
        if name != FX.tool_name:
            problems.append(f"expected the call's name {FX.tool_name!r}, got {name!r}")
        arguments = getattr(calls[0], "arguments", None)
        if not isinstance(arguments, Mapping) or dict(arguments) != dict(FX.tool_arguments):
            problems.append(
                f"expected the call's arguments parsed to {dict(FX.tool_arguments)!r}, got {arguments!r}"
            )
        return problems
    if seen.scenario == "parallel-tool-calls":
        return _parallel_calls(calls)
    if seen.scenario == "corrupt-arguments":
        return []  # the unparsed-* checks below, one condition each
    if not calls:
        return []
    if seen.scenario == "truncated-tool-call":
        return [f"expected the cut-off call to be dropped, got {calls!r}"]
    return [f"expected no tool calls, got {calls!r}"]


def _parallel_calls(calls: List[Any]) -> List[str]:
    wanted = [dict(arguments) for arguments in FX.parallel_arguments]
    got = [
        dict(c.arguments)
        if isinstance(getattr(c, "arguments", None), Mapping)
        else getattr(c, "arguments", None)
        for c in calls
    ]
    names = [getattr(c, "name", None) for c in calls]
    if len(calls) == len(wanted) and all(w in got for w in wanted) and set(names) == {FX.tool_name}:
        return []
    return [
        f"expected two complete {FX.tool_name} calls, each once, with the arguments {wanted!r}; got "
        f"{len(calls)}: {[f'{n}({a!r})' for n, a in zip(names, got)]}"
    ]


def _parallel_ids(seen: Seen) -> List[str]:
    from ._multiturn import parallel_calls

    calls = seen.collected()[2]
    ids = [getattr(c, "id", None) for c in calls]
    problems = []
    if len(set(ids)) != len(ids) or not all(isinstance(i, str) and i for i in ids):
        problems.append(f"expected each call to have its own non-empty id, got {ids!r}")
    if not seen.wire.sends_call_ids:
        return problems
    for sent in parallel_calls(seen.wire):
        arguments = json.loads(sent.arguments)
        for call in calls:
            if getattr(call, "arguments", None) == arguments and sent.id not in str(getattr(call, "id", "")):
                problems.append(
                    f"expected the call with arguments {arguments!r} to carry its own id {sent.id!r}, "
                    f"got {getattr(call, 'id', None)!r} (ids and calls were paired up wrongly)"
                )
    return problems


def _call_id(seen: Seen) -> List[str]:
    if seen.scenario == "parallel-tool-calls" and seen.got_reply:
        return _parallel_ids(seen)
    if not seen.got_reply or seen.scenario not in ("tool-call", "tool-call-with-stop"):
        return []
    calls = seen.collected()[2]
    if len(calls) != 1:
        return []
    call_id = getattr(calls[0], "id", None)
    sent = seen.variant.call_id
    if sent is None:
        if isinstance(call_id, str) and call_id:
            return []
        return [f"expected a non-empty call id (the provider sent none: make one up), got {call_id!r}"]
    # A library may add to the id (a thought signature after it); the provider's id
    # must survive, or the next turn's result cannot be matched to the call.
    if isinstance(call_id, str) and sent in call_id:
        return []
    return [f"expected the call's id to carry {sent!r} (as the provider sent it), got {call_id!r}"]


def _usage(seen: Seen) -> List[str]:
    if not seen.got_reply or seen.scenario not in seen.wire.reports_usage:
        return []
    usage = seen.collected()[3]
    if _usage_tuple(usage) == _usage_tuple(FX.usage):
        return []
    return [f"expected usage {FX.usage!r} as the provider reported it, got {usage!r}"]


# -- a call whose arguments do not parse --------------------------------------------------


def _unparsed_calls(seen: Seen) -> Optional[List[Any]]:
    """The calls of a ``corrupt-arguments`` turn that ended normally; ``None`` on any other case."""
    if seen.scenario != "corrupt-arguments" or not seen.got_reply:
        return None
    return seen.collected()[2]


def _unparsed_call_kept(seen: Seen) -> List[str]:
    calls = _unparsed_calls(seen)
    if calls is None:
        return []
    if len(calls) == 1 and getattr(calls[0], "name", None) == FX.tool_name:
        return []
    return [
        f"expected the {FX.tool_name} call whose arguments do not parse, once, got {len(calls)}: "
        f"{calls!r} (the model made a call: the caller must see it, to answer it with an error)"
    ]


def _unparsed_arguments(seen: Seen) -> List[str]:
    calls = _unparsed_calls(seen)
    if not calls or len(calls) != 1:
        return []
    from .wires._unparsed import unparsed_text

    sent = unparsed_text(seen.variant.name)
    got = getattr(calls[0], "unparsed_arguments", _MISSING)
    if got == sent:
        return []
    shown = "no unparsed_arguments attribute" if got is _MISSING else repr(got)
    return [
        f"expected unparsed_arguments to hold the provider's argument text byte for byte, {sent!r}, "
        f"got {shown}"
    ]


def _unparsed_not_repaired(seen: Seen) -> List[str]:
    calls = _unparsed_calls(seen)
    if not calls or len(calls) != 1:
        return []
    arguments = getattr(calls[0], "arguments", None)
    if isinstance(arguments, Mapping) and not arguments:
        return []
    return [
        "expected arguments {} on a call whose text does not parse (its text goes in "
        f"unparsed_arguments), got {arguments!r}: a repaired or guessed object runs the tool on "
        "what the model never wrote"
    ]


def _corrupt_frame(seen: Seen) -> List[str]:
    if seen.scenario != "corrupt-frame" or not seen.ended or seen.error is not None:
        return []
    content = seen.collected()[0]
    return [
        "expected an error once the damaged frame arrived, got a normal end after the text "
        f"{content!r} (the frame's checksum was not checked)"
    ]


# -- a turn that fails -------------------------------------------------------------------------


def _error_kind_of(seen: Seen) -> Optional[str]:
    if seen.variant.error_kind is not None:
        return seen.variant.error_kind
    return SCENARIOS[seen.scenario].error_kind if seen.scenario in SCENARIOS else None


def _failed(seen: Seen) -> bool:
    return _error_kind_of(seen) is not None and seen.ended and seen.error is not None


def _error_raised(seen: Seen) -> List[str]:
    kind = _error_kind_of(seen)
    if kind is None or not seen.ended or seen.error is not None:
        return []
    if seen.case.mode == "stream":
        return [
            f"expected an error of kind {kind!r}, got a reply that ended normally "
            f"({len(seen.outcome.chunks)} chunks)"
        ]
    return [f"expected an error of kind {kind!r}, got the reply {seen.outcome.response!r}"]


def _error_kind(seen: Seen) -> List[str]:
    if not _failed(seen):
        return []
    kind = _error_kind_of(seen)
    assert kind is not None and seen.error is not None
    expected = ERROR_KINDS[kind]
    got = {name: getattr(seen.error, name, "<missing>") for name in ("kind", "code", "retryable")}
    want = {"kind": expected.kind, "code": expected.code, "retryable": expected.retryable}
    if got != want:
        return [f"expected an error with {want}, got {_describe(seen.error)}"]
    return []


def _error_details(seen: Seen) -> List[str]:
    if not _failed(seen):
        return []
    kind = _error_kind_of(seen)
    details = getattr(seen.error, "details", _MISSING)
    got = details.get("kind", _MISSING) if isinstance(details, Mapping) else _MISSING
    if got == kind:
        return []
    shown = "no details" if details is _MISSING else f"details {details!r}"
    return [f'expected details["kind"] == {kind!r} (the contract\'s details.kind), got {shown}']


def _error_status(seen: Seen) -> List[str]:
    status = seen.reply_status()
    if not _failed(seen) or status is None or status < 400:
        return []
    got = getattr(seen.error, "status", _MISSING)
    if got == status:
        return []
    shown = "no status attribute" if got is _MISSING else repr(got)
    return [f"expected status {status} (the HTTP status the provider answered with), got {shown}"]


def _retry_after(seen: Seen) -> List[str]:
    if not _failed(seen):
        return []
    kind = _error_kind_of(seen)
    retry_after = getattr(seen.error, "retry_after", None)
    if kind == "rate_limit":
        wanted = seen.variant.retry_after
        if wanted is None and retry_after is not None:
            return [
                f"expected retry_after None (the provider sent no delay), got {retry_after!r}: "
                "report a delay only where the reply carries one"
            ]
        if wanted is not None and (
            not isinstance(retry_after, (int, float)) or abs(float(retry_after) - wanted) > 1e-6
        ):
            return [f"expected retry_after {wanted!r} seconds from the provider, got {retry_after!r}"]
        return []
    if kind == "quota" or retry_after is None:
        return []
    headers = seen.reply_headers()
    if "retry-after" in headers or "retry-after-ms" in headers:
        return []
    return [
        f"expected retry_after None on an error of kind {kind!r} (the provider sent no delay), got "
        f"{retry_after!r}: a made-up delay hides the provider's own pacing"
    ]


def _text_before_error(seen: Seen) -> List[str]:
    if seen.scenario != "stream-error" or not seen.ended:
        return []
    content = seen.collected()[0]
    if content == FX.partial_text:
        return []
    return [
        f"expected the text streamed before the failure, {FX.partial_text!r}, to be yielded first, "
        f"got {content!r}"
    ]


# -- the requests ------------------------------------------------------------------------------


def _headers(seen: Seen) -> List[str]:
    problems = []
    for request in seen.requests:
        for name, value in seen.case.target.headers.items():
            got = request.headers.get(name.lower())
            if got != value:
                problems.append(
                    f"expected header {name}: {value} on {request.method} {request.path}, got "
                    f"{'none' if got is None else repr(got)}"
                )
    return problems


def _no_retry(seen: Seen) -> List[str]:
    count = len(seen.generations())
    if count <= 1:
        return []
    return [
        f"expected exactly one {seen.wire.title} request, got {count} (the backend retried: turn "
        "retries off in create_backend so each answer surfaces as it came)"
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
    from ._multiturn import history_problems

    return [f"history: {p}" for p in history_problems(seen.wire, seen.variant, history)]


def _request(seen: Seen) -> List[str]:
    refused = seen.refused()
    if refused:
        return [f"the fake provider refused {r}: {r.error}" for r in refused]
    generations = seen.generations()
    if not generations:
        shown = ", ".join(str(r) for r in seen.requests) or "no request at all"
        return [f"expected the backend to send one {seen.wire.title} request, got {shown}"]
    return [f"request: {p}" for p in seen.wire.check_request(generations[0], seen.case.target.model)]


#: Every check, by the id failure messages show, in the order problems are listed.
CHECKS: Dict[str, Callable[[Seen], List[str]]] = {
    "finished": _finished,
    "abort-reason": _abort_reason,
    "abort-promptly": _abort_promptly,
    "cancel-propagates": _cancel_propagates,
    "connection-closed": _connection_closed,
    "reply": _reply,
    "content": _content,
    "finish-reason": _finish_reason,
    "tool-calls": _tool_calls,
    "call-id": _call_id,
    "usage": _usage,
    "unparsed-call-kept": _unparsed_call_kept,
    "unparsed-arguments": _unparsed_arguments,
    "unparsed-not-repaired": _unparsed_not_repaired,
    "corrupt-frame": _corrupt_frame,
    "error-raised": _error_raised,
    "error-kind": _error_kind,
    "error-details": _error_details,
    "error-status": _error_status,
    "retry-after": _retry_after,
    "text-before-error": _text_before_error,
    "headers": _headers,
    "no-retry": _no_retry,
    "history": _history,
    "request": _request,
    "backend-closed": _backend_closed,
}


def run_checks(seen: Seen) -> List[Problem]:
    """Every problem every check finds, in table order.

    A request the provider refused is the root cause of whatever followed (an empty
    body, a reply that never came), so then the ``request`` check speaks alone.
    """
    if seen.refused() and "request" in CHECKS:
        return [Problem("request", text) for text in CHECKS["request"](seen)]
    if seen.refusals and "history" in CHECKS:
        # The backend then failed on the provider's 400; the history is the cause.
        return [Problem("history", text) for text in CHECKS["history"](seen)]
    return [Problem(check_id, text) for check_id, check in CHECKS.items() for text in check(seen)]


def failure_message(failed: List[Tuple[Seen, List[Problem]]], variants: int = 1) -> str:
    """One message for a case: every problem of every failing variant, then the hint.

    Where the scenario has named variants, each failing one gets a heading (the
    shape, and where it was seen) and each of its problem lines starts with its name;
    every line still ends with the check's id in brackets.
    """
    first = failed[0][0]
    case = first.case
    lines = [f"{first.wire.name}/{case.mode} {case.scenario}: the backend must {case.row.must}"]
    if variants > 1:
        lines.append(f"  {len(failed)} of {variants} variants failed")
    for seen, problems in failed:
        name = seen.variant.name
        if name:
            source = f", seen in {seen.variant.source}" if seen.variant.source else ""
            lines.append(f"  {case.name} [{seen.variant.label(seen.wire)}]{source}:")
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
    lines.append(f"  hint: {_REFUSED_HINT if refused else case.row.hint}")
    return "\n".join(lines)
