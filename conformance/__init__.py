"""Hold an LLM backend to the contract every good backend meets.

The backend runs against a fake provider that speaks each provider's real wire
format; one case per scenario and mode checks what it returned, raised and sent.
"""

from __future__ import annotations

from .cases import BackendConformanceTarget, ConformanceAbort, ConformanceCase, backend_conformance_cases
from .contract import (
    ERROR_KINDS,
    AbortController,
    AbortSignal,
    ChatRequest,
    ChatResponse,
    ErrorKind,
    FinishReason,
    LLMError,
    Message,
    StreamChunk,
    ToolCall,
    ToolSpec,
    Usage,
)
from .encoders import aws_event_stream_message, ndjson, sse
from .errors import ConformanceError, ProviderInputError, TargetDefinitionError
from .fixture import CONFORMANCE_FIXTURE, ConformanceFixture, conformance_request
from .provider import FakeProvider, HangReply, JsonReply, RecordedRequest, StreamReply, start_fake_provider
from .scenarios import MODES, SCENARIOS, Scenario
from .testcase import BackendConformanceTestCase
from .wires import (
    WIRES,
    Wire,
    anthropic_wire,
    bedrock_converse_wire,
    gemini_wire,
    ollama_wire,
    openai_chat_wire,
    openai_responses_wire,
)

__all__ = [
    # the contract
    "ERROR_KINDS",
    "AbortController",
    "AbortSignal",
    "ChatRequest",
    "ChatResponse",
    "ErrorKind",
    "FinishReason",
    "LLMError",
    "Message",
    "StreamChunk",
    "ToolCall",
    "ToolSpec",
    "Usage",
    # the fixture and the scenarios
    "CONFORMANCE_FIXTURE",
    "MODES",
    "SCENARIOS",
    "ConformanceFixture",
    "Scenario",
    "conformance_request",
    # running cases
    "BackendConformanceTarget",
    "BackendConformanceTestCase",
    "ConformanceAbort",
    "ConformanceCase",
    "backend_conformance_cases",
    # wires
    "WIRES",
    "Wire",
    "anthropic_wire",
    "bedrock_converse_wire",
    "gemini_wire",
    "ollama_wire",
    "openai_chat_wire",
    "openai_responses_wire",
    # the fake provider and its encoders
    "FakeProvider",
    "HangReply",
    "JsonReply",
    "RecordedRequest",
    "StreamReply",
    "aws_event_stream_message",
    "ndjson",
    "sse",
    "start_fake_provider",
    # errors
    "ConformanceError",
    "ProviderInputError",
    "TargetDefinitionError",
]
