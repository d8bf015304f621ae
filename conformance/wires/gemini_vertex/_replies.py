"""Vertex AI's way of writing a ``GenerateContentResponse``: :class:`VertexDialect`.

Seen in opentelemetry-python-contrib's google-genai cassettes
(``tests/generate_content/cassettes/test_streaming[logcontent-gemini-2.5-flash-vertexaiapi-sync-default].yaml``
and ``test_non_streaming[…]``) and pydantic-ai's Vertex cassettes
(``test_google_vertex_tool_combination_omits_include_server_side_tool_invocations.yaml``,
``test_google_model_armor_*.yaml``, ``test_google_vertex_service_tier_flex_stream.yaml``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._ids import http_date
from ..gemini._replies import RESPONSE_ID, Dialect

__all__ = ["CREATE_TIME", "TRAFFIC_TYPE", "VERTEX", "VertexDialect"]

#: When the response was made: microseconds and a Z, the same on every event of a stream.
CREATE_TIME = "2026-02-17T04:32:32.576129Z"
#: Pay-as-you-go traffic (``ON_DEMAND_FLEX``, ``PROVISIONED_THROUGHPUT`` are the others).
TRAFFIC_TYPE = "ON_DEMAND"


class VertexDialect(Dialect):
    """Vertex AI's front end (aiplatform.googleapis.com)."""

    name = "gemini-vertex"
    # A stream signs the answer's text part itself (pydantic-ai
    # test_google_vertex_service_tier_flex_stream.yaml: {"text": "OK","thoughtSignature": …}).
    signs_last_text = True
    #: Its blocked output (MODEL_ARMOR, pydantic-ai
    #: ``test_google_model_armor_response_template_real_block.yaml``) is sent with the
    #: plain usage, as before; its blocked prompt reports no counts at all (below).
    blocked_counts_prompt_only = False

    def headers(self, stream: bool = False) -> Dict[str, str]:
        headers = {
            "date": http_date(),
            "server": "scaffolding on HTTPServer2",
            "x-content-type-options": "nosniff",
            "x-frame-options": "SAMEORIGIN",
            "x-xss-protection": "0",
        }
        if stream:
            headers.update({"vary": "Origin, X-Origin, Referer", "content-disposition": "attachment"})
        else:
            headers.update({"vary": "X-Origin, Referer, Origin,Accept-Encoding", "accept-ranges": "none"})
        return headers

    def content(self, parts: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
        return {"role": "model", "parts": list(parts)}

    def candidate(
        self, parts: Optional[Sequence[Dict[str, Any]]], finish_reason: Optional[str] = None
    ) -> Dict[str, Any]:
        """A candidate with no ``index``; a blocked one has no ``content`` at all."""
        body: Dict[str, Any] = {} if parts is None else {"content": self.content(parts)}
        if finish_reason is not None:
            body["finishReason"] = finish_reason
        return body

    def usage(self, final: bool = True, step: int = 1, thoughts: int = 0) -> Dict[str, Any]:
        """An event before the last counts nothing yet, and says only its traffic type."""
        if not final:
            return {"trafficType": TRAFFIC_TYPE}
        u = FX.usage
        candidates = u.output_tokens - thoughts
        body: Dict[str, Any] = {"promptTokenCount": u.input_tokens}
        if candidates:
            body["candidatesTokenCount"] = candidates
        body.update(totalTokenCount=u.total_tokens, trafficType=TRAFFIC_TYPE)
        body["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": u.input_tokens}]
        if candidates:
            body["candidatesTokensDetails"] = [{"modality": "TEXT", "tokenCount": candidates}]
        if thoughts:
            body["thoughtsTokenCount"] = thoughts
        return body

    def response(
        self,
        model: str,
        candidates: Optional[List[Dict[str, Any]]],
        final: bool = True,
        usage: Optional[Dict[str, Any]] = None,
        **extra: Any,
    ) -> Dict[str, Any]:
        body: Dict[str, Any] = {}
        if candidates is not None:
            body["candidates"] = candidates
        body.update(extra)
        body["usageMetadata"] = self.usage(final) if usage is None else usage
        body.update(modelVersion=model, createTime=CREATE_TIME, responseId=RESPONSE_ID)
        return body

    def prompt_blocked(self, model: str) -> Dict[str, Any]:
        """Model Armor refused the prompt: ``promptFeedback`` with its reason and message, no candidates,
        and a usage of the traffic type alone (pydantic-ai
        ``test_google_model_armor_prompt_template_text_gets_blocked.yaml``)."""
        feedback = {
            "blockReason": "MODEL_ARMOR",
            "blockReasonMessage": "The prompt violated Prompt Injection and Jailbreak filters.",
        }
        return self.response(model, None, usage={"trafficType": TRAFFIC_TYPE}, promptFeedback=feedback)


#: Vertex AI's front end.
VERTEX = VertexDialect()
