"""What Google's front end puts around every answer, whichever model is behind it.

Strategy: the Gemini API and Vertex AI (Gemini, and Claude through ``rawPredict``)
answer through the same front end, and it writes the same headers and, for a failure
it raises itself (a quota, a bad token), the same ``{"error": google.rpc.Status}``
body: two-space indented JSON, and, to a call whose method streams, wrapped in a JSON
array. Those are made here once.

Reference: https://cloud.google.com/apis/design/errors (``google.rpc.Status``); the
headers and the indentation as recorded in crewAI's and pydantic-ai's Gemini cassettes
and quoted in anthropics/claude-code#1378 (a Vertex 429); the array form as quoted in
cline/cline#651 and Aider-AI/aider#1912 (a ``streamRawPredict`` 429).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ._ids import http_date

__all__ = ["pretty_json", "response_headers", "rpc_status", "status_body"]


def response_headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The headers every reply carries, as Google's front end writes them."""
    headers = {
        "date": http_date(),
        "vary": "Origin, X-Origin, Referer",
        "server": "scaffolding on HTTPServer2",
        "server-timing": "gfet4t7; dur=412",
        "x-content-type-options": "nosniff",
    }
    headers.update(extra or {})
    return headers


def pretty_json(body: Any) -> bytes:
    """A whole JSON body as Google's front end writes it: indented by two, ending in a newline.

    The newline is the real bodies' (85 of 85 in simonw/llm-gemini's cassettes, and the 429
    of crewAI's ``TestAgentMultimodalGemini.test_video_file[…]``); SSE events stay on one line.
    """
    import json

    return json.dumps(body, ensure_ascii=False, indent=2).encode("utf-8") + b"\n"


def rpc_status(
    code: int, status: str, message: str, details: Optional[List[Dict[str, Any]]] = None
) -> Dict[str, Any]:
    """``{"error": google.rpc.Status}``: the HTTP code, the RPC status name, the message, any details."""
    error: Dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = details
    return {"error": error}


def status_body(error: Mapping[str, Any], listed: bool = False) -> bytes:
    """The bytes of an error body; ``listed`` wraps it in the JSON array a streaming method answers with."""
    whole = pretty_json(dict(error))
    # The array form puts the object's opening brace right after "[" and the closing
    # bracket on a line of its own, after the object's newline.
    return b"[" + whole + b"]" if listed else whole
