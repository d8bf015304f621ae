"""What a ``generateContent`` request is: its route (the API version, the model in the
path, the method), and what it must carry (the API key, ``?alt=sse`` on a stream, the
question in ``contents``, ``get_weather`` as a function declaration).

Each problem is one sentence saying what was expected and what came.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._request import fixture_tool_schema, json_object

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest

__all__ = ["GENERATE_PATH", "MODEL_PATH", "check_contents", "check_key", "check_request", "check_tools"]

#: ``/{version}/models/{model}:{method}``, after whatever base path a gateway adds.
GENERATE_PATH = re.compile(
    r"/(?P<version>v1|v1beta)/models/(?P<model>[^/:]+):"
    r"(?P<method>generateContent|streamGenerateContent)$"
)
MODEL_PATH = re.compile(r"/(?P<version>v1|v1beta)/models/(?P<model>[^/:]+)(?::countTokens)?$")


def check_request(request: RecordedRequest, model: str) -> List[str]:
    """Problems with the generation request: method, route, model, the key, ``alt=sse``, question, tool."""
    problems: List[str] = []
    if request.method != "POST":
        problems.append(f"expected POST, got {request.method}")
    found = GENERATE_PATH.search(request.path)
    if found is None:
        problems.append(
            "expected a path ending in /v1beta/models/{model}:generateContent or "
            f":streamGenerateContent (or /v1/...), got {request.path}"
        )
    else:
        if found.group("model") != model:
            problems.append(f"expected model {model!r} in the path, got {found.group('model')!r}")
        if found.group("method") == "streamGenerateContent":
            if request.params.get("alt") != "sse":
                problems.append(
                    "expected ?alt=sse on :streamGenerateContent (without it Gemini streams "
                    f"one JSON array, not server-sent events), got query {request.query!r}"
                )
    problems.extend(check_key(request))
    body = json_object(request, problems)
    if not body:
        return problems
    problems.extend(check_contents(body.get("contents")))
    problems.extend(check_tools(body.get("tools")))
    return problems


def check_key(request: RecordedRequest) -> List[str]:
    """The key: ``x-goog-api-key``, ``?key=``, or an OAuth token as ``Authorization: Bearer``."""
    if request.headers.get("x-goog-api-key") or request.params.get("key"):
        return []
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return []
    return [
        "expected the API key in the x-goog-api-key header or the ?key= query parameter, got "
        "neither (Gemini answers 403 PERMISSION_DENIED without one)"
    ]


def check_contents(contents: Any) -> List[str]:
    """The ``contents``: the question in a user content, and only the roles ``user`` and ``model``."""
    if not isinstance(contents, list) or not contents:
        return [f"expected contents to be a non-empty list, got {contents!r}"]
    problems = []
    roles = [c.get("role") for c in contents if isinstance(c, dict)]
    bad = [r for r in roles if r not in (None, "user", "model")]
    if bad:
        problems.append(
            f"expected content roles user or model (the system prompt goes in systemInstruction), got {bad!r}"
        )
    texts = []
    for content in contents:
        if isinstance(content, dict) and content.get("role") in (None, "user"):
            parts = content.get("parts")
            if isinstance(parts, list):
                texts.append(
                    "".join(
                        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
                    )
                )
    if FX.question not in texts:
        problems.append(f"expected a user content with the text {FX.question!r}, got {texts!r}")
    return problems


def check_tools(tools: Any) -> List[str]:
    """The ``tools``: ``get_weather`` declared with the fixture's parameters."""
    from .._schema import schema_difference

    if not isinstance(tools, list):
        return [
            'expected tools to be [{"functionDeclarations": [{"name": "get_weather", ...}]}], '
            f"got {tools!r}"
        ]
    declarations: List[Dict[str, Any]] = []
    for tool in tools:
        if isinstance(tool, dict):
            found = tool.get("functionDeclarations", tool.get("function_declarations"))
            if isinstance(found, list):
                declarations.extend(d for d in found if isinstance(d, dict))
    named = [d for d in declarations if d.get("name") == FX.tool_name]
    if not named:
        names = [d.get("name") for d in declarations]
        return [
            'expected a tool {"functionDeclarations": [{"name": "get_weather", ...}]}, got '
            f"function declaration names {names!r}"
        ]
    declaration = named[0]
    for key in ("parametersJsonSchema", "parameters_json_schema", "parameters"):
        if key in declaration:
            schema = declaration[key]
            break
    else:
        return [
            "expected get_weather to declare its parameters (parameters or "
            f"parametersJsonSchema), got keys {sorted(declaration)!r}"
        ]
    expected = dict(fixture_tool_schema())
    difference = schema_difference(expected, schema)
    if difference:
        return [f"expected get_weather parameters {expected!r}, got {schema!r} ({difference})"]
    return []
