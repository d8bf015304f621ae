"""Hold an LLM backend to the contract every good backend meets.

The backend runs against a fake provider that speaks each provider's real wire
format; one case per scenario and mode checks what it returned, raised and sent.

The names below are imported on first use, so ``import conformance`` costs next to
nothing and loads neither asyncio nor h2 until a case or the provider needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:
    from .abort import (
        race_abort,
        race_abort_iter,
        shutdown_on_abort,
        shutdown_socket,
    )
    from .backend import (
        AsyncChatBackend,
        ChatBackend,
    )
    from .cases import (
        BackendConformanceTarget,
        ConformanceAbort,
        ConformanceCase,
        backend_conformance_cases,
    )
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
        Reasoning,
        ReasoningKind,
        StreamChunk,
        ToolCall,
        ToolChoice,
        ToolError,
        ToolResult,
        ToolSpec,
        Usage,
    )
    from .encoders import (
        aws_event_stream_message,
        ndjson,
        sse,
    )
    from .errors import (
        ConformanceError,
        ProviderInputError,
        TargetDefinitionError,
    )
    from .fixture import (
        CONFORMANCE_FIXTURE,
        ConformanceFixture,
        conformance_request,
    )
    from .provider import (
        FakeProvider,
        HangReply,
        JsonReply,
        RecordedRequest,
        StreamReply,
        start_fake_provider,
    )
    from .reference import (
        provider_error,
    )
    from .scenarios import (
        MODES,
        SCENARIOS,
        Scenario,
    )
    from .testcase import (
        BackendConformanceTestCase,
    )
    from .wires import (
        WIRES,
        Wire,
        anthropic_vertex_wire,
        anthropic_wire,
        azure_openai_chat_wire,
        azure_openai_responses_wire,
        bedrock_converse_wire,
        bedrock_invoke_wire,
        cohere_wire,
        gemini_vertex_wire,
        gemini_wire,
        ollama_wire,
        openai_chat_wire,
        openai_responses_wire,
    )

#: Where each public name lives.
_EXPORTS: Dict[str, str] = {
    "AbortController": "contract",
    "AbortSignal": "contract",
    "AsyncChatBackend": "backend",
    "BackendConformanceTarget": "cases",
    "BackendConformanceTestCase": "testcase",
    "CONFORMANCE_FIXTURE": "fixture",
    "ChatBackend": "backend",
    "ChatRequest": "contract",
    "ChatResponse": "contract",
    "ConformanceAbort": "cases",
    "ConformanceCase": "cases",
    "ConformanceError": "errors",
    "ConformanceFixture": "fixture",
    "ERROR_KINDS": "contract",
    "ErrorKind": "contract",
    "FakeProvider": "provider",
    "FinishReason": "contract",
    "HangReply": "provider",
    "JsonReply": "provider",
    "LLMError": "contract",
    "MODES": "scenarios",
    "Message": "contract",
    "ProviderInputError": "errors",
    "Reasoning": "contract",
    "ReasoningKind": "contract",
    "RecordedRequest": "provider",
    "SCENARIOS": "scenarios",
    "Scenario": "scenarios",
    "StreamChunk": "contract",
    "StreamReply": "provider",
    "TargetDefinitionError": "errors",
    "ToolCall": "contract",
    "ToolChoice": "contract",
    "ToolError": "contract",
    "ToolResult": "contract",
    "ToolSpec": "contract",
    "Usage": "contract",
    "WIRES": "wires",
    "Wire": "wires",
    "anthropic_vertex_wire": "wires",
    "anthropic_wire": "wires",
    "aws_event_stream_message": "encoders",
    "azure_openai_chat_wire": "wires",
    "azure_openai_responses_wire": "wires",
    "backend_conformance_cases": "cases",
    "bedrock_converse_wire": "wires",
    "bedrock_invoke_wire": "wires",
    "cohere_wire": "wires",
    "conformance_request": "fixture",
    "gemini_vertex_wire": "wires",
    "gemini_wire": "wires",
    "ndjson": "encoders",
    "ollama_wire": "wires",
    "openai_chat_wire": "wires",
    "openai_responses_wire": "wires",
    "provider_error": "reference",
    "race_abort": "abort",
    "race_abort_iter": "abort",
    "shutdown_on_abort": "abort",
    "shutdown_socket": "abort",
    "sse": "encoders",
    "start_fake_provider": "provider",
}

__all__ = [
    "AbortController",
    "AbortSignal",
    "AsyncChatBackend",
    "BackendConformanceTarget",
    "BackendConformanceTestCase",
    "CONFORMANCE_FIXTURE",
    "ChatBackend",
    "ChatRequest",
    "ChatResponse",
    "ConformanceAbort",
    "ConformanceCase",
    "ConformanceError",
    "ConformanceFixture",
    "ERROR_KINDS",
    "ErrorKind",
    "FakeProvider",
    "FinishReason",
    "HangReply",
    "JsonReply",
    "LLMError",
    "MODES",
    "Message",
    "ProviderInputError",
    "Reasoning",
    "ReasoningKind",
    "RecordedRequest",
    "SCENARIOS",
    "Scenario",
    "StreamChunk",
    "StreamReply",
    "TargetDefinitionError",
    "ToolCall",
    "ToolChoice",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "WIRES",
    "Wire",
    "anthropic_vertex_wire",
    "anthropic_wire",
    "aws_event_stream_message",
    "azure_openai_chat_wire",
    "azure_openai_responses_wire",
    "backend_conformance_cases",
    "bedrock_converse_wire",
    "bedrock_invoke_wire",
    "cohere_wire",
    "conformance_request",
    "gemini_vertex_wire",
    "gemini_wire",
    "ndjson",
    "ollama_wire",
    "openai_chat_wire",
    "openai_responses_wire",
    "provider_error",
    "race_abort",
    "race_abort_iter",
    "shutdown_on_abort",
    "shutdown_socket",
    "sse",
    "start_fake_provider",
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
