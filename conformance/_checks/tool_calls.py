"""Tool calls: each complete call once, with the provider's name, arguments and id; none kept of a cut one.

Which turns hold calls is three tables, and each reply scenario is in exactly one:
the tool turns (:data:`TOOL_TURNS`), the turns that hold none
(:data:`_NO_CALL_TURNS`), and the turns whose calls checks of their own judge
(:data:`_OWN_CALL_RULE`): the call cut off by the token limit (``tool-calls``), and
the call whose arguments do not parse, which comes back whole with its raw text in
``unparsed_arguments`` and ``{}`` as its arguments (the ``unparsed-*`` checks).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional

from ..fixture import CONFORMANCE_FIXTURE as FX
from ._seen import MISSING, Check, Seen

__all__ = ["CALL_ID_SEPARATORS", "ROWS", "TOOL_TURNS", "carries_id"]


#: The turns whose reply is the call alone: the content must be what the provider sent
#: with it (:attr:`Wire.texts`), empty where it sent none.
TOOL_TURNS = ("tool-call", "tool-call-with-stop", "parallel-tool-calls")


def _tool_calls(seen: Seen) -> List[str]:
    """The number of calls on a tool turn; none kept of a call cut off by the token limit."""
    if not seen.got_reply:
        return []
    calls = seen.collected()[2]
    undeclared = seen.rule.undeclared_call
    if undeclared:
        names = [getattr(c, "name", None) for c in calls]
        if names in ([], [undeclared]):
            return []
        return [
            f"expected the call to {undeclared!r}, a function the request never declared, passed "
            f"on as the provider sent it or dropped, got {len(calls)} calls named {names!r}"
        ]
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


#: The turns that hold no call: a reply scenario is listed here, or in :data:`TOOL_TURNS`,
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
    """The calls of a tool turn whose count is right; empty otherwise (``tool-calls`` says why).

    A shape that calls an undeclared function has no get_weather call to judge: the
    ``tool-calls`` check holds its call to the one sent.
    """
    if not seen.got_reply or seen.scenario not in TOOL_TURNS or seen.rule.undeclared_call:
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
    from .._multiturn import parallel_calls

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
    from ..wires._unparsed import unparsed_text

    sent = unparsed_text(seen.variant.name)
    got = getattr(calls[0], "unparsed_arguments", MISSING)
    if got == sent:
        return []
    shown = "no unparsed_arguments attribute" if got is MISSING else repr(got)
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


def _parses(text: Any) -> bool:
    """Whether ``text`` is the JSON text of an object: arguments that parsed."""
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError):
        return False


def _unparsed_only_broken(seen: Seen) -> List[str]:
    """``unparsed_arguments`` is ``None`` on every call whose arguments parsed.

    Judged by the marked text itself: text that is a JSON object parsed, and marking it
    makes a loop refuse a sound call. Text that does not parse (a call cut off by the
    token limit, two calls' fragments run together) may carry the mark; whether such a
    call should have been handed on at all is other checks' to say (``tool-calls``).
    """
    if not seen.got_reply:
        return []
    calls = seen.collected()[2]
    if seen.scenario == "corrupt-arguments":
        return []  # its one call's text does not parse: the unparsed-* checks judge it
    for call in calls:
        raw = getattr(call, "unparsed_arguments", None)
        if raw is not None and _parses(raw):
            return [
                f"expected unparsed_arguments None on the {getattr(call, 'name', None)} call whose "
                f"arguments parsed ({_arguments_of(call)!r}), got {raw!r}: it marks a call whose "
                "text did not parse, and a loop that follows the contract refuses every call "
                "that carries it"
            ]
    return []


#: This family's rows of :data:`~conformance._checks.CHECKS`.
ROWS: Dict[str, Check] = {
    "tool-calls": _tool_calls,
    "no-tool-calls": _no_tool_calls,
    "tool-name": _tool_name,
    "tool-arguments": _tool_arguments,
    "call-id": _call_id,
    "distinct-ids": _distinct_ids,
    "unparsed-call-kept": _unparsed_call_kept,
    "unparsed-arguments": _unparsed_arguments,
    "unparsed-not-repaired": _unparsed_not_repaired,
    "unparsed-only-broken": _unparsed_only_broken,
}
