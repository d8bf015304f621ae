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
    from ._case import BackendCase as ConformanceCase
    from ._case import Outcome

__all__ = ["CALL_ID_SEPARATORS", "CHECKS", "Problem", "Seen", "carries_id", "failure_message", "run_checks"]

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
    "reasoning",
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
    if _reasoning_mixed_in(seen, content) and _without_reasoning(seen, content) == expected:
        return []  # the answer is whole; the reasoning-apart check names what was added to it
    if seen.scenario == "truncated-tool-call":
        return [f"expected the text sent before the cut, {expected!r}, got {content!r}"]
    return [f"expected the text {expected!r}, got {content!r}"]


#: The turns whose reply is the call alone: the content must be what the provider sent
#: with it (:attr:`Wire.texts`), empty where it sent none.
_TOOL_TURNS = ("tool-call", "tool-call-with-stop", "parallel-tool-calls")


def _tool_turn_content(seen: Seen) -> List[str]:
    if not seen.got_reply or seen.scenario not in _TOOL_TURNS:
        return []
    expected = seen.wire.texts.get(seen.scenario, "")
    content = seen.collected()[0]
    # None and "" both say "no text": a ChatResponse may carry either where none came.
    if content == expected or (not expected and content is None):
        return []
    sent = f"the text {expected!r}" if expected else "no text"
    return [
        f"expected the content the provider sent with the call ({sent}), got {content!r}: "
        "a tool turn's content is the model's, never one of the backend's own"
    ]


#: The finish reason each reply scenario calls for. The turns that end with their text
#: are judged apart (``text-finish``), so that each table is proven by a bug of its own.
_TEXT_FINISH = {"text": ("stop",), "tool-result": ("stop",)}
_FINISH = {
    "tool-call": ("tool_calls",),
    "tool-call-with-stop": ("tool_calls",),
    "parallel-tool-calls": ("tool_calls",),
    "truncated-tool-call": ("length",),
    # The provider ended the turn normally with a call (tool_calls, tool_use): the
    # caller must answer it, broken or not, so the turn is a tool turn.
    "corrupt-arguments": ("tool_calls",),
    "content-filter": ("content_filter", "refusal"),
    "reasoning": ("stop",),
}


def _finish_problem(seen: Seen, allowed: Tuple[str, ...]) -> List[str]:
    finish = seen.collected()[1]
    if finish in allowed:
        return []
    said = " (the provider said stop)" if seen.scenario == "tool-call-with-stop" else ""
    wanted = " or ".join(f'"{a}"' for a in allowed)
    return [f"expected finish_reason {wanted}{said}, got {finish!r}"]


def _finish_reason(seen: Seen) -> List[str]:
    if not seen.got_reply or seen.scenario not in _FINISH:
        return []
    return _finish_problem(seen, _FINISH[seen.scenario])


def _text_finish(seen: Seen) -> List[str]:
    if not seen.got_reply or seen.scenario not in _TEXT_FINISH:
        return []
    return _finish_problem(seen, _TEXT_FINISH[seen.scenario])


def _finish_once(seen: Seen) -> List[str]:
    """In a stream, the finish reason comes once, on the last chunk that carries one."""
    if seen.case.mode != "stream" or not seen.ended:
        return []
    carrying = [
        (index, _value(chunk.finish_reason))
        for index, chunk in enumerate(seen.outcome.chunks)
        if getattr(chunk, "finish_reason", None) is not None
    ]
    if len(carrying) <= 1:
        return []
    (first, early), (last, final) = carrying[0], carrying[-1]
    return [
        f"expected the finish reason once, on the last chunk that carries one (chunk {last}: "
        f"{final!r}), got {early!r} already on chunk {first} ({len(carrying)} of "
        f"{len(seen.outcome.chunks)} chunks carry one): a consumer that stops at the first "
        "finish reason loses the rest of the turn"
    ]


