"""Reading a tool result back from a wire that sends results as text and an error flag.

Strategy: :class:`~conformance.ToolResult` sends a structured failure as the JSON text
``{"error": {"code", "message", "retryable", "details"}}`` (:attr:`ToolResult.text`).
A wire whose provider marks a failed result with a flag (Anthropic ``is_error``,
Bedrock ``status: "error"``) reads the flag as the :class:`~conformance.ToolError`; the
text under the flag becomes the error's fields when it is that JSON, and the error's
message otherwise. Without the flag, JSON that looks like an error stays content: the
provider only knows what the flag says.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..contract import ToolError, ToolResult

__all__ = ["flagged_result"]


def _structured(text: str) -> Optional[ToolError]:
    """The :class:`ToolError` ``text`` spells in :attr:`ToolResult.text`'s form, else ``None``."""
    import json

    try:
        data: Any = json.loads(text)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) and len(data) == 1 else None
    if not isinstance(error, dict):
        return None
    code, message = error.get("code"), error.get("message")
    retryable, details = error.get("retryable", False), error.get("details", {})
    if not (isinstance(code, str) and isinstance(message, str) and isinstance(retryable, bool)):
        return None
    if not isinstance(details, Mapping):
        return None
    return ToolError(code, message, retryable, dict(details))


def flagged_result(call_id: str, name: str, text: str, is_error: bool) -> ToolResult:
    """The result a wire read: ``text`` as content, or as the error when ``is_error`` is set."""
    if not is_error:
        return ToolResult(call_id, name, text)
    error = _structured(text)
    if error is not None:
        return ToolResult(call_id, name, "", error)
    return ToolResult(call_id, name, text, ToolError("tool_error", text))
