"""The migration gate: holds an agent loop to the invariants of a tool turn.

This part gives the gate's deterministic tools (:class:`GateToolset`, which records
every execution in an :class:`ExecutionLog`), the validator of their schemas, and the
tool-call state machine a loop may adopt (:class:`ToolCallTracker`).
"""

from __future__ import annotations

from .log import ExecutionLog, ExecutionRecord, ExecutionStatus, InFlight
from .sandbox import SANDBOX_FILES, Sandbox
from .schema import (
    SchemaViolation,
    UnsupportedSchemaError,
    check_schema,
    gemini_schema,
    strict_problems,
    validate,
)
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
from .tools import ALWAYS_ERROR, TOOLS, GateTool, GateToolset, tool_specs

__all__ = [
    "ALWAYS_ERROR",
    "AlreadyExecuted",
    "CallCancelled",
    "CallEvent",
    "CallState",
    "ExecutionLog",
    "ExecutionRecord",
    "ExecutionStatus",
    "GateTool",
    "GateToolset",
    "InFlight",
    "REFUSALS",
    "SANDBOX_FILES",
    "Sandbox",
    "SchemaViolation",
    "TOOLS",
    "TRANSITIONS",
    "ToolCallStateError",
    "ToolCallTracker",
    "TrackedCall",
    "Transition",
    "UnsupportedSchemaError",
    "check_schema",
    "gemini_schema",
    "strict_problems",
    "tool_specs",
    "validate",
]
