"""A turn that ends normally: the reply came, with the provider's text, finish reason and usage.

The finish reasons each reply may end with are its shape's rule (``Seen.rule``, from
the tables of :mod:`._rule`); the turns that end with their text are judged by a
check of their own (``text-finish``), so that each table is proven by a bug of its
own. In a stream the finish reason comes once, and on the last chunk that carries
anything. The usage is the provider's, and ``None`` where it reported none.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..contract import ERROR_KINDS
from ._rule import TEXT_FINISH
from ._seen import REPLY_SCENARIOS, Check, Seen, describe, value_of
from .reasoning import reasoning_mixed_in, without_reasoning
from .tool_calls import TOOL_TURNS

__all__ = ["ROWS"]


def _reply(seen: Seen) -> List[str]:
    if seen.scenario not in REPLY_SCENARIOS or not seen.ended:
        return []
    if seen.case.scenario == "slow-first-token" and seen.error is not None:
        return []  # a reply that came in time, given up on: in-time says so, with the timeout
    either = seen.rule.either
    if seen.error is not None and either is not None:
        # Two sound readings: the reply its scenario calls for, or one of these errors.
        got = {name: getattr(seen.error, name, "<missing>") for name in ("kind", "code", "retryable")}
        wants = [
            {"kind": row.kind, "code": row.code, "retryable": row.retryable}
            for row in (ERROR_KINDS[k] for k in either.error_kinds)
        ]
        if got in wants:
            return []
        finish = " or ".join(repr(r) for r in either.finish_reasons)
        return [
            f"expected a reply ending {finish}, or an error with {' or '.join(map(str, wants))} (the "
            f"shape's bytes allow either reading, and no other), got {describe(seen.error)}"
        ]
    if seen.error is not None and seen.rule.may_fail:
        # The shape carries nothing a caller can use: failing is sound, in the contract's terms.
        if getattr(seen.error, "kind", None) in ERROR_KINDS:
            return []
        return [
            "expected a reply, or an error carrying one of the contract's kinds "
            f"({', '.join(ERROR_KINDS)}), got {describe(seen.error)}"
        ]
    if seen.error is not None:
        if seen.scenario == "corrupt-arguments":
            return [
                "expected a reply carrying the call with its raw argument text (arguments that do "
                "not parse are the caller's to answer, not a failure of the turn), got "
                f"{describe(seen.error)}"
            ]
        return [f"expected a reply, got {describe(seen.error)}"]
    if seen.case.mode == "chat" and seen.outcome.response is None:
        return ["expected a ChatResponse, got None"]
    return []


def _content(seen: Seen) -> List[str]:
    expected = seen.rule.text
    if not seen.got_reply or expected is None:
        return []
    content = seen.collected()[0]
    # None and "" both say "no text", where the provider sent none.
    if content == expected or (not expected and content is None):
        return []
    if reasoning_mixed_in(seen, content) and without_reasoning(seen, content) == expected:
        return []  # the answer is whole; the reasoning-apart check names what was added to it
    from .retries import repeated_text

    if repeated_text(seen) is not None:
        return []  # the answer is whole; retry-no-repeat names what the failed attempt added
    if seen.scenario == "truncated-tool-call":
        return [f"expected the text sent before the cut, {expected!r}, got {content!r}"]
    return [f"expected the text {expected!r}, got {content!r}"]


def _tool_turn_content(seen: Seen) -> List[str]:
    # A call whose arguments do not parse still makes a tool turn: its content is the model's too.
    if not seen.got_reply or seen.scenario not in (*TOOL_TURNS, "corrupt-arguments"):
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


def _finish_problem(seen: Seen, allowed: Tuple[str, ...]) -> List[str]:
    finish = seen.collected()[1]
    if finish in allowed:
        return []
    said = " (the provider said stop)" if seen.scenario == "tool-call-with-stop" else ""
    undeclared = seen.rule.undeclared_call
    if undeclared and finish == "tool_calls":
        said = (
            f" (a tool_calls turn has a loop run {undeclared}, a function the request never "
            "declared)"
        )
    wanted = " or ".join(f'"{a}"' for a in allowed)
    return [f"expected finish_reason {wanted}{said}, got {finish!r}"]


def _finish_reason(seen: Seen) -> List[str]:
    # The turns that end with their text are text-finish's, their shapes' own reasons too.
    if not seen.got_reply or seen.scenario in TEXT_FINISH:
        return []
    allowed = seen.rule.finish_reasons
    return _finish_problem(seen, allowed) if allowed else []


def _text_finish(seen: Seen) -> List[str]:
    # A shape with finish reasons of its own (a paused turn's "stop" or "length") is
    # judged by them.
    if not seen.got_reply or seen.scenario not in TEXT_FINISH:
        return []
    return _finish_problem(seen, seen.rule.finish_reasons)


def _finish_once(seen: Seen) -> List[str]:
    """In a stream, the finish reason comes once, on the last chunk that carries one."""
    if seen.case.mode != "stream" or not seen.ended:
        return []
    carrying = [
        (index, value_of(chunk.finish_reason))
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


def _carried(chunk: Any) -> str:
    """What a chunk carries, in words (text, calls, usage, reasoning); empty where nothing."""
    parts = []
    text = getattr(chunk, "content", "")
    if text:
        parts.append(f"the text {text!r}")
    calls = list(getattr(chunk, "tool_calls", None) or ())
    if calls:
        parts.append(f"{len(calls)} tool call{'s' if len(calls) > 1 else ''}")
    if getattr(chunk, "usage", None) is not None:
        parts.append("the usage")
    if getattr(chunk, "reasoning", None):
        parts.append("reasoning")
    return ", ".join(parts)


def _finish_last(seen: Seen) -> List[str]:
    """In a stream, the one finish reason sits on the last chunk that carries anything."""
    if seen.case.mode != "stream" or not seen.ended:
        return []
    chunks = seen.outcome.chunks
    carrying = [i for i, chunk in enumerate(chunks) if getattr(chunk, "finish_reason", None) is not None]
    if len(carrying) != 1:
        return []  # none, or more than one: finish-once speaks of that
    at = carrying[0]
    for later in range(at + 1, len(chunks)):
        what = _carried(chunks[later])
        if what:
            return [
                f"expected the finish reason on the last chunk that carries anything, got "
                f"{value_of(chunks[at].finish_reason)!r} on chunk {at} and {what} after it on chunk "
                f"{later}: a consumer that stops at the finish reason loses the rest of the turn; "
                "set it on the last chunk you yield"
            ]
    return []


def _usage_tuple(usage: Any) -> Optional[Tuple[Any, Any, Any]]:
    if usage is None:
        return None
    return (
        getattr(usage, "input_tokens", None),
        getattr(usage, "output_tokens", None),
        getattr(usage, "total_tokens", None),
    )


def _usage_on_failure(seen: Seen) -> List[str]:
    """A stream that failed on a turn that reports no usage carries none on its chunks."""
    if seen.case.mode != "stream" or not seen.ended or seen.error is None:
        return []
    if seen.scenario in seen.wire.reports_usage:
        return []
    for index, chunk in enumerate(seen.outcome.chunks):
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            return [
                f"expected usage None on every chunk of a turn that failed (the provider reported "
                f"none for it), got {usage!r} on chunk {index}: counts the provider never sent are "
                "made up, and zeros are counts"
            ]
    return []


def _usage(seen: Seen) -> List[str]:
    """The usage the provider reported in this reply; ``None`` where it reported none."""
    if not seen.got_reply:
        return _usage_on_failure(seen)
    usage = seen.collected()[3]
    generations = seen.generations()
    if generations:
        sent = seen.wire.usage_sent(seen.scenario, generations[0])
        # A shape that reports usage unasked (Mistral's, Groq's) did send it.
        sent = sent or (seen.rule.usage_unasked and seen.scenario in seen.wire.reports_usage)
    else:
        sent = seen.scenario in seen.wire.reports_usage
    sent = sent and seen.rule.reports_usage
    if not sent:
        if usage is None:
            return []
        return [
            f"expected usage None (the provider reported none in this reply), got {usage!r}: "
            "counts the provider never sent are made up, and zeros are counts"
        ]
    want = seen.wire.reported_usage(seen.scenario, seen.variant.name)
    if _usage_tuple(usage) == _usage_tuple(want):
        return []
    return [f"expected usage {want!r} as the provider reported it, got {usage!r}"]


#: This family's rows of :data:`~conformance._checks.CHECKS`.
ROWS: Dict[str, Check] = {
    "reply": _reply,
    "content": _content,
    "tool-turn-content": _tool_turn_content,
    "finish-reason": _finish_reason,
    "text-finish": _text_finish,
    "finish-once": _finish_once,
    "finish-last": _finish_last,
    "usage": _usage,
}
