"""The scenario table: what each case scripts and what the backend must do.

Every scenario runs in ``chat`` and ``stream`` mode unless its row says otherwise.
The wires decide *how* a provider says each scenario; this table says what a good
backend makes of it, in words that go into failure messages and the docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Tuple

__all__ = ["MODES", "SCENARIOS", "Scenario"]

#: ``chat`` calls ``backend.chat(request)``; ``stream`` iterates ``backend.chat_stream(request)``.
MODES: Tuple[str, ...] = ("chat", "stream")


@dataclass(frozen=True)
class Scenario:
    """One row of :data:`SCENARIOS`."""

    name: str
    must: str
    hint: str
    modes: Tuple[str, ...] = MODES
    #: The :data:`~conformance.contract.ERROR_KINDS` key the backend must raise, if any.
    error_kind: Optional[str] = None
    #: Only async backends get this case (task cancellation has no sync twin).
    async_only: bool = False
    #: Only wires that list it in ``Wire.optional_scenarios`` get this case.
    optional: bool = False
    #: Only targets that declare their backend's ``read_timeout`` get this case: the
    #: provider's silence is scaled from it.
    needs_read_timeout: bool = False

    @property
    def method_stem(self) -> str:
        """The scenario as it appears in a test method name: ``tool_call``."""
        return self.name.replace("-", "_")


def _error(name: str, kind: str, must: str, hint: str) -> Scenario:
    return Scenario(name, must, hint, error_kind=kind)


SCENARIOS: Mapping[str, Scenario] = {
    row.name: row
    for row in (
        Scenario(
            "text",
            'return the fixture text with finish_reason "stop", no tool calls, and the usage '
            "the provider reported",
            "decode the stream as bytes and split events before decoding UTF-8; read usage "
            "where the provider puts it",
        ),
        Scenario(
            "tool-call",
            'return one complete get_weather call (id, name, parsed arguments) as a "tool_calls" turn',
            "gather argument fragments per call until the call is complete, then parse them as JSON once",
        ),
        Scenario(
            "tool-call-with-stop",
            'return the complete get_weather call as a "tool_calls" turn although the provider said "stop"',
            'some providers finish a tool turn with "stop": derive the finish reason from the calls present',
        ),
        Scenario(
            "tool-result",
            "send the earlier get_weather call and its result back in the provider's own format "
            "(its call id, its error flag, its reasoning unaltered), then return the final text",
            "render an assistant turn's tool_calls and each Message.tool result the way the provider "
            "takes them, matched by call id; echo reasoning and signatures byte for byte",
        ),
        Scenario(
            "parallel-tool-calls",
            "return both get_weather calls of one turn, complete, each once with its own id, as a "
            '"tool_calls" turn',
            "key argument fragments by the provider's call index, not by arrival order; ids and names "
            "come only on a call's first fragment",
        ),
        Scenario(
            "truncated-tool-call",
            'report "length" and drop the tool call cut off inside its arguments; in stream '
            "mode never yield it",
            "a call whose arguments do not parse, on a turn cut off by the token limit, is not a call",
        ),
        Scenario(
            "corrupt-arguments",
            "return the get_weather call whose finished arguments are not valid JSON as a "
            '"tool_calls" turn, its text byte for byte in ToolCall.unparsed_arguments and '
            "arguments {}",
            "keep a finished call whose arguments do not parse: put the text as it came in "
            "unparsed_arguments and leave arguments empty; never repair it, raise on it or drop it",
        ),
        Scenario(
            "content-filter",
            'report "content_filter" or "refusal", with no tool calls',
            'map the provider\'s safety stop reason instead of passing it through or calling it "stop"',
        ),
        Scenario(
            "reasoning",
            "ask for reasoning where ChatRequest.thinking says so (Anthropic's thinking, Gemini's "
            "includeThoughts, Ollama's think: the provider sends those shapes only then), and "
            "return the reasoning the provider sent with its answer in ChatResponse.reasoning (stream: "
            "StreamChunk.reasoning, each item once, complete), byte for byte, signatures and encrypted "
            "payloads included, apart from the answer, and the answer text exactly",
            "keep thinking blocks, reasoning items and thought parts out of the text; gather each item "
            "until its end (a signature or encrypted payload comes last) and pass it on as one "
            "Reasoning, its opaque strings unaltered",
        ),
        Scenario(
            "stream-error",
            "yield the text streamed before the provider failed, then fail as a retryable overloaded error",
            "check every event for the provider's mid-stream error shape and raise after "
            "yielding what came before",
            modes=("stream",),
            error_kind="overloaded",
        ),
        Scenario(
            "stream-cut",
            "fail with a retryable server_error (or overloaded) error when the connection ends before "
            "the provider's terminal event, or a whole body before its end, never yielding a finish "
            "reason or a tool call first",
            "a turn is over only at the provider's terminal event ([DONE], message_stop, "
            'response.completed, a finishReason, "done": true, metadata after messageStop) and a '
            "body only at its Content-Length: treat an end before it, or the transport's error, as a "
            "retryable server_error, and hand out calls and the finish reason only after the terminal "
            "event",
        ),
        Scenario(
            "corrupt-frame",
            "fail instead of reading on past a frame whose checksum does not match",
            "check the prelude CRC and the message CRC of every event-stream frame before "
            "decoding its headers or payload",
            modes=("stream",),
            optional=True,
        ),
        Scenario(
            "slow-first-token",
            "return the reply whole although the provider was silent for 0.4 of the read timeout "
            "the target declares at a time: before its first byte, or, where it keeps a stream "
            "alive with pings, between them for longer than the timeout in all",
            "wait for the provider's next byte as long as the read timeout you declared (an "
            "HTTP client's read timeout, not a deadline for the whole reply), and no shorter",
            needs_read_timeout=True,
        ),
        Scenario(
            "stall",
            "give up once the provider has been silent for the read timeout the target declares, "
            "with a retryable server_error (or overloaded), never waiting on past it; in a stream "
            "yield no finish reason or tool call first",
            "set the HTTP client's read timeout (httpx.Timeout(read=...), aiohttp's sock_read) to "
            "what the target declares, and raise its timeout as a retryable server_error: silence "
            "names no cause, and the same request may well be answered",
            needs_read_timeout=True,
        ),
        Scenario(
            "abort",
            "fail at once with the caller's abort reason and close the connection",
            "race the read against request.signal and close the socket (or reset the h2 "
            "stream) when it fires; raise signal.reason itself",
        ),
        Scenario(
            "cancel",
            "let CancelledError propagate unchanged and close the connection",
            "do not swallow or wrap asyncio.CancelledError; close the connection in a finally",
            async_only=True,
        ),
        _error(
            "rate-limit",
            "rate_limit",
            "fail as a retryable rate_limit error with retry_after from the provider",
            "read retry-after-ms, then retry-after (seconds), or the provider's own retry delay field",
        ),
        _error(
            "quota",
            "quota",
            "fail as a non-retryable quota error, even where the provider sends it as a 429",
            "tell an exhausted quota from a rate limit by the error code or type in the body, "
            "not by the status",
        ),
        _error(
            "auth",
            "auth",
            "fail as a non-retryable auth error",
            "map 401/403 and the provider's invalid-key errors to auth",
        ),
        _error(
            "overloaded",
            "overloaded",
            "fail as a retryable overloaded error",
            "map 503/529 and the provider's overloaded error types to overloaded",
        ),
        _error(
            "server-error",
            "server_error",
            "fail as a retryable server_error",
            "map 500 and other 5xx that are not overload to server_error",
        ),
        _error(
            "context-overflow",
            "context_overflow",
            "fail as a non-retryable context_overflow error",
            "recognise the provider's context-length error (a 400 with its own code or message) "
            "before the generic 400 mapping",
        ),
    )
}
