"""The migration gate: holds an agent loop to the invariants of a tool turn.

The agent-loop suite holds a loop of one's own to the gate's stages: subclass
:class:`AgentLoopConformanceTestCase` (or build an :class:`AgentLoopTarget` and run
:func:`agent_loop_cases`); :class:`ReferenceLoop` is a loop that passes them all.
This part also gives the gate's deterministic tools (:class:`GateToolset`, which records
every execution in an :class:`ExecutionLog`), the validator of their schemas, the
tool-call state machine a loop may adopt (:class:`ToolCallTracker`), and record and
replay: the loopback :class:`Recorder` that writes chunk-exact :class:`Fixture` files
from a real provider, and the :class:`ReplayWire` that serves them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:
    from .cases import AgentLoopCase, agent_loop_cases
    from .fixture_format import Fixture, Stamp
    from .log import (
        REQUEST_ID_HEADERS,
        ExecutionLog,
        ExecutionRecord,
        ExecutionStatus,
        InFlight,
        RequestRecord,
        request_records,
    )
    from .loop import USAGE_NOT_REPORTED, AgentLoop, AgentLoopTarget, AsyncAgentLoop, LoopResult, LoopTask
    from .record import Recorder
    from .reference_loop import ReferenceLoop
    from .replay import ReplayWire
    from .sandbox import SANDBOX_FILES, Journal, JournalEntry, Sandbox
    from .schema import (
        SchemaViolation,
        UnsupportedSchemaError,
        check_schema,
        gemini_schema,
        strict_problems,
        validate,
    )
    from .stages import STAGES, Stage
    from .state import (
        REFUSALS,
        TRANSITIONS,
        AlreadyExecuted,
        CallCancelled,
        CallEvent,
        CallState,
        ToolCallStateError,
        ToolCallTracker,
        TrackedCall,
        Transition,
    )
    from .testcase import AgentLoopConformanceTestCase
    from .tools import (
        ALWAYS_ERROR,
        BASE_TOOLS,
        IDEMPOTENCY_KEY,
        TOOLS,
        GateTool,
        GateToolset,
        tool_specs,
        write_key,
    )

#: Each public name, and the module of this package that defines it: imported on first use,
#: so that ``import conformance.gate`` (a test module naming the mixin) loads neither
#: asyncio nor ssl, which the recorder, the replay and the loop driver need only once at work.
_EXPORTS: Dict[str, str] = {
    "ALWAYS_ERROR": "tools",
    "AgentLoop": "loop",
    "AgentLoopCase": "cases",
    "AgentLoopConformanceTestCase": "testcase",
    "AgentLoopTarget": "loop",
    "AlreadyExecuted": "state",
    "AsyncAgentLoop": "loop",
    "BASE_TOOLS": "tools",
    "CallCancelled": "state",
    "CallEvent": "state",
    "CallState": "state",
    "ExecutionLog": "log",
    "ExecutionRecord": "log",
    "ExecutionStatus": "log",
    "Fixture": "fixture_format",
    "GateTool": "tools",
    "GateToolset": "tools",
    "IDEMPOTENCY_KEY": "tools",
    "InFlight": "log",
    "Journal": "sandbox",
    "JournalEntry": "sandbox",
    "LoopResult": "loop",
    "LoopTask": "loop",
    "REFUSALS": "state",
    "REQUEST_ID_HEADERS": "log",
    "Recorder": "record",
    "ReferenceLoop": "reference_loop",
    "ReplayWire": "replay",
    "RequestRecord": "log",
    "SANDBOX_FILES": "sandbox",
    "STAGES": "stages",
    "Sandbox": "sandbox",
    "SchemaViolation": "schema",
    "Stage": "stages",
    "Stamp": "fixture_format",
    "TOOLS": "tools",
    "TRANSITIONS": "state",
    "ToolCallStateError": "state",
    "ToolCallTracker": "state",
    "TrackedCall": "state",
    "Transition": "state",
    "USAGE_NOT_REPORTED": "loop",
    "UnsupportedSchemaError": "schema",
    "agent_loop_cases": "cases",
    "check_schema": "schema",
    "gemini_schema": "schema",
    "request_records": "log",
    "strict_problems": "schema",
    "tool_specs": "tools",
    "validate": "schema",
    "write_key": "tools",
}


__all__ = [
    "ALWAYS_ERROR",
    "AgentLoop",
    "AgentLoopCase",
    "AgentLoopConformanceTestCase",
    "AgentLoopTarget",
    "AlreadyExecuted",
    "AsyncAgentLoop",
    "BASE_TOOLS",
    "CallCancelled",
    "CallEvent",
    "CallState",
    "ExecutionLog",
    "ExecutionRecord",
    "ExecutionStatus",
    "Fixture",
    "GateTool",
    "GateToolset",
    "IDEMPOTENCY_KEY",
    "InFlight",
    "Journal",
    "JournalEntry",
    "LoopResult",
    "LoopTask",
    "REFUSALS",
    "REQUEST_ID_HEADERS",
    "Recorder",
    "ReferenceLoop",
    "ReplayWire",
    "RequestRecord",
    "SANDBOX_FILES",
    "STAGES",
    "Sandbox",
    "SchemaViolation",
    "Stage",
    "Stamp",
    "TOOLS",
    "TRANSITIONS",
    "ToolCallStateError",
    "ToolCallTracker",
    "TrackedCall",
    "Transition",
    "USAGE_NOT_REPORTED",
    "UnsupportedSchemaError",
    "agent_loop_cases",
    "check_schema",
    "gemini_schema",
    "request_records",
    "strict_problems",
    "tool_specs",
    "validate",
    "write_key",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
