"""What an ``/api/chat`` request must carry: the question (Ollama's content is one string)
and ``get_weather`` as a function tool, unset schema fields sent as null allowed.

Each problem is one sentence saying what was expected and what came.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

from .._request import check_function_tool, check_json_post, check_question

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest

__all__ = ["check_request"]


def check_request(request: RecordedRequest, model: str) -> List[str]:
    """Problems with the generation request: method, path, model, question, tool."""
    problems, body = check_json_post(request, model, "/api/chat")
    if not body:
        return problems
    problems.extend(_check_messages(body.get("messages")))
    problems.extend(check_function_tool(body.get("tools"), _without_none))
    return problems


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    # Ollama's content is a string, never a list of parts.
    return check_question(messages, lambda content: content)


def _without_none(value: Any) -> Any:
    # ollama-python's Tool model sends unset schema fields as null (e.g. "items": null).
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value
