"""The Claude on Vertex AI wire: Anthropic's wire, served as Vertex serves it.

The replies are Anthropic's, built by ``wires/anthropic`` with Vertex's ids and headers
(``_replies``); the failures are Google's or Claude's (``_variants``); the route and the
credentials are ``_request``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from ..anthropic._hosted import HostedWire
from ._replies import TOOL_USE_ID, VertexEvents, request_id, response_headers
from ._request import COUNT_TOKENS, check_headers, match_route
from ._variants import ANTHROPIC_ERRORS, GOOGLE_ERRORS, LISTED, VARIANTS, overloaded_error

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest, Reply

__all__ = ["AnthropicVertexWire", "anthropic_vertex_wire"]

#: The content type of every error body Google's front end writes.
GOOGLE_JSON = "application/json; charset=UTF-8"


class AnthropicVertexWire(HostedWire):
    """Claude on Google Vertex AI: ``rawPredict`` and ``streamRawPredict``."""

    #: Anthropic's ``ping`` (its ``keepalive``) is inherited: Vertex's streams carry it too.
    name = "anthropic-vertex"
    provider = "anthropic"
    title = "Claude on Vertex AI"
    tool_call_id = TOOL_USE_ID
    events_class = VertexEvents
    variants_table = VARIANTS
    #: ``vertex-2023-10-16`` in Google's and Anthropic's docs and anthropic 0.x's
    #: ``AnthropicVertex``; anthropic 2.x sends its own API version.
    anthropic_versions = ("vertex-2023-10-16", "2026-10-21")

    def route(self, path: str) -> Optional[Tuple[str, bool]]:
        return match_route(path)

    def route_shape(self) -> str:
        return (
            "ending in /projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict "
            "or :streamRawPredict"
        )

    def check_headers(self, headers: Mapping[str, str]) -> List[str]:
        return check_headers(headers)

    def message_reply(self, body: Dict[str, Any]) -> JsonReply:
        from ...provider.replies import JsonReply

        return JsonReply(body, headers=response_headers())

    def error_reply(self, scenario: str, variant: str, stream: bool) -> Reply:
        from ...provider.replies import JsonReply
        from .._google import response_headers as google_headers
        from .._google import rpc_status, status_body

        if scenario in GOOGLE_ERRORS:
            status, rpc, message = GOOGLE_ERRORS[scenario]
            body = status_body(rpc_status(status, rpc, message), listed=stream and variant in LISTED)
            return JsonReply(body, status=status, headers=google_headers(), content_type=GOOGLE_JSON)
        status, type_, message, with_id = ANTHROPIC_ERRORS[scenario]
        if type_ == "overloaded_error":
            return JsonReply(dict(overloaded_error()), status=status, headers=response_headers())
        rid = request_id()
        error = {"type": "error", "error": {"type": type_, "message": message}, "request_id": rid}
        return JsonReply(error, status=status, headers=response_headers(rid if with_id else None))

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ...provider.replies import JsonReply
        from .._google import response_headers as google_headers
        from .._google import rpc_status, status_body

        # client.messages.count_tokens(): POST …/models/count-tokens:rawPredict
        if request.method == "POST" and f"/models/{COUNT_TOKENS}:rawPredict" in request.path:
            return JsonReply({"input_tokens": FX.usage.input_tokens}, headers=response_headers())
        message = (
            f"the {self.title} fake provider has no route for {request.method} {request.path}; "
            "only rawPredict and streamRawPredict are scripted"
        )
        body = status_body(rpc_status(404, "NOT_FOUND", message))
        return JsonReply(body, status=404, headers=google_headers(), content_type=GOOGLE_JSON)

    def history_error(self, problems: Sequence[str]) -> Reply:
        """Claude's 400 ``invalid_request_error``, passed on with a ``req_vrtx_`` request id
        (anthropics/claude-code#12429)."""
        from ...provider.replies import JsonReply
        from .._script import first_problem

        rid = request_id()
        body = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": first_problem(problems)},
            "request_id": rid,
        }
        return JsonReply(body, status=400, headers=response_headers(rid))


anthropic_vertex_wire = AnthropicVertexWire()
