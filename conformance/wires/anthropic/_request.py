"""What a Messages request must carry: the version and key headers, ``max_tokens``, the
question and ``get_weather`` as Anthropic spells a tool (``input_schema``).

Each problem is one sentence saying what was expected and what came.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Mapping

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._request import check_json_post, check_question, fixture_tool_schema, text_of

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest

__all__ = ["check_body", "check_request"]


def check_request(request: RecordedRequest, model: str) -> List[str]:
    """Problems with the generation request: method, path, model, headers, ``max_tokens``, question, tool."""
    problems, body = check_json_post(request, model, "/v1/messages")
    problems.extend(_check_headers(request.headers))
    if not body:
        return problems
    return problems + check_body(body)


def check_body(body: Mapping[str, Any]) -> List[str]:
    """Problems with a Messages body, wherever it is served: ``max_tokens``, question, tool."""
    problems: List[str] = []
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        problems.append(f"expected max_tokens, a positive integer Anthropic requires, got {max_tokens!r}")
    problems.extend(_check_messages(body.get("messages")))
    problems.extend(_check_tools(body.get("tools")))
    return problems


def _check_headers(headers: Mapping[str, str]) -> List[str]:
    problems: List[str] = []
    if not headers.get("anthropic-version"):
        problems.append("expected an anthropic-version header (any version, e.g. 2023-06-01), got none")
    bearer = headers.get("authorization", "").lower().startswith("bearer ")
    if not headers.get("x-api-key") and not bearer:
        problems.append(
            "expected an x-api-key header or Authorization: Bearer, got neither "
            f"(authorization={headers.get('authorization')!r})"
        )
    return problems


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    problems: List[str] = []
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    if "system" in roles:
        problems.append(
            'expected the system prompt in the top-level "system" field, got a message with '
            'role "system" (Anthropic rejects it with a 400)'
        )
    problems.extend(check_question(messages, text_of))
    return problems


def _check_tools(tools: Any) -> List[str]:
    from .._schema import schema_difference

    if not isinstance(tools, list):
        return [f"expected tools to list get_weather, got {tools!r}"]
    named = [t for t in tools if isinstance(t, dict) and t.get("name") == FX.tool_name]
    if not named:
        names = [t.get("name") if isinstance(t, dict) else t for t in tools]
        return [
            f'expected a tool {{"name": "get_weather", "input_schema": {{...}}}}, got tool names {names!r}'
        ]
    schema = named[0].get("input_schema")
    difference = schema_difference(fixture_tool_schema(), schema)
    if difference:
        hint = " (Anthropic names it input_schema, not parameters)" if schema is None else f" ({difference})"
        return [f"expected get_weather input_schema {dict(fixture_tool_schema())!r}, got {schema!r}{hint}"]
    return []
