"""The Vertex AI wire for Gemini: the Gemini wire with Vertex's routes, replies, errors and shapes.

Everything a scenario plays is the Gemini wire's (``..gemini``), written in Vertex's
:class:`~._replies.VertexDialect`; what only Vertex does is here: its paths and
credentials, its error table, ``MODEL_ARMOR`` blocks, an ``UNEXPECTED_TOOL_CALL``
turn, and a streamed error request without ``alt=sse`` answered as a one-element array.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ...fixture import CONFORMANCE_FIXTURE as FX
from ..gemini._replies import function_call_part
from ..gemini._variants import error_body, error_reply
from ..gemini._wire import GeminiWire
from ._replies import VERTEX
from ._request import GENERATE_PATH, MODEL_PATH
from ._variants import (
    ERRORS,
    UNDECLARED_FUNCTION,
    UNEXPECTED_MESSAGE,
    UNEXPECTED_THOUGHTS,
    UNSUPPORTED,
    VARIANT_ERRORS,
    VARIANTS,
)

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest, Reply

__all__ = ["GeminiVertexWire", "gemini_vertex_wire"]

#: What Model Armor says of an output it blocked (pydantic-ai
#: test_google_model_armor_response_template_real_block.yaml).
_ARMOR_MESSAGE = (
    "The response violated Responsible AI Safety settings (Hate Speech, Harassment, Dangerous) filters."
)


class GeminiVertexWire(GeminiWire):
    """Gemini on Vertex AI (aiplatform.googleapis.com), whole and streamed."""

    name = "gemini-vertex"
    provider = "gemini"
    title = "Gemini on Vertex AI"
    dialect = VERTEX
    generate_path = GENERATE_PATH
    errors = ERRORS
    variant_errors = VARIANT_ERRORS
    unsupported = UNSUPPORTED
    variants_table = VARIANTS
    # A 429 from Vertex names no delay: there is none to report.
    rate_limit_retry_after = None

    def retry_after_for(self, scenario: str) -> Optional[float]:
        return self.rate_limit_retry_after if scenario == "rate-limit" else None

    def error_reply(self, scenario: str, variant: str, request: RecordedRequest) -> JsonReply:
        """Vertex's error; to a stream asked for without ``alt=sse``, wrapped in a one-element array,
        as the array that stream would have been (continuedev/continue#8967, cline/cline#651)."""
        if self.wants_stream(request) and request.params.get("alt") != "sse":
            body: Any = [error_body(scenario, variant, self.errors, self.variant_errors)]
            return error_reply(scenario, dialect=self.dialect, body=body)
        return super().error_reply(scenario, variant, request)

    def whole_candidate(self, scenario: str, variant: str) -> Optional[Dict[str, Any]]:
        if scenario == "tool-call" and variant == "unexpected-tool-call":
            # The model called a function the request never declared: the call, signed
            # and without an id, and the turn ended by Vertex in error.
            part = function_call_part(with_id=False, signature=True, name=UNDECLARED_FUNCTION, args={})
            one = self.dialect.candidate([part], "UNEXPECTED_TOOL_CALL")
            one["finishMessage"] = UNEXPECTED_MESSAGE
            return one
        return super().whole_candidate(scenario, variant)

    def whole_usage(self, scenario: str, variant: str) -> Optional[Dict[str, Any]]:
        if variant == "unexpected-tool-call":
            return self.dialect.usage(thoughts=UNEXPECTED_THOUGHTS)
        return super().whole_usage(scenario, variant)

    def blocked_output(self) -> Dict[str, Any]:
        """Model Armor blocked the output: no content at all, its reason and its message."""
        return {"finishReason": "MODEL_ARMOR", "finishMessage": _ARMOR_MESSAGE}

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ...provider.replies import JsonReply

        found = MODEL_PATH.search(request.path)
        if found and request.path.endswith(":countTokens") and request.method == "POST":
            # models.countTokens (pydantic-ai test_google_vertexai_model_usage_limit_exceeded.yaml)
            return JsonReply(
                {
                    "totalTokens": FX.usage.input_tokens,
                    "totalBillableCharacters": len(FX.question),
                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": FX.usage.input_tokens}],
                },
                headers=self.dialect.headers(),
                content_type="application/json; charset=UTF-8",
            )
        body = {
            "error": {
                "code": 404,
                "message": (
                    f"the Vertex AI fake provider has no route for {request.method} {request.path}; it "
                    "serves …/publishers/google/models/{model}:generateContent, :streamGenerateContent "
                    "and :countTokens"
                ),
                "status": "NOT_FOUND",
            }
        }
        return self.dialect.whole(body, status=404)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_request

        return check_request(request, model)


gemini_vertex_wire = GeminiVertexWire()
