"""What a Chat v2 request must carry: ``Authorization: Bearer``, ``messages`` with the question,
and ``get_weather`` in the function shape v2 shares with OpenAI.

Reference: https://docs.cohere.com/reference/chat and
https://docs.cohere.com/v2/docs/migrating-v1-to-v2 (v2 took ``messages`` and JSON-schema
tools where v1 had ``message``, ``chat_history`` and ``parameter_definitions``). Each
problem is one sentence saying what was expected and what came.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Mapping

from .._request import check_function_tool, check_json_post, check_question, text_of

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest

__all__ = ["check_request"]

#: The v1 Chat fields that v2 replaced with ``messages`` (the migration guide).
_V1_FIELDS = ("message", "chat_history", "preamble")


def check_request(request: RecordedRequest, model: str) -> List[str]:
    """Problems with the generation request: method, path, model, key, messages, question, tool."""
    problems, body = check_json_post(request, model, "/v2/chat")
    problems.extend(_check_key(request.headers))
    if not body:
        return problems
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        v1 = [name for name in _V1_FIELDS if name in body]
        hint = f" (got v1's {', '.join(v1)}: POST /v2/chat takes the conversation as messages)" if v1 else ""
        problems.append(f"expected messages, a non-empty list, got {messages!r}{hint}")
    else:
        problems.extend(check_question(messages, text_of))
    tools = body.get("tools")
    found = check_function_tool(tools)
    if (
        found
        and isinstance(tools, list)
        and any(isinstance(t, dict) and "parameter_definitions" in t for t in tools)
    ):
        found = [f"{found[0]} (v1's parameter_definitions: v2 takes a JSON schema as function.parameters)"]
    problems.extend(found)
    return problems


def _check_key(headers: Mapping[str, Any]) -> List[str]:
    authorization = str(headers.get("authorization", ""))
    if authorization.lower().startswith("bearer ") and authorization[7:].strip():
        return []
    return [f"expected an Authorization: Bearer <key> header, Cohere's only auth, got {authorization!r}"]
