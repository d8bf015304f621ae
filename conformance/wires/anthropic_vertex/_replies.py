"""Claude on Vertex AI's replies: Anthropic's ``message`` and SSE events, with Vertex's ids and headers.

Reference: https://docs.anthropic.com/en/api/claude-on-vertex-ai and the sources named
below. A whole reply is Claude's ``message`` (id ``msg_vrtx_01…``, calls
``toolu_vrtx_01…``) with Google's front-end headers and a ``request-id: req_vrtx_…``
(a Quarkus LangChain4j REST log of a ``rawPredict`` call, 2026-03). A stream is
Anthropic's SSE; in the one measured Vertex stream (go-steer/mast
``usage_detail_test.go``, 2026-09) the message starts with ``id``, ``message_start``'s
usage has no ``service_tier``, ``cache_creation`` or ``inference_geo``, neither event
says ``stop_details``, the JSON is compact, and ``message_delta`` counts the output
only; and Vertex may add an event of its own,
``vertex_event``, with the usage and its tiers (vercel/ai#11309). A failure after the 200
is ``event: error`` whose error has ``details: null`` and no request id
(anthropics/anthropic-sdk-typescript#346).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._google import response_headers as google_headers
from .._ids import fresh_id
from ..anthropic._hosted import HostedEvents, host_id
from ..anthropic._replies import BASE62
from ..anthropic._replies import MESSAGE_ID as ANTHROPIC_MESSAGE_ID
from ..anthropic._replies import TOOL_USE_ID as ANTHROPIC_TOOL_USE_ID

__all__ = [
    "INFIX",
    "MESSAGE_ID",
    "TOOL_USE_ID",
    "VERTEX_EVENT",
    "VertexEvents",
    "request_id",
    "response_headers",
    "vertex_event_usage",
]

#: Vertex's ids put ``vrtx_`` after the type: ``msg_vrtx_01…``, ``toolu_vrtx_01…``.
INFIX = "vrtx_"
MESSAGE_ID = host_id(ANTHROPIC_MESSAGE_ID, INFIX)
TOOL_USE_ID = host_id(ANTHROPIC_TOOL_USE_ID, INFIX)
#: The variant whose stream carries Vertex's own event.
VERTEX_EVENT = "vertex-event"


def request_id() -> str:
    """A fresh ``req_vrtx_011C…`` id: the ``request-id`` header, and an error body's ``request_id``."""
    return fresh_id("req_vrtx_011C", 20, BASE62)


def response_headers(rid: Optional[str] = None) -> Dict[str, str]:
    """The headers a reply from Claude carries: Google's front end's, the request id, the backend."""
    return google_headers(
        {"request-id": rid or request_id(), "x-vertex-ai-internal-prediction-backend": "harpoon"}
    )


def vertex_event_usage() -> Dict[str, Any]:
    """The ``usage`` of a ``vertex_event``: message_start's counts, then the same again per pricing tier."""
    usage: Dict[str, Any] = {
        "input_tokens": FX.usage.input_tokens,
        "output_tokens": 1,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
        "web_search_requests": None,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    }
    return {**usage, "tiers": {"0-to-200000": dict(usage)}}


class VertexEvents(HostedEvents):
    """Builds the SSE events of one ``streamRawPredict`` reply, as Vertex sends them."""

    infix = INFIX
    #: The measured stream's message_start counts the input and cache tokens and nothing else,
    #: and the whole message has no service tier either.
    usage_absent = frozenset({"cache_creation", "service_tier", "inference_geo"})
    #: Its message_start and message_delta say no stop_details.
    null_stop_details = False

    def __init__(self, model: str, message_id: str = MESSAGE_ID, variant: str = "") -> None:
        super().__init__(model, message_id, variant)
        self.request_id = request_id()

    def emit(self, type_: str, **fields: Any) -> None:
        super().emit(type_, **fields)
        if type_ == "message_start" and self.variant == VERTEX_EVENT:
            super().emit("vertex_event", usage=vertex_event_usage())

    def message_delta(
        self, stop_reason: str, input_tokens: bool = True, stop_details: Optional[Dict[str, Any]] = None
    ) -> None:
        # The measured Vertex stream counts only the output in message_delta.
        super().message_delta(stop_reason, input_tokens=False, stop_details=stop_details)

    # A failure after the 200 is Anthropic's api_error as it is: details null, no request id
    # (anthropics/anthropic-sdk-typescript#346 quotes it from Vertex).

    def headers(self) -> Dict[str, str]:
        return response_headers(self.request_id)
