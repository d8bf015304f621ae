"""What a correct backend does with one shape, resolved once: :class:`Rule`.

Strategy: a scenario says what a backend does with it (the finish reason a reply ends
with, the error kind a failure carries, the text the wire sends), and a variant says
where its shape differs: finish reasons of its own, other error kinds, two sound
readings, its own text, no usage, a call to a function nobody declared. :func:`rule_of`
puts the two together, once for each variant a case plays, and every check reads the
result through ``Seen.rule``: no check reads a variant's fields or a scenario's table
of its own. The wire pages show :meth:`Rule.describe` in their "a correct backend"
column, so the page and the checks say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Optional, Tuple

from ..scenarios import SCENARIOS
from ..wires._variants import CUT_KINDS, EitherRule

if TYPE_CHECKING:
    from ..wires._base import Variant, Wire

__all__ = ["FINISH", "REPLY_SCENARIOS", "SILENT_AS_CUT", "TEXT_FINISH", "Rule", "rule_of"]

#: Scenarios whose turn ends normally, with a reply the checks read.
REPLY_SCENARIOS = (
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

#: The scenarios whose failure names no cause, so that a careful client may report either
#: of :data:`~conformance.wires._variants.CUT_KINDS`: a connection cut, and a provider
#: silent past the client's read timeout.
SILENT_AS_CUT = ("stream-cut", "stall")

#: The finish reason of the turns that end with their text. They are judged apart from
#: the others (``text-finish`` beside ``finish-reason``), so each table is proven by a
#: bug of its own.
TEXT_FINISH: Dict[str, Tuple[str, ...]] = {"text": ("stop",), "tool-result": ("stop",)}

#: The finish reason each other reply scenario calls for.
FINISH: Dict[str, Tuple[str, ...]] = {
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


@dataclass(frozen=True)
class Rule:
    """What a correct backend does with one shape of one scenario."""

    #: Whether the turn ends with a reply (a reply scenario); else it ends in an error,
    #: or, for ``abort`` and ``cancel``, as the caller ended it.
    reply: bool
    #: The finish reasons a reply may end with; empty where no reply is judged by one.
    finish_reasons: Tuple[str, ...] = ()
    #: The error kinds a failure may carry; empty where the backend must not fail.
    error_kinds: Tuple[str, ...] = ()
    #: Two sound readings: the reply, or one of these errors (and no other).
    either: Optional[EitherRule] = None
    #: Whether a reply shape may end in an error of any of the contract's kinds instead.
    may_fail: bool = False
    #: The text a reply carries; ``""`` where the provider sent none, ``None`` where the
    #: scenario's text is not judged.
    text: Optional[str] = None
    #: A function the request never declared that the shape calls: passed on or dropped,
    #: never a tool turn.
    undeclared_call: str = ""
    #: Whether the shape reports token counts where its scenario does.
    reports_usage: bool = True
    #: Whether the shape reports usage in a stream that did not ask for it.
    usage_unasked: bool = False
    #: What the backend must do with the shape, in words, where the scenario's rule does
    #: not say it.
    must: str = ""

    def describe(self) -> str:
        """The rule in a few words, as the wire pages' "a correct backend" column shows it.

        The text is left to the page's "shape" column, which says what the shape carries.
        """
        kinds = " or ".join(f"`{k}`" for k in self.error_kinds)
        if not self.reply:
            return f"fails: {kinds}" if kinds else "ends as the caller ended it"
        ending = " or ".join(f"`{r}`" for r in self.finish_reasons)
        parts = [f"replies, ending {ending}" if ending else "replies"]
        if self.undeclared_call:
            parts.append(f"the call to `{self.undeclared_call}` passed on or dropped, no tool turn")
        if not self.reports_usage:
            parts.append("no usage")
        if self.usage_unasked:
            parts.append("the usage it sends unasked")
        if self.either is not None:
            errors = " or ".join(f"`{k}`" for k in self.either.error_kinds)
            ends = " or ".join(f"`{r}`" for r in self.either.finish_reasons)
            parts[0] = f"replies, ending {ends}, or fails: {errors}"
        elif self.may_fail:
            parts.append("or fails with any contract kind")
        return "; ".join(parts)


def rule_of(wire: Wire, scenario: str, variant: Variant) -> Rule:
    """The rule for ``variant`` of ``scenario`` on ``wire``: the variant's where it says one, else
    the scenario's."""
    own_kind = SCENARIOS[scenario].error_kind if scenario in SCENARIOS else None
    if scenario in SILENT_AS_CUT:
        kinds = variant.error_kinds or CUT_KINDS
    else:
        kinds = variant.accepted_kinds(own_kind)
    # A first token that comes late but in time is a text turn, judged as one.
    judged = "text" if scenario == "slow-first-token" else scenario
    reply = judged in REPLY_SCENARIOS
    finish = variant.finish_reasons or FINISH.get(judged) or TEXT_FINISH.get(judged, ())
    return Rule(
        reply=reply,
        finish_reasons=finish if reply else (),
        error_kinds=kinds,
        either=variant.either,
        may_fail=variant.may_fail,
        text=wire.texts.get(judged) if variant.text is None else variant.text,
        undeclared_call=variant.undeclared_call,
        reports_usage=variant.reports_usage,
        usage_unasked=variant.usage_unasked,
        must=variant.must,
    )
