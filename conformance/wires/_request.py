"""The request checks more than one wire makes: method, path, body and model, the question,
and ``get_weather`` in OpenAI's function shape.

Each returns problems, one sentence each saying what was expected and what came, for a
wire's :meth:`~conformance.wires.Wire.check_request` to add its provider's own to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from ..fixture import CONFORMANCE_FIXTURE

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest

__all__ = [
    "check_function_tool",
    "check_json_post",
    "check_question",
    "fixture_tool_schema",
    "json_object",
    "text_of",
]


def check_json_post(request: RecordedRequest, model: str, path: str) -> Tuple[List[str], Dict[str, Any]]:
    """What every wire whose call is a JSON POST checks first: method, path, body, model.

    Returns the problems found so far and the body (``{}`` where it is not a JSON
    object, and then the model is not looked at).
    """
    problems: List[str] = []
    if request.method != "POST":
        problems.append(f"expected POST, got {request.method}")
    if not request.path.endswith(path):
        problems.append(f"expected a path ending in {path}, got {request.path}")
    body = json_object(request, problems)
    if body and body.get("model") != model:
        problems.append(f"expected model {model!r}, got {body.get('model')!r}")
    return problems, body


def json_object(request: RecordedRequest, problems: List[str]) -> Dict[str, Any]:
    """The request body as a JSON object, or ``{}`` after noting why it is not one."""
    body = request.json
    if isinstance(body, dict):
        return body
    if not request.body:
        problems.append("expected a JSON body, got an empty body")
    else:
        problems.append(f"expected a JSON object body, got {request.body[:80]!r}")
    return {}


def fixture_tool_schema() -> Mapping[str, Any]:
    """The ``get_weather`` parameters schema every wire expects to see sent."""
    return CONFORMANCE_FIXTURE.tool_parameters


# -- request checks more than one wire makes ------------------------------------------


def text_of(content: Any, part_types: Collection[str] = ("text",)) -> Optional[str]:
    """A message's text: the string itself, or its text parts joined.

    ``None`` where it is neither, or where a text part's ``text`` is not a string.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") in part_types]
        strings = [t for t in texts if isinstance(t, str)]
        if strings and len(strings) == len(texts):
            return "".join(strings)
    return None


def check_question(messages: Sequence[Any], text: Callable[[Any], Optional[str]]) -> List[str]:
    """The problem, if any, with the fixture's question: no ``user`` message whose text asks it."""
    question = CONFORMANCE_FIXTURE.question
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if any(text(m.get("content")) == question for m in users):
        return []
    got = [text(m.get("content")) for m in users]
    return [f"expected a user message {question!r}, got user messages {got!r}"]


def check_function_tool(tools: Any, normal: Callable[[Any], Any] = lambda schema: schema) -> List[str]:
    """The problem, if any, with ``get_weather`` in OpenAI's ``{"type": "function", "function": ...}`` shape.

    ``normal`` rewrites the parameters sent before they are compared, for a client
    that spells the same schema differently.
    """
    if not isinstance(tools, list):
        return [f"expected tools to list the get_weather function, got {tools!r}"]
    functions: List[Dict[str, Any]] = [
        t["function"]
        for t in tools
        if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict)
    ]
    named = [f for f in functions if f.get("name") == CONFORMANCE_FIXTURE.tool_name]
    if not named:
        names = [f.get("name") for f in functions]
        return [
            'expected a tool {"type": "function", "function": {"name": "get_weather", ...}}, '
            f"got function names {names!r}"
        ]
    from ._schema import schema_difference

    parameters = named[0].get("parameters")
    expected = dict(fixture_tool_schema())
    difference = schema_difference(expected, normal(parameters))
    if difference:
        return [f"expected get_weather parameters {expected!r}, got {parameters!r} ({difference})"]
    return []