def _tool_calls(seen: Seen) -> List[str]:
    """The number of calls on a tool turn; none kept of a call cut off by the token limit."""
    if not seen.got_reply:
        return []
    calls = seen.collected()[2]
    if seen.scenario in ("tool-call", "tool-call-with-stop"):
        if len(calls) != 1:
            return [f"expected one complete get_weather call, got {len(calls)}: {calls!r}"]
        return []
    if seen.scenario == "parallel-tool-calls":
        if len(calls) != len(FX.parallel_arguments):
            return [
                f"expected {len(FX.parallel_arguments)} complete {FX.tool_name} calls, each once; "
                f"got {len(calls)}: {_shown(calls)}"
            ]
        return []
    if seen.scenario == "truncated-tool-call" and calls:
        return [f"expected the cut-off call to be dropped, got {calls!r}"]
    return []


#: The turns that hold no call: a reply scenario is listed here, or in :data:`_TOOL_TURNS`,
#: or in :data:`_OWN_CALL_RULE`.
_NO_CALL_TURNS = ("text", "content-filter", "tool-result", "reasoning")
#: The turns whose calls checks of their own judge: a cut-off call (``tool-calls``) and a
#: call whose arguments do not parse (the ``unparsed-*`` checks).
_OWN_CALL_RULE = ("truncated-tool-call", "corrupt-arguments")


def _no_tool_calls(seen: Seen) -> List[str]:
    """No call on a turn that holds none (text, a filtered turn, the answer after a result)."""
    if not seen.got_reply or seen.scenario not in _NO_CALL_TURNS:
        return []
    calls = seen.collected()[2]
    return [f"expected no tool calls, got {calls!r}"] if calls else []


def _counted_calls(seen: Seen) -> List[Any]:
    """The calls of a tool turn whose count is right; empty otherwise (``tool-calls`` says why)."""
    if not seen.got_reply or seen.scenario not in _TOOL_TURNS:
        return []
    calls = seen.collected()[2]
    wanted = len(FX.parallel_arguments) if seen.scenario == "parallel-tool-calls" else 1
    return calls if len(calls) == wanted else []


def _arguments_of(call: Any) -> Any:
    arguments = getattr(call, "arguments", None)
    return dict(arguments) if isinstance(arguments, Mapping) else arguments


def _shown(calls: List[Any]) -> List[str]:
    return [f"{getattr(c, 'name', None)}({_arguments_of(c)!r})" for c in calls]


def _tool_name(seen: Seen) -> List[str]:
    calls = _counted_calls(seen)
    names = [getattr(c, "name", None) for c in calls]
    wrong = [n for n in names if n != FX.tool_name]
    if not wrong:
        return []
    return [f"expected every call named {FX.tool_name!r}, as the provider sent it, got names {names!r}"]


def _tool_arguments(seen: Seen) -> List[str]:
    calls = _counted_calls(seen)
    if not calls:
        return []
    got = [_arguments_of(c) for c in calls]
    if seen.scenario == "parallel-tool-calls":
        wanted = [dict(arguments) for arguments in FX.parallel_arguments]
        if all(got.count(w) == 1 for w in wanted):
            return []
        return [f"expected the calls' arguments parsed to {wanted!r}, each once; got {got!r}"]
    if isinstance(got[0], dict) and got[0] == dict(FX.tool_arguments):
        return []
    return [f"expected the call's arguments parsed to {dict(FX.tool_arguments)!r}, got {got[0]!r}"]


#: What may follow the provider's id in a call id a library extends (a thought signature
#: after ``|``, a counter after ``_``): the id must be the provider's, or begin with it and
#: then one of these. Containing it somewhere is not enough, since an accumulator that
#: glues ids together (``call_A``, then ``call_Acall_B``) contains every one of them.
CALL_ID_SEPARATORS = "_-:|.#"


def carries_id(call_id: Any, sent: str) -> bool:
    """Whether ``call_id`` is the provider's ``sent`` id, or it followed by a separator and more."""
    if not isinstance(call_id, str):
        return False
    return call_id == sent or (call_id.startswith(sent) and call_id[len(sent)] in CALL_ID_SEPARATORS)


def _distinct_ids(seen: Seen) -> List[str]:
    """Each call of a parallel turn has an id of its own, where the provider sent ids or not."""
    if seen.scenario != "parallel-tool-calls" or not seen.got_reply:
        return []
    ids = [getattr(c, "id", None) for c in seen.collected()[2]]
    if len(set(ids)) == len(ids) and all(isinstance(i, str) and i for i in ids):
        return []
    return [
        f"expected each call to have its own non-empty id, got {ids!r} (a result names its call by "
        "id: two calls under one id cannot both be answered)"
    ]


