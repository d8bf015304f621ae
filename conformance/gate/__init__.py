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
from .sandbox import SANDBOX_FILES, Sandbox
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
from .tools import ALWAYS_ERROR, TOOLS, GateTool, GateToolset, tool_specs

__all__ = [
    "ALWAYS_ERROR",
    "AgentLoop",
    "AgentLoopCase",
    "AgentLoopConformanceTestCase",
    "AgentLoopTarget",
    "AlreadyExecuted",
    "AsyncAgentLoop",
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
]
