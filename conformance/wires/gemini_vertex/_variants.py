"""Vertex AI's errors and variants: the ``{"error": google.rpc.Status}`` bodies it answers
with, and each real shape of a scenario, with the capture or doc it was seen in.

Reference: https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/api-errors
(the statuses: 400 ``INVALID_ARGUMENT`` for a request over the input token limit, 401
``UNAUTHENTICATED``, 429 ``RESOURCE_EXHAUSTED``, 500 ``INTERNAL``, 503 ``UNAVAILABLE``)
and https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._variants import CONTEXT_OVERFLOW_OR_BAD_REQUEST, Variant, stream_cut_variants
from ..gemini._replies import FUNCTION_CALL_ID
from ..gemini._variants import OVERLOADED_MESSAGE, SIGNATURE_ONLY, THOUGHT_SUMMARY, ErrorTable

__all__ = ["ERRORS", "UNDECLARED_FUNCTION", "UNSUPPORTED", "VARIANTS", "VARIANT_ERRORS"]

#: The function the ``unexpected-tool-call`` shape calls, which the request never declares.
UNDECLARED_FUNCTION = "list_files"

#: The 429 of a shared (pay-as-you-go) quota, with no details and so no delay.
_RESOURCE_EXHAUSTED = (
    "Resource exhausted. Please try again later. Please refer to "
    "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details."
)

ERRORS: ErrorTable = {
    "rate-limit": (429, "RESOURCE_EXHAUSTED", _RESOURCE_EXHAUSTED, []),
    # What a credential Vertex cannot take gets (an API key on a project's path, or none).
    "auth": (
        401,
        "UNAUTHENTICATED",
        "API keys are not supported by this API. Expected OAuth2 access token or other "
        "authentication credentials that assert a principal. See https://cloud.google.com/docs/authentication",
        [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "CREDENTIALS_MISSING",
                "domain": "googleapis.com",
                "metadata": {
                    "service": "aiplatform.googleapis.com",
                    "method": "google.cloud.aiplatform.v1beta1.PredictionService.GenerateContent",
                },
            }
        ],
    ),
    "overloaded": (503, "UNAVAILABLE", OVERLOADED_MESSAGE, []),
    "server-error": (500, "INTERNAL", "Internal error encountered.", []),
    "context-overflow": (
        400,
        "INVALID_ARGUMENT",
        "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
        [],
    ),
}
VARIANT_ERRORS: Mapping[Tuple[str, str], Tuple[int, str, str, List[Dict[str, Any]]]] = {}

#: Scenarios Vertex has no shape for, with the reason.
UNSUPPORTED: Mapping[str, str] = {
    "quota": (
        "Vertex AI answers an exhausted quota as the rate limit's 429 RESOURCE_EXHAUSTED, with no "
        "QuotaFailure or other detail to tell it apart: its generative AI quotas count per minute "
        "(the shared pay-as-you-go pool, Provisioned Throughput), and no daily quota is seen"
    ),
}

_ID = Variant(
    "id",
    "functionCall with an id and a thoughtSignature",
    "pydantic/pydantic-ai tests/models/cassettes/test_google/"
    "test_google_vertex_tool_combination_omits_include_server_side_tool_invocations.yaml "
    "(gemini-3-flash-preview)",
    call_id=FUNCTION_CALL_ID,
    source_kind="capture",
)
_NO_ID = Variant(
    "signature-without-id",
    "functionCall without an id, with a thoughtSignature",
    "pydantic/pydantic-ai tests/models/cassettes/test_multimodal_tool_returns/"
    "test_multimodal_tool_return_matrix[tool_return_content-url-image-google_vertex].yaml "
    "(gemini-3-flash-preview: its call has no id)",
    source_kind="capture",
)
_UNEXPECTED = Variant(
    "unexpected-tool-call",
    f"a functionCall to {UNDECLARED_FUNCTION}, which the request never declared, with "
    "finishReason UNEXPECTED_TOOL_CALL and a finishMessage",
    "pydantic/pydantic-ai tests/models/cassettes/test_multimodal_tool_returns/"
    "test_multimodal_tool_return_matrix[tool_return_content-url-image-google_vertex].yaml and 4 "
    "siblings (gemini-3-flash-preview)",
    source_kind="capture",
    must='report "error" (UNEXPECTED_TOOL_CALL ends the turn in error), passing the call on as sent '
    'or dropping it, never as a "tool_calls" turn: a loop would run a function nobody declared',
    finish_reasons=("error",),
    undeclared_call=UNDECLARED_FUNCTION,
)

VARIANTS: Dict[str, Tuple[Variant, ...]] = {
    # No cut falls between the finish reason and the end: the chunk with finishReason (and
    # the usage) is the stream's last event.
    **stream_cut_variants(
        "the event whose candidate carries finishReason",
        "https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference (Candidate."
        "finishReason: unset while the model is generating)",
        "SamSaffron/term-llm#954 and tashfeenahmed/freellmapi#1288 (a Gemini stream that reached EOF "
        "without a finishReason taken for a finished turn)",
        "https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference (generateContent)",
        call="the whole functionCall part (Gemini never splits one)",
    ),
    "rate-limit": (
        Variant(
            "resource-exhausted",
            "429 RESOURCE_EXHAUSTED without details (no RetryInfo)",
            "continuedev/continue#8967 and google-gemini/gemini-cli#14811 (the same body, wrapped in an "
            "array on a stream without alt=sse)",
            source_kind="issue",
        ),
    ),
    # A prompt past the window is a 400 INVALID_ARGUMENT with no details, as any bad
    # argument is: only its message counts the tokens.
    "context-overflow": (
        Variant(
            "token-count-400",
            "400 INVALID_ARGUMENT, the input token count past the maximum (context overflow in the "
            "message only)",
            "https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/api-errors (400 "
            "INVALID_ARGUMENT for a request over the input token limit)",
            error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
            source_kind="docs",
        ),
    ),
    "auth": (
        Variant(
            "credentials-missing",
            "401 UNAUTHENTICATED with ErrorInfo CREDENTIALS_MISSING",
            "a2aproject/a2a-samples#43 and HisMax/RedInk#40 (the whole body, through google-genai)",
            source_kind="issue",
        ),
    ),
    "tool-call/chat": (_ID, _NO_ID, _UNEXPECTED),
    "tool-call": (_ID, _NO_ID),
    "content-filter/chat": (
        Variant(
            "prompt-blocked",
            "promptFeedback.blockReason MODEL_ARMOR with its message, no candidates, and a "
            "usageMetadata with no counts",
            "pydantic/pydantic-ai tests/models/cassettes/test_google/"
            "test_google_model_armor_prompt_template_text_gets_blocked.yaml",
            source_kind="capture",
            reports_usage=False,
        ),
        Variant(
            "output-blocked",
            "a candidate with no content, finishReason MODEL_ARMOR and a finishMessage",
            "pydantic/pydantic-ai tests/models/cassettes/test_google/"
            "test_google_model_armor_response_template_real_block.yaml",
            source_kind="capture",
        ),
    ),
    "reasoning": (
        Variant(
            "signature",
            "the answer, its last text part signed with a thoughtSignature",
            "pydantic/pydantic-ai tests/models/cassettes/test_google/"
            "test_google_vertex_service_tier_flex_stream.yaml (gemini-3-flash-preview)",
            reasoning=(SIGNATURE_ONLY,),
            source_kind="capture",
        ),
        Variant(
            "thought-summary",
            'thought parts ("thought": true) with a thoughtSignature on the last, then the answer',
            "https://docs.cloud.google.com/ruby/docs/reference/google-cloud-ai_platform-v1/latest/"
            "Google-Cloud-AIPlatform-V1-GenerationConfig-ThinkingConfig (include_thoughts)",
            reasoning=(THOUGHT_SUMMARY,),
            source_kind="docs",
            asks="thinking",
        ),
    ),
}

#: The finishMessage Vertex puts beside an UNEXPECTED_TOOL_CALL.
UNEXPECTED_MESSAGE = (
    f"Unexpected tool call: Model tried to call an undeclared function: {UNDECLARED_FUNCTION}"
)
#: Of the turn's output tokens, those the model spent thinking, as the capture's usage counts them.
UNEXPECTED_THOUGHTS = FX.usage.output_tokens - 3
