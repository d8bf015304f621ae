"""Bedrock's error table and variants: each real shape it answers a scenario with.

An error before the stream is an HTTP status, ``x-amzn-ErrorType: <Name>:<namespace>``
and a body ``{"message": ...}``; Bedrock sends no ``retry-after`` on a throttle. A
variant names another shape of the same scenario, with the capture or doc it was
seen in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Tuple

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._aws import ERROR_NAMESPACE
from .._ids import signature
from .._variants import CONTEXT_OVERFLOW_OR_BAD_REQUEST, Variant, stream_cut_variants

if TYPE_CHECKING:
    from ...provider.replies import JsonReply

__all__ = [
    "ERRORS",
    "ERROR_NAMESPACE",
    "REDACTED_THINKING",
    "STREAM_OVERLOADED",
    "STREAM_THROTTLED",
    "THINKING",
    "VARIANTS",
    "error_reply",
]

#: What a thinking model (Claude on Bedrock) returns before its answer: reasoningText with
#: its signature, and the redactedContent blob (base64) Bedrock sends for flagged thinking.
THINKING = Reasoning(
    ReasoningKind.THINKING.value,
    text=FX.thinking,
    signature=signature("bedrock/reasoning/signature", 180),
    provider="bedrock",
)
REDACTED_THINKING = Reasoning(
    ReasoningKind.REDACTED_THINKING.value,
    data=signature("bedrock/reasoning/redacted", 240),
    provider="bedrock",
)

#: What a ThrottlingException may be reported as: its type says a throttle, and only its
#: message ("per day") says the quota of the day is spent, so a rate limit is a fair reading.
QUOTA_OR_RATE_LIMIT = ("quota", "rate_limit")

VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    "reasoning": (
        Variant(
            "reasoning-text",
            "a reasoningContent block, reasoningText {text, signature} (streamed as text deltas, then a "
            "signature delta), then text",
            "vercel/ai packages/amazon-bedrock/src/__fixtures__/bedrock-reasoning.chunks.txt and "
            "amazon-bedrock-reasoning.json; https://docs.aws.amazon.com/bedrock/latest/APIReference/"
            "API_runtime_ReasoningContentBlock.html",
            reasoning=(THINKING,),
            source_kind="capture",
        ),
        Variant(
            "redacted-content",
            "a reasoningContent.redactedContent block (one delta in a stream), then text",
            "vercel/ai packages/amazon-bedrock/src/__fixtures__/amazon-bedrock-redacted-content.chunks.txt "
            "and amazon-bedrock-redacted-content.json",
            reasoning=(REDACTED_THINKING,),
            source_kind="capture",
        ),
    ),
    **stream_cut_variants(
        "messageStop and metadata",
        "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html "
        "(the stream's events, messageStop and metadata last)",
        "NousResearch/hermes-agent#109988 and langchain-ai/langchain-aws#1287 (a ConverseStream "
        "that ended before messageStop taken for a finished turn)",
        "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html",
        after_finish="messageStop with stopReason tool_use, then the stream cut between two events, "
        "before metadata and its usage",
    ),
    "quota": (
        Variant(
            "throttling-per-day",
            "429 ThrottlingException, per day in the message only",
            "minorun365/agent-book#29; Ivy-Interactive/Ivy-Tendril#1756 (Too many tokens per day)",
            error_kinds=QUOTA_OR_RATE_LIMIT,
            source_kind="issue",
        ),
    ),
    # A prompt past the window is a ValidationException, the name of every refused request:
    # only its message says the input is too long.
    "context-overflow": (
        Variant(
            "input-too-long-400",
            "400 ValidationException, input too long (context overflow in the message only)",
            "aws-samples/assessment-generator#2 (ValidationException, httpStatusCode 400, Input is too "
            "long for requested model.)",
            error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
            source_kind="issue",
        ),
    ),
    # A toolUse block's contentBlockDelta input fragments that do not join to JSON, on
    # a tool_use turn; a whole reply's input is a JSON document, so only a stream has them.
    "corrupt-arguments": (
        Variant(
            "unterminated-string",
            "toolUse input fragments ending inside a string, the object left open",
            "kagent-dev/kagent#2230 (malformed streamed toolUse input from ConverseStream); "
            "https://docs.claude.com/en/docs/agents-and-tools/tool-use/fine-grained-tool-streaming",
            source_kind="issue",
        ),
        Variant(
            "trailing-garbage",
            "toolUse input fragments: a whole object, then a closing brace too many",
            "https://docs.claude.com/en/docs/agents-and-tools/tool-use/fine-grained-tool-streaming "
            "(no guarantee of valid JSON); vercel/ai#19023 (Bedrock calls whose input is not JSON in "
            "production traffic; no bytes quoted)",
            source_kind="docs",
        ),
    ),
    # What fails a ConverseStream after its 200: an exception frame, each a member of
    # ConverseStreamOutput. No recording of either frame has been found.
    "stream-error": (
        Variant(
            "service-unavailable",
            "text, then a serviceUnavailableException frame (documented, not captured)",
            "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStreamOutput.html "
            "(serviceUnavailableException, HTTP 503)",
            source_kind="docs",
        ),
        Variant(
            "throttling",
            "text, then a throttlingException frame: a retryable rate_limit with no retry_after "
            "(documented, not captured on ConverseStream)",
            "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStreamOutput.html "
            "(throttlingException, HTTP 429); aws-samples/aws-genai-llm-chatbot#220 (the frame's name "
            "and message, from InvokeModelWithResponseStream)",
            error_kind="rate_limit",
            source_kind="docs",
        ),
    ),
    "content-filter/stream": (
        Variant(
            "guardrail-intervened",
            "a text block, then stopReason guardrail_intervened and trace.guardrail",
            "traceloop/openllmetry packages/opentelemetry-instrumentation-bedrock/tests/traces/"
            "cassettes/test_titan/test_titan_converse_stream_with_events_with_no_content.yaml",
            source_kind="capture",
        ),
        Variant(
            "content-filtered",
            "stopReason content_filtered and no content block",
            "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_MessageStopEvent.html "
            "(StopReason lists content_filtered; no capture shows it)",
            source_kind="docs",
        ),
    ),
}


#: scenario -> (status, x-amzn-ErrorType name, message). Bedrock sends no retry-after.
ERRORS: Mapping[str, Any] = {
    # Every real 429 found says "tokens" (aws-samples/amazon-bedrock-client-for-mac#99).
    "rate-limit": (429, "ThrottlingException", "Too many tokens, please wait before trying again."),
    # A daily token quota is a throttle too on Converse; only the message says "per day".
    "quota": (
        429,
        "ThrottlingException",
        "Too many tokens per day, please wait before trying again.",
    ),
    # What AWS answers a request signed with credentials it does not know.
    "auth": (403, "UnrecognizedClientException", "The security token included in the request is invalid."),
    "overloaded": (503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
    "server-error": (
        500,
        "InternalServerException",
        "The system encountered an unexpected error during processing. Try your request again.",
    ),
    "context-overflow": (400, "ValidationException", "Input is too long for requested model."),
}

#: The overload that a streamed reply fails with after the 200, as the exception message.
STREAM_OVERLOADED = ("serviceUnavailableException", "Bedrock is unable to process your request.")
#: The throttle that a streamed reply fails with after the 200: the name and the words (two
#: spaces before "Wait" included) of aws-samples/aws-genai-llm-chatbot#220.
STREAM_THROTTLED = (
    "throttlingException",
    "Too many requests, please wait before trying again. You have sent too many requests.  "
    "Wait before trying again.",
)


def error_reply(scenario: str) -> JsonReply:
    """The status, ``x-amzn-ErrorType`` and ``{"message": ...}`` Bedrock answers ``scenario`` with."""
    from .._aws import error_reply as aws_error_reply

    return aws_error_reply(*ERRORS[scenario])
