"""A turn the API paused: a text block, then a server tool's call left without its result.

Reference: https://platform.claude.com/docs/en/agents-and-tools/tool-use/server-tools
(the server-side loop and ``pause_turn``). A request that offers a server tool (web
search) lets the API run it in a loop of its own; a long loop stops with
``stop_reason: "pause_turn"``, the last ``server_tool_use`` block not yet answered,
and the client may send the turn back as it came to let it go on. The shape follows
pydantic-ai's recordings ``tests/models/cassettes/test_anthropic/``
``test_pause_turn_web_search_vcr.yaml`` and ``…_streaming_vcr.yaml`` (claude-sonnet-4-5):
``stop_details: null`` beside the stop reason in ``message_delta``, and the server
tool's count in the usage.

A backend reports the text with ``finish_reason`` ``"stop"``: the turn ended with
no call for the caller to run (the ``server_tool_use`` block is the API's own, and
never a tool call), and nothing was cut by the token limit.
"""

from __future__ import annotations

import json
from typing import Any, Dict

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import split_text
from ._replies import INFERENCE_GEO_NOT_AVAILABLE, Events, message, server_tool_use_block, text_block

__all__ = ["SEARCH", "pause_turn_events", "pause_turn_message"]

#: What the paused web search was asked.
SEARCH = {"query": "Paris weather today"}


def _server_tool_usage(streamed: bool) -> Dict[str, Any]:
    # The whole message counts the searches run; message_delta counts fetches too.
    return {"web_search_requests": 1, "web_fetch_requests": 0} if streamed else {"web_search_requests": 1}


def pause_turn_message(model: str) -> Dict[str, Any]:
    """The whole ``message``: the text, then the unanswered ``server_tool_use`` block."""
    body = message(model, [text_block(FX.text), server_tool_use_block(SEARCH)], "pause_turn")
    # claude-sonnet-4-5, as the captures' model, says where it ran this way.
    body["usage"]["inference_geo"] = INFERENCE_GEO_NOT_AVAILABLE
    body["usage"]["server_tool_use"] = _server_tool_usage(False)
    return body


def pause_turn_events(out: Events) -> None:
    """The stream after ``message_start``: the text block, the server's call and its input, the pause."""
    out.text(FX.text)
    out.content_block_start(server_tool_use_block({}))
    # As a client tool_use block does, the input opens with an empty fragment.
    for piece in ["", *split_text(json.dumps(SEARCH), 3)]:
        fragment = {"type": "input_json_delta", "partial_json": piece}
        out.emit("content_block_delta", index=out.index, delta=fragment)
    out.content_block_stop()
    usage = {
        "input_tokens": FX.usage.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": FX.usage.output_tokens,
        "server_tool_use": _server_tool_usage(True),
    }
    delta: Dict[str, Any] = {"stop_reason": "pause_turn", "stop_sequence": None, "stop_details": None}
    out.emit("message_delta", delta=delta, usage=usage)
    out.emit("message_stop")
