"""What the loop adapters share: running a tool through the gate's toolset, the abort, the budget.

Strategy: a framework's agent loop is used as its documentation shows, with the
gate's tools declared by their JSON schemas; each tool's implementation hands the
call to the task's toolset (:meth:`GateToolset.aexecute`), which runs it and records
it under the call's id, so the gate sees every execution the framework makes. What
the framework does around that (which calls it runs, when, how often, what it sends
back, how it ends) is what the table judges. The run is raced against the task's
abort signal with the kit's :func:`race_abort`; the framework's own retries are off
and its client's timeout is the task's time budget.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Optional, TypeVar

from conformance import ToolCall, ToolError, ToolResult, race_abort
from conformance.gate import LoopResult, LoopTask

__all__ = ["budget_result", "run_tool", "until_abort"]

T = TypeVar("T")


async def run_tool(task: LoopTask, call_id: str, name: str, arguments: Any) -> ToolResult:
    """The call run through the task's toolset; arguments that are not a JSON object are refused unrun."""
    if not isinstance(arguments, dict):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError as exc:
            return ToolResult(
                call_id, name, error=ToolError("invalid_arguments", f"the arguments are not JSON: {exc}")
            )
        if not isinstance(arguments, dict):
            return ToolResult(
                call_id, name, error=ToolError("invalid_arguments", "the arguments are not a JSON object")
            )
    return await task.toolset.aexecute(ToolCall(call_id, name, arguments), signal=task.signal)


async def until_abort(task: LoopTask, work: Awaitable[T]) -> T:
    """``work`` unless the task's signal fires first: then the signal's reason is raised."""
    return await race_abort(work, task.signal)


def budget_result(text: str = "") -> LoopResult:
    """How a run ends that stopped at the framework's own turn limit."""
    return LoopResult(text, "stop", stopped="budget")


def text_result(text: Optional[str]) -> LoopResult:
    return LoopResult(str(text or ""), "stop")
