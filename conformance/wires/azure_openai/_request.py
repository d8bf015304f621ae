"""What a request to Azure OpenAI must carry: Azure's path and key, then OpenAI's body.

Azure takes a Chat request on its deployment path,
``/openai/deployments/{deployment}/chat/completions?api-version=...`` (the deployment is
the target's model, and the body's ``model`` is not read), or on its v1 path,
``/openai/v1/chat/completions``, where the body names the deployment in ``model``. A
Responses request goes to ``/openai/responses?api-version=...`` (what ``AzureOpenAI``
sends) or ``/openai/v1/responses``. The key is an ``api-key`` header, or an Entra ID
token as ``Authorization: Bearer``. The body is checked as OpenAI's.

Each problem is one sentence saying what was expected and what came.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Dict, List, Optional
from urllib.parse import parse_qs, unquote

from .._request import json_object

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest

__all__ = ["check_chat", "check_responses"]

_DEPLOYMENT = re.compile(r"/openai/deployments/([^/]+)/chat/completions$")


def _api_version(request: RecordedRequest) -> List[str]:
    versions = parse_qs(request.query or "").get("api-version") or [""]
    if versions[0]:
        return []
    return [
        "expected the query api-version=... on Azure's path (AzureOpenAI(api_version=...) adds it), "
        f"got query {request.query!r}"
    ]


def _key(request: RecordedRequest) -> List[str]:
    if request.headers.get("api-key"):
        return []
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return []  # an Entra ID token, or a key on the v1 path
    return [
        "expected the key in an api-key header (or an Entra ID token as Authorization: Bearer), got neither"
    ]


def _model(body: Dict[str, object], model: str) -> List[str]:
    if body.get("model") == model:
        return []
    got = body.get("model")
    return [f"expected model {model!r} (the deployment, which the path does not name), got {got!r}"]


def _check(
    request: RecordedRequest,
    model: str,
    routes: str,
    route: Callable[[str], Optional[List[str]]],
    body_problems: Callable[[Dict[str, object]], List[str]],
) -> List[str]:
    """Method, path (``route`` gives its problems, ``None`` for a path Azure has not), key, body."""
    problems: List[str] = []
    if request.method != "POST":
        problems.append(f"expected POST, got {request.method}")
    path = request.path
    found = route(path)
    if found is None:
        hint = " (that is api.openai.com's path; Azure's is under /openai)" if "/openai/" not in path else ""
        problems.append(f"expected {routes}, got {path}{hint}")
    else:
        problems.extend(found)
    problems.extend(_key(request))
    body = json_object(request, problems)
    if body:
        if _DEPLOYMENT.search(path) is None:
            problems.extend(_model(body, model))  # the path names no deployment: the body does
        problems.extend(body_problems(body))
    return problems


def check_chat(request: RecordedRequest, model: str) -> List[str]:
    """Problems with an Azure Chat Completions request: path, api-version, key, then OpenAI's body."""
    from ..openai_chat._request import check_body

    def route(path: str) -> Optional[List[str]]:
        match = _DEPLOYMENT.search(path)
        if match is not None:
            deployment = unquote(match.group(1))
            problems = _api_version(request)
            if deployment != model:
                problems.append(f"expected the deployment {model!r} in the path, got {deployment!r}")
            return problems
        return [] if path.endswith("/openai/v1/chat/completions") else None

    routes = (
        f"a path ending in /openai/deployments/{model}/chat/completions (with api-version) "
        "or /openai/v1/chat/completions"
    )
    return _check(request, model, routes, route, check_body)


def check_responses(request: RecordedRequest, model: str) -> List[str]:
    """Problems with an Azure Responses request: path, api-version, key, then OpenAI's body."""
    from ..openai_responses._request import check_body

    def route(path: str) -> Optional[List[str]]:
        if path.endswith("/openai/v1/responses"):
            return []
        return _api_version(request) if path.endswith("/openai/responses") else None

    routes = "a path ending in /openai/responses (with api-version) or /openai/v1/responses"
    return _check(request, model, routes, route, check_body)
