"""What a Responses request must carry: the question in ``input``, and ``get_weather`` as
Responses spells a function tool (name and parameters on the tool itself).

Each problem is one sentence saying what was expected and what came.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._request import check_json_post, fixture_tool_schema, text_of

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest

__all__ = ["check_body", "check_request"]


def check_request(request: RecordedRequest, model: str) -> List[str]:
    """Problems with the generation request: method, path, model, question, tool."""
    problems, body = check_json_post(request, model, "/v1/responses")
    if not body:
        return problems
    return problems + check_body(body)


def check_body(body: Dict[str, Any]) -> List[str]:
    """Problems with a Responses body: the question in ``input``, the tool."""
    return _check_input(body.get("input")) + _check_tools(body.get("tools"))


#: The content parts whose text a user input message is read from.
RESPONSES_TEXT_PARTS = ("input_text", "text")


def _check_input(input_: Any) -> List[str]:
    if input_ == FX.question:
        return []
    if not isinstance(input_, list) or not input_:
        return [f"expected input to be the question or a list of input items, got {input_!r}"]
    users = [
        item
        for item in input_
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message"
    ]
    if not any(text_of(item.get("content"), RESPONSES_TEXT_PARTS) == FX.question for item in users):
        got = [text_of(item.get("content"), RESPONSES_TEXT_PARTS) for item in users]
        return [f"expected a user input message {FX.question!r}, got user messages {got!r}"]
    return []


def _check_tools(tools: Any) -> List[str]:
    from .._schema import schema_difference

    if not isinstance(tools, list):
        return [f"expected tools to list the get_weather function, got {tools!r}"]
    functions = [t for t in tools if isinstance(t, dict) and t.get("type") == "function"]
    named = [f for f in functions if f.get("name") == FX.tool_name]
    if not named:
        nested = [f for f in functions if isinstance(f.get("function"), dict)]
        hint = (
            " (that is the Chat Completions shape; Responses puts name and parameters on the tool itself)"
            if nested
            else ""
        )
        names = [f.get("name") for f in functions]
        return [
            'expected a tool {"type": "function", "name": "get_weather", "parameters": {...}}, '
            f"got function names {names!r}{hint}"
        ]
    parameters = named[0].get("parameters")
    difference = schema_difference(fixture_tool_schema(), parameters)
    if difference:
        expected = dict(fixture_tool_schema())
        return [f"expected get_weather parameters {expected!r}, got {parameters!r} ({difference})"]
    return []
