"""What a Vertex AI ``generateContent`` request is: its route (the API version, the project
and location or none, the model in the path, the method), and what it must carry.

Each problem is one sentence saying what was expected and what came.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, List

from .._request import json_object
from ..gemini._request import check_contents, check_tools

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest

__all__ = ["GENERATE_PATH", "MODEL_PATH", "check_request"]

_PUBLISHER = r"/(?P<version>v1|v1beta1)/(?:projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/)?"
#: ``/{version}[/projects/{p}/locations/{l}]/publishers/google/models/{model}:{method}``,
#: after whatever base path a gateway adds.
GENERATE_PATH = re.compile(
    _PUBLISHER + r"publishers/google/models/(?P<model>[^/:]+):"
    r"(?P<method>generateContent|streamGenerateContent)$"
)
MODEL_PATH = re.compile(_PUBLISHER + r"publishers/google/models/(?P<model>[^/:]+)(?::countTokens)?$")


def check_request(request: RecordedRequest, model: str) -> List[str]:
    """Problems with the generation request: method, route, model, the credential, ``alt=sse``,
    question, tool."""
    problems: List[str] = []
    if request.method != "POST":
        problems.append(f"expected POST, got {request.method}")
    found = GENERATE_PATH.search(request.path)
    if found is None:
        problems.append(
            "expected a path ending in /v1beta1/projects/{project}/locations/{location}/publishers/"
            "google/models/{model}:generateContent or :streamGenerateContent (/v1/ too; without "
            f"projects/…/locations/… in express mode), got {request.path}"
        )
    else:
        if found.group("model") != model:
            problems.append(f"expected model {model!r} in the path, got {found.group('model')!r}")
        if found.group("method") == "streamGenerateContent" and request.params.get("alt") != "sse":
            problems.append(
                "expected ?alt=sse on :streamGenerateContent (without it Vertex streams one JSON "
                f"array, not server-sent events), got query {request.query!r}"
            )
    problems.extend(_check_credential(request, express=found is not None and not found.group("project")))
    body = json_object(request, problems)
    if not body:
        return problems
    problems.extend(check_contents(body.get("contents")))
    problems.extend(check_tools(body.get("tools")))
    return problems


def _check_credential(request: RecordedRequest, express: bool) -> List[str]:
    """An OAuth token under a project; an API key (header or ``?key=``) in express mode."""
    bearer = request.headers.get("authorization", "").lower().startswith("bearer ")
    key = bool(request.headers.get("x-goog-api-key") or request.params.get("key"))
    if bearer or (express and key):
        return []
    if key:
        return [
            "expected an OAuth token (Authorization: Bearer) on a path under projects/…/locations/…, "
            "got an API key: Vertex answers 401 UNAUTHENTICATED, API keys are not supported by this "
            "API (express mode takes a key on /v1beta1/publishers/google/models/… only)"
        ]
    return [
        "expected Authorization: Bearer with an OAuth token (or, in express mode, the API key in "
        "x-goog-api-key), got neither (Vertex answers 401 UNAUTHENTICATED)"
    ]
