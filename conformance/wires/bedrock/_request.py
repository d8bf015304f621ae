"""What a Converse request is: its route (the operation, the model id percent-encoded in
the path), and what it must carry (an ``Authorization``, the question, the ``system``
blocks, ``get_weather`` as a ``toolSpec``).

Each problem is one sentence saying what was expected and what came.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, List, Optional

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._request import fixture_tool_schema, json_object

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest

__all__ = ["blocks_text", "check_request", "match_route"]

#: A model id segment with every reserved character percent-encoded.
_ENCODED_SEGMENT = re.compile(r"(?:[A-Za-z0-9._~-]|%[0-9A-Fa-f]{2})+")
_ROUTE = re.compile(r"/model/(?P<model>[^/]+)/(?P<operation>converse|converse-stream)\Z")


def match_route(path: str) -> Optional[re.Match[str]]:
    """The ``/model/{modelId}/converse`` or ``/converse-stream`` route of ``path``, or ``None``."""
    # Matched on the raw path: the model id's own %2F must not split the route.
    return _ROUTE.search(path)


def check_request(request: RecordedRequest, model: str) -> List[str]:
    """Problems with the generation request: method, route, model, authorization, question, system, tool."""
    problems: List[str] = []
    if request.method != "POST":
        problems.append(f"expected POST, got {request.method}")
    route = match_route(request.path)
    if route is None:
        problems.append(
            f"expected a path ending in /model/{{modelId}}/converse or /converse-stream, got {request.path}"
        )
    else:
        problems.extend(_check_model(route.group("model"), model))
    if "authorization" not in request.headers:
        problems.append("expected an Authorization header (SigV4 or a Bedrock API key as Bearer), got none")
    body = json_object(request, problems)
    if not body:
        return problems
    problems.extend(_check_messages(body.get("messages")))
    problems.extend(_check_system(body.get("system")))
    problems.extend(_check_tools(body.get("toolConfig")))
    return problems


def _check_model(segment: str, model: str) -> List[str]:
    from urllib.parse import unquote  # per check, not per import: it costs a test module milliseconds

    if unquote(segment) != model:
        return [f"expected model {model!r} in the path, got {unquote(segment)!r}"]
    if not _ENCODED_SEGMENT.fullmatch(segment):
        return [f"expected the model id percent-encoded in the path (e.g. ':' as %3A), got /model/{segment}/"]
    return []


def blocks_text(content: Any) -> Optional[str]:
    """The text of a list of ``{"text": ...}`` blocks, joined; ``None`` where it is not one."""
    if not isinstance(content, list):
        return None
    texts = [block.get("text") for block in content if isinstance(block, dict) and "text" in block]
    if not texts or not all(isinstance(t, str) for t in texts):
        return None
    return "".join(str(t) for t in texts)


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    odd = [r for r in roles if r not in ("user", "assistant")]
    if odd:
        return [
            "expected only user and assistant roles in messages (the system prompt goes in the "
            f"top-level system list), got roles {roles!r}"
        ]
    users = [m for m in messages if m.get("role") == "user"]
    if not any(blocks_text(m.get("content")) == FX.question for m in users):
        got = [m.get("content") for m in users]
        return [
            f'expected a user message with content [{{"text": {FX.question!r}}}], got user contents {got!r}'
        ]
    return []


def _check_system(system: Any) -> List[str]:
    if blocks_text(system) != FX.system:
        return [f'expected system [{{"text": {FX.system!r}}}], got {system!r}']
    return []


def _check_tools(tool_config: Any) -> List[str]:
    from .._schema import schema_difference

    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    if not isinstance(tools, list):
        return [f"expected toolConfig.tools to list the get_weather toolSpec, got toolConfig={tool_config!r}"]
    specs = [t["toolSpec"] for t in tools if isinstance(t, dict) and isinstance(t.get("toolSpec"), dict)]
    named = [s for s in specs if s.get("name") == FX.tool_name]
    if not named:
        names = [s.get("name") for s in specs]
        return [
            f'expected a tool {{"toolSpec": {{"name": "get_weather", ...}}}}, got toolSpec names {names!r}'
        ]
    schema = named[0].get("inputSchema")
    expected = {"json": dict(fixture_tool_schema())}
    if not isinstance(schema, dict) or set(schema) != {"json"}:
        return [f"expected get_weather inputSchema {expected!r}, got {schema!r}"]
    difference = schema_difference(expected["json"], schema["json"])
    if difference:
        return [f"expected get_weather inputSchema {expected!r}, got {schema!r} ({difference})"]
    return []
