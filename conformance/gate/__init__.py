"""The migration gate: holds an agent loop to the invariants of a tool turn.

This part gives the gate's deterministic tools (:class:`GateToolset`, which records
every execution in an :class:`ExecutionLog`), the validator of their schemas, the
tool-call state machine a loop may adopt (:class:`ToolCallTracker`), and record and
replay: the loopback :class:`Recorder` that writes chunk-exact :class:`Fixture` files
from a real provider, and the :class:`ReplayWire` that serves them.
"""

from __future__ import annotations

from .fixture_format import Fixture, Stamp
from .log import ExecutionLog, ExecutionRecord, ExecutionStatus, InFlight
from .record import Recorder
from .replay import ReplayWire
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
    "Fixture",
    "GateTool",
    "GateToolset",
    "InFlight",
    "REFUSALS",
    "Recorder",
    "ReplayWire",
    "SANDBOX_FILES",
    "Sandbox",
    "SchemaViolation",
    "Stamp",
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
