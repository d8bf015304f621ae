"""What the backends over Google's front end read the same way: its ``google.rpc.Status`` errors.

The Gemini API and Vertex AI (Gemini, and Claude through ``rawPredict``) fail through
the same front end: ``{"error": {"code", "message", "status", "details"}}``, and, to a
method that streams, that object inside a JSON array. The status name says the kind.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = ["RPC_KINDS", "rpc_error"]

#: ``google.rpc`` status names -> the contract's kind, before a backend's finer checks.
RPC_KINDS: Mapping[str, str] = {
    "UNAUTHENTICATED": "auth",
    "PERMISSION_DENIED": "auth",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server_error",
    "DEADLINE_EXCEEDED": "server_error",
}


def rpc_error(body: Any) -> Optional[Mapping[str, Any]]:
    """The ``google.rpc.Status`` of an error body, bare or the first in a JSON array; ``None`` where
    the body is neither (an error in another provider's shape)."""
    if isinstance(body, list) and body:
        body = body[0]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("status"), str):
        return error
    return None
