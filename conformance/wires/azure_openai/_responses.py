"""Azure OpenAI's Responses API: OpenAI's wire, with ``content_filters`` and Azure's failures.

Strategy: :class:`AzureOpenAIResponsesWire` is the OpenAI Responses wire with its
reply-shape hooks replaced (``events`` makes :class:`AzureEvents`, ``response_reply``
pretty-prints), Azure's own failures answered from ``_variants``, and its routes checked
by ``_request``. Its stream's events, and its stream's failures, are OpenAI's: Azure's
Responses front is OpenAI's (openai/openai-node#2021).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ..openai_responses import OpenAIResponsesWire
from ..openai_responses._replies import RESPONSE_ID, Events
from ..openai_responses._variants import VARIANTS
from ._shape import azure_headers, with_filters
from ._variants import NO_CONTENT_FILTER, NO_QUOTA, RESPONSES_OWN, azure_error

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest, Reply
    from .._variants import Variant

__all__ = ["AzureEvents", "AzureOpenAIResponsesWire", "azure_openai_responses_wire"]

#: Azure's Responses table: api.openai.com's shapes, less its quota and its own failures.
VARIANTS_AZURE: Mapping[str, Tuple[Variant, ...]] = {
    **{
        key: value
        for key, value in VARIANTS.items()
        if key not in ("overloaded", "rate-limit", "quota/stream")
    },
    **RESPONSES_OWN,
}

#: The failures Azure answers itself (or with the model's body and Azure's headers).
_AZURE_FAILURES = ("auth", "rate-limit", "overloaded", "server-error")


class AzureEvents(Events):
    """The ``response.*`` events of an Azure stream: OpenAI's, with ``content_filters``."""

    def response(self, status: str, output: List[Dict[str, Any]], **fields: Any) -> Dict[str, Any]:
        return with_filters(super().response(status, output, **fields))

    def headers(self) -> Dict[str, str]:
        return azure_headers()


class AzureOpenAIResponsesWire(OpenAIResponsesWire):
    """Azure OpenAI's Responses API, whole and streamed."""

    name = "azure-openai-responses"
    title = "Azure OpenAI Responses"
    variants_table = VARIANTS_AZURE
    unsupported = {"quota": NO_QUOTA, "content-filter": NO_CONTENT_FILTER}

    def events(
        self, model: str, response_id: str = RESPONSE_ID, tools: Optional[List[Any]] = None
    ) -> AzureEvents:
        return AzureEvents(model, response_id, tools)

    def response_reply(self, body: Dict[str, Any]) -> JsonReply:
        import json

        from ...provider.replies import JsonReply

        # Azure pretty-prints a whole response (crewAI's TestAzureResponsesCall cassette).
        return JsonReply(json.dumps(with_filters(body), indent=2).encode("ascii"), headers=azure_headers())

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        import dataclasses

        from ...provider.replies import JsonReply

        if scenario in self.unsupported:
            return None
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in _AZURE_FAILURES:
            return azure_error(scenario, variant)
        if scenario == "stream-error" and not self.wants_stream(request):
            return azure_error("overloaded")  # a whole reply cannot fail halfway
        reply = super().reply(scenario, mode, request, variant)
        if scenario == "context-overflow" and isinstance(reply, JsonReply):
            # The model's 400 body, under Azure's headers as every Azure reply is.
            return dataclasses.replace(reply, headers=azure_headers())
        return reply

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_responses

        return check_responses(request, model)


azure_openai_responses_wire = AzureOpenAIResponsesWire()
