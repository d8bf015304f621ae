"""Reasoning the provider returned: every item passed on, whole, byte for byte, and apart from the answer.

The ``reasoning`` scenario's variants send thinking blocks with their signatures,
redacted blocks and encrypted items; the next turn can only send them back if the
backend kept each one as the provider sent it, and kept its text out of the content.
The ``tool-result`` shape ``reasoning-then-call`` sends reasoning before a call on the
turn before the case's own, which the next turn must send back with the call: the
same checks read what the backend returned on that turn.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ._seen import Check, Seen

__all__ = ["ROWS", "reasoning_mixed_in", "without_reasoning"]


def _reasoning_kind(item: Any) -> Any:
    kind = getattr(item, "kind", None)
    return getattr(kind, "value", kind)


def _on_tool_turn(seen: Seen) -> bool:
    """Whether the reasoning the case is about came on the tool turn before its own (a
    ``tool-result`` shape whose earlier turn carries reasoning), and that turn ended."""
    return seen.scenario == "tool-result" and seen.outcome.earlier_reasoning is not None


def _reasoning_sent(seen: Seen) -> Tuple[Any, ...]:
    """The reasoning items the provider sent with the answer (or with the call, on the
    earlier tool turn), where the case is about them."""
    if _on_tool_turn(seen):
        return tuple(seen.variant.reasoning)
    return tuple(seen.variant.reasoning) if seen.scenario == "reasoning" and seen.got_reply else ()


def _where(seen: Seen) -> str:
    """Where the backend puts the reasoning the case is about, for a failure line."""
    where = "ChatResponse.reasoning" if seen.case.mode == "chat" else "StreamChunk.reasoning"
    return f"{where} of the get_weather call's turn" if _on_tool_turn(seen) else where


def _reasoning_got(seen: Seen) -> List[Any]:
    """The reasoning items the backend passed on: the response's, or every chunk's in order."""
    if _on_tool_turn(seen):
        return list(seen.outcome.earlier_reasoning or ())
    if seen.case.mode == "chat":
        return list(getattr(seen.outcome.response, "reasoning", None) or ())
    items: List[Any] = []
    for chunk in seen.outcome.chunks:
        items.extend(getattr(chunk, "reasoning", None) or ())
    return items


def _reasoning_texts(seen: Seen) -> List[str]:
    """The readable parts of the reasoning sent with the answer: thinking text and summary
    texts (none where it came on an earlier turn: the answer is the case's own turn's)."""
    if _on_tool_turn(seen):
        return []
    texts: List[str] = []
    for item in _reasoning_sent(seen):
        texts.extend(t for t in (item.text, *item.summary) if t)
    return texts


def reasoning_mixed_in(seen: Seen, content: Any) -> List[str]:
    """The reasoning texts that turned up inside the answer's text."""
    if not isinstance(content, str):
        return []
    return [text for text in _reasoning_texts(seen) if text in content]


def without_reasoning(seen: Seen, content: str) -> str:
    for text in reasoning_mixed_in(seen, content):
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
    where = _where(seen)
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
    from ..wires._turns import reasoning_key

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
    mixed = reasoning_mixed_in(seen, content)
    if not mixed:
        return []
    return [
        f"expected the answer {seen.wire.texts.get(seen.scenario)!r} alone as the content, got "
        f"{content!r}, which holds the reasoning text {mixed[0]!r}: keep thinking out of the content "
        "and pass it on as reasoning"
    ]


def _calls_in_script_order(seen: Seen) -> List[Any]:
    """The reply's calls, in the order the provider sent them: parallel calls are matched
    to the script by their arguments (a backend may return them in another order)."""
    calls = list(seen.collected()[2])
    if seen.scenario != "parallel-tool-calls":
        return calls
    from ..fixture import CONFORMANCE_FIXTURE as FX

    ordered = []
    for arguments in FX.parallel_arguments:
        match = [c for c in calls if dict(getattr(c, "arguments", None) or {}) == dict(arguments)]
        if len(match) != 1:
            return []  # tool-arguments says what is wrong with them
        ordered.append(match[0])
    return ordered


def _call_reasoning(seen: Seen) -> List[str]:
    """Each call carries the reasoning the provider tied to it, byte for byte."""
    if not seen.got_reply:
        return []
    tied = seen.wire.tied_reasoning(seen.scenario, seen.variant.name)
    if not tied:
        return []
    calls = _calls_in_script_order(seen)
    if len(calls) != len(tied):
        return []  # tool-calls says how many came
    from ..wires._script import reasoning_key

    problems = []
    for position, (call, want) in enumerate(zip(calls, tied)):
        got = tuple(getattr(call, "reasoning", None) or ())
        try:
            same = [reasoning_key(r) for r in want] == [reasoning_key(r) for r in got]
        except (AttributeError, TypeError, ValueError):
            same = False
        if not same:
            problems.append(
                f"expected call {position + 1} ({getattr(call, 'name', None)} "
                f"{dict(getattr(call, 'arguments', None) or {})!r}) to carry the reasoning the provider "
                f"tied to it, byte for byte, {list(want)!r}, got {list(got)!r}: the provider refuses "
                "the call sent back without it (Gemini: \"Function call is missing a "
                "thought_signature\")"
            )
    return problems


#: This family's rows of :data:`~conformance._checks.CHECKS`.
ROWS: Dict[str, Check] = {
    "reasoning": _reasoning,
    "reasoning-exact": _reasoning_exact,
    "reasoning-apart": _reasoning_apart,
    "call-reasoning": _call_reasoning,
}
