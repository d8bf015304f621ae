"""Bedrock InvokeModel's failures and variants: each real shape it answers a scenario with.

A failure before the answer is Bedrock's own (``x-amzn-ErrorType`` and ``{"message"}``,
the same table as Converse's, in ``wires/bedrock``); the stream operation may also
answer 200 and fail in its first frame, an ``exception`` frame named in lowerCamel
case, as botocore reports it (``EventStreamError`` ... ``(validationException) when
calling the InvokeModelWithResponseStream operation``). A variant names another shape of
the same scenario, with the capture, issue or doc it was seen in.
"""

from __future__ import annotations

from typing import Mapping, Tuple

from .._variants import CONTEXT_OVERFLOW_OR_BAD_REQUEST, Variant, stream_cut_variants
from ..anthropic._variants import CORRUPT_ARGUMENTS, REDACTED_THINKING, REFUSED_TEXT, THINKING

__all__ = [
    "FRAMED_FAILURES",
    "STREAM_FAILURES",
    "THROTTLED_MESSAGE",
    "VARIANTS",
    "VARIANT_ERRORS",
]

#: What a ThrottlingException may be reported as: its type says a throttle, and only its
#: message ("per day") says the quota of the day is spent, so a rate limit is a fair reading.
QUOTA_OR_RATE_LIMIT = ("quota", "rate_limit")

#: The throttle's message as InvokeModelWithResponseStream sent it mid-stream
#: (aws-samples/aws-genai-llm-chatbot#220; two spaces before "Wait", as quoted).
THROTTLED_MESSAGE = (
    "Too many requests, please wait before trying again. You have sent too many requests.  "
    "Wait before trying again."
)

#: (scenario, variant) -> (status, x-amzn-ErrorType name, message), where not Converse's table.
VARIANT_ERRORS: Mapping[Tuple[str, str], Tuple[int, str, str]] = {
    ("quota", "service-quota-exceeded"): (
        400,
        "ServiceQuotaExceededException",
        "Your request exceeds the service quota for your account. You can view your quotas at "
        "https://docs.aws.amazon.com/bedrock/latest/userguide/quotas.html. You can resubmit your "
        "request later.",
    ),
}

#: (scenario, variant) -> (the exception frame's lowerCamel name, message) of the shapes a
#: stream answers with a 200 and one exception frame, before any event.
FRAMED_FAILURES: Mapping[Tuple[str, str], Tuple[str, str]] = {
    ("rate-limit", "throttling-frame"): ("throttlingException", THROTTLED_MESSAGE),
    ("context-overflow", "input-too-long-frame"): (
        "validationException",
        "Input is too long for requested model.",
    ),
}

#: stream-error variant -> the exception frame that fails the stream after its text.
STREAM_FAILURES: Mapping[str, Tuple[str, str]] = {
    "service-unavailable": ("serviceUnavailableException", "Bedrock is unable to process your request."),
    "throttling": ("throttlingException", THROTTLED_MESSAGE),
}

_STREAM_DOCS = (
    "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html"
)
_INVOKE_DOCS = "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html"
_CLAUDE_DOCS = (
    "https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html"
)

_REFUSALS = (
    "https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/"
    "handle-streaming-refusals"
)

VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    "reasoning": (
        Variant(
            "thinking",
            "a thinking block and its signature (streamed as thinking_delta, then signature_delta), "
            "then text",
            f"{_CLAUDE_DOCS} (Claude's thinking blocks, as the Messages API streams them); "
            "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking",
            reasoning=(THINKING,),
            asks="thinking",
            source_kind="docs",
        ),
        Variant(
            "redacted-thinking",
            "a thinking block, then a redacted_thinking block (its data, whole in content_block_start), "
            "then text",
            f"{_CLAUDE_DOCS}; "
            "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#thinking-redaction",
            reasoning=(THINKING, REDACTED_THINKING),
            asks="thinking",
            source_kind="docs",
        ),
    ),
    **stream_cut_variants(
        "message_stop",
        f"{_STREAM_DOCS} (the chunks carry Claude's events, message_stop last)",
        "charmbracelet/fantasy#245 and SamSaffron/term-llm#955 (a Claude stream that reached EOF "
        "without message_stop taken for a finished turn)",
        f"{_INVOKE_DOCS}",
        after_finish="message_delta with stop_reason tool_use and the usage, then the stream cut "
        "between two frames, before message_stop and its invocation metrics",
    ),
    "corrupt-arguments": CORRUPT_ARGUMENTS,
    # The newer shape repeats the input side in message_delta, the older counts only the output.
    "text/stream": (
        Variant(
            "delta-input-tokens",
            "message_delta.usage with input_tokens, cache counts and output_tokens_details; as the "
            "2026 stream: model first, container and stop_details null, the id msg_bdrk_ and 52 "
            "lower-case characters",
            "pydantic/pydantic-ai tests/models/cassettes/test_anthropic_mid_conversation_system/"
            "test_mid_conversation_system_prompt_on_bedrock.yaml at 06b71bcd (claude-opus-4-8, "
            "invoke-with-response-stream; the file's version of 2026-07-30 is a whole /invoke reply)",
            source_kind="capture",
        ),
        Variant(
            "delta-output-only",
            "message_delta.usage with output_tokens only; as the 2025 stream: message_start counts "
            "input_tokens and output_tokens alone, no stop_details",
            "open-telemetry/opentelemetry-python-contrib instrumentation/"
            "opentelemetry-instrumentation-botocore/tests/cassettes/"
            "test_invoke_model_with_response_stream_with_content_tool_call[anthropic.claude].yaml "
            "(claude-3-5-sonnet, 2025-03)",
            source_kind="capture",
        ),
    ),
    "rate-limit": (
        Variant(
            "throttling-429",
            "429 ThrottlingException, no retry delay",
            "aws-samples/amazon-bedrock-client-for-mac#99 (the 429, its x-amzn-ErrorType and message); "
            f"{_INVOKE_DOCS} (ThrottlingException, 429)",
            source_kind="issue",
        ),
    ),
    "rate-limit/stream": (
        Variant(
            "throttling-429",
            "429 ThrottlingException, no retry delay",
            f"{_STREAM_DOCS} (ThrottlingException, 429)",
            source_kind="docs",
        ),
        Variant(
            "throttling-frame",
            "200, then a throttlingException frame before any event",
            "aws-samples/aws-genai-llm-chatbot#220 (EventStreamError (throttlingException) when "
            "calling the InvokeModelWithResponseStream operation)",
            source_kind="issue",
        ),
    ),
    "quota": (
        Variant(
            "throttling-per-day",
            "429 ThrottlingException, per day in the message only",
            "minorun365/agent-book#29; Ivy-Interactive/Ivy-Tendril#1756 (Too many tokens per day)",
            error_kinds=QUOTA_OR_RATE_LIMIT,
            source_kind="issue",
        ),
        Variant(
            "service-quota-exceeded",
            "400 ServiceQuotaExceededException",
            f"{_INVOKE_DOCS} (ServiceQuotaExceededException, 400: InvokeModel's errors, not Converse's)",
            source_kind="docs",
        ),
    ),
    # A ValidationException names every refused request: only its message says the input
    # is too long, so a bad request is a fair reading of it.
    "context-overflow": (
        Variant(
            "input-too-long-400",
            "400 ValidationException, input too long (context overflow in the message only)",
            f"{_INVOKE_DOCS} (ValidationException, 400); aws-samples/assessment-generator#2 (its "
            "message: Input is too long for requested model.)",
            error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
            source_kind="docs",
        ),
    ),
    "context-overflow/stream": (
        Variant(
            "input-too-long-400",
            "400 ValidationException, input too long (context overflow in the message only)",
            f"{_STREAM_DOCS} (ValidationException, 400)",
            error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
            source_kind="docs",
        ),
        Variant(
            "input-too-long-frame",
            "200, then a validationException frame before any event (context overflow in the message only)",
            "aws-samples/bedrock-chat#95 (EventStreamError (validationException) when calling the "
            "InvokeModelWithResponseStream operation: Input is too long for requested model.)",
            error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
            source_kind="issue",
        ),
    ),
    "stream-error": (
        Variant(
            "service-unavailable",
            "text, then a serviceUnavailableException frame",
            f"{_STREAM_DOCS} (ResponseStream lists serviceUnavailableException; no capture shows it)",
            source_kind="docs",
        ),
        Variant(
            "throttling",
            "text, then a throttlingException frame",
            "aws-samples/aws-genai-llm-chatbot#220 (the frame's name and message on "
            f"InvokeModelWithResponseStream); {_STREAM_DOCS} (ResponseStream lists "
            "throttlingException)",
            error_kind="rate_limit",
            source_kind="issue",
        ),
    ),
    # The model's refusal, as Anthropic's API gives it: a named category, or none.
    "content-filter": (
        Variant(
            "named-category",
            "text, then stop_reason refusal, stop_details with the category cyber and its explanation",
            f"{_REFUSALS} (the response format); "
            f"{_CLAUDE_DOCS} (Claude's stop reasons on Bedrock, refusal among them)",
            text=REFUSED_TEXT,
            source_kind="docs",
        ),
        Variant(
            "uncategorized",
            "text, then stop_reason refusal, stop_details with category and explanation null",
            f"{_REFUSALS} (both null where the refusal maps to no named category); "
            f"{_CLAUDE_DOCS} (Claude's stop reasons on Bedrock, refusal among them)",
            text=REFUSED_TEXT,
            source_kind="docs",
        ),
    ),
}
