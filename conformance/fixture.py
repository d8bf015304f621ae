"""The data every wire answers with, and the request every case sends.

One fixture for all providers keeps the checks provider-agnostic: whatever wire a
backend reads, a ``text`` turn must come back as :attr:`ConformanceFixture.text`.
The text carries characters of two, three and four UTF-8 bytes, so a stream cut
inside one of them catches a backend that decodes each chunk on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Tuple

from .contract import AbortSignal, ChatRequest, Message, ToolSpec, Usage

__all__ = ["CONFORMANCE_FIXTURE", "ConformanceFixture", "conformance_request"]


def _weather_schema() -> Mapping[str, Any]:
    return {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    }


@dataclass(frozen=True)
class ConformanceFixture:
    """What the fake provider says, whatever the wire."""

    question: str = "What is the weather in Paris today?"
    system: str = "You are a concise weather assistant."
    #: The whole answer of a ``text`` turn: °/é are 2 bytes, ☀ 3 bytes, 🌤 4 bytes.
    text: str = "It is 18 °C and sunny in Paris ☀ — café weather 🌤."
    #: What a ``stream-error`` turn streams before the provider fails.
    partial_text: str = "It is 18 °C and sun"
    #: What a ``truncated-tool-call`` turn says before the call that is cut off.
    preamble: str = "Let me check the weather."
    #: The thinking a ``reasoning`` turn returns before its answer (the answer is :attr:`text`):
    #: a line break and multi-byte characters, as real thinking has.
    thinking: str = "The user asks for the weather in Paris today.\n\nOne line will do: 18 °C, sunny ☀."
    tool_name: str = "get_weather"
    tool_description: str = "Get the current weather for a city."
    tool_parameters: Mapping[str, Any] = field(default_factory=_weather_schema)
    tool_arguments: Mapping[str, Any] = field(default_factory=lambda: {"city": "Paris", "unit": "celsius"})
    usage: Usage = Usage(input_tokens=31, output_tokens=17, total_tokens=48)
    #: What the earlier get_weather call returned, in a ``tool-result`` case's history.
    tool_result: str = '{"city": "Paris", "temperature_c": 18, "conditions": "sunny ☀"}'
    #: The failure that call returned instead, in the case's ``error`` variant.
    tool_error_code: str = "station_offline"
    tool_error_message: str = "The Paris weather station is offline; try again in an hour."
    #: The final answer the provider gives once it has the result.
    tool_result_answer: str = "Paris reports 18 °C and sunny ☀, says get_weather."
    #: The arguments of the two calls of a ``parallel-tool-calls`` turn.
    parallel_arguments: Tuple[Mapping[str, Any], ...] = (
        {"city": "Paris", "unit": "celsius"},
        {"city": "Tokyo", "unit": "celsius"},
    )
    max_tokens: int = 256
    #: Seconds a rate-limited caller is told to wait.
    retry_after: float = 7.0
    #: The human-readable message of each failure, by error kind.
    error_messages: Mapping[str, str] = field(
        default_factory=lambda: {
            "rate_limit": "Rate limit reached for requests per minute. Please try again in 7s.",
            "quota": "You exceeded your current quota, please check your plan and billing details.",
            "auth": "Incorrect API key provided.",
            "overloaded": "The model is overloaded. Please try again later.",
            "server_error": "The server had an error while processing your request.",
            "context_overflow": (
                "This model's maximum context length is 8192 tokens. "
                "However, your messages resulted in 9000 tokens."
            ),
        }
    )

    @property
    def tool(self) -> ToolSpec:
        """The one tool of :func:`conformance_request`."""
        return ToolSpec(self.tool_name, self.tool_description, self.tool_parameters)


CONFORMANCE_FIXTURE = ConformanceFixture()


def conformance_request(model: str, signal: Optional[AbortSignal] = None) -> ChatRequest:
    """The request every case sends: a system prompt, the question, and ``get_weather``."""
    fixture = CONFORMANCE_FIXTURE
    return ChatRequest(
        model=model,
        messages=(Message("system", fixture.system), Message("user", fixture.question)),
        tools=(fixture.tool,),
        max_tokens=fixture.max_tokens,
        signal=signal,
    )
