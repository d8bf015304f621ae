"""A stage's data: :class:`Step`, what a script sees, and :class:`Stage`, one row of the stage table.

Apart from the table itself (``stages``) and its fault rows (``faults``) so that both
build their rows from these two types, and neither has to be imported first: the types
sit a floor below the tables that use them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Tuple

from ..contract import Reasoning, ToolChoice
from ..wires._turns import ScriptedCall, ScriptedTurn

if TYPE_CHECKING:
    from ..wires._base import Wire
    from ..wires._turns import History

__all__ = ["LOOP_MODES", "Stage", "Step"]

LOOP_MODES = ("chat", "stream")


@dataclass
class Step:
    """One generation request of a stage's conversation, as its script sees it.

    ``index`` counts the generation requests (0 for the first); ``history`` is what
    the loop sent. :meth:`call` makes a call with an id shaped like the wire's own,
    the same on every run; :meth:`final` is the text turn that quotes, for every call
    the model made so far, the fixture id of its result where it came back correlated.
    """

    index: int
    wire: Wire
    stage: str
    history: History
    max_requests: int
    quote: Callable[[], str]
    reasoning: Tuple[Reasoning, ...] = ()
    call_reasoning: Tuple[Reasoning, ...] = ()
    #: Set by a script that wants its stream held: (call position, "before-last" | "cancel").
    hold: Optional[Tuple[int, str]] = None
    #: Set by a script that answers this request with a fault instead of the turn
    #: (a name of :data:`~conformance.gate._fault_replies.FAULT_REPLIES`).
    fault: Optional[str] = None

    def call(
        self,
        name: str,
        arguments: Any,
        position: int = 0,
        fragments: Tuple[str, ...] = (),
        reasoning: Tuple[Reasoning, ...] = (),
    ) -> ScriptedCall:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        call_id = self.wire.scripted_call_id(name, f"gate/{self.stage}/{self.index}/{position}")
        return ScriptedCall(call_id, name, text, fragments, reasoning)

    def turn(self, *calls: ScriptedCall, interleave: bool = False) -> ScriptedTurn:
        return ScriptedTurn(calls=calls, interleave=interleave, seed=f"gate/{self.stage}/{self.index}")

    def final(self) -> ScriptedTurn:
        return ScriptedTurn(text=self.quote(), seed=f"gate/{self.stage}/{self.index}")


@dataclass(frozen=True)
class Stage:
    """One row of the stage table."""

    name: str
    must: str
    hint: str
    prompt: str
    script: Callable[[Step], ScriptedTurn]
    tool_choice: Optional[ToolChoice] = None
    #: The tools the model calls, in the order it calls them ("" for none).
    tools_called: Tuple[str, ...] = ()
    #: The model keeps calling until the loop's budget: the loop must stop there.
    budget: bool = False
    #: The caller aborts during the first turn.
    cancel: bool = False
    #: ... not in the stream but while the turn's first call (a ``delayed_value``) runs.
    abort_in_tool: bool = False
    #: The model's tool turn carries reasoning that must come back.
    reasoning: bool = False
    #: Exactly this many generation requests, where the stage fixes it.
    requests: Optional[int] = None
    modes: Tuple[str, ...] = LOOP_MODES
    notes: Mapping[str, str] = field(default_factory=dict)
    #: A fault stage: the provider breaks the conversation at a protocol event
    #: (the table is in ``faults``); empty for the stages above.
    fault: str = ""
    #: At the fault the loop may recover, or stop with a useful error or
    #: ``LoopResult(stopped="budget")``; otherwise it must carry on to the final text. In a
    #: stage without a fault (a turn the provider ended), the loop may raise an error that
    #: says why instead of returning the turn.
    may_stop: bool = False
    #: The task's ``max_seconds`` where the stage sets its own (shorter) budget.
    max_seconds: Optional[float] = None
    #: Set on an opt-in stress stage, which plays what the format allows but no provider
    #: sends: why (the sentence its skip quotes). It runs only where the target names it
    #: in ``stress``.
    stress: str = ""
    #: Tools the task offers beside the base four (the write tool, where the stage needs it).
    extra_tools: Tuple[str, ...] = ()