def _parallel_ids(seen: Seen) -> List[str]:
    from ._multiturn import parallel_calls

    if not seen.wire.sends_call_ids:
        return []
    calls = seen.collected()[2]
    problems = []
    for sent in parallel_calls(seen.wire):
        arguments = json.loads(sent.arguments)
        for call in calls:
            if _arguments_of(call) == arguments and not carries_id(getattr(call, "id", None), sent.id):
                problems.append(
                    f"expected the call with arguments {arguments!r} to carry its own id {sent.id!r}, "
                    f"got {getattr(call, 'id', None)!r} (ids and calls were paired up wrongly, or "
                    "glued together)"
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
    if carries_id(call_id, sent):
        return []
    return [
        f"expected the call's id {sent!r} as the provider sent it (or it followed by one of "
        f"{CALL_ID_SEPARATORS!r} and more), got {call_id!r}"
    ]


def _usage(seen: Seen) -> List[str]:
    """The usage the provider reported in this reply; ``None`` where it reported none."""
    if not seen.got_reply:
        return []
    usage = seen.collected()[3]
    generations = seen.generations()
    if generations:
        sent = seen.wire.usage_sent(seen.scenario, generations[0])
    else:
        sent = seen.scenario in seen.wire.reports_usage
    if not sent:
        if usage is None:
            return []
        return [
            f"expected usage None (the provider reported none in this reply), got {usage!r}: "
            "counts the provider never sent are made up, and zeros are counts"
        ]
    if _usage_tuple(usage) == _usage_tuple(FX.usage):
        return []
    return [f"expected usage {FX.usage!r} as the provider reported it, got {usage!r}"]


# -- reasoning the provider returned -----------------------------------------------------------


def _reasoning_kind(item: Any) -> Any:
    kind = getattr(item, "kind", None)
    return getattr(kind, "value", kind)


def _reasoning_sent(seen: Seen) -> Tuple[Any, ...]:
    """The reasoning items the provider sent with the answer, where the case is about them."""
    return tuple(seen.variant.reasoning) if seen.scenario == "reasoning" and seen.got_reply else ()


def _reasoning_got(seen: Seen) -> List[Any]:
    """The reasoning items the backend passed on: the response's, or every chunk's in order."""
    if seen.case.mode == "chat":
        return list(getattr(seen.outcome.response, "reasoning", None) or ())
    items: List[Any] = []
    for chunk in seen.outcome.chunks:
        items.extend(getattr(chunk, "reasoning", None) or ())
    return items


def _reasoning_texts(seen: Seen) -> List[str]:
    """The readable parts of the reasoning sent: thinking text and summary texts."""
    texts: List[str] = []
    for item in _reasoning_sent(seen):
        texts.extend(t for t in (item.text, *item.summary) if t)
    return texts


def _reasoning_mixed_in(seen: Seen, content: Any) -> List[str]:
    """The reasoning texts that turned up inside the answer's text."""
    if not isinstance(content, str):
        return []
    return [text for text in _reasoning_texts(seen) if text in content]


def _without_reasoning(seen: Seen, content: str) -> str:
    for text in _reasoning_mixed_in(seen, content):
        content = content.replace(text, "", 1)
    return content


def _reasoning(seen: Seen) -> List[str]:
    sent = _reasoning_sent(seen)
    if not sent:
        return []
    got = _reasoning_got(seen)
    want_kinds = [_reasoning_kind(r) for r in sent]
    got_kinds = [_reasoning_kind(r) for r in got]
    if got_kinds == want_kinds:
        return []
    where = "ChatResponse.reasoning" if seen.case.mode == "chat" else "StreamChunk.reasoning"
    if not got:
        return [
            f"expected the {len(sent)} reasoning item(s) the provider sent ({want_kinds}) in {where}, "
            "got none: the backend dropped them, and the next turn cannot send them back"
        ]
    return [
        f"expected the reasoning items {want_kinds} in {where}, each once and complete, got "
        f"{len(got)}: {got_kinds} (an item is passed on whole at its end, not per delta, and "
        "keeps the provider's kind)"
    ]


_REASONING_FIELDS = ("text", "signature", "data", "id", "summary")


def _reasoning_exact(seen: Seen) -> List[str]:
    from .wires._turns import reasoning_key

    sent = _reasoning_sent(seen)
    got = _reasoning_got(seen)
    if not sent or [_reasoning_kind(r) for r in got] != [_reasoning_kind(r) for r in sent]:
        return []  # the reasoning check speaks for missing or extra items
    problems = []
    for number, (want, item) in enumerate(zip(sent, got), start=1):
        try:
            same = reasoning_key(want) == reasoning_key(item)
        except (AttributeError, TypeError):
            same = False
        if same:
            continue
        changed = [
            f"{name} {_shown_field(getattr(want, name))} became "
            f"{_shown_field(getattr(item, name, '<missing>'))}"
            for name in _REASONING_FIELDS
            if _field(getattr(want, name)) != _field(getattr(item, name, None))
        ]
        problems.append(
            f"expected reasoning item {number} ({_reasoning_kind(want)}) byte for byte as the provider "
            f"sent it, got it altered: {'; '.join(changed) or repr(item)} (the provider refuses a turn "
            "whose reasoning or signature changed)"
        )
    return problems


def _shown_field(value: Any) -> str:
    """A field for a failure line: whole when short, else its start and its length."""
    if isinstance(value, str) and len(value) > 40:
        return f"{value[:24]!r}... ({len(value)} characters)"
    return repr(_field(value))


def _field(value: Any) -> Any:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _reasoning_apart(seen: Seen) -> List[str]:
    content = seen.collected()[0] if _reasoning_sent(seen) else None
    mixed = _reasoning_mixed_in(seen, content)
    if not mixed:
        return []
    return [
        f"expected the answer {seen.wire.texts.get(seen.scenario)!r} alone as the content, got "
        f"{content!r}, which holds the reasoning text {mixed[0]!r}: keep thinking out of the content "
        "and pass it on as reasoning"
    ]


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


def _error_kinds_of(seen: Seen) -> Tuple[str, ...]:
    """The kinds the backend may report: the variant's, else the scenario's; empty where it must not fail."""
    own = SCENARIOS[seen.scenario].error_kind if seen.scenario in SCENARIOS else None
    return seen.variant.accepted_kinds(own)


def _error_kind_of(seen: Seen) -> Optional[str]:
    kinds = _error_kinds_of(seen)
    return kinds[0] if kinds else None


def _kinds_text(kinds: Tuple[str, ...]) -> str:
    """``'overloaded'``, or ``'overloaded' or 'server_error'``."""
    return " or ".join(repr(k) for k in kinds)


def _failed(seen: Seen) -> bool:
    return bool(_error_kinds_of(seen)) and seen.ended and seen.error is not None


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
        return [f"expected an error with {wants[0]}, got {_describe(seen.error)}"]
    return [
        f"expected an error with {' or '.join(map(str, wants))} (the provider's type and status "
        f"allow each of these kinds, and its message is no contract), got {_describe(seen.error)}"
    ]


def _error_details(seen: Seen) -> List[str]:
    if not _failed(seen):
        return []
    kinds = _error_kinds_of(seen)
    kind = getattr(seen.error, "kind", None)
    # details["kind"] repeats the error's kind; where that kind is wrong, error-kind says so.
    wanted = kind if kind in kinds else _error_kind_of(seen)
    details = getattr(seen.error, "details", _MISSING)
    got = details.get("kind", _MISSING) if isinstance(details, Mapping) else _MISSING
    if got == wanted:
        return []
    shown = "no details" if details is _MISSING else f"details {details!r}"
    return [f'expected details["kind"] == {wanted!r} (the contract\'s details.kind), got {shown}']


def _error_status(seen: Seen) -> List[str]:
    status = seen.reply_status()
    if not _failed(seen) or status is None or status < 400:
        return []
    got = getattr(seen.error, "status", _MISSING)
    if got == status:
        return []
    shown = "no status attribute" if got is _MISSING else repr(got)
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
    """``retry_after`` is the delay the provider sent, on every kind; ``None`` where it sent none."""
    if not _failed(seen):
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
    if seen.scenario != "stream-error" or not seen.ended:
        return []
    content = seen.collected()[0]
    if content == FX.partial_text:
        return []
    return [
        f"expected the text streamed before the failure, {FX.partial_text!r}, to be yielded first, "
        f"got {content!r}"
    ]


# -- a stream or body cut before its end ------------------------------------------------------

#: The kinds a backend may give a connection cut before the provider's terminal event.
#: The cut carries no status and no error type, so nothing in the bytes tells a
#: server's failure from an overloaded server shedding its connections: what a careful
#: client derives is a retryable server_error, and overloaded is as defensible.
CUT_KINDS = ("server_error", "overloaded")


def _cut_error(seen: Seen) -> Optional[BaseException]:
    """The error a backend raised for a cut stream or body, if it raised one."""
    if seen.scenario != "stream-cut" or not seen.ended:
        return None
    return seen.error


def _cut_raised(seen: Seen) -> List[str]:
    if seen.scenario != "stream-cut" or not seen.ended or seen.error is not None:
        return []
    if seen.case.mode == "stream":
        content = seen.collected()[0]
        return [
            f"expected a retryable error once the connection closed before {seen.wire.terminal_event}, "
            f"got a normal end after {len(seen.outcome.chunks)} chunks (text {content!r}): a cut "
            "stream is a failure, never a short success"
        ]
    return [
        "expected a retryable error for a body cut short of its Content-Length, got the reply "
        f"{seen.outcome.response!r}"
    ]


def _cut_retryable(seen: Seen) -> List[str]:
    error = _cut_error(seen)
    if error is None or getattr(error, "retryable", None) is True:
        return []
    return [
        f"expected retryable True on the error for a connection cut short (the same request may well "
        f"succeed), got {_describe(error)}"
    ]


def _cut_kind(seen: Seen) -> List[str]:
    error = _cut_error(seen)
    if error is None:
        return []
    kind, code = getattr(error, "kind", _MISSING), getattr(error, "code", _MISSING)
    if kind in CUT_KINDS and code == ERROR_KINDS[kind].code:
        return []
    wanted = " or ".join(f"{k!r} ({ERROR_KINDS[k].code})" for k in CUT_KINDS)
    return [
        f"expected an error of kind {wanted}, got {_describe(error)}: a cut carries no status or "
        "error type, so either is what a careful client derives, and no other kind"
    ]


def _cut_finish(seen: Seen) -> List[str]:
    if seen.scenario != "stream-cut" or seen.case.mode != "stream":
        return []
    for index, chunk in enumerate(seen.outcome.chunks):
        reason = getattr(chunk, "finish_reason", None)
        if reason is not None:
            return [
                f"expected no finish reason before the error, got {_value(reason)!r} on chunk {index}: "
                f"the turn never reached {seen.wire.terminal_event}, so it did not finish"
            ]
    return []


def _cut_tool_call(seen: Seen) -> List[str]:
    if seen.scenario != "stream-cut" or seen.case.mode != "stream":
        return []
    for index, chunk in enumerate(seen.outcome.chunks):
        calls = list(getattr(chunk, "tool_calls", None) or ())
        if calls:
            return [
                f"expected no tool call before the error, got {calls!r} on chunk {index}: a call is "
                f"complete only once the turn reached {seen.wire.terminal_event}"
            ]
    return []


# -- the requests ------------------------------------------------------------------------------


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
    "tool-turn-content": _tool_turn_content,
    "finish-reason": _finish_reason,
    "text-finish": _text_finish,
    "finish-once": _finish_once,
    "tool-calls": _tool_calls,
    "no-tool-calls": _no_tool_calls,
    "tool-name": _tool_name,
    "tool-arguments": _tool_arguments,
    "call-id": _call_id,
    "distinct-ids": _distinct_ids,
    "usage": _usage,
    "reasoning": _reasoning,
    "reasoning-exact": _reasoning_exact,
    "reasoning-apart": _reasoning_apart,
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
    "cut-raised": _cut_raised,
    "cut-retryable": _cut_retryable,
    "cut-kind": _cut_kind,
    "cut-finish": _cut_finish,
    "cut-tool-call": _cut_tool_call,
    "headers": _headers,
    "headers-later": _headers_later,
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
